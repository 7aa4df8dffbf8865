/*
 * docs/math.md section 10: every entry point checks its arguments before it touches
 * anything, and names the tensor, the index and the rule that failed.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "backends.h"

/* "[t=5]" for one sequence, "[b=0,t=5,h=2]" for a batch; ",i=3" for an element.
 * t counts from t0, the first step of a segment of a longer sequence. */
static const char *where(const falcon_inputs *in, int64_t b, int64_t t, int64_t h, int64_t i,
                         char *buf, size_t size)
{
    int used = in->B == 1 && in->H == 1
                   ? snprintf(buf, size, "[t=%lld", (long long)t)
                   : snprintf(buf, size, "[b=%lld,t=%lld,h=%lld", (long long)b, (long long)t,
                              (long long)h);
    if (i >= 0 && used > 0 && (size_t)used < size)
        used += snprintf(buf + used, size - (size_t)used, ",i=%lld", (long long)i);
    if (used > 0 && (size_t)used < size) snprintf(buf + used, size - (size_t)used, "]");
    return buf;
}

/* RULE_OPERAND: finite, and no larger in magnitude than the largest number
 * of the run's operand format (tf32, bf16: falcon_operand_max), which q, k
 * and v become in the chunk form's matrix products. */
typedef enum { RULE_FINITE, RULE_OPERAND, RULE_BETA_REG, RULE_BETA_IP, RULE_ALPHA, RULE_GAIN } rule;

/* falcon_error_info's rule ids: finite or the tensor's range rule. */
static const char *rule_id(rule r, double x)
{
    static const char *const ids[] = {"finite", "operand-range", "beta-range", "beta-ip-range", "alpha-range",
                                      "gain-range"};
    return isfinite(x) ? ids[r] : ids[RULE_FINITE];
}

/* A failure at element i of row (b, t, h) of tensor `name`: its fields. */
static falcon_status blame_element(falcon_status s, int64_t H, const char *name, rule r, double x, int64_t flat,
                                   int64_t b, int64_t t, int64_t h)
{
    return falcon_blame_at(s, name, rule_id(r, x), flat, t, b * H + h);
}

/* 1 when every element lies in [lo, hi] (lo itself excluded when lo_open),
 * hi finite: NaN and the infinities fail too. A typed loop without
 * branches, which GCC vectorizes (the float one at the baseline ISA; the
 * figures: docs/performance.md, "Measurements behind the library's
 * choices"); the loop below names the first element that fails. */
#define IN_RANGE_BODY(R)                                                                      \
    const R *x = p;                                                                           \
    const R l = (R)lo, h = (R)hi;                                                             \
    int bad = 0;                                                                              \
    for (int64_t i = 0; i < count; i++) bad |= !(x[i] >= l) | !(x[i] <= h) | (lo_open & (x[i] == l)); \
    return !bad;
VECTORIZED static int in_range_f32(const void *p, int64_t count, double lo, int lo_open, double hi) { IN_RANGE_BODY(float) }
VECTORIZED static int in_range_f64(const void *p, int64_t count, double lo, int lo_open, double hi) { IN_RANGE_BODY(double) }
#undef IN_RANGE_BODY

static int all_in_range(const void *p, falcon_precision prec, int64_t count, double lo, int lo_open, double hi,
                        double hi64)
{
    return prec != FALCON_FP64 ? in_range_f32(p, count, lo, lo_open, hi) : in_range_f64(p, count, lo, lo_open, hi64);
}

/* Check every element of one [B][T][heads][width] tensor against a rule
 * (heads: H, or the q/k heads of grouped inputs). */
