/* refdata_moe.c — the CSV files of tests/data/moe as megaplan configurations (see
 * refdata_moe.h). Every assumption a row needs is here and in the note. */
#include "tools/refdata_moe.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hw.h"
#include "core/model.h"

static const char *const moe_files[] = {"moe/nemo_moe_2025.csv", "moe/megatron_bridge_moe.csv"};
static const char *const ab_files[] = {"moe/megatron_bridge_ep_overlap_ab.csv"};

static const char note_ab[] =
    "Qwen3-30B-A3B on 16 DGX-H100 GPUs (two nodes), BF16, t1 p1 ep16, micro-batch 1, global "
    "batch 1024, sequence 4096, force-balanced routing (moe.imbalance 1); each pair toggles only "
    "the EP all-to-all overlap (the merged three-phase 1F1B pass), the all-to-all dispatcher "
    "without CUDA graphs, and the flex dispatcher (the runs' HybridEP, on 32 SMs as the "
    "performance scripts set it, assumed) with Transformer Engine graphs of moe_router and "
    "moe_preprocess; the step is the page's steady-state mean; otherwise the settings of the "
    "mixture-of-experts rows above (the file's notes give what is assumed). Role fit: no "
    "constant is fitted to these rows yet (tools/fit_profile.py reads no mixture-of-experts "
    "set).";

static const char note_moe[] =
    "each row's own profile, precision, FP8 recipe and degrees; force-balanced, dropless "
    "routing (moe.imbalance 1, as NVIDIA's pages state); each row's dispatcher (all-to-all, or "
    "flex: DeepEP/HybridEP, one copy per remote node and GPU reached, its kernels on the "
    "recipe's SMs where the file gives them, flex:N) and EP all-to-all and "
    "shared-expert overlaps as its recipe sets them (the file's columns; absent: all-to-all, "
    "no overlap); expert "
    "tensor parallelism 1 (Megatron-Bridge's MoE recipes); distributed optimizer with "
    "overlapped gradient reduce, SP and TP overlap where tp > 1 (but where the file's "
    "tp_comm_overlap column turns it off), the parameter all-gather overlapped with the "
    "forward but where the file's param_gather_sync column says the recipe turned "
    "overlap_param_gather off (then run after the optimizer step, exposed), the interleaved "
    "rows' pipeline transfers overlapped where the file's p2p_overlap column says so (the "
    "recipes' overlap_p2p_comm), the first chunk's parameter all-gather launched in the "
    "optimizer step where its param_gather_with_optimizer column says so, no recompute; the "
    "recipe's explicit pipeline layout where the file gives one; bf16 gradient reduction "
    "and FP8 parameters where a file's columns say the recipe used them; the loss as "
    "Transformer Engine's fused cross entropy where the file's te_cross_entropy column says so "
    "(every Megatron-Bridge row: its performance scripts set it); the recipe's CUDA-graph "
    "scopes (Transformer Engine) where the file gives them; FSDP rows as ZeRO-3 over the data-parallel ranks, the NeMo AutoModel rows with their recipe's settings (the file's "
    "columns): PyTorch FSDP2 (zero_runtime fsdp2: with pp each chunk's weights gathered once "
    "per pipeline flush and kept, fp32 gradient accumulators reduce-scattered once, or, where "
    "the file's fsdp_microbatch_sync column says the stage module was no FSDP unit, gathered "
    "and reduce-scattered every micro-batch; without pp ZeRO-3's gathers per micro-batch), full "
    "activation checkpointing, fp32 gradient reduction, bf16 Adam states without an fp32 "
    "master copy, DeepEP (flex), the benchmark's FakeBalancedGate (fake_balanced_gate: each "
    "token to top-k consecutive experts, no router GEMM; DeepEP's copies one per rank and "
    "node those experts sit on), AutoModel's split of DeepSeek-V3's layers as an explicit "
    "layout; a recipe that runs the pipeline GA times per step (GA > 1 with pp) is compared "
    "per flush, its batch and measured step divided by GA. Not in the dense error bands; these "
    "rows alone give the mixture-of-experts bands (moe_error_band, \"Error bands\"). Rows megaplan cannot express are listed below the table "
    "with the reason.";

