/*
 * The CUDA backward's accuracy checks, through the gradient gate
 * (gate/grad-gate.h): the quick case table (gate_grad_cases(0)) and the
 * full profile's larger shape (grad_cases), the gate's
 * cotangents and carried states, the MPFR reverse sweep and the gate's
 * per-tensor thresholds (gate/THRESHOLDS.md, "Gradients"), in every form,
 * each form judged by its own thresholds. The CUDA backward computes every
 * form by the recurrent reverse sweep (kernels/cuda/fc_backward.h); nothing
 * here has its own generator, error or pass rule.
 *
 *   emulate  the backward kernel runs on the CPU (fc_emu_bw_exec), its
 *            workspace and features poisoned (NaN) and every gradient
 *            buffer poisoned too (an entry left unwritten fails the
 *            finiteness scan); each case also with each phase's threads in
 *            reverse order, other block sizes and checkpoint spacings,
 *            which must give the same bits (rows and columns are owned by
 *            one thread each, and the reductions run in a fixed order)
 *   device   the same cases on the GPU through falcon_backward (quick: one
 *            case per variant, for compute-sanitizer)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/internal.h"
#include "../../kernels/cuda/cuda_api.h"
#include "cuda_check.h"
#include "cuda_emulate.h"
#include "grad-gate.h"

static int64_t emu_checkpoint; /* the emulated backward's checkpoint spacing (0: about sqrt(T)) */

/* Every gradient buffer set to NaN (fp32 tensors, double state gradients). */
static void poison_grads(const falcon_inputs *in, int64_t window, const falcon_grads *g)
{
    const int64_t rows = in->B * in->T * in->H, heads = in->B * in->H, keep = window - 1;
    float *f[6] = {g->dq, g->dk, g->dv, g->dbeta, g->dalpha, g->dgain};
    const int64_t fc[6] = {rows * in->n, rows * in->n, rows * in->m, rows, rows, rows * in->n};
    for (int i = 0; i < 6; i++)
        for (int64_t j = 0; f[i] && j < fc[i]; j++) f[i][j] = NAN;
    double *d[4] = {g->dS0, g->dprev_key, g->dhist_k, g->dhist_v};
    const int64_t dc[4] = {heads * in->m * in->n, heads * in->n, heads * keep * in->n, heads * keep * in->m};
    for (int i = 0; i < 4; i++)
        for (int64_t j = 0; d[i] && j < dc[i]; j++) d[i][j] = NAN;
}

/* falcon_backward with the emulated CUDA kernel in place of the GPU: the
 * same steps as src/backward.c (validate, the backend, the finiteness
 * scan), on poisoned gradient buffers. */
static falcon_status emu_backward(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *state,
                                  const void *dO, const double *dS_T, const falcon_grads *grads)
{
    falcon_plan plan;
    falcon_status s = falcon_backward_plan(cfg, in, state, dO, dS_T, grads, &plan);
    if (s) return s;
    falcon_state *fresh = NULL;
    if (!state && (s = falcon_state_create(in->B * in->H, in->n, in->m, cfg->window, &fresh))) return s;
    const falcon_state_view view = falcon_state_get_view(state ? state : fresh);
    poison_grads(in, cfg->window, grads);
    char why[640] = "";
    s = falcon_cuda_backward_with(cfg, in, &view, dO, dS_T, grads, emu_checkpoint, fc_emu_bw_exec, why, sizeof why);
    falcon_state_free(fresh);
    if (s) return falcon_fail(s, "%s", why);
    return falcon_backward_scan(&plan, in, grads);
}

/* Per form: runs, failures, the largest error / threshold and where. */
typedef struct grad_summary {
    int runs[3], fails[3];
    double ratio[3];
    char where[3][320];
} grad_summary;

/* One run's verdict: every tensor against its threshold; the largest
 * ratio into sm. Returns 1 if it failed. */
