/*
 * `falcon stability`: the report set (stability.json, fits.dat,
 * refcheck.dat, thresholds.dat, beyond.dat, curves/NAME.dat) and the printed
 * summary, from every stream's results.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "stab.h"

static int beyond_held(const beyond_fit *b)
{
    const double r = b->measured / b->extrapolated;
    return r >= 1 / BEYOND_HELD && r <= BEYOND_HELD;
}

/* ---- output ---- */

void stab_curve_name(const stream *s, const curve *k, char *buf, size_t len)
{
    snprintf(buf, len, "%s_%s_%s_%s_%s", falcon_precision_name(k->prec), falcon_variant_name(s->variant),
             gate_decay_name(s->decay), falcon_backend_name(k->backend), falcon_form_name(k->form));
}

static void json_fit(FILE *f, const char *key, loglog_fit x)
{
    fprintf(f, "\"%s\": {\"p\": ", key);
    study_json_num(f, x.p);
    fputs(", \"c\": ", f);
    study_json_num(f, x.c);
    fputs(", \"at_1e9\": ", f);
    study_json_num(f, x.at);
    fprintf(f, ", \"points\": %d}", x.npts);
}

/* A curve's points past the fit's range: null when it has none. */
static void json_beyond(FILE *f, const char *key, const beyond_fit *b)
{
    fprintf(f, "\"%s\": ", key);
    if (!b->npts) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"points\": %d, \"T\": %.0f, \"measured\": ", b->npts, b->T);
    study_json_num(f, b->measured);
    fputs(", \"extrapolated\": ", f);
    study_json_num(f, b->extrapolated);
    fputs(", \"p_beyond\": ", f);
    study_json_num(f, b->p);
    fprintf(f, ", \"p_held\": %s}", beyond_held(b) ? "true" : "false");
}

/* Why a kernel backend of the gate's table has no curves in this study, or
 * NULL when it has. The SIMDe build of the AVX-512 kernels is left out
 * where the native build runs: it is the same source, its purpose is to
 * test that logic on machines without AVX-512 (where it stands in for
 * avx512 here too), and emulated it costs a quarter of the quick profile's
 * time. --backend avx512-simde still selects it. */
const char *stab_skip_reason(const params *P, falcon_backend be)
{
    if (P->only_backend >= 0 && (int)be != P->only_backend) return NULL; /* not asked for: not named */
    if (!falcon_backend_available(be)) return falcon_backend_describe(be);
    if (be == FALCON_BACKEND_AVX512_SIMDE && P->only_backend < 0 && falcon_backend_available(FALCON_BACKEND_AVX512))
        return "the avx512 kernels built against SIMDe: left out where the native avx512 build runs "
               "(--backend avx512-simde runs it)";
    return NULL;
}

