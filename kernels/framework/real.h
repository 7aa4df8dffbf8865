/*
 * Precision templating for the framework and the scalar micro-kernels: a
 * source written once against REAL / RS(name) is compiled twice, with
 * FALCON_REAL_F32 defined (float, suffix _f32) and without (double, _f64).
 * RS(falcon_featurize) and the other shared functions of
 * kernels/common/falcon_math.h name their version for the precision.
 * Including this file again switches the precision (src/run.c does).
 */
#undef REAL
#undef RS
#undef REAL_MIN
#undef REAL_MIN_EXP
#ifdef FALCON_REAL_F32
#define REAL float
#define RS(name) name##_f32
#define REAL_MIN 0x1p-126f /* the smallest normal number, 2^(REAL_MIN_EXP - 1) */
#define REAL_MIN_EXP (-125)
#else
#define REAL double
#define RS(name) name##_f64
#define REAL_MIN 0x1p-1022
#define REAL_MIN_EXP (-1021)
#endif
