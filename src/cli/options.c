/* options.c — the options estimate, explain, search and simulate share, and
 * the Megatron-LM defaults for whatever the user left out. */
#include "cli/options.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/decode.h"
#include "core/fields.h"
#include "core/io.h"
#include "core/layout.h"
#include "core/output.h"
#include "core/tables.h"
#include "core/units.h"

#define MAX_DEGREE (1LL << 24)

typedef enum {
    OPT_MODEL, OPT_GPUS, OPT_HW, OPT_HW_SET, OPT_SEQ, OPT_GLOBAL_BATCH, OPT_PRECISION,
    OPT_TOKENS, OPT_TP, OPT_SP, OPT_NO_SP, OPT_PP, OPT_VPP, OPT_CP, OPT_CP_COMM_TYPE, OPT_DP, OPT_MICRO_BATCH,
    OPT_RECOMPUTE, OPT_RECOMPUTE_MODULES, OPT_DIST_OPT, OPT_NO_DIST_OPT, OPT_ZERO, OPT_ZERO_RUNTIME, OPT_HSDP, OPT_DP_OVERLAP, OPT_TP_OVERLAP, OPT_P2P_OVERLAP, OPT_NCCL_UB, OPT_PARAM_GATHER_OVERLAP, OPT_PG_WITH_OPT, OPT_DDP_BUCKET_SIZE, OPT_SCHEDULE,
    OPT_EP, OPT_ETP, OPT_DISPATCHER, OPT_MOE_A2A_OVERLAP, OPT_SHARED_EXPERT_OVERLAP, OPT_DISPATCH_FP8, OPT_FLEX_SMS, OPT_FLEX_BACKEND,
    OPT_CUDA_GRAPH_SCOPE,
    OPT_FP8_RECIPE, OPT_FP8_PARAM_GATHER, OPT_GRAD_REDUCE_BF16, OPT_TE_CROSS_ENTROPY,
    OPT_NATIVE_CROSS_ENTROPY,
    OPT_OPTIMIZER_MOMENTS, OPT_FP8_ACT_CACHE,
    OPT_MOE_IMBALANCE, OPT_PIPELINE_LAYOUT, OPT_FIRST_STAGE_LAYERS, OPT_LAST_STAGE_LAYERS,
    OPT_ACCOUNT_FOR_EMBEDDING, OPT_ACCOUNT_FOR_LOSS,
    OPT_FORMAT,
    OPT_COUNT
} opt_id;