static falcon_status check_tensor(const falcon_plan *plan, const falcon_inputs *in, int64_t t0,
                                  const char *name, const void *p, int64_t width, rule r)
{
    char at[96];
    const falcon_config *cfg = &plan->cfg;
    const int qk = !strcmp(name, "q") || !strcmp(name, "k");
    const int64_t H = qk ? falcon_qk_heads(in) : in->H, rows = in->B * in->T * H;
    const int threads = plan->cfg.threads;
    if (r == RULE_FINITE && falcon_all_finite_fast(p, cfg->precision, rows * width, threads))
        return FALCON_OK;
    const int64_t count = rows * width;
    const double omax = falcon_operand_max(cfg->precision);
    if ((r == RULE_OPERAND && all_in_range(p, cfg->precision, count, -omax, 0, omax, omax)) ||
        (r == RULE_BETA_REG && all_in_range(p, cfg->precision, count, 0, 0, 2, 2)) ||
        (r == RULE_ALPHA && all_in_range(p, cfg->precision, count, 0, 1, 1, 1)) ||
        ((r == RULE_BETA_IP || r == RULE_GAIN) && all_in_range(p, cfg->precision, count, 0, 0, FLT_MAX, DBL_MAX)))
        return FALCON_OK;
    for (int64_t row = 0; row < rows; row++) {
        for (int64_t i = 0; i < width; i++) {
            const double x = falcon_load(p, cfg->precision, row * width + i);
            const int ok = isfinite(x) && (r == RULE_FINITE || (r == RULE_OPERAND && fabs(x) <= omax) || (r == RULE_BETA_REG && x >= 0 && x <= 2) ||
                                           (r == RULE_BETA_IP && x >= 0) || (r == RULE_ALPHA && x > 0 && x <= 1) ||
                                           (r == RULE_GAIN && x >= 0));
            if (ok) continue;
            /* Only a failure pays for naming the index. */
            const int64_t h = row % H, t = t0 + (row / H) % in->T, b = row / (H * in->T);
            const char *w = where(in, b, t, h, width > 1 ? i : -1, at, sizeof at);
#define BLAME(f) blame_element((f), H, name, r, x, row * width + i, b, t, h)
            if (!isfinite(x))
                return BLAME(falcon_fail(FALCON_E_NONFINITE, "%s%s = %g: inputs must be finite", name, w, x));
            if (r == RULE_OPERAND && !(fabs(x) <= omax))
                return BLAME(falcon_fail(FALCON_E_RANGE,
                                   "%s%s = %g: larger than the largest %s number (%g): as a matrix-product "
                                   "operand it would round to infinity",
                                   name, w, x, plan->precision, omax));
            if (r == RULE_BETA_REG && !(x >= 0 && x <= 2))
                return BLAME(falcon_fail(FALCON_E_RANGE,
                                   "%s%s = %g: must be in [0, 2] for the regression variant %s",
                                   name, w, x, plan->variant));
            if (r == RULE_BETA_IP && !(x >= 0))
                return BLAME(falcon_fail(FALCON_E_RANGE,
                                   "%s%s = %g: must be >= 0 for the inner-product variant %s",
                                   name, w, x, plan->variant));
            if (r == RULE_ALPHA && !(x > 0 && x <= 1))
                return BLAME(falcon_fail(FALCON_E_RANGE,
                                   "%s%s = %g: decay must be in (0, 1] (use a fresh state to reset)",
                                   name, w, x));
            if (r == RULE_GAIN && !(x >= 0))
                return BLAME(falcon_fail(FALCON_E_RANGE, "%s%s = %g: gains must be >= 0", name, w, x));
#undef BLAME
        }
    }
    return FALCON_OK;
}

static falcon_status check_enums(const falcon_config *cfg)
{
    if (!cfg) return falcon_fail_in("config", "null", FALCON_E_ARGUMENT, "config is NULL");
    if ((unsigned)cfg->variant > FALCON_3A)
        return falcon_fail_in("config.variant", "unknown-enum",
                              FALCON_E_ARGUMENT, "config.variant = %d: unknown variant", (int)cfg->variant);
    if ((unsigned)cfg->align > FALCON_ALIGN_SAME)
        return falcon_fail_in("config.align", "unknown-enum",
                              FALCON_E_ARGUMENT, "config.align = %d: unknown alignment", (int)cfg->align);
    if ((unsigned)cfg->phi > FALCON_PHI_L2NORM)
        return falcon_fail_in("config.phi", "unknown-enum",
                              FALCON_E_ARGUMENT, "config.phi = %d: unknown feature map", (int)cfg->phi);
    if ((unsigned)cfg->form > FALCON_FORM_PARALLEL)
        return falcon_fail_in("config.form", "unknown-enum",
                              FALCON_E_ARGUMENT, "config.form = %d: unknown form", (int)cfg->form);
    if ((unsigned)cfg->backend >= FALCON_BACKEND_ROWS)
        return falcon_fail_in("config.backend", "unknown-enum",
                              FALCON_E_ARGUMENT, "config.backend = %d: unknown backend", (int)cfg->backend);
    if ((unsigned)cfg->precision > FALCON_BF16)
        return falcon_fail_in("config.precision", "unknown-enum",
                              FALCON_E_ARGUMENT, "config.precision = %d: unknown precision", (int)cfg->precision);
    return FALCON_OK;
}

