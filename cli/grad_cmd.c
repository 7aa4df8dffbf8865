/*
 * `falcon grad`: the gradients of one call (docs/math.md section 12) from
 * .npy files, through falcon_backward.
 *
 * The inputs and the configuration are `falcon run`'s (cli/args.c), in the
 * library's layout: q decides the shape, [T,n] for one sequence or
 * [B,T,H,n] for a batch, and every tensor has q's leading dimensions. The
 * cotangents are dO, shaped as the reads, and optionally dS, shaped as the
 * final memory ([m,n] or [B,H,m,n]). The backward pass needs every step of
 * the call at once, so arrays are read whole (no segments).
 *
 * The gradients go into one directory, --out DIR: dq, dk, dv, dbeta, then
 * dalpha and dgain when those inputs are given, dS0, and with
 * --checkpoint-in the carried state's dprev_key, dhist_k and dhist_v, one
 * .npy each (the inputs' dtype; the state's gradients float64). The
 * directory is an output transaction (src/outputs.c): checked before
 * anything is computed, written into a temporary, swapped in whole; a
 * failure leaves what was there before.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"
#include "falcon_io.h"

enum { G_Q, G_K, G_V, G_BETA, G_ALPHA, G_GAIN, G_DO, NUM_G };
typedef enum { TAIL_NONE, TAIL_N, TAIL_M } tail_kind;
static const char *const g_names[NUM_G] = {"q", "k", "v", "beta", "alpha", "gain", "dO"};
static const tail_kind g_tails[NUM_G] = {TAIL_N, TAIL_N, TAIL_M, TAIL_NONE, TAIL_NONE, TAIL_N, TAIL_M};

/* The gradients, in the order they are written (the last one last: the
 * transaction's rule for a directory output). */
enum { D_Q, D_K, D_V, D_BETA, D_ALPHA, D_GAIN, D_S0, D_PREV, D_HK, D_HV, NUM_D };
static const char *const d_files[NUM_D] = {"dq.npy", "dk.npy", "dv.npy", "dbeta.npy", "dalpha.npy",
                                           "dgain.npy", "dS0.npy", "dprev_key.npy", "dhist_k.npy",
                                           "dhist_v.npy"};

typedef struct grad_ctx {
    cli_run_args a;
    falcon_config cfg;
    const char *paths[NUM_G];
    falcon_array in[NUM_G];
    falcon_array dS;
    int batched;
    int64_t lead[3];
    int nlead;
    int64_t B, T, H, n, m;
    falcon_state *state;
    falcon_array d[NUM_D]; /* data NULL: not written */
} grad_ctx;

static falcon_dtype run_dtype(const grad_ctx *c)
{
    return c->cfg.precision == FALCON_FP64 ? FALCON_DTYPE_F64 : FALCON_DTYPE_F32;
}

static int read_inputs(grad_ctx *c)
{
    const char *p[NUM_G] = {c->a.q, c->a.k, c->a.v, c->a.beta, c->a.alpha, c->a.gain, c->a.dO};
    memcpy(c->paths, p, sizeof p);
    for (int i = 0; i < NUM_G; i++)
        if (c->paths[i] && falcon_npy_read(c->paths[i], run_dtype(c), &c->in[i]))
            return cli_error("%s: %s", g_names[i], falcon_last_error());
    if (c->a.dS && falcon_npy_read(c->a.dS, FALCON_DTYPE_F64, &c->dS))
        return cli_error("dS: %s", falcon_last_error());
    return 0;
}

/* q's shape sets B, T, H, n; v's last dimension sets m. */
static int shapes_from_q(grad_ctx *c)
{
    const falcon_array *q = &c->in[G_Q];
    if (q->ndim != 2 && q->ndim != 4)
        return cli_error("q (%s): %d dimensions; expected [T,n] for one sequence or [B,T,H,n] for a batch",
                         c->paths[G_Q], q->ndim);
    c->batched = q->ndim == 4;
    c->nlead = q->ndim - 1;
    memcpy(c->lead, q->shape, sizeof(int64_t) * (size_t)c->nlead);
    c->B = c->batched ? q->shape[0] : 1;
    c->T = c->batched ? q->shape[1] : q->shape[0];
    c->H = c->batched ? q->shape[2] : 1;
    c->n = q->shape[q->ndim - 1];
    const falcon_array *v = &c->in[G_V];
    c->m = v->ndim == c->nlead + 1 ? v->shape[c->nlead] : -1;
    return 0;
}