/* The rows, in the order --help shows them. */
static const mp_opt options[] = {
    {"--model", NULL, "M", OPT_MODEL, 0,
     "a preset (megaplan models), a model YAML file or a HuggingFace config.json", NULL},
    {"--gpus", NULL, "N", OPT_GPUS, 0, "how many GPUs", NULL},
    {"--hw", NULL, "H", OPT_HW, 0,
     "a hardware profile: a name (megaplan hw) or a YAML file (default dgx-a100)", NULL},
    {"--hw-set", NULL, "KEY=VALUE", OPT_HW_SET, 0,
     "override one field of the profile (e.g. scale_out.bw_per_gpu=50GB/s); repeatable", NULL},
    {"--seq", NULL, "S", OPT_SEQ, 0, "sequence length (default: the model's)", NULL},
    {"--global-batch", NULL, "B", OPT_GLOBAL_BATCH, 0,
     "sequences per iteration (default: the model's published batch, or 512)", NULL},
    {"--precision", NULL, "P", OPT_PRECISION, 0,
     "training precision: bf16 (default), fp16, fp32 or fp8 (Transformer Engine; H100 and later)",
     "bf16 fp16 fp32 fp8"},
    {"--tokens", NULL, "T", OPT_TOKENS, 0,
     "tokens to train on, a whole count (3e11, 300B, 1.4T): adds the time of the whole run", NULL},
    {"--tp", NULL, "t", OPT_TP, 0, "tensor parallel degree", NULL},
    {"--sp", NULL, NULL, OPT_SP, 0, "sequence parallelism on (needs tp > 1)", NULL},
    {"--no-sp", NULL, NULL, OPT_NO_SP, 0, "sequence parallelism off", NULL},
    {"--pp", NULL, "p", OPT_PP, 0, "pipeline parallel degree", NULL},
    {"--vpp", NULL, "v", OPT_VPP, 0, "virtual stages (model chunks) per pipeline rank", NULL},
    {"--pipeline-layout", NULL, "S", OPT_PIPELINE_LAYOUT, 0,
     "the layers of each (virtual) stage, in Megatron's --pipeline-model-parallel-layout "
     "grammar (\"Et*3|(tt|)*29|L\"); vpp follows from its stage count",
     NULL},
    {"--first-stage-layers", NULL, "n", OPT_FIRST_STAGE_LAYERS, 0,
     "blocks on the first pipeline rank (Megatron's --decoder-first-pipeline-num-layers; "
     "a multiple of vpp)",
     NULL},
    {"--last-stage-layers", NULL, "n", OPT_LAST_STAGE_LAYERS, 0,
     "blocks on the last pipeline rank (Megatron's --decoder-last-pipeline-num-layers; "
     "a multiple of vpp)",
     NULL},
    {"--account-for-embedding", NULL, NULL, OPT_ACCOUNT_FOR_EMBEDDING, 0,
     "count the embedding as a layer in the stage split, the first stage building one block "
     "fewer (Megatron's --account-for-embedding-in-pipeline-split)",
     NULL},
    {"--account-for-loss", NULL, NULL, OPT_ACCOUNT_FOR_LOSS, 0,
     "count the loss as a layer in the stage split, the last stage building one block fewer "
     "(Megatron's --account-for-loss-in-pipeline-split)",
     NULL},
    {"--cp", NULL, "c", OPT_CP, 0, "context parallel degree", NULL},
    {"--cp-comm-type", NULL, "T", OPT_CP_COMM_TYPE, 0,
     "how context parallelism exchanges K/V (Megatron --cp-comm-type): p2p (default: Transformer "
     "Engine's ring), all_gather or a2a (these need cp > 1; a2a tp*cp dividing the query and K/V "
     "heads). search keeps p2p unless given: no measured run checks the others' times",
     "p2p all_gather a2a"},
    {"--dp", NULL, "d", OPT_DP, 0, "data parallel degree (default gpus/(tp*pp*cp))", NULL},
    {"--micro-batch", NULL, "b", OPT_MICRO_BATCH, 0, "sequences per micro-batch", NULL},
    {"--recompute", NULL, "R", OPT_RECOMPUTE, 0,
     "activation recomputation: none (default), selective or full", "none selective full"},
    {"--recompute-modules", NULL, "LIST", OPT_RECOMPUTE_MODULES, 0,
     "what selective recompute re-runs (Megatron --recompute-modules; implies selective): "
     "core_attn (the default), moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts, "
     "comma-separated",
     NULL},
    {"--dist-opt", NULL, NULL, OPT_DIST_OPT, 0,
     "the distributed optimizer (ZeRO-1: optimizer states sharded over dp)", NULL},
    {"--no-dist-opt", NULL, NULL, OPT_NO_DIST_OPT, 0, "no distributed optimizer", NULL},
    {"--zero", NULL, "Z", OPT_ZERO, 0,
     "ZeRO stage 0-3 (1 is --dist-opt; 2 and 3 shard gradients and weights too)", "0 1 2 3"},
    {"--zero-runtime", NULL, "R", OPT_ZERO_RUNTIME, 0,
     "who runs --zero 2/3: auto (DeepSpeed, or torchtitan's FSDP2 with tp or cp; no pp), "
     "deepspeed, or fsdp2 (PyTorch FSDP2, which --zero 3 runs with pp)",
     "auto deepspeed fsdp2"},
    {"--hsdp", NULL, NULL, OPT_HSDP, 0,
     "hybrid sharding: ZeRO-3 within a node, replicas across (implies --zero 3)", NULL},
    {"--dp-overlap", NULL, "on|off", OPT_DP_OVERLAP, 0,
     "overlap the DP gradient reduction with the backward (default: on with --dist-opt)",
     "on off"},
    {"--tp-overlap", NULL, "on|off", OPT_TP_OVERLAP, 0,
     "overlap TP communication with the GEMMs (needs tp > 1 and sp)", "on off"},
    {"--p2p-overlap", NULL, "on|off", OPT_P2P_OVERLAP, 0,
     "interleaved 1F1B: overlap each pipeline transfer with the other direction's compute "
     "(Megatron --overlap-p2p-communication; default off: synchronous)",
     "on off"},
    {"--nccl-ub", NULL, "on|off", OPT_NCCL_UB, 0,
     "the DP buffers registered with NCCL, whose collectives then hold fewer SMs (Megatron "
     "DDP/FSDP nccl_ub)",
     "on off"},
    {"--param-gather-overlap", NULL, "on|off", OPT_PARAM_GATHER_OVERLAP, 0,
     "with --dist-opt and --dp-overlap: the updated parameters' all-gather overlapped with the "
     "next forward (default on; off: run after the optimizer step, as Megatron without "
     "--overlap-param-gather)",
     "on off"},
    {"--param-gather-with-optimizer", NULL, "on|off", OPT_PG_WITH_OPT, 0,
     "interleaved, --dist-opt, overlapped gather: launch the first chunk's parameter all-gather "
     "during the optimizer step (Megatron --overlap-param-gather-with-optimizer-step; default off)",
     "on off"},
    {"--ddp-bucket-size", NULL, "N", OPT_DDP_BUCKET_SIZE, 0,
     "with --dp-overlap: the DP gradient/parameter bucket, in parameters (Megatron "
     "--ddp-bucket-size; default max(40M, 1M*dp); Megatron-Bridge and NeMo set 134217728)",
     NULL},
    {"--schedule", NULL, "S", OPT_SCHEDULE, 0,
     "pipeline schedule: gpipe, 1f1b, interleaved-1f1b, zb-h1, dualpipe (even pp), or with vpp 2 "
     "zb-v or dualpipev (default 1f1b, interleaved-1f1b with vpp > 1)",
     "gpipe 1f1b interleaved-1f1b zb-h1 zb-v dualpipev dualpipe"},
    {"--ep", NULL, "e", OPT_EP, 0, "expert parallel degree (MoE models)", NULL},
    {"--etp", NULL, "t", OPT_ETP, 0, "expert tensor parallel degree (MoE models)", NULL},
    {"--dispatcher", NULL, "D", OPT_DISPATCHER, 0,
     "MoE token dispatcher: alltoall, allgather or flex (DeepEP/HybridEP: one copy per remote "
     "node)",
     "alltoall allgather flex"},
    {"--moe-a2a-overlap", NULL, "on|off", OPT_MOE_A2A_OVERLAP, 0,
     "overlap the EP all-to-all with another micro-batch's compute (Megatron "
     "--overlap-moe-expert-parallel-comm; ep > 1, vpp > 1 when pp > 1)",
     "on off"},
    {"--shared-expert-overlap", NULL, "on|off", OPT_SHARED_EXPERT_OVERLAP, 0,
     "overlap the shared experts with the dispatch and combine (Megatron "
     "--moe-shared-expert-overlap)",
     "on off"},
    {"--dispatch-fp8", NULL, "on|off", OPT_DISPATCH_FP8, 0,
     "flex dispatcher, fp8: tokens dispatched in FP8 with scales, combined in bf16 (DeepSeek-V3; "
     "Megatron --moe-dispatch-fwd-dtype mxfp8 --moe-combine-bwd-dtype mxfp8)",
     "on off"},
    {"--flex-sms", NULL, "N", OPT_FLEX_SMS, 0,
     "flex dispatcher: the SMs its dispatch and combine kernels hold (Megatron "
     "--moe-hybridep-num-sms or --moe-deepep-num-sms; default 16 for HybridEP, 20 for DeepEP; "
     "Megatron-Bridge's performance scripts set 32 for HybridEP)",
     NULL},
    {"--flex-backend", NULL, "B", OPT_FLEX_BACKEND, 0,
     "flex dispatcher: the kernels it runs, deepep or hybridep (Megatron "
     "--moe-flex-dispatcher-backend; default auto: hybridep where an NVLink domain spans nodes, "
     "else deepep); sets the SMs' default and, under fp8, DeepEP's row padding",
     "auto deepep hybridep"},
    {"--cuda-graph-scope", NULL, "LIST", OPT_CUDA_GRAPH_SCOPE, 0,
     "parts of each layer captured as CUDA graphs by Transformer Engine, comma-separated: "
     "attn, mlp, moe, moe_router, moe_preprocess (Megatron --cuda-graph-scope)",
     NULL},
    {"--fp8-recipe", NULL, "R", OPT_FP8_RECIPE, 0,
     "FP8 scaling recipe: delayed, tensorwise, blockwise or mxfp8 (Blackwell only)",
     "delayed tensorwise blockwise mxfp8"},
    {"--fp8-param-gather", NULL, "on|off", OPT_FP8_PARAM_GATHER, 0,
     "FP8 parameters, no bf16 copy beside them (Megatron --fp8-param-gather; fp8 only)",
     "on off"},
    {"--grad-reduce-bf16", NULL, "on|off", OPT_GRAD_REDUCE_BF16, 0,
     "main gradients kept and reduced in bf16, not fp32 (Megatron --grad-reduce-in-bf16)",
     "on off"},
    {"--te-cross-entropy", NULL, "on|off", OPT_TE_CROSS_ENTROPY, 0,
     "the loss as Transformer Engine's fused cross entropy (Megatron "
     "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te)",
     "on off"},
    {"--native-cross-entropy", NULL, "on|off", OPT_NATIVE_CROSS_ENTROPY, 0,
     "the loss as Megatron-Core's native fused cross entropy (Megatron "
     "--cross-entropy-loss-fusion --cross-entropy-fusion-impl native)",
     "on off"},
    {"--optimizer-moments", NULL, "D", OPT_OPTIMIZER_MOMENTS, 0,
     "Adam's moments in fp32 (default), bf16 or fp16 beside fp32 master weights (Megatron "
     "--use-precision-aware-optimizer --exp-avg-dtype D --exp-avg-sq-dtype D; needs --dist-opt)",
     "fp32 bf16 fp16"},
    {"--fp8-act-cache", NULL, "C", OPT_FP8_ACT_CACHE, 0,
     "SwiGLU inputs stashed in FP8: off (default); swiglu_input (Megatron-Core's "
     "activation_func_fp8_input_store, E4M3); deepseek (DeepSeek-V3's MoE SwiGLU inputs in FP8 "
     "1x128 tiles, also under moe_act; fp8 blockwise)",
     "off swiglu_input deepseek"},
    {"--moe-imbalance", NULL, "X", OPT_MOE_IMBALANCE, 0,
     "MoE load imbalance: the busiest EP rank's tokens over the mean (default: the model's)", NULL},
    {"--format", NULL, "F", OPT_FORMAT, 0,
     "table (default), json, yaml, or megatron (Megatron-LM's flags); search also deepspeed and "
     "torchtitan",
     "table json yaml megatron deepspeed torchtitan"},
};

