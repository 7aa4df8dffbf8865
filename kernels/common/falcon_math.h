/*
 * The shared math of every backend: feature maps, the normaliser, decay
 * factors and window bookkeeping. Header-only and plain C so that the CPU
 * framework, the CUDA kernels (host and device) and the tests compile the
 * same lines; the backends never re-derive any of it.
 */
#ifndef FALCON_MATH_H
#define FALCON_MATH_H

#include <float.h>
#include <stdint.h>
#include <math.h>

#ifdef __CUDACC__
#define FALCON_HD static __host__ __device__ __forceinline__
#else
#define FALCON_HD static inline
#endif
/* For arrays a function's caller never overlaps: the compiler then
 * vectorizes its loops without a run-time overlap test per call (GCC
 * takes restrict on parameters, not on local pointers). */
#if defined(__CUDACC__) || defined(__cplusplus)
#define FALCON_RESTRICT __restrict__
#else
#define FALCON_RESTRICT restrict
#endif

/* ---- operand formats of tensor-core products (tf32, bf16) ----
 * A format keeps fp32's sign and 8-bit exponent and the top 23 - drop bits
 * of its fraction: tf32 drops 13 (10 fraction bits, unit roundoff 2^-11),
 * bf16 drops 16 (7 bits, 2^-8); drop 0 is fp32 itself. Rounding is to
 * nearest, ties to even, on the bits: adding half an ulp less one, plus
 * the kept part's lowest bit, carries exactly when the dropped part is
 * above half or equal to it with an odd kept part; a carry into the
 * exponent gives the next binade, or infinity past the format's largest
 * number (inputs are validated below it, falcon_operand_max). Subnormal
 * values round on the same grid; zero and infinity stay as they are. NaN is
 * never passed (inputs are validated finite). The product of two operands
 * then has at most 2 (24 - drop) significant bits: exact in fp32, so an
 * fp32 FMA accumulates it as a tensor core does. */
#define FALCON_TF32_DROP 13
#define FALCON_BF16_DROP 16

FALCON_HD float falcon_round_operand(float x, int drop)
{
    union {
        float f;
        uint32_t u;
    } b;
    b.f = x;
    const uint32_t low = (1u << drop) - 1u;
    b.u = (b.u + (low >> 1) + ((b.u >> drop) & 1u)) & ~low;
    return b.f;
}

/* The largest finite number of a format: fp32's with the dropped bits 0. */
FALCON_HD float falcon_operand_format_max(int drop)
{
    union {
        float f;
        uint32_t u;
    } b;
    b.u = 0x7F7FFFFFu & ~((1u << drop) - 1u);
    return b.f;
}

/* ---- window bookkeeping (integers only) ----
 * Examples are numbered 0, 1, ... in the order they are revealed: first the
 * `carried` examples of the state (oldest first), then one per step that has
 * one. Under prefix alignment a step learns the previous key, so the first
 * step of a fresh state (no previous key) reveals nothing: `shift` = 1. */
typedef struct falcon_examples {
    int64_t carried; /* examples carried in the state's history */
    int64_t shift;   /* 1 if step 0 has no example (prefix, no previous key) */
    int64_t window;  /* W */
} falcon_examples;

FALCON_HD falcon_examples falcon_examples_make(int64_t carried, int prefix, int has_prev,
                                               int64_t window)
{
    falcon_examples ex;
    ex.carried = carried;
    ex.shift = (prefix && !has_prev) ? 1 : 0;
    ex.window = window;
    return ex;
}

/* Example revealed by step t, or -1 if the step reveals none. */
FALCON_HD int64_t falcon_example_of_step(const falcon_examples *ex, int64_t t)
{
    return t < ex->shift ? -1 : ex->carried + t - ex->shift;
}

/* Step (of this call) that revealed example e, or -1 if e was carried in. */
FALCON_HD int64_t falcon_step_of_example(const falcon_examples *ex, int64_t e)
{
    return e < ex->carried ? -1 : e - ex->carried + ex->shift;
}

/* First example of the window that ends at example e (E_t = [first, e]). */
FALCON_HD int64_t falcon_window_first(const falcon_examples *ex, int64_t e)
{
    int64_t f = e - ex->window + 1;
    return f < 0 ? 0 : f;
}

