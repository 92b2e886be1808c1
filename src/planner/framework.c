/* framework.c — the framework that runs a plan and its configuration file
 * (framework.h). Keys follow DeepSpeed's config documentation (zero_optimization,
 * tensor_parallel.autotp_size for AutoTP training) and torchtitan's job files
 * ([parallelism], [training], [activation_checkpoint]). */
#include "planner/framework.h"

#include "planner/cost_internal.h"
#include "planner/megatron.h"

#include <stdlib.h>
#include <string.h>

#include "core/plan.h"

mp_framework mp_plan_framework(const mp_config *c)
{
    const mp_parallel *p = &c->parallel;
    if (p->zero <= 1)
        return MP_FW_MEGATRON;
    if (p->zero_runtime != MP_ZRT_AUTO)
        return p->zero_runtime == MP_ZRT_DEEPSPEED ? MP_FW_DEEPSPEED : MP_FW_TORCHTITAN;
    /* DeepSpeed's config here has no context parallelism (mp_deepspeed_config):
     * ZeRO-2 with cp > 1 is torchtitan's FSDP2 that does not reshard */
    if (!p->hsdp && p->cp == 1 && (p->zero == 2 || p->tp == 1))
        return MP_FW_DEEPSPEED;
    return MP_FW_TORCHTITAN;
}

const char *mp_framework_name(mp_framework f)
{
    switch (f) {
    case MP_FW_DEEPSPEED: return "DeepSpeed";
    case MP_FW_TORCHTITAN: return "torchtitan (FSDP2)";
    default: return "Megatron-LM";
    }
}

const char *mp_framework_format(mp_framework f)
{
    switch (f) {
    case MP_FW_DEEPSPEED: return "deepspeed";
    case MP_FW_TORCHTITAN: return "torchtitan";
    default: return "megatron";
    }
}

static const char *precision_key(mp_dtype d)
{
    return d == MP_DTYPE_FP16 ? "fp16" : "bf16";
}

/* The FP8 recipes are Transformer Engine's under Megatron-LM; these configs
 * have no equivalent, and bf16 in their place would be a silent change. */
static mp_status refuse_fp8(const mp_config *c, mp_error *err)
{
    if (c->training.precision != MP_DTYPE_FP8)
        return MP_OK;
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                        "an fp8 plan (Transformer Engine's %s recipe) is written for Megatron-LM "
                        "only (--format megatron)",
                        mp_fp8_recipe_name(c->training.fp8_recipe));
}

/* Settings the files written here have no key for (Megatron-LM's flags;
 * grad_reduce_bf16 also NeMo AutoModel's FSDP2, where torchtitan reduces in
 * fp32): written without them, the file would run another plan than the one
 * estimated. They were dropped in silence (torchtitan's file said
 * mixed_precision_reduce "float32" to a plan reducing in bf16). search
 * chooses none of them: only a user's option, plan or model sets them.
 * The model's MTP modules (DeepSeek-V3 §2.2; Megatron's --mtp-num-layers)
 * too: the estimate charges their blocks and heads, and neither file here
 * (DeepSpeed's JSON, torchtitan v0.2.x's job sections) has a key for them. */
