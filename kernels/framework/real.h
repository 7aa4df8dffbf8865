/*
 * Precision templating for the framework and the scalar micro-kernels: a
 * source written once against REAL / RS(name) is compiled twice, with
 * FALCON_REAL_F32 defined (float, suffix _f32) and without (double, _f64).
 */
#ifdef FALCON_REAL_F32
#define REAL float
#define RS(name) name##_f32
#define REAL_PHI_ELEM falcon_phi_elem_f32
#define REAL_SQRT sqrtf
#define REAL_FABS fabsf
#else
#define REAL double
#define RS(name) name##_f64
#define REAL_PHI_ELEM falcon_phi_elem_f64
#define REAL_SQRT sqrt
#define REAL_FABS fabs
#endif
