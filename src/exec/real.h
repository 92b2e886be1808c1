/* real.h — the executor's numeric type, chosen per translation pass.
 *
 * The layer, attention, model, optimizer and step code is written once in
 * terms of `real` and RN(name) and compiled twice (each such .c file includes
 * itself with MP_REAL_BITS = 32 and then 64): the partitioned run uses float,
 * the tolerance-mode reference uses double, and the exact-mode reference uses
 * the very same float code. Deliberately no include guard: it is re-read for
 * each pass and redefines its macros. */
#undef real
#undef RN
#undef MP_REAL_KIND
#undef R_EXP
#undef R_LOG
#undef R_SQRT
#undef R_TANH
#undef R_FABS

#if MP_REAL_BITS == 32
#define real float
#define RN(name) name##_f32
#define MP_REAL_KIND MP_REAL32
#define R_EXP expf
#define R_LOG logf
#define R_SQRT sqrtf
#define R_TANH tanhf
#define R_FABS fabsf
#elif MP_REAL_BITS == 64
#define real double
#define RN(name) name##_f64
#define MP_REAL_KIND MP_REAL64
#define R_EXP exp
#define R_LOG log
#define R_SQRT sqrt
#define R_TANH tanh
#define R_FABS fabs
#else
#error "MP_REAL_BITS must be 32 or 64"
#endif
