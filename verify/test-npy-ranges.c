/*
 * The pieces behind `falcon run` on inputs larger than memory: .npy readers
 * and writers by ranges of elements, and validation of a segment with its
 * steps counted from the start of the sequence.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "falcon.h"
#include "falcon_io.h"

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/falcon-npy-ranges-XXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert(system(cmd) == 0);
}

static const char *path_of(const char *name)
{
    static char p[160];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* Ranges out of order make the file; every range reads back, converted. */
Test(npy_ranges, write_out_of_order_read_in_ranges, .init = make_dir, .fini = remove_dir)
{
    enum { R = 37, C = 3 };
    float x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = 0.5f * (float)i - 7.0f;
    const falcon_array a = {FALCON_DTYPE_F32, 2, {R, C}, R * C, NULL};
    falcon_npy_writer *w;
    cr_assert(falcon_npy_create(path_of("a.npy"), &a, &w) == FALCON_OK, "%s", falcon_last_error());
    cr_assert(access(path_of("a.npy"), F_OK) != 0, "the file appeared before the commit");
    cr_assert(falcon_npy_write_range(w, 60, R * C - 60, x + 60) == FALCON_OK);
    cr_assert(falcon_npy_write_range(w, 0, 60, x) == FALCON_OK);
    cr_assert(falcon_npy_write_range(w, R * C - 1, 2, x) == FALCON_E_ARGUMENT, "a range past the end");
    cr_assert(falcon_npy_commit(w) == FALCON_OK, "%s", falcon_last_error());

    falcon_npy_reader *r;
    falcon_array info;
    cr_assert(falcon_npy_open(path_of("a.npy"), &r, &info) == FALCON_OK, "%s", falcon_last_error());
    cr_expect(info.dtype == FALCON_DTYPE_F32 && info.ndim == 2 && info.shape[0] == R && info.shape[1] == C &&
              info.count == R * C && info.data == NULL);
    double y[R * C];
    for (int first = 0; first < R * C; first += 17) {
        const int count = first + 17 <= R * C ? 17 : R * C - first;
        cr_assert(falcon_npy_read_range(r, first, count, FALCON_DTYPE_F64, y + first) == FALCON_OK);
    }
    for (int i = 0; i < R * C; i++) cr_expect_eq(y[i], (double)x[i], "element %d", i);
    cr_expect(falcon_npy_read_range(r, R * C, 1, FALCON_DTYPE_F64, y) == FALCON_E_ARGUMENT);
    cr_expect(falcon_npy_read_range(r, -1, 1, FALCON_DTYPE_F64, y) == FALCON_E_ARGUMENT);
    falcon_npy_close(r);
}

/* A writer that did not get every element does not commit, and leaves nothing. */
Test(npy_ranges, incomplete_commit_leaves_nothing, .init = make_dir, .fini = remove_dir)
{
    const double x[4] = {1, 2, 3, 4};
    const falcon_array a = {FALCON_DTYPE_F64, 1, {4}, 4, NULL};
    falcon_npy_writer *w;
    cr_assert(falcon_npy_create(path_of("b.npy"), &a, &w) == FALCON_OK);
    char temp[200];
    snprintf(temp, sizeof temp, "%s", falcon_npy_writer_temp(w));
    cr_assert(access(temp, F_OK) == 0, "no temporary file");
    cr_assert(falcon_npy_write_range(w, 0, 3, x) == FALCON_OK);
    cr_expect(falcon_npy_commit(w) == FALCON_E_ARGUMENT);
    cr_expect(strstr(falcon_last_error(), "3 of its 4 elements") != NULL, "%s", falcon_last_error());
    cr_expect(access(path_of("b.npy"), F_OK) != 0 && access(temp, F_OK) != 0, "something was left");
    cr_assert(falcon_npy_create(path_of("c.npy"), &a, &w) == FALCON_OK);
    snprintf(temp, sizeof temp, "%s", falcon_npy_writer_temp(w));
    falcon_npy_abort(w);
    cr_expect(access(path_of("c.npy"), F_OK) != 0 && access(temp, F_OK) != 0, "abort left something");
}

/* Ranges written twice or overlapping count once: a commit needs every
 * element covered, whatever the order and the overlaps. Random ranges over
 * 200 elements, checked against a plain per-element record. */