/* Number of examples known after steps 0..T-1 (carried ones included). */
FALCON_HD int64_t falcon_examples_after(const falcon_examples *ex, int64_t T)
{
    int64_t own = T - ex->shift;
    return ex->carried + (own > 0 ? own : 0);
}

/* ---- decay factors ----
 * A row of pairwise decay factors F[i][j] = alpha_{j+1} * ... * alpha_i for
 * j < i, F[i][i] = 1. Advancing from row i-1 to row i multiplies by alpha_i.
 * Taken as running products of the (positive, <= 1) alphas, a factor never
 * overflows, never divides two underflowed numbers, and carries a relative
 * error of at most (i - j) roundoffs whatever the size of log alpha; this is
 * how the forms meet docs/math.md section 8 without exponentials. Kept in
 * double. A factor that would fall below the smallest normal double is
 * zero (the comparison comes before the product, which would otherwise be
 * a subnormal result: a microcode assist on x86 for every one, and
 * near-reset decays make them by the thousand). Nothing it could scale in
 * fp32 is lost. In fp64 the chunk form's block ends keep every factor
 * between two steps of a block above 2^-996 (blocked.inc.c); only the
 * decay of the memory a block starts from, times its first alpha, can
 * fall below, and then a memory entry above 2^52 that it would still leave
 * normal is lost (the subnormal product kept fewer than 52 bits of it).
 * falcon_decay_entry is one entry's step (keep from falcon_decay_keep), for
 * a loop that does more with each new entry: the chunk driver converts
 * them as they are made. */
FALCON_HD double falcon_decay_keep(double alpha) { return 0x1p-1022 / alpha; } /* r * alpha >= the smallest normal */
FALCON_HD double falcon_decay_entry(double r, double keep, double alpha)
{
    return (r < keep ? 0.0 : r) * alpha; /* select, then multiply */
}

FALCON_HD void falcon_decay_row_advance(double *row, int64_t i, double alpha)
{
    const double keep = falcon_decay_keep(alpha);
    for (int64_t j = 0; j < i; j++) row[j] = falcon_decay_entry(row[j], keep, alpha);
    row[i] = 1.0;
}

/* ---- normaliser ----
 * eta = beta / (eps + sum_{i in E} x_i . z_i). The dot products are summed
 * oldest example first in every form so the forms agree to rounding. */
#define FALCON_ETA(beta, eps, xz_sum) ((beta) / ((eps) + (xz_sum)))

/* ---- key scaling (the normaliser at the limits of the precision) ----
 * With keys of magnitude 1e20 in fp32, x.x overflows and eta = beta /
 * (eps + x.x) comes out 0, although the write eta (y - S x) x^T, of order
 * beta |y| / |x|, is representable; with tiny keys and a tiny eps, eta
 * overflows while the write does not. So an example whose x.z, computed as
 * it is, falls outside [2^-62, 2^62] (fp32; [2^-510, 2^510] in fp64; zero,
 * subnormal and infinite included) has its feature vector divided by a
 * scale s, a power of two (exact division), chosen so that its largest
 * magnitude lands in [1, 2): x = s x', and x'.z' is computed again. Every
 * other example keeps s = 1, so inputs of ordinary size cost one comparison
 * and compute exactly what they did unscaled: no sum of at most W = 2^12
 * such terms, and no eta, can then leave the range. A vector whose largest
 * magnitude lies in [2^-31, 2^31] (fp32; 2^-255, 2^255 in fp64), or is zero,
 * is never scaled.
 *
 * A step whose window holds examples of scales s_l takes sigma = max s_l,
 * rho_l = s_l / sigma (<= 1) and
 *     sum' = SUM_l rho_l^2 x'_l . z'_l          (x . z = sigma^2 sum')
 *     c    = beta sigma / (eps + sigma^2 sum')  (= eta sigma)
 * and writes c rho_l e_l z'_l^T, with e_l = y_l - Sbar (s_l x'_l): exactly
 * eta e_l z_l^T. falcon_eta_scaled computes c without forming sigma^2 or
 * eps / sigma^2 where they would leave the range; with sigma = 1 it is
 * FALCON_ETA, bit for bit. A denominator that overflows even so gives NaN:
 * the run then reports an overflow rather than a silent eta = 0.
 *
 * Falcon-2/2A (W = 1) write along z = g * x, which huge or tiny gains can
 * take out of range on their own: gains far from 1 are divided by their
 * scale before the product (falcon_gain_direction), and if x'.z' is still
 * out of range after x is scaled, z' is divided by its own scale as well;
 * z = s tau z'' with tau the product of the two, and the step passes tau:
 * c = beta s tau / (eps + s^2 tau x'.z'') = eta s tau, the coefficient of
 * z''. tau = 1 everywhere else. */
