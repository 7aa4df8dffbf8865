/* The signature of update_read (update-read.inc.c), for a backend that
 * compiles it in a unit of its own and refers to it from its table's unit
 * (update-read-unit.c, ukernels.c): both units declare it with this. */
#ifndef FALCON_SIMD_UPDATE_READ_H
#define FALCON_SIMD_UPDATE_READ_H
#define UR_PROTOTYPE(NAME)                                                                                       \
    void NAME(int64_t m, int64_t n, int64_t k, REAL a, REAL f, REAL *S, int64_t lds, const REAL *E, int64_t lde, \
              const REAL *Z, int64_t ldz, int64_t r, const REAL *X, int64_t ldx, REAL *P, int64_t ldp)
#endif