static int write_json(const params *P, const stream *ss, int ns, double secs)
{
    char path[4096];
    FILE *f = study_open(P->out, "stability.json", path, sizeof path);
    if (!f) return -1;
    /* which build computed these curves: --resume and merge take results
     * of one build only, so one line names it */
    char here[512];
    if (!P->build) stab_build_identity(here, sizeof here);
    fputs("{\n  \"build\": ", f);
    study_json_str(f, P->build ? P->build : here);
    fprintf(f, ",\n  \"profile\": \"%s\", \"n\": %lld, \"m\": %lld, \"window\": %lld, \"chunk\": %lld,\n"
               "  \"eps\": %.9g, \"align\": \"prefix\", \"phi\": \"identity\", \"segment\": %lld,\n"
               "  \"tmax\": %lld, \"tmax_other_backends\": %lld, \"tmax_parallel\": %lld, \"tmax_mpfr\": %lld, "
               "\"mpfr_bits\": 256, \"fit_tmax\": %lld,\n"
               "  \"long_double_unit_roundoff\": %.6g, \"seconds\": %.1f,\n"
               "  \"references\": \"MPFR recurrence (256 bits) for T <= %lld; beyond, the long-double "
               "recurrence, itself checked against MPFR on T <= %lld (reference_check)\",\n"
               "  \"errors\": \"normwise relative, units of the precision's roundoff; out_u cumulative over "
               "outputs 1..T, state_u of S_T\",\n"
               "  \"decays\": {\"none\": \"alpha = 1\", \"mild\": \"alpha uniform in [0.98, 1]\", \"strong\": "
               "\"alpha = 0.5\", \"extreme\": \"the smallest normal number of the precision every 5th step, 0.9 "
               "otherwise\", \"mix\": \"5%% smallest normal, 25%% 1, 20%% 0.5, else uniform in [0.9, 1]\"},\n"
               "  \"inputs\": \"gate/gate.c generator per segment (q, k, v uniform in [-1, 1], beta in [0.1, 1.9] "
               "(regression) or [0, 1])\",\n"
               "  \"notes\": \"" PARALLEL_NOTE "\",\n  \"skipped\": [",
            P->profile, (long long)P->n, (long long)P->m, (long long)P->W, (long long)P->C, EPS,
            (long long)P->seg, (long long)P->tmax, (long long)P->tmax_other, (long long)P->tmax_par, (long long)P->tmpfr,
            (long long)P->tfit,
            (double)ldref_unit_roundoff(), secs, (long long)P->tmpfr, (long long)P->tmpfr);
    /* The backends this machine lacks (a kernel backend skipped is named, with why). */
    const char *sep = "";
    for (int b = 0; b < gate_backend_count; b++)
        if (P->skipmask >> b & 1) {
            const char *why = stab_skip_reason(P, gate_backends[b]);
            fprintf(f, "%s{\"backend\": \"%s\", \"why\": ", sep, falcon_backend_name(gate_backends[b]));
            study_json_str(f, why ? why : falcon_backend_describe(gate_backends[b]));
            fputc('}', f);
            sep = ", ";
        }
    fputs("],\n  \"reference_check\": [", f);
    sep = "\n";
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < ss[i].ncheck; j++) {
            const double r = (double)ldref_unit_roundoff() / gate_unit_roundoff(ss[i].prec);
            fprintf(f, "%s    {\"precision\": \"%s\", \"variant\": \"%s\", \"decay\": \"%s\", \"T\": %.0f, "
                       "\"out_uld\": %.3g, \"state_uld\": %.3g, \"out_u\": %.3g, \"state_u\": %.3g}",
                    sep, falcon_precision_name(ss[i].prec), falcon_variant_name(ss[i].variant),
                    gate_decay_name(ss[i].decay), ss[i].cT[j], ss[i].c_out[j], ss[i].c_S[j], ss[i].c_out[j] * r,
                    ss[i].c_S[j] * r);
            sep = ",\n";
        }
    fputs("\n  ],\n  \"curves\": [", f);
    sep = "\n";
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < ss[i].ncurve; j++) {
            const curve *k = &ss[i].c[j];
            fprintf(f, "%s    {\"precision\": \"%s\", \"variant\": \"%s\", \"decay\": \"%s\", \"backend\": \"%s\", "
                       "\"form\": \"%s\",\n     \"error\": ",
                    sep, falcon_precision_name(k->prec), falcon_variant_name(ss[i].variant),
                    gate_decay_name(ss[i].decay), falcon_backend_name(k->backend), falcon_form_name(k->form));
            if (k->error[0]) study_json_str(f, k->error);
            else fputs("null", f);
            fputs(", ", f);
            json_fit(f, "fit_out", k->fo);
            fputs(", ", f);
            json_fit(f, "fit_state", k->fs);
            fputs(",\n     ", f);
            json_beyond(f, "beyond_fit_out", &k->bo);
            fputs(", ", f);
            json_beyond(f, "beyond_fit_state", &k->bs);
            fputs(",\n     \"points\": [", f);
            for (int p = 0; p < k->npts; p++) {
                fprintf(f, "%s[%.0f, ", p ? ", " : "", k->T[p]);
                study_json_num(f, k->out_u[p]);
                fputs(", ", f);
                study_json_num(f, k->S_u[p]);
                fprintf(f, ", \"%s\"]", k->ref[p] ? "ld" : "mpfr");
            }
            fputs("]}", f);
            sep = ",\n";
        }
    fputs("\n  ]\n}\n", f);
    return study_close(f);
}

/* thresholds.dat: the gate's thresholds (gate/gate-thresholds.c) for the
 * study's sizes, per variant and form, for the plots: the memory's, and the
 * outputs' at a read condition number of 1 (the gate multiplies it by the
 * case's condition number, >= 1). The parallel form's depth grows with the
 * block, so its value is for its longest block here. */
