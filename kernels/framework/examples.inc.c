/*
 * Where the examples of a head come from, for one precision: carried ones
 * from the state's history (converted from double once), then the
 * sequence's own (x, y) = (phi(key), v_t). Which step reveals which example
 * is falcon_math.h's bookkeeping; this file only finds the vectors.
 */
#include <stdlib.h>
#include <string.h>

/* phi of one key or query (n entries) into out: the shared feature maps. */
#define RS_FEATURIZE(phi, in, out, n) REAL_FEATURIZE((phi), (in), (out), (n))

typedef struct RS(example_src) {
    const RS(falcon_head) *h;
    falcon_examples ex;
    REAL *ck, *cv; /* carried raw keys [hist_len][n] and values [hist_len][m] */
    REAL *pk;      /* previous raw key [n], or NULL */
} RS(example_src);

static int RS(examples_open)(RS(example_src) *s, const RS(falcon_head) *h)
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

static void RS(examples_close)(RS(example_src) *s) { free(s->ck); }

/* Raw key and value of example e. */
static void RS(example_get)(const RS(example_src) *s, int64_t e, const REAL **key, const REAL **val)
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

static REAL RS(dot)(const REAL *a, const REAL *b, int64_t n)
{
    REAL s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* z = g * x for Falcon-2/2A (gain row g), else z = x. */
static void RS(write_direction)(const REAL *g, const REAL *x, REAL *z, int64_t n)
{
    if (!g) {
        if (z != x) memcpy(z, x, sizeof(REAL) * (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) z[i] = g[i] * x[i];
}

static void RS(load_memory)(REAL *dst, const double *src, int64_t count)
{
    for (int64_t i = 0; i < count; i++) dst[i] = (REAL)src[i];
}

static void RS(store_memory)(double *dst, const REAL *src, int64_t count)
{
    for (int64_t i = 0; i < count; i++) dst[i] = (double)src[i];
}
