#include "core/config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/layout.h"
#include "core/tables.h"

static const char *const recompute_names[] = {"none", "selective", "full"};
static const char *const schedule_names[] = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1",
                                             "zb-v", "dualpipev", "dualpipe"};

const char *mp_recompute_name(mp_recompute r)
{
    return (unsigned)r < MP_RECOMPUTE_COUNT ? recompute_names[r] : "?";
}

const char *mp_schedule_name(mp_schedule_kind s)
{
    return (unsigned)s < MP_SCHED_COUNT ? schedule_names[s] : "?";
}

bool mp_schedule_is_v(mp_schedule_kind s)
{
    return s == MP_SCHED_ZBV || s == MP_SCHED_DUALPIPEV;
}

int64_t mp_schedule_chunks(mp_schedule_kind s, int64_t vpp)
{
    if (mp_schedule_is_v(s) || s == MP_SCHED_DUALPIPE)
        return 2;
    return s == MP_SCHED_INTERLEAVED && vpp > 1 ? vpp : 1;
}

int64_t mp_schedule_n_stages(mp_schedule_kind s, int64_t p, int64_t vpp)
{
    return s == MP_SCHED_DUALPIPE ? p : p * mp_schedule_chunks(s, vpp);
}

int64_t mp_schedule_stage(mp_schedule_kind s, int64_t p, int64_t r, int64_t c)
{
    if (s == MP_SCHED_DUALPIPE)
        return c == 0 ? r : p - 1 - r;
    if (mp_schedule_is_v(s))
        return c == 0 ? r : 2 * p - 1 - r;
    return c * p + r;
}

bool mp_schedule_splits_backward(mp_schedule_kind s)
{
    return s == MP_SCHED_ZBH1 || mp_schedule_is_v(s) || s == MP_SCHED_DUALPIPE;
}

mp_schedule_kind mp_schedule_run_as(mp_schedule_kind s, int64_t pp)
{
    return s == MP_SCHED_ZBH1 && pp == 1 ? MP_SCHED_1F1B : s;
}

int mp_recompute_parse(const char *s)
{
    for (int i = 0; i < MP_RECOMPUTE_COUNT; i++)
        if (s && !strcmp(s, recompute_names[i]))
            return i;
    return -1;
}

int mp_schedule_parse(const char *s)
{
    for (int i = 0; i < MP_SCHED_COUNT; i++)
        if (s && !strcmp(s, schedule_names[i]))
            return i;
    return -1;
}

static const char *recompute_name_i(int i)
{
    return mp_recompute_name((mp_recompute)i);
}
static const char *schedule_name_i(int i)
{
    return mp_schedule_name((mp_schedule_kind)i);
}
static const char *dtype_name_i(int i)
{
    return mp_dtype_name((mp_dtype)i);
}

const char *mp_fp8_recipe_name(mp_fp8_recipe r)
{
    static const char *const names[] = {"delayed", "tensorwise", "blockwise", "mxfp8"};
    return (unsigned)r < MP_FP8_RECIPE_COUNT ? names[r] : "?";
}
static const char *fp8_recipe_name_i(int i)
{
    return mp_fp8_recipe_name((mp_fp8_recipe)i);
}

const char *mp_fp8_act_cache_name(mp_fp8_act_cache a)
{
    static const char *const names[] = {"off", "swiglu_input", "deepseek"};
    return (unsigned)a < MP_F8AC_COUNT ? names[a] : "?";
}
static const char *fp8_act_cache_name_i(int i)
{
    return mp_fp8_act_cache_name((mp_fp8_act_cache)i);
}

const char *mp_stack_name(mp_stack s)
{
    static const char *const names[] = {"megatron-lm", "megatron-deepspeed-bigscience",
                                        "megatron-deepspeed-2021", "megatron-lm-2021"};
    return (unsigned)s < MP_STACK_COUNT ? names[s] : "?";
}
static const char *stack_name_i(int i)
{
    return mp_stack_name((mp_stack)i);
}

const char *mp_attn_backend_name(mp_attn_backend b)
{
    static const char *const names[] = {"auto", "flash", "fused"};
    return (unsigned)b < MP_ATTN_COUNT ? names[b] : "?";
}
static const char *attn_backend_name_i(int i)
{
    return mp_attn_backend_name((mp_attn_backend)i);
}

mp_attn_backend mp_attention_backend_of(const mp_config *c)
{
    if (c->training.attention_backend != MP_ATTN_AUTO)
        return c->training.attention_backend;
    return c->hw.attention_efficiency_fused > 0.0 ? MP_ATTN_FUSED : MP_ATTN_FLASH;
}

#define MAX_DEGREE (1 << 24) /* no cluster has more GPUs than this */

static const mp_field training_fields[] = {
    {.path = "gpus", .type = MP_FT_INT, .offset = offsetof(mp_training, gpus), .min = 1,
     .max = MAX_DEGREE, .required = true},
    {.path = "seq", .type = MP_FT_INT, .offset = offsetof(mp_training, seq), .min = 0,
     .max = 1 << 22},
    {.path = "global_batch", .type = MP_FT_INT, .offset = offsetof(mp_training, global_batch),
     .min = 1, .max = 1 << 30, .required = true},
    {.path = "precision", .type = MP_FT_ENUM, .offset = offsetof(mp_training, precision),
     .name_of = dtype_name_i, .n_names = MP_DTYPE_COUNT},
    {.path = "fp8_recipe", .type = MP_FT_ENUM, .offset = offsetof(mp_training, fp8_recipe),
     .name_of = fp8_recipe_name_i, .n_names = MP_FP8_RECIPE_COUNT},
    {.path = "tokens", .type = MP_FT_DOUBLE, .offset = offsetof(mp_training, tokens), .min = 0,
     .max = 1e18},
    {.path = "grad_reduce_bf16", .type = MP_FT_BOOL,
     .offset = offsetof(mp_training, grad_reduce_bf16)},
    {.path = "fp8_param_gather", .type = MP_FT_BOOL,
     .offset = offsetof(mp_training, fp8_param_gather)},
    {.path = "low_precision_optimizer", .type = MP_FT_BOOL,
     .offset = offsetof(mp_training, low_precision_optimizer)},
    {.path = "optimizer_moments", .type = MP_FT_ENUM,
     .offset = offsetof(mp_training, optimizer_moments), .name_of = dtype_name_i,
     .n_names = MP_DTYPE_COUNT},
    {.path = "fp8_act_cache", .type = MP_FT_ENUM,
     .offset = offsetof(mp_training, fp8_act_cache), .name_of = fp8_act_cache_name_i,
     .n_names = MP_F8AC_COUNT},
    {.path = "te_cross_entropy", .type = MP_FT_BOOL,
     .offset = offsetof(mp_training, te_cross_entropy)},
    {.path = "native_cross_entropy", .type = MP_FT_BOOL,
     .offset = offsetof(mp_training, native_cross_entropy)},
    {.path = "stack", .type = MP_FT_ENUM, .offset = offsetof(mp_training, stack),
     .name_of = stack_name_i, .n_names = MP_STACK_COUNT},
    {.path = "p2p_scatter", .type = MP_FT_BOOL, .offset = offsetof(mp_training, p2p_scatter)},
    {.path = "attention_backend", .type = MP_FT_ENUM,
     .offset = offsetof(mp_training, attention_backend), .name_of = attn_backend_name_i,
     .n_names = MP_ATTN_COUNT},
};

