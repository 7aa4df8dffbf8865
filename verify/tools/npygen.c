/*
 * npygen: a small, library-independent .npy tool for verify/test_cli.sh.
 * It has its own reader and writer on purpose: the CLI's files are checked
 * by code that does not share libfalcon's, and it can write the malformed
 * files (other dtypes, Fortran order, other header versions) the library
 * must reject.
 *
 *   npygen rand OUT DTYPE SHAPE SEED [--range LO HI] [--set I=X]... [--descr D]
 *                                    [--fortran] [--version V] [--skip N]
 *       deterministic uniform values in [LO, HI) (default [-1, 1)); DTYPE f4 or
 *       f8; SHAPE "4,3" ("" for 0-d); --set puts X (strtod: "nan" works) at
 *       flat index I; --descr writes another dtype string: '>' swaps the
 *       bytes, a size of 2 writes float16 ones, 'i' writes integers; --skip N
 *       starts N values into the stream: rows [t0, t1) of a [T,...] array
 *       are `rand ... "t1-t0,..." SEED --skip t0*(row size)`, bit for bit.
 *   npygen cmp A B TOL     normwise ||A - B|| / ||B|| <= TOL (absolute if B = 0)
 *   npygen slice IN OUT AXIS START STOP     IN[..., START:STOP, ...] on AXIS
 *   npygen pick IN OUT AXIS I               IN[..., I, ...], AXIS dropped
 *   npygen shape FILE      prints "f8 24,3" (dtype, then the shape)
 *
 * Build: cc -std=c11 -O2 -o npygen verify/tools/npygen.c -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NDIM 12 /* more than the library takes, to test that limit */

typedef struct arr {
    int ndim;
    long long shape[MAX_NDIM];
    long long count;
    double *x; /* values as double, whatever the file's dtype */
    int f8;    /* written as '<f8' (else '<f4') */
} arr;