/* The configuration's values, its enums known good: read through the plan,
 * whose names the messages use. */
static falcon_status check_config_values(const falcon_plan *plan)
{
    const falcon_config *cfg = &plan->cfg0;
    /* tf32 and bf16 model the operands of tensor-core matrix products: the
     * chunk form's (the recurrent form has none; the masked-parallel form
     * and the reference and CUDA backends do not model them). */
    if (falcon_operand_format(cfg->precision) && cfg->form != FALCON_FORM_CHUNK)
        return falcon_fail_in("config.precision", "format-form", FALCON_E_ARGUMENT,
                              "precision %s: only the chunk form rounds its matrix products' operands like tensor "
                              "cores; the %s form runs fp32 or fp64",
                              plan->precision, plan->form);
    if (falcon_operand_format(cfg->precision) &&
        (cfg->backend == FALCON_BACKEND_MPFR || cfg->backend == FALCON_BACKEND_CUDA))
        return falcon_fail_in("config.precision", "format-backend", FALCON_E_ARGUMENT,
                              "precision %s: runs on the CPU kernel backends only, not %s (%s)",
                              plan->precision, plan->backend_asked,
                              cfg->backend == FALCON_BACKEND_MPFR
                                  ? "the reference computes exactly: compare a tf32/bf16 run against it in fp32"
                                  : "its kernels compute in fp32");
    const double eps_run = cfg->precision != FALCON_FP64 ? (double)(float)cfg->eps : cfg->eps;
    if (!isfinite(cfg->eps) || !(cfg->eps > 0) || !(eps_run > 0) || !isfinite(eps_run))
        return falcon_fail_in("config.eps", "eps-range",
                              FALCON_E_RANGE, "eps = %g: must be finite and > 0 in %s", cfg->eps,
                              plan->precision);
    if (cfg->window < 1 || cfg->window > FALCON_MAX_WINDOW)
        return falcon_fail_in("config.window", "window-range", FALCON_E_RANGE, "window = %lld: must be in [1, %d]",
                              (long long)cfg->window, FALCON_MAX_WINDOW);
    if (cfg->window != 1 && !falcon_variant_has_window(cfg->variant))
        return falcon_fail_in("config.window", "window-falcon1", FALCON_E_RANGE,
                              "window = %lld: must be 1 for %s (only falcon3/falcon3a keep a window)",
                              (long long)cfg->window, plan->variant);
    if (cfg->chunk < 0 || cfg->chunk > FALCON_MAX_CHUNK)
        return falcon_fail_in("config.chunk", "chunk-range",
                              FALCON_E_RANGE, "chunk = %lld: must be in [1, %d], or 0 (auto)",
                              (long long)cfg->chunk, FALCON_MAX_CHUNK);
    if (cfg->mpfr_bits < 64 || cfg->mpfr_bits > 65536) /* whatever the backend: a bad option is bad */
        return falcon_fail_in("config.mpfr_bits", "mpfr-bits",
                              FALCON_E_RANGE, "mpfr_bits = %d: must be in [64, 65536]", cfg->mpfr_bits);
    if (cfg->threads < 0 || cfg->threads > FALCON_MAX_THREADS)
        return falcon_fail_in("config.threads", "threads-range",
                              FALCON_E_RANGE, "threads = %d: must be in [0, %d]", cfg->threads,
                              FALCON_MAX_THREADS);
    return FALCON_OK;
}

