/*
 * falcon_advanced.h: what a program tuning or extending libfalcon needs
 * beyond the compute API (falcon.h): the lazy-decay scale of a state, the
 * work memory the library keeps between calls, and the attachment of the
 * MPFR reference (a library of its own, libfalcon-ref).
 */
#ifndef FALCON_ADVANCED_H
#define FALCON_ADVANCED_H

#include "falcon.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * [heads], read-only (NULL for a NULL state): how the fp32 recurrent form
 * continues S bit for bit. It keeps S / scale, a decay not yet applied
 * (lazy decay, docs/math.md section 8); S is the memory itself. In
 * [2^-8, 1]; 1 after any other run (and after an fp32 recurrent run on
 * a backend that decays S directly on this CPU: falcon_backend_describe
 * says so), falcon_state_reset and falcon_state_set_memory. (A function,
 * not a field of the view, so that programs built against the view of 0.1
 * keep working.)
 */
const double *falcon_state_scale(const falcon_state *state);

/* Work memory. The library keeps the work blocks its calls free (16 KiB or
 * more: the CPU drivers' blocks and states' memory arrays, up to 32 blocks
 * and 1 GiB in all) for the next call, whose pages are then already mapped:
 * a virtual machine's page faults made short calls ten times slower and the
 * masked-parallel form several times. Results do not depend on it. _kept:
 * the bytes kept now; _release: return them to the system (a later call
 * maps anew). */
size_t falcon_work_memory_kept(void);
void falcon_work_memory_release(void);

/*
 * The MPFR reference. FALCON_BACKEND_MPFR is not part of libfalcon: the
 * reference lives in libfalcon-ref (which needs MPFR and GMP), so that the
 * library under test carries no reference and no MPFR. Until a reference
 * is attached, the backend is unavailable (falcon_backend_available says 0
 * and falcon_run answers FALCON_E_UNAVAILABLE).
 *
 * A reference run receives a validated call: the configuration (chunk
 * resolved), the inputs, a view of the carried state, and `memory`, the
 * [heads][m][n] memory array it replaces with the end memory (rounded to
 * float32 below fp64, as the kernels keep it); it writes the reads into
 * `out` in the run's precision. libfalcon checks the results are finite,
 * advances the state's keys and history, and commits, as for any backend.
 */
typedef falcon_status (*falcon_reference_run)(const falcon_config *cfg, const falcon_inputs *in,
                                              const falcon_state_view *state, double *memory,
                                              void *out);
/* Attach (or, with NULL, detach) the reference run; the last call wins.
 * Thread-safe, but a run in progress keeps the function it started with. */
void falcon_backend_attach_reference(falcon_reference_run run);

/* The reference's backward pass (falcon_backward on the mpfr backend): a
 * validated call, as falcon_reference_run receives one, with the
 * cotangents; it writes every gradient buffer grads names, in the run's
 * precision (the state's gradients in double). */
typedef falcon_status (*falcon_reference_grad)(const falcon_config *cfg, const falcon_inputs *in,
                                               const falcon_state_view *state, const void *dO,
                                               const double *dS_T, const falcon_grads *grads);
/* Attach (or detach, with NULL) the reference's backward pass. */
void falcon_backend_attach_reference_grad(falcon_reference_grad grad);

/* In libfalcon-ref: attach its MPFR reference (forward and backward) to
 * this process's libfalcon.
 * Loading libfalcon-ref.so does it; a program linking libfalcon-ref.a
 * statically calls it (or links reference/attach-at-start.o). */
void falcon_reference_attach(void);

#ifdef __cplusplus
}
#endif

#endif /* FALCON_ADVANCED_H */