FALCON_HD int falcon_xz_in_range_f32(float xz) { return xz >= 0x1p-62f && xz <= 0x1p62f; }
FALCON_HD int falcon_xz_in_range_f64(double xz) { return xz >= 0x1p-510 && xz <= 0x1p510; }

/* The power of two a vector is divided by to bring its largest magnitude
 * into [2^-B, 2^B] (B = 31 in fp32, 255 in fp64), from its exponent;
 * 1 when it is there already, or the vector is zero. */
#define FALCON_POW2_SCALE_BODY(R, FABS, FREXP, LDEXP, LO, HI)               \
    R amax = 0;                                                             \
    for (int64_t i = 0; i < n; i++) {                                       \
        R a = FABS(v[i]);                                                   \
        if (a > amax) amax = a;                                             \
    }                                                                       \
    if (amax == 0 || (amax >= (LO) && amax <= (HI))) return 1;             \
    int ex;                                                                 \
    (void)FREXP(amax, &ex); /* amax = f 2^ex, f in [0.5, 1) */              \
    return LDEXP((R)1, ex - 1);

FALCON_HD float falcon_pow2_scale_f32(const float *v, int64_t n)
{
    FALCON_POW2_SCALE_BODY(float, fabsf, frexpf, ldexpf, 0x1p-31f, 0x1p31f)
}

FALCON_HD double falcon_pow2_scale_f64(const double *v, int64_t n)
{
    FALCON_POW2_SCALE_BODY(double, fabs, frexp, ldexp, 0x1p-255, 0x1p255)
}
#undef FALCON_POW2_SCALE_BODY

/* Divide the feature vector x[n] by its scale (in place); returns the scale
 * (1: x is left as it is). */
#define FALCON_KEY_SCALE_BODY(R, SFX)                                       \
    const R s = falcon_pow2_scale_##SFX(x, n);                              \
    for (int64_t i = 0; s != 1 && i < n; i++) x[i] = x[i] / s;              \
    return s;

FALCON_HD float falcon_key_scale_f32(float *x, int64_t n) { FALCON_KEY_SCALE_BODY(float, f32) }
FALCON_HD double falcon_key_scale_f64(double *x, int64_t n) { FALCON_KEY_SCALE_BODY(double, f64) }
#undef FALCON_KEY_SCALE_BODY

/* Falcon-2/2A's write direction z = g * x (n entries), returning tau with
 * z = g x / tau. Gains whose largest magnitude is far from 1 (outside the
 * key scale's range) are divided by their power-of-two scale first, which
 * is exact: formed as g * x and scaled afterwards, a tiny z would already
 * have been rounded as a subnormal, with digits lost (fp32 gains of 1e-41
 * gave errors of 1000 units of roundoff), or a huge one have overflowed.
 * Gains of ordinary size: tau = 1 and z = g * x, bit for bit. */
#define FALCON_GAIN_DIRECTION_BODY(R, SFX)                                  \
    const R tau = falcon_pow2_scale_##SFX(g, n);                            \
    if (tau == 1)                                                           \
        for (int64_t i = 0; i < n; i++) z[i] = g[i] * x[i];                 \
    else                                                                    \
        for (int64_t i = 0; i < n; i++) z[i] = (g[i] / tau) * x[i];         \
    return tau;

FALCON_HD float falcon_gain_direction_f32(const float *g, const float *x, float *z, int64_t n)
{
    FALCON_GAIN_DIRECTION_BODY(float, f32)
}