#define P_INT(key, lo, hi)                                                                   \
    {.path = #key, .type = MP_FT_INT, .offset = offsetof(mp_parallel, key), .min = lo,       \
     .max = hi}
#define P_BOOL(key) {.path = #key, .type = MP_FT_BOOL, .offset = offsetof(mp_parallel, key)}

static const char *dispatcher_name_i(int i)
{
    return mp_dispatcher_name((mp_dispatcher)i);
}

const char *mp_flex_backend_setting_name(mp_flex_backend b)
{
    static const char *const names[] = {"auto", "deepep", "hybridep"};
    return (unsigned)b < MP_FLEX_BACKEND_COUNT ? names[b] : "?";
}
static const char *flex_backend_name_i(int i)
{
    return mp_flex_backend_setting_name((mp_flex_backend)i);
}

const char *mp_zero_runtime_name(mp_zero_runtime r)
{
    static const char *const names[] = {"auto", "deepspeed", "fsdp2"};
    return (unsigned)r < MP_ZRT_COUNT ? names[r] : "?";
}
static const char *zero_runtime_name_i(int i)
{
    return mp_zero_runtime_name((mp_zero_runtime)i);
}

const char *mp_cp_comm_name(mp_cp_comm k)
{
    static const char *const names[] = {"p2p", "all_gather", "a2a", "a2a+p2p"};
    return (unsigned)k < MP_CP_COMM_COUNT ? names[k] : "?";
}
static const char *cp_comm_name_i(int i)
{
    return mp_cp_comm_name((mp_cp_comm)i);
}

static const mp_field parallel_fields[] = {
    P_INT(tp, 1, MAX_DEGREE),
    P_BOOL(sp),
    P_INT(pp, 1, MAX_DEGREE),
    P_INT(vpp, 1, 1 << 16),
    P_INT(cp, 1, MAX_DEGREE),
    P_INT(dp, 1, MAX_DEGREE),
    P_INT(micro_batch, 1, 1 << 20),
    {.path = "recompute", .type = MP_FT_ENUM, .offset = offsetof(mp_parallel, recompute),
     .name_of = recompute_name_i, .n_names = MP_RECOMPUTE_COUNT},
    P_BOOL(dist_opt),
    P_INT(zero, 0, 3),
    {.path = "zero_runtime", .type = MP_FT_ENUM, .offset = offsetof(mp_parallel, zero_runtime),
     .name_of = zero_runtime_name_i, .n_names = MP_ZRT_COUNT},
    P_BOOL(hsdp),
    P_BOOL(dp_overlap),
    P_BOOL(tp_overlap),
    P_BOOL(p2p_overlap),
    P_BOOL(defer_embedding_wgrad),
    P_INT(wgrad_deferral_limit, 0, 1 << 30),
    P_BOOL(nccl_ub),
    P_BOOL(param_gather_sync),
    P_BOOL(fsdp_microbatch_sync),
    P_BOOL(overlap_param_gather_with_optimizer_step),
    {.path = "schedule", .type = MP_FT_ENUM, .offset = offsetof(mp_parallel, schedule),
     .name_of = schedule_name_i, .n_names = MP_SCHED_COUNT},
    P_INT(ep, 0, MAX_DEGREE),
    P_INT(etp, 0, MAX_DEGREE),
    P_INT(ddp_bucket_size, 0, MP_DDP_BUCKET_MAX),
    P_INT(flex_sms, 0, MP_FLEX_SMS_MAX),
    {.path = "flex_backend", .type = MP_FT_ENUM, .offset = offsetof(mp_parallel, flex_backend),
     .name_of = flex_backend_name_i, .n_names = MP_FLEX_BACKEND_COUNT},
    {.path = "dispatcher", .type = MP_FT_ENUM, .offset = offsetof(mp_parallel, dispatcher),
     .name_of = dispatcher_name_i, .n_names = MP_DISPATCH_COUNT},
    {.path = "pipeline_layout", .type = MP_FT_STRING,
     .offset = offsetof(mp_parallel, pipeline_layout), .size = MP_LAYOUT_CHARS, .min = 1},
    P_INT(first_stage_layers, 0, MP_MAX_LAYERS),
    P_INT(last_stage_layers, 0, MP_MAX_LAYERS),
    P_BOOL(account_for_embedding),
    P_BOOL(account_for_loss),
    P_BOOL(moe_a2a_overlap),
    P_BOOL(dispatch_fp8),
    P_BOOL(shared_expert_overlap),
    {.path = "cp_comm_type", .type = MP_FT_ENUM, .offset = offsetof(mp_parallel, cp_comm_type),
     .name_of = cp_comm_name_i, .n_names = MP_CP_COMM_COUNT},
};

const char *mp_dispatcher_name(mp_dispatcher d)
{
    static const char *const names[] = {"alltoall", "allgather", "flex"};
    return (unsigned)d < MP_DISPATCH_COUNT ? names[d] : "?";
}

int64_t mp_parallel_ep(const mp_parallel *p)
{
    return p->ep > 0 ? p->ep : 1;
}

int64_t mp_parallel_etp(const mp_parallel *p)
{
    return p->etp > 0 ? p->etp : p->tp;
}

int64_t mp_parallel_edp(const mp_parallel *p)
{
    int64_t g = mp_parallel_ep(p) * mp_parallel_etp(p);
    return g > 0 ? p->tp * p->cp * p->dp / g : 1;
}

const mp_field *mp_training_field_table(size_t *n)
{
    *n = sizeof training_fields / sizeof training_fields[0];
    return training_fields;
}

const mp_field *mp_parallel_field_table(size_t *n)
{
    *n = sizeof parallel_fields / sizeof parallel_fields[0];
    return parallel_fields;
}

int64_t mp_config_microbatches(const mp_config *c)
{
    int64_t per = 0;
    if (c->parallel.micro_batch <= 0 || c->parallel.dp <= 0 ||
        __builtin_mul_overflow(c->parallel.micro_batch, c->parallel.dp, &per) || per <= 0)
        return 0;
    return c->training.global_batch / per;
}

