/* t5_plan.h — what a T5 plan asks of the executor (t5_plan.c), before any
 * rank starts: the refusals and --shrink's model. */
#ifndef MP_EXEC_T5_PLAN_H
#define MP_EXEC_T5_PLAN_H

#include "core/error.h"
#include "core/plan.h"
#include "exec/params.h"
#include "exec/runtime.h"

/* Refuses (exit 2, naming the field) what the executor's T5 does not run:
 * context parallelism and interleaved pipelines (Megatron-LM runs neither for
 * encoder-decoder models), a norm other than RMSNorm, positions other than
 * relative, an empty encoder or decoder. */
mp_status mp_exec_t5_check(const mp_plan *plan, mp_error *err);

/* --shrink: one encoder and one decoder block, or with pp > 1 stages one
 * block per stage split at the plan's split rank (mp_t5_split_rank of the
 * plan's model); the decoder half as long as the encoder. */
void mp_exec_t5_shrink(const mp_model *m, int pp, mp_gpt_dims *out);

/* Replaces rt's embedding group (first and last stage) by T5's: the ranks
 * holding a copy of the word embeddings (member: the first stage, the first
 * decoder stage, and with tied embeddings the last) of one (t, c, d). */
mp_status mp_exec_t5_embedding_group(mp_runtime *rt, bool member, mp_error *err);
/* The groups of one (t, c, d)'s pipeline stages holding encoder blocks
 * (enc: this rank's stage does) and decoder blocks, over which each stack's
 * relative-bias copies sum their gradients; size 1 without a pipeline. */
mp_status mp_exec_t5_stack_groups(const mp_runtime *rt, bool enc, bool dec, mp_group *enc_group,
                                  mp_group *dec_group, mp_error *err);

#endif
