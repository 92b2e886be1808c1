/* plan.h — a self-contained plan: the configuration, the split of layers into
 * (virtual) stages, per-layer recompute, and the prediction. Output of
 * `search -o`, input of `simulate` and `exec`. Format in docs/formats.md. */
#ifndef MP_PLAN_H
#define MP_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"

/* Layer items: 0 = embedding, 1..L = transformer blocks, L+1 = final norm +
 * LM head + loss. A stage owns the half-open item range [begin, end). For t5,
 * blocks are the encoder's then the decoder's. */
#define MP_MAX_STAGES 1024

typedef struct mp_stage_range {
    int32_t begin, end;
} mp_stage_range;

typedef struct mp_plan {
    mp_config config;
    int32_t n_stages;                      /* pp * vpp; 0 = not given (use an even split) */
    mp_stage_range stages[MP_MAX_STAGES];  /* virtual stage k sits on pipeline rank k % pp */
    bool has_layer_recompute;
    uint8_t layer_recompute[MP_MAX_LAYERS + 2]; /* mp_recompute per layer item */
    bool has_predicted;
    char predicted_json[8192];             /* the estimate object, as written (opaque here) */
} mp_plan;

/* Megatron's even split (all blocks equal, embedding with the first stage and
 * the head with the last). */
void mp_plan_default_stages(mp_plan *plan);

/* Checks stages are contiguous, cover every item once, count pp*vpp, and
 * the config is valid (mp_config_check). */
mp_status mp_plan_check(const mp_plan *plan, mp_error *err);

#endif