FALCON_HD double falcon_gain_direction_f64(const double *g, const double *x, double *z, int64_t n)
{
    FALCON_GAIN_DIRECTION_BODY(double, f64)
}
#undef FALCON_GAIN_DIRECTION_BODY

/* c itself must keep its digits whenever beta > 0: tiny keys or gains
 * (sigma tau far below 1) with a large eps make eps / (sigma tau), and a
 * huge eps makes eps + sum, so large that c comes out subnormal, with
 * digits lost, or 0 (fp32 keys of 1e-12 with eps = 1e30: every write 0,
 * the memory never moving, although the exact writes and outputs are
 * normal numbers). A c of at least MIN_NORMAL / 8 has lost at most 3 bits
 * (4 u more in c: subnormal gains of 1e-43 in fp32 with eps = 1e-6 give
 * c = 1.95 * 2^-128, and outputs within 2 u); below that, NaN, which the
 * run reports as a result out of its precision's range, rather than a
 * silent wrong answer. */
#define FALCON_ETA_SCALED_BODY(R, MIN_NORMAL)                               \
    R b = beta, e = eps, x = sum;                                           \
    if (sigma > 1) { /* sigma^2 sum' may overflow: divide by sigma first */ \
        b = beta / sigma;                                                   \
        e = eps / sigma / sigma / tau;                                      \
    } else if (sigma < 1 || tau != 1) { /* eps / sigma^2 may overflow */   \
        e = eps / sigma / tau;                                              \
        x = sigma * sum;                                                    \
    }                                                                       \
    if (isinf(x)) return (R)NAN;                                            \
    if (e + x == 0) return 0; /* only with sum' = 0: then z' = 0 */         \
    const R c = FALCON_ETA(b, e, x);                                        \
    return beta > 0 && !(c >= (MIN_NORMAL) / 8) ? (R)NAN : c;

FALCON_HD float falcon_eta_scaled_f32(float beta, float eps, float sigma, float tau, float sum)
{
    FALCON_ETA_SCALED_BODY(float, FLT_MIN)
}

FALCON_HD double falcon_eta_scaled_f64(double beta, double eps, double sigma, double tau,
                                        double sum)
{
    FALCON_ETA_SCALED_BODY(double, DBL_MIN)
}
#undef FALCON_ETA_SCALED_BODY

/* The backward pass's nu = sigma tau / N (N = eps + SUM x.z, docs/math.md
 * 12.1): c / beta, formed as falcon_eta_scaled forms c with beta = 1, but
 * without its underflow guard, since beta may be 0 there (dbeta = nu D
 * needs nu even then). 0 where e + x is 0 (then z' = 0). Shared by the
 * CPU framework's and the CUDA backend's reverse sweeps. */
#define FALCON_NU_SCALED_BODY(R)                                            \
    R one = 1, e = eps, x = sum;                                            \
    if (sigma > 1) {                                                        \
        one = 1 / sigma;                                                    \
        e = eps / sigma / sigma / tau;                                      \
    } else if (sigma < 1 || tau != 1) {                                     \
        e = eps / sigma / tau;                                              \
        x = sigma * sum;                                                    \
    }                                                                       \
    return e + x == 0 ? 0 : one / (e + x);

FALCON_HD float falcon_nu_scaled_f32(float eps, float sigma, float tau, float sum) { FALCON_NU_SCALED_BODY(float) }
FALCON_HD double falcon_nu_scaled_f64(double eps, double sigma, double tau, double sum)
{
    FALCON_NU_SCALED_BODY(double)
}
#undef FALCON_NU_SCALED_BODY

/* ---- feature maps, one element (relu and elu1; l2norm needs the vector) ---- */
enum { FALCON_MATH_PHI_IDENTITY, FALCON_MATH_PHI_RELU, FALCON_MATH_PHI_ELU1, FALCON_MATH_PHI_L2NORM };

FALCON_HD float falcon_phi_elem_f32(int phi, float x)
{
    if (phi == FALCON_MATH_PHI_RELU) return x > 0.0f ? x : 0.0f;
    if (phi == FALCON_MATH_PHI_ELU1) return x > 0.0f ? x + 1.0f : expf(x);
    return x;
}

