/*
 * The CUDA backend's accuracy checks, through the gate: the gate's case
 * table (plus shapes that reach the kernels' on-chip limits), the gate's
 * seeded inputs, the MPFR reference and the gate's thresholds in units of
 * fp32 roundoff (gate/gate.h). The CUDA kernels are judged exactly as the
 * CPU kernels are; nothing here has its own generator, error or pass rule.
 *
 *   emulate  the kernels run on the CPU (cuda_emulate.c); every case also
 *            with each phase's threads in reverse order (a race changes the
 *            bits), and with other block sizes and shared-memory budgets
 *   device   the same cases on the GPU through falcon_run
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/internal.h"
#include "../../kernels/cuda/cuda_api.h"
#include "cuda_check.h"
#include "cuda_emulate.h"
#include "gate.h"

/* A gate case run in one form, split into two segments with the state
 * carried where `split` is inside the sequence. */
typedef struct cc_case {
    gate_case c; /* c.key_scale: keys at the limits of fp32 */
    falcon_form form;
    int64_t split;
    double gain_mag; /* Falcon-2/2A's gains scaled to this magnitude (0: as generated) */
    int set_memory;  /* start from a memory set by falcon_state_set_memory, not zero */
} cc_case;

static int is_limit(const cc_case *k) { return k->c.key_scale != 1 || k->gain_mag != 0 || k->set_memory; }

/* The gate's full table in every form, the limits of fp32 (huge and tiny
 * keys, huge and tiny gains, a set memory), and larger and odd shapes: more
 * columns than a block has threads, more than fit in shared memory, long
 * blocks. */
static int make_cases(cc_case **out, int big)
{
    gate_case *table;
    const int nt = gate_cases(1, &table);
    if (nt < 0) return -1;
    static const int64_t shapes[][4] = {{128, 128, 24, 1}, {130, 70, 20, 1}, {33, 129, 20, 2}, {64, 64, 300, 1}};
    const int nshapes = big ? 4 : 3;
    cc_case *cs = malloc(sizeof *cs * (size_t)(3 * nt + 18 * nshapes + 18 * 11));
    if (!cs) {
        free(table);
        return -1;
    }
    int n = 0;
    for (int i = 0; i < nt; i++)
        for (int f = 0; f < 3; f++)
            cs[n++] = (cc_case){table[i], (falcon_form)f, table[i].T > 2 ? table[i].T / 2 + 1 : 0, 0, 0};
    uint64_t seed = 70001;
    /* Keys at the limits of fp32 (x.x overflows or underflows where the
     * results do not), Falcon-2/2A's gains of 1e30 (with keys of 1 and 1e20),
     * 1e-30 and 1e-41 (subnormal), and a memory that is not zero before a first step that learns
     * nothing (prefix alignment, no previous key). */
    static const double mags[] = {1e20, 1e30, 1e-20};
    for (int v = 0; v < 6; v++)
        for (int f = 0; f < 3; f++) {
            const int64_t W = falcon_variant_has_window((falcon_variant)v) ? 3 : 1;
            for (int k = 0; k < 3; k++)
                for (int a = 0; a < 2; a++) {
                    const gate_case c = {(falcon_variant)v, (falcon_align)a, (falcon_phi)((v + k + a) % 4),
                                         GATE_DECAY_MIX, 2, 40, 3, 12, 10, W, 8, 1e-6, mags[k], seed++};
                    cs[n++] = (cc_case){c, (falcon_form)f, 17, 0, 0};
                }
            static const double gmags[] = {1e30, 1e30, 1e-30, 1e-41}; /* 1e-41: subnormal gains */
            for (int k = 0; k < 4 && falcon_variant_has_gain((falcon_variant)v); k++) {
                const gate_case c = {(falcon_variant)v, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, GATE_DECAY_MIX,
                                     2, 40, 3, 12, 10, 1, 8, 1e-6, k == 1 ? 1e20 : 1.0, seed++};
                cs[n++] = (cc_case){c, (falcon_form)f, 17, gmags[k], 0};
            }
            const gate_case c = {(falcon_variant)v, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, GATE_DECAY_MIX,
                                 2, 40, 3, 12, 10, W, 8, 1e-6, 1.0, seed++};
            cs[n++] = (cc_case){c, (falcon_form)f, 0, 0, 1};
        }
    for (int s = 0; s < nshapes; s++)
        for (int v = 0; v < 6; v++)
            for (int f = 0; f < 3; f++) {
                const gate_case c = {(falcon_variant)v, FALCON_ALIGN_PREFIX, FALCON_PHI_L2NORM, GATE_DECAY_MIX,
                                     1, shapes[s][2], shapes[s][3], shapes[s][0], shapes[s][1],
                                     falcon_variant_has_window((falcon_variant)v) ? 4 : 1, 16, 1e-6, 1.0, seed++};
                cs[n++] = (cc_case){c, (falcon_form)f, shapes[s][2] / 2 + 1, 0, 0};
            }
    free(table);
    *out = cs;
    return n;
}

