/*
 * Fuzzing the API's validation and runs: the input decodes into one call
 * (fuzz/call.h: configuration, sizes, tensors, values, state).
 *
 * Invariants (docs/math.md section 10 and the README's promises):
 *   - falcon_validate and falcon_run agree: a configuration or input that
 *     validation refuses, falcon_run refuses with the same status;
 *   - a failed run leaves the state exactly as it was, and the output buffer
 *     too unless the failure is FALCON_E_OVERFLOW (found after the kernels
 *     wrote the reads; falcon.h documents the outputs as unspecified then),
 *     and says why (a non-empty message);
 *   - a successful run leaves finite outputs and a finite memory, and writes
 *     nothing past the output;
 *   - the recurrent form split into two calls with the state carried gives
 *     bitwise the same outputs and state as one call (one sequence; the CPU
 *     kernels' backends);
 *   - layouts (packed batches, grouped heads): validation refuses exactly
 *     the ones the decoder made invalid (fuzz_check_layout_verdict), and a
 *     successful call equals its plain calls bit for bit, reads and state
 *     (fuzz/layout.h).
 */
#include "call.h"
#include "layout.h"
#include "../gate/inputs-steps.h"

/* One sequence split at t: bitwise what one call gave. */
static void check_split(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *start,
                        const unsigned char *out, const falcon_state *end, int64_t t)
{
    const size_t es = cfg->precision == FALCON_FP32 ? 4 : 8;
    falcon_state *st;
    FUZZ_CHECK(falcon_state_copy(start, &st) == FALCON_OK, "copy");
    unsigned char *part = malloc(es * (size_t)(in->T * in->m) + 1);
    FUZZ_CHECK(part != NULL, "malloc");
    const falcon_inputs a = inputs_steps(in, es, 0, t), b = inputs_steps(in, es, t, in->T);
    const falcon_status s1 = falcon_run(cfg, &a, st, part);
    FUZZ_CHECK(s1 == FALCON_OK, "first part of a split: %s", falcon_last_error());
    const falcon_status s2 = falcon_run(cfg, &b, st, part + es * (size_t)(t * in->m));
    FUZZ_CHECK(s2 == FALCON_OK, "second part of a split: %s", falcon_last_error());
    FUZZ_CHECK(!memcmp(part, out, es * (size_t)(in->T * in->m)), "split at t=%lld: outputs differ from one call",
               (long long)t);
    FUZZ_CHECK(fuzz_same_state(st, end), "split at t=%lld: state differs from one call", (long long)t);
    free(part);
    falcon_state_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes b = {data, size};
    fuzz_call c;
    fuzz_decode_call(&b, &c);
    const falcon_config cfg = c.cfg;
    const falcon_inputs in = c.in;
    const int64_t B = in.B, T = in.T, H = in.H, m = in.m, rows = c.rows;
    const uint8_t flags = c.flags;
    const falcon_precision prec = c.prec;
    const size_t es = c.es;
    const int valid = c.valid, null_out = c.null_out;
    falcon_state *st = fuzz_call_state(&c);
    falcon_state *before = NULL;
    if (st) FUZZ_CHECK(falcon_state_copy(st, &before) == FALCON_OK, "copy");

    const size_t out_bytes = es * (size_t)(rows * (valid ? m : 0));
    unsigned char *out = malloc(out_bytes + 16);
    FUZZ_CHECK(out != NULL, "malloc");
    memset(out, 0xA5, out_bytes + 16);

    const falcon_status sv = falcon_validate(&cfg, &in, st);
    if (sv) FUZZ_CHECK(*falcon_last_error(), "validation failed without a message");
    fuzz_check_layout_verdict(&c, sv);
    const falcon_status sr = falcon_run(&cfg, &in, st, null_out ? NULL : out);
    if (sv) FUZZ_CHECK(sr == sv, "validate says %s, run says %s (%s)", falcon_status_name(sv),
                       falcon_status_name(sr), falcon_last_error());
    for (size_t i = 0; i < 16; i++) FUZZ_CHECK(out[out_bytes + i] == 0xA5, "wrote past the output");
    if (sr) {
        FUZZ_CHECK(*falcon_last_error(), "a failed run without a message");
        /* (An overflow is found after the kernels wrote the reads: the header
         * documents the outputs as unspecified then; the state is kept.) */
        for (size_t i = 0; sr != FALCON_E_OVERFLOW && i < out_bytes; i++)
            FUZZ_CHECK(out[i] == 0xA5, "a failed run (%s: %s) wrote out byte %zu", falcon_status_name(sr),
                       falcon_last_error(), i);
        if (st) FUZZ_CHECK(fuzz_same_state(st, before), "a failed run changed the state");
    } else {
        FUZZ_CHECK(!null_out || T == 0, "a run with T > 0 and no output buffer succeeded");
        for (int64_t i = 0; i < rows * m; i++) {
            const double x = prec == FALCON_FP32 ? ((float *)out)[i] : ((double *)out)[i];
            FUZZ_CHECK(isfinite(x), "a successful run left out[%lld] = %g", (long long)i, x);
        }
        if (!fuzz_layout_plain(&in) && T > 0) fuzz_check_layout_plain(&c, out, st);
        if (st) {
            const falcon_state_view sv2 = falcon_state_get_view(st);
            for (int64_t i = 0; i < sv2.heads * sv2.m * sv2.n; i++)
                FUZZ_CHECK(isfinite(sv2.S[i]), "a successful run left S[%lld] = %g", (long long)i, sv2.S[i]);
            /* (The mpfr backend keeps S in MPFR inside a call and rounds it
             * at the end: a split rounds once more, so it is not bitwise.) */
            if (cfg.form == FALCON_FORM_RECURRENT && B == 1 && H == 1 && T >= 2 && !in.cu_seqlens &&
                cfg.backend != FALCON_BACKEND_MPFR && cfg.backend != FALCON_BACKEND_CUDA)
                check_split(&cfg, &in, before, out, st, 1 + (int64_t)(flags >> 6) % (T - 1));
        }
    }
    free(out);
    falcon_state_free(st);
    falcon_state_free(before);
    fuzz_free_call(&c);
    return 0;
}
