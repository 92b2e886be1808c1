/* real.h — the executor's numeric type, chosen per precision.
 *
 * The layer, attention, model, optimizer and step code is written once in
 * terms of `real`, with plain C names (mp_gpt_init), and meson compiles each
 * such file twice (exec_real_sources in src/exec/meson.build), with
 * -DMP_REAL_BITS=32 and =64: the partitioned run uses float, the
 * tolerance-mode reference uses double, and the exact-mode reference uses the
 * very same float code. real_names.h turns each plain name into its symbol,
 * name_f32 or name_f64, so a backtrace's mp_gpt_init_f64 is found by grepping
 * mp_gpt_init.
 *
 * kernels.h and t5.h declare both precisions for their callers by reading
 * their declarations once with MP_REAL_PASS 32 and once with 64; then they
 * read this file again, which puts back the including file's own precision
 * (MP_REAL_BITS), or none in a file that calls both by their suffixed names.
 * Hence no include guard here: each read redefines the macros below. */
#include "exec/real_names.h"

#undef real
#undef MP_REAL_NAME
#undef MP_REAL_KIND
#undef R_EXP
#undef R_LOG
#undef R_SQRT
#undef R_TANH
#undef R_ERF
#undef R_FABS

#if defined(MP_REAL_PASS)
#define MP_REAL_NOW MP_REAL_PASS
#elif defined(MP_REAL_BITS)
#define MP_REAL_NOW MP_REAL_BITS
#endif

#if !defined(MP_REAL_NOW)
/* neither: this file calls mp_gpt_init_f32 and mp_gpt_init_f64 by name */
#elif MP_REAL_NOW == 32
#define real float
#define MP_REAL_NAME(name) name##_f32
#define MP_REAL_KIND MP_REAL32
#define R_EXP expf
#define R_LOG logf
#define R_SQRT sqrtf
#define R_TANH tanhf
#define R_ERF erff
#define R_FABS fabsf
#elif MP_REAL_NOW == 64
#define real double
#define MP_REAL_NAME(name) name##_f64
#define MP_REAL_KIND MP_REAL64
#define R_EXP exp
#define R_LOG log
#define R_SQRT sqrt
#define R_TANH tanh
#define R_ERF erf
#define R_FABS fabs
#else
#error "MP_REAL_BITS must be 32 or 64"
#endif
#undef MP_REAL_NOW