/* falcon_run with the emulated CUDA kernels in place of the GPU: the same
 * steps as src/run.c (validate, work copy, backend, state bookkeeping). */
static falcon_status run_emu(const falcon_config *cfg, const falcon_inputs *in, falcon_state *state,
                             void *out)
{
    falcon_status s = falcon_validate(cfg, in, state);
    if (s) return s;
    falcon_state *work;
    if ((s = falcon_state_copy(state, &work))) return s;
    const falcon_state_view view = falcon_state_get_view(work);
    char why[640] = "";
    s = falcon_cuda_run_with(cfg, in, &view, work->S, out, fc_emu_exec, why, sizeof why);
    if (s) s = falcon_fail(s, "%s", why);
    /* src/run.c's overflow check: a result that is not finite is reported */
    for (int64_t i = 0; !s && i < in->B * in->T * in->H * in->m; i++)
        if (!isfinite(((const float *)out)[i])) s = falcon_fail(FALCON_E_OVERFLOW, "out[%lld] is not finite", (long long)i);
    for (int64_t i = 0; !s && i < work->heads * work->m * work->n; i++)
        if (!isfinite(work->S[i])) s = falcon_fail(FALCON_E_OVERFLOW, "S[%lld] is not finite", (long long)i);
    if (s) {
        falcon_state_free(work);
        return s;
    }
    for (int64_t b = 0; b < in->B; b++)
        for (int64_t h = 0; h < in->H; h++) falcon_state_advance(work, cfg, in, b, h);
    falcon_state_take(state, work);
    return FALCON_OK;
}

/* Rows [t0, t1) of a [B][T][H][w] float tensor as a new [B][t1-t0][H][w] one. */
static float *slice(const void *src, const gate_case *c, int64_t w, int64_t t0, int64_t t1)
{
    if (!src) return NULL;
    const int64_t Ts = t1 - t0, row = c->H * w;
    float *dst = malloc(sizeof(float) * (size_t)(c->B * Ts * row + 1));
    for (int64_t b = 0; dst && b < c->B; b++)
        memcpy(dst + b * Ts * row, (const float *)src + (b * c->T + t0) * row, sizeof(float) * (size_t)(Ts * row));
    return dst;
}

typedef enum { RUN_LIB, RUN_EMU } run_kind;

/* Run case k in fp32 on the cuda backend (the GPU or its emulation), in
 * segments; the outputs and final memory, in double, into r. */
