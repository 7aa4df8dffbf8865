/*
 * Where the examples of a head come from, for one precision: carried ones
 * from the state's history (converted from double once), then the
 * sequence's own (x, y) = (phi(key), v_t). Which step reveals which example
 * is falcon_math.h's bookkeeping; this file only finds the vectors.
 */
#include <stdlib.h>
#include <string.h>

/* ---- work memory ----
 * Work matrices start on a cache line and their rows are padded to whole
 * cache lines (the micro-kernels' loads and stores then never split a
 * line). Results do not depend on it: every micro-kernel computes each
 * element by the same sequence whatever the alignment and leading
 * dimensions. */
#define FW_LINE 64

/* n rounded up to whole cache lines of REAL. */
static inline int64_t RS(padded)(int64_t n)
{
    const int64_t per = FW_LINE / (int64_t)sizeof(REAL);
    return (n + per - 1) / per * per;
}

/* Carve consecutive line-aligned pieces out of one allocation: first a pass
 * with base == NULL to size it, then the real pass. */
typedef struct carver {
    char *base;
    size_t used;
} carver;

static inline void *RS(carve)(carver *c, size_t bytes)
{
    void *p = c->base ? c->base + c->used : NULL;
    c->used += (bytes + FW_LINE - 1) / FW_LINE * FW_LINE;
    return p;
}

/* Work memory comes from the head's work->get (head.h: line-aligned; the
 * library keeps large blocks between calls) and goes back through work->put with
 * the size it reported. */
_Static_assert(FW_LINE <= 64, "the work memory aligns to 64 bytes");

/* Software prefetch of a row of the caller's [B][T][H][D] tensors: the rows
 * of one head are H*D apart, a stride the hardware prefetchers do not
 * follow across pages. rw: 0 read, 1 write. Four lines an iteration: a
 * chunk block issues about four thousand of these, and the plain loop's
 * add, compare and branch per line made them about six instructions each
 * (docs/performance.md, "Chunk form: the row prefetch loop"). */
#define FW_PREFETCH_ROW(ptr, bytes, rw, loc)                                    \
    do {                                                                         \
        const uintptr_t fw_a = (uintptr_t)(ptr), fw_e = fw_a + (size_t)(bytes); \
        uintptr_t fw_o = fw_a & ~(uintptr_t)(FW_LINE - 1);                       \
        for (; fw_o + 3 * FW_LINE < fw_e; fw_o += 4 * FW_LINE) {                 \
            __builtin_prefetch((const void *)fw_o, (rw), (loc));                 \
            __builtin_prefetch((const void *)(fw_o + FW_LINE), (rw), (loc));     \
            __builtin_prefetch((const void *)(fw_o + 2 * FW_LINE), (rw), (loc)); \
            __builtin_prefetch((const void *)(fw_o + 3 * FW_LINE), (rw), (loc)); \
        }                                                                        \
        for (; fw_o < fw_e; fw_o += FW_LINE)                                     \
            __builtin_prefetch((const void *)fw_o, (rw), (loc));                 \
    } while (0)

/* Every row step u of head h reads (q, k, v, gain, beta, alpha) or writes
 * (out), with locality hint loc (a compile-time constant). */
#define FW_PREFETCH_STEP(h, u, loc)                                                           \
    do {                                                                                      \
        const size_t fw_kb = sizeof(REAL) * (size_t)(h)->n, fw_vb = sizeof(REAL) * (size_t)(h)->m; \
        FW_PREFETCH_ROW((h)->q + (u) * (h)->ldk, fw_kb, 0, (loc));                            \
        FW_PREFETCH_ROW((h)->k + (u) * (h)->ldk, fw_kb, 0, (loc));                            \
        FW_PREFETCH_ROW((h)->v + (u) * (h)->ldv, fw_vb, 0, (loc));                            \
        if ((h)->gain) FW_PREFETCH_ROW((h)->gain + (u) * (h)->ldk, fw_kb, 0, (loc));         \
        FW_PREFETCH_ROW((h)->out + (u) * (h)->ldo, fw_vb, 1, (loc));                          \
        __builtin_prefetch((h)->beta + (u) * (h)->lds, 0, (loc));                             \
        if ((h)->alpha) __builtin_prefetch((h)->alpha + (u) * (h)->lds, 0, (loc));           \
    } while (0)