#define FAIL(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

/* An explicit layout: Megatron's grammar and rules (core/layout.c), for
 * the schedules that run Megatron's stage order. */
static mp_status layout_check(const mp_config *c, mp_error *err)
{
    const mp_parallel *p = &c->parallel;
    if (c->model.arch == MP_ARCH_T5)
        return FAIL("pipeline_layout", "t5: Megatron's layouts have no encoder layers (it "
                                       "refuses a layout for an encoder-decoder model)");
    if (p->account_for_embedding || p->account_for_loss)
        return FAIL(p->account_for_embedding ? "account_for_embedding" : "account_for_loss",
                    "cannot be given with pipeline_layout (Megatron: the layout says every "
                    "stage's layers)");
    if (mp_schedule_is_v(p->schedule) || p->schedule == MP_SCHED_DUALPIPE)
        return FAIL("pipeline_layout",
                    "lists the stages in Megatron's interleaved order; %s places them "
                    "otherwise (give stages in a plan file instead)",
                    mp_schedule_name(p->schedule));
    mp_layout *l = malloc(sizeof *l);
    if (!l)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, "pipeline_layout", "out of memory");
    mp_status st = mp_layout_parse(p->pipeline_layout, p->pp, p->vpp, c->model.layers,
                                   mp_layout_model_mtp_layers(&c->model), l, err);
    free(l);
    return st;
}

/* cp_comm_type: Megatron-Core's --cp-comm-type with Transformer Engine's
 * rules (attn_forward_func_with_cp, TE 2.9) */
mp_status mp_config_cp_comm_check(const mp_config *c, bool heads, mp_error *err)
{
    const mp_parallel *p = &c->parallel;
    const mp_model *m = &c->model;
    if (p->cp_comm_type == MP_CP_P2P)
        return MP_OK;
    if (p->cp_comm_type == MP_CP_A2A_P2P)
        return FAIL("cp_comm_type", "a2a+p2p (hierarchical context parallelism, Megatron's "
                                    "--hierarchical-context-parallel-sizes) is not modelled: "
                                    "give p2p, all_gather or a2a");
    if (p->cp < 2)
        return FAIL("cp_comm_type", "%s is how context parallelism exchanges K/V: it needs cp > 1",
                    mp_cp_comm_name(p->cp_comm_type));
    if (mp_model_is_mla(m))
        return FAIL("cp_comm_type", "%s is not modelled for latent attention (MLA): give p2p",
                    mp_cp_comm_name(p->cp_comm_type));
    if (heads && p->cp_comm_type == MP_CP_A2A) {
        /* a2a splits the rank's heads over the CP group (TE: q, k and v each
         * reshaped to [cp, heads/cp] before all_to_all_single) */
        int64_t tc = p->tp * p->cp;
        if (m->heads % tc || m->kv_heads % tc)
            return FAIL("cp_comm_type", "a2a gives each CP rank heads/(tp*cp) heads: %lld "
                                        "query and %lld key/value heads do not split over "
                                        "tp*cp = %lld",
                        (long long)m->heads, (long long)m->kv_heads, (long long)tc);
    }
    return MP_OK;
}

bool mp_tokens_valid(double t)
{
    if (t == 0)
        return true;
    if (!(t >= 1) || !(t <= 1e18))
        return false;
    double w = nearbyint(t);
    return fabs(t - w) <= 1e-9 * w;
}

/* mp_config_check, and with stages_given (a plan that lists its stages,
 * mp_config_check_with_stages) without the refusals of a split derived from
 * the layer count: the plan's ranges are the split */
