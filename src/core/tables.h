/* tables.h — the field tables of the core types (core/fields.h), shared by
 * the YAML readers, the writers and the command-line overrides. */
#ifndef MP_TABLES_H
#define MP_TABLES_H

#include <stddef.h>

#include "core/config.h"
#include "core/fields.h"

const mp_field *mp_model_field_table(size_t *n);
/* Checks and completes the moe and mla groups (core/model_moe.c); called
 * by mp_model_finish. */
mp_status mp_model_finish_moe(mp_model *m, mp_error *err);
/* Checks the attention variants, linear_bias and glu_limit
 * (core/model_attn.c); called by mp_model_finish. */
mp_status mp_model_finish_attn(mp_model *m, mp_error *err);
const mp_field *mp_hw_field_table(size_t *n);
const mp_field *mp_training_field_table(size_t *n);
const mp_field *mp_parallel_field_table(size_t *n);

/* Model defaults that depend on the architecture (activation, norm,
 * position, tied embeddings): a file that gives only `arch: llama` gets
 * SwiGLU, RMSNorm, RoPE and untied embeddings. */
void mp_model_arch_defaults(mp_model *m, mp_arch arch);

/* The training batch (sequences) published with a preset, 0 when none. */
int64_t mp_model_preset_global_batch(const char *name);
/* The size-only alias of a preset ("175B"), NULL when none. */
const char *mp_model_preset_alias(const char *name);

/* tp=pp=vpp=cp=1, micro_batch 1, everything else off, schedule 1f1b;
 * dp stays 0 (it follows from the GPU count). */
void mp_parallel_defaults(mp_parallel *p);
/* Megatron's schedule for the split: interleaved-1f1b with vpp > 1, else 1f1b. */
mp_schedule_kind mp_default_schedule(const mp_parallel *p);

#endif
