/* The gate's engine: inputs, reference, errors and thresholds (see gate.h). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"
#include "inputs-steps.h"
#include "falcon_ref.h"
#include "../kernels/common/falcon_math.h"
#include "../src/internal.h" /* the engine sets up states as the library does */

/* ---- seeded generator (splitmix64): the same stream on every machine ---- */
uint64_t gate_next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(gate_next_u64(s) >> 11) * 0x1.0p-53);
}

falcon_backend gate_backends[FALCON_BACKEND_ROWS];
int gate_backend_count;

/* Every backend of the library's list but auto and mpfr, in the enum's order
 * (filled before main: the list has no other copy to keep in step). */
__attribute__((constructor)) static void gate_backends_init(void)
{
    for (int b = 0; b < FALCON_BACKEND_ROWS; b++)
        if (b != FALCON_BACKEND_AUTO && b != FALCON_BACKEND_MPFR) gate_backends[gate_backend_count++] = (falcon_backend)b;
}

int gate_backend_runs(falcon_backend b, falcon_precision p)
{
    /* cuda: fp32 only; tf32 and bf16: the CPU kernel backends */
    return falcon_backend_available(b) && !(b == FALCON_BACKEND_CUDA && p != FALCON_FP32);
}

int gate_form_runs(falcon_form f, falcon_precision p)
{
    return !gate_operand_drop(p) || f == FALCON_FORM_CHUNK;
}

int gate_operand_drop(falcon_precision prec)
{
    return prec == FALCON_TF32 ? FALCON_TF32_DROP : prec == FALCON_BF16 ? FALCON_BF16_DROP : 0;
}

double gate_unit_roundoff(falcon_precision prec)
{
    return prec == FALCON_FP64 ? 0x1.0p-53 : ldexp(1.0, -24 + gate_operand_drop(prec));
}

static double smallest_normal(falcon_precision prec)
{
    return prec != FALCON_FP64 ? (double)FLT_MIN : DBL_MIN;
}

const char *gate_decay_name(gate_decay d)
{
    static const char *const names[] = {"none", "mild", "random", "strong",
                                        "extreme", "reset-slow", "mix"};
    return d < GATE_DECAY_COUNT ? names[d] : "unknown";
}

double gate_decay_alpha(gate_decay d, uint64_t *s, int64_t t, int64_t T, falcon_precision prec)
{
    const double tiny = smallest_normal(prec);
    switch (d) {
    case GATE_DECAY_MILD: return uniform(s, 0.98, 1.0);
    case GATE_DECAY_RANDOM: return uniform(s, 0.5, 1.0);
    case GATE_DECAY_STRONG: return 0.5;
    case GATE_DECAY_EXTREME: return t % 5 == 2 ? tiny : 0.9;
    case GATE_DECAY_RESET_SLOW: return t == T / 3 ? tiny : 0.999;
    case GATE_DECAY_MIX: {
        double u = uniform(s, 0, 1);
        return u < 0.05 ? tiny : u < 0.3 ? 1.0 : u < 0.5 ? 0.5 : uniform(s, 0.9, 1.0);
    }
    default: return 1.0;
    }
}

/* Tensor pointers into one buffer of element size es. */
static falcon_inputs layout(const gate_case *c, char *p, size_t es)
{
    const int64_t rows = c->B * c->T * c->H, n = c->n, m = c->m;
    char *q = p, *k = q + es * rows * n, *g = k + es * rows * n, *v = g + es * rows * n;
    char *beta = v + es * rows * m, *alpha = beta + es * rows;
    return (falcon_inputs){.B = c->B, .T = c->T, .H = c->H, .n = n, .m = m, .q = q, .k = k,
                           .v = v, .beta = beta,
                           .alpha = c->decay == GATE_DECAY_NONE ? NULL : alpha,
                           .gain = falcon_variant_has_gain(c->variant) ? g : NULL};
}