/* "[4,3]" from a shape. */
static const char *fmt_shape(const int64_t *shape, int ndim, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int j = 0; j < ndim && used < size; j++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", j ? "," : "", (long long)shape[j]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

static int check_shape(const grad_ctx *c, int i)
{
    const falcon_array *a = &c->in[i];
    const tail_kind tail = g_tails[i];
    int64_t want[4];
    int nd = 0;
    for (int j = 0; j < c->nlead; j++) want[nd++] = c->lead[j];
    if (tail != TAIL_NONE) want[nd++] = tail == TAIL_N ? c->n : c->m;
    int ok = a->ndim == nd;
    for (int j = 0; ok && j < nd; j++) ok = a->shape[j] == want[j];
    if (ok) return 0;
    char w[128], got[128];
    return cli_error("%s (%s): shape %s but q and v say %s", g_names[i], c->paths[i],
                     fmt_shape(a->shape, a->ndim, got, sizeof got), fmt_shape(want, nd, w, sizeof w));
}

static int check_shapes(grad_ctx *c)
{
    if (shapes_from_q(c)) return CLI_FAIL;
    for (int i = G_K; i < NUM_G; i++)
        if (c->paths[i] && check_shape(c, i)) return CLI_FAIL;
    if (!c->a.dS) return 0;
    const int64_t want[4] = {c->B, c->H, c->m, c->n};
    const int nd = c->batched ? 4 : 2;
    int ok = c->dS.ndim == nd;
    for (int j = 0; ok && j < nd; j++) ok = c->dS.shape[j] == want[4 - nd + j];
    if (!ok)
        return cli_error("dS (%s): expected the final memory's shape %s[%lld,%lld]", c->a.dS,
                         c->batched ? "[B,H] + " : "", (long long)c->m, (long long)c->n);
    return 0;
}

/* The carried state: --checkpoint-in (its shape must be the call's), or fresh (NULL). */
static int load_state(grad_ctx *c)
{
    if (!c->a.ckpt_in) return 0;
    int64_t heads, n, m, window;
    if (falcon_checkpoint_shape(c->a.ckpt_in, &heads, &n, &m, &window))
        return cli_error("--checkpoint-in: %s", falcon_last_error());
    if (heads != c->B * c->H || n != c->n || m != c->m || window != c->cfg.window)
        return cli_error("--checkpoint-in '%s': the checkpoint has heads=%lld, n=%lld, m=%lld, window=%lld but the "
                         "call has heads=%lld (B*H), n=%lld, m=%lld, window=%lld", c->a.ckpt_in, (long long)heads,
                         (long long)n, (long long)m, (long long)window, (long long)(c->B * c->H), (long long)c->n,
                         (long long)c->m, (long long)c->cfg.window);
    if (falcon_checkpoint_load(c->a.ckpt_in, &c->state) || falcon_state_check(c->state, c->cfg.precision))
        return cli_error("--checkpoint-in '%s': %s", c->a.ckpt_in, falcon_last_error());
    return 0;
}

/* Gradient d of shape lead + tail (tail < 0: none), or of the state's
 * [B,H] + dims (state = 1; one sequence drops B and H). */
static int make_grad(grad_ctx *c, int d, int state, falcon_dtype dt, int ntail, int64_t t0, int64_t t1)
{
    falcon_array *a = &c->d[d];
    a->dtype = dt;
    a->ndim = 0;
    if (state && c->batched) a->shape[a->ndim++] = c->B, a->shape[a->ndim++] = c->H;
    if (!state)
        for (int j = 0; j < c->nlead; j++) a->shape[a->ndim++] = c->lead[j];
    if (ntail > 0) a->shape[a->ndim++] = t0;
    if (ntail > 1) a->shape[a->ndim++] = t1;
    a->count = 1;
    for (int j = 0; j < a->ndim; j++) a->count *= a->shape[j];
    a->data = calloc((size_t)a->count + 1, dt == FALCON_DTYPE_F64 ? 8 : 4);
    return a->data ? 0 : cli_error("out of memory for %s (%lld elements)", d_files[d], (long long)a->count);
}

static int make_grads(grad_ctx *c)
{
    const falcon_dtype dt = run_dtype(c), f64 = FALCON_DTYPE_F64;
    const int64_t keep = c->cfg.window - 1;
    int r = make_grad(c, D_Q, 0, dt, 1, c->n, 0) || make_grad(c, D_K, 0, dt, 1, c->n, 0) ||
            make_grad(c, D_V, 0, dt, 1, c->m, 0) || make_grad(c, D_BETA, 0, dt, 0, 0, 0) ||
            (c->a.alpha && make_grad(c, D_ALPHA, 0, dt, 0, 0, 0)) || (c->a.gain && make_grad(c, D_GAIN, 0, dt, 1, c->n, 0)) ||
            make_grad(c, D_S0, 1, f64, 2, c->m, c->n);
    if (!r && c->state)
        r = make_grad(c, D_PREV, 1, f64, 1, c->n, 0) || (keep > 0 && make_grad(c, D_HK, 1, f64, 2, keep, c->n)) ||
            (keep > 0 && make_grad(c, D_HV, 1, f64, 2, keep, c->m));
    return r ? CLI_FAIL : 0;
}

/* A failure of falcon_backward: an input's message with its file in front. */
static int backward_error(const grad_ctx *c)
{
    const falcon_error_info *e = falcon_last_error_info();
    const char *file = NULL;
    for (int i = 0; i < NUM_G; i++)
        if (c->paths[i] && !strcmp(e->input, g_names[i])) file = c->paths[i];
    if (c->a.dS && !strcmp(e->input, "dS_T")) file = c->a.dS;
    return file ? cli_error("'%s': %s", file, e->message) : cli_error("%s", e->message);
}

static int run_backward(grad_ctx *c)
{
    const falcon_inputs in = {.B = c->B, .T = c->T, .H = c->H, .n = c->n, .m = c->m,
                              .q = c->in[G_Q].data, .k = c->in[G_K].data,
                              .v = c->in[G_V].data,
                              .beta = c->in[G_BETA].data, .alpha = c->in[G_ALPHA].data, .gain = c->in[G_GAIN].data};
    const falcon_grads g = {c->d[D_Q].data, c->d[D_K].data, c->d[D_V].data, c->d[D_BETA].data,
                            c->d[D_ALPHA].data, c->d[D_GAIN].data, c->d[D_S0].data, c->d[D_PREV].data,
                            c->d[D_HK].data, c->d[D_HV].data};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (falcon_backward(&c->cfg, &in, c->state, c->in[G_DO].data, c->a.dS ? c->dS.data : NULL, &g))
        return backward_error(c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (c->a.verbose)
        printf("falcon grad: %s %s %s, backend %s, B=%lld T=%lld H=%lld n=%lld m=%lld: %.3f s\n",
               falcon_variant_name(c->cfg.variant), falcon_form_name(c->cfg.form),
               falcon_precision_name(c->cfg.precision), falcon_backend_name(falcon_backend_resolve(c->cfg.backend)),
               (long long)c->B, (long long)c->T, (long long)c->H, (long long)c->n, (long long)c->m,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return 0;
}

/* Declare the inputs and the directory, compute, write, commit. */
static int write_grads(grad_ctx *c)
{
    const char *names[NUM_D + 1];
    int count = 0, slot;
    for (int d = 0; d < NUM_D; d++)
        if (c->d[d].data) names[count++] = d_files[d];
    names[count] = NULL;
    falcon_outputs *tx = NULL;
    int r = falcon_outputs_begin(&tx) ? cli_error("%s", falcon_last_error()) : 0;
    for (int i = 0; !r && i < NUM_G; i++)
        if (c->paths[i] && falcon_outputs_input(tx, g_names[i], c->paths[i])) r = cli_error("%s", falcon_last_error());
    if (!r && c->a.dS && falcon_outputs_input(tx, "dS", c->a.dS)) r = cli_error("%s", falcon_last_error());
    if (!r && c->a.ckpt_in && falcon_outputs_input_dir(tx, "--checkpoint-in", c->a.ckpt_in))
        r = cli_error("%s", falcon_last_error());
    if (!r && falcon_outputs_dir(tx, "--out", c->a.out, names, &slot)) r = cli_error("%s", falcon_last_error());
    if (!r) r = run_backward(c);
    char path[4096];
    for (int d = 0; !r && d < NUM_D; d++) {
        if (!c->d[d].data) continue;
        snprintf(path, sizeof path, "%s/%s", falcon_outputs_temp(tx, slot), d_files[d]);
        if (falcon_npy_write(path, &c->d[d])) r = cli_error("--out: %s", falcon_last_error());
    }
    if (r) {
        falcon_outputs_abort(tx);
        return r;
    }
    return falcon_outputs_commit(tx) ? cli_error("--out: %s", falcon_last_error()) : 0;
}

static void grad_free(grad_ctx *c)
{
    for (int i = 0; i < NUM_G; i++) falcon_array_free(&c->in[i]);
    falcon_array_free(&c->dS);
    for (int d = 0; d < NUM_D; d++) falcon_array_free(&c->d[d]);
    falcon_state_free(c->state);
}

int cli_grad(int argc, char **argv)
{
    grad_ctx c;
    memset(&c, 0, sizeof c);
    if (cli_parse_args(argc, argv, CLI_CMD_GRAD, &c.a)) return CLI_FAIL;
    if (c.a.help) {
        cli_print_help(stdout, CLI_CMD_GRAD);
        return 0;
    }
    c.cfg = cli_config(&c.a);
    falcon_outputs_clean_on_signals();
    int r = read_inputs(&c);
    if (!r) r = check_shapes(&c);
    if (!r) r = load_state(&c);
    if (!r) r = make_grads(&c);
    if (!r) r = write_grads(&c);
    grad_free(&c);
    return r;
}