const mp_opt_group mp_cli_config_opts = MP_OPT_GROUP("model, cluster and parallel split", options);

static mp_status bad_option(mp_error *err, const char *opt, const char *fmt, const char *value)
{
    char shown[48];
    snprintf(shown, sizeof shown, "%.40s%s", value, strlen(value) > 40 ? "..." : "");
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, fmt, shown);
}

static mp_status parse_count(const char *opt, const char *value, int64_t lo, int64_t hi,
                             int64_t *out, mp_error *err)
{
    int64_t v;
    if (!mp_parse_int64(value, &v)) {
        const char *p = value + (value[0] == '-' || value[0] == '+');
        if (*p && strspn(p, "0123456789") == strlen(p))
            return bad_option(err, opt, "too large: '%s' overflows a 64-bit integer", value);
        return bad_option(err, opt, "expected a whole number, got '%s'", value);
    }
    if (v < lo)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, "must be at least %lld (got %lld)",
                            (long long)lo, (long long)v);
    if (v > hi)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt,
                            "absurdly large: at most %lld (got %lld)", (long long)hi,
                            (long long)v);
    *out = v;
    return MP_OK;
}

/* Token counts read "3e11", "300B", "1.4T", "500M": a whole number of tokens
 * (1.5T is, 1.5 is not), as a plan's training.tokens (mp_tokens_valid). */
static mp_status parse_tokens(const char *opt, const char *value, double *out, mp_error *err)
{
    char num[64];
    snprintf(num, sizeof num, "%s", value);
    size_t len = strlen(num);
    double scale = 1;
    if (len) {
        switch (num[len - 1]) {
        case 'K': case 'k': scale = 1e3; break;
        case 'M': scale = 1e6; break;
        case 'B': case 'G': scale = 1e9; break;
        case 'T': scale = 1e12; break;
        default: break;
        }
        if (scale != 1)
            num[len - 1] = '\0';
    }
    double v;
    const char *why;
    if (!mp_units_parse(num, MP_UNIT_NONE, &v, &why))
        return bad_option(err, opt, "expected a token count such as 3e11 or 300B, got '%s'",
                          value);
    v *= scale;
    if (!isfinite(v) || v == 0 || !mp_tokens_valid(v))
        return bad_option(err, opt, "must be a whole count of tokens from 1 to 1e18, got '%s'",
                          value);
    *out = v;
    return MP_OK;
}

static mp_status parse_onoff(const char *opt, const char *value, bool *out, mp_error *err)
{
    if (!mp_parse_bool_word(value, out))
        return bad_option(err, opt, "expected on or off, got '%s'", value);
    return MP_OK;
}

