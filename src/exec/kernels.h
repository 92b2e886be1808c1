/* kernels.h — the executor's numeric code, declared for float (_f32) and
 * double (_f64): layers, attention, the GPT's forward/backward, AdamW and the
 * training step. kernels_decl.h is read once per precision (real.h). */
#ifndef MP_EXEC_KERNELS_H
#define MP_EXEC_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "exec/backend.h"
#include "exec/params.h"
#include "exec/probe.h"
#include "sim/schedule.h"

/* AdamW settings (Loshchilov & Hutter; bias-corrected, decoupled decay). */
typedef struct mp_adam_cfg {
    double lr, beta1, beta2, eps, weight_decay;
} mp_adam_cfg;

#define MP_REAL_PASS 32
#include "exec/kernels_decl.h"
#undef MP_REAL_PASS
#define MP_REAL_PASS 64
#include "exec/kernels_decl.h"
#undef MP_REAL_PASS
#include "exec/real.h" /* back to the including file's own precision, if any */

#endif