static falcon_status run_case(const cc_case *k, const gate_data *d, const falcon_state *init, run_kind kind,
                              gate_result *r)
{
    const gate_case *c = &k->c;
    falcon_config cfg = gate_config(c, k->form, FALCON_BACKEND_CUDA, FALCON_FP32);
    r->out_count = c->B * c->T * c->H * c->m;
    r->state_count = c->B * c->H * c->m * c->n;
    r->out = malloc(sizeof(double) * (size_t)(r->out_count + 1));
    r->S = malloc(sizeof(double) * (size_t)(r->state_count + 1));
    falcon_state *st = NULL;
    falcon_status s = !r->out || !r->S ? FALCON_E_NOMEM
                    : init              ? falcon_state_copy(init, &st)
                                        : falcon_state_create(c->B * c->H, c->n, c->m, c->window, &st);
    const int64_t cut = k->split > 0 && k->split < c->T ? k->split : c->T;
    const int64_t cuts[3] = {0, cut, c->T};
    const falcon_inputs *in = &d->in;
    for (int sg = 0; sg < (cut < c->T ? 2 : 1) && !s; sg++) {
        const int64_t t0 = cuts[sg], t1 = cuts[sg + 1], Ts = t1 - t0, n = c->n, m = c->m;
        float *p[6] = {slice(in->q, c, n, t0, t1), slice(in->k, c, n, t0, t1), slice(in->v, c, m, t0, t1),
                       slice(in->beta, c, 1, t0, t1), slice(in->alpha, c, 1, t0, t1), slice(in->gain, c, n, t0, t1)};
        falcon_inputs seg = {.B = c->B, .T = Ts, .H = c->H, .n = n, .m = m, .q = p[0], .k = p[1],
                             .v = p[2], .beta = p[3], .alpha = p[4], .gain = p[5]};
        const int64_t cnt = c->B * Ts * c->H * m;
        float *o = malloc(sizeof(float) * (size_t)(cnt + 1));
        for (int64_t i = 0; o && i < cnt; i++) o[i] = NAN; /* every output must be written */
        s = !o ? FALCON_E_NOMEM : kind == RUN_EMU ? run_emu(&cfg, &seg, st, o) : falcon_run(&cfg, &seg, st, o);
        for (int64_t b = 0; !s && b < c->B; b++)
            for (int64_t i = 0; i < Ts * c->H * m; i++)
                r->out[(b * c->T + t0) * c->H * m + i] = o[b * Ts * c->H * m + i];
        free(o);
        for (int i = 0; i < 6; i++) free(p[i]);
    }
    if (!s) memcpy(r->S, falcon_state_get_view(st).S, sizeof(double) * (size_t)r->state_count);
    falcon_state_free(st);
    if (s) gate_result_free(r);
    return s;
}

/* The gate's verdict on r: the larger of the two errors over its threshold
 * (<= 1 passes). */
static double judge(const cc_case *k, const gate_result *r, const gate_result *ref, gate_errors *e)
{
    *e = gate_compare(r, ref, FALCON_FP32);
    const double thr = gate_threshold(&k->c, k->form, FALCON_FP32);
    const double thr_out = gate_threshold_out(&k->c, k->form, FALCON_FP32, ref->read_cond);
    const double ro = e->out_u / thr_out, rs = e->state_u / thr;
    return ro > rs ? ro : rs;
}

/* Per (variant, form): cases, failures, worst errors and worst ratio. */
typedef struct summary {
    int cases[6][3], fails[6][3];
    double out_u[6][3], state_u[6][3], ratio[6][3];
} summary;

static void summarize(summary *sm, const cc_case *k, const gate_errors *e, double ratio)
{
    const int v = (int)k->c.variant, f = (int)k->form;
    sm->cases[v][f]++;
    sm->fails[v][f] += !(ratio <= 1);
    if (e->out_u > sm->out_u[v][f]) sm->out_u[v][f] = e->out_u;
    if (e->state_u > sm->state_u[v][f]) sm->state_u[v][f] = e->state_u;
    if (!(ratio <= sm->ratio[v][f])) sm->ratio[v][f] = ratio;
}