static mp_status apply(mp_cli_config *cc, const mp_opt *o, const char *value, mp_error *err)
{
    mp_config *c = &cc->config;
    mp_parallel *p = &c->parallel;
    mp_training *t = &c->training;
    const char *opt = o->name;
    int k;
    switch (o->id) {
    case OPT_MODEL:
        if (!value[0])
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, "needs a model");
        cc->model_spec = value;
        cc->have_model = true;
        return MP_OK;
    case OPT_GPUS:
        cc->have_gpus = true;
        return parse_count(opt, value, 1, MAX_DEGREE, &t->gpus, err);
    case OPT_HW:
        if (!value[0])
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, "needs a profile");
        cc->hw_spec = value;
        cc->set |= MP_SET_HW;
        return MP_OK;
    case OPT_HW_SET:
        if (!strchr(value, '=') || value[0] == '=')
            return bad_option(err, opt, "expected KEY=VALUE (e.g. scale_out.bw_per_gpu=50GB/s), "
                                        "got '%s'", value);
        /* "memory= 40GiB" was read as 40 GiB, where "--tp ' 2'" is refused */
        if (mp_opt_spaced(value, (size_t)(strchr(value, '=') - value)) ||
            mp_opt_spaced(strchr(value, '=') + 1, strlen(strchr(value, '=') + 1)))
            return bad_option(err, opt, "'%s' has spaces around its key or value: give them "
                                        "alone", value);
        if (cc->n_hw_sets >= MP_CLI_MAX_HW_SETS)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, "at most %d overrides",
                                MP_CLI_MAX_HW_SETS);
        /* one field set twice: the last one silently won */
        for (int i = 0; i < cc->n_hw_sets; i++) {
            size_t klen = (size_t)(strchr(value, '=') - value);
            if (!strncmp(cc->hw_sets[i], value, klen) && cc->hw_sets[i][klen] == '=')
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt,
                                    "%.*s is set twice ('%.60s', then '%.60s'): say it once",
                                    (int)(klen > 64 ? 64 : klen), value, cc->hw_sets[i], value);
        }
        cc->hw_sets[cc->n_hw_sets++] = value;
        return MP_OK;
    case OPT_SEQ:
        cc->set |= MP_SET_SEQ;
        return parse_count(opt, value, 1, 1 << 22, &t->seq, err);
    case OPT_GLOBAL_BATCH:
        cc->set |= MP_SET_GLOBAL_BATCH;
        return parse_count(opt, value, 1, 1 << 30, &t->global_batch, err);
    case OPT_PRECISION:
        cc->set |= MP_SET_PRECISION;
        for (k = 0; k < MP_DTYPE_COUNT; k++)
            if (!strcmp(value, mp_dtype_name((mp_dtype)k)) && k != MP_DTYPE_TF32) {
                t->precision = (mp_dtype)k;
                return MP_OK;
            }
        return bad_option(err, opt, "expected bf16, fp16, fp32 or fp8, got '%s'", value);
    case OPT_FP8_RECIPE:
        cc->set |= MP_SET_FP8_RECIPE;
        for (k = 0; k < MP_FP8_RECIPE_COUNT; k++)
            if (!strcmp(value, mp_fp8_recipe_name((mp_fp8_recipe)k))) {
                t->fp8_recipe = (mp_fp8_recipe)k;
                return MP_OK;
            }
        return bad_option(err, opt, "expected delayed, tensorwise, blockwise or mxfp8, got '%s'",
                          value);
    case OPT_FP8_PARAM_GATHER:
        cc->set |= MP_SET_FP8_PARAM_GATHER;
        return parse_onoff(opt, value, &t->fp8_param_gather, err);
    case OPT_GRAD_REDUCE_BF16:
        cc->set |= MP_SET_GRAD_REDUCE_BF16;
        return parse_onoff(opt, value, &t->grad_reduce_bf16, err);
    case OPT_TE_CROSS_ENTROPY:
        return parse_onoff(opt, value, &t->te_cross_entropy, err);
    case OPT_NATIVE_CROSS_ENTROPY:
        return parse_onoff(opt, value, &t->native_cross_entropy, err);
    case OPT_OPTIMIZER_MOMENTS:
        for (k = 0; k < MP_DTYPE_COUNT; k++)
            if (!strcmp(value, mp_dtype_name((mp_dtype)k)) &&
                (k == MP_DTYPE_FP32 || k == MP_DTYPE_BF16 || k == MP_DTYPE_FP16)) {
                t->optimizer_moments = (mp_dtype)k;
                return MP_OK;
            }
        return bad_option(err, opt, "expected fp32, bf16 or fp16, got '%s'", value);
    case OPT_FP8_ACT_CACHE:
        for (k = 0; k < MP_F8AC_COUNT; k++)
            if (!strcmp(value, mp_fp8_act_cache_name((mp_fp8_act_cache)k))) {
                t->fp8_act_cache = (mp_fp8_act_cache)k;
                return MP_OK;
            }
        return bad_option(err, opt, "expected off, swiglu_input or deepseek, got '%s'", value);
    case OPT_MOE_IMBALANCE: {
        cc->set |= MP_SET_MOE_IMBALANCE;
        char *end = NULL;
        double v = strtod(value, &end);
        if (!end || *end || !(v >= 1.0) || v > 1e3)
            return bad_option(err, opt, "expected a number >= 1 (the busiest expert rank's "
                                        "tokens over the mean), got '%s'", value);
        cc->moe_imbalance = v;
        return MP_OK;
    }
    case OPT_TOKENS:
        cc->set |= MP_SET_TOKENS;
        return parse_tokens(opt, value, &t->tokens, err);
    case OPT_TP:
        cc->set |= MP_SET_TP;
        return parse_count(opt, value, 1, MAX_DEGREE, &p->tp, err);
    case OPT_SP:
    case OPT_NO_SP:
        cc->set |= MP_SET_SP;
        p->sp = o->id == OPT_SP;
        return MP_OK;
    case OPT_PP:
        cc->set |= MP_SET_PP;
        return parse_count(opt, value, 1, MAX_DEGREE, &p->pp, err);
    case OPT_VPP:
        cc->set |= MP_SET_VPP;
        return parse_count(opt, value, 1, 1 << 16, &p->vpp, err);
    case OPT_FIRST_STAGE_LAYERS:
        cc->set |= MP_SET_STAGE_LAYERS;
        return parse_count(opt, value, 1, MP_MAX_LAYERS, &p->first_stage_layers, err);
    case OPT_LAST_STAGE_LAYERS:
        cc->set |= MP_SET_STAGE_LAYERS;
        return parse_count(opt, value, 1, MP_MAX_LAYERS, &p->last_stage_layers, err);
    case OPT_ACCOUNT_FOR_EMBEDDING:
        cc->set |= MP_SET_STAGE_LAYERS;
        p->account_for_embedding = true;
        return MP_OK;
    case OPT_ACCOUNT_FOR_LOSS:
        cc->set |= MP_SET_STAGE_LAYERS;
        p->account_for_loss = true;
        return MP_OK;
    case OPT_PIPELINE_LAYOUT:
        cc->set |= MP_SET_PIPELINE_LAYOUT;
        if (strlen(value) >= sizeof p->pipeline_layout)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, "too long: at most %zu characters",
                                sizeof p->pipeline_layout - 1);
        if (!*value)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, "empty");
        snprintf(p->pipeline_layout, sizeof p->pipeline_layout, "%s", value);
        return MP_OK;
    case OPT_CP:
        cc->set |= MP_SET_CP;
        return parse_count(opt, value, 1, MAX_DEGREE, &p->cp, err);
    case OPT_CP_COMM_TYPE:
        /* a2a+p2p is known, and refused with its reason by mp_config_cp_comm_check */
        for (k = 0; k < MP_CP_COMM_COUNT; k++)
            if (!strcmp(value, mp_cp_comm_name((mp_cp_comm)k))) {
                p->cp_comm_type = (mp_cp_comm)k;
                return MP_OK;
            }
        return bad_option(err, opt, "expected p2p, all_gather or a2a, got '%s'", value);
    case OPT_DP:
        cc->set |= MP_SET_DP;
        return parse_count(opt, value, 1, MAX_DEGREE, &p->dp, err);
    case OPT_MICRO_BATCH:
        cc->set |= MP_SET_MICRO_BATCH;
        return parse_count(opt, value, 1, 1 << 20, &p->micro_batch, err);
    case OPT_RECOMPUTE:
        cc->set |= MP_SET_RECOMPUTE;
        if ((k = mp_recompute_parse(value)) < 0)
            return bad_option(err, opt, "expected none, selective or full, got '%s'", value);
        p->recompute = (mp_recompute)k;
        return MP_OK;
    case OPT_RECOMPUTE_MODULES: {
        char bad[72];
        if (!mp_recompute_modules_parse(value, &p->recompute_modules, bad, sizeof bad))
            return bad_option(err, opt,
                              "unknown module '%s' (known: core_attn, moe_act, layernorm, "
                              "mla_up_proj, mlp, moe, shared_experts)",
                              bad);
        /* the modules are what selective recompute re-runs: they imply it
         * (a --recompute none or full given too is refused when finishing) */
        if (!(cc->set & MP_SET_RECOMPUTE))
            p->recompute = MP_RECOMPUTE_SELECTIVE;
        cc->set |= MP_SET_RECOMPUTE;
        return MP_OK;
    }
    case OPT_DIST_OPT:
    case OPT_NO_DIST_OPT:
        cc->set |= MP_SET_DIST_OPT;
        p->dist_opt = o->id == OPT_DIST_OPT;
        return MP_OK;
    case OPT_ZERO:
        /* ZeRO-N includes ZeRO-1, the optimizer sharding Megatron calls the
         * distributed optimizer: --zero 1 is --dist-opt */
        cc->set |= MP_SET_ZERO;
        if (parse_count(opt, value, 0, 3, &p->zero, err) != MP_OK)
            return MP_EINPUT;
        if (p->zero >= 1) {
            cc->set |= MP_SET_DIST_OPT;
            p->dist_opt = true;
        }
        return MP_OK;
    case OPT_ZERO_RUNTIME:
        cc->set |= MP_SET_ZERO_RUNTIME;
        for (int k = 0; k < MP_ZRT_COUNT; k++)
            if (!strcmp(value, mp_zero_runtime_name((mp_zero_runtime)k))) {
                p->zero_runtime = (mp_zero_runtime)k;
                return MP_OK;
            }
        return bad_option(err, opt, "expected auto, deepspeed or fsdp2, got '%s'", value);
    case OPT_HSDP:
        /* hybrid sharding is ZeRO-3's: --hsdp alone means --zero 3 --hsdp */
        cc->set |= MP_SET_HSDP | MP_SET_ZERO | MP_SET_DIST_OPT;
        p->hsdp = true;
        p->zero = 3;
        p->dist_opt = true;
        return MP_OK;
    case OPT_EP:
        cc->set |= MP_SET_EP;
        return parse_count(opt, value, 1, MAX_DEGREE, &p->ep, err);
    case OPT_ETP:
        cc->set |= MP_SET_ETP;
        return parse_count(opt, value, 1, MAX_DEGREE, &p->etp, err);
    case OPT_DISPATCHER:
        cc->set |= MP_SET_DISPATCHER;
        if (!strcmp(value, "alltoall"))
            p->dispatcher = MP_DISPATCH_ALLTOALL;
        else if (!strcmp(value, "allgather"))
            p->dispatcher = MP_DISPATCH_ALLGATHER;
        else if (!strcmp(value, "flex"))
            p->dispatcher = MP_DISPATCH_FLEX;
        else
            return bad_option(err, opt, "expected alltoall, allgather or flex, got '%s'", value);
        return MP_OK;
    case OPT_CUDA_GRAPH_SCOPE: {
        char bad[72];
        if (!mp_cuda_graph_scope_parse(value, &p->cuda_graph_scope, bad, sizeof bad))
            return bad_option(err, opt,
                              "unknown scope '%s' (known: " MP_CUDA_GRAPH_SCOPES ")", bad);
        return MP_OK;
    }
    case OPT_MOE_A2A_OVERLAP:
        cc->set |= MP_SET_MOE_A2A_OVERLAP;
        return parse_onoff(opt, value, &p->moe_a2a_overlap, err);
    case OPT_SHARED_EXPERT_OVERLAP:
        cc->set |= MP_SET_SHARED_EXPERT_OVERLAP;
        return parse_onoff(opt, value, &p->shared_expert_overlap, err);
    case OPT_DISPATCH_FP8:
        return parse_onoff(opt, value, &p->dispatch_fp8, err);
    case OPT_FLEX_SMS:
        return parse_count(opt, value, 1, MP_FLEX_SMS_MAX, &p->flex_sms, err);
    case OPT_FLEX_BACKEND:
        for (int k = 0; k < MP_FLEX_BACKEND_COUNT; k++)
            if (!strcmp(value, mp_flex_backend_setting_name((mp_flex_backend)k))) {
                p->flex_backend = (mp_flex_backend)k;
                return MP_OK;
            }
        return bad_option(err, opt, "expected auto, deepep or hybridep, got '%s'", value);
    case OPT_DP_OVERLAP:
        cc->set |= MP_SET_DP_OVERLAP;
        return parse_onoff(opt, value, &p->dp_overlap, err);
    case OPT_TP_OVERLAP:
        cc->set |= MP_SET_TP_OVERLAP;
        return parse_onoff(opt, value, &p->tp_overlap, err);
    case OPT_P2P_OVERLAP:
        return parse_onoff(opt, value, &p->p2p_overlap, err);
    case OPT_NCCL_UB:
        return parse_onoff(opt, value, &p->nccl_ub, err);
    case OPT_PARAM_GATHER_OVERLAP: {
        bool on = true;
        mp_status st = parse_onoff(opt, value, &on, err);
        if (st == MP_OK)
            p->param_gather_sync = !on; /* (read an unset bool on a bad value) */
        return st;
    }
    case OPT_PG_WITH_OPT:
        return parse_onoff(opt, value, &p->overlap_param_gather_with_optimizer_step, err);
    case OPT_DDP_BUCKET_SIZE:
        return parse_count(opt, value, 1, MP_DDP_BUCKET_MAX, &p->ddp_bucket_size, err);
    case OPT_SCHEDULE:
        cc->set |= MP_SET_SCHEDULE;
        if ((k = mp_schedule_parse(value)) < 0)
            return bad_option(err, opt,
                              "expected gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v, dualpipev or "
                              "dualpipe, got '%s'",
                              value);
        p->schedule = (mp_schedule_kind)k;
        return MP_OK;
    case OPT_FORMAT:
        if (!strcmp(value, "table"))
            cc->format = MP_FORMAT_TABLE;
        else if (!strcmp(value, "json"))
            cc->format = MP_FORMAT_JSON;
        else if (!strcmp(value, "yaml"))
            cc->format = MP_FORMAT_YAML;
        else if (!strcmp(value, "megatron"))
            cc->format = MP_FORMAT_MEGATRON;
        else if (!strcmp(value, "deepspeed"))
            cc->format = MP_FORMAT_DEEPSPEED;
        else if (!strcmp(value, "torchtitan"))
            cc->format = MP_FORMAT_TORCHTITAN;
        else
            return bad_option(err, opt,
                              "expected table, json, yaml, megatron, deepspeed or torchtitan, "
                              "got '%s'", value);
        return MP_OK;
    case OPT_COUNT:
        break;
    }
    return MP_OK;
}

