/*
 * `falcon stability --grad`: the error of the fp32 backward pass
 * (docs/math.md section 12) as T grows, for every decay regime of the gate
 * and Falcon-1, Falcon-3 and Falcon-1A, in the recurrent and chunk forms of
 * one backend (the most capable here unless --backend names one).
 *
 * A gradient is a whole call's: the reverse sweep starts at T, so each
 * length is its own call (the gate's inputs and cotangents of that length,
 * one seed per stream: the lengths share their first steps, and reset-slow
 * puts its near-reset at T / 3 as the gate does), never a prefix of a
 * longer sweep. Each tensor's error is normwise relative, in fp32's u, as
 * the gradient gate measures it (gate_grad_compare).
 *
 * The reference: the MPFR reverse sweep (256 bits) up to --tmpfr; beyond,
 * the fp64 backward pass stands in, and only after it has itself been
 * checked against MPFR on every length both ran (SPEC section 4): every
 * tensor's error there, and its fit c T^p extrapolated to the longest T,
 * below STANDIN_SHARE of fp32's u, so that the reference moves no measured
 * error by more than that. (Not the gradient gate's fp64 threshold: that
 * is derived for the gate's short calls and does not grow with T, while a
 * correct fp64 Falcon-1A without decay grows like T^1/2 and reaches it near
 * T = 10^4; standin.dat lists it beside each point, for scale.) A stand-in
 * that fails the check, or that no MPFR length checked, measures nothing:
 * its stream stops at the MPFR range and the study fails, saying why.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "stab-grad.h"

#define GRAD_EPS 0x1p-20 /* exact in fp32 and fp64: kernels, stand-in and MPFR see one eps */

const int grad_gate_index[GT_COUNT] = {GG_DQ, GG_DK, GG_DV, GG_DBETA, GG_DALPHA, GG_DS0};
const falcon_form grad_forms[GFORMS] = {FALCON_FORM_RECURRENT, FALCON_FORM_CHUNK};

int grad_grid(int64_t tmax, int64_t *T, int cap)
{
    int n = 0;
    for (int64_t dec = 100; dec <= tmax && n < cap - 1; dec *= 10)
        for (int k = 0; k < 2 && n < cap - 1; k++) {
            const int64_t t = k ? 3 * dec : dec;
            if (t < tmax) T[n++] = t;
        }
    T[n++] = tmax;
    return n;
}

static double thread_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The gate's case of stream s at length T: prefix alignment, identity
 * feature map, fresh state, n = m. */
static gate_grad_case case_at(const gparams *P, const gstream *s, int64_t T)
{
    const gate_grad_case g = {
        .c = {.variant = s->variant, .align = FALCON_ALIGN_PREFIX, .phi = FALCON_PHI_IDENTITY, .decay = s->decay,
              .B = 1, .T = T, .H = 1, .n = P->n, .m = P->n,
              .window = falcon_variant_has_window(s->variant) ? P->W : 1, .chunk = P->C, .eps = GRAD_EPS,
              .key_scale = 1.0, .seed = 2000u + 10u * (uint64_t)s->variant + (uint64_t)s->decay},
    };
    return g;
}

static double rms_of(const double *x, int64_t count)
{
    long double s = 0;
    for (int64_t i = 0; i < count; i++) s += (long double)x[i] * x[i];
    return count ? (double)sqrtl(s / (long double)count) : NAN;
}

/* One length's results into the stream's next point: the kernels against
 * the reference (MPFR when ref is given, else the stand-in), and with MPFR
 * the stand-in against it. */
static void record_point(gstream *s, const gate_grad_case *g, const gate_grad_result *k, const gate_grad_result *sd,
                         const gate_grad_result *ref)
{
    const int i = s->npts++;
    const gate_grad_result *R = ref ? ref : sd;
    double e[GG_COUNT];
    s->T[i] = (double)g->c.T;
    for (int f = 0; f < GFORMS; f++) {
        gate_grad_compare(&k[f], R, FALCON_FP32, e);
        for (int t = 0; t < GT_COUNT; t++) s->err[f][t][i] = R->count[grad_gate_index[t]] ? e[grad_gate_index[t]] : NAN;
    }
    if (ref) gate_grad_compare(sd, ref, FALCON_FP64, e);
    for (int t = 0; t < GT_COUNT; t++) {
        const int gi = grad_gate_index[t];
        const int has = R->count[gi] > 0;
        s->rms[t][i] = has ? rms_of(R->x[gi], R->count[gi]) : NAN;
        s->kappa[t][i] = has && ref ? ref->cond[gi] : NAN;
        s->sd_err[t][i] = has && ref ? e[gi] : NAN;
        s->sd_thr[t][i] =
            has && ref ? gate_grad_threshold(&g->c, FALCON_FORM_RECURRENT, FALCON_FP64, gi, ref->cond[gi]) : NAN;
    }
    if (ref) s->nmpfr++;
}