static void print_summary(const summary *sm, const char *what)
{
    printf("\n%s: the gate's thresholds, units of fp32 roundoff\n", what);
    printf("%-9s %-10s %6s %12s %12s %10s %6s\n", "variant", "form", "cases", "max out (u)", "max S (u)",
           "max/thr", "fails");
    for (int v = 0; v < 6; v++)
        for (int f = 0; f < 3; f++)
            if (sm->cases[v][f])
                printf("%-9s %-10s %6d %12.3g %12.3g %10.3f %6d\n", falcon_variant_name((falcon_variant)v),
                       falcon_form_name((falcon_form)f), sm->cases[v][f], sm->out_u[v][f], sm->state_u[v][f],
                       sm->ratio[v][f], sm->fails[v][f]);
}

static void describe(const cc_case *k, char *buf, size_t size)
{
    char c[200];
    gate_case_describe(&k->c, c, sizeof c);
    snprintf(buf, size, "%s %s split=%lld", falcon_form_name(k->form), c, (long long)k->split);
}

/* Races, block sizes and shared-memory budgets on the emulation: the run
 * with each phase's threads in reverse must give the same bits, and every
 * launch shape must pass the gate. Returns the number of failures. */
static int launch_shapes(const cc_case *k, const gate_data *d, const falcon_state *init, const gate_result *ref,
                         int *runs)
{
    char name[300];
    describe(k, name, sizeof name);
    int bad = 0;
    gate_result a, b;
    fc_emu_threads = 64;
    fc_emu_reverse = 0;
    falcon_status s1 = run_case(k, d, init, RUN_EMU, &a);
    fc_emu_reverse = 1;
    falcon_status s2 = run_case(k, d, init, RUN_EMU, &b);
    fc_emu_reverse = 0;
    if (s1 || s2 || memcmp(a.out, b.out, sizeof(double) * (size_t)a.out_count) ||
        memcmp(a.S, b.S, sizeof(double) * (size_t)a.state_count)) {
        printf("RACE %s: results depend on the order of threads within a phase\n", name);
        bad++;
    }
    if (!s1) gate_result_free(&a);
    if (!s2) gate_result_free(&b);
    static const int threads[] = {32, 96, 512};
    static const int64_t budgets[] = {227 * 1024, 16 * 1024, 0};
    for (int ti = 0; ti < 3; ti++)
        for (int bi = 0; bi < 3; bi++) {
            fc_emu_threads = threads[ti];
            fc_emu_smem_bytes = budgets[bi];
            gate_result r;
            gate_errors e = {INFINITY, INFINITY};
            const falcon_status s = run_case(k, d, init, RUN_EMU, &r);
            const double ratio = s ? INFINITY : judge(k, &r, ref, &e);
            if (!s) gate_result_free(&r);
            ++*runs;
            if (!(ratio <= 1)) {
                printf("FAIL %s threads=%d smem=%lld: out %.3g u, S %.3g u, max/thr %.3g%s%s\n", name, threads[ti],
                       (long long)budgets[bi], e.out_u, e.state_u, ratio, s ? ": " : "", s ? falcon_last_error() : "");
                bad++;
            }
        }
    fc_emu_threads = 0;
    fc_emu_smem_bytes = 227 * 1024;
    return bad;
}

/* A case's inputs beyond the gate's generator: gains scaled (each value
 * rounded to fp32 and kept exact in the double copy the reference reads),
 * and the initial state (NULL: fresh). 0, or -1 when out of memory. */
static int case_inputs(const cc_case *k, gate_data *d, falcon_state **init)
{
    const gate_case *c = &k->c;
    const int64_t count = c->B * c->T * c->H * c->n;
    for (int64_t i = 0; k->gain_mag != 0 && d->in.gain && i < count; i++) {
        const float g = (float)(((const float *)d->in.gain)[i] * k->gain_mag);
        ((float *)d->in.gain)[i] = g;
        ((double *)d->in64.gain)[i] = g;
    }
    *init = NULL;
    if (!k->set_memory) return 0;
    const int64_t heads = c->B * c->H, cnt = heads * c->m * c->n;
    double *S0 = malloc(sizeof(double) * (size_t)cnt);
    for (int64_t i = 0; S0 && i < cnt; i++) S0[i] = 0.5 - 0.125 * (double)(i % 9) + 0.01 * (double)(i % 31);
    int rc = !S0 || falcon_state_create(heads, c->n, c->m, c->window, init) ||
             falcon_state_set_memory(*init, S0) ? -1 : 0;
    free(S0);
    return rc;
}