static int grad_judge(const gate_grad_case *g, falcon_status s, const gate_grad_result *r,
                      const gate_grad_result *ref, falcon_form f, const char *desc, grad_summary *sm)
{
    sm->runs[f]++;
    if (s) {
        printf("FAIL grad %s %s: %s\n", falcon_form_name(f), desc, falcon_last_error());
        sm->fails[f]++;
        sm->ratio[f] = INFINITY;
        return 1;
    }
    double err[GG_COUNT];
    gate_grad_compare(r, ref, FALCON_FP32, err);
    int bad = 0;
    for (int t = 0; t < GG_COUNT; t++) {
        if (!r->count[t]) continue;
        const double thr = gate_grad_threshold(&g->c, f, FALCON_FP32, t, ref->cond[t]), ratio = err[t] / thr;
        if (!(ratio <= sm->ratio[f])) {
            sm->ratio[f] = ratio;
            snprintf(sm->where[f], sizeof sm->where[f], "%s, %s", gate_grad_name(t), desc);
        }
        if (!(err[t] <= thr)) {
            printf("FAIL grad %s %s: %s error %.3g u > %.3g u (kappa %.3g)\n", falcon_form_name(f), desc,
                   gate_grad_name(t), err[t], thr, ref->cond[t]);
            bad = 1;
        }
    }
    sm->fails[f] += bad;
    return bad;
}

static int same_bits(const gate_grad_result *a, const gate_grad_result *b)
{
    for (int t = 0; t < GG_COUNT; t++)
        if (a->count[t] != b->count[t] ||
            (a->count[t] && memcmp(a->x[t], b->x[t], sizeof(double) * (size_t)a->count[t])))
            return 0;
    return 1;
}

/* The emulation's other launches of a case: threads in reverse, other
 * block sizes, checkpoints every step or one segment; each must give the
 * bits of the default run a. Returns the number that do not. */
static int grad_launches(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                         const falcon_state *st, const gate_grad_result *a, const char *desc, int *runs)
{
    static const struct {
        int reverse, threads;
        int64_t checkpoint; /* -1: the whole sequence one segment */
    } launches[] = {{1, 0, 0}, {1, 7, 1}, {0, 32, -1}, {1, 512, 5}};
    int bad = 0;
    for (size_t i = 0; i < sizeof launches / sizeof launches[0]; i++) {
        fc_emu_reverse = launches[i].reverse;
        fc_emu_threads = launches[i].threads;
        emu_checkpoint = launches[i].checkpoint < 0 ? g->c.T : launches[i].checkpoint;
        gate_grad_result b;
        const falcon_status s = gate_grad_run_with(g, d, ct, FALCON_FORM_RECURRENT, FALCON_BACKEND_CUDA, st,
                                                   emu_backward, &b);
        ++*runs;
        if (s || !same_bits(a, &b)) {
            printf("RACE grad %s reverse=%d threads=%d checkpoint=%lld: %s\n", desc, launches[i].reverse,
                   launches[i].threads, (long long)emu_checkpoint,
                   s ? falcon_last_error() : "the gradients' bits depend on the launch");
            bad++;
        }
        if (!s) gate_grad_result_free(&b);
    }
    fc_emu_reverse = 0;
    fc_emu_threads = 0;
    emu_checkpoint = 0;
    return bad;
}

/* The quick table, and the full profile's cases of its larger shape
 * (n > 8: T = 96, n = 16, m = 12, W = 4, a carried state, the decay
 * regimes), one seed of each: 228 cases. -1 when out of memory. */
static int grad_cases(gate_grad_case **out)
{
    gate_grad_case *quick, *full;
    const int nq = gate_grad_cases(0, &quick), nf = gate_grad_cases(1, &full);
    gate_grad_case *all = nq > 0 && nf > 0 ? realloc(quick, sizeof *all * (size_t)(nq + nf)) : NULL;
    if (!all) {
        if (nq > 0) free(quick);
        if (nf > 0) free(full);
        return -1;
    }
    int n = nq, seen[6] = {0};
    for (int i = 0; i < nf; i++)
        if (full[i].c.n > 8 && seen[full[i].c.variant]++ < 6) all[n++] = full[i];
    free(full);
    *out = all;
    return n;
}

/* Every case in every form, on the emulation or the GPU (one_each: only
 * each variant's first case, for compute-sanitizer). */
