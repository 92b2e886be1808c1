/* framework.h — which training framework runs a plan, and the plan written
 * in that framework's own configuration: Megatron-LM's flags (megatron.h),
 * a DeepSpeed config for ZeRO-2 (with AutoTP) and ZeRO-3 without tensor
 * parallelism, a torchtitan job file for FSDP2 with tensor and context
 * parallelism. */
#ifndef MP_FRAMEWORK_H
#define MP_FRAMEWORK_H

#include "core/buf.h"
#include "core/config.h"
#include "core/error.h"
#include "core/plan.h"

typedef enum { MP_FW_MEGATRON, MP_FW_DEEPSPEED, MP_FW_TORCHTITAN } mp_framework;

/* Megatron-LM for everything Megatron runs (ZeRO-1 = its distributed
 * optimizer); the plan's zero_runtime where it names one; else DeepSpeed
 * for ZeRO-2 (AutoTP training supports ZeRO 0-2) and ZeRO-3 with
 * tp = cp = 1, torchtitan (FSDP2) for ZeRO-3 with tp or cp. */
mp_framework mp_plan_framework(const mp_config *c);
const char *mp_framework_name(mp_framework f);     /* "Megatron-LM", "DeepSpeed", "torchtitan (FSDP2)" */
const char *mp_framework_format(mp_framework f);   /* the --format that writes it */

/* The settings no parallel shape changes (the model's MTP modules and MoE
 * capacity factor, fp8, te_cross_entropy, the shared-expert overlap, a token
 * dispatcher the file cannot name, ...) that fw's file has no key for: MP_EINPUT naming the
 * first (field "format"), else MP_OK; always MP_OK for Megatron-LM. A search
 * asks it before searching: no winner could be written. */
mp_status mp_framework_unwritten(const mp_config *c, mp_framework fw, mp_error *err);

/* An MoE plan's expert-parallel degree against fw's file: MP_EINPUT (field
 * "format") when ep > 1 and the file cannot say it (DeepSpeed: its MoE takes
 * ep_size in the model code, deepspeed.moe.layer.MoE), else MP_OK. A search
 * with ep fixed asks it before searching. */
mp_status mp_framework_expert_degree(const mp_config *c, mp_framework fw, mp_error *err);

/* A DeepSpeed JSON config (ds_config.json) for the plan. MP_EINPUT when
 * DeepSpeed cannot run it (pipeline, context parallelism, ZeRO-3 with TP) or
 * the file cannot say it (an MoE plan's ep > 1, etp other than tp). */
mp_status mp_deepspeed_config(const mp_config *c, mp_buf *out, mp_error *err);

/* A torchtitan TOML job file's parallelism, batch and checkpointing
 * sections for the plan; with pp, its split of the layers over the stages
 * (module_fqns_per_model_part): plan's stages when it has them (a plan
 * file's), else the configuration's (mp_config_stages). plan may be NULL.
 * An MoE plan's expert_parallel_degree, expert_tensor_parallel_degree and
 * expert_parallel_comm_backend (torchtitan v0.2.2's keys). MP_EINPUT when
 * torchtitan cannot express it (fp8, a pipeline schedule torchtitan lacks:
 * zb-h1, dualpipe; an expert split or dispatch outside its rules). */
mp_status mp_torchtitan_config(const mp_config *c, const mp_plan *plan, mp_buf *out,
                               mp_error *err);

#endif