static mp_status refuse_unwritten(const mp_config *c, const char *file, mp_error *err)
{
    const mp_training *t = &c->training;
    const mp_parallel *p = &c->parallel;
    const char *what = c->model.mtp_layers > 0 ? "mtp_layers (multi-token prediction modules)"
                       : t->te_cross_entropy       ? "te_cross_entropy (Transformer Engine's fused "
                                                   "cross entropy)"
                       : t->native_cross_entropy ? "native_cross_entropy (Megatron-Core's fused "
                                                   "cross entropy)"
                       : t->grad_reduce_bf16     ? "grad_reduce_bf16 (gradients reduced in bf16)"
                       : t->fp8_act_cache != MP_F8AC_OFF ? "fp8_act_cache (SwiGLU inputs kept "
                                                           "in FP8)"
                       : p->nccl_ub              ? "nccl_ub (NCCL user buffers)"
                       : p->ddp_bucket_size > 0  ? "ddp_bucket_size (Megatron-Core DDP's bucket)"
                       : p->cuda_graph_scope     ? "cuda_graph_scope (CUDA graphs)"
                       : p->defer_embedding_wgrad ? "defer_embedding_wgrad (the output layer's "
                                                    "weight gradients deferred)"
                       : c->model.moe.capacity_factor > 0.0 ? "moe.capacity_factor (the experts' "
                                                              "token capacity)"
                       : p->shared_expert_overlap ? "shared_expert_overlap (the shared experts "
                                                    "under the dispatch)"
                       : p->flex_sms > 0 ? "flex_sms (the SMs of the flex dispatcher's kernels)"
                       : t->attention_backend != MP_ATTN_AUTO ? "attention_backend (Transformer "
                                                               "Engine's attention kernel)"
                                                  : NULL;
    if (what)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                            "%s: the %s file written here has no key for it (--format megatron "
                            "writes it, or leave it out)",
                            what, file);
    /* NeMo AutoModel's own settings: no framework file megaplan writes has
     * them (torchtitan's pipeline stages are FSDP units, which sync once per
     * flush; its gates score their tokens) */
    what = p->fsdp_microbatch_sync ? "fsdp_microbatch_sync (FSDP2 syncing every micro-batch "
                                     "under a pipeline, NeMo AutoModel's)"
           : c->model.moe.fake_balanced_gate ? "moe.fake_balanced_gate (NeMo AutoModel's "
                                               "benchmark gate)"
                                             : NULL;
    if (!what)
        return MP_OK;
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                        "%s: the %s file written here has no key for it (nor has Megatron-LM): "
                        "leave it out",
                        what, file);
}

/* The MoE token dispatch the file cannot say, whatever the shape: DeepSpeed's
 * JSON has no MoE key at all (its MoE layer takes its settings in the model
 * code, deepspeed.moe.layer.MoE), so only the default alltoall passes (with
 * ep = 1, mp_framework_expert_degree); torchtitan v0.2.2 dispatches by
 * all-to-all ("standard") or DeepEP ("deepep"), never by all-gather
 * (config/job_config.py, expert_parallel_comm_backend). */
static mp_status refuse_dispatch(const mp_config *c, mp_framework fw, mp_error *err)
{
    const mp_parallel *p = &c->parallel;
    if (!mp_model_is_moe(&c->model))
        return MP_OK;
    const char *what = NULL;
    if (fw == MP_FW_DEEPSPEED)
        what = p->dispatcher == MP_DISPATCH_FLEX        ? "dispatcher flex (DeepEP / HybridEP)"
               : p->dispatcher == MP_DISPATCH_ALLGATHER ? "dispatcher allgather"
               : p->moe_a2a_overlap                     ? "moe_a2a_overlap (the EP all-to-all "
                                                          "overlap)"
                                                        : NULL;
    else if (p->dispatcher == MP_DISPATCH_ALLGATHER)
        what = "dispatcher allgather (torchtitan dispatches by all-to-all or DeepEP)";
    if (!what)
        return MP_OK;
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                        "%s: the %s file written here has no key for it (--format megatron "
                        "writes it, or leave it out)",
                        what, fw == MP_FW_DEEPSPEED ? "DeepSpeed" : "torchtitan");
}

mp_status mp_framework_unwritten(const mp_config *c, mp_framework fw, mp_error *err)
{
    if (fw == MP_FW_MEGATRON)
        return MP_OK;
    if (refuse_fp8(c, err) != MP_OK ||
        refuse_unwritten(c, fw == MP_FW_DEEPSPEED ? "DeepSpeed" : "torchtitan", err) != MP_OK ||
        refuse_dispatch(c, fw, err) != MP_OK)
        return MP_EINPUT;
    return MP_OK;
}

