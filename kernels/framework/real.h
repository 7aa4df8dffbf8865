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
#ifdef FALCON_REAL_F32
#define REAL float
#define RS(name) name##_f32
#else
#define REAL double
#define RS(name) name##_f64
#endif