/* Results that overflow fp32 (values and queries of 1e36: o = S q of order
 * 1e72) are reported as an overflow, as the CPU backends report them, in
 * every variant and form. Returns the number of cases that are not. */
static int overflow_parity(void)
{
    int bad = 0;
    for (int v = 0; v < 6; v++)
        for (int f = 0; f < 3; f++) {
            const gate_case c = {(falcon_variant)v, FALCON_ALIGN_SAME, FALCON_PHI_IDENTITY, GATE_DECAY_NONE,
                                 1, 12, 2, 6, 5, falcon_variant_has_window((falcon_variant)v) ? 3 : 1, 4, 1e-6, 1.0,
                                 (uint64_t)(80001 + 3 * v + f)};
            gate_data d;
            if (gate_data_make(&c, FALCON_FP32, &d)) return 1;
            const int64_t rows = c.B * c.T * c.H;
            for (int64_t i = 0; i < rows * c.n; i++) ((float *)d.in.q)[i] *= 1e36f;
            for (int64_t i = 0; i < rows * c.m; i++) ((float *)d.in.v)[i] *= 1e36f;
            const cc_case k = {c, (falcon_form)f, 0, 0, 0};
            gate_result r;
            const falcon_status cpu = gate_run(&c, &d, (falcon_form)f, FALCON_BACKEND_SCALAR, NULL, &r);
            if (!cpu) gate_result_free(&r);
            const falcon_status emu = run_case(&k, &d, NULL, RUN_EMU, &r);
            if (!emu) gate_result_free(&r);
            if (cpu != FALCON_E_OVERFLOW || emu != FALCON_E_OVERFLOW) {
                printf("FAIL %s %s values 1e36: scalar fp32 %s, emulated %s (both must be overflow)\n",
                       falcon_variant_name(c.variant), falcon_form_name((falcon_form)f), falcon_status_name(cpu),
                       falcon_status_name(emu));
                bad++;
            }
            gate_data_free(&d);
        }
    printf("overflowing results: 18 cases, %d not reported as an overflow\n", bad);
    return bad;
}

/* ---- the carried-memory family (gate.h; verify/test-carried-memory.c) ----
 * fp32, Falcon-1/2/3, no decay and mild decay, memories of scale 1, 1e3
 * and 1e6, 4 seeds, T = 30, n = 4, m = 3: the recurrent form, the chunk
 * form with C = 8, 16, 64 and the parallel form (column C = 0). Judged as
 * the CPU backends are: outputs within the gate's threshold; the chunk and
 * parallel forms' memory within its threshold or GATE_CARRIED_FACTOR times
 * the recurrent form's error on the same input (this backend's), whichever
 * is larger; the recurrent form's memory within its threshold at scale 1
 * only (it is the yardstick above). On the emulation each blocked run is
 * also run with each phase's threads in reverse (the same bits) and with
 * 32 threads and no shared memory (judged the same). */
static const double cm_scales[] = {1.0, 1e3, 1e6};
static const int64_t cm_chunks[] = {-1, 8, 16, 64, 0}; /* -1: recurrent, 0: parallel */
enum { CM_SEEDS = 4, CM_NSCALE = 3, CM_NCHUNK = 5 };

/* One run of the family; its state error (u) into *state_u, and the
 * verdict (0 passes) against the state limit thr_S (0: not judged). */