static int grad_sweep(int emulate, int one_each)
{
    gate_grad_case *cases;
    int ncase = grad_cases(&cases);
    if (ncase <= 0) return 2;
    if (one_each) {
        int k = 0, seen[6] = {0};
        for (int i = 0; i < ncase; i++)
            if (!seen[cases[i].c.variant]++) cases[k++] = cases[i];
        ncase = k;
    }
    grad_summary sm;
    memset(&sm, 0, sizeof sm);
    int launch_fails = 0, launch_runs = 0;
    for (int i = 0; i < ncase; i++) {
        const gate_grad_case *g = &cases[i];
        gate_data d;
        gate_cotangents ct;
        gate_grad_result ref;
        falcon_state *st = NULL;
        char desc[256];
        gate_case_describe(&g->c, desc, sizeof desc);
        if (gate_data_make(&g->c, FALCON_FP32, &d) || gate_cotangents_make(&g->c, FALCON_FP32, &ct) ||
            gate_grad_state(g, &d, &st) || gate_grad_reference(g, &d, &ct, st, &ref)) {
            printf("grad reference failed: %s\n", falcon_last_error());
            free(cases);
            return 2;
        }
        for (int f = 0; f < 3; f++) {
            gate_grad_result r;
            const falcon_status s =
                emulate ? gate_grad_run_with(g, &d, &ct, (falcon_form)f, FALCON_BACKEND_CUDA, st, emu_backward, &r)
                        : gate_grad_run(g, &d, &ct, (falcon_form)f, FALCON_BACKEND_CUDA, st, &r);
            grad_judge(g, s, &r, &ref, (falcon_form)f, desc, &sm);
            if (!s && emulate && f == FALCON_FORM_RECURRENT)
                launch_fails += grad_launches(g, &d, &ct, st, &r, desc, &launch_runs);
            if (!s) gate_grad_result_free(&r);
        }
        gate_grad_result_free(&ref);
        falcon_state_free(st);
        gate_cotangents_free(&ct);
        gate_data_free(&d);
    }
    free(cases);
    printf("\nbackward (%s, fp32): the gradient gate's quick table and larger cases against the MPFR reverse "
           "sweep\n",
           emulate ? "CUDA kernel in CPU emulation" : "CUDA backend on the GPU");
    printf("%-10s %5s %6s %9s  %s\n", "form", "runs", "fails", "max/thr", "where (tensor, case)");
    int fails = 0;
    for (int f = 0; f < 3; f++) {
        printf("%-10s %5d %6d %9.3f  %s\n", falcon_form_name((falcon_form)f), sm.runs[f], sm.fails[f], sm.ratio[f],
               sm.where[f]);
        fails += sm.fails[f];
    }
    if (emulate) printf("race and launch runs (same bits): %d, %d differ or failed\n", launch_runs, launch_fails);
    return fails + launch_fails ? 1 : 0;
}

/* An fp64 backward is refused, as the forward is. */
static int grad_fp64_refused(void)
{
    double q[4] = {1, 0, 0, 1}, k[4] = {0, 1, 1, 0}, v[2] = {1, 2}, beta[2] = {1, 1};
    double dq[4], dk[4], dv[2], dbeta[2], dS0[2];
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.precision = FALCON_FP64;
    cfg.backend = FALCON_BACKEND_CUDA;
    falcon_inputs in = falcon_inputs_sequence(2, 2, 1, q, k, v, beta, NULL, NULL);
    falcon_state *st;
    if (falcon_state_create(1, 2, 1, 1, &st)) return 1;
    const falcon_state_view view = falcon_state_get_view(st);
    const falcon_grads g = {dq, dk, dv, dbeta, NULL, NULL, dS0, NULL, NULL, NULL};
    char why[640] = "";
    const falcon_status s = falcon_cuda_backward_with(&cfg, &in, &view, NULL, NULL, &g, 0, fc_emu_bw_exec, why,
                                                      sizeof why);
    printf("fp64 backward request: %s: %s\n", falcon_status_name(s), why);
    falcon_state_free(st);
    return s != FALCON_E_UNAVAILABLE;
}

int cuda_check_grad_emulate(void)
{
    int bad = grad_sweep(1, 0);
    bad += grad_fp64_refused();
    printf("%s\n", bad ? "BACKWARD EMULATION CHECK FAILED" : "BACKWARD EMULATION CHECK PASSED");
    return bad ? 1 : 0;
}

int cuda_check_grad_device(int quick)
{
    const int bad = grad_sweep(0, quick);
    printf("backward device check: %s\n", bad ? "FAILED" : "PASSED");
    return bad;
}
