/*
 * `falcon stability --grad`: the summary on stdout and the report set,
 * written as one output transaction (an earlier set stays whole if this
 * one fails):
 *   fits.dat      one row per stream, form and tensor: the error at the
 *                 longest T, the fit c T^p over every length measured;
 *   standin.dat   the stand-in's check against MPFR: its error per
 *                 tensor and length (with the gradient gate's fp64
 *                 threshold for scale), and a verdict per stream;
 *   curves/VARIANT_DECAY.dat  the errors per length, the reference's
 *                 kappa_X and the gradients' RMS size;
 *   grad.json     all of it with the study's parameters.
 */
#include <stdlib.h>
#include <string.h>
#include "stab-grad.h"

static const char *const tensor_label[GT_COUNT] = {"dq", "dk", "dv", "dbeta", "dalpha", "dS0"};

static const char *verdict_name(const gstream *s)
{
    return s->standin > 0 ? "accepted" : s->nmpfr ? "refused" : "unchecked";
}

/* A stream failed: it stopped short of its longest length, or its
 * stand-in was refused. */
static int stream_failed(const gparams *P, const gstream *s)
{
    return *s->error || s->npts == 0 || s->T[s->npts - 1] != (double)P->tmax || s->standin <= 0;
}

static void print_summary(const gparams *P, const gstream *ss)
{
    printf("\nerror at the longest T (units of fp32's u) and its fitted p, per tensor:\n");
    printf("%-9s %-10s %-9s", "variant", "decay", "form");
    for (int t = 0; t < GT_COUNT; t++) printf(" %15s", tensor_label[t]);
    printf("  stand-in\n");
    for (int i = 0; i < P->nstream; i++) {
        const gstream *s = &ss[i];
        for (int f = 0; f < GFORMS; f++) {
            printf("%-9s %-10s %-9s", falcon_variant_name(s->variant), gate_decay_name(s->decay),
                   falcon_form_name(grad_forms[f]));
            for (int t = 0; t < GT_COUNT; t++) {
                const double e = s->npts ? s->err[f][t][s->npts - 1] : NAN;
                if (isnan(e)) printf(" %15s", "-");
                else printf(" %7.3g (%5.2f)", e, s->fit[f][t].p);
            }
            if (f == 0) printf("  %s %.2g u", verdict_name(s), s->sd_bound);
            printf("\n");
        }
        if (*s->error) printf("  %s %s: %s\n", falcon_variant_name(s->variant), gate_decay_name(s->decay), s->error);
    }
}

static int write_fits(const gparams *P, const gstream *ss)
{
    char path[4200];
    FILE *f = study_open(P->out, "fits.dat", path, sizeof path);
    if (!f) return -1;
    fprintf(f, "# falcon stability --grad, %s profile: fp32 %s, n = m = %lld, T to %lld, MPFR to %lld\n",
            P->profile, falcon_backend_name(P->backend), (long long)P->n, (long long)P->tmax, (long long)P->tmpfr);
    fprintf(f, "# tmpfr %lld\n# variant decay form tensor T_last err_last_u p c npts\n", (long long)P->tmpfr);
    for (int i = 0; i < P->nstream; i++)
        for (int fo = 0; fo < GFORMS; fo++)
            for (int t = 0; t < GT_COUNT; t++) {
                const gstream *s = &ss[i];
                if (!s->npts || isnan(s->err[fo][t][0])) continue;
                const loglog_fit *ft = &s->fit[fo][t];
                fprintf(f, "%s %s %s %s %.0f %.6g %.4f %.6g %d\n", falcon_variant_name(s->variant),
                        gate_decay_name(s->decay), falcon_form_name(grad_forms[fo]), tensor_label[t],
                        s->T[s->npts - 1], s->err[fo][t][s->npts - 1], ft->p, ft->c, ft->npts);
            }
    return study_close(f);
}

static int write_standin(const gparams *P, const gstream *ss)
{
    char path[4200];
    FILE *f = study_open(P->out, "standin.dat", path, sizeof path);
    if (!f) return -1;
    fprintf(f, "# The %s stand-in's backward pass (recurrent form) against MPFR on the lengths both ran, in\n"
               "# units of fp64's u. It stands in past T = %lld only if at every point, and extrapolated to\n"
               "# T = %lld by its fit c T^p (bound_u32), its error stays below %.2g fp32 u (%.3g fp64 u).\n"
               "# gate_thr_u64: the gradient gate's fp64 threshold (kappa_X from MPFR's absolute sweep),\n"
               "# derived for the gate's short calls: for scale, not a criterion.\n"
               "# point variant decay tensor T err_u64 gate_thr_u64 kappa\n"
               "# verdict variant decay accepted|refused|unchecked bound_u32\n",
            falcon_precision_name(P->standin), (long long)P->tmpfr, (long long)P->tmax, STANDIN_SHARE,
            STANDIN_SHARE * gate_unit_roundoff(FALCON_FP32) / gate_unit_roundoff(FALCON_FP64));
    for (int i = 0; i < P->nstream; i++) {
        const gstream *s = &ss[i];
        const char *v = falcon_variant_name(s->variant), *d = gate_decay_name(s->decay);
        for (int t = 0; t < GT_COUNT; t++)
            for (int j = 0; j < s->nmpfr && !isnan(s->sd_err[t][0]); j++)
                fprintf(f, "point %s %s %s %.0f %.6g %.6g %.6g\n", v, d, tensor_label[t], s->T[j], s->sd_err[t][j],
                        s->sd_thr[t][j], s->kappa[t][j]);
        fprintf(f, "verdict %s %s %s %.6g\n", v, d, verdict_name(s), s->sd_bound);
    }
    return study_close(f);
}