/* --no-dist-opt, --zero and --hsdp each imply the others' settings
 * (--zero N >= 1 turns the distributed optimizer on, --hsdp is ZeRO-3), so
 * given together they must agree, whatever their order (--zero 0 leaves
 * --dist-opt free, as search's --fix zero=0 does): the
 * one given last used to win silently ("--no-dist-opt --zero 2" ran ZeRO-2,
 * "--zero 2 --no-dist-opt" was refused). given: each option's value as
 * typed (a flag's own name), or NULL. */
static mp_status sharding_agrees(const char *const *given, mp_error *err)
{
    const char *dist = given[OPT_DIST_OPT], *zero = given[OPT_ZERO];
    bool hsdp = given[OPT_HSDP] != NULL;
    long z = zero ? strtol(zero, NULL, 10) : -1; /* checked 0..3 by apply */
    if (dist && zero && !strcmp(dist, "--no-dist-opt") && z >= 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--no-dist-opt",
                            "--zero %ld shards the optimizer states (ZeRO-1 is the distributed "
                            "optimizer): give one of them",
                            z);
    if (hsdp && zero && z != 3)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--hsdp",
                            "hybrid sharding is a form of ZeRO-3 / FSDP, and --zero %ld is not "
                            "(--hsdp alone means --zero 3)",
                            z);
    if (hsdp && dist && !strcmp(dist, "--no-dist-opt"))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--no-dist-opt",
                            "hybrid sharding (--hsdp) shards the optimizer states: give one of "
                            "them");
    return MP_OK;
}

mp_status mp_cli_config_parse(int *argc, char **argv, mp_cli_config *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    out->format = MP_FORMAT_TABLE;
    out->hw_spec = "dgx-a100";
    out->config.training.precision = MP_DTYPE_BF16;
    int kept = 1;
    bool rest = false;
    /* Each setting may be given once (--hw-set is a list): with "--gpus 8
     * --gpus 16" a script's mistake would silently cost the wrong cluster. */
    const char *given[OPT_COUNT] = {0};
    for (int i = 1; i < *argc; i++) {
        char *arg = argv[i];
        if (rest || strncmp(arg, "--", 2) != 0 || !strcmp(arg, "--")) {
            rest = rest || !strcmp(arg, "--");
            argv[kept++] = arg;
            continue;
        }
        const mp_opt *o = NULL;
        const char *value = NULL;
        int found = mp_opt_take(options, sizeof options / sizeof options[0], *argc, argv, &i, &o,
                                &value, err);
        if (found < 0)
            return MP_EINPUT;
        if (!found) {
            argv[kept++] = arg; /* the verb's own option */
            continue;
        }
        if (!o->arg)
            value = "";
        int same = o->id == OPT_NO_SP ? OPT_SP : o->id == OPT_NO_DIST_OPT ? OPT_DIST_OPT : o->id;
        if (o->id != OPT_HW_SET) {
            if (given[same])
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, o->name,
                                    "given twice ('%.40s', then '%.40s'): say it once",
                                    given[same], o->arg ? value : o->name);
            given[same] = o->arg ? value : o->name;
        }
        if (o->id != OPT_FORMAT && !out->first_option)
            out->first_option = o->name;
        if (o->id != OPT_FORMAT && o->id != OPT_PP && o->id != OPT_VPP &&
            o->id != OPT_SCHEDULE && !out->first_model_option)
            out->first_model_option = o->name;
        mp_status st = apply(out, o, value, err);
        if (st != MP_OK)
            return st;
    }
    argv[kept] = NULL;
    *argc = kept;
    return sharding_agrees(given, err);
}