/* cu_seqlens: B = 1 and seqs + 1 offsets from 0 to T that never decrease. */
static falcon_status check_packed(const falcon_inputs *in)
{
    if (!in->cu_seqlens) {
        if (in->seqs == 0) return FALCON_OK;
        return falcon_fail_in("seqs", "cu-seqlens-range", FALCON_E_ARGUMENT,
                              "seqs = %lld without cu_seqlens: a packed batch gives both", (long long)in->seqs);
    }
    if (in->B != 1)
        return falcon_fail_in("cu_seqlens", "cu-seqlens-batch", FALCON_E_SHAPE,
                              "cu_seqlens with B = %lld: a packed batch has B = 1, its sequences are "
                              "cu_seqlens' segments of the T steps", (long long)in->B);
    if (in->seqs < 1 || in->seqs > (1 << 24) / in->H)
        return falcon_fail_in("seqs", "cu-seqlens-range", FALCON_E_SHAPE,
                              "seqs = %lld: must be >= 1, and seqs x H (H = %lld) at most 2^24 heads",
                              (long long)in->seqs, (long long)in->H);
    const int64_t *cu = in->cu_seqlens;
    for (int64_t i = 0; i <= in->seqs; i++) {
        const char *why = i == 0 && cu[0] != 0                ? "the first offset must be 0"
                          : cu[i] < 0 || cu[i] > in->T         ? "an offset must lie in [0, T]"
                          : i > 0 && cu[i] < cu[i - 1]         ? "offsets must not decrease"
                          : i == in->seqs && cu[i] != in->T    ? "the last offset must be T"
                                                               : NULL;
        if (why)
            return falcon_blame_at(falcon_fail(FALCON_E_SHAPE, "cu_seqlens[%lld] = %lld (T = %lld): %s",
                                               (long long)i, (long long)cu[i], (long long)in->T, why),
                                   "cu_seqlens", "cu-seqlens-range", i, -1, -1);
    }
    return FALCON_OK;
}

/* Grouped heads: qk_heads divides H, head_map known. */
static falcon_status check_grouped(const falcon_inputs *in)
{
    if (in->qk_heads < 0 || in->qk_heads > in->H || (in->qk_heads > 0 && in->H % in->qk_heads))
        return falcon_fail_in("qk_heads", "qk-heads-range", FALCON_E_SHAPE,
                              "qk_heads = %lld: must divide H = %lld (0: H)", (long long)in->qk_heads,
                              (long long)in->H);
    if ((unsigned)in->head_map > FALCON_HEADS_TILED)
        return falcon_fail_in("head_map", "unknown-enum", FALCON_E_ARGUMENT, "head_map = %d: unknown head mapping",
                              (int)in->head_map);
    return FALCON_OK;
}

static falcon_status check_shapes(const falcon_plan *plan, const falcon_inputs *in)
{
    const falcon_config *cfg = &plan->cfg;
    if (!in) return falcon_fail_in("inputs", "null", FALCON_E_ARGUMENT, "inputs are NULL");
    if (in->T < 0) return falcon_fail_in("T", "T-range", FALCON_E_SHAPE, "T = %lld: must be >= 0", (long long)in->T);
    if (in->B < 1 || in->H < 1)
        return falcon_fail_in(in->B < 1 ? "B" : "H", "heads-range",
                              FALCON_E_SHAPE, "B = %lld, H = %lld: must be >= 1", (long long)in->B,
                              (long long)in->H);
    if (in->n < 1 || in->n > FALCON_MAX_DIM)
        return falcon_fail_in("n", "n-range",
                              FALCON_E_SHAPE, "n = %lld: must be in [1, %d]", (long long)in->n, FALCON_MAX_DIM);
    if (in->m < 1 || in->m > FALCON_MAX_DIM)
        return falcon_fail_in("m", "m-range",
                              FALCON_E_SHAPE, "m = %lld: must be in [1, %d]", (long long)in->m, FALCON_MAX_DIM);
    /* Every element count must fit comfortably in int64 (and in memory). */
    const double elems = (double)in->B * (double)in->T * (double)in->H *
                         (double)(in->n > in->m ? in->n : in->m);
    if ((double)in->B * (double)in->H > (double)(1 << 24))
        return falcon_fail_in("B x H", "too-many-heads",
                              FALCON_E_SHAPE, "B x H = %lld x %lld = %g heads: too many (at most 2^24 = %d)",
                              (long long)in->B, (long long)in->H, (double)in->B * (double)in->H, 1 << 24);
    if (elems > 4e18)
        return falcon_fail_in("B x T x H x max(n, m)", "too-many-elements",
                              FALCON_E_SHAPE, "B x T x H x max(n, m) = %g elements: too large (at most 4e18)", elems);
    falcon_status s;
    if ((s = check_packed(in)) || (s = check_grouped(in))) return s;
    if (in->T > 0 && (!in->q || !in->k || !in->v || !in->beta))
        return falcon_fail_in(!in->q ? "q" : !in->k ? "k" : !in->v ? "v" : "beta", "null",
                              FALCON_E_ARGUMENT, "%s is NULL", !in->q ? "q" : !in->k ? "k" : !in->v ? "v" : "beta");
    const int needs_gain = falcon_variant_has_gain(cfg->variant);
    if (in->T > 0 && needs_gain && !in->gain)
        return falcon_fail_in("gain", "gain-required",
                              FALCON_E_ARGUMENT, "gain is NULL: %s needs per-column gains [B][T][H][n]",
                              plan->variant);
    if (!needs_gain && in->gain)
        return falcon_fail_in("gain", "gain-unexpected",
                              FALCON_E_ARGUMENT, "gain given: %s takes no gains (only falcon2/falcon2a)",
                              plan->variant);
    return FALCON_OK;
}

