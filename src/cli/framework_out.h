/* framework_out.h — the framework formats of estimate and search (framework_out.c). */
#ifndef MP_CLI_FRAMEWORK_OUT_H
#define MP_CLI_FRAMEWORK_OUT_H

#include "cli/options.h"
#include "core/plan.h"

/* Writes c (with plan's split, may be NULL) as format's configuration;
 * MP_EINPUT naming --format when that framework cannot run it. */
mp_status mp_cli_framework_config(const mp_config *c, const mp_plan *plan, mp_format format,
                                  mp_buf *out, mp_error *err);

/* MP_EINPUT naming --format when c has a setting that no parallel shape
 * changes and format's file has no key for (mp_framework_unwritten), or,
 * with ep_fixed, an expert-parallel degree it cannot say
 * (mp_framework_expert_degree); MP_OK for the other formats. */
mp_status mp_cli_framework_settings(const mp_config *c, mp_format format, bool ep_fixed,
                                    mp_error *err);

/* Whether format is one of megatron, deepspeed, torchtitan. */
static inline bool mp_cli_is_framework_format(mp_format f)
{
    return f == MP_FORMAT_MEGATRON || f == MP_FORMAT_DEEPSPEED || f == MP_FORMAT_TORCHTITAN;
}

#endif
