/*
 * `falcon stability`: running one stream (see stability.c for the study).
 * Every kernel of a stream runs the same segments with its own carried
 * state; the squared error norms of the outputs accumulate as it goes, and
 * at each checkpoint (1-2-5 per decade) the cumulative output error and the
 * state error are recorded against the MPFR reference (up to --tmpfr) or
 * the long-double one beyond.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "falcon_ref.h"
#include "stab.h"

static beyond_fit beyond_of(const double *T, const double *err, int npts, int nfit, loglog_fit f)
{
    beyond_fit b = {npts - nfit, NAN, NAN, NAN, NAN};
    if (b.npts <= 0 || nfit < 1) return b.npts = 0, b;
    b.T = T[npts - 1], b.measured = err[npts - 1];
    b.extrapolated = f.c * pow(b.T, f.p);
    b.p = study_fit(T + nfit - 1, err + nfit - 1, b.npts + 1, b.T).p;
    return b;
}

/* The MPFR reference carried from segment to segment (up to tmpfr steps):
 * its memory at 256 bits and the examples the next segment's first windows
 * reach back to (the previous key, the last W - 1 examples), so that each
 * segment continues from the previous one's state exactly, as one run over
 * the whole prefix would: O(T) reference work, not a rerun per checkpoint. */
typedef struct mpcarry {
    int64_t len;          /* steps run so far */
    int64_t hist_len;     /* carried examples, <= W - 1 */
    double *prev, *hk, *hv; /* [n], [W - 1][n], [W - 1][m] */
    mpfr_t *out, *S;      /* [cap][m] a segment's outputs, [m][n] the memory */
    int64_t steps;        /* MPFR steps run (the work the study's test counts) */
} mpcarry;

static void mpcarry_free(mpcarry *p, int64_t cap_out, int64_t mn)
{
    if (p->out)
        for (int64_t i = 0; i < cap_out; i++) mpfr_clear(p->out[i]);
    if (p->S)
        for (int64_t i = 0; i < mn; i++) mpfr_clear(p->S[i]);
    free(p->prev), free(p->hk), free(p->hv), free(p->out), free(p->S);
}

static int mpcarry_alloc(mpcarry *p, int64_t cap, int64_t n, int64_t m, int64_t W)
{
    memset(p, 0, sizeof *p);
    p->prev = malloc(sizeof(double) * (size_t)n);
    p->hk = malloc(sizeof(double) * (size_t)(W * n));
    p->hv = malloc(sizeof(double) * (size_t)(W * m));
    p->out = malloc(sizeof(mpfr_t) * (size_t)(cap * m + 1));
    p->S = malloc(sizeof(mpfr_t) * (size_t)(m * n));
    if (!p->prev || !p->hk || !p->hv || !p->out || !p->S) {
        free(p->out), free(p->S); /* nothing initialised yet */
        p->out = p->S = NULL;
        mpcarry_free(p, 0, 0);
        return -1;
    }
    for (int64_t i = 0; i < cap * m; i++) mpfr_init2(p->out[i], 256);
    for (int64_t i = 0; i < m * n; i++) mpfr_init2(p->S[i], 256), mpfr_set_zero(p->S[i], 1);
    return 0;
}

/* After a segment of L steps: its examples (prefix alignment: step t's is
 * the key of step t - 1 with v_t) join the carried ones, of which the last
 * W - 1 stay; its last key is the next segment's previous key. */
static void mpcarry_advance(mpcarry *p, const falcon_inputs *seg, int64_t n, int64_t m, int64_t W)
{
    const double *k = seg->k, *v = seg->v;
    for (int64_t t = p->len ? 0 : 1; t < seg->T && W > 1; t++) {
        const double *key = t ? k + (t - 1) * n : p->prev;
        if (p->hist_len == W - 1) { /* drop the oldest */
            memmove(p->hk, p->hk + n, sizeof(double) * (size_t)((W - 2) * n));
            memmove(p->hv, p->hv + m, sizeof(double) * (size_t)((W - 2) * m));
            p->hist_len--;
        }
        memcpy(p->hk + p->hist_len * n, key, sizeof(double) * (size_t)n);
        memcpy(p->hv + p->hist_len * m, v + t * m, sizeof(double) * (size_t)m);
        p->hist_len++;
    }
    memcpy(p->prev, k + (seg->T - 1) * n, sizeof(double) * (size_t)n);
    p->len += seg->T;
}

/* The MPFR recurrence over the segment seg, continued from the carried
 * state: the segment's outputs and the final S, read in long double. */