Test(npy_ranges, overlapping_ranges_count_once, .init = make_dir, .fini = remove_dir)
{
    enum { N = 200 };
    double x[N];
    for (int i = 0; i < N; i++) x[i] = i;
    const falcon_array a = {FALCON_DTYPE_F64, 1, {N}, N, NULL};
    uint64_t seed = 12345;
    for (int round = 0; round < 50; round++) {
        falcon_npy_writer *w;
        cr_assert(falcon_npy_create(path_of("o.npy"), &a, &w) == FALCON_OK);
        char seen[N] = {0};
        int covered = 0;
        for (int k = 0; k < 40 && covered < N - 3; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const int first = (int)((seed >> 33) % N), len = (int)((seed >> 20) % 23);
            const int count = first + len > N ? N - first : len;
            cr_assert(falcon_npy_write_range(w, first, count, x + first) == FALCON_OK);
            for (int i = first; i < first + count; i++) covered += !seen[i], seen[i] = 1;
        }
        if (covered < N) {
            char want[64];
            snprintf(want, sizeof want, "%d of its %d elements", covered, N);
            cr_expect_eq(falcon_npy_commit(w), FALCON_E_ARGUMENT, "round %d: %d covered", round, covered);
            cr_expect(strstr(falcon_last_error(), want) != NULL, "%s (want %s)", falcon_last_error(), want);
        } else {
            cr_expect_eq(falcon_npy_commit(w), FALCON_OK, "%s", falcon_last_error());
        }
    }
    /* the audit's case: the first half twice is half, not all */
    falcon_npy_writer *w;
    cr_assert(falcon_npy_create(path_of("h.npy"), &a, &w) == FALCON_OK);
    cr_assert(falcon_npy_write_range(w, 0, N / 2, x) == FALCON_OK);
    cr_assert(falcon_npy_write_range(w, 0, N / 2, x) == FALCON_OK);
    cr_expect_eq(falcon_npy_commit(w), FALCON_E_ARGUMENT);
    /* then the other half completes it */
    cr_assert(falcon_npy_create(path_of("h.npy"), &a, &w) == FALCON_OK);
    cr_assert(falcon_npy_write_range(w, N / 2, N / 2, x + N / 2) == FALCON_OK);
    cr_assert(falcon_npy_write_range(w, 10, 20, x + 10) == FALCON_OK);
    cr_assert(falcon_npy_write_range(w, 0, N / 2, x) == FALCON_OK);
    cr_expect_eq(falcon_npy_commit(w), FALCON_OK, "%s", falcon_last_error());
    falcon_array back;
    cr_assert(falcon_npy_read(path_of("h.npy"), FALCON_DTYPE_F64, &back) == FALCON_OK);
    cr_expect(memcmp(back.data, x, sizeof x) == 0);
    falcon_array_free(&back);
}