mp_status mp_framework_expert_degree(const mp_config *c, mp_framework fw, mp_error *err)
{
    int64_t ep = mp_parallel_ep(&c->parallel);
    if (fw != MP_FW_DEEPSPEED || !mp_model_is_moe(&c->model) || ep < 2)
        return MP_OK;
    /* DeepSpeed's expert parallelism is deepspeed.moe.layer.MoE(ep_size=...),
     * an argument of the model's own code; ds_config.json has no key for it,
     * and the file alone ran ep = 1 (every expert on every rank) */
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                        "ep=%lld (expert parallelism): the DeepSpeed file written here has no key "
                        "for it (DeepSpeed takes it in the model code, "
                        "deepspeed.moe.layer.MoE(ep_size=...); --format torchtitan writes it, or "
                        "leave it out)",
                        (long long)ep);
}

/* The expert split of an MoE plan under torchtitan v0.2.2's rules
 * (distributed/parallel_dims.py _validate and build_mesh; config/job_config.py
 * Parallelism; models/llama4/infra/parallelize.py apply_moe_ep_tp and
 * models/deepseek_v3/infra/parallelize.py; tag v0.2.2, commit 73a0e697):
 * the experts' mesh is (pp, dp_replicate, efsdp, ep, etp) over the same ranks
 * as (pp, dp_replicate, dp_shard*cp, tp), so etp*ep divides dp_shard*cp*tp;
 * with ep > 1, etp is 1 (EP borrows all of TP) or tp; with ep = 1 the experts
 * are split over tp (TensorParallel), whatever expert_tensor_parallel_degree
 * says; DeepEP ("deepep") needs ep > 1 and etp = 1; the EP/PP overlap is
 * DualPipeV's alone and refuses activation checkpointing (distributed/
 * dual_pipe_v.py get_dual_pipe_v_flag). MP_OK with *backend the
 * expert_parallel_comm_backend to write. */
static mp_status torchtitan_experts(const mp_config *c, int64_t dp_shard, const char **backend,
                                    mp_error *err)
{
    const mp_parallel *p = &c->parallel;
    int64_t ep = mp_parallel_ep(p), etp = mp_parallel_etp(p);
    *backend = "standard";
#define TT_FAIL(...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format", __VA_ARGS__)
    if (ep == 1 && etp != p->tp)
        return TT_FAIL("etp=%lld with ep=1: torchtitan splits the experts over the whole "
                       "tensor-parallel group (tp=%lld) when ep is 1", (long long)etp,
                       (long long)p->tp);
    if (ep > 1 && etp != 1 && etp != p->tp)
        return TT_FAIL("etp=%lld: torchtitan's expert tensor parallelism is 1 or tp (%lld)",
                       (long long)etp, (long long)p->tp);
    if ((dp_shard * p->cp * p->tp) % (ep * etp))
        return TT_FAIL("etp*ep = %lld does not divide torchtitan's dp_shard*cp*tp = %lld",
                       (long long)(ep * etp), (long long)(dp_shard * p->cp * p->tp));
    if (p->dispatcher == MP_DISPATCH_FLEX) {
        /* megaplan's flex is the plan's flex_backend, by default DeepEP's
         * (HybridEP's across a multi-node NVLink domain: planner/megatron_moe.c) */
        if (ep < 2 || etp != 1)
            return TT_FAIL("the flex dispatcher with ep=%lld etp=%lld: torchtitan's DeepEP "
                           "needs ep > 1 and etp = 1", (long long)ep, (long long)etp);
        if (strcmp(mp_flex_backend_name(c), "deepep"))
            return TT_FAIL("the flex dispatcher runs HybridEP here (flex_backend, or on %s "
                           "by default), which torchtitan lacks (its "
                           "expert_parallel_comm_backend is standard or deepep)",
                           c->hw.name);
        *backend = "deepep";
    }
    if (p->moe_a2a_overlap) {
        if (p->pp < 2 || p->schedule != MP_SCHED_DUALPIPEV)
            return TT_FAIL("moe_a2a_overlap (the EP all-to-all overlap) under %s with pp=%lld: "
                           "torchtitan overlaps EP only in DualPipeV with pp > 1 "
                           "(--format megatron writes it, or leave it out)",
                           mp_schedule_name(p->schedule), (long long)p->pp);
        if (p->recompute != MP_RECOMPUTE_NONE)
            return TT_FAIL("moe_a2a_overlap with recompute %s: torchtitan's DualPipeV EP overlap "
                           "runs without activation checkpointing",
                           mp_recompute_name(p->recompute));
    }
#undef TT_FAIL
    return MP_OK;
}