typedef struct example_src {
    const RS(falcon_head) *h;
    falcon_examples ex;
    REAL *ck, *cv; /* carried raw keys [hist_len][n] and values [hist_len][m] */
    REAL *pk;      /* previous raw key [n], or NULL */
} example_src;

static int RS(examples_open)(example_src *s, const RS(falcon_head) *h)
{
    int64_t n = h->n, m = h->m, c = h->hist_len;
    memset(s, 0, sizeof *s);
    s->h = h;
    s->ex = falcon_examples_make(c, h->prefix, h->prev_key != NULL, h->window);
    s->ck = malloc(sizeof(REAL) * (size_t)(c * n + c * m + n));
    if (!s->ck) return -1;
    s->cv = s->ck + c * n;
    for (int64_t i = 0; i < c * n; i++) s->ck[i] = (REAL)h->hist_k[i];
    for (int64_t i = 0; i < c * m; i++) s->cv[i] = (REAL)h->hist_v[i];
    if (h->prev_key) {
        s->pk = s->cv + c * m;
        for (int64_t i = 0; i < n; i++) s->pk[i] = (REAL)h->prev_key[i];
    }
    return 0;
}

static void RS(examples_close)(example_src *s) { free(s->ck); }

/* Raw key and value of example e. */
static void RS(example_get)(const example_src *s, int64_t e, const REAL **key, const REAL **val)
{
    const RS(falcon_head) *h = s->h;
    if (e < s->ex.carried) {
        *key = s->ck + e * h->n;
        *val = s->cv + e * h->m;
        return;
    }
    int64_t t = falcon_step_of_example(&s->ex, e);
    *val = h->v + t * h->ldv;
    if (!h->prefix)
        *key = h->k + t * h->ldk;
    else
        *key = t == 0 ? s->pk : h->k + (t - 1) * h->ldk;
}

/* One example's residual row, the value its write stores (docs/math.md
 * sections 1 and 7), shared by both drivers:
 *     e = c (y - a p)          (FW_RES_PLAIN: regression, key unscaled)
 *     e = c (y - a (s p))      (FW_RES_SCALED: the key stored as x / s)
 *     e = c y                  (FW_RES_VALUE: the inner-product variants)
 * with p = S x read before the write (the recurrent step's P row, the chunk
 * block's U row), a the decay between that memory and this step, c the
 * step's eta (times the key's window weight). With s = 1 the scaled form
 * is the plain one bit for bit (1 p = p), so the choice only saves the
 * multiply. Restrict parameters: the loops vectorize with no overlap test
 * per call (GCC ignores restrict on a caller's local pointers). */
enum { FW_RES_PLAIN, FW_RES_SCALED, FW_RES_VALUE };

static inline int fw_res_kind(int regression, double s)
{
    return !regression ? FW_RES_VALUE : s == 1 ? FW_RES_PLAIN : FW_RES_SCALED;
}

static inline void RS(residual_row)(int64_t m, int kind, REAL c, REAL a, REAL s, const REAL *restrict y,
                                    const REAL *restrict p, REAL *restrict e)
{
    if (kind == FW_RES_PLAIN)
        for (int64_t r = 0; r < m; r++) e[r] = c * (y[r] - a * p[r]);
    else if (kind == FW_RES_SCALED)
        for (int64_t r = 0; r < m; r++) e[r] = c * (y[r] - a * (s * p[r]));
    else
        for (int64_t r = 0; r < m; r++) e[r] = c * y[r];
}

/* The drivers' check that their results are finite, made on each output
 * row right after it is written, while it is in L1 (a separate pass over
 * the whole output after the call read it back from DRAM: 3% of a call
 * at T = 4096, 8 heads). finite_add adds x - x into ck, which is 0
 * exactly for a finite x and NaN for an infinity or a NaN, and a NaN
 * stays: ck [n] stays 0 while every row added is finite. Lane by lane, so
 * it vectorizes with no horizontal step per row (a per-row reduction to
 * one flag cost 4% of a recurrent call); all_zero reads ck once, when the
 * head closes. */
