/*
 * The state's own entry points. falcon_state_reset makes a used state
 * behave as a fresh one: the same run from it gives bitwise the same outputs
 * and state (memory, previous key and window history all forgotten).
 * falcon_state_set_memory replaces the memory of every head and nothing
 * else: a state whose memory is set to another's then runs a history-free
 * configuration bitwise as that one does; a non-finite value anywhere is
 * refused, naming its index, with the state left as it was.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"

/* Two heads, n = 5, m = 4, Falcon-3 W = 3 with prefix alignment (previous
 * key and window history both in use), random decay. */
static gate_case state_case(uint64_t seed)
{
    gate_case c = {FALCON_3, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, GATE_DECAY_RANDOM, 1, 9, 2, 5, 4,
                   3, 4, 1e-6, 1.0, seed};
    return c;
}

static void run_ok(const falcon_config *cfg, const gate_data *d, falcon_state *st, double *out)
{
    cr_assert_eq(falcon_run(cfg, &d->in, st, out), FALCON_OK, "%s", falcon_last_error());
}

/* Bitwise equality of everything a state carries that a run can read. */
static int same_state(const falcon_state *a, const falcon_state *b)
{
    const falcon_state_view x = falcon_state_get_view(a), y = falcon_state_get_view(b);
    const size_t H = (size_t)x.heads, n = (size_t)x.n, m = (size_t)x.m;
    if (memcmp(x.S, y.S, sizeof(double) * H * m * n) || memcmp(x.has_prev, y.has_prev, H) ||
        memcmp(x.hist_len, y.hist_len, sizeof(int64_t) * H))
        return 0;
    for (size_t h = 0; h < H; h++) {
        if (x.has_prev[h] && memcmp(x.prev_key + h * n, y.prev_key + h * n, sizeof(double) * n)) return 0;
        const size_t used = (size_t)x.hist_len[h], keep = (size_t)x.keep;
        if (memcmp(x.hist_k + h * keep * n, y.hist_k + h * keep * n, sizeof(double) * used * n) ||
            memcmp(x.hist_v + h * keep * m, y.hist_v + h * keep * m, sizeof(double) * used * m))
            return 0;
    }
    return 1;
}

Test(state, reset_makes_a_fresh_state)
{
    const gate_case c = state_case(41), c2 = state_case(42);
    gate_data d, d2;
    cr_assert(gate_data_make(&c, FALCON_FP64, &d) == 0);
    cr_assert(gate_data_make(&c2, FALCON_FP64, &d2) == 0);
    const int64_t heads = c.B * c.H, count = c.B * c.T * c.H * c.m;
    double *out = malloc(sizeof(double) * (size_t)(3 * count));
    cr_assert(out);
    for (int f = 0; f < 3; f++) {
        falcon_config cfg = gate_config(&c, (falcon_form)f, FALCON_BACKEND_SCALAR, FALCON_FP64);
        falcon_state *used, *fresh;
        cr_assert(falcon_state_create(heads, c.n, c.m, c.window, &used) == FALCON_OK);
        cr_assert(falcon_state_create(heads, c.n, c.m, c.window, &fresh) == FALCON_OK);
        run_ok(&cfg, &d, used, out); /* memory, previous key and history now set */
        cr_assert(falcon_state_get_view(used).has_prev[0] && falcon_state_get_view(used).hist_len[0] > 0);
        cr_assert_eq(falcon_state_reset(used), FALCON_OK);
        cr_expect(same_state(used, fresh), "%s: a reset state differs from a fresh one", falcon_form_name(f));
        run_ok(&cfg, &d2, used, out + count);
        run_ok(&cfg, &d2, fresh, out + 2 * count);
        cr_expect(!memcmp(out + count, out + 2 * count, sizeof(double) * (size_t)count),
                  "%s: a run from a reset state differs from the same run from a fresh one", falcon_form_name(f));
        cr_expect(same_state(used, fresh), "%s: the states differ after the same run", falcon_form_name(f));
        falcon_state_free(used);
        falcon_state_free(fresh);
    }
    cr_expect_eq(falcon_state_reset(NULL), FALCON_E_ARGUMENT);
    free(out);
    gate_data_free(&d);
    gate_data_free(&d2);
}

Test(state, set_memory_replaces_the_memory_only)
{
    /* Falcon-1 with same-step alignment carries nothing but the memory. */
    gate_case c = state_case(43);
    c.variant = FALCON_1, c.align = FALCON_ALIGN_SAME, c.window = 1;
    gate_case c2 = c;
    c2.seed = 44;
    gate_data d, d2;
    cr_assert(gate_data_make(&c, FALCON_FP64, &d) == 0);
    cr_assert(gate_data_make(&c2, FALCON_FP64, &d2) == 0);
    const int64_t heads = c.B * c.H, cells = heads * c.m * c.n, count = c.B * c.T * c.H * c.m;
    double *out = malloc(sizeof(double) * (size_t)(2 * count)), *S = malloc(sizeof(double) * (size_t)cells);
    cr_assert(out && S);
    falcon_config cfg = gate_config(&c, FALCON_FORM_RECURRENT, FALCON_BACKEND_SCALAR, FALCON_FP64);
    falcon_state *a, *b;
    cr_assert(falcon_state_create(heads, c.n, c.m, c.window, &a) == FALCON_OK);
    cr_assert(falcon_state_create(heads, c.n, c.m, c.window, &b) == FALCON_OK);
    run_ok(&cfg, &d, a, out);
    memcpy(S, falcon_state_get_view(a).S, sizeof(double) * (size_t)cells);
    cr_assert_eq(falcon_state_set_memory(b, S), FALCON_OK, "%s", falcon_last_error());
    cr_expect(!memcmp(falcon_state_get_view(b).S, S, sizeof(double) * (size_t)cells), "the memory was not copied whole");
    cr_expect(!falcon_state_get_view(b).has_prev[0] && !falcon_state_get_view(b).hist_len[0],
              "set_memory touched the history");
    run_ok(&cfg, &d2, a, out);
    run_ok(&cfg, &d2, b, out + count);
    cr_expect(!memcmp(out, out + count, sizeof(double) * (size_t)count),
              "a run from the set memory differs from the same run from the state it came from");
    cr_expect(!memcmp(falcon_state_get_view(a).S, falcon_state_get_view(b).S, sizeof(double) * (size_t)cells));

    /* A non-finite value, first, in the middle or last: refused by index, state unchanged. */
    const int64_t at[] = {0, cells / 2, cells - 1};
    const double bad[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        falcon_state *before;
        cr_assert(falcon_state_copy(b, &before) == FALCON_OK);
        for (int64_t j = 0; j < cells; j++) S[j] = 0.5 + (double)j;
        S[at[i]] = bad[i];
        cr_expect_eq(falcon_state_set_memory(b, S), FALCON_E_NONFINITE, "S[%lld] = %g accepted", (long long)at[i],
                     bad[i]);
        char want[32];
        snprintf(want, sizeof want, "S[%lld] = ", (long long)at[i]);
        cr_expect(strstr(falcon_last_error(), want) != NULL, "message \"%s\" lacks \"%s\"", falcon_last_error(), want);
        cr_expect(same_state(b, before), "a refused memory changed the state");
        falcon_state_free(before);
    }
    cr_expect_eq(falcon_state_set_memory(NULL, S), FALCON_E_ARGUMENT);
    cr_expect_eq(falcon_state_set_memory(b, NULL), FALCON_E_ARGUMENT);
    falcon_state_free(a);
    falcon_state_free(b);
    free(out);
    free(S);
    gate_data_free(&d);
    gate_data_free(&d2);
}