/* Qwen3-30B-A3B, which has no preset: Qwen Team 2025, "Qwen3 Technical
 * Report", Table 2 (48 layers, 32 query / 4 KV heads, 128 experts, 8
 * active); hidden 2048, head_dim 128, expert size 768 from the released
 * config.json. Built from the 235B preset, which shares everything else
 * (vocabulary, SwiGLU, RMSNorm, RoPE, untied embeddings). */
static int qwen3_30b_a3b(mp_model *m)
{
    const mp_model *base = mp_model_preset("qwen3-235b-a22b");
    if (!base)
        return -1;
    *m = *base;
    snprintf(m->name, sizeof m->name, "qwen3-30b-a3b");
    m->layers = 48;
    m->hidden = 2048;
    m->heads = 32;
    m->kv_heads = 4;
    m->head_dim = 128;
    m->ffn_hidden = 6144;
    m->moe.experts = 128;
    m->moe.top_k = 8;
    m->moe.expert_ffn = 768;
    mp_error err;
    return mp_model_finish(m, &err) == MP_OK ? 0 : -1;
}

/* A number cell by column name; empty or absent counts as dflt when the
 * column is optional (dflt >= 0), else it is an error with its place. */
static mp_status field(const refdata_table *t, int r, const char *name, double dflt, double *out,
                       mp_error *err)
{
    const char *s = refdata_table_get(t, r, name);
    if (!s || !*s) {
        if (dflt >= 0) {
            *out = dflt;
            return MP_OK;
        }
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, name, "missing");
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    while (end && isspace((unsigned char)*end))
        end++;
    if (end == s || !end || *end != '\0' || errno == ERANGE || v < 0)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, name,
                            "'%s' is not a non-negative number", s);
    *out = v;
    return MP_OK;
}

/* A 0-or-1 cell by column name; empty or absent counts as 0. */
static mp_status flag_of(const refdata_table *t, int r, const char *name, bool *out,
                         mp_error *err)
{
    double v;
    mp_status st = field(t, r, name, 0, &v, err);
    if (st != MP_OK)
        return st;
    if (v != 0 && v != 1)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, name,
                            "'%g': expected 0 or 1", v);
    *out = v > 0;
    return MP_OK;
}

static mp_status text_field(const refdata_table *t, int r, const char *name, const char **out,
                            mp_error *err)
{
    *out = refdata_table_get(t, r, name);
    if (!*out || !**out)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, name, "missing");
    return MP_OK;
}

/* precision bf16 | fp8 and the FP8 recipe (Megatron's names) */
static mp_status precision_of(const refdata_table *t, int r, mp_training *tr, mp_error *err)
{
    const char *p;
    mp_status st = text_field(t, r, "precision", &p, err);
    if (st != MP_OK)
        return st;
    if (strcmp(p, "bf16") == 0) {
        tr->precision = MP_DTYPE_BF16;
        return MP_OK;
    }
    if (strcmp(p, "fp8") != 0)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "precision",
                            "'%s': expected bf16 or fp8", p);
    tr->precision = MP_DTYPE_FP8;
    const char *rec;
    st = text_field(t, r, "fp8_recipe", &rec, err);
    if (st != MP_OK)
        return st;
    for (int k = 0; k < MP_FP8_RECIPE_COUNT; k++)
        if (strcmp(rec, mp_fp8_recipe_name((mp_fp8_recipe)k)) == 0) {
            tr->fp8_recipe = (mp_fp8_recipe)k;
            return MP_OK;
        }
    return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "fp8_recipe",
                        "'%s' is not a recipe megaplan knows", rec);
}

/* A '+'-separated list cell (a CSV cell holds no comma) parsed into a mask
 * by parse as the command line's comma-separated list; empty or absent: 0
 * and false. */
static mp_status plus_list_of(const refdata_table *t, int r, const char *column, const char *noun,
                              bool (*parse)(const char *, uint32_t *, char *, size_t),
                              uint32_t *mask, bool *given, mp_error *err)
{
    const char *s = refdata_table_get(t, r, column);
    *given = s && *s;
    if (!*given)
        return MP_OK;
    char list[128], bad[72];
    snprintf(list, sizeof list, "%s", s);
    for (char *q = list; *q; q++)
        if (*q == '+')
            *q = ',';
    if (!parse(list, mask, bad, sizeof bad))
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, column, "unknown %s '%s'",
                            noun, bad);
    return MP_OK;
}

