/*
 * Steps [t0, t1) of one sequence's inputs (B = H = 1): the same tensors
 * offset in time, for the tests that cut a call in parts and compare with
 * one call (the gate's segment and split tests, the API fuzzer). Header
 * only: the fuzzer links the library alone, not the gate. es is the
 * element size in bytes (4 or 8).
 */
#ifndef FALCON_VERIFY_INPUTS_STEPS_H
#define FALCON_VERIFY_INPUTS_STEPS_H

#include <stddef.h>
#include <stdint.h>
#include "falcon.h"

static inline falcon_inputs inputs_steps(const falcon_inputs *in, size_t es, int64_t t0, int64_t t1)
{
    falcon_inputs s = *in;
    s.T = t1 - t0;
    s.q = (const char *)in->q + es * (size_t)(t0 * in->n);
    s.k = (const char *)in->k + es * (size_t)(t0 * in->n);
    s.v = (const char *)in->v + es * (size_t)(t0 * in->m);
    s.beta = (const char *)in->beta + es * (size_t)t0;
    if (in->alpha) s.alpha = (const char *)in->alpha + es * (size_t)t0;
    if (in->gain) s.gain = (const char *)in->gain + es * (size_t)(t0 * in->n);
    return s;
}

#endif
