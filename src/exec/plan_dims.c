/* plan_dims.c — what a plan asks of the executor, decided before any rank
 * starts: the model each rank runs (mp_exec_dims, with --shrink), the layer
 * items of each (virtual) pipeline stage, and the refusals that need no
 * ranks (mp_exec_precheck), so that `exec --np` can refuse once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "exec/moe.h"
#include "exec/quant.h"
#include "exec/t5_plan.h"
#include "planner/cost_internal.h"
#include "sim/schedule.h"

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }
static int round_up(int x, int m) { return (x + m - 1) / m * m; }

mp_status mp_exec_dims(const mp_plan *plan, bool shrink, mp_gpt_dims *out, int *microbatches,
                       mp_error *err)
{
    const mp_config *c = &plan->config;
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    memset(out, 0, sizeof *out);
    bool mla = mp_model_is_mla(m);
    if (mp_model_has_mtp(m)) { /* exec/mtp.c runs what Megatron's GPT model does */
        if (m->mtp_layers > MP_MTP_MAX)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.mtp_layers",
                                "exec runs at most %d multi-token-prediction modules (got %lld)",
                                MP_MTP_MAX, (long long)m->mtp_layers);
        if (m->arch == MP_ARCH_BERT || m->arch == MP_ARCH_T5)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.mtp_layers",
                                "exec runs the multi-token-prediction modules in decoder-only "
                                "models only");
        if (m->position != MP_POS_ROPE)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.mtp_layers",
                                "exec runs the multi-token-prediction modules with rope "
                                "positions only (the shifted learned positions are not run)");
    }
    if (mla && (m->arch == MP_ARCH_BERT || m->arch == MP_ARCH_T5))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.mla",
                            "%s: exec runs latent attention in decoder-only models only",
                            m->name);
    if (mla && m->position != MP_POS_ROPE)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.position",
                            "latent attention turns its rope head dims: position must be rope, "
                            "not %s", mp_position_name(m->position));
    /* GPT, LLaMA's variants of its parts, BERT's encoder and heads, T5 */
    bool t5 = m->arch == MP_ARCH_T5;
    if (t5) {
        mp_status st = mp_exec_t5_check(plan, err);
        if (st)
            return st;
    }
    if (m->activation == MP_ACT_RELU && !t5)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.activation",
                            "activation relu is not supported by this executor yet outside "
                            "t5 (gelu, gelu_erf, swiglu, geglu, geglu_erf)");
    /* GPT-OSS's window, sinks, biases and clamped SwiGLU run (attention_sink.c,
     * moe_oss.c; core/model_attn.c keeps them to decoders without latent
     * attention), and its YaRN rotary angles (rope_freq.c) */
    /* T5's blocks (t5_block.c) take hidden / heads wide heads; the decoders'
     * and BERT's take the model's head_dim (plan_dims below) */
    if (t5 && !shrink && m->head_dim && m->heads && m->head_dim * m->heads != m->hidden)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.head_dim",
                            "head_dim x heads != hidden is not supported by this executor in "
                            "t5 (--shrink makes head_dim 8 and hidden 8 x heads)");
    if (m->position != MP_POS_LEARNED && m->position != MP_POS_ROPE && !t5)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.position",
                            "position %s is not supported by this executor yet (learned, "
                            "rope; relative in t5)", mp_position_name(m->position));
    /* selective recompute in exec rebuilds every module of Megatron's
     * --recompute-modules (block.c, mp_model_rebuild); T5's blocks the
     * attention core only */
    uint32_t runs = m->arch == MP_ARCH_T5 ? 1u << MP_RCM_CORE_ATTN : (1u << MP_RCM_COUNT) - 1;
    if (p->recompute_modules & ~runs) {
        char list[160];
        mp_recompute_modules_format(p->recompute_modules & ~runs, list, sizeof list);
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.recompute_modules",
                            "exec recomputes core_attn only in t5; %s is costed by estimate "
                            "but not run by this executor yet", list);
    }
    if (p->vpp > MP_EXEC_MAX_CHUNKS)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.vpp",
                            "vpp=%lld model chunks per rank: this executor runs at most %d",
                            (long long)p->vpp, MP_EXEC_MAX_CHUNKS);
    if (p->cp < 1 || p->cp > 4096)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.cp",
                            "cp must be 1..4096, not %lld", (long long)p->cp);
    if (p->tp < 1 || p->dp < 1 || p->pp < 1 || p->micro_batch < 1 || p->tp > 4096 ||
        p->dp > 65536 || p->pp > MP_MAX_STAGES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel",
                            "degrees and micro_batch must be positive");
    if (c->training.gpus != p->tp * p->cp * p->dp * p->pp)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "training.gpus",
                            "gpus (%lld) is not tp x cp x dp x pp (%lld)",
                            (long long)c->training.gpus,
                            (long long)(p->tp * p->cp * p->dp * p->pp));
    int64_t seq = c->training.seq > 0 ? c->training.seq : m->seq;
    int64_t per_step = p->micro_batch * p->dp;
    if (c->training.global_batch < per_step || c->training.global_batch % per_step)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "training.global_batch",
                            "global_batch %lld is not a multiple of micro_batch x dp = %lld",
                            (long long)c->training.global_batch, (long long)per_step);
    int64_t mbs = c->training.global_batch / per_step;
    int tp = (int)p->tp, cp = (int)p->cp;
    bool sp = p->sp && tp > 1;
    if (shrink) {
        /* keep every degree; make each size the smallest that each still divides */
        int heads = tp * max_int(1, min_int((int)(m->heads / tp), 2));
        out->heads = heads;
        /* grouped-query attention stays grouped: one key/value head per rank
         * for two query heads */
        if (m->kv_heads && m->kv_heads < m->heads) {
            out->heads = heads = 2 * tp;
            out->kv_heads = tp;
        }
        out->hidden = heads * 8;
        /* heads of their own width stay so (Qwen3, GPT-OSS: wider than hidden
         * / heads; Gemma's narrower ones too): 12 or 6 against hidden / heads
         * = 8, even for the rotation */
        if (!mla && !t5 && m->head_dim > 0 && m->head_dim * m->heads != m->hidden)
            out->head_dim = m->head_dim * m->heads > m->hidden ? 12 : 6;
        out->ffn = 4 * out->hidden;
        out->vocab = tp * max_int(8, 128 / tp);
        /* 2cp chunks, each rank's share divisible by tp under SP */
        out->seq = round_up(16, 2 * cp * (sp ? tp : 1));
        /* one block per (virtual) pipeline stage, as many stages as the plan */
        int stages = (int)(p->pp * (p->vpp > 1 ? p->vpp : 1));
        out->layers = stages > 1 ? stages : (int)(m->layers < 2 ? m->layers : 2);
        out->micro_batch = (int)(p->micro_batch < 2 ? p->micro_batch : 2);
        *microbatches = (int)(mbs < 2 ? mbs : 2);
        if (t5) /* one encoder and one decoder block, or one block per stage */
            mp_exec_t5_shrink(m, (int)p->pp, out);
        if (p->schedule == MP_SCHED_INTERLEAVED && p->pp > 1)
            *microbatches = (int)p->pp; /* a multiple of pp, as interleaving needs (mbs is one) */
        if (p->schedule == MP_SCHED_DUALPIPEV || p->schedule == MP_SCHED_DUALPIPE)
            *microbatches = (int)(2 * p->pp); /* the least DualPipe(V) runs (even) */
    } else {
        if (m->hidden > (1 << 20) || m->ffn_hidden > (1 << 22) || m->vocab > (1 << 24) ||
            seq > (1 << 20) || m->layers > MP_MAX_LAYERS || p->micro_batch > 4096 ||
            mbs > (1 << 20))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model",
                                "model too large to run on this machine: use --shrink");
        out->heads = (int)m->heads;
        out->kv_heads = (int)(m->kv_heads ? m->kv_heads : m->heads);
        out->hidden = (int)m->hidden;
        /* a head width of its own (Qwen3, Gemma, GPT-OSS); latent attention
         * has its own (mla below), T5 hidden / heads (mp_exec_t5_check) */
        if (!mla && !t5 && m->head_dim > 0 && m->head_dim * m->heads != m->hidden) {
            if (m->head_dim > (1 << 14))
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.head_dim",
                                    "head_dim %lld too large to run on this machine: use "
                                    "--shrink", (long long)m->head_dim);
            out->head_dim = (int)m->head_dim;
        }
        out->ffn = (int)(m->ffn_hidden ? m->ffn_hidden : 4 * m->hidden);
        /* padded to a multiple of tp, as Megatron pads its vocabulary */
        out->vocab = round_up((int)m->vocab, tp);
        out->seq = (int)seq;
        out->layers = (int)m->layers;
        out->micro_batch = (int)p->micro_batch;
        *microbatches = (int)mbs;
        if (t5) {
            out->enc_layers = (int)m->encoder_layers;
            out->layers = (int)(m->encoder_layers + m->decoder_layers);
            /* a training seq other than the encoder's keeps the decoder's
             * ratio, as the cost model does */
            out->dec_seq = (int)(m->decoder_seq * seq / (m->encoder_seq ? m->encoder_seq : seq));
        }
    }
    out->mtp_layers = (int)(shrink && m->mtp_layers > 2 ? 2 : m->mtp_layers);
    out->mtp_scale = mp_model_mtp_loss_scale(m);
    out->t5 = t5;
    out->relu = m->activation == MP_ACT_RELU;
    out->tied = m->tied_embeddings;
    out->rmsnorm = m->norm == MP_NORM_RMSNORM;
    out->norm_eps = m->norm_eps; /* the model's at any size: shrinking keeps it */
    out->gated = mp_activation_is_gated(m->activation);
    out->geglu = m->activation == MP_ACT_GEGLU || m->activation == MP_ACT_GEGLU_ERF;
    out->gelu_erf = mp_activation_is_erf(m->activation);
    out->rope = m->position == MP_POS_ROPE;
    if (out->rope) /* the model's angles at any size: they depend on the head's width only */
        out->rope_freq = (mp_rope_spec){
            .theta = mp_model_rope_theta(m),
            .yarn = m->attn.rope_yarn,
            .factor = m->attn.yarn_factor,
            .original_seq = (int)m->attn.yarn_original_seq,
            .beta_fast = mp_model_yarn_beta_fast(m),
            .beta_slow = mp_model_yarn_beta_slow(m),
            .unrounded = m->attn.yarn_bounds == MP_YARN_UNROUNDED,
            .mscale = m->attn.yarn_mscale,
            .mscale_all_dim = m->attn.yarn_mscale_all_dim,
        };
    /* LLaMA's and T5's linear layers have none, unless linear_bias (GPT-OSS) */
    out->no_bias = (m->arch == MP_ARCH_LLAMA && !m->linear_bias) || t5;
    out->expert_bias = m->arch == MP_ARCH_LLAMA && m->linear_bias;
    /* GPT-OSS's attention and SwiGLU; a shrunk window stays shorter than the
     * shrunk sequence (16 positions or more), so the band is exercised */
    out->window = (int)(shrink && m->attn.window > 5 ? 5 : m->attn.window);
    out->window_skip_freq = (int)m->attn.window_skip_freq;
    out->sinks = m->attn.sinks;
    out->qk_norm = m->attn.qk_norm;
    out->glu_limit = m->glu_limit;
    out->bert = m->arch == MP_ARCH_BERT;
    /* the plan's recomputation; per layer as search wrote it (a shrunk model has
     * other layers: the plan's overall setting then) */
    out->recompute = (int)p->recompute;
    out->layer_recompute = !shrink && plan->has_layer_recompute ? plan->layer_recompute : NULL;
    out->recompute_modules = (unsigned)p->recompute_modules;
    out->tp = tp;
    out->sp = sp;
    out->cp = cp;
    if (mla) { /* latent attention (exec/mla.h); shrunk: small ranks, the q path's kind kept */
        const struct mp_mla *a = &m->mla;
        out->q_lora = shrink ? (a->q_lora_rank ? 16 : 0) : (int)a->q_lora_rank;
        out->kv_lora = shrink ? 12 : (int)a->kv_lora_rank;
        out->rope_dim = shrink ? 4 : (int)a->qk_rope_head_dim;
        out->nope_dim = shrink ? 8 : (int)a->qk_nope_head_dim;
        out->v_dim = shrink ? 6 : (int)a->v_head_dim;
        if (out->rope_dim < 2 || out->rope_dim % 2 || out->v_dim < 1)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.mla.qk_rope_head_dim",
                                "latent attention needs an even qk_rope_head_dim of at least 2 "
                                "(%d) and a v_head_dim (%d)", out->rope_dim, out->v_dim);
    }
    if (out->heads < 1 || out->hidden < 1 || out->vocab < 1 || out->seq < 1 ||
        out->layers < 0 || (!out->head_dim && out->hidden % out->heads))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model",
                            "hidden (%d) must be a positive multiple of heads (%d)",
                            out->hidden, out->heads);
    if (out->heads % tp || mp_dims_kv_heads(out) % tp || out->heads % mp_dims_kv_heads(out) ||
        out->ffn % tp || out->vocab % tp)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.tp",
                            "tp=%d must divide heads (%d), kv_heads (%d), ffn_hidden (%d) and "
                            "vocab (%d)", tp, out->heads, mp_dims_kv_heads(out), out->ffn,
                            out->vocab);
    if (out->rope && !mla && mp_dims_head_dim(out) % 2)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.head_dim",
                            "rotary embeddings need an even head dim (%d)",
                            mp_dims_head_dim(out));
    if (cp > 1 && out->seq % (2 * cp))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.cp",
                            "context parallelism cuts seq (%d) into 2 x cp = %d chunks: it must "
                            "divide", out->seq, 2 * cp);
    if (t5 && (out->dec_seq < 1 || out->dec_seq > out->seq || (sp && out->dec_seq % tp)))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.decoder_seq",
                            "t5: this executor runs a decoder_seq (%d) from 1 to seq (%d)%s",
                            out->dec_seq, out->seq,
                            sp ? ", divisible by tp with sequence parallelism" : "");
    if (sp && (out->seq / cp) % tp)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.sp",
                            "sequence parallelism needs tp=%d to divide seq / cp (%d)", tp,
                            out->seq / cp);
    return mp_moe_exec_dims(plan, shrink, out, err); /* the routed experts (exec/moe.h) */
}