static int carried_run(const cc_case *k, const gate_data *d, const falcon_state *init, const gate_result *ref,
                       run_kind kind, double scale, double thr_S, double *state_u, gate_result *keep)
{
    gate_result r;
    const falcon_status s = run_case(k, d, init, kind, &r);
    gate_errors e = {INFINITY, INFINITY};
    if (!s) e = gate_compare(&r, ref, FALCON_FP32);
    const double thr_out = gate_threshold_out(&k->c, k->form, FALCON_FP32, ref->read_cond);
    *state_u = e.state_u;
    const int bad = s || !(e.out_u <= thr_out) || (thr_S > 0 && !(e.state_u <= thr_S));
    if (bad) {
        char name[300];
        describe(k, name, sizeof name);
        printf("FAIL carried %s scale=%g threads=%d smem=%lld: out %.3g u (<= %.3g), S %.3g u (<= %.3g)%s%s\n", name,
               scale, fc_emu_threads, (long long)fc_emu_smem_bytes, e.out_u, thr_out, e.state_u, thr_S, s ? ": " : "",
               s ? falcon_last_error() : "");
    }
    if (!s && keep && !bad)
        *keep = r; /* the caller frees it */
    else if (!s)
        gate_result_free(&r);
    return bad;
}

/* The race and launch-shape runs of one blocked case (emulation). */
static int carried_shapes(const cc_case *k, const gate_data *d, const falcon_state *init, const gate_result *ref,
                          const gate_result *a, double scale, double thr_S)
{
    double u;
    gate_result b;
    int bad = 0;
    fc_emu_reverse = 1;
    if (carried_run(k, d, init, ref, RUN_EMU, scale, thr_S, &u, &b)) {
        bad++;
    } else {
        if (memcmp(a->out, b.out, sizeof(double) * (size_t)a->out_count) ||
            memcmp(a->S, b.S, sizeof(double) * (size_t)a->state_count)) {
            char name[300];
            describe(k, name, sizeof name);
            printf("RACE carried %s scale=%g: results depend on the order of threads within a phase\n", name, scale);
            bad++;
        }
        gate_result_free(&b);
    }
    fc_emu_reverse = 0;
    fc_emu_threads = 32;
    fc_emu_smem_bytes = 0;
    bad += carried_run(k, d, init, ref, RUN_EMU, scale, thr_S, &u, NULL);
    fc_emu_threads = 0;
    fc_emu_smem_bytes = 227 * 1024;
    return bad;
}

/* The family; prints the largest state error and limit per (variant, form,
 * scale) over the seeds and decays. Returns the number of failures. */
