/* megatron.h — a plan as Megatron-LM command-line arguments, ready to paste
 * into a launch script (`search --format megatron`). */
#ifndef MP_MEGATRON_H
#define MP_MEGATRON_H

#include <stdbool.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/plan.h"

/* plan may be NULL (even split, uniform recompute). Out: '#' comments on
 * what Megatron cannot say (per-layer recompute it cannot express, a T5 it
 * builds otherwise, a schedule it lacks), then `export
 * CUDA_DEVICE_MAX_CONNECTIONS=1` when tp > 1 or cp > 1, then the flags, one
 * per line, each but the last continued with a backslash. */
void mp_megatron_args(const mp_config *c, const mp_plan *plan, mp_buf *out);
/* MP_EINPUT (field model.activation) when Megatron-LM has no flags for c's
 * model, so that mp_megatron_args would write another model: GEGLU (a gated
 * GELU MLP; its --quick-geglu is x sigmoid(1.702 x), another function). */
mp_status mp_megatron_can_run(const mp_config *c, mp_error *err);
/* The MoE and MLA flags of c (nothing for a dense model; megatron_moe.c). */
void mp_megatron_moe_args(const mp_config *c, mp_buf *out);
/* The flex dispatcher's kernels (--moe-flex-dispatcher-backend): the plan's
 * parallel.flex_backend, or with auto hybridep where one NVLink domain spans
 * nodes, else deepep (mp_flex_backend_of, cost_internal.h). */
const char *mp_flex_backend_name(const mp_config *c);

/* Whether Megatron's recompute flags say the plan's per-layer recompute
 * exactly (for `search --runtime megatron`). */
bool mp_megatron_recompute_exact(const mp_config *c, const mp_plan *plan);

#endif