mp_status mp_exec_stage_items(const mp_plan *plan, bool shrink, const mp_gpt_dims *d,
                              int vstage, int *begin, int *end, mp_error *err)
{
    const mp_parallel *par = &plan->config.parallel;
    int K = (int)(par->pp * (par->vpp > 1 ? par->vpp : 1)), L = d->layers;
    if (K <= 1) {
        *begin = *end = 0; /* the whole model */
        return MP_OK;
    }
    if (vstage < 0 || vstage >= K)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL, "virtual stage %d of %d",
                            vstage, K);
    if (!shrink && plan->n_stages == K) {
        /* the plan's own split (search's, possibly uneven) */
        *begin = plan->stages[vstage].begin;
        *end = plan->stages[vstage].end;
    } else {
        /* Megatron's split (even, or its first/last-stage one) of the model that runs (a
         * shrunk model has other layers than the plan's stages name); T5's at its split rank */
        /* (the account-for split may leave the first and last chunk the
         * embedding and the loss alone: L + 2 stages, as Megatron builds them) */
        bool acct = !shrink && (par->account_for_embedding || par->account_for_loss);
        if (L < K && !(acct && L + 2 >= K))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, par->vpp > 1 ? "parallel.vpp"
                                                                          : "parallel.pp",
                                "%d pipeline stages need at least as many layers (%d)", K, L);
        int64_t b, e;
        if (!shrink) {
            /* the plan's explicit layout (core/layout.h) or its default split, as the
             * planner costs it */
            mp_stage_range *r = malloc(sizeof *r * (size_t)K);
            if (!r)
                return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            mp_config_stages(&plan->config, K, r);
            b = r[vstage].begin;
            e = r[vstage].end;
            free(r);
        } else {
            mp_even_stage_items(L, d->t5 ? d->enc_layers : 0, K, par->vpp > 1 ? par->vpp : 1,
                                d->mtp_layers, vstage, &b, &e);
        }
        *begin = (int)b;
        *end = (int)e;
    }
    if (*begin < 0 || *end > L + 2 || *begin > *end)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "stages",
                            "stage %d holds items [%d, %d) of a model with items 0..%d",
                            vstage, *begin, *end, L + 1);
    return MP_OK;
}