/* Length T of stream s: the fp32 kernels, the stand-in and (use_mpfr) the
 * MPFR reference on one set of inputs and cotangents. */
static falcon_status run_point(const gparams *P, gstream *s, int64_t T, int use_mpfr)
{
    const gate_grad_case g = case_at(P, s, T);
    gate_data d;
    gate_cotangents ct = {0};
    gate_grad_result k[GFORMS], sd, ref;
    memset(k, 0, sizeof k), memset(&sd, 0, sizeof sd), memset(&ref, 0, sizeof ref);
    falcon_status st = FALCON_OK;
    if (gate_data_make(&g.c, FALCON_FP32, &d) || gate_cotangents_make(&g.c, FALCON_FP32, &ct)) st = FALCON_E_NOMEM;
    for (int f = 0; f < GFORMS && !st; f++) st = gate_grad_run(&g, &d, &ct, grad_forms[f], P->backend, NULL, &k[f]);
    /* The stand-in runs the same values (exact in both precisions). */
    gate_data dsd = d;
    gate_cotangents csd = ct;
    if (P->standin == FALCON_FP64) dsd.in = d.in64, dsd.prec = FALCON_FP64, csd.dO = ct.dO64;
    if (!st) st = gate_grad_run(&g, &dsd, &csd, FALCON_FORM_RECURRENT, P->backend, NULL, &sd);
    if (!st && use_mpfr) st = gate_grad_reference(&g, &d, &ct, NULL, &ref);
    if (!st) record_point(s, &g, k, &sd, use_mpfr ? &ref : NULL);
    else
        snprintf(s->error, sizeof s->error, "T = %lld: %s: %s", (long long)T, falcon_status_name(st),
                 falcon_last_error());
    for (int f = 0; f < GFORMS; f++) gate_grad_result_free(&k[f]);
    gate_grad_result_free(&sd), gate_grad_result_free(&ref);
    gate_cotangents_free(&ct), gate_data_free(&d);
    return st;
}

/* The stand-in's check against MPFR on the lengths both ran: 1 accepted,
 * 0 refused (s->error says why). Errors in fp32's u: what the stand-in can
 * move the fp32 errors it measures by. */
static int standin_judge(const gparams *P, gstream *s)
{
    const char *name = falcon_precision_name(P->standin);
    const double to_u32 = gate_unit_roundoff(FALCON_FP64) / gate_unit_roundoff(FALCON_FP32);
    if (!s->nmpfr) {
        snprintf(s->error, sizeof s->error,
                 "the %s stand-in was not checked against MPFR (no length of the grid is within --tmpfr %lld): "
                 "refused, no point past the MPFR range",
                 name, (long long)P->tmpfr);
        return 0;
    }
    double bound = 0;
    for (int t = 0; t < GT_COUNT; t++) {
        if (isnan(s->sd_err[t][0])) continue; /* tensor absent */
        double worst = 0;
        for (int i = 0; i < s->nmpfr; i++) {
            if (!(s->sd_err[t][i] * to_u32 <= STANDIN_SHARE)) {
                snprintf(s->error, sizeof s->error,
                         "the %s stand-in's %s is off MPFR by %.3g fp32 u at T = %.0f, above the %.2g u it may "
                         "add: refused",
                         name, gate_grad_name(grad_gate_index[t]), s->sd_err[t][i] * to_u32, s->T[i], STANDIN_SHARE);
                return 0;
            }
            if (s->sd_err[t][i] > worst) worst = s->sd_err[t][i];
        }
        const loglog_fit fit = study_fit(s->T, s->sd_err[t], s->nmpfr, (double)P->tmax);
        const double at = isfinite(fit.at) && fit.at > worst ? fit.at : worst;
        if (at * to_u32 > bound) bound = at * to_u32;
    }
    s->sd_bound = bound;
    if (bound > STANDIN_SHARE) {
        snprintf(s->error, sizeof s->error,
                 "the %s stand-in's error extrapolated to T = %lld is %.3g fp32 u, above the %.2g u it may add: "
                 "refused", name, (long long)P->tmax, bound, STANDIN_SHARE);
        return 0;
    }
    return 1;
}