static mp_status check_config(const mp_config *c, bool stages_given, mp_error *err)
{
    const mp_model *m = &c->model;
    const mp_training *t = &c->training;
    const mp_parallel *p = &c->parallel;
    size_t n;
    const mp_field *tab = mp_parallel_field_table(&n);
    mp_status st = mp_fields_check(tab, n, p, "", err);
    if (st != MP_OK)
        return st;
    tab = mp_training_field_table(&n);
    if ((st = mp_fields_check(tab, n, t, "", err)) != MP_OK)
        return st;
    if (m->heads < 1 || m->kv_heads < 1 || m->layers < 1 || m->seq < 1)
        return FAIL("model", "model not finished (heads, kv_heads, layers, seq must be set)");
    /* 0 is "not asked"; a fraction of a token is no training run */
    if (!mp_tokens_valid(t->tokens))
        return FAIL("tokens", "must be 0 (not asked) or a whole number of tokens, at least 1 "
                              "(got %.17g)",
                    t->tokens);
    if ((st = mp_config_check_moe(c, err)) != MP_OK)
        return st;
    if ((st = mp_config_check_recompute(c, err)) != MP_OK)
        return st;
    if ((st = mp_config_check_cuda_graph(c, err)) != MP_OK)
        return st;
    if ((st = mp_config_check_precision(c, err)) != MP_OK)
        return st;
    /* Megatron-Core refuses the precision-aware optimizer without its
     * distributed optimizer (megatron/core/optimizer/__init__.py) */
    if (t->optimizer_moments != MP_DTYPE_FP32 && (!p->dist_opt || p->zero >= 2))
        return FAIL("optimizer_moments", "%s moments are Megatron-Core's precision-aware "
                                         "optimizer, which runs with its distributed optimizer "
                                         "only (dist_opt: true, zero 0 or 1)",
                    mp_dtype_name(t->optimizer_moments));

    if (m->heads % p->tp)
        return FAIL("tp", "tp=%lld does not divide the %lld attention heads",
                    (long long)p->tp, (long long)m->heads);
    if (m->kv_heads % p->tp)
        return FAIL("tp", "tp=%lld does not divide the %lld key/value heads (query groups)",
                    (long long)p->tp, (long long)m->kv_heads);
    /* Megatron-LM splits the MLP's width over tp (the column- and row-parallel
     * layers' divide(), megatron/core/tensor_parallel/layers.py) and stops at
     * start-up where it does not divide; only blocks with a dense MLP have it */
    if (m->ffn_hidden % p->tp && mp_model_moe_blocks(m) < mp_model_blocks(m))
        return FAIL("tp", "tp=%lld does not divide the FFN size %lld", (long long)p->tp,
                    (long long)m->ffn_hidden);

    int64_t tpc, tpcd;
    if (__builtin_mul_overflow(p->tp, p->pp, &tpc) || __builtin_mul_overflow(tpc, p->cp, &tpc) ||
        __builtin_mul_overflow(tpc, p->dp, &tpcd))
        return FAIL("gpus", "tp*pp*cp*dp overflows");
    if (t->gpus % tpc)
        return FAIL("gpus", "%lld GPUs is not a multiple of tp*pp*cp = %lld*%lld*%lld = %lld",
                    (long long)t->gpus, (long long)p->tp, (long long)p->pp, (long long)p->cp,
                    (long long)tpc);
    if (tpcd != t->gpus)
        return FAIL("dp", "tp*pp*cp*dp = %lld*%lld*%lld*%lld = %lld, but there are %lld GPUs",
                    (long long)p->tp, (long long)p->pp, (long long)p->cp, (long long)p->dp,
                    (long long)tpcd, (long long)t->gpus);

    int64_t bd;
    if (__builtin_mul_overflow(p->micro_batch, p->dp, &bd))
        return FAIL("micro_batch", "micro_batch*dp overflows");
    if (t->global_batch % bd)
        return FAIL("global_batch",
                    "%lld is not a multiple of micro_batch*dp = %lld*%lld = %lld",
                    (long long)t->global_batch, (long long)p->micro_batch, (long long)p->dp,
                    (long long)bd);

    if (p->zero >= 1 && !p->dist_opt)
        return FAIL("zero", "zero=%lld shards the optimizer states too: it needs dist_opt on",
                    (long long)p->zero);
    if (p->zero_runtime != MP_ZRT_AUTO && p->zero < 2)
        return FAIL("zero_runtime", "%s names the runtime of ZeRO-2/3: it needs zero >= 2 "
                                    "(got %lld)",
                    mp_zero_runtime_name(p->zero_runtime), (long long)p->zero);
    if (p->zero_runtime == MP_ZRT_FSDP2 && p->zero != 3)
        return FAIL("zero_runtime", "fsdp2 shards the parameters too: it needs zero=3 (got %lld)",
                    (long long)p->zero);
    if (p->fsdp_microbatch_sync && !(p->zero_runtime == MP_ZRT_FSDP2 && p->pp > 1))
        return FAIL("fsdp_microbatch_sync", "is FSDP2's under a pipeline: it needs zero_runtime "
                                            "fsdp2 and pp > 1 (without a pipeline ZeRO-3 syncs "
                                            "every micro-batch already)");
    /* FSDP2 runs beside torch.distributed.pipelining's stages; DeepSpeed's
     * pipeline engine refuses ZeRO-2/3, and auto may mean DeepSpeed */
    if (p->zero >= 2 && p->pp > 1 && p->zero_runtime != MP_ZRT_FSDP2)
        return FAIL("zero", "zero=%lld shards the gradients%s, which runs without pipeline "
                            "parallelism (DeepSpeed refuses ZeRO-2/3 with its pipeline engine; "
                            "zero=3 with zero_runtime fsdp2 runs with pp): got pp=%lld",
                    (long long)p->zero, p->zero == 3 ? " and parameters" : "", (long long)p->pp);
    if (p->hsdp && p->pp > 1)
        return FAIL("hsdp", "hybrid sharding with pipeline parallelism is not modelled (got "
                            "pp=%lld)",
                    (long long)p->pp);
    if (p->hsdp && p->zero != 3)
        return FAIL("hsdp", "hybrid sharding is a form of ZeRO-3 / FSDP: it needs zero=3 (got %lld)",
                    (long long)p->zero);
    if (p->zero >= 2 && p->dp * p->cp < 2)
        return FAIL("zero", "zero=%lld shards over the data-parallel ranks: it needs dp*cp >= 2",
                    (long long)p->zero);

    int64_t stages = p->pp * p->vpp; /* both bounded: no overflow */
    if (p->vpp > 1 && p->pp < 2)
        return FAIL("vpp", "virtual stages (vpp=%lld) need pipeline parallelism (pp >= 2)",
                    (long long)p->vpp);
    if (p->first_stage_layers > 0 || p->last_stage_layers > 0) {
        st = mp_flag_split_check(c, err);
        if (st != MP_OK)
            return st;
    } else if (p->pipeline_layout[0]) {
        st = layout_check(c, err);
        if (st != MP_OK)
            return st;
    } else if (p->account_for_embedding || p->account_for_loss) {
        st = mp_account_split_check(c, err);
        if (st != MP_OK)
            return st;
    } else if (stages_given) {
        /* the plan's own ranges (mp_plan_check checks them): any layer count */
    } else if (p->vpp > 1 && m->layers % stages && (m->layers + 2) % stages &&
               mp_schedule_is_v(p->schedule) && m->arch != MP_ARCH_T5) {
        /* Megatron's first/last-stage flags split rank by rank in its
         * interleaved order, which a V does not run: its own default split
         * (mp_v_stage_blocks) needs only a block for every stage */
        if (stages > m->layers)
            return FAIL("vpp",
                        "the %lld layers are fewer than the pp*vpp = %lld*%lld = %lld stages "
                        "of %s: every stage needs a block (give stages in a plan file)",
                        (long long)m->layers, (long long)p->pp, (long long)p->vpp,
                        (long long)stages, mp_schedule_name(p->schedule));
    } else if (p->vpp > 1 && stages == m->layers + 2)
        /* Megatron's split with the embedding and the loss counted as a
         * layer each gives the first and last virtual stage none; the
         * default split keeps a block in every stage, a layout does not */
        return FAIL("vpp",
                    "pp*vpp = %lld*%lld = %lld stages for %lld layers leaves the first and last "
                    "stage only the embedding and the loss: set account_for_embedding and "
                    "account_for_loss (Megatron's --account-for-embedding-in-pipeline-split "
                    "and --account-for-loss-in-pipeline-split; command line "
                    "--account-for-embedding --account-for-loss), or give pipeline_layout",
                    (long long)p->pp, (long long)p->vpp, (long long)stages,
                    (long long)m->layers);
    else if (p->vpp > 1 && !mp_stage_split_ok(m->layers, p->pp, p->vpp) &&
             (m->layers + 1) % stages == 0 && m->arch != MP_ARCH_T5)
        return FAIL("vpp",
                    "the %lld layers do not split into pp*vpp = %lld*%lld = %lld stages as "
                    "Megatron does by default, but the layers + 1 do: set account_for_loss "
                    "(Megatron's --account-for-loss-in-pipeline-split; command line "
                    "--account-for-loss) or account_for_embedding, or give pipeline_layout",
                    (long long)m->layers, (long long)p->pp, (long long)p->vpp, (long long)stages);
    else if (!mp_stage_split_ok(m->layers, p->pp, p->vpp))
        return FAIL(p->vpp > 1 ? "vpp" : "pp",
                    p->vpp > 1 ? "the %lld layers do not split into pp*vpp = %lld*%lld = %lld "
                                 "stages as Megatron does without a layout (neither the layers "
                                 "nor the layers + 2 are a multiple, and its first/last-stage "
                                 "flags need every rank's layers a multiple of vpp); give "
                                 "pipeline_layout"
                               : "the %lld layers cannot be split over pp*vpp = %lld*%lld = %lld "
                                 "stages",
                    (long long)m->layers, (long long)p->pp, (long long)p->vpp, (long long)stages);

    if (p->schedule == MP_SCHED_INTERLEAVED && p->vpp < 2)
        return FAIL("schedule", "interleaved-1f1b needs vpp >= 2 (got vpp=%lld)",
                    (long long)p->vpp);
    if (mp_schedule_is_v(p->schedule) && (p->vpp != 2 || p->pp < 2))
        return FAIL("schedule", "%s places two chunks per rank in a V: it needs vpp=2 and "
                                "pp >= 2 (got vpp=%lld, pp=%lld)",
                    mp_schedule_name(p->schedule), (long long)p->vpp, (long long)p->pp);
    if (p->vpp > 1 && p->schedule != MP_SCHED_INTERLEAVED && !mp_schedule_is_v(p->schedule))
        return FAIL("schedule", "vpp=%lld needs schedule interleaved-1f1b, zb-v or dualpipev "
                                "(got %s)",
                    (long long)p->vpp, mp_schedule_name(p->schedule));
    int64_t mbs = mp_config_microbatches(c);
    if (p->schedule == MP_SCHED_DUALPIPE && (p->pp < 2 || p->pp % 2))
        return FAIL("pp", "dualpipe pairs rank r with rank pp-1-r: it needs an even pp >= 2 "
                          "(got pp=%lld)",
                    (long long)p->pp);
    if (p->schedule == MP_SCHED_DUALPIPE && (mbs < 2 * p->pp || mbs % 2))
        return FAIL("global_batch",
                    "dualpipe feeds half the micro-batches from each end: it needs an even "
                    "number of them, at least 2*pp (got %lld, pp=%lld)",
                    (long long)mbs, (long long)p->pp);
    if (p->schedule == MP_SCHED_DUALPIPEV && mbs < 2 * p->pp)
        return FAIL("global_batch",
                    "dualpipev needs at least 2*pp micro-batches (%lld < %lld)", (long long)mbs,
                    (long long)(2 * p->pp));
    if (p->schedule == MP_SCHED_INTERLEAVED && mbs % p->pp)
        return FAIL("global_batch",
                    "interleaved-1f1b needs the number of micro-batches (%lld) to be a "
                    "multiple of pp (%lld)",
                    (long long)mbs, (long long)p->pp);

    int64_t seq = t->seq ? t->seq : m->seq;
    if (seq < 1)
        return FAIL("seq", "must be positive");
    if (m->position == MP_POS_LEARNED && seq > m->seq)
        return FAIL("seq", "%lld is longer than the model's %lld learned positions",
                    (long long)seq, (long long)m->seq);
    if (p->cp > 1) {
        if (m->arch == MP_ARCH_T5 || m->arch == MP_ARCH_BERT)
            return FAIL("cp", "context parallelism is for GPT/LLaMA decoders (Megatron-LM); "
                              "this model is %s", mp_arch_name(m->arch));
        if (seq % (2 * p->cp))
            return FAIL("cp", "seq %lld does not split into 2*cp = %lld equal chunks",
                        (long long)seq, (long long)(2 * p->cp));
        /* Megatron-LM's context parallelism is TransformerEngine's fused
         * attention passing K/V chunks around the ring inside the kernel
         * (with the log-sum-exp correction of each partial result); the
         * unfused softmax attention has no such path. */
        /* with a sliding window the ring still passes every chunk's K and V
         * (cp - 1 steps, as exec runs it) while the attention computes only
         * the band (planner/compute.c window_share): the traffic is the
         * causal ring's, hidden under less work (docs/cost-model.md §12a) */
        if (!c->hw.flash_attention)
            return FAIL("cp", "context parallelism needs a fused (flash) attention kernel "
                              "(Megatron-LM runs it in TransformerEngine); %s has "
                              "flash_attention: false",
                        c->hw.name);
    }
    if ((st = mp_config_cp_comm_check(c, true, err)) != MP_OK)
        return st;
    if (c->training.attention_backend == MP_ATTN_FUSED && !(c->hw.attention_efficiency_fused > 0.0))
        return FAIL("attention_backend", "fused needs the profile's attention_efficiency_fused "
                                         "(cuDNN's fused attention rate); %s gives none",
                    c->hw.name);
    if (p->sp) {
        if (p->tp < 2)
            return FAIL("sp", "sequence parallelism needs tp > 1");
        if ((seq / p->cp) % p->tp)
            return FAIL("sp", "sequence parallelism needs seq/cp (%lld) divisible by tp (%lld)",
                        (long long)(seq / p->cp), (long long)p->tp);
    }
    if (p->tp_overlap && (!p->sp || p->tp < 2))
        return FAIL("tp_overlap", "TP communication overlap needs tp > 1 and sp on "
                                  "(Megatron --tp-comm-overlap)");
    if (p->wgrad_deferral_limit > 0 && !p->defer_embedding_wgrad)
        return FAIL("wgrad_deferral_limit", "a wgrad deferral limit needs "
                                            "defer_embedding_wgrad on (Megatron-Core)");
    if (p->schedule == MP_SCHED_ZBH1 && p->vpp > 1)
        return FAIL("schedule", "zb-h1 has one chunk per rank (vpp must be 1)");
    /* Megatron's own checks (megatron/training/arguments.py), in its order */
    if (p->overlap_param_gather_with_optimizer_step) {
        const char *why = NULL;
        if (t->stack != MP_STACK_MEGATRON_LM)
            why = "is a Megatron-LM (Megatron-Core) option: training.stack must be megatron-lm";
        else if (!p->dist_opt || p->zero >= 2)
            why = "needs the distributed optimizer (dist_opt, zero <= 1)";
        else if (!p->dp_overlap || p->param_gather_sync)
            why = "needs the overlapped parameter gather (dp_overlap on, param_gather_sync off: "
                  "Megatron's --overlap-param-gather)";
        else if (p->schedule != MP_SCHED_INTERLEAVED || p->vpp < 2 || p->pp < 2)
            why = "needs the interleaved pipeline schedule (pp > 1, vpp > 1)";
        if (why)
            return FAIL("overlap_param_gather_with_optimizer_step",
                        "--overlap-param-gather-with-optimizer-step %s", why);
    }

    /* Megatron-LM reads --ddp-bucket-size as an int (arguments.py) and
     * hands it to Megatron-Core's DDP; another stack has no such bucket */
    if (p->ddp_bucket_size > 0 && t->stack != MP_STACK_MEGATRON_LM)
        return FAIL("ddp_bucket_size", "--ddp-bucket-size is a Megatron-Core DDP option: "
                                       "training.stack must be megatron-lm");
    /* defer_embedding_wgrad_compute came with Megatron-Core (2024): the 2021
     * stacks run the output layer's wgrad in its backward; the cost model
     * deferred it on any stack (megatron-lm-2021 and megatron-deepspeed-2021
     * plans were estimated with a flush those codes do not have) */
    if (p->defer_embedding_wgrad && t->stack != MP_STACK_MEGATRON_LM)
        return FAIL("defer_embedding_wgrad", "--defer-embedding-wgrad-compute is a Megatron-Core "
                                             "option: training.stack must be megatron-lm (%s "
                                             "has none)",
                    mp_stack_name(t->stack));

    if (t->precision == MP_DTYPE_TF32)
        return FAIL("precision", "training precision must be bf16, fp16, fp32 or fp8 (got %s)",
                    mp_dtype_name(t->precision));
    return MP_OK;
}