int mp_exec_mtp_role(const mp_plan *plan, bool shrink, int vstage)
{
    const mp_parallel *par = &plan->config.parallel;
    int64_t K = par->pp * (par->vpp > 1 ? par->vpp : 1);
    int64_t at = shrink || K <= 1 ? -1 : mp_config_mtp_stage(&plan->config, K);
    if (at < 0 || at == K - 1)
        return 0;
    return vstage < at ? MP_MTP_BEFORE : vstage == at ? MP_MTP_ON : MP_MTP_AFTER;
}

/* Everything that can refuse a run from the plan and the options alone, so
 * that `exec --np` can refuse it once, before any rank starts. */
mp_status mp_exec_precheck(const mp_plan *plan, const mp_exec_opts *o, mp_gpt_dims *d, int *m,
                           mp_error *err)
{
    mp_status st = mp_exec_dims(plan, o->shrink, d, m, err);
    if (st)
        return st;
    const mp_parallel *par = &plan->config.parallel;
    for (int k = 0; k < (int)(par->pp * (par->vpp > 1 ? par->vpp : 1)); k++) {
        int b, e;
        if ((st = mp_exec_stage_items(plan, o->shrink, d, k, &b, &e, err)))
            return st;
    }
    {
        /* Megatron's standalone MTP stage (core/layout.h): the stages up to it
         * hold every block (the final norm on the last block's stage, as
         * Megatron places it with MTP), the ones after it none */
        int64_t K = par->pp * (par->vpp > 1 ? par->vpp : 1);
        int64_t at = o->shrink ? -1 : mp_config_mtp_stage(&plan->config, K);
        if (at >= 0 && at != K - 1) {
            if (mp_schedule_is_v(par->schedule) || par->schedule == MP_SCHED_DUALPIPE)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.schedule",
                                    "exec runs Megatron's standalone MTP stage (the layout's m "
                                    "on virtual stage %lld, the loss on %lld) with 1F1B or the "
                                    "interleaved schedules, not %s", (long long)at,
                                    (long long)(K - 1), mp_schedule_name(par->schedule));
            for (int k = (int)at + 1; k < (int)K; k++) {
                int b, e;
                if ((st = mp_exec_stage_items(plan, o->shrink, d, k, &b, &e, err)))
                    return st;
                if (b < e && (b <= d->layers || k < (int)K - 1))
                    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.pipeline_layout",
                                        "virtual stage %d, after the MTP layers' %lld, holds "
                                        "items [%d, %d): only the loss may follow them", k,
                                        (long long)at, b, e);
            }
        }
    }
    if (par->hsdp && par->zero == 3 && mp_zero_shard_ranks(&plan->config) < 2)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.hsdp",
                            "hybrid sharding's shard groups are the DP ranks of one scale-up "
                            "domain: %s's holds one group of tp=%lld, so nothing would be "
                            "sharded (drop hsdp)", plan->config.hw.name, (long long)par->tp);
    if (o->microbatches > 0)
        *m = o->microbatches;
    {
        /* the schedule must exist for these micro-batches (interleaving wants a
         * multiple of pp): refuse here, before any rank starts */
        mp_op_list ops = {0};
        st = mp_schedule_build(par->schedule, (int32_t)par->pp,
                               (int32_t)mp_schedule_chunks(par->schedule, par->vpp), *m, 0, &ops,
                               err);
        mp_op_list_free(&ops);
        if (st) {
            if (o->microbatches > 0)
                snprintf(err->field, sizeof err->field, "--micro-batches");
            return st;
        }
    }
    if (o->steps < 1 || o->steps > MP_EXEC_MAX_STEPS)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--steps", "steps must be 1..%d",
                            MP_EXEC_MAX_STEPS);
    if (o->check_every < 0)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--check-every",
                            "%d is not a number of steps", o->check_every);
    if (o->exact) {
        long tokens_total = (long)*m * (long)plan->config.parallel.dp * d->seq * d->micro_batch;
        long k = max_int(max_int(d->hidden, d->ffn),
                         max_int(3 * d->hidden, max_int(d->vocab, d->seq)));
        if (d->t5) /* the encoder output's gradient: every cross-attention's K|V */
            k = max_int((int)k, 2 * d->hidden * (d->layers - d->enc_layers));
        if (k < 2 * tokens_total)
            k = 2 * tokens_total;
        if (k < mp_moe_exact_terms(d))
            k = mp_moe_exact_terms(d);
        if (mp_dims_is_mla(d)) /* the latents' gradients: every head's columns */
            k = max_int((int)k, d->heads * max_int(d->nope_dim + d->rope_dim,
                                                   d->nope_dim + d->v_dim));
        if (k > MP_EXACT_MAX_TERMS)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--exact",
                                "exact mode needs every reduction to be at most %d terms long; "
                                "this run sums %ld (hidden %d, ffn %d, vocab %d, seq %d, 2 x %ld "
                                "tokens per step): use --shrink or a smaller plan",
                                MP_EXACT_MAX_TERMS, k, d->hidden, d->ffn, d->vocab, d->seq,
                                tokens_total);
    }
    return MP_OK;
}

