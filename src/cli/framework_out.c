/* framework_out.c — --format megatron|deepspeed|torchtitan for the verbs that
 * print one configuration (estimate, search's winner): the plan in the
 * configuration language of the framework asked for, or one error line when
 * that framework cannot run it. */
#include "cli/framework_out.h"

#include <stdio.h>
#include <string.h>

#include "planner/framework.h"
#include "planner/megatron.h"

/* the writers name their field "format"; the command line's is --format
 * (it said "megaplan estimate: format: ...") */
static mp_status as_option(mp_status st, mp_error *err)
{
    if (st != MP_OK && err && !strcmp(err->field, "format"))
        snprintf(err->field, sizeof err->field, "--format");
    return st;
}

static mp_status megatron_cannot(const mp_config *c, const mp_plan *plan, mp_framework runs,
                                 mp_error *err);

mp_status mp_cli_framework_config(const mp_config *c, const mp_plan *plan, mp_format format,
                                  mp_buf *out, mp_error *err)
{
    mp_framework runs = mp_plan_framework(c);
    switch (format) {
    case MP_FORMAT_MEGATRON:
        if (runs != MP_FW_MEGATRON)
            return megatron_cannot(c, plan, runs, err);
        if (mp_megatron_can_run(c, err) != MP_OK)
            return MP_EINPUT; /* a gated GELU: no flags say it */
        mp_megatron_args(c, plan, out);
        return MP_OK;
    case MP_FORMAT_DEEPSPEED:
    case MP_FORMAT_TORCHTITAN: {
        mp_status st = format == MP_FORMAT_DEEPSPEED ? mp_deepspeed_config(c, out, err)
                                                     : mp_torchtitan_config(c, plan, out, err);
        return as_option(st, err);
    }
    default:
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--format", "not a framework format");
    }
}

mp_status mp_cli_framework_settings(const mp_config *c, mp_format format, bool ep_fixed,
                                    mp_error *err)
{
    if (format != MP_FORMAT_DEEPSPEED && format != MP_FORMAT_TORCHTITAN)
        return MP_OK;
    mp_framework fw = format == MP_FORMAT_DEEPSPEED ? MP_FW_DEEPSPEED : MP_FW_TORCHTITAN;
    mp_status st = mp_framework_unwritten(c, fw, err);
    if (st == MP_OK && ep_fixed)
        st = mp_framework_expert_degree(c, fw, err);
    return as_option(st, err);
}

/* --format megatron of a ZeRO-2/3 plan: the format of the framework that runs
 * it, when that format writes it. It pointed to --format torchtitan for an
 * FSDP2 plan with fsdp_microbatch_sync, which torchtitan's format then
 * refused: the line names the way that works, or says none does. */
static mp_status megatron_cannot(const mp_config *c, const mp_plan *plan, mp_framework runs,
                                 mp_error *err)
{
    const char *fmt = mp_framework_format(runs);
    mp_format other = runs == MP_FW_DEEPSPEED ? MP_FORMAT_DEEPSPEED : MP_FORMAT_TORCHTITAN;
    mp_buf tmp;
    mp_buf_init(&tmp);
    mp_error why;
    mp_error_clear(&why);
    mp_status st = mp_cli_framework_config(c, plan, other, &tmp, &why);
    mp_buf_free(&tmp);
    if (st == MP_OK)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--format",
                            "Megatron-LM cannot run ZeRO-%lld (it shards the optimizer only): "
                            "this plan runs under %s (--format %s)",
                            (long long)c->parallel.zero, mp_framework_name(runs), fmt);
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--format",
                        "Megatron-LM cannot run ZeRO-%lld (it shards the optimizer only), and "
                        "--format %s, whose framework runs it, refuses it too: %s",
                        (long long)c->parallel.zero, fmt, why.msg);
}