mp_status mp_deepspeed_config(const mp_config *c, mp_buf *out, mp_error *err)
{
    const mp_parallel *p = &c->parallel;
    if (mp_framework_unwritten(c, MP_FW_DEEPSPEED, err) != MP_OK ||
        mp_framework_expert_degree(c, MP_FW_DEEPSPEED, err) != MP_OK)
        return MP_EINPUT;
    /* AutoTP splits every linear layer over tp, the experts' too: no other
     * expert tensor-parallel degree can be said */
    if (mp_model_is_moe(&c->model) && mp_parallel_etp(p) != p->tp)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                            "etp=%lld: the DeepSpeed file written here has no key for an expert "
                            "tensor-parallel degree other than tp (%lld)",
                            (long long)mp_parallel_etp(p), (long long)p->tp);
    if (p->pp > 1 || p->cp > 1 || p->vpp > 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                            "a DeepSpeed config here covers data and tensor parallelism with ZeRO; "
                            "this plan has pp=%lld cp=%lld", (long long)p->pp, (long long)p->cp);
    if (p->hsdp)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                            "hybrid sharding (HSDP) runs under torchtitan (--format torchtitan)");
    if (p->zero >= 3 && p->tp > 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                            "DeepSpeed's AutoTP training runs ZeRO stages 0-2; ZeRO-3 with tp=%lld "
                            "runs under torchtitan (--format torchtitan)", (long long)p->tp);
    int64_t stage = p->zero > 0 ? p->zero : p->dist_opt ? 1 : 0;
    int64_t accum = mp_config_microbatches(c);
    mp_buf_printf(out, "{\n");
    mp_buf_printf(out, "  \"train_batch_size\": %lld,\n", (long long)c->training.global_batch);
    mp_buf_printf(out, "  \"train_micro_batch_size_per_gpu\": %lld,\n", (long long)p->micro_batch);
    mp_buf_printf(out, "  \"gradient_accumulation_steps\": %lld,\n", (long long)accum);
    if (c->training.precision != MP_DTYPE_FP32)
        mp_buf_printf(out, "  \"%s\": {\"enabled\": true},\n", precision_key(c->training.precision));
    mp_buf_printf(out, "  \"zero_optimization\": {\n");
    mp_buf_printf(out, "    \"stage\": %lld,\n", (long long)stage);
    mp_buf_printf(out, "    \"overlap_comm\": %s,\n", p->dp_overlap ? "true" : "false");
    mp_buf_printf(out, "    \"contiguous_gradients\": true\n");
    mp_buf_printf(out, "  }");
    if (p->tp > 1)
        mp_buf_printf(out, ",\n  \"tensor_parallel\": {\"autotp_size\": %lld}", (long long)p->tp);
    if (p->recompute != MP_RECOMPUTE_NONE)
        /* DeepSpeed checkpoints whole layers; selective recompute is the
         * model's own choice (e.g. Hugging Face's gradient_checkpointing) */
        mp_buf_printf(out, ",\n  \"activation_checkpointing\": {\"partition_activations\": %s, "
                           "\"contiguous_memory_optimization\": false}",
                      p->tp > 1 ? "true" : "false");
    mp_buf_printf(out, "\n}\n");
    return MP_OK;
}

