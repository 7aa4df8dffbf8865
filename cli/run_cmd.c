/*
 * `falcon run`: load the .npy inputs in the run's precision, check that
 * their shapes agree with q's, run, then write the outputs.
 *
 * q decides the layout: 2 dimensions [T,n] is one sequence, 4 dimensions
 * [B,T,H,n] a batch; every other tensor must have the same leading
 * dimensions. Nothing is written unless the run succeeded; each output is
 * written atomically, and if a later one fails the earlier ones written by
 * this invocation are removed again.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"

enum { IN_Q, IN_K, IN_V, IN_BETA, IN_ALPHA, IN_GAIN, NUM_INPUTS };
typedef enum { TAIL_NONE, TAIL_N, TAIL_M } tail_kind; /* what follows the leading dims */

static const char *const input_names[NUM_INPUTS] = {"q", "k", "v", "beta", "alpha", "gain"};
static const tail_kind input_tails[NUM_INPUTS] = {TAIL_N, TAIL_N, TAIL_M, TAIL_NONE, TAIL_NONE, TAIL_N};

/* The sizes q sets: lead = [T] or [B,T,H]. */
typedef struct dims {
    int batched;
    int nlead;
    int64_t lead[3];
    int64_t B, T, H, n, m;
} dims;

typedef struct run_ctx {
    cli_run_args args;
    falcon_config cfg;
    const char *paths[NUM_INPUTS];
    falcon_array in[NUM_INPUTS];
    dims d;
    falcon_state *state;
    void *out;
} run_ctx;

static falcon_dtype run_dtype(const run_ctx *c)
{
    return c->cfg.precision == FALCON_FP64 ? FALCON_DTYPE_F64 : FALCON_DTYPE_F32;
}

static size_t elem_size(const run_ctx *c) { return run_dtype(c) == FALCON_DTYPE_F64 ? 8 : 4; }