int gate_data_make(const gate_case *c, falcon_precision prec, gate_data *d)
{
    const int64_t rows = c->B * c->T * c->H, n = c->n, m = c->m;
    const int64_t count = 3 * rows * n + rows * m + 2 * rows + 1;
    const size_t es = prec != FALCON_FP64 ? sizeof(float) : sizeof(double);
    memset(d, 0, sizeof *d);
    d->prec = prec;
    d->buf = malloc(es * (size_t)count);
    d->buf64 = malloc(sizeof(double) * (size_t)count);
    if (!d->buf || !d->buf64) {
        gate_data_free(d);
        return -1;
    }
    d->in = layout(c, d->buf, es);
    d->in64 = layout(c, d->buf64, sizeof(double));
    /* Generate in double, round to the precision, keep the rounded value in
     * both buffers: the reference then sees exactly what the kernel sees.
     * tf32/bf16: q, k and v (the tensors, rows [0, 2 rows n) and from
     * 3 rows n on for m) are on the operand format's grid, as a tensor-core
     * kernel's inputs are; beta, alpha and the gains stay fp32. */
    const int drop = gate_operand_drop(prec);
    const int64_t tensor_lo = 3 * rows * n, tensor_hi = 3 * rows * n + rows * m;
    double *q = (double *)d->in64.q, *k = (double *)d->in64.k, *v = (double *)d->in64.v;
    double *beta = (double *)d->in64.beta, *g = (double *)d->buf64 + 2 * rows * n;
    double *alpha = beta + rows;
    uint64_t s = c->seed * 0x100000001B3ull + 12345;
    const int reg = falcon_variant_is_regression(c->variant);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t t = (r / c->H) % c->T;
        for (int64_t i = 0; i < n; i++) {
            q[r * n + i] = uniform(&s, -1, 1);
            k[r * n + i] = c->key_scale * uniform(&s, -1, 1);
            g[r * n + i] = uniform(&s, 0, 2);
        }
        for (int64_t i = 0; i < m; i++) v[r * m + i] = uniform(&s, -1, 1);
        beta[r] = reg ? uniform(&s, 0.1, 1.9) : uniform(&s, 0.0, 1.0);
        alpha[r] = gate_decay_alpha(c->decay, &s, t, c->T, prec);
    }
    for (int64_t i = 0; i < count - 1; i++) {
        double *x = (double *)d->buf64 + i;
        if (prec != FALCON_FP64) {
            float f = (float)*x;
            if (drop && (i < 2 * rows * n || (i >= tensor_lo && i < tensor_hi))) f = falcon_round_operand(f, drop);
            ((float *)d->buf)[i] = f;
            *x = (double)f;
        } else {
            ((double *)d->buf)[i] = *x;
        }
    }
    return 0;
}

void gate_data_free(gate_data *d)
{
    free(d->buf);
    free(d->buf64);
    d->buf = d->buf64 = NULL;
}

falcon_inputs gate_inputs_slice(const gate_data *d, int64_t t0, int64_t t1)
{
    return inputs_steps(&d->in, d->prec == FALCON_FP32 ? 4 : 8, t0, t1);
}

double gate_eps(const gate_case *c, falcon_precision prec)
{
    return prec != FALCON_FP64 ? (double)(float)c->eps : c->eps;
}

falcon_config gate_config(const gate_case *c, falcon_form form, falcon_backend backend,
                          falcon_precision prec)
{
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.variant = c->variant;
    cfg.align = c->align;
    cfg.phi = c->phi;
    cfg.form = form;
    cfg.backend = backend;
    cfg.precision = prec;
    cfg.eps = gate_eps(c, prec);
    cfg.window = c->window;
    cfg.chunk = c->chunk;
    cfg.threads = 1;
    return cfg;
}

static int result_alloc(const gate_case *c, gate_result *r)
{
    r->out_count = c->B * c->T * c->H * c->m;
    r->state_count = c->B * c->H * c->m * c->n;
    r->out = calloc((size_t)(r->out_count + 1), sizeof(double));
    r->S = calloc((size_t)(r->state_count + 1), sizeof(double));
    return r->out && r->S ? 0 : -1;
}

void gate_result_free(gate_result *r)
{
    free(r->out);
    free(r->S);
    r->out = r->S = NULL;
}

static falcon_status run_into(const falcon_config *cfg, const gate_case *c, const falcon_inputs *in,
                              falcon_state *state, gate_result *r)
{
    if (result_alloc(c, r)) return FALCON_E_NOMEM;
    const size_t es = cfg->precision != FALCON_FP64 ? sizeof(float) : sizeof(double);
    void *out = malloc(es * (size_t)(r->out_count + 1));
    falcon_state *own = NULL;
    falcon_status s = out ? FALCON_OK : FALCON_E_NOMEM;
    if (!s && !state) s = falcon_state_create(c->B * c->H, c->n, c->m, c->window, &own);
    if (!s) s = falcon_run(cfg, in, state ? state : own, out);
    if (!s) {
        for (int64_t i = 0; i < r->out_count; i++)
            r->out[i] = falcon_load_test(out, cfg->precision, i);
        memcpy(r->S, falcon_state_get_view(state ? state : own).S, sizeof(double) * (size_t)r->state_count);
    }
    falcon_state_free(own);
    free(out);
    if (s) gate_result_free(r);
    return s;
}

falcon_status gate_run(const gate_case *c, const gate_data *d, falcon_form form,
                       falcon_backend backend, falcon_state *state, gate_result *r)
{
    return gate_run_in(c, d, form, backend, d->prec, state, r);
}