/* recompute_modules: the recipe's Megatron-Core --recompute-modules
 * (selective recompute of those modules); cuda_graph_scope: its Transformer
 * Engine CUDA-graph scopes (Megatron-LM --cuda-graph-scope). */
static mp_status recipe_lists_of(const refdata_table *t, int r, mp_parallel *p, mp_error *err)
{
    bool given;
    mp_status st = plus_list_of(t, r, "recompute_modules", "module", mp_recompute_modules_parse,
                                &p->recompute_modules, &given, err);
    if (st != MP_OK)
        return st;
    if (given)
        p->recompute = MP_RECOMPUTE_SELECTIVE;
    return plus_list_of(t, r, "cuda_graph_scope", "scope", mp_cuda_graph_scope_parse,
                        &p->cuda_graph_scope, &given, err);
}

static void not_expressible(refdata_moe_row *w, const char *why)
{
    w->expressible = false;
    snprintf(w->reason, sizeof w->reason, "%s", why);
}

/* The FSDP recipe columns of an FSDP row (nemo_moe_2025.csv's notes say where
 * each comes from): who shards (zero_runtime), whether it keeps the weights
 * gathered from forward to backward (reshard_after_forward, refused where
 * megaplan would charge less than the run moved), the gradient reduce type, full
 * activation checkpointing, the optimizer states' type and the pipeline
 * schedule. Absent columns leave the defaults: DeepSpeed-or-torchtitan's
 * ZeRO-3, fp32 reduction, no recompute, fp32 master and moments. */
static mp_status fsdp_recipe_of(const refdata_table *t, int r, mp_config *c, refdata_moe_row *w,
                                mp_error *err)
{
    mp_parallel *p = &c->parallel;
    const char *s = refdata_table_get(t, r, "zero_runtime");
    if (s && *s) {
        int k = 0;
        while (k < MP_ZRT_COUNT && strcmp(s, mp_zero_runtime_name((mp_zero_runtime)k)))
            k++;
        if (k == MP_ZRT_COUNT)
            return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "zero_runtime",
                                "'%s': expected auto, deepspeed or fsdp2", s);
        p->zero_runtime = (mp_zero_runtime)k;
    }
    double v;
    mp_status st = field(t, r, "activation_checkpointing", 0, &v, err);
    if (st != MP_OK)
        return st;
    if (v > 0)
        p->recompute = MP_RECOMPUTE_FULL;
    s = refdata_table_get(t, r, "reduce_dtype");
    if (s && *s && strcmp(s, "fp32") && strcmp(s, "bf16"))
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "reduce_dtype",
                            "'%s': expected fp32 or bf16", s);
    if (s && !strcmp(s, "bf16"))
        c->training.grad_reduce_bf16 = true;
    s = refdata_table_get(t, r, "optimizer_states");
    if (s && *s && strcmp(s, "fp32") && strcmp(s, "bf16"))
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "optimizer_states",
                            "'%s': expected fp32 or bf16", s);
    c->training.low_precision_optimizer = s && !strcmp(s, "bf16");
    /* AutoModel's pp_schedule names (torch.distributed.pipelining's) */
    s = refdata_table_get(t, r, "pp_schedule");
    if (s && *s) {
        if (!strcmp(s, "interleaved1f1b"))
            p->schedule = MP_SCHED_INTERLEAVED;
        else if (!strcmp(s, "1f1b"))
            p->schedule = MP_SCHED_1F1B;
        else
            return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "pp_schedule",
                                "'%s': expected interleaved1f1b or 1f1b", s);
    }
    /* FSDP2 syncing every micro-batch under a pipeline (the file's
     * fsdp_microbatch_sync column, 0 or 1; absent: 0, the stage's deferred
     * sync): the stage module is not an FSDP unit */
    st = flag_of(t, r, "fsdp_microbatch_sync", &p->fsdp_microbatch_sync, err);
    if (st != MP_OK)
        return st;
    s = refdata_table_get(t, r, "reshard_after_forward");
    if (!s || !*s)
        return MP_OK;
    st = field(t, r, "reshard_after_forward", 0, &v, err);
    if (st != MP_OK)
        return st;
    /* megaplan's FSDP2: resharded after forward without pp (gathered again
     * for backward), kept through the step with pp (cost.c). A run that
     * reshards with pp would gather per micro-batch, which megaplan does not
     * charge: refused. One that keeps the weights without pp (AutoModel at
     * 8d9bfb90e, parallelize_model's reshard_after_forward default False)
     * gathers each micro-batch's weights once, or once a step where its
     * enable_fsdp_optimizations defers the backward's reshard and sync
     * (fsdp_mixin.py): megaplan's ZeRO-3 charges one more gather per
     * micro-batch than either, prefetched under the compute, so the row
     * runs with it, an upper bound on its DP traffic (the file's notes) */
    if (p->zero_runtime == MP_ZRT_FSDP2 && v > 0 && p->pp > 1)
        not_expressible(w, "reshard_after_forward with pp: megaplan's FSDP2 keeps the weights "
                           "through the step under a pipeline");
    return MP_OK;
}