static int write_curve(const gparams *P, const gstream *s)
{
    char path[4200], name[128];
    snprintf(name, sizeof name, "curves/%s_%s.dat", falcon_variant_name(s->variant), gate_decay_name(s->decay));
    FILE *f = study_open(P->out, name, path, sizeof path);
    if (!f) return -1;
    fprintf(f, "# %s %s: fp32 %s backward, errors in units of fp32's u (NaN: no such tensor)\n",
            falcon_variant_name(s->variant), gate_decay_name(s->decay), falcon_backend_name(P->backend));
    fprintf(f, "# ref: 0 MPFR, 1 the %s stand-in; kappa: MPFR's kappa_X; rms: ||X_ref||_F / sqrt(count)\n# T ref",
            falcon_precision_name(P->standin));
    for (int fo = 0; fo < GFORMS; fo++)
        for (int t = 0; t < GT_COUNT; t++) fprintf(f, " %s_%s", falcon_form_name(grad_forms[fo]), tensor_label[t]);
    for (int t = 0; t < GT_COUNT; t++) fprintf(f, " kappa_%s", tensor_label[t]);
    for (int t = 0; t < GT_COUNT; t++) fprintf(f, " rms_%s", tensor_label[t]);
    fputc('\n', f);
    for (int i = 0; i < s->npts; i++) {
        fprintf(f, "%.0f %d", s->T[i], i >= s->nmpfr);
        for (int fo = 0; fo < GFORMS; fo++)
            for (int t = 0; t < GT_COUNT; t++) fprintf(f, " %.6g", s->err[fo][t][i]);
        for (int t = 0; t < GT_COUNT; t++) fprintf(f, " %.6g", s->kappa[t][i]);
        for (int t = 0; t < GT_COUNT; t++) fprintf(f, " %.6g", s->rms[t][i]);
        fputc('\n', f);
    }
    return study_close(f);
}

static void json_stream(FILE *f, const gstream *s)
{
    fprintf(f, "    {\"variant\": \"%s\", \"decay\": \"%s\", \"seconds\": %.3f, \"cpu_seconds\": %.3f,\n",
            falcon_variant_name(s->variant), gate_decay_name(s->decay), s->seconds, s->cpu_seconds);
    fprintf(f, "     \"standin\": {\"verdict\": \"%s\", \"bound_u32\": ", verdict_name(s));
    study_json_num(f, s->sd_bound);
    fputs("}, \"error\": ", f);
    study_json_str(f, s->error);
    fputs(",\n     \"T\": [", f);
    for (int i = 0; i < s->npts; i++) fprintf(f, "%s%.0f", i ? ", " : "", s->T[i]);
    fprintf(f, "], \"mpfr_points\": %d,\n     \"fits\": {", s->nmpfr);
    for (int fo = 0, first = 1; fo < GFORMS; fo++)
        for (int t = 0; t < GT_COUNT; t++) {
            if (!s->npts || isnan(s->err[fo][t][0])) continue;
            fprintf(f, "%s\"%s_%s\": {\"err_last\": ", first ? "" : ", ", falcon_form_name(grad_forms[fo]),
                    tensor_label[t]);
            study_json_num(f, s->err[fo][t][s->npts - 1]);
            fputs(", \"p\": ", f);
            study_json_num(f, s->fit[fo][t].p);
            fputs(", \"c\": ", f);
            study_json_num(f, s->fit[fo][t].c);
            fputc('}', f);
            first = 0;
        }
    fputs("}}", f);
}

static int write_json(const gparams *P, const gstream *ss, double secs)
{
    char path[4200];
    FILE *f = study_open(P->out, "grad.json", path, sizeof path);
    if (!f) return -1;
    fprintf(f, "{\n  \"study\": \"falcon stability --grad\", \"profile\": \"%s\", \"backend\": \"%s\",\n", P->profile,
            falcon_backend_name(P->backend));
    fprintf(f, "  \"n\": %lld, \"m\": %lld, \"window\": %lld, \"chunk\": %lld, \"tmax\": %lld, \"tmpfr\": %lld,\n",
            (long long)P->n, (long long)P->n, (long long)P->W, (long long)P->C, (long long)P->tmax,
            (long long)P->tmpfr);
    fprintf(f, "  \"standin\": \"%s\", \"standin_share_u32\": %g, \"seconds\": %.2f,\n  \"streams\": [\n",
            falcon_precision_name(P->standin), STANDIN_SHARE, secs);
    for (int i = 0; i < P->nstream; i++) {
        json_stream(f, &ss[i]);
        fputs(i + 1 < P->nstream ? ",\n" : "\n", f);
    }
    fputs("  ]\n}\n", f);
    return study_close(f);
}

int grad_report(const gparams *P, const gstream *ss, double secs)
{
    int failed = 0, io = 0;
    double cpu = 0;
    char dir[4200];
    for (int i = 0; i < P->nstream; i++) failed |= stream_failed(P, &ss[i]), cpu += ss[i].cpu_seconds;
    print_summary(P, ss);
    snprintf(dir, sizeof dir, "%s/curves", P->out);
    io |= study_mkdir(dir);
    io |= io ? 0 : write_fits(P, ss);
    io |= io ? 0 : write_standin(P, ss);
    for (int i = 0; i < P->nstream && !io; i++) io |= write_curve(P, &ss[i]);
    io |= io ? 0 : write_json(P, ss, secs);
    io |= study_reports_end(!io);
    if (io) return 2;
    printf("\n%s in %.1f s (%.1f CPU s); wrote %s/grad.json, fits.dat, standin.dat, curves/*.dat\n",
           failed ? "FAILED" : "done", secs, cpu, P->out);
    return failed ? 1 : 0;
}
