/* megatron.h — a plan as Megatron-LM command-line arguments, ready to paste
 * into a launch script (`search --format megatron`). */
#ifndef MP_MEGATRON_H
#define MP_MEGATRON_H

#include "core/buf.h"
#include "core/config.h"
#include "core/plan.h"

/* plan may be NULL (even split, uniform recompute). Lines that Megatron cannot
 * express exactly (uneven middle stages, mixed recompute kinds) come out as
 * '#' comments saying what the nearest flags do instead. */
void mp_megatron_args(const mp_config *c, const mp_plan *plan, mp_buf *out);
/* The MoE and MLA flags of c (nothing for a dense model; megatron_moe.c). */
void mp_megatron_moe_args(const mp_config *c, mp_buf *out);

#endif