static inline void RS(finite_add)(REAL *restrict ck, const REAL *restrict x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) ck[i] += x[i] - x[i];
}

static inline int RS(all_zero)(const REAL *restrict ck, int64_t n)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad |= !(ck[i] == 0);
    return !bad;
}

/* z = g * x / tau for Falcon-2/2A (gain row g; tau from falcon_gain_direction),
 * else z = x and tau = 1. Returns tau. */
static REAL RS(write_direction)(const REAL *g, const REAL *x, REAL *z, int64_t n)
{
    if (!g) {
        if (z != x) memcpy(z, x, sizeof(REAL) * (size_t)n);
        return 1;
    }
    return RS(falcon_gain_direction)(g, x, z, n);
}

/* The memory S [m][n] (double, the state's) to and from the work copy,
 * which the drivers keep transposed: St [n][m] with leading dimension ld.
 * Every product with S is then an axpy-form GEMM (rows of St scaled by
 * the entries of a key and summed, kernels/simd/axpy.inc.c), which needs
 * no horizontal reductions: the dot-product form's shuffles share a port
 * with one of the two FMA pipes of two-port AVX-512 cores.
 * Both walk 16 x 16 tiles: element by element, one of the two sides is
 * read or written a cache line per element (n m per head and call: 3% of
 * a chunk call at T = 1024, 8 heads of n = m = 128); within a tile both
 * sides stay in L1. */
#define FW_MEMORY_TILE 16
static inline int64_t RS(tile_end)(int64_t x0, int64_t len)
{
    return len - x0 < FW_MEMORY_TILE ? len : x0 + FW_MEMORY_TILE;
}

/* d and f: the recurrent form's lazy decay factor (recurrent.inc.c), with
 * which the work copy holds S / d and the state gets f times it; 1 for
 * the memory as it is. In fp32 runs both are exact: f is a float, and the
 * product of two floats is a double, which divided by the float gives the
 * other back (division rounds correctly, and the quotient is a float). */
static void RS(load_memory)(REAL *dst, int64_t ld, const double *src, int64_t m, int64_t n, double d)
{
    for (int64_t r0 = 0; r0 < m; r0 += FW_MEMORY_TILE)
        for (int64_t c0 = 0; c0 < n; c0 += FW_MEMORY_TILE)
            for (int64_t c = c0; c < RS(tile_end)(c0, n); c++)
                if (d == 1)
                    for (int64_t r = r0; r < RS(tile_end)(r0, m); r++) dst[c * ld + r] = (REAL)src[r * n + c];
                else
                    for (int64_t r = r0; r < RS(tile_end)(r0, m); r++) dst[c * ld + r] = (REAL)(src[r * n + c] / d);
}

/* Every row of the work copy added into ck (finite_add above): the
 * drivers' check of the memory they leave, made right before they store
 * it, while it is cached, as for the outputs. */
static void RS(check_memory)(REAL *ck, const REAL *src, int64_t ld, int64_t m, int64_t n)
{
    for (int64_t c = 0; c < n; c++) RS(finite_add)(ck, src + c * ld, m);
}

static void RS(store_memory)(double *dst, const REAL *src, int64_t ld, int64_t m, int64_t n, double f)
{
    for (int64_t r0 = 0; r0 < m; r0 += FW_MEMORY_TILE)
        for (int64_t c0 = 0; c0 < n; c0 += FW_MEMORY_TILE)
            for (int64_t r = r0; r < RS(tile_end)(r0, m); r++)
                if (f == 1)
                    for (int64_t c = c0; c < RS(tile_end)(c0, n); c++) dst[r * n + c] = (double)src[c * ld + r];
                else
                    for (int64_t c = c0; c < RS(tile_end)(c0, n); c++) dst[r * n + c] = f * (double)src[c * ld + r];
}
#undef FW_MEMORY_TILE