static falcon_status mpcarry_run(mpcarry *p, const gate_case *c, const falcon_inputs *seg, long double *out,
                                 long double *S)
{
    const int64_t n = c->n, m = c->m, L = seg->T;
    falcon_ref_head h = {.T = L, .n = n, .m = m, .q = seg->q, .k = seg->k, .v = seg->v, .beta = seg->beta,
                         .alpha = seg->alpha, .gain = seg->gain, .S0 = NULL,
                         .prev_key = p->len ? p->prev : NULL, .hist_k = p->hk, .hist_v = p->hv,
                         .hist_len = p->hist_len};
    falcon_ref_opts o = {.variant = c->variant, .align = c->align, .phi = c->phi, .eps = c->eps,
                         .window = c->window, .chunk = L, .bits = 256};
    falcon_status s = falcon_ref_recurrent_mp_carry(&o, &h, p->out, p->S);
    for (int64_t i = 0; !s && i < L * m; i++) out[i] = mpfr_get_ld(p->out[i], MPFR_RNDN);
    for (int64_t i = 0; !s && i < m * n; i++) S[i] = mpfr_get_ld(p->S[i], MPFR_RNDN);
    if (!s) mpcarry_advance(p, seg, n, m, c->window), p->steps += L;
    return s;
}

double stab_seconds(void) { return omp_get_wtime(); }