/* The plan's split as torchtitan's module_fqns_per_model_part (torchtitan
 * v0.2.x, config/job_config.py; distributed/pipeline_parallel.py
 * pipeline_module_split): one list of module names per (virtual) stage, in
 * pipeline order, the llama-family names its own generator writes
 * ("tok_embeddings", "layers.<i>" from 0, "norm", "output"); torchtitan places
 * the stages on the ranks by its schedule (looped, or a V for ZBVZeroBubble
 * and DualPipeV), as the plan's stages are. Written for every split, even or
 * not: pipeline_parallel_layers_per_stage alone splits by its own rule, with
 * the embedding and the output counted as one layer each by default
 * (pipeline_parallel_first/last_stage_less_layers = 1), which is not the
 * split the plan costs, and it cannot say an uneven one. */
static mp_status stage_fqns(const mp_config *c, const mp_plan *plan, mp_buf *out, mp_error *err)
{
    const mp_parallel *p = &c->parallel;
    int64_t K = p->pp * mp_schedule_chunks(p->schedule, p->vpp);
    int64_t L = c->model.layers;
    if (c->model.arch == MP_ARCH_T5)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                            "torchtitan has no encoder-decoder pipeline split for t5 (pp=%lld)",
                            (long long)p->pp);
    if (K < 2 || K > MP_MAX_STAGES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                            "%lld pipeline stages cannot be written for torchtitan", (long long)K);
    mp_stage_range *st = calloc((size_t)K, sizeof *st);
    if (!st)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, "format", "out of memory");
    if (plan && plan->n_stages == K)
        memcpy(st, plan->stages, (size_t)K * sizeof st[0]);
    else
        mp_config_stages(c, K, st);
    mp_buf_printf(out, "# the plan's split: each (virtual) stage's modules, in pipeline order\n");
    mp_buf_printf(out, "module_fqns_per_model_part = [\n");
    for (int64_t k = 0; k < K; k++) {
        const char *sep = "";
        mp_buf_puts(out, "  [");
        if (st[k].begin == 0) {
            mp_buf_puts(out, "\"tok_embeddings\"");
            sep = ", ";
        }
        int64_t b = st[k].begin < 1 ? 1 : st[k].begin;
        int64_t e = st[k].end > L + 1 ? L + 1 : st[k].end;
        for (int64_t i = b; i < e; i++) {
            mp_buf_printf(out, "%s\"layers.%lld\"", sep, (long long)(i - 1));
            sep = ", ";
        }
        if (st[k].end == L + 2)
            mp_buf_printf(out, "%s\"norm\", \"output\"", sep);
        mp_buf_printf(out, "]%s\n", k + 1 < K ? "," : "");
    }
    mp_buf_puts(out, "]\n");
    free(st);
    return MP_OK;
}

