/* t5_plan.h — what a T5 plan asks of the executor (t5_plan.c), before any
 * rank starts: the refusals and --shrink's model. */
#ifndef MP_EXEC_T5_PLAN_H
#define MP_EXEC_T5_PLAN_H

#include "core/error.h"
#include "core/plan.h"
#include "exec/params.h"

/* Refuses (exit 2, naming the field) what the executor's T5 does not run:
 * context parallelism and interleaved pipelines (Megatron-LM runs neither for
 * encoder-decoder models), a norm other than RMSNorm, positions other than
 * relative, recomputation, an empty encoder or decoder. */
mp_status mp_exec_t5_check(const mp_plan *plan, mp_error *err);

/* --shrink: one encoder and one decoder block, or with pp > 1 stages one
 * block per stage split at the plan's split rank (mp_t5_split_rank of the
 * plan's model); the decoder half as long as the encoder. */
void mp_exec_t5_shrink(const mp_model *m, int pp, mp_gpt_dims *out);

#endif