static double cpu_now(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) ? 0 : (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every curve of s still running at `end` runs the segment d (steps
 * [end - c->T, end)) and accumulates its errors against the reference's
 * outputs ro and final state rS. point: 0 not a checkpoint, else a point
 * is recorded against MPFR (1) or the long-double reference (2). */
static void run_curves(stream *s, const gate_case *c, const gate_data *d, int64_t end, int point,
                       const long double *ro, const long double *rS)
{
    const int64_t m = c->m, n = c->n;
    for (int i = 0; i < s->ncurve; i++) {
        curve *k = &s->c[i];
        if (end > k->tmax || k->error[0]) continue;
        gate_result r;
        const double u = gate_unit_roundoff(k->prec);
        falcon_status st = gate_run_in(c, d, k->form, k->backend, k->prec, k->st, &r);
        if (st) {
            snprintf(k->error, sizeof k->error, "T=%lld: %s", (long long)end, falcon_last_error());
            s->failed = 1;
            continue;
        }
        for (int64_t j = 0; j < c->T * m; j++) {
            const long double dd = r.out[j] - ro[j];
            k->num += dd * dd, k->den += ro[j] * ro[j];
        }
        if (point) {
            k->T[k->npts] = (double)end;
            k->out_u[k->npts] = (double)(study_norm_ratio(k->num, k->den) / u);
            k->S_u[k->npts] = (double)(study_relerr(r.S, rS, m * n) / u);
            k->ref[k->npts++] = point == 2;
            if (!isfinite(k->out_u[k->npts - 1]) || !isfinite(k->S_u[k->npts - 1])) s->failed = 1;
        }
        gate_result_free(&r);
    }
}

/* The fits of every curve of a finished stream (on T <= P->tfit, tested
 * on the points beyond); frees the kernels' states. */
static void fit_curves(const params *P, stream *s)
{
    for (int i = 0; i < s->ncurve; i++) {
        curve *k = &s->c[i];
        int nfit = 0;
        while (nfit < k->npts && k->T[nfit] <= (double)P->tfit) nfit++;
        k->fo = study_fit(k->T, k->out_u, nfit, 1e9);
        k->fs = study_fit(k->T, k->S_u, nfit, 1e9);
        k->bo = beyond_of(k->T, k->out_u, k->npts, nfit, k->fo);
        k->bs = beyond_of(k->T, k->S_u, k->npts, nfit, k->fs);
        /* PARALLEL_NOTE: no extrapolation of the parallel form's fits. */
        if (k->form == FALCON_FORM_PARALLEL) k->fo.at = k->fs.at = NAN;
        falcon_state_free(k->st);
        k->st = NULL;
    }
}

/* Runs stream idx: every curve of it to its length, from its saved state
 * with --resume. Past the MPFR range its state is saved every P->every
 * seconds. 0, or -1 (no memory, or a save failed). */
int stab_run_stream(const params *P, stream *s, int idx, uint64_t seed)
{
    const double t0 = stab_seconds(), c0 = cpu_now();
    const int64_t n = P->n, m = P->m, W = falcon_variant_has_window(s->variant) ? P->W : 1;
    const long double uld = ldref_unit_roundoff();
    gate_case c = {s->variant, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, s->decay, 1, 0, 1, n, m, W, P->C,
                   EPS, 1.0, 0};
    int64_t cp[MAXPTS];
    const int ncp = study_grid(100, P->tmax, cp, MAXPTS);
    const int64_t tmpfr = P->tmpfr < P->tmax ? P->tmpfr : P->tmax;
    ldref ld;
    mpcarry pre;
    const int64_t maxseg = P->seg > tmpfr ? P->seg : tmpfr;
    long double *ldo = malloc(sizeof(long double) * (size_t)(maxseg * m));
    long double *mpo = malloc(sizeof(long double) * (size_t)(maxseg * m));
    long double *mpS = malloc(sizeof(long double) * (size_t)(m * n));
    int rc = ldref_init(&ld, c.variant, c.align, n, m, W, EPS) | mpcarry_alloc(&pre, tmpfr, n, m, W);
    rc |= !ldo || !mpo || !mpS;
    for (int i = 0; i < s->ncurve && !rc; i++) rc |= falcon_state_create(1, n, m, W, &s->c[i].st) != FALCON_OK;
    long double cnum = 0, cden = 0; /* long double vs MPFR, outputs */
    int64_t t = 0, seg = 0;
    int ci = 0;
    if (!rc && P->resume) {
        position pos;
        const int r = stab_load_state(P, idx, s, &pos, &ld);
        if (r < 0) rc = -1;
        if (r > 0) {
            t = pos.t, seg = pos.seg, ci = pos.ci, cnum = pos.cnum, cden = pos.cden;
            fprintf(stderr, "  stream %d (%s %s %s) resumed at T = %lld\n", idx, falcon_precision_name(s->prec),
                    falcon_variant_name(s->variant), gate_decay_name(s->decay), (long long)t);
        }
    }
    double saved_at = stab_seconds();
    for (; t < P->tmax && ci < ncp && !rc; seg++) {
        /* Segments end at checkpoints; beyond MPFR's range they are at most
         * P->seg long (within it, at most tmpfr: the carried MPFR outputs). */
        const int64_t end = cp[ci] <= tmpfr || cp[ci] < t + P->seg ? cp[ci] : t + P->seg;
        gate_data d;
        c.T = end - t;
        c.seed = seed * 1000003u + (uint64_t)seg;
        if (gate_data_make(&c, s->prec, &d)) {
            rc = -1;
            break;
        }
        ldref_run(&ld, &d.in64, ldo);
        const long double *ro = ldo, *rS = ld.S;
        const int use_mpfr = end <= tmpfr;
        if (use_mpfr) {
            if (mpcarry_run(&pre, &c, &d.in64, mpo, mpS)) {
                snprintf(s->c[0].error, sizeof s->c[0].error, "MPFR reference: %s", falcon_last_error());
                s->failed = 1, rc = -1;
            }
            for (int64_t i = 0; i < c.T * m; i++) {
                const long double dd = ldo[i] - mpo[i];
                cnum += dd * dd, cden += mpo[i] * mpo[i];
            }
            ro = mpo, rS = mpS;
        }
        const int at_cp = end == cp[ci];
        if (at_cp && use_mpfr) {
            /* study_relerr takes a double result: the long double state is
             * compared directly here. */
            long double sn = 0, sd = 0;
            for (int64_t i = 0; i < m * n; i++) sn += (ld.S[i] - mpS[i]) * (ld.S[i] - mpS[i]), sd += mpS[i] * mpS[i];
            s->cT[s->ncheck] = (double)end;
            s->c_out[s->ncheck] = (double)(study_norm_ratio(cnum, cden) / uld);
            s->c_S[s->ncheck++] = (double)(study_norm_ratio(sn, sd) / uld);
        }
        if (!rc) run_curves(s, &c, &d, end, at_cp ? (use_mpfr ? 1 : 2) : 0, ro, rS);
        gate_data_free(&d);
        ci += at_cp;
        t = end;
        /* Past the MPFR range the state is the kernels', the long-double
         * reference's and the accumulators: saved whole, every P->every s. */
        if (!rc && t >= tmpfr && t < P->tmax && ci < ncp && stab_seconds() - saved_at >= P->every) {
            const position pos = {t, seg + 1, ci, 0, cnum, cden};
            int r;
#pragma omp critical(study_save)
            r = stab_save_state(P, idx, s, &pos, &ld);
            if (r) s->failed = 1, rc = -1;
            saved_at = stab_seconds();
        }
    }
    fit_curves(P, s);
    ldref_free(&ld);
    s->mpfr_steps = pre.steps;
    mpcarry_free(&pre, tmpfr * m, m * n);
    free(ldo), free(mpo), free(mpS);
    s->seconds = stab_seconds() - t0;
    s->cpu_seconds = cpu_now() - c0;
    return rc ? -1 : 0;
}