static int write_thresholds(const params *P)
{
    char path[4096];
    FILE *f = study_open(P->out, "thresholds.dat", path, sizeof path);
    if (!f) return -1;
    fprintf(f, "# the gate's thresholds (units of u) for n = %lld, m = %lld, W = %lld (window variants), C = %lld:\n"
               "# variant form threshold_S threshold_out_at_read_cond_1 (fp32 and fp64), then the same in tf32\n"
               "# and in bf16 (units of their u_op; chunk form only, NaN for the others)\n",
            (long long)P->n, (long long)P->m, (long long)P->W, (long long)P->C);
    for (int v = 0; v < 6; v++)
        for (int fm = 0; fm < 3; fm++) {
            gate_case c;
            memset(&c, 0, sizeof c);
            c.variant = (falcon_variant)v;
            c.n = P->n, c.m = P->m, c.B = c.H = 1;
            c.window = falcon_variant_has_window(c.variant) ? P->W : 1;
            c.chunk = P->C;
            c.T = fm == FALCON_FORM_PARALLEL ? P->tmax_par : P->tmax;
            if (fm == FALCON_FORM_PARALLEL && c.T > falcon_parallel_block(c.window)) c.T = falcon_parallel_block(c.window);
            fprintf(f, "%s %s %.4g %.4g", falcon_variant_name(c.variant), falcon_form_name((falcon_form)fm),
                    gate_threshold(&c, (falcon_form)fm, FALCON_FP32),
                    gate_threshold_out(&c, (falcon_form)fm, FALCON_FP32, 1.0));
            for (int p = 0; p < 2; p++)
                if (gate_form_runs((falcon_form)fm, stab_operand_formats[p]))
                    fprintf(f, " %.4g %.4g", gate_threshold(&c, (falcon_form)fm, stab_operand_formats[p]),
                            gate_threshold_out(&c, (falcon_form)fm, stab_operand_formats[p], 1.0));
                else
                    fputs(" NaN NaN", f);
            fputc('\n', f);
        }
    return study_close(f);
}

/* beyond.dat: per curve with points past the fit's range, the last one
 * against the fit's extrapolation (outputs, then the state); written only
 * when the study measured past its fit range (profiles huge and deep). */
static int write_beyond(const params *P, const stream *ss, int ns)
{
    char path[4096];
    if (P->tfit >= P->tmax) return 0;
    FILE *f = study_open(P->out, "beyond.dat", path, sizeof path);
    if (!f) return -1;
    fprintf(f, "# falcon stability (%s): fit c T^p over T = 100 .. %lld, tested on the points measured beyond it\n"
               "# held: the measured error at T within a factor %g of the fit's extrapolation; p_beyond: the slope\n"
               "# of the points from T = %lld on. Units of roundoff u.\n"
               "# precision variant decay backend form fit_tmax T out_measured out_extrapolated out_ratio p_out "
               "p_beyond_out held_out S_measured S_extrapolated S_ratio p_S p_beyond_S held_S\n",
            P->profile, (long long)P->tfit, BEYOND_HELD, (long long)P->tfit);
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < ss[i].ncurve; j++) {
            const curve *k = &ss[i].c[j];
            if (!k->bo.npts) continue;
            fprintf(f, "%s %s %s %s %s %lld %.0f", falcon_precision_name(k->prec), falcon_variant_name(ss[i].variant),
                    gate_decay_name(ss[i].decay), falcon_backend_name(k->backend), falcon_form_name(k->form),
                    (long long)P->tfit, k->bo.T);
            const beyond_fit *b[2] = {&k->bo, &k->bs};
            const loglog_fit *fit[2] = {&k->fo, &k->fs};
            for (int w = 0; w < 2; w++)
                fprintf(f, " %.4g %.4g %.4g %.4g %.4g %s", b[w]->measured, b[w]->extrapolated,
                        b[w]->measured / b[w]->extrapolated, fit[w]->p, b[w]->p, beyond_held(b[w]) ? "yes" : "no");
            fputc('\n', f);
        }
    return study_close(f);
}

/* One file per curve (index 0: the points; index 1: the fitted lines from
 * T = 100 to 10^9), fits.dat (one row per curve) and refcheck.dat. */