/* float64 -> float32 overflow names the element and leaves dst as it was. */
Test(npy_ranges, narrowing_overflow_names_the_element, .init = make_dir, .fini = remove_dir)
{
    double x[6] = {1, 2, 3, 4, 1e300, 6};
    const falcon_array a = {FALCON_DTYPE_F64, 2, {2, 3}, 6, x};
    cr_assert(falcon_npy_write(path_of("d.npy"), &a) == FALCON_OK);
    falcon_npy_reader *r;
    falcon_array info;
    cr_assert(falcon_npy_open(path_of("d.npy"), &r, &info) == FALCON_OK);
    float y[6] = {-1, -1, -1, -1, -1, -1};
    cr_expect(falcon_npy_read_range(r, 0, 6, FALCON_DTYPE_F32, y) == FALCON_E_RANGE);
    cr_expect(strstr(falcon_last_error(), "element [1,1] = 1e+300 does not fit in float32") != NULL, "%s",
              falcon_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(y[i], -1.0f, "dst[%d] was written", i);
    cr_expect(falcon_npy_read_range(r, 0, 4, FALCON_DTYPE_F32, y) == FALCON_OK, "the range before is fine");
    falcon_npy_close(r);
}

/* The edge of narrowing: a double below FLT_MAX + half its ulp rounds to
 * FLT_MAX and is read; the tie rounds to infinity and is refused, with
 * either sign. Non-finite values pass (the validation names them), and
 * tiny ones become float subnormals or zero as a cast makes them. */
Test(npy_ranges, narrowing_edge_is_the_rounding_to_infinity, .init = make_dir, .fini = remove_dir)
{
    const double tie = (double)FLT_MAX + 0x1p103, below = nextafter(tie, 0.0);
    double ok[8] = {below, -below, (double)FLT_MAX, INFINITY, -INFINITY, NAN, 1e-310, 0x1p-149};
    const falcon_array a = {FALCON_DTYPE_F64, 1, {8}, 8, ok};
    cr_assert(falcon_npy_write(path_of("e.npy"), &a) == FALCON_OK);
    falcon_npy_reader *r;
    falcon_array info;
    cr_assert(falcon_npy_open(path_of("e.npy"), &r, &info) == FALCON_OK);
    float y[8];
    cr_assert(falcon_npy_read_range(r, 0, 8, FALCON_DTYPE_F32, y) == FALCON_OK, "%s", falcon_last_error());
    for (int i = 0; i < 8; i++) {
        const float want = (float)ok[i];
        cr_expect(memcmp(&y[i], &want, sizeof want) == 0 || (isnan(y[i]) && isnan(want)), "element %d: %a", i,
                  (double)y[i]);
    }
    falcon_npy_close(r);
    for (int sign = 1; sign >= -1; sign -= 2) {
        double bad[3] = {1, sign * tie, 2};
        const falcon_array b = {FALCON_DTYPE_F64, 1, {3}, 3, bad};
        cr_assert(falcon_npy_write(path_of("f.npy"), &b) == FALCON_OK);
        cr_assert(falcon_npy_open(path_of("f.npy"), &r, &info) == FALCON_OK);
        cr_expect(falcon_npy_read_range(r, 0, 3, FALCON_DTYPE_F32, y) == FALCON_E_RANGE, "sign %d", sign);
        cr_expect(strstr(falcon_last_error(), "element [1] =") != NULL, "%s", falcon_last_error());
        falcon_npy_close(r);
    }
}

/* A segment's bad value is named by its step in the whole sequence. */
Test(npy_ranges, validate_from_counts_steps_from_t0)
{
    double q[4 * 2] = {0}, v[4] = {0}, beta[4] = {1, 1, 1, 1};
    q[5] = NAN; /* step 2, element 1 of the segment */
    falcon_config c;
    falcon_config_default(&c);
    c.precision = FALCON_FP64;
    const falcon_inputs in = falcon_inputs_sequence(4, 2, 1, q, q, v, beta, NULL, NULL);
    cr_expect(falcon_validate_from(&c, &in, NULL, 1000) == FALCON_E_NONFINITE);
    cr_expect(strstr(falcon_last_error(), "q[t=1002,i=1] = nan") != NULL, "%s", falcon_last_error());
    cr_expect(falcon_validate_from(&c, &in, NULL, -1) == FALCON_E_ARGUMENT);
    cr_expect(falcon_validate(&c, &in, NULL) == FALCON_E_NONFINITE);
    cr_expect(strstr(falcon_last_error(), "q[t=2,i=1]") != NULL, "%s", falcon_last_error());
}

/* float16 files are read exactly: every one of the 63488 finite float16
 * bit patterns, decoded here from the IEEE binary16 definition, read as
 * float64 and as float32 (a float16 is exactly both). Infinities and NaN
 * come through for the validation to name. */
Test(npy_ranges, float16_widens_exactly, .init = make_dir, .fini = remove_dir)
{
    enum { NBITS = 65536 };
    static uint16_t bits[NBITS];
    static double want[NBITS], got64[NBITS];
    static float got32[NBITS];
    for (int i = 0; i < NBITS; i++) {
        bits[i] = (uint16_t)i;
        const int e = (i >> 10) & 31, f = i & 1023;
        double v = e == 0 ? f * 0x1p-24 : e == 31 ? (f ? NAN : INFINITY) : (1 + f / 1024.0) * ldexp(1, e - 15);
        want[i] = i & 0x8000 ? -v : v;
    }
    const char *path = path_of("half.npy");
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    char header[128];
    int len = snprintf(header, sizeof header, "{'descr': '<f2', 'fortran_order': False, 'shape': (%d,), }", NBITS);
    while ((10 + len + 1) % 64) header[len++] = ' ';
    header[len++] = '\n';
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    const unsigned char hl[2] = {(unsigned char)(len & 255), (unsigned char)(len >> 8)};
    fwrite(hl, 1, 2, f);
    fwrite(header, 1, (size_t)len, f);
    for (int i = 0; i < NBITS; i++) {
        const unsigned char b[2] = {(unsigned char)(bits[i] & 255), (unsigned char)(bits[i] >> 8)};
        fwrite(b, 1, 2, f);
    }
    cr_assert(fclose(f) == 0);
    falcon_npy_reader *r;
    falcon_array info;
    cr_assert(falcon_npy_open(path, &r, &info) == FALCON_OK, "%s", falcon_last_error());
    cr_expect(info.dtype == FALCON_DTYPE_F16 && info.count == NBITS);
    cr_assert(falcon_npy_read_range(r, 0, NBITS, FALCON_DTYPE_F64, got64) == FALCON_OK);
    cr_assert(falcon_npy_read_range(r, 0, NBITS, FALCON_DTYPE_F32, got32) == FALCON_OK);
    falcon_npy_close(r);
    int wrong = 0;
    for (int i = 0; i < NBITS; i++) {
        const int same64 = isnan(want[i]) ? isnan(got64[i]) : got64[i] == want[i] && signbit(got64[i]) == signbit(want[i]);
        const int same32 = isnan(want[i]) ? isnan(got32[i]) : (double)got32[i] == want[i];
        if (!same64 || !same32) {
            if (wrong++ < 5) cr_log_error("0x%04x: want %.17g, read %.17g (f64) %.9g (f32)", i, want[i], got64[i], got32[i]);
        }
    }
    cr_expect(wrong == 0, "%d float16 patterns read wrongly", wrong);
    falcon_array whole;
    cr_assert(falcon_npy_read(path, FALCON_DTYPE_F64, &whole) == FALCON_OK);
    cr_expect(!memcmp(whole.data, got64, sizeof got64));
    falcon_array_free(&whole);
}