/* internal.h. A pass over the high words first, branch-free so that the
 * compiler vectorizes it (a state is read once a call: 1 MiB for 8 heads
 * of n = m = 128), then an exact pass only where a high word reaches the
 * limit's. Bits, not conversions: converting a tiny double to float takes
 * a microcode assist on some CPUs, and a decayed memory is full of tiny
 * values. */
VECTORIZED int64_t falcon_first_unfit(const double *x, int64_t count, uint64_t limit, int finite_only)
{
    const uint32_t limit_hi = (uint32_t)(limit >> 32);
    const uint64_t inf = 0x7ff0000000000000ull;
    uint32_t maybe = 0;
    for (int64_t i = 0; i < count; i++) {
        uint64_t u;
        memcpy(&u, x + i, sizeof u);
        maybe |= ((uint32_t)(u >> 32) & 0x7fffffffu) >= limit_hi;
    }
    for (int64_t i = 0; maybe && i < count; i++) {
        uint64_t u;
        memcpy(&u, x + i, sizeof u);
        u &= 0x7fffffffffffffffull;
        if (u >= limit && !(finite_only && u >= inf)) return i;
    }
    return -1;
}

/* The bits of the smallest magnitude above max. */
static uint64_t limit_above(double max)
{
    uint64_t u;
    memcpy(&u, &max, sizeof u);
    return u + 1;
}

/* float32 holds what rounds to a finite float: below FLT_MAX plus half its
 * ulp, a tie that rounds to even, i.e. to infinity. */
uint64_t falcon_f32_unfit_limit(void)
{
    return limit_above(nextafter((double)FLT_MAX + 0x1p103, 0.0));
}

/* One array of a state ([heads][per]; of head h only the first used[h]
 * rows of `row` values, or nothing where has[h] is 0). */
static falcon_status state_array_fits(const char *name, const double *x, int64_t heads, int64_t per,
                                      const int64_t *used, const uint8_t *has, int64_t row, uint64_t limit,
                                      const char *format)
{
    for (int64_t h = 0; h < heads; h++) {
        const int64_t count = used ? used[h] * row : has ? (has[h] ? per : 0) : per;
        const int64_t i = falcon_first_unfit(x + h * per, count, limit, 0);
        if (i >= 0)
            return falcon_blame_at(falcon_fail(FALCON_E_RANGE, "state %s: element %lld (head %lld) = %g does not "
                                               "fit in %s, the run's precision", name, (long long)(h * per + i),
                                               (long long)h, x[h * per + i], format),
                                   name, "state-fit", h * per + i, -1, h);
    }
    return FALCON_OK;
}

falcon_status falcon_state_check(const falcon_state *st, falcon_precision p)
{
    if (!st) return falcon_fail_in("state", "null", FALCON_E_ARGUMENT, "state_check: the state is NULL");
    if ((unsigned)p > FALCON_BF16)
        return falcon_fail_in("precision", "unknown-enum", FALCON_E_ARGUMENT, "state_check: precision = %d: unknown",
                              (int)p);
    if (p == FALCON_FP64) return FALCON_OK; /* a state holds double, and only finite values */
    const uint64_t f32 = falcon_f32_unfit_limit();
    /* The memory stays float32 in every precision below fp64 (tf32 and
     * bf16 round only the operands of the products); the carried keys and
     * values are inputs of the run, with the rule of q, k and v. */
    const uint64_t keys = falcon_operand_format(p) ? limit_above(falcon_operand_max(p)) : f32;
    const char *fmt = falcon_operand_format(p) ? falcon_precision_name(p) : "float32";
    const int64_t H = st->heads, n = st->n, m = st->m, keep = st->keep;
    falcon_status s;
    if ((!st->memory_f32 && (s = state_array_fits("S", st->S, H, m * n, NULL, NULL, 0, f32, "float32"))) ||
        (s = state_array_fits("prev_key", st->prev_key, H, n, NULL, st->has_prev, 0, keys, fmt)) ||
        (s = state_array_fits("hist_k", st->hist_k, H, keep * n, st->hist_len, NULL, n, keys, fmt)) ||
        (s = state_array_fits("hist_v", st->hist_v, H, keep * m, st->hist_len, NULL, m, keys, fmt)))
        return s;
    return FALCON_OK;
}

