/*
 * docs/math.md section 6: one call equals any split into segments with the state carried
 * (memory, previous key, window history). Recurrent: bitwise, since the
 * same operations run in the same order. Chunk and parallel: the block
 * boundaries move with the split, so equal to rounding (the gate's bound).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"

/* Runs the case whole and cut at cuts[] (the last cut is T), for every
 * backend, precision, form and alignment. blocked_bitwise: the cuts fall
 * on the blocks of the chunk and parallel forms, so those must agree bit
 * for bit too (the recurrent form always must). */
static void split_equals_whole_at(falcon_variant v, int64_t W, int64_t C, const int64_t *cuts, int ncut,
                                  int blocked_bitwise)
{
    for (int b = 0; b < gate_backend_count; b++) {
        if (!falcon_backend_available(gate_backends[b])) continue;
        for (int p = 0; p < 2; p++)
            if (gate_backend_runs(gate_backends[b], (falcon_precision)p))
            for (int f = 0; f < 3; f++)
                for (int a = 0; a < 2; a++) {
                    gate_case c = {v, (falcon_align)a, FALCON_PHI_ELU1, GATE_DECAY_RANDOM,
                                   1, cuts[ncut - 1], 1, 6, 5, W, C, 1e-6, 1.0, 31u + (uint64_t)(p + 2 * f + 6 * a)};
                    gate_data d;
                    cr_assert(gate_data_make(&c, (falcon_precision)p, &d) == 0);
                    gate_result whole, part;
                    cr_assert(gate_run(&c, &d, (falcon_form)f, gate_backends[b], NULL, &whole) == FALCON_OK);
                    part.out_count = whole.out_count;
                    part.state_count = whole.state_count;
                    part.out = calloc((size_t)whole.out_count, sizeof(double));
                    part.S = calloc((size_t)whole.state_count, sizeof(double));
                    falcon_state *st;
                    cr_assert(falcon_state_create(1, c.n, c.m, W, &st) == FALCON_OK);
                    for (int s = 0; s + 1 < ncut; s++) {
                        gate_case cs = c;
                        gate_data ds = d;
                        cs.T = cuts[s + 1] - cuts[s];
                        ds.in = gate_inputs_slice(&d, cuts[s], cuts[s + 1]);
                        gate_result r;
                        cr_assert(gate_run(&cs, &ds, (falcon_form)f, gate_backends[b], st, &r) == FALCON_OK,
                                  "%s", falcon_last_error());
                        memcpy(part.out + cuts[s] * c.m, r.out, sizeof(double) * (size_t)r.out_count);
                        gate_result_free(&r);
                    }
                    memcpy(part.S, falcon_state_get_view(st).S, sizeof(double) * (size_t)part.state_count);
                    gate_errors e = gate_compare(&part, &whole, (falcon_precision)p);
                    const double thr = f == FALCON_FORM_RECURRENT || blocked_bitwise
                                           ? 0 : gate_threshold(&c, (falcon_form)f, (falcon_precision)p);
                    printf("segments %s %s %s %s %s: out %.2f u, S %.2f u (<= %.1f)\n",
                           falcon_backend_name(gate_backends[b]), falcon_precision_name((falcon_precision)p),
                           falcon_form_name((falcon_form)f), falcon_variant_name(v),
                           falcon_align_name((falcon_align)a), e.out_u, e.state_u, thr);
                    cr_expect(e.out_u <= thr && e.state_u <= thr, "%s %s %s %s: split differs by %.3g u, %.3g u",
                              falcon_backend_name(gate_backends[b]), falcon_precision_name((falcon_precision)p),
                              falcon_form_name((falcon_form)f), falcon_variant_name(v), e.out_u, e.state_u);
                    falcon_state_free(st);
                    gate_result_free(&whole);
                    gate_result_free(&part);
                    gate_data_free(&d);
                }
    }
}

static void split_equals_whole(falcon_variant v)
{
    static const int64_t cuts[] = {0, 1, 9, 9, 30, 31, 50}; /* includes empty and 1-step segments */
    split_equals_whole_at(v, falcon_variant_has_window(v) ? 4 : 1, 8, cuts, 7, 0);
}

/* Cuts at multiples of the blocks (C = 8 and falcon_parallel_block(512) = 8
 * steps): every form gives the one call's result bit for bit, as the
 * header promises and `falcon run --segment` relies on. */
Test(segments, block_aligned_cuts_are_bitwise)
{
    static const int64_t cuts[] = {0, 8, 8, 24, 40};
    cr_assert_eq(falcon_parallel_block(512), 8);
    split_equals_whole_at(FALCON_3, 512, 8, cuts, 5, 1);
    split_equals_whole_at(FALCON_3A, 512, 8, cuts, 5, 1);
}

Test(segments, parallel_block_of_window)
{
    cr_expect_eq(falcon_parallel_block(1), 4096);
    cr_expect_eq(falcon_parallel_block(3), 1365);
    cr_expect_eq(falcon_parallel_block(FALCON_MAX_WINDOW), 1);
    cr_expect_eq(falcon_parallel_block(0), -1);
    cr_expect_eq(falcon_parallel_block(-5), -1);
    cr_expect_eq(falcon_parallel_block(FALCON_MAX_WINDOW + 1), -1);
}

Test(segments, falcon1) { split_equals_whole(FALCON_1); }
Test(segments, falcon2) { split_equals_whole(FALCON_2); }
Test(segments, falcon3) { split_equals_whole(FALCON_3); }
Test(segments, falcon1a) { split_equals_whole(FALCON_1A); }
Test(segments, falcon2a) { split_equals_whole(FALCON_2A); }
Test(segments, falcon3a) { split_equals_whole(FALCON_3A); }