/* One row: the numbers, then the model and the profile, then what the
 * library says of the configuration. */
static mp_status row_of(const refdata_table *t, int r, const char *file, refdata_moe_row *w,
                        mp_error *err)
{
    enum { GPUS, GB, MB, SEQ, TP, PP, CP, VP, EP, FSDP, MTP, TPS, STEP, GRAD16, FP8P, A2AO, SEO,
           WIN, TPO, PGS, DBS, TCE, P2P, PGO, NF };
    static const char *const names[NF] = {"gpus", "global_batch", "micro_batch", "seq", "tp",
                                          "pp", "cp", "vp", "ep", "fsdp", "mtp",
                                          "tokens_per_s_per_gpu", "step_s", "grad_reduce_bf16",
                                          "fp8_param_gather", "moe_a2a_overlap",
                                          "shared_expert_overlap", "attn_window",
                                          "tp_comm_overlap", "param_gather_sync",
                                          "ddp_bucket_size", "te_cross_entropy", "p2p_overlap",
                                          "param_gather_with_optimizer"};
    /* tp_comm_overlap: 2 when absent (read as on where tp > 1) */
    /* tokens_per_s_per_gpu: optional where the file gives the step (step_s) */
    static const double dflt[NF] = {-1, -1, -1, -1, -1, -1, 1, 1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                    2, 0, 0, 0, 0, 0};
    double v[NF];
    for (int i = 0; i < NF; i++) {
        mp_status st = field(t, r, names[i], dflt[i], &v[i], err);
        if (st != MP_OK)
            return st;
    }
    const char *model, *system;
    mp_status st = text_field(t, r, "model", &model, err);
    if (st == MP_OK)
        st = text_field(t, r, "system", &system, err);
    if (st != MP_OK)
        return st;
    memset(w, 0, sizeof *w);
    w->file = file;
    w->line = t->line[r];
    w->expressible = true;
    mp_config *c = &w->config;
    st = precision_of(t, r, &c->training, err);
    if (st != MP_OK)
        return st;
    if (v[GPUS] < 1 || v[TP] < 1 || v[PP] < 1 || v[CP] < 1)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "gpus/tp/pp/cp",
                            "must be at least 1");
    if (v[TPS] <= 0 && v[STEP] <= 0)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "tokens_per_s_per_gpu",
                            "neither it nor step_s is given above 0");
    int64_t gpus = (int64_t)v[GPUS], tp = (int64_t)v[TP], pp = (int64_t)v[PP];
    int64_t cp = (int64_t)v[CP], vp = v[VP] >= 1 ? (int64_t)v[VP] : 1;
    int64_t ep = v[EP] >= 1 ? (int64_t)v[EP] : 1;
    const char *release = refdata_table_get(t, r, "release");
    if (!release)
        release = refdata_table_get(t, r, "source");
    const char *recipe = c->training.precision == MP_DTYPE_FP8
                             ? mp_fp8_recipe_name(c->training.fp8_recipe)
                             : "bf16";
    snprintf(w->label, sizeof w->label, "%s %s on %d %s, %s: t%lld p%lld v%lld ep%lld b%lld B%lld%s",
             release ? release : "?", model, (int)gpus, system, recipe, (long long)tp,
             (long long)pp, (long long)vp, (long long)ep, (long long)v[MB], (long long)v[GB],
             v[FSDP] > 0 ? " FSDP" : "");
    w->tokens_per_s_per_gpu = v[TPS];
    w->measured_s = v[STEP] > 0 ? v[STEP] : v[GB] * v[SEQ] / (v[TPS] * (double)gpus);

    /* the model and the profile */
    if (strcmp(model, "qwen3-30b-a3b") == 0) {
        if (qwen3_30b_a3b(&c->model) != 0)
            return mp_error_set(err, MP_EINTERNAL, t->path, t->line[r], 0, "model",
                                "the Qwen3-30B-A3B shape does not build");
    } else if (mp_model_preset(model)) {
        c->model = *mp_model_preset(model);
    } else {
        not_expressible(w, "no preset for this model");
        return MP_OK;
    }
    mp_error hwerr;
    if (refdata_hw(system, &c->hw, &hwerr) != MP_OK) {
        not_expressible(w, "no hardware profile for this system");
        return MP_OK;
    }
    /* the band the run's attention used, where the recipe's differs from
     * the model's (keys a windowed query sees, itself included) */
    if (v[WIN] > 0) {
        if (c->model.attn.window <= 0)
            return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "attn_window",
                                "%s has no sliding window to set", model);
        c->model.attn.window = (int64_t)v[WIN];
    }
    /* "w/ MTP": the multi-token-prediction modules, on the last stage */
    c->model.mtp_layers = (int64_t)v[MTP];
    /* the configuration: dropless and force-balanced */
    c->model.seq = (int64_t)v[SEQ];
    c->model.moe.capacity_factor = 0.0;
    c->model.moe.imbalance = 1.0;
    /* the recipe's fixed routing (the file's fake_balanced_gate column, 0 or
     * 1; absent: 0, the router's): NeMo AutoModel's FakeBalancedGate sends a
     * token to k consecutive experts, which the flex dispatcher's copies see */
    st = flag_of(t, r, "fake_balanced_gate", &c->model.moe.fake_balanced_gate, err);
    if (st != MP_OK)
        return st;
    c->training.gpus = gpus;
    c->training.seq = (int64_t)v[SEQ];
    c->training.global_batch = (int64_t)v[GB];
    c->training.grad_reduce_bf16 = v[GRAD16] > 0;
    c->training.fp8_param_gather = v[FP8P] > 0;
    /* the loss as Transformer Engine's fused cross entropy (the file's
     * te_cross_entropy column, 0 or 1; absent: 0, the unfused one) */
    if (v[TCE] != 0 && v[TCE] != 1)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "te_cross_entropy",
                            "'%g': expected 0 or 1", v[TCE]);
    c->training.te_cross_entropy = v[TCE] > 0;
    mp_parallel *p = &c->parallel;
    p->tp = tp;
    p->pp = pp;
    p->vpp = vp;
    p->cp = cp;
    p->dp = gpus / (tp * pp * cp);
    p->micro_batch = (int64_t)v[MB];
    p->sp = tp > 1;
    /* the recipe's Transformer Engine TP overlap (the file's tp_comm_overlap
     * column; absent: on where tp > 1) */
    p->tp_overlap = tp > 1 && v[TPO] > 0;
    /* the recipe's overlap_p2p_comm (the file's p2p_overlap column, 0 or 1;
     * absent: 0, synchronous transfers): interleaved rows only */
    if (v[P2P] != 0 && v[P2P] != 1)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "p2p_overlap",
                            "'%g': expected 0 or 1", v[P2P]);
    if (v[P2P] > 0 && !(pp > 1 && vp > 1))
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "p2p_overlap",
                            "1 needs an interleaved pipeline (pp > 1 and vp > 1)");
    p->p2p_overlap = v[P2P] > 0;
    p->dist_opt = true;
    p->dp_overlap = true;
    /* the recipe's overlap_param_gather off (the file's param_gather_sync
     * column, 0 or 1; absent: 0): the parameter all-gather runs after the
     * optimizer step, exposed */
    if (v[PGS] != 0 && v[PGS] != 1)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "param_gather_sync",
                            "'%g': expected 0 or 1", v[PGS]);
    p->param_gather_sync = v[PGS] > 0;
    /* the recipe's overlap_param_gather_with_optimizer_step (the file's
     * param_gather_with_optimizer column, 0 or 1; absent: 0): the first
     * chunk's parameter all-gather launched in the optimizer step */
    if (v[PGO] != 0 && v[PGO] != 1)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "param_gather_with_optimizer",
                            "'%g': expected 0 or 1", v[PGO]);
    if (v[PGO] > 0 && p->param_gather_sync)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "param_gather_with_optimizer",
                            "1 with param_gather_sync 1");
    p->overlap_param_gather_with_optimizer_step = v[PGO] > 0;
    /* the recipe's DDP bucket (the file's ddp_bucket_size column, in
     * parameters; absent or empty: Megatron's default max(40M, 1M * dp)) */
    if (v[DBS] != floor(v[DBS]) || v[DBS] > (double)MP_DDP_BUCKET_MAX)
        return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "ddp_bucket_size",
                            "'%g': expected a whole number of parameters, at most 2^48", v[DBS]);
    p->ddp_bucket_size = (int64_t)v[DBS];
    p->recompute = MP_RECOMPUTE_NONE;
    st = recipe_lists_of(t, r, p, err);
    if (st != MP_OK)
        return st;
    p->schedule = vp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B;
    /* the recipe's dispatcher and MoE overlaps (the file's columns; absent:
     * Megatron's all-to-all, no overlap). flex may name its backend and its
     * kernels' SMs: "flex:BACKEND:N", "flex:BACKEND" (parallel.flex_backend,
     * deepep or hybridep: the recipe's moe_flex_dispatcher_backend) and
     * "flex:N" (parallel.flex_sms: the recipe's moe_hybridep_num_sms or
     * moe_deepep_num_sms, the backend left to megaplan's guess) */
    const char *disp = refdata_table_get(t, r, "dispatcher");
    p->dispatcher = MP_DISPATCH_ALLTOALL;
    if (disp && *disp) {
        size_t n = strcspn(disp, ":");
        int k = 0;
        while (k < MP_DISPATCH_COUNT && (strlen(mp_dispatcher_name((mp_dispatcher)k)) != n ||
                                         strncmp(disp, mp_dispatcher_name((mp_dispatcher)k), n)))
            k++;
        if (k == MP_DISPATCH_COUNT)
            return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "dispatcher",
                                "'%s': expected alltoall, allgather, flex, flex:SMS, "
                                "flex:BACKEND or flex:BACKEND:SMS", disp);
        p->dispatcher = (mp_dispatcher)k;
        const char *rest = disp + n;
        if (*rest == ':' && k != MP_DISPATCH_FLEX)
            return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "dispatcher",
                                "'%s': only flex takes SMs or a backend", disp);
        if (*rest == ':') {
            rest++;
            size_t b = strcspn(rest, ":");
            if (b > 0 && !isdigit((unsigned char)rest[0])) {
                int f = MP_FLEX_DEEPEP;
                while (f < MP_FLEX_BACKEND_COUNT &&
                       (strlen(mp_flex_backend_setting_name((mp_flex_backend)f)) != b ||
                        strncmp(rest, mp_flex_backend_setting_name((mp_flex_backend)f), b)))
                    f++;
                if (f == MP_FLEX_BACKEND_COUNT)
                    return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "dispatcher",
                                        "'%s': the flex backend is deepep or hybridep", disp);
                p->flex_backend = (mp_flex_backend)f;
                rest += b;
                rest += *rest == ':';
                if (rest[-1] != ':')
                    rest = NULL; /* "flex:BACKEND": no SMs */
            }
        } else {
            rest = NULL;
        }
        if (rest) {
            char *end = NULL;
            errno = 0;
            long long sms = strtoll(rest, &end, 10);
            if (end == rest || *end != '\0' || errno || sms < 1 || sms > MP_FLEX_SMS_MAX)
                return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "dispatcher",
                                    "'%s': flex's SMs are a whole number from 1 to %d",
                                    disp, MP_FLEX_SMS_MAX);
            p->flex_sms = (int64_t)sms;
        }
    }
    p->moe_a2a_overlap = v[A2AO] > 0;
    p->shared_expert_overlap = v[SEO] > 0;
    p->ep = ep;
    p->etp = 1;
    if (v[FSDP] > 0) {
        p->zero = 3;
        st = fsdp_recipe_of(t, r, c, w, err);
        if (st != MP_OK)
            return st;
        if (!w->expressible)
            return MP_OK;
    }
    /* the recipe's explicit layout (Megatron's --pipeline-model-parallel-layout) */
    const char *layout = refdata_table_get(t, r, "pipeline_layout");
    if (layout && *layout) {
        if (strlen(layout) >= sizeof p->pipeline_layout)
            return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "pipeline_layout",
                                "too long: at most %zu characters", sizeof p->pipeline_layout - 1);
        snprintf(p->pipeline_layout, sizeof p->pipeline_layout, "%s", layout);
    }
    /* ga > 1 with pp: the recipe runs the pipeline schedule ga times per
     * global step (AutoModel's benchmark loop), each a full flush with its
     * own FSDP gathers and reduce-scatters; megaplan runs one flush, so the
     * row is compared per flush: batch and measured step divided by ga */
    double ga;
    st = field(t, r, "ga", 1, &ga, err);
    if (st != MP_OK)
        return st;
    if (ga > 1 && pp > 1) {
        int64_t g = (int64_t)ga;
        if ((double)g != ga || c->training.global_batch % g)
            return mp_error_set(err, MP_EINPUT, t->path, t->line[r], 0, "ga",
                                "'%g' does not divide the global batch", ga);
        c->training.global_batch /= g;
        w->measured_s /= ga;
        size_t n = strlen(w->label);
        snprintf(w->label + n, sizeof w->label - n, ", per flush (GA %lld)", (long long)g);
    }
    if (gpus % (tp * pp * cp) != 0) {
        not_expressible(w, "gpus is not a multiple of tp x pp x cp");
        return MP_OK;
    }
    mp_error why;
    mp_error_clear(&why);
    if (mp_config_check(c, &why) != MP_OK) {
        snprintf(w->reason, sizeof w->reason, "megaplan refuses it: %.40s: %.180s", why.field,
                 why.msg);
        w->expressible = false;
    }
    return MP_OK;
}