void mp_cli_option_name(const char *field, char *buf, size_t size)
{
    static const struct {
        const char *field, *option;
    } map[] = {
        {"model", "--model"}, {"hw", "--hw"}, {"gpus", "--gpus"}, {"seq", "--seq"},
        {"global_batch", "--global-batch"}, {"precision", "--precision"},
        {"tokens", "--tokens"}, {"tp", "--tp"}, {"sp", "--sp"}, {"pp", "--pp"},
        {"vpp", "--vpp"}, {"cp", "--cp"}, {"cp_comm_type", "--cp-comm-type"}, {"dp", "--dp"}, {"micro_batch", "--micro-batch"},
        {"recompute", "--recompute"},
        {"recompute_modules", "--recompute-modules"}, {"dist_opt", "--dist-opt"}, {"zero", "--zero"},
        {"zero_runtime", "--zero-runtime"}, {"hsdp", "--hsdp"},
        {"dp_overlap", "--dp-overlap"}, {"tp_overlap", "--tp-overlap"},
        {"p2p_overlap", "--p2p-overlap"}, {"nccl_ub", "--nccl-ub"}, {"param_gather_sync", "--param-gather-overlap"},
        {"overlap_param_gather_with_optimizer_step", "--param-gather-with-optimizer"}, {"ddp_bucket_size", "--ddp-bucket-size"}, {"schedule", "--schedule"}, {"ep", "--ep"}, {"etp", "--etp"},
        {"dispatcher", "--dispatcher"}, {"moe_a2a_overlap", "--moe-a2a-overlap"},
        {"shared_expert_overlap", "--shared-expert-overlap"},
        {"dispatch_fp8", "--dispatch-fp8"}, {"flex_sms", "--flex-sms"},
        {"flex_backend", "--flex-backend"},
        {"cuda_graph_scope", "--cuda-graph-scope"}, {"fp8_recipe", "--fp8-recipe"},
        {"fp8_param_gather", "--fp8-param-gather"}, {"grad_reduce_bf16", "--grad-reduce-bf16"},
        {"te_cross_entropy", "--te-cross-entropy"},
        {"native_cross_entropy", "--native-cross-entropy"},
        {"optimizer_moments", "--optimizer-moments"}, {"fp8_act_cache", "--fp8-act-cache"},
        {"moe.imbalance", "--moe-imbalance"}, {"pipeline_layout", "--pipeline-layout"},
        {"first_stage_layers", "--first-stage-layers"},
        {"last_stage_layers", "--last-stage-layers"},
        {"account_for_embedding", "--account-for-embedding"},
        {"account_for_loss", "--account-for-loss"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(field, map[i].field)) {
            snprintf(buf, size, "%s", map[i].option);
            return;
        }
    snprintf(buf, size, "%s", field);
}

/* An error from loading --model/--hw that is not about a file names the option. */
static void name_option(mp_error *err, const char *option)
{
    if (!err->file[0])
        snprintf(err->field, sizeof err->field, "%s", option);
}

/* path with its folder resolved (the file itself may not exist yet) */
static bool canonical_path(const char *path, char *out, size_t size)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    mp_output_folder(path, dir, sizeof dir);
    return realpath(dir, real) &&
           snprintf(out, size, "%s/%s", real, slash ? slash + 1 : path) < (int)size;
}

bool mp_cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ca[PATH_MAX], cb[PATH_MAX];
    return canonical_path(a, ca, sizeof ca) && canonical_path(b, cb, sizeof cb) &&
           !strcmp(ca, cb);
}

static bool is_hw_preset(const char *name)
{
    for (int i = 0; i < mp_hw_preset_count(); i++)
        if (!strcmp(mp_hw_preset_name(i), name))
            return true;
    return false;
}

mp_status mp_cli_output_not_input(const char *opt, const char *out, const mp_cli_config *cc,
                                  const char *extra, mp_error *err)
{
    if (!out || !strcmp(out, "-"))
        return MP_OK;
    char config_json[PATH_MAX];
    const char *model = cc ? cc->model_spec : NULL;
    const char *inputs[4] = {model, cc ? cc->hw_spec : NULL, extra, NULL};
    if (model && snprintf(config_json, sizeof config_json, "%s/config.json", model) <
                     (int)sizeof config_json)
        inputs[3] = config_json;
    for (int i = 0; i < 4; i++) {
        struct stat st;
        /* only an existing regular file is an input; a preset's name wins
         * over a file of that name (core/io_model.c, io_hw.c) */
        if (!inputs[i] || stat(inputs[i], &st) != 0 || !S_ISREG(st.st_mode) ||
            (!strchr(inputs[i], '/') && (mp_model_preset(inputs[i]) || is_hw_preset(inputs[i]))))
            continue;
        if (mp_cli_same_file(out, inputs[i]))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt,
                                "%.200s is an input of this run: writing it would replace it "
                                "(give another name)", out);
    }
    return MP_OK;
}

mp_status mp_cli_apply_hw_sets(const mp_cli_config *cc, mp_hw *hw, mp_error *err)
{
    mp_status st = MP_OK;
    for (int i = 0; i < cc->n_hw_sets; i++) {
        char key[128];
        const char *eq = strchr(cc->hw_sets[i], '=');
        size_t klen = (size_t)(eq - cc->hw_sets[i]);
        if (klen >= sizeof key)
            klen = sizeof key - 1;
        memcpy(key, cc->hw_sets[i], klen);
        key[klen] = '\0';
        st = mp_hw_set_field(hw, key, eq + 1, err);
        if (st != MP_OK)
            break;
    }
    if (st == MP_OK)
        st = mp_hw_finish(hw, err);
    if (st != MP_OK) {
        char field[sizeof err->field];
        snprintf(field, sizeof field, "--hw-set %.100s", err->field);
        snprintf(err->field, sizeof err->field, "%s", field);
    }
    return st;
}

static mp_status load_hw(mp_cli_config *cc, mp_error *err)
{
    mp_status st = mp_hw_load(cc->hw_spec, &cc->config.hw, err);
    if (st != MP_OK) {
        name_option(err, "--hw");
        return st;
    }
    return mp_cli_apply_hw_sets(cc, &cc->config.hw, err);
}

void mp_cli_error_as_option(mp_error *err)
{
    if (err->code != MP_EINPUT || err->file[0])
        return;
    char opt[64];
    mp_cli_option_name(err->field, opt, sizeof opt);
    snprintf(err->field, sizeof err->field, "%s", opt);
}