static int write_dat(const params *P, const stream *ss, int ns)
{
    char path[4096], name[256], dir[4096];
    snprintf(dir, sizeof dir, "%s/curves", P->out);
    if (study_mkdir(dir)) return -1;
    FILE *fits = study_open(P->out, "fits.dat", path, sizeof path);
    FILE *chk = fits ? study_open(P->out, "refcheck.dat", path, sizeof path) : NULL;
    if (!chk) {
        if (fits) study_close(fits);
        return -1;
    }
    fprintf(fits, "# falcon stability (%s): error ~ c T^p fitted over T = 100 .. %lld (units of roundoff u)\n"
                  "# precision variant decay backend form tmax out_u(tmax) p_out out_u(1e9) state_u(tmax) p_state "
                  "state_u(1e9)\n", P->profile, (long long)P->tfit);
    fprintf(chk, "# long-double reference vs MPFR (256 bits): out cumulative, S at T\n"
                 "# precision variant decay T out_uld state_uld out_u state_u   (uld: units of long double's "
                 "roundoff %.3g; u: of the precision)\n", (double)ldref_unit_roundoff());
    int rc = 0;
    for (int i = 0; i < ns; i++) {
        const stream *s = &ss[i];
        const double r = (double)ldref_unit_roundoff() / gate_unit_roundoff(s->prec);
        for (int j = 0; j < s->ncheck; j++)
            fprintf(chk, "%s %s %s %.0f %.4g %.4g %.4g %.4g\n", falcon_precision_name(s->prec),
                    falcon_variant_name(s->variant), gate_decay_name(s->decay), s->cT[j], s->c_out[j], s->c_S[j],
                    s->c_out[j] * r, s->c_S[j] * r);
        for (int j = 0; j < s->ncurve; j++) {
            const curve *k = &s->c[j];
            stab_curve_name(s, k, name, sizeof name);
            const int last = k->npts - 1;
            fprintf(fits, "%s %s %s %s %s %.0f %.4g %.4g %.4g %.4g %.4g %.4g\n", falcon_precision_name(k->prec),
                    falcon_variant_name(s->variant), gate_decay_name(s->decay), falcon_backend_name(k->backend),
                    falcon_form_name(k->form), last >= 0 ? k->T[last] : NAN, last >= 0 ? k->out_u[last] : NAN,
                    k->fo.p, k->fo.at, last >= 0 ? k->S_u[last] : NAN, k->fs.p, k->fs.at);
            char file[300];
            snprintf(file, sizeof file, "curves/%s.dat", name);
            FILE *f = study_open(P->out, file, path, sizeof path);
            if (!f) {
                rc = -1;
                continue;
            }
            fprintf(f, "# %s: T out_u state_u reference(0 mpfr, 1 long double)%s%s\n", name,
                    k->error[0] ? "; FAILED: " : "", k->error);
            for (int p = 0; p < k->npts; p++)
                fprintf(f, "%.0f %.6g %.6g %d\n", k->T[p], k->out_u[p], k->S_u[p], k->ref[p]);
            fprintf(f, "\n\n# fit over T <= %lld: T out c*T^p (p = %.3g) state c*T^p (p = %.3g)\n",
                    (long long)P->tfit, k->fo.p, k->fs.p);
            /* The parallel form's line stops at its last point (PARALLEL_NOTE). */
            const double Tend = k->form == FALCON_FORM_PARALLEL && last >= 0 ? k->T[last] : 1.5e9;
            double T = 100;
            for (; T <= Tend; T *= 10)
                fprintf(f, "%.0f %.6g %.6g\n", T, k->fo.c * pow(T, k->fo.p), k->fs.c * pow(T, k->fs.p));
            if (Tend < 1e9 && Tend > T / 10) fprintf(f, "%.0f %.6g %.6g\n", Tend, k->fo.c * pow(Tend, k->fo.p), k->fs.c * pow(Tend, k->fs.p));
            if (k->bo.npts) { /* index 2: the points past the fit's range */
                fprintf(f, "\n\n# measured past the fit's range (T > %lld): T out_u state_u\n", (long long)P->tfit);
                for (int p = 0; p < k->npts; p++)
                    if (k->T[p] > (double)P->tfit) fprintf(f, "%.0f %.6g %.6g\n", k->T[p], k->out_u[p], k->S_u[p]);
            }
            rc |= study_close(f);
        }
    }
    rc |= write_beyond(P, ss, ns);
    rc |= study_close(fits);
    rc |= study_close(chk);
    rc |= write_thresholds(P);
    return rc;
}

