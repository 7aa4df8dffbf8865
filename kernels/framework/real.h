/*
 * Precision templating for the framework and the scalar micro-kernels: a
 * source written once against REAL / RS(name) is compiled twice, with
 * FALCON_REAL_F32 defined (float, suffix _f32) and without (double, _f64).
 * The REAL_* names are falcon_math.h's shared functions for that precision.
 * Including this file again switches the precision (src/run.c does).
 */
#undef REAL
#undef RS
#undef REAL_FEATURIZE
#undef REAL_KEY_SCALE
#undef REAL_ETA_SCALED
#ifdef FALCON_REAL_F32
#define REAL float
#define RS(name) name##_f32
#define REAL_FEATURIZE falcon_featurize_f32
#define REAL_KEY_SCALE falcon_key_scale_f32
#define REAL_ETA_SCALED falcon_eta_scaled_f32
#else
#define REAL double
#define RS(name) name##_f64
#define REAL_FEATURIZE falcon_featurize_f64
#define REAL_KEY_SCALE falcon_key_scale_f64
#define REAL_ETA_SCALED falcon_eta_scaled_f64
#endif