void mp_cli_error_default_batch(const mp_cli_config *cc, mp_error *err)
{
    if (!err || err->code != MP_EINPUT || err->file[0] || (cc->set & MP_SET_GLOBAL_BATCH) ||
        (strcmp(err->field, "global_batch") && strcmp(err->field, "--global-batch")))
        return;
    const mp_config *c = &cc->config;
    char whose[160];
    if (cc->published_global_batch > 0 &&
        cc->published_global_batch == c->training.global_batch)
        snprintf(whose, sizeof whose, "%s's published %lld", c->model.name,
                 (long long)c->training.global_batch);
    else if (cc->published_global_batch > 0)
        snprintf(whose, sizeof whose, "%lld, %s's published %lld rounded up",
                 (long long)c->training.global_batch, c->model.name,
                 (long long)cc->published_global_batch);
    else
        snprintf(whose, sizeof whose, "megaplan's default %lld",
                 (long long)c->training.global_batch);
    /* "256 is not a multiple of ..." reads on after the batch named */
    char num[24], msg[sizeof err->msg + 256];
    snprintf(num, sizeof num, "%lld ", (long long)c->training.global_batch);
    bool leads = !strncmp(err->msg, num, strlen(num));
    snprintf(msg, sizeof msg, "the global batch (%s; --global-batch not given)%s%s", whose,
             leads ? " " : ": ", leads ? err->msg + strlen(num) : err->msg);
    size_t n = strlen(msg);
    n = n < sizeof err->msg ? n : sizeof err->msg - 1;
    memcpy(err->msg, msg, n);
    err->msg[n] = '\0';
    err->field[0] = '\0';
}

mp_status mp_cli_config_finish(mp_cli_config *cc, mp_error *err)
{
    mp_config *c = &cc->config;
    if (!cc->have_model)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--model",
                            "required: a preset (see megaplan models), a model YAML file or a "
                            "HuggingFace config.json");
    mp_status st = mp_model_load(cc->model_spec, &c->model, err);
    if (st != MP_OK) {
        name_option(err, "--model");
        return st;
    }
    if (cc->set & MP_SET_MOE_IMBALANCE) {
        if (!mp_model_is_moe(&c->model))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--moe-imbalance",
                                "%s has no experts", c->model.name);
        c->model.moe.imbalance = cc->moe_imbalance;
        if ((st = mp_model_finish(&c->model, err)) != MP_OK) {
            name_option(err, "--moe-imbalance");
            return st;
        }
    }
    if (!cc->hw_spec)
        cc->hw_spec = "dgx-a100";
    if ((st = load_hw(cc, err)) != MP_OK)
        return st;
    if (!cc->have_gpus)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--gpus", "required: how many GPUs");

    mp_parallel *p = &c->parallel;
    mp_training *t = &c->training;
    if (!(cc->set & MP_SET_TP))
        p->tp = 1;
    if (!(cc->set & MP_SET_PP))
        p->pp = 1;
    if (!(cc->set & MP_SET_PIPELINE_LAYOUT))
        p->pipeline_layout[0] = '\0';
    if (!(cc->set & MP_SET_STAGE_LAYERS)) {
        p->first_stage_layers = p->last_stage_layers = 0;
        p->account_for_embedding = p->account_for_loss = false;
    }
    if (!(cc->set & MP_SET_VPP))
        p->vpp = 1;
    if ((cc->set & MP_SET_PIPELINE_LAYOUT) && !(cc->set & MP_SET_VPP)) {
        /* as Megatron: the layout's stages over pp are the virtual stages
         * (not with pp 1: "--pp 1 --pipeline-layout 'E|L'" was refused as
         * "--vpp: virtual stages (vpp=2) need pipeline parallelism", naming
         * an option not given; the layout's own check names it) */
        int64_t n = mp_layout_count_stages(p->pipeline_layout);
        if (n > 0 && n % p->pp == 0 && (p->pp > 1 || n == 1)) {
            p->vpp = n / p->pp;
            cc->set |= MP_SET_VPP;
        }
    }
    if (!(cc->set & MP_SET_CP))
        p->cp = 1;
    if (!(cc->set & MP_SET_DP)) {
        int64_t tpc = p->tp * p->pp; /* each at most 2^24: fits */
        if (__builtin_mul_overflow(tpc, p->cp, &tpc) || t->gpus % tpc)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--gpus",
                                "%lld GPUs is not a multiple of tp*pp*cp = %lld*%lld*%lld",
                                (long long)t->gpus, (long long)p->tp, (long long)p->pp,
                                (long long)p->cp);
        p->dp = t->gpus / tpc;
    }
    if (!(cc->set & MP_SET_MICRO_BATCH))
        p->micro_batch = 1;
    if (!(cc->set & MP_SET_SP))
        p->sp = false;
    if (!(cc->set & MP_SET_RECOMPUTE))
        p->recompute = MP_RECOMPUTE_NONE;
    if (p->recompute_modules && p->recompute != MP_RECOMPUTE_SELECTIVE)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--recompute-modules",
                            "needs --recompute selective (got --recompute %s): the modules "
                            "are what selective recompute re-runs",
                            mp_recompute_name(p->recompute));
    if (!(cc->set & MP_SET_DIST_OPT))
        p->dist_opt = false;
    if (!(cc->set & MP_SET_ZERO))
        p->zero = 0;
    if (!(cc->set & MP_SET_HSDP))
        p->hsdp = false;
    if (!(cc->set & MP_SET_ZERO_RUNTIME))
        p->zero_runtime = MP_ZRT_AUTO;
    if (!(cc->set & MP_SET_DP_OVERLAP))
        p->dp_overlap = p->dist_opt;
    if (!(cc->set & MP_SET_TP_OVERLAP))
        p->tp_overlap = false;
    if (!(cc->set & MP_SET_SCHEDULE))
        p->schedule = mp_default_schedule(p);
    if (!(cc->set & MP_SET_SEQ))
        t->seq = c->model.seq;
    if (!(cc->set & MP_SET_PRECISION))
        t->precision = MP_DTYPE_BF16;
    if (!(cc->set & MP_SET_FP8_RECIPE))
        t->fp8_recipe = MP_FP8_DELAYED; /* Megatron-Core's --fp8-recipe default */
    else if (t->precision != MP_DTYPE_FP8 && !cc->fp8_in_set)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fp8-recipe",
                            "applies to --precision fp8 only (precision is %s)",
                            mp_dtype_name(t->precision));
    if (!(cc->set & MP_SET_FP8_PARAM_GATHER))
        t->fp8_param_gather = false;
    if (!(cc->set & MP_SET_GRAD_REDUCE_BF16))
        t->grad_reduce_bf16 = false;
    if (!(cc->set & MP_SET_TOKENS))
        t->tokens = 0;
    cc->published_global_batch = mp_model_preset_global_batch(c->model.name);
    if (!(cc->set & MP_SET_GLOBAL_BATCH)) {
        int64_t target = cc->published_global_batch ? cc->published_global_batch : 512;
        int64_t unit = p->micro_batch * p->dp; /* 2^20 * 2^24: fits */
        if (p->vpp > 1 && __builtin_mul_overflow(unit, p->pp, &unit))
            unit = INT64_MAX;
        if (unit > (1LL << 30))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--global-batch",
                                "no default: micro_batch*dp = %lld is absurdly large",
                                (long long)unit);
        t->global_batch = (target + unit - 1) / unit * unit;
    }
    return MP_OK;
}

mp_status mp_cli_check_hsdp_domain(const mp_cli_config *cc, bool by_fix, mp_error *err)
{
    const mp_parallel *p = &cc->config.parallel;
    int64_t gpus = cc->config.training.gpus, dom = cc->config.hw.scale_up.gpus_per_domain;
    if (!(cc->set & MP_SET_HSDP) || !p->hsdp || dom < 1 || gpus > dom)
        return MP_OK;
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, by_fix ? "--fix" : "--hsdp",
                        "%shybrid sharding shards within a scale-up domain and replicates "
                        "across domains, and %lld GPUs are at most one domain of %s (%lld): "
                        "nothing to replicate (--zero 3 shards over them all)",
                        by_fix ? "hsdp=on: " : "", (long long)gpus, cc->config.hw.name,
                        (long long)dom);
}