static int carried_family(run_kind kind)
{
    double worst[3][CM_NCHUNK][CM_NSCALE][2] = {{{{0}}}}; /* state u, state u / limit */
    int fails = 0, runs = 0;
    for (int v = 0; v < 3; v++)
        for (int dc = 0; dc < 2; dc++)
            for (int sc = 0; sc < CM_NSCALE; sc++)
                for (uint64_t seed = 1; seed <= CM_SEEDS; seed++) {
                    const gate_decay decay = dc ? GATE_DECAY_MILD : GATE_DECAY_NONE;
                    const uint64_t cs = 7000u + 100u * (uint64_t)v + seed;
                    const gate_case base = gate_carried_case((falcon_variant)v, decay, 30, 4, 3, 64, cs);
                    gate_data d;
                    falcon_state *init = NULL;
                    gate_result ref;
                    if (gate_data_make(&base, FALCON_FP32, &d)) return fails + 1;
                    gate_carried_inputs(&base, &d);
                    if (gate_carried_state(&base, FALCON_FP32, cm_scales[sc], cs, &init) ||
                        gate_reference_from(&base, &d, init, &ref)) {
                        printf("carried: reference failed: %s\n", falcon_last_error());
                        gate_data_free(&d);
                        falcon_state_free(init);
                        return fails + 1;
                    }
                    double rec_u = 0;
                    for (int ci = 0; ci < CM_NCHUNK; ci++) {
                        const falcon_form form = cm_chunks[ci] < 0   ? FALCON_FORM_RECURRENT
                                                 : cm_chunks[ci] > 0 ? FALCON_FORM_CHUNK
                                                                     : FALCON_FORM_PARALLEL;
                        const cc_case k = {gate_carried_case((falcon_variant)v, decay, 30, 4, 3, cm_chunks[ci], cs),
                                           form, 0, 0, 1};
                        const double thr = gate_threshold(&k.c, form, FALCON_FP32);
                        const double thr_S = form != FALCON_FORM_RECURRENT ? fmax(thr, GATE_CARRIED_FACTOR * rec_u)
                                             : cm_scales[sc] == 1 ? thr
                                                                  : 0;
                        double u;
                        gate_result a;
                        const int bad = carried_run(&k, &d, init, &ref, kind, cm_scales[sc], thr_S, &u, &a);
                        fails += bad;
                        runs++;
                        if (form == FALCON_FORM_RECURRENT) rec_u = u;
                        double *w = worst[v][ci][sc];
                        w[0] = fmax(w[0], u);
                        if (thr_S > 0) w[1] = fmax(w[1], u / thr_S);
                        if (bad) continue;
                        if (kind == RUN_EMU && form != FALCON_FORM_RECURRENT)
                            fails += carried_shapes(&k, &d, init, &ref, &a, cm_scales[sc], thr_S);
                        gate_result_free(&a);
                    }
                    gate_result_free(&ref);
                    falcon_state_free(init);
                    gate_data_free(&d);
                }
    printf("\ncarried memory (fp32, T = 30, n = 4, m = 3, beta = 1, 4 seeds x 2 decays): largest state error\n");
    printf("%-8s %-10s %4s %8s %10s %12s\n", "variant", "form", "C", "scale", "max S (u)", "max S/limit");
    for (int v = 0; v < 3; v++)
        for (int ci = 0; ci < CM_NCHUNK; ci++)
            for (int sc = 0; sc < CM_NSCALE; sc++) {
                const falcon_form form = cm_chunks[ci] < 0   ? FALCON_FORM_RECURRENT
                                         : cm_chunks[ci] > 0 ? FALCON_FORM_CHUNK
                                                             : FALCON_FORM_PARALLEL;
                const double *w = worst[v][ci][sc];
                printf("%-8s %-10s %4lld %8g %10.2f", falcon_variant_name((falcon_variant)v), falcon_form_name(form),
                       (long long)(cm_chunks[ci] > 0 ? cm_chunks[ci] : 0), cm_scales[sc], w[0]);
                if (form == FALCON_FORM_RECURRENT && cm_scales[sc] != 1)
                    printf(" %12s\n", "(yardstick)");
                else
                    printf(" %12.3f\n", w[1]);
            }
    printf("carried memory: %d runs, %d failed\n", runs, fails);
    return fails;
}

