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

/* One part of a stage's flat buffer that the distributed optimizer shards
 * over a group of its own (Megatron-Core's): the dense tensors over DP x CP,
 * an MoE model's experts over expert-DP (exec/moe.h). */
typedef struct mp_shard_part {
    size_t lo, hi;         /* the part: [lo, hi) of the flat buffer */
    size_t own_lo, own_hi; /* this rank's shard of it (the whole part when not sharded) */
    size_t moment;         /* where that shard starts in the Adam moments m and v */
    mp_group group;        /* the ranks that share the part (size <= 1: this one alone) */
    const char *name;      /* "dense" or "experts", for the test switches */
} mp_shard_part;

#define MP_REAL_PASS 32
#include "exec/kernels_decl.h"
#undef MP_REAL_PASS
#define MP_REAL_PASS 64
#include "exec/kernels_decl.h"
#undef MP_REAL_PASS
#include "exec/real.h" /* back to the including file's own precision, if any */

#endif