void mp_parallel_defaults(mp_parallel *p)
{
    memset(p, 0, sizeof *p);
    p->tp = p->pp = p->vpp = p->cp = 1;
    p->micro_batch = 1;
    p->recompute = MP_RECOMPUTE_NONE;
    p->schedule = MP_SCHED_1F1B;
}

mp_schedule_kind mp_default_schedule(const mp_parallel *p)
{
    return p->vpp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B;
}

/* A stage's work in block units (mp_uneven_split): its blocks, plus one for
 * the embedding on the first, one for the final norm, head and loss on the
 * last, and two for each MTP module there (a block and another pass of the
 * head). */
static int64_t edge_units(int64_t n, int64_t k, int64_t mtp)
{
    return (k == 0 ? 1 : 0) + (k == n - 1 ? 1 + 2 * mtp : 0);
}

/* The stage units of split u, their maximum and their sum of squares (in
 * O(1): the middle stages come in two kinds). */
static void split_measure(const mp_uneven *u, int64_t n, int64_t mtp, int64_t *max,
                          int64_t *sq)
{
    int64_t f = u->first + edge_units(n, 0, mtp), l = u->last + edge_units(n, n - 1, mtp);
    int64_t heavy = n - 2 - u->lighter, hi = u->middle, lo = u->middle - 1;
    *max = f > l ? f : l;
    *sq = f * f + l * l;
    if (heavy > 0) {
        *max = hi > *max ? hi : *max;
        *sq += heavy * hi * hi;
    }
    if (u->lighter > 0) {
        *max = lo > *max ? lo : *max;
        *sq += u->lighter * lo * lo;
    }
}