mp_status mp_torchtitan_config(const mp_config *c, const mp_plan *plan, mp_buf *out,
                               mp_error *err)
{
    const mp_parallel *p = &c->parallel;
    if (mp_framework_unwritten(c, MP_FW_TORCHTITAN, err) != MP_OK)
        return MP_EINPUT;
    /* torchtitan's pipeline_parallel_schedule names (torch.distributed.pipelining) */
    const char *schedule = NULL;
    switch (p->schedule) {
    case MP_SCHED_GPIPE: schedule = "GPipe"; break;
    case MP_SCHED_1F1B: schedule = "1F1B"; break;
    case MP_SCHED_INTERLEAVED: schedule = "Interleaved1F1B"; break;
    case MP_SCHED_ZBV: schedule = "ZBVZeroBubble"; break;
    case MP_SCHED_DUALPIPEV: schedule = "DualPipeV"; break;
    default: break;
    }
    if (p->pp > 1 && !schedule)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                            "torchtitan has no %s pipeline schedule",
                            mp_schedule_name(p->schedule));
    /* the plan's exchange types are Transformer Engine's (Megatron-Core's
     * --cp-comm-type); torchtitan's CP is PyTorch's ring attention, whose
     * rotate methods are not those exchanges: writing the file would drop
     * what the estimate charged */
    if (p->cp > 1 && p->cp_comm_type != MP_CP_P2P)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                            "the %s context-parallel exchange is Transformer Engine's, written for "
                            "Megatron-LM only (--format megatron)",
                            mp_cp_comm_name(p->cp_comm_type));
    mp_buf_printf(out, "# torchtitan job file sections for %s on %lld GPUs (megaplan)\n",
                  c->model.name, (long long)c->training.gpus);
    /* FSDP shards over dp_shard x cp; HSDP replicates that over dp_replicate */
    int64_t replicate = 1;
    if (p->hsdp) {
        replicate = p->dp * p->cp / mp_zero_shard_ranks(c);
        if (replicate < 1 || p->dp % replicate)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "format",
                                "the hybrid shard does not split dp=%lld into whole replicas",
                                (long long)p->dp);
    }
    const char *backend = NULL;
    if (mp_model_is_moe(&c->model)) {
        mp_status st = torchtitan_experts(c, p->dp / replicate, &backend, err);
        if (st != MP_OK)
            return st;
    }
    mp_buf_printf(out, "[parallelism]\n");
    mp_buf_printf(out, "data_parallel_replicate_degree = %lld\n", (long long)replicate);
    mp_buf_printf(out, "data_parallel_shard_degree = %lld\n", (long long)(p->dp / replicate));
    /* with pp, "default" is torchtitan's: weights kept from forward to backward,
     * as the cost model's FSDP2-under-pipelining assumes */
    mp_buf_printf(out, "fsdp_reshard_after_forward = \"%s\"\n",
                  p->zero < 3 ? "never" : p->pp > 1 ? "default" : "always");
    mp_buf_printf(out, "tensor_parallel_degree = %lld\n", (long long)p->tp);
    mp_buf_printf(out, "context_parallel_degree = %lld\n", (long long)p->cp);
    mp_buf_printf(out, "pipeline_parallel_degree = %lld\n", (long long)p->pp);
    if (mp_model_is_moe(&c->model)) {
        int64_t ep = mp_parallel_ep(p);
        mp_buf_printf(out, "expert_parallel_degree = %lld\n", (long long)ep);
        /* both have no effect at ep = 1 (job_config.py) */
        if (ep > 1) {
            mp_buf_printf(out, "expert_tensor_parallel_degree = %lld\n",
                          (long long)mp_parallel_etp(p));
            mp_buf_printf(out, "expert_parallel_comm_backend = \"%s\"\n", backend);
        }
        /* on by default: said, so that the file overlaps what the estimate does */
        if (ep > 1 && p->pp > 1 && p->schedule == MP_SCHED_DUALPIPEV)
            mp_buf_printf(out, "pipeline_parallel_expert_parallel_overlap = %s\n",
                          p->moe_a2a_overlap ? "true" : "false");
    }
    if (p->pp > 1) {
        mp_buf_printf(out, "pipeline_parallel_schedule = \"%s\"\n", schedule);
        mp_buf_printf(out, "pipeline_parallel_microbatch_size = %lld\n",
                      (long long)p->micro_batch);
        mp_status st = stage_fqns(c, plan, out, err);
        if (st != MP_OK)
            return st;
    }
    mp_buf_printf(out, "\n[training]\n");
    /* with pp one flush runs all of a DP rank's micro-batches */
    mp_buf_printf(out, "local_batch_size = %lld\n",
                  (long long)(p->pp > 1 ? c->training.global_batch / p->dp : p->micro_batch));
    mp_buf_printf(out, "global_batch_size = %lld\n", (long long)c->training.global_batch);
    mp_buf_printf(out, "seq_len = %lld\n", (long long)c->training.seq);
    mp_buf_printf(out, "mixed_precision_param = \"%s\"\n",
                  c->training.precision == MP_DTYPE_FP32 ? "float32"
                  : c->training.precision == MP_DTYPE_FP16 ? "float16" : "bfloat16");
    mp_buf_printf(out, "mixed_precision_reduce = \"float32\"\n\n");
    mp_buf_printf(out, "[activation_checkpoint]\n");
    mp_buf_printf(out, "mode = \"%s\"\n", mp_recompute_name(p->recompute));
    if (p->recompute == MP_RECOMPUTE_SELECTIVE)
        mp_buf_printf(out, "selective_ac_option = \"op\"\n");
    return MP_OK;
}