/* Every case on the emulation (kind RUN_EMU) or the GPU (RUN_LIB). */
static int sweep(run_kind kind, int quick)
{
    cc_case *cs;
    int ncase = make_cases(&cs, kind == RUN_LIB);
    if (ncase < 0) return 2;
    if (quick) { /* one small case per variant and form, the table's first (for compute-sanitizer) */
        int k = 0, seen[6][3] = {{0}};
        for (int i = 0; i < ncase; i++)
            if (!seen[cs[i].c.variant][cs[i].form]++) cs[k++] = cs[i];
        ncase = k;
    }
    printf("reference: the MPFR recurrence (256 bits, rounded to double once); thresholds: the gate's\n");
    summary sm, lim;
    memset(&sm, 0, sizeof sm);
    memset(&lim, 0, sizeof lim);
    int fails = 0, shape_fails = 0, shape_runs = 0;
    for (int i = 0; i < ncase; i++) {
        const cc_case *k = &cs[i];
        gate_data d;
        gate_result ref, r;
        falcon_state *init = NULL;
        if (gate_data_make(&k->c, FALCON_FP32, &d) || case_inputs(k, &d, &init) ||
            gate_reference_from(&k->c, &d, init, &ref)) {
            printf("reference failed: %s\n", falcon_last_error());
            return 2;
        }
        fc_emu_smem_bytes = 227 * 1024;
        fc_emu_threads = 0;
        fc_emu_reverse = 0;
        char name[300];
        describe(k, name, sizeof name);
        gate_errors e = {INFINITY, INFINITY};
        const falcon_status s = run_case(k, &d, init, kind, &r);
        const double ratio = s ? INFINITY : judge(k, &r, &ref, &e);
        if (!s) gate_result_free(&r);
        summarize(is_limit(k) ? &lim : &sm, k, &e, ratio);
        if (!(ratio <= 1)) {
            printf("FAIL %s: out %.3g u, S %.3g u, max/thr %.3g%s%s\n", name, e.out_u, e.state_u, ratio,
                   s ? ": " : "", s ? falcon_last_error() : "");
            fails++;
        }
        if (kind == RUN_EMU && (k->c.phi == FALCON_PHI_L2NORM || k->c.n > 12))
            shape_fails += launch_shapes(k, &d, init, &ref, &shape_runs);
        gate_result_free(&ref);
        gate_data_free(&d);
        falcon_state_free(init);
    }
    free(cs);
    print_summary(&sm, kind == RUN_EMU ? "CUDA kernels in CPU emulation" : "CUDA backend on the GPU");
    print_summary(&lim, "the same, keys of 1e20, 1e30 and 1e-20, gains of 1e30, 1e-30 and 1e-41, and a set memory "
                        "before an empty step");
    if (kind == RUN_EMU) fails += overflow_parity();
    const int cm_fails = carried_family(kind);
    printf("\n%s: %d cases, %d failed the gate", kind == RUN_EMU ? "emulation" : "device", ncase, fails);
    if (kind == RUN_EMU) printf("; %d race and launch-shape runs, %d failed", shape_runs, shape_fails);
    printf("; carried memory: %d failed\n", cm_fails);
    return fails + shape_fails + cm_fails ? 1 : 0;
}

int cuda_check_emulate(void)
{
    int bad = sweep(RUN_EMU, 0);
    /* fp64 is refused (the backend computes in fp32). */
    double q[4] = {1, 0, 0, 1}, k[4] = {0, 1, 1, 0}, v[2] = {1, 2}, beta[2] = {1, 1}, o[2];
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.precision = FALCON_FP64;
    cfg.backend = FALCON_BACKEND_CUDA;
    falcon_inputs in = falcon_inputs_sequence(2, 2, 1, q, k, v, beta, NULL, NULL);
    falcon_state *st;
    falcon_state_create(1, 2, 1, 1, &st);
    const falcon_state_view view = falcon_state_get_view(st);
    double memory[2];
    char why[640] = "";
    falcon_status s = falcon_cuda_run_with(&cfg, &in, &view, memory, o, fc_emu_exec, why, sizeof why);
    printf("fp64 request: %s: %s\n", falcon_status_name(s), why);
    if (s != FALCON_E_UNAVAILABLE && !bad) bad = 1;
    falcon_state_free(st);
    if (cuda_check_grad_emulate() && !bad) bad = 1;
    printf("%s\n", bad ? "EMULATION CHECK FAILED" : "EMULATION CHECK PASSED");
    return bad;
}

int cuda_check_device(int quick)
{
    if (!falcon_backend_available(FALCON_BACKEND_CUDA)) {
        printf("no usable GPU: %s\n", falcon_backend_describe(FALCON_BACKEND_CUDA));
        return 2;
    }
    printf("device: %s\n", falcon_backend_describe(FALCON_BACKEND_CUDA));
    int bad = sweep(RUN_LIB, quick);
    if (cuda_check_grad_device(quick) && !bad) bad = 1;
    printf("device check: %s\n", bad ? "FAILED" : "PASSED");
    return bad;
}