static void print_summary(const params *P, const stream *ss, int ns)
{
    printf("\nerrors in units of roundoff u; out: cumulative over outputs 1..T, S: final state; fit c T^p over "
           "T = 100..tfit (tmax unless the profile or --tfit says); @1e9: the fit at 10^9 tokens (- for the parallel form, see the note)\n");
    printf("%-5s %-9s %-8s %-13s %-10s %9s %10s %7s %10s %10s %7s %10s  %s\n", "prec", "variant", "decay",
           "backend", "form", "tmax", "out", "p_out", "out@1e9", "S", "p_S", "S@1e9", "reference");
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < ss[i].ncurve; j++) {
            const curve *k = &ss[i].c[j];
            const int last = k->npts - 1;
            if (last < 0) {
                printf("%-5s %-9s %-8s %-13s %-10s  no points: %s\n", falcon_precision_name(k->prec),
                       falcon_variant_name(ss[i].variant), gate_decay_name(ss[i].decay),
                       falcon_backend_name(k->backend), falcon_form_name(k->form), k->error);
                continue;
            }
            char at_o[32], at_s[32]; /* "-": not extrapolated (the parallel form) */
            snprintf(at_o, sizeof at_o, isnan(k->fo.at) ? "-" : "%.3g", k->fo.at);
            snprintf(at_s, sizeof at_s, isnan(k->fs.at) ? "-" : "%.3g", k->fs.at);
            printf("%-5s %-9s %-8s %-13s %-10s %9.0f %10.3g %7.3f %10s %10.3g %7.3f %10s  %s%s%s\n",
                   falcon_precision_name(k->prec), falcon_variant_name(ss[i].variant),
                   gate_decay_name(ss[i].decay), falcon_backend_name(k->backend), falcon_form_name(k->form),
                   k->T[last], k->out_u[last], k->fo.p, at_o, k->S_u[last], k->fs.p, at_s,
                   k->ref[last] ? "long double" : "mpfr", k->error[0] ? "  FAILED: " : "", k->error);
        }
    if (P->tfit < P->tmax) {
        printf("\npast the fit's range: fitted on T = 100..%lld, measured at the last T; p held: measured within a "
               "factor %g of the fit's extrapolation\n", (long long)P->tfit, BEYOND_HELD);
        printf("%-5s %-9s %-8s %-13s %-10s %9s %10s %10s %7s %7s %5s %10s %10s %7s %7s %5s\n", "prec", "variant",
               "decay", "backend", "form", "T", "out", "out(fit)", "p_out", "p_past", "held", "S", "S(fit)", "p_S",
               "p_past", "held");
        for (int i = 0; i < ns; i++)
            for (int j = 0; j < ss[i].ncurve; j++) {
                const curve *k = &ss[i].c[j];
                if (!k->bo.npts) continue;
                printf("%-5s %-9s %-8s %-13s %-10s %9.0f %10.3g %10.3g %7.3f %7.3f %5s %10.3g %10.3g %7.3f %7.3f %5s\n",
                       falcon_precision_name(k->prec), falcon_variant_name(ss[i].variant),
                       gate_decay_name(ss[i].decay), falcon_backend_name(k->backend), falcon_form_name(k->form),
                       k->bo.T, k->bo.measured, k->bo.extrapolated, k->fo.p, k->bo.p, beyond_held(&k->bo) ? "yes" : "no",
                       k->bs.measured, k->bs.extrapolated, k->fs.p, k->bs.p, beyond_held(&k->bs) ? "yes" : "no");
            }
    }
    printf("\nnote: " PARALLEL_NOTE "\n");
    printf("\nlong-double reference vs MPFR (256 bits) on T <= %lld, largest over T (units of the precision's u; "
           "of long double's %.3g in brackets):\n", (long long)P->tmpfr, (double)ldref_unit_roundoff());
    for (int i = 0; i < ns; i++) {
        double mo = 0, ms = 0;
        for (int j = 0; j < ss[i].ncheck; j++) {
            if (ss[i].c_out[j] > mo) mo = ss[i].c_out[j];
            if (ss[i].c_S[j] > ms) ms = ss[i].c_S[j];
        }
        const double r = (double)ldref_unit_roundoff() / gate_unit_roundoff(ss[i].prec);
        printf("  %-5s %-9s %-8s out %.2g u (%.3g uld), S %.2g u (%.3g uld)\n", falcon_precision_name(ss[i].prec),
               falcon_variant_name(ss[i].variant), gate_decay_name(ss[i].decay), mo * r, mo, ms * r, ms);
    }
}

int stab_report(const params *P, const stream *ss, int nomem, double secs)
{
    int failed = nomem;
    for (int i = 0; i < P->nstream; i++) failed |= ss[i].failed;
    print_summary(P, ss, P->nstream);
    /* A stream that could not be run or saved (no memory, a write that
     * failed: its message is above) leaves the earlier report set as it
     * was: the set changes only with every stream's results. */
    int io = nomem ? -1 : write_json(P, ss, P->nstream, secs) | write_dat(P, ss, P->nstream);
    io |= study_reports_end(!io);
    if (io) printf("\n%s: %d streams in %.1f s; the reports were not written (%s keeps the earlier ones)\n",
                   failed ? "FAILED" : "done", P->nstream, secs, P->out);
    else printf("\n%s: %d streams in %.1f s; wrote %s/stability.json, fits.dat, refcheck.dat, curves/*.dat\n",
                failed ? "FAILED" : "done", P->nstream, secs, P->out);
    return io ? 2 : failed ? 1 : 0;
}