static falcon_status check_state(const falcon_plan *plan, const falcon_inputs *in,
                                 const falcon_state *st)
{
    const falcon_config *cfg = &plan->cfg;
    if (!st) return FALCON_OK;
    if (st->heads != falcon_inputs_state_heads(in) || st->n != in->n || st->m != in->m)
        return falcon_fail_in("state", "state-shape", FALCON_E_SHAPE,
                              "state is [%lld heads][m=%lld][n=%lld] but the inputs have %lld x %lld heads, m = %lld, "
                              "n = %lld",
                              (long long)st->heads, (long long)st->m, (long long)st->n,
                              (long long)(in->cu_seqlens ? in->seqs : in->B), (long long)in->H, (long long)in->m,
                              (long long)in->n);
    if (st->window != cfg->window)
        return falcon_fail_in("state", "state-window",
                              FALCON_E_SHAPE, "state was created for window %lld, the run uses window %lld",
                              (long long)st->window, (long long)cfg->window);
    return falcon_state_check(st, cfg->precision);
}

falcon_status falcon_validate(const falcon_config *cfg, const falcon_inputs *in,
                              const falcon_state *state)
{
    return falcon_validate_from(cfg, in, state, 0);
}

falcon_status falcon_validate_from(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state *state, int64_t t0)
{
    falcon_plan plan;
    const falcon_status s = falcon_plan_make(cfg, in, &plan);
    return s ? s : falcon_validate_plan(&plan, in, state, t0);
}

falcon_status falcon_plan_make(const falcon_config *cfg, const falcon_inputs *in, falcon_plan *plan)
{
    const falcon_status s = check_enums(cfg);
    if (s) return s;
    falcon_plan_resolve(cfg, in, plan);
    return check_config_values(plan);
}

falcon_status falcon_validate_plan(const falcon_plan *plan, const falcon_inputs *in, const falcon_state *state,
                                   int64_t t0)
{
    falcon_status s;
    if (t0 < 0) return falcon_fail_in("t0", "t0-range", FALCON_E_ARGUMENT, "t0 = %lld: must be >= 0", (long long)t0);
    if ((s = check_shapes(plan, in)) || (s = check_state(plan, in, state)))
        return s;
    if (t0 > INT64_MAX - in->T) /* the steps t0 .. t0 + T - 1 must have numbers */
        return falcon_fail_in("t0", "t0-range",
                              FALCON_E_ARGUMENT, "t0 = %lld: with T = %lld steps, the step numbers pass 2^63 - 1",
                              (long long)t0, (long long)in->T);
    if (in->T == 0) return FALCON_OK;
    const falcon_config *cfg = &plan->cfg;
    const int reg = falcon_variant_is_regression(cfg->variant);
    const rule data = falcon_operand_format(cfg->precision) ? RULE_OPERAND : RULE_FINITE;
    if ((s = check_tensor(plan, in, t0, "q", in->q, in->n, data)) ||
        (s = check_tensor(plan, in, t0, "k", in->k, in->n, data)) ||
        (s = check_tensor(plan, in, t0, "v", in->v, in->m, data)) ||
        (s = check_tensor(plan, in, t0, "beta", in->beta, 1, reg ? RULE_BETA_REG : RULE_BETA_IP)))
        return s;
    if (in->alpha && (s = check_tensor(plan, in, t0, "alpha", in->alpha, 1, RULE_ALPHA))) return s;
    if (in->gain && (s = check_tensor(plan, in, t0, "gain", in->gain, in->n, RULE_GAIN))) return s;
    return FALCON_OK;
}