static void die(const char *msg, const char *arg)
{
    fprintf(stderr, "npygen: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static long long product(const long long *shape, int ndim)
{
    long long c = 1;
    for (int i = 0; i < ndim; i++) c *= shape[i];
    return c;
}

/* ---- writing ---- */

typedef struct wopts {
    const char *descr; /* "<f4" by default */
    int fortran, version;
} wopts;

/* x rounded to the nearest IEEE binary16 (ties to even); overflow gives
 * infinity, as numpy's astype does. */
static uint16_t to_half(double x)
{
    const uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (isnan(x)) return 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00; /* rounds past the largest, 65504 */
    int e;
    frexp(a, &e); /* a = f 2^e, f in [0.5, 1) */
    /* The spacing of float16 around a: 2^(e - 11) for normals, 2^-24 below. */
    const int q = e - 11 < -24 ? -24 : e - 11;
    double m = nearbyint(ldexp(a, -q)); /* the significand in units of 2^q, ties to even */
    double v = ldexp(m, q);
    if (v == 0) return sign;
    int ev;
    frexp(v, &ev);
    if (ev - 1 < -14) return sign | (uint16_t)ldexp(v, 24); /* subnormal: units of 2^-24 */
    return sign | (uint16_t)((ev - 1 + 15) << 10) | (uint16_t)(ldexp(v, 11 - ev) - 1024);
}

/* Element i of `a` in the bytes of `descr` ('<'/'>' f2/f4/f8 or i4/i8). */
static void put_elem(FILE *f, const char *descr, double x)
{
    const int size = descr[2] - '0';
    unsigned char b[8];
    if (descr[1] == 'i') {
        const int64_t v = (int64_t)x;
        for (int k = 0; k < size; k++) b[k] = (unsigned char)((uint64_t)v >> (8 * k));
    } else if (size == 2) {
        const uint16_t h = to_half(x);
        b[0] = (unsigned char)(h & 0xff), b[1] = (unsigned char)(h >> 8);
    } else if (size == 4) {
        const float v = (float)x;
        memcpy(b, &v, 4);
    } else {
        memcpy(b, &x, 8);
    }
    if (descr[0] == '>')
        for (int k = 0; k < size / 2; k++) {
            const unsigned char t = b[k];
            b[k] = b[size - 1 - k], b[size - 1 - k] = t;
        }
    fwrite(b, 1, (size_t)size, f);
}

static void write_npy(const char *path, const arr *a, const wopts *o)
{
    char dict[512], shape[256] = "(";
    for (int i = 0; i < a->ndim; i++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? ", " : "", a->shape[i]);
    strcat(shape, a->ndim == 1 ? ",)" : ")");
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", o->descr,
                       o->fortran ? "True" : "False", shape);
    const int prelude = o->version == 1 ? 10 : 12;
    while ((prelude + len + 1) % 64) dict[len++] = ' ';
    dict[len++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write", path);
    fwrite("\x93NUMPY", 1, 6, f);
    fputc(o->version, f), fputc(0, f);
    for (int k = 0; k < prelude - 8; k++) fputc((len >> (8 * k)) & 0xff, f);
    fwrite(dict, 1, (size_t)len, f);
    for (long long i = 0; i < a->count; i++) put_elem(f, o->descr, a->x[i]);
    if (fclose(f)) die("cannot write", path);
}

/* ---- reading (the little-endian float files this project writes) ---- */

static void read_npy(const char *path, arr *a)
{
    FILE *f = fopen(path, "rb");
    unsigned char pre[12];
    if (!f || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) die("not a .npy file", path);
    long len = pre[8] | pre[9] << 8;
    if (pre[6] > 1) {
        if (fread(pre + 10, 1, 2, f) != 2) die("short header", path);
        len |= (long)pre[10] << 16 | (long)pre[11] << 24;
    }
    char *h = calloc(1, (size_t)len + 1);
    if (!h || fread(h, 1, (size_t)len, f) != (size_t)len) die("short header", path);
    const char *d = strstr(h, "'descr': '"), *s = strstr(h, "'shape': (");
    if (!d || !s || strstr(h, "True")) die("unsupported header", path);
    d += 10;
    if (strncmp(d, "<f4", 3) && strncmp(d, "<f8", 3)) die("not <f4/<f8", path);
    a->f8 = d[2] == '8';
    a->ndim = 0;
    for (s += 10; *s != ')'; s++)
        if (*s >= '0' && *s <= '9') a->shape[a->ndim++] = strtoll(s, (char **)&s, 10), s--;
    a->count = product(a->shape, a->ndim);
    a->x = malloc(sizeof(double) * (size_t)(a->count + 1));
    for (long long i = 0; i < a->count; i++) {
        float v4;
        const int ok = a->f8 ? fread(&a->x[i], 8, 1, f) == 1 : fread(&v4, 4, 1, f) == 1;
        if (!ok) die("short data", path);
        if (!a->f8) a->x[i] = v4;
    }
    if (fgetc(f) != EOF) die("trailing bytes", path);
    fclose(f);
    free(h);
}

/* ---- commands ---- */

static uint64_t rng_state;
static double uniform(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

static int cmd_rand(int argc, char **argv)
{
    if (argc < 6) die("usage: npygen rand OUT DTYPE SHAPE SEED [options]", NULL);
    arr a = {0};
    wopts o = {strcmp(argv[3], "f8") ? "<f4" : "<f8", 0, 1};
    for (char *s = argv[4], *end; *s; s = end + (*end == ',')) {
        a.shape[a.ndim++] = strtoll(s, &end, 10);
        if (end == s || a.ndim == MAX_NDIM || (*end && *end != ',')) die("bad shape", argv[4]);
    }
    a.count = product(a.shape, a.ndim);
    a.x = malloc(sizeof(double) * (size_t)(a.count + 1));
    rng_state = strtoull(argv[5], NULL, 10);
    double lo = -1, hi = 1;
    unsigned long long skip = 0;
    for (int i = 6; i < argc; i++) {
        if (!strcmp(argv[i], "--range") && i + 2 < argc) lo = atof(argv[++i]), hi = atof(argv[++i]);
        else if (!strcmp(argv[i], "--descr") && i + 1 < argc) o.descr = argv[++i];
        else if (!strcmp(argv[i], "--fortran")) o.fortran = 1;
        else if (!strcmp(argv[i], "--version") && i + 1 < argc) o.version = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip") && i + 1 < argc) skip = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--set") || i + 1 >= argc) die("unknown option", argv[i]);
        else i++; /* --set is applied after the values are drawn */
    }
    rng_state += (uint64_t)skip * 0x9e3779b97f4a7c15ull; /* = skip draws of uniform() */
    for (long long i = 0; i < a.count; i++) a.x[i] = lo + (hi - lo) * uniform();
    for (int i = 6; i < argc; i++)
        if (!strcmp(argv[i], "--set")) {
            char *eq;
            const long long at = strtoll(argv[++i], &eq, 10);
            if (*eq != '=' || at < 0 || at >= a.count) die("bad --set", argv[i]);
            a.x[at] = strtod(eq + 1, NULL);
        }
    write_npy(argv[2], &a, &o);
    free(a.x);
    return 0;
}

static int cmd_cmp(int argc, char **argv)
{
    if (argc != 5) die("usage: npygen cmp A B TOL", NULL);
    arr a, b;
    read_npy(argv[2], &a);
    read_npy(argv[3], &b);
    if (a.ndim != b.ndim || memcmp(a.shape, b.shape, sizeof(long long) * (size_t)a.ndim))
        die("shapes differ", argv[3]);
    double diff = 0, ref = 0;
    for (long long i = 0; i < a.count; i++) {
        diff += (a.x[i] - b.x[i]) * (a.x[i] - b.x[i]);
        ref += b.x[i] * b.x[i];
    }
    const double err = ref > 0 ? sqrt(diff / ref) : sqrt(diff), tol = atof(argv[4]);
    printf("relative error %.3g (tolerance %.3g)\n", err, tol);
    free(a.x), free(b.x);
    return err <= tol && !isnan(err) ? 0 : 1;
}

/* slice (keep the axis) or pick (drop it) along one axis. */
static int cmd_cut(int argc, char **argv, int pick)
{
    if (argc != (pick ? 6 : 7)) die(pick ? "usage: npygen pick IN OUT AXIS I" : "usage: npygen slice IN OUT AXIS START STOP", NULL);
    arr a, r;
    read_npy(argv[2], &a);
    const int axis = atoi(argv[4]);
    const long long start = atoll(argv[5]), stop = pick ? start + 1 : atoll(argv[6]);
    if (axis < 0 || axis >= a.ndim || start < 0 || stop > a.shape[axis] || start > stop) die("bad range", NULL);
    const long long outer = product(a.shape, axis), inner = product(a.shape + axis + 1, a.ndim - axis - 1);
    r = a;
    r.shape[axis] = stop - start;
    r.count = product(r.shape, r.ndim);
    r.x = malloc(sizeof(double) * (size_t)(r.count + 1));
    for (long long o = 0, k = 0; o < outer; o++)
        for (long long j = start * inner; j < stop * inner; j++) r.x[k++] = a.x[(o * a.shape[axis]) * inner + j];
    if (pick) {
        memmove(r.shape + axis, r.shape + axis + 1, sizeof(long long) * (size_t)(r.ndim - axis - 1));
        r.ndim--;
    }
    const wopts o = {a.f8 ? "<f8" : "<f4", 0, 1};
    write_npy(argv[3], &r, &o);
    free(a.x), free(r.x);
    return 0;
}

/* swap axes A and A+1 (default 1: [B,T,H,D] <-> [B,H,T,D]; A = ndim-2
 * transposes the last two). */
static int cmd_swap(int argc, char **argv)
{
    if (argc != 4 && argc != 5) die("usage: npygen swap IN OUT [AXIS]", NULL);
    arr a, r;
    read_npy(argv[2], &a);
    const int ax = argc == 5 ? atoi(argv[4]) : 1;
    if (ax < 0 || ax + 1 >= a.ndim) die("bad axis", argv[2]);
    const long long d0 = product(a.shape, ax), d1 = a.shape[ax], d2 = a.shape[ax + 1];
    const long long inner = product(a.shape + ax + 2, a.ndim - ax - 2);
    r = a;
    r.shape[ax] = d2, r.shape[ax + 1] = d1;
    r.x = malloc(sizeof(double) * (size_t)(a.count + 1));
    for (long long i = 0; i < d0; i++)
        for (long long j = 0; j < d1; j++)
            for (long long k = 0; k < d2; k++)
                memcpy(r.x + ((i * d2 + k) * d1 + j) * inner, a.x + ((i * d1 + j) * d2 + k) * inner,
                       sizeof(double) * (size_t)inner);
    const wopts o = {a.f8 ? "<f8" : "<f4", 0, 1};
    write_npy(argv[3], &r, &o);
    free(a.x), free(r.x);
    return 0;
}

/* every element times S (in double, then stored in the file's dtype) */
static int cmd_scale(int argc, char **argv)
{
    if (argc != 5) die("usage: npygen scale IN OUT S", NULL);
    arr a;
    read_npy(argv[2], &a);
    const double f = atof(argv[4]);
    for (long long i = 0; i < a.count; i++) a.x[i] *= f;
    const wopts o = {a.f8 ? "<f8" : "<f4", 0, 1};
    write_npy(argv[3], &a, &o);
    free(a.x);
    return 0;
}

static int cmd_shape(int argc, char **argv)
{
    if (argc != 3) die("usage: npygen shape FILE", NULL);
    arr a;
    read_npy(argv[2], &a);
    printf("%s ", a.f8 ? "f8" : "f4");
    for (int i = 0; i < a.ndim; i++) printf("%s%lld", i ? "," : "", a.shape[i]);
    printf("\n");
    free(a.x);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) die("usage: npygen rand|cmp|slice|pick|swap|scale|shape ...", NULL);
    if (!strcmp(argv[1], "rand")) return cmd_rand(argc, argv);
    if (!strcmp(argv[1], "cmp")) return cmd_cmp(argc, argv);
    if (!strcmp(argv[1], "slice")) return cmd_cut(argc, argv, 0);
    if (!strcmp(argv[1], "pick")) return cmd_cut(argc, argv, 1);
    if (!strcmp(argv[1], "shape")) return cmd_shape(argc, argv);
    if (!strcmp(argv[1], "swap")) return cmd_swap(argc, argv);
    if (!strcmp(argv[1], "scale")) return cmd_scale(argc, argv);
    die("unknown command", argv[1]);
    return 2;
}