/* The best of Megatron's first/last-stage forms whose slowest stage is at
 * most cap units: the middle stages equal, the first and the last >= 1 each
 * (transformer_config.py's uneven-PP checks). Only a middle of at most cap
 * blocks, and one leaving the ends at most 2 cap - 2 - 2 mtp between them,
 * can stay within cap, which keeps the search to a few middles. */
static bool best_flag_form(int64_t L, int64_t n, int64_t mtp, int64_t cap, mp_uneven *best)
{
    int64_t best_max = -1, best_sq = 0;
    int64_t mids = n - 2, lo = 0, hi = 0;
    if (mids > 0) {
        int64_t need = L - (2 * cap - 2 - 2 * mtp); /* mids * mid >= need */
        lo = need > mids ? (need + mids - 1) / mids : 1;
        hi = (L - 2) / mids < cap ? (L - 2) / mids : cap;
    }
    for (int64_t mid = lo; mid <= hi; mid++) {
        int64_t rest = L - mids * mid; /* first + last */
        if (rest < 2)
            break;
        /* first + 1 against last + 1 + 2 mtp: try around the balance */
        int64_t f0 = (rest + 2 * mtp + 1) / 2;
        f0 = f0 < 1 ? 1 : f0 > rest - 1 ? rest - 1 : f0;
        for (int64_t first = f0 - 1; first <= f0 + 1; first++) {
            if (first < 1 || first > rest - 1)
                continue;
            mp_uneven u = {first, rest - first, mid, 0};
            int64_t mx, sq;
            split_measure(&u, n, mtp, &mx, &sq);
            if (mx > cap)
                continue;
            /* least slowest stage, then most even, then the heavier first */
            if (best_max < 0 || mx < best_max || (mx == best_max && sq < best_sq) ||
                (mx == best_max && sq == best_sq && first > best->first)) {
                *best = u;
                best_max = mx;
                best_sq = sq;
            }
        }
    }
    return best_max >= 0;
}

/* Blocks a stage at level T holds: T less its edge units, at least one. */
static int64_t fill(int64_t T, int64_t e)
{
    return T - e > 1 ? T - e : 1;
}

/* The most even split into stages of >= 1 block: the least level T whose
 * fill holds every block, then one block fewer for as many stages at that
 * level as it holds too many: the first, the last, then the middle ones from
 * the end (the earlier stages keep the extra ones). */
static void water_fill(int64_t L, int64_t n, int64_t mtp, mp_uneven *u)
{
    int64_t eF = 1, eL = 1 + 2 * mtp, T = L / n > 1 ? L / n : 1, sum = 0;
    for (;; T++) { /* fill(T) <= n T: the least level is at least L / n */
        sum = fill(T, eF) + (n - 2) * fill(T, 0) + fill(T, eL);
        if (sum >= L)
            break;
    }
    int64_t x = sum - L;
    u->first = fill(T, eF);
    u->last = fill(T, eL);
    u->middle = fill(T, 0);
    u->lighter = 0;
    if (x > 0 && u->first > 1 && u->first + eF == T) {
        u->first--;
        x--;
    }
    if (x > 0 && u->last > 1 && u->last + eL == T) {
        u->last--;
        x--;
    }
    u->lighter = x; /* < n - 2: T is the least level (mp_uneven_split) */
}

int64_t mp_uneven_stage_blocks(const mp_uneven *u, int64_t n, int64_t k)
{
    if (k == 0)
        return u->first;
    if (k == n - 1)
        return u->last;
    return u->middle - (k >= n - 1 - u->lighter ? 1 : 0);
}

bool mp_uneven_split(int64_t L, int64_t n, int64_t mtp, mp_uneven *out)
{
    if (n < 2 || n > L)
        return false;
    mtp = mtp > 0 ? mtp : 0;
    mp_uneven flag, even;
    int64_t emax, esq;
    water_fill(L, n, mtp, &even);
    split_measure(&even, n, mtp, &emax, &esq);
    if (best_flag_form(L, n, mtp, emax, &flag)) {
        *out = flag; /* Megatron's flags do as well: no layout needed */
        return true;
    }
    *out = even;
    return true;
}

