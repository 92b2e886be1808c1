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
    /* stage k of the schedule's order (mp_schedule_stage): on pipeline rank
     * k % pp, but under zb-v and dualpipev on rank k for k < pp and rank
     * 2pp-1-k after, and under dualpipe (n = pp) on rank k and, as its
     * second copy, rank pp-1-k */
    mp_stage_range stages[MP_MAX_STAGES];
    bool has_layer_recompute;
    uint8_t layer_recompute[MP_MAX_LAYERS + 2]; /* mp_recompute per layer item */
    bool has_predicted;
    char predicted_json[8192];             /* the estimate object, as written (opaque here) */
} mp_plan;

/* Megatron's split as the configuration states it: its explicit pipeline
 * layout (parallel.pipeline_layout, core/layout.h) when given, else the even
 * split (all blocks equal, embedding with the first stage and the head with
 * the last), the most even uneven one where n does not divide the blocks, or
 * t5's (mp_even_stage_items). The planner, the simulator, the
 * executor and the Megatron flags all split by this one function. */
void mp_config_stages(const mp_config *c, int64_t n, mp_stage_range *out);

/* The form of a split of L blocks over K = pp*vpp stages (st, items as
 * core/plan.h counts them), as Megatron's flags can say it: even; the
 * account-for flags (embedding, loss); the first/last-stage flags (first,
 * last: the blocks of rank 0 and of the last rank); else only a layout.
 * For the exporter and search's label. */
typedef enum {
    MP_SPLIT_EVEN,
    MP_SPLIT_ACCOUNT,
    MP_SPLIT_FLAGS,
    MP_SPLIT_LAYOUT
} mp_split_kind;
typedef struct mp_split_form {
    mp_split_kind kind;
    bool embedding, loss;     /* MP_SPLIT_ACCOUNT */
    int64_t first, last;      /* MP_SPLIT_FLAGS */
} mp_split_form;
mp_split_form mp_split_form_of(const mp_config *c, const mp_stage_range *st, int64_t K);
/* "even", "account-for", "first/last flags" or "layout" */
const char *mp_split_kind_name(mp_split_kind k);
/* The name of the split of c over its K stages st: the form c gives
 * (pipeline_layout, the first/last-stage or the account-for flags), else
 * mp_split_form_of's; "even" when K < 2 or st is NULL. */
const char *mp_split_label(const mp_config *c, const mp_stage_range *st, int64_t K);

void mp_plan_default_stages(mp_plan *plan);

/* The virtual stage of n = pp*vpp that runs the multi-token-prediction
 * modules: the explicit layout's stage of its m's (Megatron's standalone MTP
 * stage when that is not the last, core/layout.h), else the last stage,
 * Megatron's default; -1 when the model has none (or is t5). */
int64_t mp_config_mtp_stage(const mp_config *c, int64_t n);

/* T5 over n > 1 pipeline stages, as Megatron-LM's
 * --pipeline-model-parallel-split-rank: the first split_rank stages hold the
 * encoder's blocks, the others the decoder's. Chosen by the layer counts,
 * round(n E / (E + D)), with at least one stage on each side and no side
 * given more stages than it has blocks; 0 when n < 2 or a side is empty. */
int64_t mp_t5_split_rank(int64_t enc_layers, int64_t dec_layers, int64_t n);

/* Stage k of n = pp*vpp of Megatron's default split of `layers` blocks:
 * items [*begin, *end); even, or where n does not divide the blocks
 * mp_blocks_before_stage's (vpp 1: mp_uneven_split's, for a model of mtp
 * MTP modules); enc_layers > 0 (t5): the encoder's blocks over the first
 * mp_t5_split_rank stages, the decoder's over the rest. The planner, the
 * simulator and the executor split by this one function. */
void mp_even_stage_items(int64_t layers, int64_t enc_layers, int64_t n, int64_t vpp, int64_t mtp,
                         int64_t k, int64_t *begin, int64_t *end);

/* Checks stages are contiguous, cover every item once, count pp*vpp, and
 * the config is valid (mp_config_check_with_stages: where the plan lists its
 * stages, any layer count). */
mp_status mp_plan_check(const mp_plan *plan, mp_error *err);

#endif
