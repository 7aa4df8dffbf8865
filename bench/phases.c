/* The phase shares of a benchmark call (bench/phases.h). */
#include <stdio.h>
#include "phases.h"
#include "median.h"

static void print_phases(const char *name, int workers, const falcon_phase_summary *s, unsigned long long call)
{
    fprintf(stderr, "phases of %s (%s %s): %llu blocks, %s a block; the call %llu\n", name, s->isa, s->prec,
            s->blocks, FW_CLOCK_UNIT, call);
    fprintf(stderr, "  %-12s %10s %10s %8s\n", "phase", "mean", "median", "of call");
    for (int p = 0; p < FW_PH_COUNT; p++)
        fprintf(stderr, "  %-12s %10.0f %10.0f %7.2f%%%s\n", falcon_phase_names[p], s->mean[p], s->median[p],
                100 * s->total[p] / ((double)call * workers), FW_PH_IS_DRIVER(p) ? "  driver" : "");
}

int fb_phase_sample(const falcon_config *cfg, const falcon_inputs *fi, void *out, int workers, const char *name,
                    fb_phase_samples *ps)
{
    falcon_phase_summary s;
    falcon_phase_clock_begin();
    const unsigned long long t0 = falcon_phase_clock_now();
    const falcon_status r = falcon_run(cfg, fi, NULL, out);
    const unsigned long long t1 = falcon_phase_clock_now();
    falcon_phase_clock_end(&s);
    if (r != FALCON_OK) return 0;
    if (s.blocks == 0 || t1 <= t0 || ps->n == 3) return -1;
    double d = 0, k = 0;
    for (int p = 0; p < FW_PH_COUNT; p++) {
        if (FW_PH_IS_DRIVER(p)) d += s.total[p];
        else k += s.total[p];
    }
    const double span = (double)(t1 - t0) * workers;
    for (int p = 0; p < FW_PH_COUNT; p++) ps->ph[p][ps->n] = s.total[p] / span;
    ps->drv[ps->n] = d / span, ps->ker[ps->n] = k / span, ps->n++;
    if (name) print_phases(name, workers, &s, t1 - t0);
    return 1;
}

void fb_phase_counters(fb_state *st, const fb_phase_samples *ps, int shares, fb_side *keep)
{
    if (ps->n == 0) return;
    const size_t n = (size_t)ps->n;
    double v[3];
    for (size_t i = 0; i < n; i++) v[i] = ps->drv[i];
    fb_side_set(st, keep, "driver_fraction", fb_median(v, n));
    for (size_t i = 0; i < n; i++) v[i] = ps->ker[i];
    fb_side_set(st, keep, "kernel_fraction", fb_median(v, n));
    if (!shares) return;
    for (int p = 0; p < FW_PH_COUNT; p++) { /* phase_out_rows: the name's blank as _ */
        char cname[40];
        snprintf(cname, sizeof cname, "phase_%s", falcon_phase_names[p]);
        for (char *q = cname; *q; q++)
            if (*q == ' ') *q = '_';
        for (size_t i = 0; i < n; i++) v[i] = ps->ph[p][i];
        fb_side_set(st, keep, cname, fb_median(v, n));
    }
}