bool mp_vpp_flag_split(int64_t L, int64_t pp, int64_t vpp, int64_t mtp, mp_uneven *out)
{
    if (pp < 2 || vpp < 2 || L < 2 * vpp || L % vpp)
        return false; /* every rank's count is a multiple of vpp, so is their sum */
    mtp = mtp > 0 ? mtp : 0;
    int64_t mids = pp - 2, best_max = -1, best_sq = 0;
    /* the middle ranks' count: a multiple of vpp, at least vpp where there are
     * middle ranks (transformer_config.py: no middle stage without layers),
     * none where there are none */
    int64_t m_lo = mids > 0 ? vpp : 0, m_hi = mids > 0 ? (L - 2 * vpp) / mids : 0;
    for (int64_t m = m_lo; m <= m_hi; m += mids > 0 ? vpp : 1) {
        int64_t rest = L - mids * m; /* first + last, a multiple of vpp */
        if (rest < 2 * vpp)
            break;
        /* first + 1 against last + 1 + 2 mtp: the multiples of vpp around the balance */
        int64_t f0 = (rest + 2 * mtp) / 2 / vpp * vpp;
        for (int64_t f = f0 - vpp; f <= f0 + 2 * vpp; f += vpp) {
            if (f < vpp || f > rest - vpp)
                continue;
            mp_uneven u = {f, rest - f, m, 0};
            int64_t a = f + 1, b = rest - f + 1 + 2 * mtp;
            int64_t mx = a > b ? a : b, sq = a * a + b * b + mids * m * m;
            mx = mids > 0 && m > mx ? m : mx;
            if (best_max < 0 || mx < best_max || (mx == best_max && sq < best_sq) ||
                (mx == best_max && sq == best_sq && f > out->first)) {
                *out = u;
                best_max = mx;
                best_sq = sq;
            }
        }
    }
    return best_max >= 0;
}

int64_t mp_flag_stage_blocks(int64_t L, int64_t pp, int64_t vpp, int64_t F, int64_t Lz,
                             int64_t k)
{
    int64_t mids = pp - (F > 0) - (Lz > 0), rest = L - (F > 0 ? F : 0) - (Lz > 0 ? Lz : 0);
    int64_t r = k % pp, per = mids > 0 ? rest / mids : 0;
    if (r == 0 && F > 0)
        per = F;
    else if (r == pp - 1 && Lz > 0)
        per = Lz;
    return vpp > 1 ? per / vpp : per;
}

mp_status mp_flag_split_check(const mp_config *c, mp_error *err)
{
    const mp_parallel *p = &c->parallel;
    int64_t F = p->first_stage_layers, Lz = p->last_stage_layers, v = p->vpp;
    int64_t L = c->model.layers;
    const char *f = F > 0 ? "first_stage_layers" : "last_stage_layers";
    if (p->pipeline_layout[0])
        return FAIL(f, "cannot be given with pipeline_layout (Megatron: the layout says every "
                       "stage's layers)");
    if (p->account_for_embedding || p->account_for_loss)
        return FAIL(f, "cannot be given with %s (Megatron refuses the first/last-stage layers "
                       "with the account-for split)",
                    p->account_for_embedding ? "account_for_embedding" : "account_for_loss");
    if (c->model.arch == MP_ARCH_T5)
        return FAIL(f, "t5 splits at its split rank (Megatron's first/last-stage flags are the "
                       "decoder's)");
    if (p->pp < 2)
        return FAIL(f, "needs pipeline parallelism (pp >= 2)");
    if (mp_schedule_is_v(p->schedule) || p->schedule == MP_SCHED_DUALPIPE)
        return FAIL(f, "splits in Megatron's stage order; %s places the stages otherwise (give "
                       "stages in a plan file instead)",
                    mp_schedule_name(p->schedule));
    /* transformer_config.py, in its order */
    if (F > 0 && v > 1 && F % v)
        return FAIL("first_stage_layers",
                    "%lld layers on the first rank must be a multiple of vpp=%lld (Megatron)",
                    (long long)F, (long long)v);
    if (Lz > 0 && v > 1 && Lz % v)
        return FAIL("last_stage_layers",
                    "%lld layers on the last rank must be a multiple of vpp=%lld (Megatron)",
                    (long long)Lz, (long long)v);
    int64_t rest = L - F - Lz, mids = p->pp - (F > 0) - (Lz > 0);
    if (rest < 0)
        return FAIL(f, "the first and last ranks' %lld + %lld layers are more than the model's "
                       "%lld",
                    (long long)F, (long long)Lz, (long long)L);
    /* the ranks without a count: middle ones when both are given; with one
     * given they include the other end ("1 middle ranks" at pp 2, where the
     * one left is the last) */
    char others[48], given[96];
    if (mids == 1)
        snprintf(others, sizeof others, "the %s rank", F > 0 && Lz > 0 ? "middle" : "other");
    else
        snprintf(others, sizeof others, F > 0 && Lz > 0 ? "the %lld middle ranks"
                                                        : "the other %lld ranks",
                 (long long)mids);
    if (F > 0 && Lz > 0)
        snprintf(given, sizeof given, "the first and last ranks' %lld + %lld layers",
                 (long long)F, (long long)Lz);
    else
        snprintf(given, sizeof given, "the %s rank's %lld layers", F > 0 ? "first" : "last",
                 (long long)(F > 0 ? F : Lz));
    if (rest == 0 && mids > 0)
        return FAIL(f, "%s leave none of the model's %lld for %s (Megatron: every rank holds "
                       "layers)",
                    given, (long long)L, others);
    if (rest > 0 && mids == 0)
        return FAIL(f, "%s leave %lld of the model's %lld with no rank to hold them (pp=%lld has "
                       "no middle ranks)",
                    given, (long long)rest, (long long)L, (long long)p->pp);
    if (mids && rest % mids)
        return FAIL(f, "the %lld layers left do not divide among %s (Megatron)", (long long)rest,
                    others);
    if (mids && v > 1 && (rest / mids) % v)
        return FAIL(f, "%lld layers on %s%s must be a multiple of vpp=%lld (Megatron)",
                    (long long)(rest / mids), mids > 1 ? "each of " : "", others, (long long)v);
    return MP_OK;
}

const char *mp_parallel_split_field(const mp_parallel *p)
{
    return p->pipeline_layout[0]        ? "pipeline_layout"
           : p->first_stage_layers > 0  ? "first_stage_layers"
           : p->last_stage_layers > 0   ? "last_stage_layers"
           : p->account_for_embedding   ? "account_for_embedding"
           : p->account_for_loss        ? "account_for_loss"
                                        : NULL;
}