int grad_run_stream(const gparams *P, gstream *s)
{
    int64_t T[GMAXPTS];
    const int n = grad_grid(P->tmax, T, GMAXPTS);
    const double w0 = omp_get_wtime(), c0 = thread_cpu_seconds();
    int rc = 0;
    s->standin = -1;
    for (int i = 0; i < n && !rc; i++) {
        const int use_mpfr = T[i] <= P->tmpfr;
        if (!use_mpfr && s->standin < 0 && !(s->standin = standin_judge(P, s))) break;
        const falcon_status st = run_point(P, s, T[i], use_mpfr);
        if (st) rc = st == FALCON_E_NOMEM ? -1 : 1;
    }
    /* Every length within MPFR's range: the check is still made and reported. */
    if (!rc && s->standin < 0) s->standin = standin_judge(P, s);
    for (int f = 0; f < GFORMS; f++)
        for (int t = 0; t < GT_COUNT; t++) s->fit[f][t] = study_fit(s->T, s->err[f][t], s->npts, (double)P->tmax);
    s->seconds = omp_get_wtime() - w0, s->cpu_seconds = thread_cpu_seconds() - c0;
    return rc < 0 ? -1 : 0;
}

/* ---- the command ---- */

static void profile_set(gparams *P, int full)
{
    static const falcon_variant variants[] = {FALCON_1, FALCON_3, FALCON_1A};
    P->profile = full ? "full" : "quick";
    P->n = 8, P->W = 4, P->C = 64;
    P->tmax = full ? 1000000 : 100000;
    P->tmpfr = full ? 10000 : 1000;
    P->nstream = 0;
    for (int v = 0; v < 3; v++)
        for (int d = 0; d < GATE_DECAY_COUNT; d++)
            P->svar[P->nstream] = variants[v], P->sdecay[P->nstream++] = (gate_decay)d;
}

/*
 * The plan's cost model: CPU microseconds per step at n = m = 8 on one
 * core of the 2-core host the quick budget is set for (the kernels: both
 * fp32 forms and the stand-in together; MPFR: its reverse sweep with the
 * absolute one), index falcon1, falcon3, falcon1a; work scales with n m.
 */
static const double kernel_us[3] = {6.0, 10.0, 5.5}, mpfr_us[3] = {190.0, 500.0, 125.0};

static int variant_row(falcon_variant v) { return v == FALCON_3 ? 1 : v == FALCON_1A ? 2 : 0; }

static double stream_plan(const gparams *P, int i, int64_t *ksteps, int64_t *msteps)
{
    int64_t T[GMAXPTS];
    const int n = grad_grid(P->tmax, T, GMAXPTS);
    *ksteps = *msteps = 0;
    for (int j = 0; j < n; j++) {
        *ksteps += (GFORMS + 1) * T[j];
        if (T[j] <= P->tmpfr) *msteps += T[j];
    }
    const int r = variant_row(P->svar[i]);
    const double scale = (double)(P->n * P->n) / 64.0;
    return 1e-6 * scale * ((double)*ksteps / (GFORMS + 1) * kernel_us[r] + (double)*msteps * mpfr_us[r]);
}

static void print_plan(const gparams *P)
{
    int64_t kt = 0, mt = 0, k, m;
    double cost = 0;
    for (int i = 0; i < P->nstream; i++) {
        const double c = stream_plan(P, i, &k, &m);
        printf("plan: grad %s %s: %lld kernel steps, %lld MPFR steps, %.1f CPU s\n", falcon_variant_name(P->svar[i]),
               gate_decay_name(P->sdecay[i]), (long long)k, (long long)m, c);
        kt += k, mt += m, cost += c;
    }
    printf("plan: grad total %d streams, %lld kernel steps, %lld MPFR steps, %.0f CPU s\n", P->nstream,
           (long long)kt, (long long)mt, cost);
}

