/*
 * Precision templating for the framework and the scalar micro-kernels: a
 * source written once against REAL / RS(name) is compiled twice, with
 * FALCON_REAL_F32 defined (float, suffix _f32) and without (double, _f64).
 */
#ifdef FALCON_REAL_F32
#define REAL float
#define RS(name) name##_f32
#define REAL_FEATURIZE falcon_featurize_f32
#else
#define REAL double
#define RS(name) name##_f64
#define REAL_FEATURIZE falcon_featurize_f64
#endif