static mp_status read_files(const char *dir, const char *const *files, size_t nfiles,
                            const char *note, refdata_moe_set *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    out->note = note;
    for (size_t f = 0; f < nfiles; f++) {
        refdata_table t;
        mp_status st = refdata_table_read_more(dir, files[f], f > 0 ? files[0] : NULL,
                                               &out->role, &t, err);
        if (st != MP_OK) {
            refdata_moe_free(out);
            return st;
        }
        refdata_moe_row *grown = realloc(out->rows, ((size_t)out->n + (size_t)t.rows + 1) *
                                                        sizeof *out->rows);
        if (!grown) {
            refdata_table_free(&t);
            refdata_moe_free(out);
            return mp_error_set(err, MP_ENOMEM, files[f], 0, 0, NULL, "out of memory");
        }
        out->rows = grown;
        for (int r = 0; r < t.rows; r++) {
            st = row_of(&t, r, files[f], &out->rows[out->n], err);
            if (st != MP_OK) {
                refdata_table_free(&t);
                refdata_moe_free(out);
                return st;
            }
            out->n++;
        }
        refdata_table_free(&t);
    }
    return MP_OK;
}

mp_status refdata_moe_read(const char *dir, refdata_moe_set *out, mp_error *err)
{
    return read_files(dir, moe_files, sizeof moe_files / sizeof moe_files[0], note_moe, out, err);
}

mp_status refdata_moe_read_overlap_ab(const char *dir, refdata_moe_set *out, mp_error *err)
{
    return read_files(dir, ab_files, sizeof ab_files / sizeof ab_files[0], note_ab, out, err);
}

void refdata_moe_free(refdata_moe_set *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n = 0;
}