static void usage(void)
{
    printf("usage: falcon stability --grad [--profile quick|full] [--out DIR] [--backend NAME] [--n N]\n"
           "                        [--tmax T] [--tmpfr T] [--chunk C] [--variant V] [--decay D]\n"
           "                        [--threads P] [--standin fp64|fp32] [--plan]\n"
           "Error of the fp32 backward pass (recurrent and chunk forms, one backend: the most capable\n"
           "here unless --backend names one) against a reference as T grows: every gradient tensor\n"
           "(dq, dk, dv, dbeta, dalpha, dS0) of Falcon-1, Falcon-3 (W = 4) and Falcon-1A in every decay\n"
           "regime of the gate, at T = 100, 300, 1000, ... and the longest T, each length its own call.\n"
           "Reference: the MPFR reverse sweep to --tmpfr; beyond, the fp64 backward pass, used only\n"
           "once it passed its own check against MPFR on the lengths both ran (DIR/standin.dat).\n"
           "Profiles: quick: n = m = 8, T to 1e5, MPFR to 1e3; full: T to 1e6, MPFR to 1e4.\n"
           "Writes DIR/grad.json, DIR/fits.dat (c T^p per curve), DIR/standin.dat and DIR/curves/*.dat\n"
           "(default DIR report/stability-grad). --variant, --decay: that one only. --plan: the\n"
           "planned work and its estimated CPU time, nothing run. --standin fp32: an unfit stand-in,\n"
           "which the check refuses (for the tests).\n");
}

enum { O_GRAD = 1, O_PROFILE, O_OUT, O_BACKEND, O_N, O_TMAX, O_TMPFR, O_CHUNK, O_THREADS, O_VARIANT, O_DECAY,
       O_STANDIN, O_PLAN, O_HELP };

/* A named option's value: 0, or 2 with a message. */
static int named_option(gparams *P, int id, const char *v, int *var, int *dec)
{
    if (id == O_PROFILE) {
        const int full = study_parse_profile(v);
        if (full < 0) return 2;
        profile_set(P, full);
    } else if (id == O_OUT) {
        P->out = v;
    } else if (id == O_BACKEND) {
        const int b = falcon_backend_parse(v);
        if (b < 0 || b == FALCON_BACKEND_MPFR || !falcon_backend_available((falcon_backend)b))
            return cli_error("--backend %s: not a kernel backend available here", v);
        P->backend = (falcon_backend)b;
    } else if (id == O_VARIANT) {
        *var = falcon_variant_parse(v);
        if (*var != FALCON_1 && *var != FALCON_3 && *var != FALCON_1A)
            return cli_error("--variant %s: must be falcon1, falcon3 or falcon1a", v);
    } else if (id == O_DECAY) {
        for (*dec = 0; *dec < GATE_DECAY_COUNT && strcmp(v, gate_decay_name((gate_decay)*dec)); ++*dec) {}
        if (*dec == GATE_DECAY_COUNT) return cli_error("--decay %s: not a decay regime of the gate", v);
    } else if (id == O_STANDIN) {
        const int p = falcon_precision_parse(v);
        if (p != FALCON_FP64 && p != FALCON_FP32) return cli_error("--standin %s: must be fp64 or fp32", v);
        P->standin = (falcon_precision)p;
    }
    return 0;
}

/* Keep the streams of one variant and/or one regime (-1: all). */
static void select_streams(gparams *P, int var, int dec)
{
    int k = 0;
    for (int i = 0; i < P->nstream; i++)
        if ((var < 0 || (int)P->svar[i] == var) && (dec < 0 || (int)P->sdecay[i] == dec))
            P->svar[k] = P->svar[i], P->sdecay[k++] = P->sdecay[i];
    P->nstream = k;
}