mp_status mp_cli_config_check(const mp_cli_config *cc, mp_error *err)
{
    if (mp_cli_check_hsdp_domain(cc, false, err) != MP_OK)
        return MP_EINPUT;
    mp_status st = mp_config_check(&cc->config, err);
    /* a model file's own moe.imbalance, refused for this ep: at its line */
    if (st != MP_OK && !strcmp(err->field, "moe.imbalance") &&
        !(cc->set & MP_SET_MOE_IMBALANCE) && !mp_model_preset(cc->model_spec) &&
        mp_is_file(cc->model_spec))
        mp_error_point_file(err, cc->model_spec);
    if (st != MP_OK && !err->file[0]) {
        char opt[sizeof err->field];
        mp_cli_option_name(err->field, opt, sizeof opt);
        snprintf(err->field, sizeof err->field, "%s", opt);
        mp_cli_error_default_batch(cc, err);
    }
    return st;
}

/* Appends one formatted line; once the buffer is full the rest is dropped. */
__attribute__((format(printf, 4, 5))) static void append_line(char *buf, size_t size,
                                                              size_t *n, const char *fmt, ...)
{
    if (*n + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *n, size - *n, fmt, ap);
    va_end(ap);
    if (w < 0)
        return;
    *n = *n + (size_t)w < size ? *n + (size_t)w : size - 1;
    if (*n + 1 < size) {
        buf[(*n)++] = '\n';
        buf[*n] = '\0';
    }
}

void mp_cli_config_describe_defaults(const mp_cli_config *cc, char *buf, size_t size)
{
    const mp_config *c = &cc->config;
    const mp_parallel *p = &c->parallel;
    const mp_training *t = &c->training;
    size_t n = 0;
    if (!size)
        return;
    buf[0] = '\0';
#define LINE(...) append_line(buf, size, &n, __VA_ARGS__)
    uint32_t s = cc->set;
    if (!(s & MP_SET_HW))
        LINE("hw=%s (megaplan's default profile)", c->hw.name);
    if (!(s & MP_SET_TP))
        LINE("tp=1");
    if (!(s & MP_SET_PP))
        LINE("pp=1");
    if (!(s & MP_SET_VPP))
        LINE("vpp=1");
    if (!(s & MP_SET_CP))
        LINE("cp=1");
    if (!(s & MP_SET_DP))
        LINE("dp=%lld (gpus/(tp*pp*cp))", (long long)p->dp);
    if (!(s & MP_SET_MICRO_BATCH))
        LINE("micro_batch=1");
    if (!(s & MP_SET_SP))
        LINE("sp=off (Megatron: --sequence-parallel not given)");
    if (!(s & MP_SET_RECOMPUTE))
        LINE("recompute=none");
    if (!(s & MP_SET_DIST_OPT))
        LINE("dist_opt=off (Megatron: --use-distributed-optimizer not given)");
    if (!(s & MP_SET_DP_OVERLAP))
        LINE("dp_overlap=%s (on with the distributed optimizer)", p->dp_overlap ? "on" : "off");
    if (!(s & MP_SET_TP_OVERLAP))
        LINE("tp_overlap=off");
    if (!(s & MP_SET_SCHEDULE))
        LINE("schedule=%s", mp_schedule_name(p->schedule));
    if (!(s & MP_SET_SEQ))
        LINE("seq=%lld (the model's)", (long long)t->seq);
    if (!(s & MP_SET_GLOBAL_BATCH)) {
        if (cc->published_global_batch && cc->published_global_batch == t->global_batch)
            LINE("global_batch=%lld (%s's published batch)", (long long)t->global_batch,
                 c->model.name);
        else if (cc->published_global_batch)
            LINE("global_batch=%lld (%s's published %lld, rounded up to a multiple of "
                 "micro_batch*dp%s)",
                 (long long)t->global_batch, c->model.name,
                 (long long)cc->published_global_batch, p->vpp > 1 ? "*pp" : "");
        else
            LINE("global_batch=%lld (512 sequences, rounded up to a multiple of micro_batch*dp%s)",
                 (long long)t->global_batch, p->vpp > 1 ? "*pp" : "");
    }
    if (!(s & MP_SET_PRECISION))
        LINE("precision=bf16");
#undef LINE
    if (n > 0 && buf[n - 1] == '\n')
        buf[n - 1] = '\0';
}

static const mp_opt listing_rows[] = {
    {"--format", NULL, "F", 0, 0, "table (default), json or yaml", "table json yaml"},
};

const mp_opt_group mp_cli_listing_opts = MP_OPT_GROUP("options", listing_rows);

int mp_cli_listing_args(int argc, char **argv, const mp_verb_doc *doc, const char *what,
                        const char **format, const char **spec)
{
    const char *verb = doc->name;
    *format = *spec = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            mp_verb_doc_write(doc, stdout);
            return 0;
        }
        const mp_opt *o;
        const char *v = NULL;
        mp_error err;
        int found = mp_opt_take(listing_rows, 1, argc, argv, &i, &o, &v, &err);
        if (found) {
            if (*format) {
                /* the two values, as every other option's "given twice" */
                fprintf(stderr, "megaplan %s: --format: given twice ('%.40s', then '%.40s'): "
                        "say it once\n", verb, *format, found > 0 && v ? v : "");
                return 2;
            }
            if (found < 0 || (strcmp(v, "table") && strcmp(v, "json") && strcmp(v, "yaml"))) {
                fprintf(stderr, "megaplan %s: --format: expected table, json or yaml\n", verb);
                return 2;
            }
            *format = v;
        } else if (a[0] == '-' && a[1]) {
            char msg[160];
            mp_opt_unknown(doc, NULL, a, msg, sizeof msg);
            fprintf(stderr, "megaplan %s: %.80s: %s\n", verb, a, msg);
            return 2;
        } else if (*spec) {
            fprintf(stderr, "megaplan %s: %.80s: only one %s at a time\n", verb, a, what);
            return 2;
        } else {
            *spec = a;
        }
    }
    return -1;
}

mp_status mp_cli_leftover(const mp_verb_doc *doc, const mp_verb_doc *also, const char *arg,
                          mp_error *err)
{
    char msg[160];
    if (arg[0] == '-' && arg[1])
        mp_opt_unknown(doc, also, arg, msg, sizeof msg);
    else
        snprintf(msg, sizeof msg, "unexpected argument (see megaplan %s --help)", doc->name);
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, arg, "%s", msg);
}

void mp_cli_write_data(const cJSON *data, mp_format format, mp_buf *out)
{
    if (format == MP_FORMAT_JSON) {
        mp_json_write(data, true, out);
        mp_buf_puts(out, "\n");
    } else {
        mp_json_write_yaml(data, 0, out);
    }
}

bool mp_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return true;
    return false;
}

int mp_cli_emit(const char *verb, mp_buf *b)
{
    if (b->oom) {
        mp_buf_free(b);
        fprintf(stderr, "megaplan %s: out of memory\n", verb);
        return 1;
    }
    fputs(b->data ? b->data : "", stdout);
    mp_buf_free(b);
    return 0;
}