FALCON_HD double falcon_phi_elem_f64(int phi, double x)
{
    if (phi == FALCON_MATH_PHI_RELU) return x > 0.0 ? x : 0.0;
    if (phi == FALCON_MATH_PHI_ELU1) return x > 0.0 ? x + 1.0 : exp(x);
    return x;
}

/* The l2 norm's scaling, shared by featurize and its Jacobian: amax, the
 * largest magnitude of v[n], and r = ||v / amax|| (so ||v|| = amax r with
 * no overflow or underflow of the squares); out[n] = 0 and return when v
 * is 0 (phi(0) = 0, and the convention's zero Jacobian). Declares amax,
 * ss and r in the enclosing function. */
#define FALCON_SCALED_NORM(R, SQRT, FABS, v)                                \
    R amax = 0;                                                             \
    for (int64_t i = 0; i < n; i++) {                                       \
        const R a = FABS(v[i]);                                             \
        if (a > amax) amax = a;                                             \
    }                                                                       \
    if (amax == 0) {                                                        \
        for (int64_t i = 0; i < n; i++) out[i] = 0;                         \
        return;                                                             \
    }                                                                       \
    R ss = 0;                                                               \
    for (int64_t i = 0; i < n; i++) {                                       \
        const R s = v[i] / amax;                                            \
        ss += s * s;                                                        \
    }                                                                       \
    const R r = SQRT(ss);

/* ---- feature maps, one whole vector ----
 * phi of n entries into out (out != in), for every backend: the CPU
 * framework calls it as RS(falcon_featurize), the CUDA kernels (host and
 * device) as falcon_featurize_f32. Identity is a plain copy (which the
 * compiler vectorizes). l2norm is scaled by the largest magnitude so that
 * the sum of squares can neither overflow nor underflow, and maps 0 to 0. */
#define FALCON_FEATURIZE_BODY(R, ELEM, SQRT, FABS, FREXP, LDEXP, MIN_NORMAL) \
    if (phi == FALCON_MATH_PHI_IDENTITY) {                                  \
        for (int64_t i = 0; i < n; i++) out[i] = in[i];                     \
        return;                                                             \
    }                                                                       \
    if (phi != FALCON_MATH_PHI_L2NORM) {                                    \
        for (int64_t i = 0; i < n; i++) out[i] = ELEM(phi, in[i]);          \
        return;                                                             \
    }                                                                       \
    FALCON_SCALED_NORM(R, SQRT, FABS, in)                                   \
    R norm = amax * r;                                                      \
    if (norm >= (MIN_NORMAL)) {                                             \
        for (int64_t i = 0; i < n; i++) out[i] = in[i] / norm;             \
        return;                                                             \
    }                                                                       \
    /* A norm below the normal range would be rounded as a subnormal, its  \
     * digits lost (fp32 keys of 1e-42: errors of 3000 u in the memory):   \
     * the vector is first multiplied up by 2^-ex, exactly, in two powers  \
     * of two (2^-ex alone is out of range for the smallest subnormals). */\
    int ex;                                                                 \
    (void)FREXP(amax, &ex);                                                 \
    const R up1 = LDEXP((R)1, -ex / 2), up2 = LDEXP((R)1, -ex - -ex / 2);   \
    ss = 0;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                       \
        const R s = in[i] * up1 * up2;                                      \
        ss += s * s;                                                        \
    }                                                                       \
    norm = SQRT(ss);                                                        \
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * up1 * up2 / norm;

FALCON_HD void falcon_featurize_f32(int phi, const float *FALCON_RESTRICT in, float *FALCON_RESTRICT out, int64_t n)
{
    FALCON_FEATURIZE_BODY(float, falcon_phi_elem_f32, sqrtf, fabsf, frexpf, ldexpf, FLT_MIN)
}

FALCON_HD void falcon_featurize_f64(int phi, const double *FALCON_RESTRICT in, double *FALCON_RESTRICT out,
                                      int64_t n)
{
    FALCON_FEATURIZE_BODY(double, falcon_phi_elem_f64, sqrt, fabs, frexp, ldexp, DBL_MIN)
}
#undef FALCON_FEATURIZE_BODY