/* 0 parsed, else the exit status (-1: --help printed, exit 0). */
static int parse(gparams *P, int argc, char **argv)
{
    static const opt_def defs[] = {
        {"grad", O_GRAD, 0}, {"profile", O_PROFILE, 1}, {"out", O_OUT, 1}, {"backend", O_BACKEND, 1},
        {"n", O_N, 1}, {"tmax", O_TMAX, 1}, {"tmpfr", O_TMPFR, 1}, {"chunk", O_CHUNK, 1},
        {"threads", O_THREADS, 1}, {"variant", O_VARIANT, 1}, {"decay", O_DECAY, 1}, {"standin", O_STANDIN, 1},
        {"plan", O_PLAN, 0}, {"help", O_HELP, 0}, {NULL, 0, 0}};
    int64_t n = 0, tmax = 0, tmpfr = -1, chunk = 0, threads = 0;
    const study_int_opt ints[] = {{O_N, 1, 64, &n}, {O_TMAX, 100, 100000000, &tmax}, {O_TMPFR, 0, 1000000, &tmpfr},
                                  {O_CHUNK, 1, 4096, &chunk}, {O_THREADS, 1, 1024, &threads}};
    int var = -1, dec = -1;
    memset(P, 0, sizeof *P);
    profile_set(P, 0);
    P->out = "report/stability-grad", P->backend = FALCON_BACKEND_AUTO, P->standin = FALCON_FP64;
    opt_scan sc;
    opt_begin(&sc, argc, argv, "falcon stability --grad", defs, 0);
    for (int id; (id = opt_next(&sc)) != OPT_END;) {
        const int as_int = study_int_option(&sc, id, ints, (int)(sizeof ints / sizeof ints[0]));
        if (as_int) {
            if (as_int < 0) return 2;
            continue;
        }
        if (id == OPT_ERROR) return CLI_FAIL;
        if (id == O_HELP) return usage(), -1;
        if (id == O_PLAN) P->plan = 1;
        else if (named_option(P, id, sc.value, &var, &dec)) return 2;
    }
    if (n) P->n = n;
    if (tmax) P->tmax = tmax;
    if (tmpfr >= 0) P->tmpfr = tmpfr;
    if (chunk) P->C = chunk;
    P->threads = (int)threads;
    P->backend = falcon_backend_resolve(P->backend);
    select_streams(P, var, dec);
    return 0;
}

/* The streams by decreasing planned cost, so that the long ones start first. */
static void order_streams(const gparams *P, int *order)
{
    int64_t k, m;
    double cost[GMAXSTREAM];
    for (int i = 0; i < P->nstream; i++) order[i] = i, cost[i] = stream_plan(P, i, &k, &m);
    for (int i = 1; i < P->nstream; i++)
        for (int j = i; j > 0 && cost[order[j]] > cost[order[j - 1]]; j--) {
            const int x = order[j];
            order[j] = order[j - 1], order[j - 1] = x;
        }
}

int study_grad_main(int argc, char **argv)
{
    static const char *const reports[] = {"grad.json", "fits.dat", "standin.dat", NULL};
    gparams P;
    const int prc = parse(&P, argc, argv);
    if (prc) return prc < 0 ? 0 : prc;
    if (P.plan) return print_plan(&P), 0;
    if (study_mkdir(P.out) || study_reports_check(P.out, "stability-grad", reports)) return 2;
    printf("falcon stability --grad, %s profile: %d streams (variant x decay), fp32 %s recurrent and chunk (C = %lld), "
           "n = m = %lld, W = %lld, T to %lld; references: MPFR to T = %lld, the %s backward pass beyond once checked\n",
           P.profile, P.nstream, falcon_backend_name(P.backend), (long long)P.C, (long long)P.n, (long long)P.W,
           (long long)P.tmax, (long long)P.tmpfr, falcon_precision_name(P.standin));
    fflush(stdout);
    gstream *ss = calloc((size_t)P.nstream + 1, sizeof *ss);
    if (!ss) return 2;
    int order[GMAXSTREAM], nomem = 0, done = 0;
    order_streams(&P, order);
    const double t0 = omp_get_wtime();
#pragma omp parallel for schedule(dynamic, 1) num_threads(P.threads > 0 ? P.threads : omp_get_max_threads())
    for (int j = 0; j < P.nstream; j++) {
        gstream *s = &ss[order[j]];
        s->variant = P.svar[order[j]], s->decay = P.sdecay[order[j]];
        const int r = grad_run_stream(&P, s);
#pragma omp critical(grad_progress)
        {
            nomem |= r;
            fprintf(stderr, "  [%d/%d] %s %s: %.1f s (cpu %.2f s)%s%s\n", ++done, P.nstream,
                    falcon_variant_name(s->variant), gate_decay_name(s->decay), s->seconds, s->cpu_seconds,
                    *s->error ? ": " : "", s->error);
        }
    }
    int rc = grad_report(&P, ss, omp_get_wtime() - t0);
    if (nomem && rc == 0) rc = 1;
    free(ss);
    return rc;
}