int64_t mp_account_stage_blocks(int64_t L, int64_t n, bool e, bool l, int64_t k)
{
    int64_t units = L + (e ? 1 : 0) + (l ? 1 : 0);
    if (n < 1 || units % n)
        return -1;
    return units / n - (k == 0 && e ? 1 : 0) - (k == n - 1 && l ? 1 : 0);
}

mp_status mp_account_split_check(const mp_config *c, mp_error *err)
{
    const mp_parallel *p = &c->parallel;
    bool e = p->account_for_embedding, l = p->account_for_loss;
    const char *f = e ? "account_for_embedding" : "account_for_loss";
    int64_t L = c->model.layers, v = p->vpp > 1 ? p->vpp : 1;
    if (p->pipeline_layout[0])
        return FAIL(f, "cannot be given with pipeline_layout (Megatron: the layout says every "
                       "stage's layers)");
    if (p->first_stage_layers > 0 || p->last_stage_layers > 0)
        return FAIL(f, "cannot be given with %s (Megatron refuses the account-for split with "
                       "the first/last-stage layers)",
                    p->first_stage_layers > 0 ? "first_stage_layers" : "last_stage_layers");
    if (c->model.arch == MP_ARCH_T5)
        return FAIL(f, "t5 splits at its split rank (Megatron's account-for split is the "
                       "decoder's)");
    /* transformer_config.py: L + e + l over the ranks, then each rank's by vpp */
    int64_t units = L + (e ? 1 : 0) + (l ? 1 : 0);
    if (units % p->pp)
        return FAIL(f, "the %lld layers%s%s = %lld do not divide among pp=%lld ranks (Megatron)",
                    (long long)L, e ? " + the embedding" : "", l ? " + the loss" : "",
                    (long long)units, (long long)p->pp);
    if (v > 1 && (units / p->pp) % v)
        return FAIL(f, "%lld layers (the embedding and loss counted) on each rank must be a "
                       "multiple of vpp=%lld (Megatron)",
                    (long long)(units / p->pp), (long long)v);
    return MP_OK;
}

mp_status mp_config_check(const mp_config *c, mp_error *err)
{
    return check_config(c, false, err);
}

mp_status mp_config_check_with_stages(const mp_config *c, bool stages_given, mp_error *err)
{
    return check_config(c, stages_given, err);
}

int64_t mp_v_rank_blocks(int64_t L, int64_t pp, int64_t mtp, int64_t r)
{
    /* rank 0 holds the first stage and the last (mp_schedule_stage), so the
     * embedding, the head and loss and the MTP modules: e units more, as
     * mp_uneven_split counts them. The least level T of units with every
     * rank at T, rank 0 at T - e, is ceil((L + e) / pp); the X blocks over
     * L then come off rank 0 first (its extra units are the estimate's
     * roughest), then off the last ranks. Where T - e is under 2 rank 0
     * keeps a block in each of its two stages and the others share the rest
     * the same way. */
    int64_t e = 2 + 2 * (mtp > 0 ? mtp : 0), T = (L + e + pp - 1) / pp, X, b0;
    if (pp < 2 || r < 0 || r >= pp || L < 2 * pp)
        return -1;
    if (T - e >= 2) {
        X = pp * T - (L + e);
        b0 = T - e;
        if (X > 0 && b0 > 2) {
            b0--;
            X--;
        }
    } else {
        b0 = 2;
        T = (L - 2 + pp - 2) / (pp - 1);
        X = (pp - 1) * T - (L - 2);
    }
    if (r == 0)
        return b0;
    return T - (r >= pp - X ? 1 : 0);
}

bool mp_v_split_default(const mp_model *m, mp_schedule_kind s, int64_t pp, int64_t vpp)
{
    int64_t L = m->layers, n = 2 * pp;
    return mp_schedule_is_v(s) && vpp == 2 && pp >= 2 && m->arch != MP_ARCH_T5 && L % n &&
           (L + 2) % n && n <= L;
}

int64_t mp_v_stage_blocks(int64_t L, int64_t pp, int64_t mtp, int64_t k)
{
    if (k < 0 || k >= 2 * pp)
        return -1;
    /* stage k is chunk 0 of rank k, or chunk 1 of rank 2pp-1-k; chunk 0
     * takes the odd block (on rank 0 the embedding's stage, lighter than the
     * head's) */
    int64_t r = k < pp ? k : 2 * pp - 1 - k, b = mp_v_rank_blocks(L, pp, mtp, r);
    if (b < 0)
        return -1;
    return k < pp ? (b + 1) / 2 : b / 2;
}

bool mp_stage_split_ok(int64_t L, int64_t pp, int64_t vpp)
{
    int64_t n = pp * vpp;
    if (n < 1 || n > L)
        return false;
    /* mp_vpp_flag_split has a split exactly when every rank's count can be
     * a multiple of vpp, i.e. vpp divides L (n <= L leaves each rank at
     * least vpp): the test search makes for every candidate, without the
     * search for the best one */
    return L % n == 0 || (n > 1 && (L + 2) % n == 0) || (vpp == 1 && n >= 2) ||
           (pp >= 2 && vpp >= 2 && L % vpp == 0);
}

int64_t mp_vpp_flag_blocks_before(const mp_uneven *u, int64_t pp, int64_t vpp, int64_t k)
{
    /* virtual stage j is chunk j / pp of rank j % pp: a vpp-th of its rank's
     * count; k / pp whole rounds of the ranks, then ranks 0..k%pp-1 of the
     * next (never the last rank) */
    int64_t r = k % pp;
    int64_t before = (k / pp) * ((u->first + u->last + (pp - 2) * u->middle) / vpp);
    if (r > 0)
        before += u->first / vpp + (r - 1) * (u->middle / vpp);
    return before;
}

int64_t mp_blocks_before_stage(int64_t L, int64_t n, int64_t vpp, int64_t mtp, int64_t k)
{
    mp_uneven u;
    if (k <= 0)
        return 0;
    if (k >= n)
        return L;
    if (L % n == 0)
        return (k * L) / n;
    if (vpp > 1 && (L + 2) % n == 0)
        return k * ((L + 2) / n) - 1;
    if (vpp > 1 && n % vpp == 0 && mp_vpp_flag_split(L, n / vpp, vpp, mtp, &u)) {
        return mp_vpp_flag_blocks_before(&u, n / vpp, vpp, k);
    }
    if (vpp > 1 || !mp_uneven_split(L, n, mtp, &u))
        return (k * L) / n;
    int64_t before = u.first, mids = k - 1 < n - 2 ? k - 1 : n - 2;
    /* the middle stages 1..k-1: `middle` each, one fewer for the last `lighter` */
    int64_t light_from = n - 1 - u.lighter; /* the first lighter middle stage */
    before += mids * u.middle;
    if (k > light_from)
        before -= k - light_from;
    return before;
}