falcon_status gate_run_in(const gate_case *c, const gate_data *d, falcon_form form, falcon_backend backend,
                          falcon_precision prec, falcon_state *state, gate_result *r)
{
    if ((prec == FALCON_FP64) != (d->prec == FALCON_FP64)) return FALCON_E_ARGUMENT; /* a caller's bug */
    falcon_config cfg = gate_config(c, form, backend, prec);
    return run_into(&cfg, c, &d->in, state, r);
}

/* The reference: the MPFR recurrent form (256 bits, inputs converted
 * exactly, rounded to double once at the end), called directly head by head
 * rather than through falcon_run and the dispatcher, so that nothing under
 * test stands between the gate and its reference. The same run sums the
 * read condition number from its own S_t (falcon_ref_reads). */
falcon_status gate_reference_from(const gate_case *c, const gate_data *d, const falcon_state *init,
                                  gate_result *r)
{
    if (result_alloc(c, r)) return FALCON_E_NOMEM;
    const falcon_inputs *in = &d->in64;
    const int64_t T = c->T, H = c->H, n = c->n, m = c->m, heads = c->B * c->H;
    const falcon_ref_opts ro = {
        .variant = c->variant, .align = c->align, .phi = c->phi,
        .eps = gate_eps(c, d->prec), .window = c->window, .chunk = T > 0 ? T : 1, .bits = 256,
    };
    const falcon_state_view view = init ? falcon_state_get_view(init) : (falcon_state_view){0};
    const size_t nin = falcon_ref_head_doubles(in);
    double *buf = malloc(sizeof(double) * (nin + (size_t)(T * m)));
    falcon_ref_reads reads = {0};
    falcon_status s = buf ? falcon_ref_reads_init(&reads, ro.bits) : FALCON_E_NOMEM;
    for (int64_t hh = 0; hh < heads && !s; hh++) {
        falcon_ref_head rh;
        double *o = buf + nin;
        falcon_ref_head_gather(in, FALCON_FP64, init ? &view : NULL, hh, buf, &rh);
        s = falcon_ref_recurrent_reads(&ro, &rh, o, r->S + hh * m * n, &reads);
        for (int64_t t = 0; t < T && !s; t++)
            memcpy(r->out + ((hh / H * T + t) * H + hh % H) * m, o + t * m, sizeof(double) * (size_t)m);
    }
    r->read_cond = s ? 1.0 : falcon_ref_reads_cond(&reads);
    falcon_ref_reads_free(&reads);
    free(buf);
    if (s) gate_result_free(r); /* the reference fails only for want of memory */
    return s;
}

falcon_status gate_reference(const gate_case *c, const gate_data *d, gate_result *r)
{
    return gate_reference_from(c, d, NULL, r);
}

double gate_relerr(const double *x, const double *ref, int64_t count)
{
    /* Scaled sums so that neither tiny nor huge values over/underflow. */
    double scale = 0;
    for (int64_t i = 0; i < count; i++) {
        double a = fabs(ref[i]) > fabs(x[i] - ref[i]) ? fabs(ref[i]) : fabs(x[i] - ref[i]);
        if (a > scale) scale = a;
    }
    if (scale == 0) return 0;
    double num = 0, den = 0;
    for (int64_t i = 0; i < count; i++) {
        double dd = (x[i] - ref[i]) / scale, rr = ref[i] / scale;
        num += dd * dd;
        den += rr * rr;
    }
    if (!isfinite(num)) return INFINITY;
    return den > 0 ? sqrt(num / den) : sqrt(num) * scale;
}

gate_errors gate_compare(const gate_result *r, const gate_result *ref, falcon_precision prec)
{
    const double u = gate_unit_roundoff(prec);
    gate_errors e = {gate_relerr(r->out, ref->out, r->out_count) / u,
                     gate_relerr(r->S, ref->S, r->state_count) / u};
    return e;
}

void gate_case_describe(const gate_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "%s %s %s W=%lld B=%lld T=%lld H=%lld n=%lld m=%lld C=%lld decay=%s%s seed=%llu",
             falcon_variant_name(c->variant), falcon_align_name(c->align), falcon_phi_name(c->phi),
             (long long)c->window, (long long)c->B, (long long)c->T, (long long)c->H,
             (long long)c->n, (long long)c->m, (long long)c->chunk, gate_decay_name(c->decay),
             c->key_scale != 1 ? " small-keys" : "", (unsigned long long)c->seed);
}

falcon_status gate_state_scaled(const falcon_state *init, double s, falcon_state **out)
{
    falcon_status st = falcon_state_copy(init, out);
    if (st) return st;
    falcon_state *t = *out;
    for (int64_t i = 0; i < t->heads * t->m * t->n; i++) t->S[i] *= s;
    for (int64_t i = 0; i < t->heads * t->keep * t->m; i++) t->hist_v[i] *= s;
    t->memory_f32 = 0; /* checked again where it is loaded */
    return FALCON_OK;
}