/* "[4,3]", or "[4,m]" with a symbolic last dim. */
static const char *fmt_shape(const int64_t *shape, int ndim, const char *last, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (last && used < size) used += (size_t)snprintf(buf + used, size - used, "%s%s", ndim ? "," : "", last);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

static int load_inputs(run_ctx *c)
{
    for (int i = 0; i < NUM_INPUTS; i++) {
        if (c->paths[i] && falcon_npy_read(c->paths[i], run_dtype(c), &c->in[i]))
            return cli_error("%s: %s", input_names[i], falcon_last_error());
    }
    return 0;
}

static int dims_from_q(run_ctx *c)
{
    const falcon_array *q = &c->in[IN_Q];
    dims *d = &c->d;
    char got[128];
    if (q->ndim != 2 && q->ndim != 4)
        return cli_error("q (%s): shape %s has %d dimensions; expected [T,n] for one sequence or [B,T,H,n] "
                         "for a batch", c->paths[IN_Q], fmt_shape(q->shape, q->ndim, NULL, got, sizeof got),
                         q->ndim);
    d->batched = q->ndim == 4;
    d->nlead = q->ndim - 1;
    memcpy(d->lead, q->shape, sizeof(int64_t) * (size_t)d->nlead);
    d->B = d->batched ? q->shape[0] : 1;
    d->T = d->batched ? q->shape[1] : q->shape[0];
    d->H = d->batched ? q->shape[2] : 1;
    d->n = q->shape[q->ndim - 1];
    return 0;
}

/* "v (v.npy): shape [5,3] but q says T=4; expected [4,m]" */
static int shape_error(const run_ctx *c, int i)
{
    const falcon_array *a = &c->in[i];
    const dims *d = &c->d;
    const tail_kind tail = input_tails[i];
    char got[128], want[128], n[32], says[128];
    snprintf(n, sizeof n, "%lld", (long long)d->n);
    if (d->batched)
        snprintf(says, sizeof says, "B=%lld, T=%lld, H=%lld", (long long)d->B, (long long)d->T, (long long)d->H);
    else
        snprintf(says, sizeof says, "T=%lld", (long long)d->T);
    if (tail == TAIL_N) snprintf(says + strlen(says), sizeof says - strlen(says), ", n=%lld", (long long)d->n);
    return cli_error("%s (%s): shape %s but q says %s; expected %s", input_names[i], c->paths[i],
                     fmt_shape(a->shape, a->ndim, NULL, got, sizeof got), says,
                     fmt_shape(d->lead, d->nlead, tail == TAIL_N ? n : tail == TAIL_M ? "m" : NULL, want,
                               sizeof want));
}

/* Every tensor has q's leading dims, then n, m or nothing; v sets m. */
static int check_shape(run_ctx *c, int i)
{
    const falcon_array *a = &c->in[i];
    const dims *d = &c->d;
    const tail_kind tail = input_tails[i];
    int ok = a->ndim == d->nlead + (tail != TAIL_NONE);
    for (int j = 0; ok && j < d->nlead; j++) ok = a->shape[j] == d->lead[j];
    if (ok && tail == TAIL_N) ok = a->shape[d->nlead] == d->n;
    if (ok && tail == TAIL_M) c->d.m = a->shape[d->nlead];
    return ok ? 0 : shape_error(c, i);
}

static int check_shapes(run_ctx *c)
{
    if (dims_from_q(c)) return CLI_FAIL;
    for (int i = IN_K; i < NUM_INPUTS; i++)
        if (c->paths[i] && check_shape(c, i)) return CLI_FAIL;
    return 0;
}

static falcon_inputs make_inputs(const run_ctx *c)
{
    const falcon_inputs in = {c->d.B, c->d.T, c->d.H, c->d.n, c->d.m,
                              c->in[IN_Q].data, c->in[IN_K].data, c->in[IN_V].data, c->in[IN_BETA].data,
                              c->in[IN_ALPHA].data, c->in[IN_GAIN].data};
    return in;
}

/* The carried state: from --checkpoint-in, or fresh. */
static int make_state(run_ctx *c)
{
    const dims *d = &c->d;
    const int64_t heads = d->B * d->H;
    if (!c->args.ckpt_in)
        return falcon_state_create(heads, d->n, d->m, c->cfg.window, &c->state)
                   ? cli_error("%s", falcon_last_error()) : 0;
    if (falcon_checkpoint_load(c->args.ckpt_in, &c->state))
        return cli_error("--checkpoint-in: %s", falcon_last_error());
    const falcon_state_view v = falcon_state_get_view(c->state);
    if (v.heads != heads || v.n != d->n || v.m != d->m || v.window != c->cfg.window)
        return cli_error("--checkpoint-in '%s': the checkpoint has heads=%lld, n=%lld, m=%lld, window=%lld "
                         "but the run has heads=%lld (B*H), n=%lld, m=%lld, window=%lld", c->args.ckpt_in,
                         (long long)v.heads, (long long)v.n, (long long)v.m, (long long)v.window,
                         (long long)heads, (long long)d->n, (long long)d->m, (long long)c->cfg.window);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compute(run_ctx *c)
{
    const falcon_inputs in = make_inputs(c);
    /* Validate before creating the state, so that the library names the bad
     * size or value rather than the state it would not fit. */
    if (falcon_validate(&c->cfg, &in, NULL)) return cli_error("%s", falcon_last_error());
    if (make_state(c)) return CLI_FAIL;
    c->out = malloc((size_t)(in.B * in.T * in.H * in.m) * elem_size(c) + 1);
    if (!c->out) return cli_error("out of memory for the output [%lld x %lld]", (long long)(in.B * in.T * in.H),
                                  (long long)in.m);
    const double t0 = now();
    if (falcon_run(&c->cfg, &in, c->state, c->out)) return cli_error("%s", falcon_last_error());
    if (c->args.verbose)
        printf("backend %s, precision %s, B %lld, T %lld, H %lld, n %lld, m %lld, %.6f s\n",
               falcon_backend_name(falcon_backend_resolve(c->cfg.backend)),
               falcon_precision_name(c->cfg.precision), (long long)in.B, (long long)in.T, (long long)in.H,
               (long long)in.n, (long long)in.m, now() - t0);
    return 0;
}

/* The reads: [T,m] or [B,T,H,m]. */
static falcon_array out_array(const run_ctx *c)
{
    falcon_array a = {run_dtype(c), c->d.nlead + 1, {0}, 0, c->out};
    memcpy(a.shape, c->d.lead, sizeof(int64_t) * (size_t)c->d.nlead);
    a.shape[c->d.nlead] = c->d.m;
    a.count = c->d.B * c->d.T * c->d.H * c->d.m;
    return a;
}

/* The memory: [m,n] or [B,H,m,n], in the run's precision (an fp32 run's
 * state holds fp32 values, so nothing is lost). *buf is freed by the caller. */
static falcon_array state_array(const run_ctx *c, void **buf)
{
    const falcon_state_view v = falcon_state_get_view(c->state);
    const dims *d = &c->d;
    falcon_array a = {run_dtype(c), d->batched ? 4 : 2, {0}, v.heads * v.m * v.n, NULL};
    const int64_t batched[4] = {d->B, d->H, d->m, d->n}, single[2] = {d->m, d->n};
    memcpy(a.shape, d->batched ? batched : single, sizeof(int64_t) * (size_t)a.ndim);
    *buf = malloc((size_t)a.count * elem_size(c) + 1);
    for (int64_t i = 0; *buf && i < a.count; i++) {
        if (a.dtype == FALCON_DTYPE_F64) ((double *)*buf)[i] = v.S[i];
        else ((float *)*buf)[i] = (float)v.S[i];
    }
    a.data = *buf;
    return a;
}

/* Report a failed output, removing the outputs written before it. */
static int output_failed(const char *what, const char *detail, const char *const *written, int count)
{
    for (int i = 0; i < count; i++) unlink(written[i]);
    return cli_error("%s: %s", what, detail);
}

static int write_outputs(const run_ctx *c)
{
    const char *written[2];
    int count = 0;
    const falcon_array out = out_array(c);
    if (falcon_npy_write(c->args.out, &out)) return output_failed("--out", falcon_last_error(), written, count);
    written[count++] = c->args.out;
    if (c->args.state_out) {
        void *buf;
        const falcon_array s = state_array(c, &buf);
        if (!buf) return output_failed("--state-out", "out of memory", written, count);
        const int failed = falcon_npy_write(c->args.state_out, &s);
        free(buf);
        if (failed) return output_failed("--state-out", falcon_last_error(), written, count);
        written[count++] = c->args.state_out;
    }
    if (c->args.ckpt_out && falcon_checkpoint_save(c->state, c->args.ckpt_out))
        return output_failed("--checkpoint-out", falcon_last_error(), written, count);
    return 0;
}

static void free_ctx(run_ctx *c)
{
    for (int i = 0; i < NUM_INPUTS; i++) falcon_array_free(&c->in[i]);
    falcon_state_free(c->state);
    free(c->out);
}

int cli_run(int argc, char **argv)
{
    run_ctx c;
    memset(&c, 0, sizeof c);
    if (cli_parse_run(argc, argv, &c.args)) return CLI_FAIL;
    if (c.args.help) {
        cli_print_run_help(stdout);
        return 0;
    }
    c.cfg = cli_config(&c.args);
    const char *paths[NUM_INPUTS] = {c.args.q, c.args.k, c.args.v, c.args.beta, c.args.alpha, c.args.gain};
    memcpy(c.paths, paths, sizeof paths);
    const int status = load_inputs(&c) || check_shapes(&c) || compute(&c) || write_outputs(&c) ? CLI_FAIL : 0;
    free_ctx(&c);
    return status;
}