/* ---- feature maps' Jacobians (docs/math.md section 12.1) ----
 * out = J_phi(x)^T d for the raw vector x[n] and an adjoint d[n] (out
 * differs from both): identity d; relu d where x > 0, else 0 (0 at the
 * kink); elu1 d where x > 0, else exp(x) d; l2norm (d - p (p . d)) / ||x||
 * with p = x / ||x||, and 0 for x = 0. The l2norm norm is taken as
 * featurize takes it, scaled by the largest magnitude a (||x|| = a r, r =
 * ||x / a||), and the division by it is made as / r, then / a: neither
 * ||x|| itself nor a subnormal rounding of it is ever formed, so keys of
 * 1e-30 or 1e30 (1e-300, 1e300 in fp64) give the finite gradients the
 * exact ones are. Shared by every backend, as featurize is. */
#define FALCON_PHI_VJP_BODY(R, EXP, SQRT, FABS)                             \
    if (phi == FALCON_MATH_PHI_IDENTITY) {                                  \
        for (int64_t i = 0; i < n; i++) out[i] = d[i];                      \
        return;                                                             \
    }                                                                       \
    if (phi == FALCON_MATH_PHI_RELU) {                                      \
        for (int64_t i = 0; i < n; i++) out[i] = x[i] > 0 ? d[i] : (R)0;    \
        return;                                                             \
    }                                                                       \
    if (phi == FALCON_MATH_PHI_ELU1) {                                      \
        for (int64_t i = 0; i < n; i++) out[i] = x[i] > 0 ? d[i] : EXP(x[i]) * d[i]; \
        return;                                                             \
    }                                                                       \
    FALCON_SCALED_NORM(R, SQRT, FABS, x)                                    \
    R pd = 0;                                                               \
    for (int64_t i = 0; i < n; i++) pd += (x[i] / amax / r) * d[i];        \
    for (int64_t i = 0; i < n; i++) out[i] = (d[i] - (x[i] / amax / r) * pd) / r / amax;

FALCON_HD void falcon_phi_vjp_f32(int phi, const float *FALCON_RESTRICT x, const float *FALCON_RESTRICT d,
                                  float *FALCON_RESTRICT out, int64_t n)
{
    FALCON_PHI_VJP_BODY(float, expf, sqrtf, fabsf)
}

FALCON_HD void falcon_phi_vjp_f64(int phi, const double *FALCON_RESTRICT x, const double *FALCON_RESTRICT d,
                                  double *FALCON_RESTRICT out, int64_t n)
{
    FALCON_PHI_VJP_BODY(double, exp, sqrt, fabs)
}
#undef FALCON_PHI_VJP_BODY
#undef FALCON_SCALED_NORM

/* ---- a block whose end state cancels its carried memory ----
 * A regression block's end state S_L = F S_0 + Z^T R holds S_0 twice; where
 * its steps project most of S_0 away the two terms cancel and S_L keeps
 * rounding errors the size of F S_0 (kernels/framework/blocked.inc.c).
 * The chunk and parallel forms (CPU and CUDA) then run the block again as
 * two halves, each checked the same way, down to single steps: when the
 * decayed start memory's largest magnitude, f a0, exceeds FALCON_CUT_RATIO
 * times the end state's, a1 (NaN: no cut). Magnitudes are compared on the
 * bits: |x|'s bits order as unsigned integers, a NaN above any number. */
#define FALCON_CUT_RATIO 2.0
FALCON_HD int falcon_block_cancels(double f, double a0, double a1) { return f * a0 > FALCON_CUT_RATIO * a1; }
FALCON_HD uint32_t falcon_mag_bits_f32(float x)
{
    union {
        float f;
        uint32_t u;
    } b;
    b.f = x;
    return b.u & 0x7fffffffu;
}
FALCON_HD float falcon_mag_of_bits_f32(uint32_t u)
{
    union {
        float f;
        uint32_t u;
    } b;
    b.u = u;
    return b.f;
}

#endif /* FALCON_MATH_H */
