/* cost.c — item costs, stage costs and the estimate of one configuration
 * (docs/cost-model.md §6-7).
 *
 * Items (plan.h): 0 = embedding, 1..L = blocks, L+1 = final norm + head + loss.
 * A (virtual) stage costs the sum of its items. The step is the pipeline
 * makespan of the stages (closed form, pipeline.c) + the exposed DP gradient
 * reduction + the optimizer step. Memory per GPU is the most loaded pipeline
 * rank's weights, grads and optimizer states, its in-flight activations under
 * the schedule, and "other" (embedding/logit buffers, p2p and SP buffers, the
 * runtime reserve). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "planner/cost_memo.h"
#include "planner/pipeline_internal.h"
#include "planner/dualpipe_replay.h"
#include "planner/framework.h"
#include "planner/zbv_replay.h"
#include "sim/schedule_vorder.h"

/* How many TP ranks' shares of the (s/cp, b, h) activation one pipeline
 * transfer moves. Under SP the tensor is already this rank's (s/t, b, h)
 * (Megatron-Core schedules.py get_tensor_shapes). Without SP Megatron-LM
 * sends the whole tensor from every TP rank since its pipeline moved into
 * megatron/core (3c92fa93b5, 2023-03-23, removed the scatter/gather
 * optimisation; core_v0.15.0 p2p_communication.py sends tensor_shape as
 * given), so a TP rank moves t shares; the Megatron-LM of 2021 scattered it
 * over the TP group and gathered it after the receive
 * (--scatter-gather-tensors-in-pipeline, on by default since 72e4230bb5,
 * 2021-02-16), and DeepSpeed's pipeline engine partitions it
 * (PartitionedTensor, ds_pipe.c): one share, for the stacks of that time and
 * for rows that ran such code (training.p2p_scatter: vTrain's Megatron-
 * DeepSpeed, Korthikanti 2022's Megatron-LM). Plans written for the other
 * frameworks (ZeRO-2/3 or FSDP: parallel.zero) follow the same rule: DeepSpeed
 * refuses ZeRO-2/3 with its pipeline, and torchtitan's pipelining is not read
 * here. The rule reads no setting the cost memo blanks (cost_memo.h: zero is
 * one), since it shapes the memoized item details. */
double mp_p2p_whole_factor(const mp_training *t, bool sp, int64_t tp)
{
    if (sp || tp <= 1 || t->stack != MP_STACK_MEGATRON_LM || t->p2p_scatter)
        return 1.0;
    return (double)tp;
}

static double p2p_whole_factor(const mp_config *c)
{
    return mp_p2p_whole_factor(&c->training, c->parallel.sp, c->parallel.tp);
}

/* What an item costs, split the way the estimate reports time. */
typedef struct item_detail {
    double fwd_compute, bwd_compute;
    double sel_rec;    /* what selective recompute re-runs (its modules' forward) */
    double tp_f, tp_b, cp_f, cp_b;
    double ep_f, ep_b; /* of tp_f, tp_b: the MoE dispatch and combine */
    double mlp_f, mlp_b; /* of the compute: the MoE expert node (GEMMs, sorts, activation) */
    double mlp_w;        /* of mlp_b: its weight gradients */
    double wgrad;      /* weight-gradient GEMMs inside bwd_compute (ZB-H1's W) */
    double params;     /* parameters of the item on one GPU (after the TP split) */
    double expert_params; /* of which routed-expert parameters (sharded over edp) */
    double fp8_params;    /* of which GEMM weights with FP8 copies (fp8 precision) */
    double routed_act;    /* of act (but full recompute's): the routed tokens' bytes */
    double capacity_act;  /* of routed_act: above the mean load (capacity factor, imbalance) */
    double routed_freed, capacity_freed; /* of those, what selective recompute frees */
    double act[MP_RECOMPUTE_COUNT];
    double send_bytes;
    bool is_block;
} item_detail;

static void detail_block(const mp_config *c, int64_t block, item_detail *d)
{
    const mp_parallel *p = &c->parallel;
    mp_block_shape bs;
    mp_block_shape_of(&c->model, c->training.seq, block, &bs);
    mp_block_time bt;
    mp_block_time_of(c, &bs, &bt);
    memset(d, 0, sizeof *d);
    d->is_block = true;
    d->fwd_compute = bt.fwd_compute;
    d->bwd_compute = bt.bwd_compute;
    uint32_t mask = mp_recompute_modules_of(p, MP_RECOMPUTE_SELECTIVE);
    d->sel_rec = mp_block_modules_time(&bt, mask);
    d->tp_f = bt.tp_fwd;
    d->tp_b = bt.tp_bwd;
    d->cp_f = bt.cp_fwd;
    d->cp_b = bt.cp_bwd;
    d->ep_f = bt.ep_fwd;
    d->ep_b = bt.ep_bwd;
    d->mlp_f = bt.mlp_fwd;
    d->mlp_b = bt.mlp_bwd;
    d->mlp_w = bt.mlp_wgrad;
    d->wgrad = bt.wgrad;
    d->params = mp_block_params(&c->model, bs.kind) / (double)p->tp;
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
        d->act[r] = mp_block_act_bytes(&c->model, &bs, (double)p->micro_batch, (double)p->tp,
                                       (double)p->cp, p->sp && p->tp > 1, (mp_recompute)r,
                                       c->hw.flash_attention);
    mp_moe_item_adjust(c, &bs, &d->params, &d->expert_params, d->act);
    if (bs.kind == MP_BLOCK_MOE) {
        d->routed_act = mp_moe_act_bytes(c, &bs) - mp_fp8_routed_saving(c, &bs);
        d->capacity_act = mp_moe_capacity_bytes(c, &bs);
    }
    /* SwiGLU inputs stored in FP8 (training.fp8_act_cache; the routed
     * experts' are in mp_moe_act_bytes already) */
    double cached = mp_act_cache_saving(c, &bs);
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
        if (r != MP_RECOMPUTE_FULL)
            d->act[r] -= cached;
    if (mp_fp8_on(c)) {
        /* FP8 copies of the block's weights (its norms' few parameters
         * included); the GEMM inputs saved in FP8 (fp8.c) */
        d->fp8_params = d->params;
        double saved = mp_fp8_act_saving(c, &bs);
        for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
            if (r != MP_RECOMPUTE_FULL)
                d->act[r] -= saved;
    }
    /* selective: what its modules free, from what no recompute keeps (the
     * attention core's scores alone by default, as mp_block_act_bytes has it) */
    d->act[MP_RECOMPUTE_SELECTIVE] =
        d->act[MP_RECOMPUTE_NONE] - mp_block_modules_act_bytes(c, &bs, mask);
    if (bs.kind == MP_BLOCK_MOE && (mask & (1u << MP_RCM_MOE))) {
        d->routed_freed = d->routed_act;
        d->capacity_freed = d->capacity_act;
    } else if (bs.kind == MP_BLOCK_MOE && (mask & (1u << MP_RCM_MOE_ACT))) {
        d->routed_freed = mp_moe_act_output_bytes(c, &bs);
    }
    /* a T5 decoder stage hands on the encoder's output with its own stream
     * (Megatron's encoder-decoder pipeline; the executor sends the same) */
    d->send_bytes = (double)p->micro_batch * (bs.s + bs.s_cross) / (double)p->cp *
                    (double)c->model.hidden * mp_dtype_bytes(c->training.precision) /
                    (double)p->tp * p2p_whole_factor(c);
}

/* A TP rank's share of one copy of the word table: the vocabulary padded to
 * 128 t rows (mp_padded_vocab), split over t. Every copy Megatron keeps has
 * those rows: the last rank's tied copy is the output layer, built with
 * padded_vocab_size (gpt_model.py: ColumnParallelLinear(hidden,
 * self.vocab_size)), and an MTP stage's copy is the embedding's. */
static double word_table_copy(const mp_config *c)
{
    return mp_padded_vocab(c->model.vocab, c->parallel.tp) * (double)c->model.hidden /
           (double)c->parallel.tp;
}

/* The last pipeline rank's copy of tied word embeddings, per GPU, with
 * `ranks` pipeline ranks: its weight is allocated unless that rank also
 * holds the embedding, and its gradient is all-reduced with the first
 * rank's table over the embedding group. None untied or without a pipeline. */
static double tied_copy_params(const mp_config *c, int64_t ranks)
{
    return c->model.tied_embeddings && ranks > 1 ? word_table_copy(c) : 0.0;
}

static void detail_edges(const mp_config *c, item_detail *emb, item_detail *head)
{
    const mp_parallel *p = &c->parallel;
    const mp_model *m = &c->model;
    double t = (double)p->tp, h = (double)m->hidden, b = (double)p->micro_batch;
    double dt = mp_dtype_bytes(c->training.precision);
    mp_edge_time et;
    mp_block_shape first, last;
    mp_block_shape_of(m, c->training.seq, 1, &first);
    mp_block_shape_of(m, c->training.seq, mp_model_blocks(m), &last);
    double sb_first = b * first.s / (double)p->cp, sb_last = b * last.s / (double)p->cp;

    memset(emb, 0, sizeof *emb);
    mp_embedding_time_of(c, &et);
    emb->fwd_compute = et.fwd_compute;
    emb->bwd_compute = et.bwd_compute;
    emb->tp_f = et.tp_fwd;
    emb->tp_b = et.tp_bwd;
    emb->wgrad = et.wgrad;
    /* a rank's share as Megatron builds it: 1/t of the word table, whose
     * rows are the vocabulary padded to a multiple of 128t (Megatron-LM
     * megatron/core/tokenizers/utils/build_tokenizer.py lines 133-146;
     * gpt_builders.py line 89: vocab_size=args.padded_vocab_size), and the
     * learned position table whole on every TP rank (a torch.nn.Embedding,
     * not split: megatron/core/models/common/embeddings/
     * language_model_embedding.py line 71) */
    double words = (double)m->vocab * h, pos_table = 0.0;
    if (m->position == MP_POS_LEARNED)
        pos_table = (double)(c->training.seq > 0 ? c->training.seq : m->seq) * h;
    emb->params = (mp_embedding_params(m, c->training.seq) - words - pos_table +
                   mp_padded_vocab(m->vocab, p->tp) * h) / t + pos_table;
    /* embedding dropout mask (Korthikanti 2022 §4.3: sbh, split with SP) */
    double emb_act = (mp_model_hidden_dropout(m) > 0.0 ? sb_first * h : 0.0) / (p->sp ? t : 1.0);
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
        emb->act[r] = emb_act;
    emb->send_bytes = sb_first * h * dt / t * p2p_whole_factor(c);

    memset(head, 0, sizeof *head);
    mp_head_time_of(c, &et);
    head->fwd_compute = et.fwd_compute;
    head->bwd_compute = et.bwd_compute;
    head->tp_f = et.tp_fwd;
    head->tp_b = et.tp_bwd;
    head->wgrad = et.wgrad;
    /* the output layer's rows: the padded vocabulary (above) */
    head->params = (mp_head_params(m, false) +
                    (m->tied_embeddings ? 0.0 : (mp_padded_vocab(m->vocab, p->tp) - (double)m->vocab) * h)) / t;
    /* final norm input, head input and fp32 logits (Korthikanti §4.3: 4sbh/t(1 + V/h));
     * Transformer Engine's fused cross entropy keeps the bf16 logits instead
     * and writes their gradient over them */
    double V = mp_padded_vocab(m->vocab, p->tp);
    double head_act = 2.0 * sb_last * h / (p->sp ? t : 1.0) + 2.0 * sb_last * h / t +
                      (c->training.te_cross_entropy ? 2.0 : 4.0) * sb_last * V / t;
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
        head->act[r] = head_act;
}

static void item_cost_from(const mp_config *c, const item_detail *d, mp_item_cost *out)
{
    out->fwd = d->fwd_compute + d->tp_f + d->cp_f;
    double bwd = d->bwd_compute + d->tp_b + d->cp_b;
    out->bwd[MP_RECOMPUTE_NONE] = bwd;
    out->bwd[MP_RECOMPUTE_SELECTIVE] = bwd + (d->is_block ? d->sel_rec : 0.0);
    out->bwd[MP_RECOMPUTE_FULL] = bwd + (d->is_block ? out->fwd : 0.0);
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
        out->act_bytes[r] = d->act[r];
    out->static_bytes = d->params * mp_static_bytes_per_param(c) +
                        d->fp8_params * mp_fp8_weight_net_bytes(c);
    out->send_bytes = d->send_bytes;
}

/* What of the multi-token-prediction modules a stage runs: all of them
 * (beside the loss, Megatron's default), or, with Megatron's standalone MTP
 * stage (core/layout.h), the modules on theirs and the head's part, which
 * stays with the loss, on the last. */
typedef enum mtp_part { MTP_ALL, MTP_MODULES, MTP_HEAD } mtp_part;

/* The multi-token-prediction modules (mtp.c): per module, a block like the
 * last one (its time, weights, activations), the 2h -> h projection, two
 * more norms, and the output head's GEMM, cross entropy and logits again; the
 * embedding and the head are shared, but a stage without the embedding keeps
 * a copy for the modules' lookups (Megatron's, as for tied embeddings; none
 * where one rank holds both ends, DualPipe's). copy: that stage is not the
 * embedding's and keeps no tied copy of its own already. */
static void detail_mtp(const mp_config *c, const item_detail *last_block, mtp_part part,
                       bool copy, item_detail *out)
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    double n = (double)m->mtp_layers, t = (double)p->tp, h = (double)m->hidden;
    double dt = mp_dtype_bytes(c->training.precision);
    mp_block_shape last;
    mp_block_shape_of(m, c->training.seq, mp_model_blocks(m), &last);
    double sb = (double)p->micro_batch * last.s / (double)p->cp;
    mp_edge_time head;
    mp_head_time_of(c, &head);
    double proj = mp_linear_gemm_time(c, sb, h / t, 2.0 * h); /* a linear layer */
    double mods = part == MTP_HEAD ? 0.0 : n, heads = part == MTP_MODULES ? 0.0 : n;
    memset(out, 0, sizeof *out);
    out->fwd_compute = mods * (last_block->fwd_compute + proj) + heads * head.fwd_compute;
    out->bwd_compute = mods * (last_block->bwd_compute + 2.0 * proj) + heads * head.bwd_compute;
    out->wgrad = mods * (last_block->wgrad + proj) + heads * head.wgrad;
    out->tp_f = mods * last_block->tp_f + heads * head.tp_fwd;
    out->tp_b = mods * last_block->tp_b + heads * head.tp_bwd;
    out->cp_f = mods * last_block->cp_f;
    out->cp_b = mods * last_block->cp_b;
    out->ep_f = mods * last_block->ep_f;
    out->ep_b = mods * last_block->ep_b;
    out->params = mods * (last_block->params + (3.0 * h + 2.0 * h * h / t));
    if (copy && part != MTP_HEAD)
        out->params += word_table_copy(c);
    out->expert_params = mods * last_block->expert_params;
    out->fp8_params = mods * last_block->fp8_params;
    out->routed_act = mods * last_block->routed_act;
    out->capacity_act = mods * last_block->capacity_act;
    /* the two normalised inputs and their concatenation and the final
     * norm's input (bytes of the precision, split over TP with SP), with the
     * modules; the head's input and fp32 logits as the head item counts
     * them, with the head */
    double V = mp_padded_vocab(m->vocab, p->tp), spl = p->sp ? t : 1.0;
    double own = mods * (4.0 * sb * h * dt + sb * h * dt) / spl +
                 heads * (2.0 * sb * h / t + 4.0 * sb * V / t);
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
        out->act[r] = mods * last_block->act[r] + own;
}

/* Whether the last stage's modules keep a copy of the embedding: pp > 1,
 * untied (tied: the head's copy serves), and not DualPipe or DualPipeV,
 * which put the first stage (the embedding) and the last (the head and the
 * modules) on one rank, sharing the embedding with the modules physically
 * (DeepSeek-V3 report §3.2.3, "Shared Embedding and Output Head for
 * Multi-Token Prediction"). */
static bool mtp_last_copy(const mp_config *c)
{
    const mp_parallel *p = &c->parallel;
    bool same_rank = p->schedule == MP_SCHED_DUALPIPE || p->schedule == MP_SCHED_DUALPIPEV;
    return p->pp > 1 && !c->model.tied_embeddings && !same_rank;
}

mp_status mp_mtp_item_cost(const mp_config *c, const mp_plan *plan, mp_item_cost *out,
                           mp_error *err)
{
    memset(out, 0, sizeof *out);
    if (!mp_model_has_mtp(&c->model))
        return MP_OK;
    /* checked as build_pipe checks it: a plan's own stages are its split;
     * without them the derived split's refusals hold (it passed every
     * config as if stages were given, so 61 layers on pp 16 under 1F1B,
     * which only the V's own split allows, was costed) */
    mp_status st = mp_config_check_with_stages(c, plan && plan->n_stages != 0, err);
    if (st != MP_OK)
        return st;
    item_detail last, mtp;
    detail_block(c, mp_model_blocks(&c->model), &last);
    detail_mtp(c, &last, MTP_ALL, mtp_last_copy(c), &mtp);
    item_cost_from(c, &mtp, out);
    return MP_OK;
}

/* Where the modules run: the last pipeline stage, Megatron's default (its
 * post-process part, beside the head), so here folded into the head item;
 * an explicit layout that puts its m's on a stage before (Megatron's
 * standalone MTP stage) has build_pipe move them there
 * (place_mtp_standalone). */
static void place_mtp(const mp_config *c, item_detail *det, int64_t L)
{
    if (!mp_model_has_mtp(&c->model) || c->model.arch == MP_ARCH_T5)
        return;
    item_detail mtp, *at = &det[L + 1];
    detail_mtp(c, &det[L], MTP_ALL, mtp_last_copy(c), &mtp);
    at->fwd_compute += mtp.fwd_compute;
    at->bwd_compute += mtp.bwd_compute;
    at->wgrad += mtp.wgrad;
    at->tp_f += mtp.tp_f;
    at->tp_b += mtp.tp_b;
    at->cp_f += mtp.cp_f;
    at->cp_b += mtp.cp_b;
    at->ep_f += mtp.ep_f;
    at->ep_b += mtp.ep_b;
    at->params += mtp.params;
    at->expert_params += mtp.expert_params;
    at->fp8_params += mtp.fp8_params;
    at->routed_act += mtp.routed_act;
    at->capacity_act += mtp.capacity_act;
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
        at->act[r] += mtp.act[r];
}

/* What the estimate takes from the model and training alone, kept once per
 * memo (mp_cost_memo_base_slot): each block's kind (block_kind), the model's
 * parameters and FLOPs, and the recomputed forward FLOPs of each uniform
 * recompute choice (recompute_flops; have_extra: computed). */
typedef struct model_facts {
    bool have_flops; /* params and model_flops computed */
    double params, model_flops;
    double extra[MP_RECOMPUTE_COUNT];
    bool have_extra[MP_RECOMPUTE_COUNT];
    uint8_t kind[MP_MAX_LAYERS];
} model_facts;

static int block_kind(const mp_model *m, int64_t block0);

/* c's model facts from memo (NULL without one, or for T5, whose blocks are
 * not of block_kind's kinds). */
static model_facts *facts_of(const mp_config *c, mp_cost_memo *memo)
{
    int64_t L = mp_model_blocks(&c->model);
    if (!memo || c->model.arch == MP_ARCH_T5 || L > MP_MAX_LAYERS)
        return NULL;
    bool filled = false;
    model_facts *mf = mp_cost_memo_base_slot(memo, c, sizeof *mf, &filled);
    if (!mf || filled)
        return mf;
    /* the FLOPs once a configuration has passed the check (estimate) */
    mf->have_flops = false;
    memset(mf->have_extra, 0, sizeof mf->have_extra);
    for (int64_t i = 0; i < L; i++)
        mf->kind[i] = (uint8_t)block_kind(&c->model, i);
    return mf;
}

/* The details of a model's items by kind: the embedding, the head and one
 * block of each kind (dense or MoE, full or windowed attention), costed on
 * the kind's first block; what a memo keeps (cost_memo.h). */
typedef struct detail_set {
    item_detail emb, head, kind[4];
    bool have[4];
} detail_set;

static int block_kind(const mp_model *m, int64_t block0)
{
    return (mp_model_block_is_moe(m, block0) ? 2 : 0) + (mp_model_block_is_windowed(m, block0) ? 1 : 0);
}

static void detail_kinds(const mp_config *c, int64_t L, detail_set *ds)
{
    detail_edges(c, &ds->emb, &ds->head);
    memset(ds->have, 0, sizeof ds->have);
    for (int64_t i = 1; i <= L; i++) {
        int k = block_kind(&c->model, i - 1);
        if (!ds->have[k]) {
            detail_block(c, i, &ds->kind[k]);
            ds->have[k] = true;
        }
    }
}

/* The block kinds' details of c, from the memo when it holds them, else
 * computed into *local (no memo, or no room in it) */
static const detail_set *detail_set_of(const mp_config *c, int64_t L, mp_cost_memo *memo,
                                       detail_set *local)
{
    bool filled = false;
    detail_set *ds = mp_cost_memo_slot(memo, c, sizeof *ds, &filled);
    if (!ds)
        ds = local;
    if (!filled)
        detail_kinds(c, L, ds);
    return ds;
}

/* DeepSpeed's BF16 optimizer (BigScience's Megatron-DeepSpeed under bf16)
 * keeps fp32 gradients of its own: after every micro-batch's backward,
 * update_hp_grads runs hp_grad.add_(lp.grad.to(fp32)) for each parameter
 * (deepspeed/runtime/bf16_optimizer.py, microsoft/DeepSpeed 56c52238, 2022):
 * the cast reads 2 bytes and writes 4, the add reads 4 + 4 and writes 4,
 * 18 bytes per parameter at HBM bandwidth, in each micro-batch's backward.
 * Megatron-LM accumulates into its fp32 main_grad inside the weight-gradient
 * GEMM (gradient accumulation fusion) and pays no separate pass. The last
 * rank's copy of tied word embeddings is a parameter of its own there. */
bool mp_ds_bf16_optimizer(const mp_config *c)
{
    return c->training.stack == MP_STACK_BIGSCIENCE_MDS && c->training.precision == MP_DTYPE_BF16;
}

double mp_ds_bf16_accumulate_time(const mp_config *c, double params)
{
    if (!mp_ds_bf16_optimizer(c))
        return 0.0;
    return mp_membound_time(&c->hw, 18.0 * params, 2.0);
}

/* The gradient accumulation passes of DeepSpeed's engine: the BF16
 * optimizer's fp32 one, or autograd's in-place add (ds_pipe.c); none on
 * Megatron-LM. */
static void add_ds_accumulation(const mp_config *c, item_detail *det, int64_t L)
{
    if (c->training.stack == MP_STACK_MEGATRON_LM)
        return;
    double tied = tied_copy_params(c, c->parallel.pp);
    for (int64_t i = 0; i <= L + 1; i++) {
        double params = det[i].params + (i == L + 1 ? tied : 0.0);
        det[i].bwd_compute +=
            mp_ds_bf16_accumulate_time(c, params) + mp_ds_grad_accumulate_time(c, params);
    }
}

static void fill_details_of_kind(const mp_config *c, mp_cost_memo *memo,
                                 const model_facts *mf, item_detail *det);

/* Fills details for all L+2 items, computing each distinct block shape once
 * (and, with a memo, once per search); the per-micro-batch passes of the
 * software that ran (add_ds_accumulation) after the memo, which keeps what
 * the kinds cost alone. */
static void fill_details(const mp_config *c, mp_cost_memo *memo, const model_facts *mf,
                         item_detail *det)
{
    fill_details_of_kind(c, memo, mf, det);
    add_ds_accumulation(c, det, mp_model_blocks(&c->model));
}

static void fill_details_of_kind(const mp_config *c, mp_cost_memo *memo,
                                 const model_facts *mf, item_detail *det)
{
    int64_t L = mp_model_blocks(&c->model);
    if (c->model.arch == MP_ARCH_T5) {
        detail_edges(c, &det[0], &det[L + 1]);
        item_detail enc, dec;
        int64_t ne = c->model.encoder_layers;
        detail_block(c, 1, &enc);
        if (L > ne)
            detail_block(c, ne + 1, &dec);
        for (int64_t i = 1; i <= L; i++)
            det[i] = i <= ne ? enc : dec;
        return;
    }
    detail_set local;
    const detail_set *ds = detail_set_of(c, L, memo, &local);
    det[0] = ds->emb;
    det[L + 1] = ds->head;
    for (int64_t i = 1; i <= L; i++)
        det[i] = ds->kind[mf ? mf->kind[i - 1] : block_kind(&c->model, i - 1)];
    place_mtp(c, det, L);
}

mp_status mp_item_costs(const mp_config *c, mp_item_cost *items, mp_error *err)
{
    mp_status st = mp_config_check(c, err);
    if (st != MP_OK)
        return st;
    int64_t L = mp_model_blocks(&c->model);
    item_detail *det = malloc(sizeof *det * (size_t)(L + 2));
    if (!det)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for %lld items",
                            (long long)(L + 2));
    fill_details(c, NULL, NULL, det);
    for (int64_t i = 0; i < L + 2; i++)
        item_cost_from(c, &det[i], &items[i]);
    free(det);
    return MP_OK;
}

/* ---- stages ---------------------------------------------------------- */

typedef struct stage_sum {
    double fwd_compute, bwd_compute, recompute, tp, cp, wgrad;
    double tp_f, tp_b, cp_f, cp_b; /* exposed comm inside F / inside B (incl. recompute) */
    double ep_f, ep_b;    /* of tp_f, tp_b: the MoE dispatch and combine */
    double mlp_f, mlp_b;  /* of the compute: the MoE expert node (GEMMs, sorts, activation) */
    double mlp_w;         /* of mlp_b: its weight gradients */
    double edge_f, edge_b; /* of fwd, bwd: the embedding's and the head's (no MTP) */
    double emb_f, emb_b;   /* of edge_f, edge_b: the embedding's */
    double fwd, bwd;      /* totals incl. exposed comm and recompute */
    double dp_f, dp_b;    /* ZeRO-2/3: exposed DP comm per micro-batch inside F / B */
    double params, act, act_edge, act_block_none, send_bytes;
    double act_emb;       /* of act_edge: the embedding's (its dropout mask) */
    double expert_params; /* of params: routed experts (optimizer sharded over edp) */
    double fp8_params;    /* of params: with FP8 copies */
    double routed_act;    /* of act: the routed tokens' */
    double capacity_act;  /* of routed_act: above the mean load */
    double wide_send;     /* > 0: the standalone MTP stage's concatenated transfers
                           * (place_mtp_standalone), bytes each way per pass */
    int64_t blocks;
    bool has_embedding, has_head;
} stage_sum;

static mp_recompute item_recompute(const mp_config *c, const mp_plan *plan, int64_t i)
{
    if (plan && plan->has_layer_recompute && i >= 0 && i < MP_MAX_LAYERS + 2 &&
        plan->layer_recompute[i] < MP_RECOMPUTE_COUNT)
        return (mp_recompute)plan->layer_recompute[i];
    return c->parallel.recompute;
}

static void sum_stage(const mp_config *c, const mp_plan *plan, const item_detail *det,
                      int64_t begin, int64_t end, int64_t L, stage_sum *s)
{
    memset(s, 0, sizeof *s);
    for (int64_t i = begin; i < end; i++) {
        const item_detail *d = &det[i];
        mp_recompute r = d->is_block ? item_recompute(c, plan, i) : MP_RECOMPUTE_NONE;
        double rec = 0.0, rec_comm_tp = 0.0, rec_comm_cp = 0.0;
        if (r == MP_RECOMPUTE_SELECTIVE)
            rec = d->sel_rec;
        else if (r == MP_RECOMPUTE_FULL) {
            rec = d->fwd_compute;
            rec_comm_tp = d->tp_f;
            rec_comm_cp = d->cp_f;
        }
        s->fwd_compute += d->fwd_compute;
        s->bwd_compute += d->bwd_compute;
        s->recompute += rec;
        s->tp += d->tp_f + d->tp_b + rec_comm_tp;
        s->cp += d->cp_f + d->cp_b + rec_comm_cp;
        s->tp_f += d->tp_f;
        s->tp_b += d->tp_b + rec_comm_tp;
        s->cp_f += d->cp_f;
        s->cp_b += d->cp_b + rec_comm_cp;
        s->ep_f += d->ep_f;
        s->ep_b += d->ep_b + (r == MP_RECOMPUTE_FULL ? d->ep_f : 0.0);
        s->mlp_f += d->mlp_f;
        s->mlp_b += d->mlp_b;
        s->mlp_w += d->mlp_w;
        s->wgrad += d->wgrad;
        s->fwd += d->fwd_compute + d->tp_f + d->cp_f;
        s->bwd += d->bwd_compute + d->tp_b + d->cp_b + rec + rec_comm_tp + rec_comm_cp;
        s->params += d->params;
        s->expert_params += d->expert_params;
        s->fp8_params += d->fp8_params;
        if (d->is_block && r != MP_RECOMPUTE_FULL) {
            bool sel = r == MP_RECOMPUTE_SELECTIVE;
            s->routed_act += d->routed_act - (sel ? d->routed_freed : 0.0);
            s->capacity_act += d->capacity_act - (sel ? d->capacity_freed : 0.0);
        }
        if (d->is_block) {
            s->blocks++;
            s->act += d->act[r];
            if (d->act[MP_RECOMPUTE_NONE] > s->act_block_none)
                s->act_block_none = d->act[MP_RECOMPUTE_NONE];
        } else {
            s->act_edge += d->act[MP_RECOMPUTE_NONE];
            if (i == 0)
                s->act_emb += d->act[MP_RECOMPUTE_NONE];
        }
        if (!d->is_block && d->ep_f <= 0.0) {
            s->edge_f += d->fwd_compute + d->tp_f + d->cp_f;
            s->edge_b += d->bwd_compute + d->tp_b + d->cp_b;
            if (i == 0) {
                s->emb_f += d->fwd_compute + d->tp_f + d->cp_f;
                s->emb_b += d->bwd_compute + d->tp_b + d->cp_b;
            }
        }
        if (i == 0)
            s->has_embedding = true;
        if (i == L + 1)
            s->has_head = true;
        s->send_bytes = d->send_bytes;
    }
}

/* Adds sign times a detail that is not a block (no recompute) to a stage's
 * sums, as sum_stage would; its activations with the edges' (held for one
 * micro-batch, as the last stage's head runs each F's B next), or stashed
 * as a block's for every micro-batch in flight. */
static void stage_add_edge(stage_sum *s, const item_detail *d, double sign, bool stashed)
{
    s->fwd_compute += sign * d->fwd_compute;
    s->bwd_compute += sign * d->bwd_compute;
    s->tp += sign * (d->tp_f + d->tp_b);
    s->cp += sign * (d->cp_f + d->cp_b);
    s->tp_f += sign * d->tp_f;
    s->tp_b += sign * d->tp_b;
    s->cp_f += sign * d->cp_f;
    s->cp_b += sign * d->cp_b;
    s->ep_f += sign * d->ep_f;
    s->ep_b += sign * d->ep_b;
    s->mlp_f += sign * d->mlp_f;
    s->mlp_b += sign * d->mlp_b;
    s->mlp_w += sign * d->mlp_w;
    s->wgrad += sign * d->wgrad;
    s->fwd += sign * (d->fwd_compute + d->tp_f + d->cp_f);
    s->bwd += sign * (d->bwd_compute + d->tp_b + d->cp_b);
    s->params += sign * d->params;
    s->expert_params += sign * d->expert_params;
    s->fp8_params += sign * d->fp8_params;
    if (stashed)
        s->act += sign * d->act[MP_RECOMPUTE_NONE];
    else
        s->act_edge += sign * d->act[MP_RECOMPUTE_NONE];
}

/* Time of one p2p transfer of bytes between pipeline neighbours. */
static double p2p_time(const mp_config *c, double bytes)
{
    if (c->parallel.pp <= 1)
        return 0.0;
    mp_group_place g;
    mp_group_place_of(c, MP_GROUP_PP, &g);
    return c->hw.p2p_host_kernels * c->hw.kernel_overhead + mp_coll_time(&c->hw, &g, MP_COLL_P2P, bytes);
}

/* The transfers on a rank's critical path per micro-batch and chunk: one
 * after its forward and one after its backward (Megatron's batched
 * send/receive), two each on DeepSpeed's pipeline engine (ds_pipe.c). */
static double pass_p2p(const mp_config *c, double bytes)
{
    if (c->parallel.pp <= 1)
        return 0.0;
    return 2.0 * mp_ds_p2p_transfers_per_pass(c) * p2p_time(c, bytes);
}

static void p2p_link(const mp_config *c, double *latency, double *bw)
{
    mp_group_place g;
    mp_group_place_of(c, MP_GROUP_PP, &g);
    const mp_hw *hw = &c->hw;
    double f = g.cross_fraction;
    double up = hw->scale_up.bw_per_gpu * hw->scale_up.efficiency;
    double out = hw->scale_out.bw_per_gpu * hw->scale_out.efficiency;
    *latency = hw->p2p_host_kernels * hw->kernel_overhead +
               2.0 * (f * hw->scale_out.latency + (1.0 - f) * hw->scale_up.latency);
    double inv = (f > 0.0 ? f / out : 0.0) + (1.0 - f) / up;
    *bw = inv > 0.0 ? 1.0 / inv : up;
}

/* Megatron-Core's synchronous interleaved schedule (no
 * --overlap-p2p-communication): its transfers batched (sim/schedule.c
 * build_interleaved_batched). */
static bool batched_p2p(const mp_config *c)
{
    return c->parallel.pp > 1 &&
           mp_schedule_batched_p2p(c->parallel.schedule, (int32_t)c->parallel.vpp,
                                   c->parallel.p2p_overlap);
}

/* Megatron-Core's interleaved schedule with --overlap-p2p-communication:
 * each transfer posted after its pass and waited on before the pass that
 * needs it (sim/schedule.c build_interleaved). */
static bool overlapped_p2p(const mp_config *c)
{
    return c->parallel.pp > 1 && c->parallel.vpp > 1 && c->parallel.p2p_overlap &&
           c->parallel.schedule == MP_SCHED_INTERLEAVED;
}

/* The p2p time a rank's steady state spends on one pass of a chunk (its
 * forward and its backward, comm = both transfers). Megatron waits on
 * synchronous p2p where it is posted: all of it, on 1F1B one transfer after
 * the forward (send_forward_recv_backward) and one after the backward
 * (send_backward_recv_forward). Interleaved 1F1B without the overlap runs F
 * and B and only then one batch holding the forward's output, the
 * backward's input gradient and the next two inputs (Megatron-LM
 * schedules.py, forward_backward_pipelining_with_interleaving, the steady
 * state's send_forward_backward_recv_forward_backward): the two sends go to
 * different neighbours on their own links and the receives come from the
 * neighbours' batches of the same round, so a pass waits for one transfer,
 * comm / 2. With
 * --overlap-p2p-communication (interleaved 1F1B only; Megatron-LM
 * megatron/core/pipeline_parallel/schedules.py,
 * forward_backward_pipelining_with_interleaving) a forward's send/receive is
 * posted before the backward that follows and waited on after it, a
 * backward's before the next forward: each transfer runs beside the other
 * direction's compute, which loses the SMs of NCCL's p2p kernel meanwhile
 * (contention.c). The fill and drain keep their transfers on the critical
 * path, a stage cannot start what has not arrived: the first micro-batch's
 * 2(p v - 1) hops (estimate, pipeline.c mp_pipeline_makespan_overlap). */
static double round_p2p(const mp_config *c, const stage_sum *ss, double comm)
{
    if (batched_p2p(c))
        return comm / 2.0;
    if (!(comm > 0.0) || !c->parallel.p2p_overlap || c->parallel.schedule != MP_SCHED_INTERLEAVED)
        return comm;
    double share = mp_comm_sm_share(c, MP_COMM_NCCL);
    return mp_overlap_excess(comm / 2.0, ss->bwd, share) + mp_overlap_excess(comm / 2.0, ss->fwd, share);
}

/* Everything the estimate and the stage costs share. */
typedef struct pipe_model {
    int64_t p, v, m, n;
    mp_schedule_kind sched; /* places chunk ch of rank r on stage rank_stage() */
    double p2p_bytes;       /* activation (or its gradient) crossing a stage boundary */
    double boundary_bytes;  /* a TP rank's share of that activation (p2p_whole_factor) */
    stage_sum *st;          /* n stages */
    double dp_time, dp_exposed, optimizer, tied_sync;
    /* aligned per-chunk DP (aligned_chunks) for the simulator: */
    bool dp_aligned, dp_tail;
    double dp_gather, dp_gather_exposed, dp_bucket, dp_sm_r, dp_sm_a;
    double dp_gather_sync;  /* param_gather_sync's all-gather, exposed whole */
    bool dp_gather_opt;     /* overlap_param_gather_with_optimizer_step in effect */
    bool dp_rank_whole;     /* 1F1B on Megatron-LM: ranks > 0 reduce one bucket (rank_whole_reduce) */
    double dp_red0;         /* then rank 0's exposed reduction */
    double params_rank_max;
    double tied_copy;       /* the head's copy of tied word embeddings (p > 1), per GPU */
    double expert_rank_max; /* routed-expert parameters of that rank */
    double block_params;    /* one block's parameters on a GPU (ZeRO-3's working set) */
    /* deferred output-layer wgrad (defer_wgrad_of): the head stage's per
     * micro-batch weight-gradient GEMM held back, for how many micro-batches */
    int64_t defer_stage, defer_mb;
    double defer_w, defer_hold; /* and the bytes each held micro-batch keeps */
    /* ZB-V: its step from its order (zbv_span) as the DP windows found it
     * (v_replay_windows), for the op times whose hash is zbv_key; < 0: none */
    double zbv_span;
    uint64_t zbv_key;
} pipe_model;

/* The stage chunk ch of pipeline rank r runs (c*p + r; V schedules: r, 2p-1-r). */
static int64_t rank_stage(const pipe_model *pm, int64_t r, int64_t ch)
{
    return mp_schedule_stage(pm->sched, pm->p, r, ch);
}

/* One DP collective of a ZeRO-sharded part: the routed experts' share over
 * the expert-DP ranks that hold the same experts (exec's shard.c; AutoModel
 * leaves them out of the block's FSDP group), the rest over the shard group. */
static double zero_coll(const mp_config *c, const mp_group_place *dpg,
                        const mp_group_place *edpg, mp_coll_kind k, double params,
                        double experts, double bytes)
{
    return mp_coll_time(&c->hw, dpg, k, (params - experts) * bytes) +
           mp_coll_time(&c->hw, edpg, k, experts * bytes);
}

/* FSDP2 under torch.distributed.pipelining (zero_runtime fsdp2, pp > 1).
 * The pipeline stage turns off FSDP's reshard-after-backward and gradient
 * sync for every backward and runs FSDP's post-backward by hand after the
 * last one (torch/distributed/pipelining/stage.py,
 * backward_maybe_with_nosync); NeMo AutoModel also sets
 * reshard_after_forward = not pp_enabled (components/moe/parallelizer.py).
 * So each chunk's weights are all-gathered once per step, at its first
 * forward, and kept; its gradients accumulate unsharded in the reduce type
 * (FSDPParam.to_accumulated_grad_if_needed) and are reduce-scattered once,
 * after its last backward. The gathers are prefetched block by block under
 * the first micro-batch's forward and the reduce-scatter runs under the
 * remaining backward, but for one block's share each; nothing is paid per
 * micro-batch. */
static void fsdp2_microbatch_dp(const mp_config *c, const mp_group_place *dpg,
                                const mp_group_place *edpg, pipe_model *pm);

static void fsdp2_pipelined_dp(const mp_config *c, const mp_group_place *dpg,
                               const mp_group_place *edpg, pipe_model *pm)
{
    const mp_parallel *pp = &c->parallel;
    if (pp->fsdp_microbatch_sync) {
        fsdp2_microbatch_dp(c, dpg, edpg, pm);
        return;
    }
    double dt = mp_dtype_bytes(c->training.precision), gb = mp_grad_reduce_bytes(c);
    double P = pm->params_rank_max, Pe = pm->expert_rank_max;
    double ag = zero_coll(c, dpg, edpg, MP_COLL_ALLGATHER, P, Pe, dt);
    double rs = zero_coll(c, dpg, edpg, MP_COLL_REDUCESCATTER, P, Pe, gb);
    double blocks = 0.0, fwd_window = 0.0, bwd_window = 0.0;
    for (int64_t ch = 0; ch < pm->v; ch++) {
        const stage_sum *ss = &pm->st[rank_stage(pm, 0, ch)];
        blocks += (double)ss->blocks;
        fwd_window += ss->fwd;
        bwd_window += ss->bwd;
    }
    double share = blocks > 0.0 ? 1.0 / blocks : 1.0;
    pm->dp_time = ag + rs;
    /* the first block's share of each is exposed; the rest overlaps the
     * compute, which NCCL's kernels slow while they run (SM contention) */
    double sm = mp_comm_sm_share(c, MP_COMM_NCCL);
    pm->dp_exposed = pp->dp_overlap
                         ? share * ag + mp_overlap_excess((1.0 - share) * ag, fwd_window, sm) +
                               share * rs + mp_overlap_excess((1.0 - share) * rs, bwd_window, sm)
                         : ag + rs;
    pm->tied_sync = 0.0;
}

/* FSDP2 under pipelining that syncs every micro-batch (fsdp_microbatch_sync):
 * the stage's module is not itself an FSDP unit, so
 * torch.distributed.pipelining's backward_maybe_with_nosync runs a plain
 * backward and FSDP2 keeps its defaults, reshard_after_backward and
 * requires_gradient_sync on. Every backward of a chunk reduce-scatters its
 * gradients (in the reduce type) and frees its gathered weights; they are
 * kept from forward to backward (reshard_after_forward off), so the chunk's
 * next pass, the next micro-batch's forward in the steady state or the next
 * backward in the cool-down, gathers them again: per micro-batch and chunk
 * one all-gather and one reduce-scatter (NeMo AutoModel at 89e3a9fdd: its
 * DeepSeek-V3 part is the CausalLM module whose inner model, blocks,
 * embedding and head are fully_shard's units, components/moe/
 * parallelizer.py apply_fsdp). FSDP2 prefetches block by block inside a
 * pass, so of each the first block's share is exposed and the rest runs
 * under the pass (SM contention as ZeRO-3's); they go into the stage's F
 * and B, where the pipeline and the simulator see them. Nothing is left
 * for after the flush. */
static void fsdp2_microbatch_dp(const mp_config *c, const mp_group_place *dpg,
                                const mp_group_place *edpg, pipe_model *pm)
{
    double dt = mp_dtype_bytes(c->training.precision), gb = mp_grad_reduce_bytes(c);
    double sm_ag = mp_dp_sm_share(c, dpg, false), sm_rs = mp_dp_sm_share(c, dpg, true);
    for (int64_t k = 0; k < pm->n; k++) {
        stage_sum *ss = &pm->st[k];
        double ag = zero_coll(c, dpg, edpg, MP_COLL_ALLGATHER, ss->params, ss->expert_params, dt);
        double rs = zero_coll(c, dpg, edpg, MP_COLL_REDUCESCATTER, ss->params, ss->expert_params,
                              gb);
        double share = ss->blocks > 0 ? 1.0 / (double)ss->blocks : 1.0;
        ss->dp_f = share * ag + mp_overlap_excess((1.0 - share) * ag, ss->fwd, sm_ag);
        ss->dp_b = share * rs + mp_overlap_excess((1.0 - share) * rs, ss->bwd, sm_rs);
        ss->fwd += ss->dp_f;
        ss->bwd += ss->dp_b;
    }
    pm->dp_time = pm->dp_exposed = 0.0; /* all of it per micro-batch, as ZeRO-3's */
    pm->tied_sync = 0.0;
}

/* ZeRO-2 and ZeRO-3/FSDP, one stage per rank. ZeRO-2 keeps
 * only its shard of the gradients, so every micro-batch's backward
 * reduce-scatters them (Rajbhandari et al. 2020, §5.2); the updated 16-bit
 * weights are all-gathered once per step. ZeRO-3 keeps only its shard of the
 * weights too: each block's weights are all-gathered before its forward and
 * again before its backward, and its gradients reduce-scattered after it,
 * every micro-batch (§5.3; PyTorch FSDP: Zhao et al. 2023, §3.2). Both
 * prefetch the next block's gather during the current block's compute, so
 * per micro-batch the exposed part is what exceeds the compute window, and
 * never less than one block's share (the first gather cannot be hidden).
 * The per-micro-batch part goes into the stage's F and B (dp_f, dp_b), where
 * the pipeline model and the simulator see it; the once-per-step gather
 * stays in dp_time / dp_exposed. Gradients are reduced in the training type,
 * as they are kept (memory.c); FSDP2 in its reduce type (mp_grad_reduce_bytes:
 * fp32 unless grad_reduce_bf16, as MixedPrecisionPolicy(reduce_dtype=fp32)). */
static void zero_sharded_dp(const mp_config *c, const mp_group_place *dpg,
                            const mp_group_place *edpg, const mp_group_place *replica,
                            pipe_model *pm)
{
    const mp_parallel *pp = &c->parallel;
    double dt = mp_dtype_bytes(c->training.precision);
    double gb = pp->zero_runtime == MP_ZRT_FSDP2 ? mp_grad_reduce_bytes(c) : dt;
    double P = pm->params_rank_max;
    double blocks = 0.0;
    for (int64_t k = 0; k < pm->n; k++)
        blocks += (double)pm->st[k].blocks;
    double share = blocks > 0.0 ? 1.0 / blocks : 1.0;
    double ag = zero_coll(c, dpg, edpg, MP_COLL_ALLGATHER, P, pm->expert_rank_max, dt);
    /* the first block's share is exposed; the rest overlaps the compute,
     * which NCCL's kernels slow while they run (SM contention; the gathers'
     * and reductions' own shares with nccl_ub) */
    double sm = mp_comm_sm_share(c, MP_COMM_NCCL);
    double sm_ag = mp_dp_sm_share(c, dpg, false), sm_rs = mp_dp_sm_share(c, dpg, true);
    for (int64_t k = 0; k < pm->n; k++) {
        stage_sum *ss = &pm->st[k];
        double rs = zero_coll(c, dpg, edpg, MP_COLL_REDUCESCATTER, ss->params, ss->expert_params,
                              gb);
        /* --fp8-param-gather: the FP8 GEMM weights are the parameters, and
         * the sharded weight buffer of such a parameter group is uint8, so
         * ZeRO-3's gathers move mp_fp8_param_gather_bytes for them (Megatron
         * FSDP: param_and_grad_buffer.py, param_dtype = torch.uint8 for a
         * Float8Tensor group, core_v0.14.0 lines 1806-1810; the FP8 copies
         * sharded and gathered as memory.c counts them), dt for the rest */
        double f8 = pp->zero >= 3 && mp_fp8_on(c) && c->training.fp8_param_gather
                        ? fmin(fmax(ss->fp8_params - ss->expert_params, 0.0),
                               ss->params - ss->expert_params)
                        : 0.0;
        double agk = zero_coll(c, dpg, edpg, MP_COLL_ALLGATHER, ss->params - f8, ss->expert_params,
                               dt) +
                     (f8 > 0.0 ? mp_coll_time(&c->hw, dpg, MP_COLL_ALLGATHER,
                                              f8 * mp_fp8_param_gather_bytes(c))
                               : 0.0);
        double fwd_comm = pp->zero >= 3 ? agk : 0.0;
        double bwd_comm = (pp->zero >= 3 ? agk : 0.0) + rs;
        /* the backward's gather and reduction: their time-weighted share */
        double sm_b = bwd_comm > 0.0 ? (fwd_comm * sm_ag + rs * sm_rs) / bwd_comm : sm_rs;
        ss->dp_f = share * fwd_comm + mp_overlap_excess((1.0 - share) * fwd_comm, ss->fwd, sm_ag);
        ss->dp_b = share * bwd_comm + mp_overlap_excess((1.0 - share) * bwd_comm, ss->bwd, sm_b);
        ss->fwd += ss->dp_f;
        ss->bwd += ss->dp_b;
    }
    /* ZeRO-2: the updated weights' all-gather after the optimizer step,
     * overlapped with the next step's forward as --overlap-param-gather is */
    double once = pp->zero == 2 ? ag : 0.0;
    double fwd_window = 0.0, bwd_window = 0.0;
    for (int64_t k = 0; k < pm->n; k++) {
        fwd_window += pm->st[k].fwd;
        bwd_window += pm->st[k].bwd;
    }
    double exposed = once > 0.0 && pp->dp_overlap
                         ? share * once + mp_overlap_excess((1.0 - share) * once, fwd_window, sm)
                         : once;
    /* HSDP: the shards' gradients all-reduced among the replicas once per
     * step, overlapped with the last micro-batch's backward but for one
     * block's share (PyTorch HSDP reduces each block as its reduce-scatter ends) */
    double rep = replica->n > 1
                     ? mp_coll_time(&c->hw, replica, MP_COLL_ALLREDUCE, P * gb / (double)dpg->n)
                     : 0.0;
    pm->dp_time = once + rep;
    pm->dp_exposed =
        exposed + (pp->dp_overlap
                       ? share * rep + mp_overlap_excess((1.0 - share) * rep, bwd_window, sm)
                       : rep);
    pm->tied_sync = 0.0;
}

/* DualPipe: ranks r and p-1-r hold the two copies of the same stages; after
 * the flush each pair sums the copies' gradients (an all-reduce of one copy,
 * half the rank's parameters, between the two); under DP overlap on the
 * split-backward path (tail_chunks) after each copy's DP reduction. */
static double mirror_sum(const mp_config *c, const pipe_model *pm, double grad_bytes)
{
    if (pm->sched != MP_SCHED_DUALPIPE || pm->p < 2)
        return 0.0;
    mp_group_place pair;
    mp_group_place_of(c, MP_GROUP_PP, &pair);
    pair.n = 2;
    return mp_coll_time(&c->hw, &pair, MP_COLL_ALLREDUCE, pm->params_rank_max / 2.0 * grad_bytes);
}

/* Megatron-Core's interleaved 1F1B with --overlap-grad-reduce runs each model
 * chunk's gradient reduction as one launch after that chunk's last backward
 * (align_grad_reduce, on by default: config.grad_sync_func = start_grad_sync
 * per chunk, megatron/training/training.py; Megatron-Bridge training/setup.py).
 * schedules.py forward_backward_pipelining_with_interleaving calls it in
 * backward_step_helper_postprocess, pipeline_parallel_rank virtual
 * micro-batches late, and launches the chunks still pending after the
 * cooldown ("Launch any remaining grad reductions"); the backward hooks
 * launch nothing (is_last_microbatch stays off). With --overlap-param-gather
 * and align_param_gather (megatron/training/arguments.py: on unless
 * --no-align-param-gather when vpp is set; Megatron-Bridge's
 * CommOverlapConfig sets it when pp > 1 and vpp > 1) the step starts chunk
 * 0's and chunk 1's parameter all-gathers (param_sync_func[0], [1]) and
 * forward_step_helper_preprocess launches chunk j+1's (j >= 1)
 * pipeline_parallel_rank forwards before chunk j's first forward
 * (mp_dp_aligned_reduce_exposed, mp_dp_early_gather_exposed). */
static bool aligned_chunks(const mp_config *c, const pipe_model *pm)
{
    return c->training.stack == MP_STACK_MEGATRON_LM && pm->sched == MP_SCHED_INTERLEAVED &&
           pm->v > 1 && pm->p > 1;
}

/* The schedules that split the backward, as Megatron-Core's DDP would run
 * them with --overlap-grad-reduce and --overlap-param-gather: each chunk's
 * reduction follows its last weight-gradient op (mp_dp_tail_reduce_exposed),
 * the gathers start with the step (mp_dp_gather_due_exposed). DualPipe too:
 * each rank reduces its own copies of its two stages as their last Ws run
 * (one per direction, at different times: v_replay_windows) and the pair
 * r, p-1-r sums the reduced copies after the flush (mirror_sum; the sum is
 * linear, so the order does not change the gradient). */
static bool tail_chunks(const mp_config *c, const pipe_model *pm)
{
    return c->training.stack == MP_STACK_MEGATRON_LM && pm->p > 1 &&
           (pm->sched == MP_SCHED_ZBH1 ||
            ((pm->sched == MP_SCHED_ZBV || pm->sched == MP_SCHED_DUALPIPEV ||
              pm->sched == MP_SCHED_DUALPIPE) &&
             pm->v == 2));
}

/* Parameters of chunk ch of pipeline rank r that its DP buffers hold (the
 * head's copy of tied word embeddings included). */
static double chunk_params(const pipe_model *pm, int64_t r, int64_t ch)
{
    const stage_sum *ss = &pm->st[rank_stage(pm, r, ch)];
    return ss->params + (ss->has_head ? pm->tied_copy : 0.0);
}

/* The reductions under align_grad_reduce (cost_internal.h), from the
 * schedule (schedules.py get_schedule_table: groups of p micro-batches per
 * chunk; the backward visits the chunks last to first). Chunk c's last
 * backward on rank r is backward number total-1-c*p; backward_step_helper_
 * postprocess launches its reduction after backward total-1-c*p+r. In the
 * cooldown the last micro-batch's gradient reaches rank r one
 * chunk-backward before rank r-1, and each rank runs its backwards back to
 * back, so that launch falls at the same moment on every rank (what the
 * pipeline_parallel_rank delay is for: "launch asynchronous communication at
 * the same time across the pipeline-parallel group"): c*p of rank 0's
 * backwards (chunks 0..c-1, p each) before rank 0's end, the pipeline's end.
 * Chunk 0's launch, past the last backward, is left for after the cooldown
 * ("Launch any remaining grad reductions"), at the rank's own end, E_r =
 * -(b(0,0) + ... + b(r-1,0)). The reductions run one at a time on the DP
 * stream (one NCCL communicator per DP group), chunk v-1 first; what
 * overlaps the rank's compute slows that by sm_r of its time
 * (mp_overlap_excess). The exposed time is the latest rank's last reduction
 * past rank 0's end: chunk 0's whole reduction, plus what of the others
 * outlasts their window ((v-1)*p backwards for chunk v-1, p for chunk 1) or
 * sm_r of them. */
double mp_dp_aligned_reduce_exposed(int64_t p, int64_t v, const double *bwd, const double *share,
                                    double red, double sm_r)
{
    double worst = 0.0, end_r = 0.0; /* rank r's end, before rank 0's (time 0) */
    for (int64_t r = 0; r < p; r++) {
        if (r > 0)
            end_r -= bwd[(r - 1) * v];
        double dp_free = -INFINITY, overlapped = 0.0;
        for (int64_t c = v - 1; c >= 1; c--) {
            double launch = 0.0;
            for (int64_t i = 0; i < c; i++)
                launch -= (double)p * bwd[i];
            double start = fmax(launch, dp_free);
            dp_free = start + red * share[r * v + c];
            if (start < end_r)
                overlapped += fmin(dp_free, end_r) - start;
        }
        double end = end_r + sm_r * overlapped; /* the compute slowed under them */
        double done = fmax(end, dp_free) + red * share[r * v];
        worst = fmax(worst, done);
    }
    return worst;
}

/* The parameter all-gathers when they start with the step (cost_internal.h).
 * Interleaved with align_param_gather: schedules.py
 * forward_backward_pipelining_with_interleaving starts chunks 0 and 1's
 * (param_sync_func[0], [1]) and forward_step_helper_preprocess chunk j's (j
 * >= 2) pipeline_parallel_rank forwards before chunk j-1's first forward;
 * here every chunk's starts with the step, in chunk order on the DP stream
 * (with chunks alike the waits come out the same: a gather that Megatron
 * starts later than that finds the stream idle, so it is shorter than the p
 * forwards it has before its chunk's first). One chunk per rank (1F1B:
 * arguments.py turns align_param_gather off): the first forward's pre-hooks
 * (distributed_data_parallel.py _make_forward_pre_hook ->
 * param_and_grad_buffer.py finish_param_sync, which dispatches the next
 * bucket) dispatch the buckets, and the host reaches them at the step's
 * start. Rank r's compute starts at s, when its first input has come (a_r =
 * f(0,0) + ... + f(r-1,0)) and chunk 0's first bucket is gathered; chunk 0's
 * first forward ends no earlier than its gather (g0); while the gathers run
 * (to G) the compute runs at 1 - sm_a of its rate: the rank is late by
 * max(s + f0 + sm_a (G - s), g0 + sm_a (G - g0)) - (a_r + f0). Chunk j's
 * first forward, j*p forwards after chunk 0's on that rank, waits for the
 * gathers of chunks 0..j. The pipeline is late by the latest rank's wait:
 * each rank's warm-up is on the critical path. */
double mp_dp_early_gather_exposed(int64_t p, int64_t v, const double *fwd, const double *share,
                                  const double *bucket_frac, const double *ahead, double ag,
                                  double sm_a)
{
    double *due = malloc(sizeof *due * (size_t)(p * v));
    if (!due)
        return ag; /* out of memory: the gathers exposed whole */
    double a_r = 0.0;
    for (int64_t r = 0; r < p; r++) {
        if (r > 0)
            a_r += fwd[(r - 1) * v];
        double ahead = 0.0;
        due[r * v] = a_r;
        for (int64_t c = 1; c < v; c++) {
            ahead += (double)p * fwd[r * v + c - 1];
            due[r * v + c] = a_r + ahead;
        }
    }
    double x = mp_dp_gather_due_exposed(p, v, fwd, share, bucket_frac, due, ahead, ag, sm_a);
    free(due);
    return x;
}

/* The rule above with the chunks' first forwards given: due[r*v + c], when
 * rank r's first forward of chunk c would start without DP (interleaved:
 * j*p forwards after chunk 0's; the V schedules: when micro-batch 0 has
 * come down the V to that stage, mp_dp_v_gather_due). */
double mp_dp_gather_due_exposed(int64_t p, int64_t v, const double *fwd, const double *share,
                                const double *bucket_frac, const double *due, const double *ahead,
                                double ag, double sm_a)
{
    double worst = 0.0, opt_slow = 0.0;
    for (int64_t r = 0; r < p; r++) {
        double a_r = due[r * v];
        double total = 0.0;
        for (int64_t c = 0; c < v; c++)
            total += ag * share[r * v + c];
        /* chunk 0's gather ends at e0 (ahead: begun under the optimizer
         * step), the others follow it from the step's start to G */
        double f0 = fwd[r * v], g0 = ag * share[r * v], h = ahead ? ahead[r] : 0.0;
        double e0 = g0 - h, G = fmax(e0, 0.0) + total - g0;
        double s = fmax(a_r, bucket_frac[r] * g0 - h);
        double late = fmax(s + f0 + sm_a * fmax(G - s, 0.0), e0 + sm_a * fmax(G - e0, 0.0)) -
                      (a_r + f0);
        double gathered = fmax(e0, 0.0);
        for (int64_t c = 1; c < v; c++) {
            gathered += ag * share[r * v + c];
            late = fmax(late, gathered - due[r * v + c]);
        }
        worst = fmax(worst, late);
        opt_slow = fmax(opt_slow, sm_a * fmin(h, g0));
    }
    return worst + opt_slow;
}

/* The reductions under the schedules that split the backward (ZB-H1, ZB-V,
 * DualPipeV; cost_internal.h, docs/cost-model.md §5 "DP under the
 * split-backward schedules"). A chunk's gradient is complete only when its
 * last weight-gradient op (W) ends: the buckets fill as that W runs, so its
 * reduction can start when that W starts and its last bucket (bucket_frac of
 * the chunk) only after it ends. win_start[r*v+c] / win_end[r*v+c]: how long
 * before rank r's last compute op that W starts and ends. The reductions run
 * one at a time on the DP stream, the chunk whose W starts first first; what
 * overlaps compute slows it by sm_r of the overlap (mp_overlap_excess). The
 * ranks are taken to end together (the split schedules fill the cooldown with
 * the deferred Ws); the exposed time is the latest rank's last reduction past
 * the pipeline's end, rank r ending lead[r] before it (NULL: all together). */
double mp_dp_tail_reduce_exposed(int64_t p, int64_t v, const double *win_start,
                                 const double *win_end, const double *lead, const double *share,
                                 const double *bucket_frac, double red, double sm_r)
{
    double worst = 0.0, last = 0.0;
    for (int64_t r = 0; r < p; r++) {
        int64_t order[8];
        int64_t n = v < 8 ? v : 8;
        for (int64_t c = 0; c < n; c++) {
            int64_t i = c;
            while (i > 0 && win_start[r * v + order[i - 1]] < win_start[r * v + c]) {
                order[i] = order[i - 1];
                i--;
            }
            order[i] = c;
        }
        double dp_free = -INFINITY, overlapped = 0.0;
        for (int64_t i = 0; i < n; i++) {
            int64_t k = r * v + order[i];
            double dur = red * share[k];
            /* a chunk of one bucket (bucket_frac 1) starts when its W ends */
            double start = fmax(bucket_frac[k] >= 1.0 ? -win_end[k] : -win_start[k], dp_free);
            dp_free = fmax(start + dur, -win_end[k] + bucket_frac[k] * dur);
            /* its kernels run dur seconds, beside compute until the end */
            overlapped += fmin(dur, fmax(0.0, -start));
        }
        double end = sm_r * overlapped; /* the compute slowed under them */
        worst = fmax(worst, fmax(end, dp_free) - (lead ? lead[r] : 0.0));
        last = fmax(last, -(lead ? lead[r] : 0.0));
    }
    return worst - last; /* past the pipeline's end, the latest rank's */
}

/* Megatron-Core's DDP buckets a chunk's parameters only on pipeline rank 0
 * and only in its first model chunk: distributed_data_parallel.py __init__
 * sets bucket_size = None "if disable_bucketing or pp_rank > 0" (Megatron-LM
 * d98e8a6, and 0d8e0714 ... d0b3b77, the Megatron-Bridge 25.11-26.06
 * submodules), and the trainers pass disable_bucketing = model_chunk_idx > 0
 * (or --overlap-param-gather-with-optimizer-step) (megatron/training/models/
 * dist_utils.py; Megatron-Bridge models/model_provider.py; NeMo
 * lightning/megatron_parallel.py). Elsewhere a chunk is one bucket (FP8 and
 * bf16 buffers in one group: param_and_grad_buffer.py partition_buckets):
 * the first forward of chunk 0 on a rank > 0 waits for its whole gather.
 * The fraction of rank r's first chunk in its first bucket. (The reductions
 * of those chunks are one bucket too; only the gathers use this:
 * docs/cost-model.md §5, "Buckets".) */
static double first_bucket_frac(int64_t r, double bucket, double chunk0_params)
{
    return r == 0 && chunk0_params > 0.0 ? fmin(1.0, bucket / chunk0_params) : 1.0;
}

/* 1F1B on Megatron-LM with --overlap-grad-reduce, per rank (each its own
 * share of the most loaded rank's reduction red). Rank 0 buckets
 * (first_bucket_frac): its reduction runs under its last backward, the last
 * bucket after it, what overlaps slowing that backward by sm_r
 * (mp_overlap_excess): *exposed0. A rank r > 0 holds one bucket: its whole
 * reduction starts when its last backward ends, in the cooldown
 * sum_{k<r} (b_k + x) before rank 0's end (the last micro-batch's gradient
 * comes down the pipeline one backward and one transfer a rank), and slows no
 * compute of its own (it has none left). Returns the latest rank's end past
 * rank 0's. */
static double rank_whole_reduce(const mp_config *c, const pipe_model *pm, double P, double red,
                                double bucket, double sm_r, double *exposed0)
{
    double p0 = chunk_params(pm, 0, 0), red0 = P > 0.0 ? red * p0 / P : red;
    double f0 = p0 > 0.0 ? fmin(1.0, bucket / p0) : 1.0;
    *exposed0 = f0 * red0 + mp_overlap_excess((1.0 - f0) * red0, pm->st[rank_stage(pm, 0, 0)].bwd,
                                              sm_r);
    double lat, bw, lead = 0.0, worst = *exposed0;
    p2p_link(c, &lat, &bw);
    double x = lat + (bw > 0.0 ? pm->p2p_bytes / bw : 0.0);
    for (int64_t r = 1; r < pm->p; r++) {
        lead += pm->st[rank_stage(pm, r - 1, 0)].bwd + x;
        double share = P > 0.0 ? chunk_params(pm, r, 0) / P : 1.0;
        worst = fmax(worst, red * share - lead);
    }
    return worst;
}

/* The chunks' forward, backward and DP share (of the most loaded rank's
 * P), rank-major, for the two above; the first chunk's first bucket's
 * fraction per rank (first_bucket_frac). False when out of memory. */
static bool dp_chunks(const pipe_model *pm, double P, double bucket, double **fwd, double **bwd,
                      double **share, double **b0)
{
    size_t n = (size_t)(pm->p * pm->v);
    *fwd = malloc(sizeof **fwd * n);
    *bwd = malloc(sizeof **bwd * n);
    *share = malloc(sizeof **share * n);
    *b0 = malloc(sizeof **b0 * (size_t)pm->p);
    if (!*fwd || !*bwd || !*share || !*b0) {
        free(*fwd);
        free(*bwd);
        free(*share);
        free(*b0);
        return false;
    }
    for (int64_t r = 0; r < pm->p; r++) {
        for (int64_t c = 0; c < pm->v; c++) {
            const stage_sum *ss = &pm->st[rank_stage(pm, r, c)];
            size_t i = (size_t)(r * pm->v + c);
            (*fwd)[i] = ss->fwd;
            (*bwd)[i] = ss->bwd;
            (*share)[i] = P > 0.0 ? chunk_params(pm, r, c) / P : 1.0 / (double)pm->v;
        }
        (*b0)[r] = first_bucket_frac(r, bucket, chunk_params(pm, r, 0));
    }
    return true;
}

/* Under the split-backward schedules (tail_chunks), per chunk (rank-major):
 * how long before the rank's last compute op its last weight-gradient op
 * starts (ws) and ends (we), the fraction of it in its last bucket (bf), and
 * when its first forward would start without DP (due); per rank, how long
 * before the pipeline's end (rank 0's) the rank ends (lead). A rank's last B
 * is micro-batch m-1's, and its deferred Ws run oldest first once no B is
 * ready, so its last op is W(m-1) of the chunk whose B came last.
 * - ZB-H1 (one chunk; rank r runs W(i) after B(i+r), the rest after its last
 *   B): ws = w, we = 0. The ranks' ends are not needed: rank 0, which runs
 *   each W right after its B, ends last.
 * - ZB-V and DualPipeV: the last micro-batch's gradient goes down the V's
 *   second leg (chunk 1, rank 0 to p-1) and back up the first (chunk 0, rank
 *   p-1 to 0), one input-gradient B (b) and one transfer (x) a rank, so rank
 *   r's last B is chunk 0's, sum_{k<r} (b0_k + x) before rank 0's, and its
 *   last op W(m-1, chunk 0): ws = w0, we = 0. Between its B(m-1, chunk 1)
 *   and its B(m-1, chunk 0) rank r waits G_r = sum_{k>r} (b1_k + b0_k + 2x)
 *   for the gradient to come back, and fills that wait with its deferred Ws,
 *   W(m-1, chunk 1) among them. DualPipeV (fixed phases): at the latest, as
 *   B(m-1, chunk 0) starts (ws = w0 + b0 + w1, we = w0 + b0), an upper bound
 *   of the exposure. ZB-V (list scheduling, a ready B before a deferred W):
 *   its steady state runs the Ws in its waits as they come, so the one W
 *   deferred when B(m-1, chunk 1) ends (t1 = G_r + b0 + w0 before the end)
 *   is W(m-1, chunk 1), and it runs after the one older chunk-0 B that is
 *   ready first: it ends t1 - b0 - w1 before the end (no later than the
 *   DualPipeV rule). Where G_r is shorter than that W (rank p-1, whose two
 *   Bs of micro-batch m-1 follow each other) it runs after that B, before
 *   W(m-1, chunk 0) (ws = w0 + w1, we = w0), and the rank ends w1 later. An
 *   older W still deferred (rank 1 of pp 2) is the scheduler's choice and not
 *   counted (tests/sim/test_simulate.c, test_split_dp_matches_estimate).
 * First forwards: micro-batch 0 reaches stage k after the forwards of stages
 * 0..k-1; rank r's chunk 0 is stage r, its chunk 1 stage 2p-1-r.
 * For ZB-V and DualPipeV these rules are the fallback: v_replay_windows
 * places the ops from the lists themselves (it found rank 1 of pp 2 holding
 * four Ws after its last B, and DualPipeV's chunk-1 W earlier than the bound). */
static void dp_tail_windows(const pipe_model *pm, double bucket, double x, double *ws, double *we,
                            double *bf, double *due, double *lead)
{
    double down = 0.0; /* sum_{k<r} (b0_k + x) */
    for (int64_t r = 0; r < pm->p; r++) {
        const stage_sum *s0 = &pm->st[rank_stage(pm, r, 0)];
        double w0 = s0->wgrad, b0 = s0->bwd - s0->wgrad;
        lead[r] = down;
        for (int64_t ch = 0; ch < pm->v; ch++) {
            int64_t k = r * pm->v + ch, stage = rank_stage(pm, r, ch);
            double cp = chunk_params(pm, r, ch);
            /* Megatron-Core buckets pipeline rank 0's first chunk only
             * (first_bucket_frac): elsewhere the chunk is one bucket */
            bf[k] = ch == 0 ? first_bucket_frac(r, bucket, cp) : 1.0;
            double a = 0.0;
            for (int64_t j = 0; j < stage; j++)
                a += pm->st[j].fwd;
            due[k] = a;
            ws[k] = w0;
            we[k] = 0.0;
        }
        if (pm->v == 2) {
            double w1 = pm->st[rank_stage(pm, r, 1)].wgrad, gap = 0.0;
            for (int64_t q = r + 1; q < pm->p; q++) {
                const stage_sum *a0 = &pm->st[rank_stage(pm, q, 0)];
                const stage_sum *a1 = &pm->st[rank_stage(pm, q, 1)];
                gap += a0->bwd - a0->wgrad + a1->bwd - a1->wgrad + 2.0 * x;
            }
            if (gap >= w1) {
                /* at the latest just before B(m-1, chunk 0); ZB-V's list
                 * scheduler runs it sooner: B(m-1, chunk 1) ends gap + b0 + w0
                 * before the rank's end, one older micro-batch's chunk-0 B
                 * (ready, so first) follows, then W(m-1, chunk 1) */
                double t1 = gap + b0 + w0;
                we[r * 2 + 1] = pm->sched == MP_SCHED_ZBV ? fmax(w0 + b0, t1 - b0 - w1)
                                                          : w0 + b0;
                ws[r * 2 + 1] = we[r * 2 + 1] + w1;
            } else {
                ws[r * 2 + 1] = w0 + w1;
                we[r * 2 + 1] = w0;
                lead[r] -= w1;
            }
        }
        down += b0 + x;
    }
    if (pm->v == 1) {
        /* ZB-H1: rank r's last B ends down_r = sum_{k<r} (b_k + x) before
         * rank 0's, and its min(r + 1, m) deferred Ws then run back to back
         * (W(m-1-r) .. W(m-1)); rank 0 runs one. So rank r ends w_0 + down_r
         * - min(r + 1, m) w_r before rank 0 (about r x when b = w): the
         * moment a rank > 0, its chunk one bucket, starts its whole share */
        double w_0 = pm->st[rank_stage(pm, 0, 0)].wgrad;
        down = 0.0;
        for (int64_t r = 0; r < pm->p; r++) {
            const stage_sum *s0 = &pm->st[rank_stage(pm, r, 0)];
            double k = (double)(r + 1 < pm->m ? r + 1 : pm->m);
            lead[r] = w_0 + down - k * s0->wgrad;
            down += s0->bwd - s0->wgrad + x;
        }
    }
}

/* Megatron's standalone MTP stage (core/layout.h; validate_layer_layout's
 * mtp_standalone): the modules run on stage ks, not beside the loss. That
 * stage builds them and a copy of the word embedding for their lookups
 * (GPTModel: embedding when pre_process or mtp_process); the last stage
 * keeps the output layer, which computes the MTP losses from the hidden
 * states the modules concatenate along the sequence (process_mtp_loss), so
 * the head's GEMM, cross entropy and logits per module stay there, and the
 * stages from ks to the last send 1 + D times the activation (the p2p
 * learns the shapes: config.mtp_standalone). Moves the modules' part out of
 * the last stage's head item (place_mtp folded all of it there, head_item).
 * The head left holds no modules, so it is an edge as sum_stage counts one
 * (edge_f, edge_b: outside combined 1F1B's merged layers, hide_a2a_of); the
 * modules on stage ks run in its layer loop. */
static void place_mtp_standalone(const mp_config *c, const item_detail *last_block,
                                 const item_detail *head_item, int64_t ks, pipe_model *pm)
{
    const mp_parallel *p = &c->parallel;
    bool same_rank = p->schedule == MP_SCHED_DUALPIPE || p->schedule == MP_SCHED_DUALPIPEV;
    item_detail all, head, mods;
    detail_mtp(c, last_block, MTP_ALL, mtp_last_copy(c), &all);
    detail_mtp(c, last_block, MTP_HEAD, false, &head);
    detail_mtp(c, last_block, MTP_MODULES, ks != 0 && !same_rank, &mods);
    stage_sum *last = &pm->st[pm->n - 1];
    stage_add_edge(last, &all, -1.0, false);
    stage_add_edge(last, &head, 1.0, false);
    /* the head item less the modules, less what sum_stage counted of it */
    double was = head_item->ep_f <= 0.0 ? 1.0 : 0.0; /* sum_stage's edge rule */
    last->edge_f += (1.0 - was) * (head_item->fwd_compute + head_item->tp_f + head_item->cp_f) -
                    (all.fwd_compute + all.tp_f + all.cp_f) +
                    (head.fwd_compute + head.tp_f + head.cp_f);
    last->edge_b += (1.0 - was) * (head_item->bwd_compute + head_item->tp_b + head_item->cp_b) -
                    (all.bwd_compute + all.tp_b + all.cp_b) +
                    (head.bwd_compute + head.tp_b + head.cp_b);
    /* not the last stage: its forwards run ahead of their backwards, so the
     * modules' activations wait for every micro-batch in flight */
    stage_add_edge(&pm->st[ks], &mods, 1.0, true);
    double wide = (1.0 + (double)c->model.mtp_layers) * pm->p2p_bytes;
    for (int64_t k = ks; k < pm->n; k++) {
        if (k < pm->n - 1)
            pm->st[k].send_bytes = wide;
        pm->st[k].wide_send = wide; /* the last receives it and sends its gradient */
    }
}

/* The embedding group's all-reduce of the word-embedding gradient after
 * the pipeline flush (Megatron's finalize_model_grads,
 * _allreduce_word_embedding_grads over the embd group): the pipeline ranks
 * holding a copy, pretrain_gpt.py's get_embedding_ranks: the first; the last
 * when tied (the head's copy); and with MTP the rank of the modules' stage
 * when it keeps a copy for their lookups (get_mtp_ranks: the last by
 * default, or the standalone MTP stage's). 0 with one rank or none shared. */
static double emb_group_sync(const mp_config *c, const pipe_model *pm, double grad_bytes)
{
    const mp_parallel *p = &c->parallel;
    if (pm->p < 2)
        return 0.0;
    bool same_rank = p->schedule == MP_SCHED_DUALPIPE || p->schedule == MP_SCHED_DUALPIPEV;
    bool tied = c->model.tied_embeddings;
    int64_t ks = c->model.arch == MP_ARCH_T5 ? -1 : mp_config_mtp_stage(c, pm->n);
    int64_t n = 1 + (tied ? 1 : 0);
    if (ks >= 0 && !same_rank) {
        int64_t r = ks % pm->p; /* stage k on rank k % p (Megatron's order) */
        if (r != 0 && !(tied && r == pm->p - 1))
            n++;
    }
    if (n < 2)
        return 0.0;
    mp_group_place g;
    mp_group_place_of(c, MP_GROUP_PP, &g);
    g.n = n;
    /* the first and the last pipeline rank are the job's two ends */
    g.cross_domain = (double)c->training.gpus > mp_scale_up_gpus(&c->hw);
    g.per_node = 1.0;
    double copy = word_table_copy(c);
    return mp_coll_time(&c->hw, &g, MP_COLL_ALLREDUCE, copy * grad_bytes);
}

/* The op times the simulator's V orders are built and run with
 * (sim/plan_order.c cost_times from mp_pipeline_cost_build): per stage k
 * of n, F, input-gradient B, W, the transfer to k + 1 (latency and wire)
 * and the activations stashed, into t (5n) and ot; and their FNV-1a hash
 * (the DP windows' replay and the step's are the same one, zbv_key). */
static uint64_t v_op_times(const mp_config *c, const pipe_model *pm, double lat, double bw,
                           double *t, mp_op_times *ot)
{
    int64_t n = pm->n;
    for (int64_t k = 0; k < n; k++) {
        const stage_sum *ss = &pm->st[k];
        t[k] = ss->fwd;
        t[n + k] = ss->bwd - ss->wgrad;
        t[2 * n + k] = ss->wgrad;
        t[3 * n + k] = lat + (bw > 0.0 && k < n - 1 ? ss->send_bytes / bw : 0.0);
        t[4 * n + k] = ss->act * (1.0 + c->hw.allocator_fragmentation) + ss->act_edge;
    }
    *ot = (mp_op_times){.f = t, .b = t + n, .w = t + 2 * n, .link = t + 3 * n, .act = t + 4 * n,
                        .lat = lat};
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)t;
    for (size_t i = 0; i < sizeof *t * (size_t)(5 * n); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    b = (const unsigned char *)&lat;
    for (size_t i = 0; i < sizeof lat; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ZB-V, DualPipeV and DualPipe from their own order (docs/cost-model.md
 * §5): the lists the simulator runs (ZB-V's built from these stage times, as
 * sim/plan_order.c builds them; DualPipeV's fixed) replayed under the stage
 * times and transfers (mp_schedule_v_times: what mp_schedule_v_replay gives
 * for those lists, from the order alone and kept per thread), which places
 * every op, so no
 * rule about which Ws a rank defers is needed: a rank with no wait before
 * its last Bs (rank p-1 of pp 2 holds four Ws at its end) ends after rank 0,
 * and DualPipeV's chunk-1 W is where its phases put it. DualPipe's order is
 * DualPipeV's on p/2 ranks with m/2 micro-batches, relabelled
 * (sim/schedule_dualpipe.c): rank r runs DualPipeV rank h = min(r, p-1-r)'s
 * order on the same stages (its direction c is the V's chunk c, flipped on
 * the second half of the ranks), so its windows are that rank's, the middle
 * ranks' hand-over, a real transfer there, taken as the V's local turn.
 * Overwrites ws, we (from the chunk's last W on the rank), due (the chunk's
 * first F) and lead (rank 0's end less the rank's: negative for a rank that
 * ends later); ZB-V's step (pm->zbv_span, zbv_key). False when the lists
 * cannot be built (dp_tail_windows' rules stay). */
/* The memo's slot (mp_cost_memo_blob) for a replay's result: the replays
 * below are pure functions of (schedule, p, m, their op times, lat), and a
 * search costs many candidates with the same stage times (dist_opt on and
 * off, DP settings that move no stage time: a third of the V schedules'
 * replays in Llama 3 70B's search on 512 H200s), so each result is kept
 * under those exact bytes and a repeat copies it, bit for bit what the
 * replay gives. NULL without a memo (or room in it): replay. */
static void *replay_slot(mp_cost_memo *memo, int32_t sched, int32_t p, int32_t m,
                         const double *t, size_t nt, double lat, size_t val_size, bool *filled)
{
    *filled = false;
    int32_t head[3] = {sched, p, m};
    size_t ks = sizeof head + sizeof *t * nt + sizeof lat;
    unsigned char *kb = memo ? malloc(ks) : NULL;
    if (!kb)
        return NULL;
    memcpy(kb, head, sizeof head);
    memcpy(kb + sizeof head, t, sizeof *t * nt);
    memcpy(kb + sizeof head + sizeof *t * nt, &lat, sizeof lat);
    void *slot = mp_cost_memo_blob(memo, kb, ks, val_size, filled);
    free(kb);
    return slot;
}

/* What v_replay_windows keeps in the memo per replay: its verdict, ZB-V's
 * step, and the p ranks' times. */
typedef struct v_replay_memo {
    bool ok;
    double span;
    mp_v_rank_times rt[];
} v_replay_memo;

static bool v_replay_windows(const mp_config *c, pipe_model *pm, mp_cost_memo *memo, double lat,
                             double bw, double *ws, double *we, double *due, double *lead)
{
    bool dual = pm->sched == MP_SCHED_DUALPIPE;
    int32_t p = (int32_t)(dual ? pm->p / 2 : pm->p), m = (int32_t)(dual ? pm->m / 2 : pm->m);
    /* the windows sit in the warm-up (first forwards) and the cooldown (the
     * last Ws, the ranks' ends). DualPipeV's fixed phases repeat one block
     * between them, and its replay settles into a steady state that the
     * cooldown starts from, shifted, for every larger m: the first of 6p,
     * 18p, 54p, ... micro-batches that shows it gives m's windows exactly,
     * else all m are replayed (mp_schedule_v_windows; not 2p for any m, as
     * first thought: on even stages at pp 4 the windows move up to m = 11,
     * on random ones at pp 16 up to m = 156, GPT-3 175B's at pp 8 up to
     * about 6p). ZB-V's order is chosen from five by their times, and its
     * list schedulings over real times have no such steady state (their
     * windows keep moving with m: docs/cost-model.md §5), so its windows
     * are those of the estimate's own replay of the order (mp_zbv_replay:
     * exact within its budget, extended beyond), whose step the estimate
     * then takes (pm->zbv_span) rather than replaying it again. An
     * estimate (search runs thousands) costs O(p^2) at most besides. */
    int32_t n = (int32_t)pm->n;
    double *t = malloc(sizeof *t * (size_t)(5 * n));
    double *vw = malloc(sizeof *vw * (size_t)(7 * p)); /* the V ranks' ws, we, due, lead */
    mp_v_rank_times *rt = malloc(sizeof *rt * (size_t)(p > 0 ? p : 1));
    bool ok = t && vw && rt && pm->v == 2 && n == 2 * p && p > 0;
    mp_error err;
    if (ok) {
        mp_op_times ot;
        uint64_t key = v_op_times(c, pm, lat, bw, t, &ot);
        int32_t used;
        bool filled;
        v_replay_memo *vm = replay_slot(memo, (int32_t)pm->sched, p, m, t, (size_t)(5 * n), lat,
                                        sizeof *vm + sizeof *rt * (size_t)p, &filled);
        if (vm && filled) {
            ok = vm->ok;
            memcpy(rt, vm->rt, sizeof *rt * (size_t)p);
            if (pm->sched == MP_SCHED_ZBV) {
                pm->zbv_span = ok ? vm->span : -1.0;
                pm->zbv_key = key;
            }
        } else {
            double span = -1.0;
            if (pm->sched == MP_SCHED_ZBV) {
                bool exact;
                ok = mp_zbv_replay(p, m, &ot, rt, &span, &exact, &err) == MP_OK;
                pm->zbv_span = ok ? span : -1.0;
                pm->zbv_key = key;
            } else
                ok = mp_schedule_v_windows(dual ? MP_SCHED_DUALPIPEV : pm->sched, p, m, &ot, rt,
                                           &used, &err) == MP_OK;
            if (vm) {
                vm->ok = ok;
                vm->span = span;
                memcpy(vm->rt, rt, sizeof *rt * (size_t)p);
            }
        }
    }
    double e0 = 0.0;
    for (int32_t r = 0; ok && r < p; r++) {
        double er = rt[r].end;
        e0 = r == 0 ? er : e0;
        vw[6 * p + r] = e0 - er;
        for (int32_t ch = 0; ch < 2; ch++) {
            int32_t k = ch == 0 ? r : n - 1 - r; /* the V's stage */
            ok = ok && rt[r].w_end[ch] >= 0.0 && rt[r].f0_end[ch] >= 0.0;
            vw[2 * p + r * 2 + ch] = er - rt[r].w_end[ch];
            vw[r * 2 + ch] = er - rt[r].w_end[ch] + t[2 * n + k];
            vw[4 * p + r * 2 + ch] = rt[r].f0_end[ch] - t[k];
        }
    }
    for (int64_t r = 0; ok && r < pm->p; r++) {
        int64_t h = dual && r >= p ? pm->p - 1 - r : r, flip = dual && r >= p;
        for (int64_t ch = 0; ch < 2; ch++) {
            int64_t vc = h * 2 + (ch ^ flip);
            ws[r * 2 + ch] = vw[vc];
            we[r * 2 + ch] = vw[2 * p + vc];
            due[r * 2 + ch] = vw[4 * p + vc];
        }
        lead[r] = vw[6 * p + h];
    }
    free(t);
    free(vw);
    free(rt);
    return ok;
}

/* Megatron-Core's defer_embedding_wgrad_compute (Megatron-LM core_v0.11.0,
 * megatron/core/tensor_parallel/layers.py lines 928-933 and 454-457): the
 * last stage's output layer keeps its input and output gradient for the
 * first wgrad_deferral_limit micro-batches (every one with 0) instead of
 * running their weight-gradient GEMM in the backward; the rest compute it in
 * place. finish_embedding_wgrad_compute (pipeline_parallel/schedules.py
 * lines 528-544, called at 1468 and 1870 after the schedule's last backward
 * on that rank) runs the held GEMMs back to back (utils.py
 * drain_embedding_wgrad_compute, lines 531-616). Only Megatron's own 1F1B
 * and interleaved schedules, and only with a pipeline. */
/* What the deferral holds on a pipeline of p ranks and m micro-batches
 * whose last stage holds the head: micro-batches held (0: no deferral) and
 * the bytes each keeps. */
static int64_t defer_hold_of(const mp_config *c, int64_t p, int64_t m, double *hold)
{
    const mp_parallel *pp = &c->parallel;
    *hold = 0.0;
    if (!pp->defer_embedding_wgrad || p < 2 || m < 1 ||
        (pp->schedule != MP_SCHED_1F1B && pp->schedule != MP_SCHED_INTERLEAVED) ||
        mp_ds_pipe_engine(c))
        return 0;
    int64_t lim = pp->wgrad_deferral_limit;
    /* what each held micro-batch keeps until the flush: the layer's input
     * (SP: this rank's slice, as gathered again in the drain) and the
     * logits' gradient, V/t columns, both in the activations' type */
    mp_block_shape last;
    mp_block_shape_of(&c->model, c->training.seq, mp_model_blocks(&c->model), &last);
    double sb = (double)pp->micro_batch * last.s / (double)pp->cp, t = (double)pp->tp;
    double dt = c->training.precision == MP_DTYPE_FP32 ? 4.0 : 2.0;
    *hold = sb * dt * ((double)c->model.hidden / (pp->sp ? t : 1.0) +
                       mp_padded_vocab(c->model.vocab, pp->tp) / t);
    return lim > 0 && lim < m ? lim : m;
}

static void defer_wgrad_of(const mp_config *c, const item_detail *head, pipe_model *pm)
{
    pm->defer_stage = -1;
    pm->defer_mb = 0;
    pm->defer_w = pm->defer_hold = 0.0;
    if (pm->n < 1 || !pm->st[pm->n - 1].has_head)
        return;
    double hold;
    int64_t mb = defer_hold_of(c, pm->p, pm->m, &hold);
    if (mb < 1)
        return;
    pm->defer_stage = pm->n - 1;
    pm->defer_mb = mb;
    pm->defer_w = head->wgrad;
    pm->defer_hold = hold;
}

static mp_status build_pipe(const mp_config *c, const mp_plan *plan, bool check,
                            mp_cost_memo *memo, const model_facts *mf, pipe_model *pm,
                            mp_error *err)
{
    if (check) {
        /* a plan that lists its stages is its own split (any layer count) */
        mp_status s = mp_config_check_with_stages(c, plan && plan->n_stages != 0, err);
        if (s != MP_OK)
            return s;
        if (plan && plan->n_stages != 0) {
            s = mp_plan_check(plan, err);
            if (s != MP_OK)
                return s;
        }
    }
    const mp_parallel *pp = &c->parallel;
    int64_t L = mp_model_blocks(&c->model);
    pm->p = pp->pp;
    pm->dp_aligned = pm->dp_tail = false;
    pm->dp_gather = pm->dp_gather_exposed = pm->dp_bucket = pm->dp_sm_r = pm->dp_sm_a = 0.0;
    pm->dp_gather_sync = 0.0;
    pm->dp_gather_opt = pm->dp_rank_whole = false;
    pm->dp_red0 = 0.0;
    pm->zbv_span = -1.0;
    pm->sched = pp->schedule;
    pm->v = mp_schedule_chunks(pp->schedule, pp->vpp);
    pm->m = mp_config_microbatches(c);
    pm->n = mp_schedule_n_stages(pp->schedule, pm->p, pp->vpp);
    item_detail *det = malloc(sizeof *det * (size_t)(L + 2));
    pm->st = calloc((size_t)pm->n, sizeof *pm->st);
    if (!det || !pm->st) {
        free(det);
        free(pm->st);
        pm->st = NULL;
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the stage costs");
    }
    fill_details(c, memo, mf, det);
    pm->p2p_bytes = det[L > 0 ? L : 0].send_bytes;
    pm->boundary_bytes = pm->p2p_bytes / p2p_whole_factor(c);
    pm->block_params = 0.0;
    for (int64_t i = 1; i <= L; i++)
        if (det[i].params > pm->block_params)
            pm->block_params = det[i].params;
    /* stage k's items: the plan's, else the configuration's split (its
     * explicit layout or Megatron's default; mp_config_stages, the split the
     * executor runs) */
    mp_stage_range *ranges = malloc(sizeof *ranges * (size_t)pm->n);
    if (!ranges) {
        free(det);
        free(pm->st);
        pm->st = NULL;
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the stage costs");
    }
    if (plan && plan->n_stages == pm->n)
        memcpy(ranges, plan->stages, sizeof *ranges * (size_t)pm->n);
    else
        mp_config_stages(c, pm->n, ranges);
    for (int64_t k = 0; k < pm->n; k++) {
        /* clamped, so an unchecked plan can never index outside the items */
        int64_t b = ranges[k].begin, e = ranges[k].end;
        b = b < 0 ? 0 : b > L + 2 ? L + 2 : b;
        e = e < b ? b : e > L + 2 ? L + 2 : e;
        sum_stage(c, plan, det, b, e, L, &pm->st[k]);
    }
    free(ranges);
    int64_t ks = c->model.arch == MP_ARCH_T5 ? -1 : mp_config_mtp_stage(c, pm->n);
    if (ks >= 0 && ks < pm->n - 1)
        place_mtp_standalone(c, &det[L], &det[L + 1], ks, pm);
    defer_wgrad_of(c, &det[L + 1], pm);
    /* DeepSpeed's pipeline engine rebuilds each partitioned transfer over the
     * TP group before the pass that needs it (ds_pipe.c); 0 for Megatron-LM */
    for (int64_t k = 0; k < pm->n; k++) {
        double gf, gb;
        mp_ds_partition_gathers(c, pm->p2p_bytes, k == 0, k == pm->n - 1, &gf, &gb);
        stage_sum *s = &pm->st[k];
        s->tp_f += gf;
        s->tp_b += gb;
        s->tp += gf + gb;
        s->fwd += gf;
        s->bwd += gb;
    }
    free(det);

    /* per pipeline rank: parameters (tied embeddings: the last rank holds the
     * head's copy of the word embeddings when it is not the first rank) */
    double tied_copy = tied_copy_params(c, pm->p);
    pm->tied_copy = tied_copy;
    pm->params_rank_max = pm->expert_rank_max = 0.0;
    double opt_max = 0.0, fp8_rank = 0.0;
    for (int64_t r = 0; r < pm->p; r++) {
        double params = 0.0, experts = 0.0, fp8 = 0.0;
        for (int64_t ch = 0; ch < pm->v; ch++) {
            const stage_sum *ss = &pm->st[rank_stage(pm, r, ch)];
            params += ss->params;
            experts += ss->expert_params;
            fp8 += ss->fp8_params;
            if (ss->has_head && tied_copy > 0.0)
                params += tied_copy;
        }
        if (params > pm->params_rank_max) {
            pm->params_rank_max = params;
            pm->expert_rank_max = experts;
            fp8_rank = fp8;
        }
        double shard = pp->dist_opt ? (double)(pp->dp * pp->cp) : 1.0;
        double eshard = pp->dist_opt ? (double)mp_parallel_edp(pp) : 1.0;
        double o = mp_optimizer_time(c, (params - experts) / shard + experts / eshard);
        if (o > opt_max)
            opt_max = o;
    }
    pm->optimizer = opt_max;

    /* DP: all-reduce of the gradients over the d*c ranks holding the same
     * weights, or reduce-scatter of grads + all-gather of 16-bit params with
     * the distributed optimizer */
    mp_group_place dpg;
    mp_group_place_of(c, MP_GROUP_DP, &dpg);
    double gb = mp_grad_reduce_bytes(c), dt = mp_dtype_bytes(c->training.precision);
    double P = pm->params_rank_max;
    double rs = 0.0, ag = 0.0, ar = 0.0;
    if (pp->zero >= 2 && dpg.n > 1) {
        mp_group_place shard, replica, edpg;
        mp_group_place_of(c, MP_GROUP_DP_SHARD, &shard);
        mp_group_place_of(c, MP_GROUP_DP_REPLICA, &replica);
        mp_group_place_of(c, MP_GROUP_EDP, &edpg);
        if (pp->zero_runtime == MP_ZRT_FSDP2 && pm->p > 1)
            fsdp2_pipelined_dp(c, &shard, &edpg, pm);
        else
            zero_sharded_dp(c, &shard, &edpg, &replica, pm);
        pm->tied_sync += mirror_sum(c, pm, gb);
        return MP_OK;
    }
    /* routed experts: their own gradients over the edp ranks that hold them */
    double Pe = pm->expert_rank_max;
    mp_group_place edpg;
    mp_group_place_of(c, MP_GROUP_EDP, &edpg);
    P -= Pe;
    if (pp->dist_opt && mp_ds_bf16_optimizer(c)) {
        /* DeepSpeed's BF16 optimizer shards its fp32 state like ZeRO-1 but
         * all-reduces the whole fp32 gradient (_bf16_reduce_grads ->
         * buffered_allreduce_fallback, deepspeed/runtime/pipe/engine.py), then
         * all-gathers the updated 16-bit partitions (all_gather_dp_groups) */
        ar = mp_coll_time(&c->hw, &dpg, MP_COLL_ALLREDUCE, P * gb) +
             mp_coll_time(&c->hw, &edpg, MP_COLL_ALLREDUCE, Pe * gb);
        ag = mp_coll_time(&c->hw, &dpg, MP_COLL_ALLGATHER, P * dt) +
             mp_coll_time(&c->hw, &edpg, MP_COLL_ALLGATHER, Pe * dt);
    } else if (pp->dist_opt) {
        rs = mp_coll_time(&c->hw, &dpg, MP_COLL_REDUCESCATTER, P * gb) +
             mp_coll_time(&c->hw, &edpg, MP_COLL_REDUCESCATTER, Pe * gb);
        /* --fp8-param-gather: the FP8 weights are the parameters and Megatron
         * DDP keeps them in a uint8 buffer (param_and_grad_buffer.py:
         * param_dtype = torch.uint8 for FP8 parameters), so the all-gather of
         * the updated weights moves 1 byte for them, dt for the rest. Not
         * under MXFP8: Transformer Engine cannot put an MXFP8 weight's bytes
         * in that buffer, so Megatron-Core gathers the updated bf16 values in
         * the gradient buffer and quantizes them after the gather
         * (mp_fp8_param_gather_bytes; docs/cost-model.md §5) */
        double f8 = mp_fp8_on(c) && c->training.fp8_param_gather
                        ? fmin(fmax(fp8_rank - Pe, 0.0), P)
                        : 0.0;
        ag = mp_coll_time(&c->hw, &dpg, MP_COLL_ALLGATHER,
                          (P - f8) * dt + f8 * mp_fp8_param_gather_bytes(c)) +
             mp_coll_time(&c->hw, &edpg, MP_COLL_ALLGATHER, Pe * dt);
    } else {
        ar = mp_coll_time(&c->hw, &dpg, MP_COLL_ALLREDUCE, P * gb) +
             mp_coll_time(&c->hw, &edpg, MP_COLL_ALLREDUCE, Pe * gb);
    }
    P += Pe;
    pm->dp_time = rs + ag + ar;
    if (pp->dp_overlap && dpg.n > 1) {
        /* Megatron-Core --overlap-grad-reduce: buckets of --ddp-bucket-size
         * parameters, by default max(40M, 1M*d) (distributed_data_parallel.py),
         * go out as the last micro-batch's backward produces them; the last
         * bucket is always exposed. With the distributed optimizer the
         * parameter all-gather overlaps the next forward (--overlap-param-gather).
         * What overlaps slows the compute under it by NCCL's SMs' share. */
        double bucket = pp->ddp_bucket_size > 0 ? (double)pp->ddp_bucket_size
                                                : fmax(4.0e7, 1.0e6 * (double)dpg.n);
        double frac = P > 0.0 ? fmin(1.0, bucket / P) : 1.0;
        double bwd_window = 0.0, fwd_window = 0.0;
        for (int64_t ch = 0; ch < pm->v; ch++) {
            bwd_window += pm->st[rank_stage(pm, 0, ch)].bwd;
            fwd_window += pm->st[rank_stage(pm, 0, ch)].fwd;
        }
        double red = rs + ar;
        double sm_r = mp_dp_sm_share(c, &dpg, true), sm_a = mp_dp_sm_share(c, &dpg, false);
        bool aligned = aligned_chunks(c, pm), tail = tail_chunks(c, pm);
        /* the gathers start with the step on Megatron-Core's interleaved
         * (aligned), one-chunk and split-backward schedules
         * (mp_dp_early_gather_exposed, mp_dp_gather_due_exposed) */
        bool early = pp->dist_opt && !pp->param_gather_sync &&
                     c->training.stack == MP_STACK_MEGATRON_LM &&
                     (aligned || tail || (pm->v == 1 && pm->sched != MP_SCHED_DUALPIPE));
        double exposed_red, exposed_ag, *cf = NULL, *cb = NULL, *cs = NULL, *b0 = NULL;
        if ((aligned || early || tail) && !dp_chunks(pm, P, bucket, &cf, &cb, &cs, &b0)) {
            free(pm->st);
            pm->st = NULL;
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL,
                                "out of memory for the stage costs");
        }
        /* the split schedules: each chunk's last W, before the rank's end
         * (ws, we), its last bucket's fraction (bf), its first forward (due) */
        size_t nc = (size_t)(pm->p * pm->v);
        double *ws = NULL, *we = NULL, *bf = NULL, *due = NULL, *lead = NULL;
        if (tail) {
            ws = malloc(sizeof *ws * nc);
            we = malloc(sizeof *we * nc);
            bf = malloc(sizeof *bf * nc);
            due = malloc(sizeof *due * nc);
            lead = malloc(sizeof *lead * (size_t)pm->p);
            if (!ws || !we || !bf || !due || !lead) {
                free(ws), free(we), free(bf), free(due), free(lead);
                free(cf), free(cb), free(cs), free(b0);
                free(pm->st);
                pm->st = NULL;
                return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL,
                                    "out of memory for the stage costs");
            }
            double lat, bw;
            p2p_link(c, &lat, &bw);
            double x = lat + (bw > 0.0 ? pm->p2p_bytes / bw : 0.0);
            dp_tail_windows(pm, bucket, x, ws, we, bf, due, lead);
            if (pm->v == 2 && !v_replay_windows(c, pm, memo, lat, bw, ws, we, due, lead))
                dp_tail_windows(pm, bucket, x, ws, we, bf, due, lead);
        }
        if (aligned) {
            exposed_red = mp_dp_aligned_reduce_exposed(pm->p, pm->v, cb, cs, red, sm_r);
            pm->dp_aligned = true;
        } else if (tail) {
            exposed_red = mp_dp_tail_reduce_exposed(pm->p, pm->v, ws, we, lead, cs, bf, red, sm_r);
            pm->dp_tail = true;
        } else {
            if (c->training.stack == MP_STACK_MEGATRON_LM && pm->sched == MP_SCHED_1F1B &&
                pm->v == 1 && pm->p > 1) {
                exposed_red = rank_whole_reduce(c, pm, P, red, bucket, sm_r, &pm->dp_red0);
                pm->dp_rank_whole = true;
            } else {
                exposed_red = frac * red + mp_overlap_excess((1.0 - frac) * red, bwd_window, sm_r);
            }
        }
        if (early) {
            /* --overlap-param-gather-with-optimizer-step (aligned only,
             * mp_config_check): chunk 0 unbucketed, its gather begun under
             * the other chunks' optimizer step, its share of the step first */
            double *ahead = NULL;
            if (aligned && pp->overlap_param_gather_with_optimizer_step &&
                (ahead = malloc(sizeof *ahead * (size_t)pm->p)) != NULL) {
                for (int64_t r = 0; r < pm->p; r++) {
                    double all = 0.0;
                    for (int64_t ch = 0; ch < pm->v; ch++)
                        all += cs[r * pm->v + ch];
                    ahead[r] = all > 0.0 ? pm->optimizer * (1.0 - cs[r * pm->v] / all) : 0.0;
                    b0[r] = 1.0;
                }
                pm->dp_gather_opt = true;
            }
            exposed_ag = tail ? mp_dp_gather_due_exposed(pm->p, pm->v, cf, cs, b0, due, NULL, ag, sm_a)
                              : mp_dp_early_gather_exposed(pm->p, pm->v, cf, cs, b0, ahead, ag, sm_a);
            free(ahead);
            pm->dp_gather = ag;
            pm->dp_gather_exposed = exposed_ag;
        } else {
            /* without --overlap-param-gather the optimizer step runs the
             * whole all-gather before the next step (param_gather_sync) */
            exposed_ag = !pp->dist_opt          ? 0.0
                         : pp->param_gather_sync ? ag
                                                 : frac * ag + mp_overlap_excess((1.0 - frac) * ag,
                                                                                 fwd_window, sm_a);
            if (pp->dist_opt && pp->param_gather_sync)
                pm->dp_gather_sync = ag;
        }
        free(cf);
        free(cb);
        free(cs);
        free(b0);
        free(ws);
        free(we);
        free(bf);
        free(due);
        free(lead);
        if (aligned || early || tail) {
            pm->dp_bucket = bucket;
            pm->dp_sm_r = sm_r;
            pm->dp_sm_a = sm_a;
        }
        pm->dp_exposed = exposed_red + exposed_ag;
    } else {
        pm->dp_exposed = pm->dp_time;
    }
    pm->tied_sync = emb_group_sync(c, pm, gb);
    pm->tied_sync += mirror_sum(c, pm, gb);
    return MP_OK;
}

/* Bytes per routed-expert parameter of weights, gradients and optimizer
 * states, from those of the other parameters: the distributed optimizer
 * shards expert states over edp, not d*c; ZeRO-2 their gradients and ZeRO-3
 * their weights too (exec's shard.c; hybrid sharding is refused with
 * experts). The estimate and the simulator's stage costs both count them so. */
static void expert_static_bytes(const mp_config *c, double wb, double gb, double ob,
                                double *ewb, double *egb, double *eob)
{
    const mp_parallel *pp = &c->parallel;
    *ewb = wb;
    *egb = gb;
    *eob = ob;
    if (!(pp->dist_opt || pp->zero >= 1))
        return;
    double to_edp = (double)(pp->dp * pp->cp) / (double)mp_parallel_edp(pp);
    *eob = ob * to_edp;
    if (pp->zero >= 2)
        *egb = gb * to_edp;
    if (pp->zero >= 3)
        *ewb = wb * to_edp;
}

/* Output gradients of the linear layers that a split backward's B keeps
 * for its W (ZB-H1, ZB-V, DualPipe(V)), per micro-batch on stage k: ~9 b s h / t
 * per block (QKV 3, projection 1, FC1 4, FC2 1; Qi et al. 2024 §3), in the
 * activations' type, i.e. 9 boundary activations. */
static double w_hold_bytes(const pipe_model *pm, int64_t k)
{
    return 9.0 * pm->boundary_bytes * (double)pm->st[k].blocks;
}

mp_status mp_pipeline_cost_build(const mp_config *c, const mp_plan *plan, mp_pipeline_cost *out,
                                 mp_error *err)
{
    memset(out, 0, sizeof *out);
    pipe_model pm;
    mp_status s = build_pipe(c, plan, true, NULL, NULL, &pm, err);
    if (s != MP_OK)
        return s;
    out->stages = calloc((size_t)pm.n, sizeof *out->stages);
    if (!out->stages) {
        free(pm.st);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the stage costs");
    }
    out->n_stages = (int32_t)pm.n;
    double spb = mp_static_bytes_per_param(c);
    double wb, gb, ob, ewb, egb, eob;
    mp_static_bytes(c, &wb, &gb, &ob);
    expert_static_bytes(c, wb, gb, ob, &ewb, &egb, &eob);
    for (int64_t k = 0; k < pm.n; k++) {
        const stage_sum *ss = &pm.st[k];
        mp_stage_cost *sc = &out->stages[k];
        sc->fwd = ss->fwd;
        sc->bwd = ss->bwd;
        sc->bwd_weight = ss->wgrad;
        sc->bwd_input = ss->bwd - ss->wgrad;
        sc->recompute = ss->recompute;
        sc->tp_comm_fwd = ss->tp_f;
        sc->tp_comm_bwd = ss->tp_b;
        sc->cp_comm_fwd = ss->cp_f;
        sc->cp_comm_bwd = ss->cp_b;
        sc->ep_comm_fwd = ss->ep_f;
        sc->ep_comm_bwd = ss->ep_b;
        sc->expert_fwd = ss->mlp_f;
        sc->expert_bwd = ss->mlp_b;
        sc->expert_wgrad = ss->mlp_w;
        sc->embed_fwd = ss->emb_f;
        sc->embed_bwd = ss->emb_b;
        sc->head_fwd = ss->edge_f - ss->emb_f;
        sc->head_bwd = ss->edge_b - ss->emb_b;
        sc->send_bytes = k == pm.n - 1 ? 0.0 : ss->send_bytes;
        /* with the allocator's fragmentation, as the estimate counts it */
        sc->act_bytes = ss->act * (1.0 + c->hw.allocator_fragmentation) + ss->act_edge;
        sc->edge_bytes = ss->act_edge;
        sc->static_bytes = ss->params * spb + ss->fp8_params * mp_fp8_weight_net_bytes(c) +
                           ss->expert_params * (ewb + egb + eob - spb);
        if (mp_schedule_splits_backward(c->parallel.schedule) && pm.p > 1)
            sc->w_hold_bytes = w_hold_bytes(&pm, k) * (1.0 + c->hw.allocator_fragmentation);
        /* the head's copy of tied embeddings is in the last stage's DP buffer */
        sc->grad_bytes =
            (ss->params + (ss->has_head ? pm.tied_copy : 0.0)) * mp_grad_reduce_bytes(c);
    }
    p2p_link(c, &out->p2p_latency, &out->p2p_bw);
    out->p2p_serial = mp_ds_p2p_transfers_per_pass(c) - 1.0;
    out->p2p_overlap = c->parallel.p2p_overlap && c->parallel.schedule == MP_SCHED_INTERLEAVED;
    out->dp_time = pm.dp_time + pm.tied_sync;
    out->dp_exposed = pm.dp_exposed + pm.tied_sync;
    out->dp_aligned = pm.dp_aligned;
    out->dp_tail = pm.dp_tail;
    out->dp_rank_whole = pm.dp_rank_whole;
    out->dp_reduce_exposed0 = pm.dp_red0;
    out->dp_gather = pm.dp_gather;
    out->dp_gather_exposed = pm.dp_gather_exposed;
    out->dp_tied = pm.tied_sync;
    out->dp_gather_sync = pm.dp_gather_sync;
    out->dp_gather_opt_step = pm.dp_gather_opt;
    out->dp_bucket_bytes = pm.dp_bucket * mp_grad_reduce_bytes(c);
    out->dp_sm_reduce = pm.dp_sm_r;
    out->dp_sm_gather = pm.dp_sm_a;
    out->optimizer = pm.optimizer;
    out->ep_sm_share = mp_comm_sm_share(c, MP_COMM_EP);
    out->defer_stage = (int32_t)pm.defer_stage;
    out->defer_mb = (int32_t)pm.defer_mb;
    out->defer_w = pm.defer_w;
    out->defer_hold = pm.defer_hold * (1.0 + c->hw.allocator_fragmentation);
    double other = c->hw.runtime_reserve;
    if (pm.n > 0)
        other += 4.0 * pm.st[0].send_bytes; /* p2p send/recv buffers, both directions */
    if (c->parallel.sp && c->parallel.tp > 1 && pm.n > 0)
        other += pm.st[0].send_bytes * (double)c->parallel.tp; /* SP all-gather buffer */
    other += mp_cp_gather_bytes(c); /* all_gather CP's whole K/V, dK/dV */
    out->other_bytes = other;
    free(pm.st);
    return MP_OK;
}

void mp_pipeline_cost_free(mp_pipeline_cost *pc)
{
    if (!pc)
        return;
    free(pc->stages);
    pc->stages = NULL;
    pc->n_stages = 0;
}

/* ---- the estimate ----------------------------------------------------- */

/* A lower bound on mp_estimate_config(c, NULL)'s step from the item details
 * alone (no stage split, no schedule, no data-parallel terms): what the
 * search prunes by before it pays for the rest of an estimate.
 *
 * Why it is a lower bound: the estimate's step is compute + recompute + tp +
 * cp + pp (the slowest rank's per-round parts, times its rounds) + bubble +
 * dp_comm + optimizer, where those parts sum to busy = rounds * round[slow]
 * (round[r] sums the fwd + bwd + p2p of r's chunks; fwd and bwd are the
 * stage's compute, recompute, exposed TP and CP and ZeRO's dp_f/dp_b, each
 * also counted in a part), bubble = max(0, makespan - busy) and the other
 * terms are >= 0: so step >= busy >= rounds * (sum over ranks of round[r]) /
 * p. The chunks of all ranks are every stage once (mp_schedule_stage; under
 * DualPipe every stage twice, with rounds = m / 2), and the stages hold every
 * item once (mp_config_stages), so that sum is at least the blocks' own fwd +
 * bwd + recompute as sum_stage adds them (p2p, the embedding and the head,
 * the MTP modules folded into it, DeepSpeed's accumulation passes and
 * partition gathers are >= 0 and left out). Not for T5 (its blocks are not
 * of block_kind's kinds) nor under the MoE all-to-all overlap (hide_a2a takes
 * time off the stages): 0 there. A relative 1e-9 below, for the sums'
 * rounding in another order. The same config check first: a refusal is the
 * estimate's (err). */
bool mp_estimate_block_sums(const mp_config *c, mp_cost_memo *memo,
                            double sums[MP_RECOMPUTE_COUNT])
{
    const mp_parallel *pp = &c->parallel;
    int64_t L = mp_model_blocks(&c->model);
    if (c->model.arch == MP_ARCH_T5 || pp->moe_a2a_overlap || L < 1 || L > MP_MAX_LAYERS)
        return false;
    const model_facts *mf = facts_of(c, memo);
    detail_set local;
    const detail_set *ds = detail_set_of(c, L, memo, &local);
    int64_t count[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < L; i++)
        count[mf ? mf->kind[i] : block_kind(&c->model, i)]++;
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++) {
        double sum = 0.0;
        for (int k = 0; k < 4; k++) {
            if (!count[k])
                continue;
            const item_detail *d = &ds->kind[k];
            double rec = r == MP_RECOMPUTE_SELECTIVE ? d->sel_rec
                         : r == MP_RECOMPUTE_FULL    ? d->fwd_compute + d->tp_f + d->cp_f
                                                     : 0.0;
            double fwd = d->fwd_compute + d->tp_f + d->cp_f;
            double bwd = d->bwd_compute + d->tp_b + d->cp_b + rec;
            sum += (double)count[k] * (fwd + bwd);
        }
        sums[r] = sum;
    }
    return true;
}

double mp_estimate_floor_of_sums(const mp_config *c, const double sums[MP_RECOMPUTE_COUNT])
{
    const mp_parallel *pp = &c->parallel;
    if (pp->pp < 1 || (unsigned)pp->recompute >= MP_RECOMPUTE_COUNT)
        return 0.0;
    int64_t m = mp_config_microbatches(c);
    bool dual = pp->schedule == MP_SCHED_DUALPIPE;
    double rounds = (double)(dual ? m / 2 : m), copies = dual ? 2.0 : 1.0;
    return fmax(0.0, rounds * copies * sums[pp->recompute] / (double)pp->pp * (1.0 - 1e-9));
}

mp_status mp_estimate_step_floor(const mp_config *c, mp_cost_memo *memo, double *floor,
                                 mp_error *err)
{
    *floor = 0.0;
    mp_status s = mp_config_check(c, err);
    if (s != MP_OK)
        return s;
    double sums[MP_RECOMPUTE_COUNT];
    if (mp_estimate_block_sums(c, memo, sums))
        *floor = mp_estimate_floor_of_sums(c, sums);
    return MP_OK;
}


static mp_status estimate(const mp_config *c, const mp_plan *plan, bool check,
                          mp_cost_memo *memo, mp_estimate *out, mp_error *err);

mp_status mp_estimate_config(const mp_config *c, const mp_plan *plan, mp_estimate *out,
                             mp_error *err)
{
    return estimate(c, plan, true, NULL, out, err);
}

mp_status mp_estimate_config_memo(const mp_config *c, const mp_plan *plan, mp_cost_memo *memo,
                                  mp_estimate *out, mp_error *err)
{
    return estimate(c, plan, true, memo, out, err);
}

mp_status mp_estimate_config_unchecked(const mp_config *c, const mp_plan *plan,
                                       mp_estimate *out, mp_error *err)
{
    return estimate(c, plan, false, NULL, out, err);
}

/* Megatron-Core --overlap-moe-expert-parallel-comm: in the 1F1B steady
 * state one micro-batch's forward and another's backward run as one merged
 * pass, layer by layer, in three phases (megatron/core/models/common/
 * model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run; DeepSeek-V3
 * §3.2.1 overlaps computation and all-to-all the same way):
 *
 *     comm stream:    combine_bwd   | dispatch_fwd, dispatch_bwd | combine_fwd
 *     compute stream: pre-dispatch F | experts B (dgrad, wgrad), F | pre-dispatch B
 *
 * each phase taking the longer of its two streams. With a = the dispatch and
 * b = the combine of a pass (equal volumes: half the pass's a2a each), e the
 * experts' node (GEMMs, sorts, activation, casts: compute.c) and r the rest
 * of the pass (attention, router, exposed TP):
 *
 *     pair = max(b_B, r_F) + mid + max(b_F, r_B)
 *
 * with mid at least max(a_F + a_B, e_B + e_F) and its event order's chains
 * (mp_moe_a2a_mid_phase),
 * against F + B inline; the difference is hidden, split between F and B in
 * proportion to their a2a. When every phase's compute covers its
 * communication, exactly the a2a is hidden; never more than min(a2a,
 * compute). Per stage, the stage's layers summed (a dense layer's compute
 * counts with the MoE layers'). The embedding and the head (edge_f, edge_b)
 * run outside the merged layers and cover nothing: the model chunk's
 * pre_process forward and post_process backward before the layer loop, its
 * post_process forward and pre_process backward after it
 * (model_chunk_schedule_plan.py, TransformerModelChunkSchedulePlan.run,
 * core_v0.15.0 lines 425-438 and 493-497), so they add to the pair whole.
 * A head holding MTP modules stays in the phases (the MTP layers run in the
 * layer loop, TransformerLayerSchedulePlan.run's mtp_post_process).
 * Only the paired passes hide anything: the
 * warm-up forwards and cool-down backwards run alone (mp_moe_a2a_paired_share;
 * DualPipe(V): its F&B units, mp_dualpipe_fb_units). Only the estimate's copy of
 * the stage sums changes: the simulator's stage costs keep the whole a2a in F
 * and B, with the expert node's and the edges' times (expert_*, embed_*,
 * head_*), and the simulator runs the merged passes itself, the edges
 * outside the phases as here (mp_sim_options.ep_overlap; sim/engine.c
 * run_pair).
 *
 * SM contention: the dispatcher's kernels hold their SMs while they run, so
 * the compute of a phase runs at 1 - sm of its rate under them and a phase
 * lasts max(comm, compute + sm comm) (contention.c; sm: the share of
 * the SMs the dispatcher's kernels take). */
static double a2a_phase(double comm, double compute, double sm)
{
    return compute + mp_overlap_excess(comm, compute, sm);
}

/* The middle phase: the comm stream runs the forward's dispatch, then the
 * backward's; the compute stream the backward's expert dgrad, its wgrad
 * (backward_dw), then the forward's experts. The backward's dispatch waits
 * for the expert dgrad, the forward's experts for their dispatch
 * (model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run: each node
 * waits for its micro-batch's previous node, utils.py stream_acquire_context;
 * backward_dw takes no event). With d the dispatches, g the dgrad, w the
 * wgrad and e the forward's experts:
 *
 *     mid = max(max(d_F, g_B) + d_B, max(d_F, g_B + w_B) + e_F)
 *
 * and never less than both streams' work with the SM contention (a2a_phase). */
double mp_moe_a2a_mid_phase(double d_f, double d_b, double g_b, double w_b, double e_f, double sm)
{
    double comm_path = fmax(d_f, g_b) + d_b;
    double comp_path = fmax(d_f, g_b + w_b) + e_f;
    return fmax(a2a_phase(d_f + d_b, g_b + w_b + e_f, sm), fmax(comm_path, comp_path));
}

/* The merged pass of stage sf's forward with stage sb's backward (the same
 * stage but in DualPipe(V)'s F&B units, which pair a rank's two chunks),
 * hidden over the share `paired` of their passes. A pass without all-to-all
 * (DualPipe(V)'s dense stages) keeps in its own phase only what covers the
 * other's all-to-all there and runs the rest beside the dispatches, as the
 * simulator does (sim/engine.c run_pair, fb_merged). Returns what one merged
 * pass saves against the two passes inline. */
static double hide_a2a_of(stage_sum *sf, stage_sum *sb, double sm, double paired)
{
    double a2a = sf->ep_f + sb->ep_b;
    if (a2a <= 0.0 || paired <= 0.0)
        return 0.0;
    double half_f = sf->ep_f / 2.0, half_b = sb->ep_b / 2.0;
    /* combined 1F1B (sf == sb): the edges run apart; DualPipe(V)'s F&B unit
     * keeps them in its phases, as the simulator runs it */
    double edge = sf == sb ? sf->edge_f + sb->edge_b : 0.0;
    double rest_f = fmax(0.0, sf->fwd - sf->ep_f - sf->mlp_f - (sf == sb ? sf->edge_f : 0.0));
    double rest_b = fmax(0.0, sb->bwd - sb->ep_b - sb->mlp_b - (sf == sb ? sb->edge_b : 0.0));
    double exp_f = sf->mlp_f;
    double w = fmin(sb->mlp_w, sb->mlp_b); /* of the experts' backward: backward_dw */
    double g = sb->mlp_b - w;
    if (sf != sb) {
        double keep_f = half_b * (1.0 - sm), keep_b = half_f * (1.0 - sm);
        if (half_f <= 0.0 && rest_f > keep_f) {
            exp_f += rest_f - keep_f;
            rest_f = keep_f;
        }
        if (half_b <= 0.0 && rest_b > keep_b) {
            w += rest_b - keep_b;
            rest_b = keep_b;
        }
    }
    double pair = edge + a2a_phase(half_b, rest_f, sm) +
                  mp_moe_a2a_mid_phase(half_f, half_b, g, w, exp_f, sm) + a2a_phase(half_f, rest_b, sm);
    double unit = fmax(0.0, fmin(a2a, sf->fwd + sb->bwd - pair));
    double hidden = paired * unit;
    double hf = hidden * sf->ep_f / a2a, hb = hidden - hf;
    sf->fwd -= hf;
    sb->bwd -= hb;
    sf->tp -= hf;
    sb->tp -= hb;
    sf->tp_f -= hf;
    sb->tp_b -= hb;
    sf->ep_f -= hf;
    sb->ep_b -= hb;
    return unit;
}

static void hide_a2a(stage_sum *s, double sm, double paired)
{
    (void)hide_a2a_of(s, s, sm, paired);
}

/* DualPipeV's F&B units on rank r of p with m micro-batches (deepseek-ai/
 * DualPipe dualpipev.py; sim/schedule.c build_dualpipev): phase 4's
 * m - 2p + r + 1 rounds each run an F0&B1 and an F1&B0 unit, but the last
 * rank's first F0 and B1, the turn of the V, run apart (dualpipev.py line
 * 357); phase 5's p - r - 1 rounds an F1&B0 unit each. So *f0b1 units pair
 * chunk 0's forward with chunk 1's backward and *f1b0 = m - p chunk 1's
 * forward with chunk 0's backward, of each chunk's m passes; the rest (the
 * warm-up, phase 3's, the cool-down's) run alone. DualPipe: DualPipeV's on
 * p/2 ranks with m/2 micro-batches per direction, as rank min(r, p-1-r). */
void mp_dualpipe_fb_units(mp_schedule_kind s, int64_t p, int64_t m, int64_t r, int64_t *f0b1,
                          int64_t *f1b0)
{
    if (s == MP_SCHED_DUALPIPE) {
        r = r < p - 1 - r ? r : p - 1 - r;
        p /= 2;
        m /= 2;
    }
    int64_t a = m - 2 * p + r + 1 - (r == p - 1), b = m - p;
    *f0b1 = a > 0 ? a : 0;
    *f1b0 = b > 0 ? b : 0;
}

/* DualPipe(V) under the EP all-to-all overlap, per rank of the V: n[0] F0&B1
 * and n[1] F1&B0 units (mp_dualpipe_fb_units), x[k] the step one unit of
 * that kind saves against its passes inline (hide_a2a_of); per pipeline
 * rank, each chunk's F and input-gradient B inline (before hide_a2a_of
 * shares the saving out over the stage's passes). */
typedef struct fb_units {
    int64_t n[2];
    double x[2];
    double raw_f[2], raw_b[2];
} fb_units;

/* DualPipe(V)'s makespan under the EP overlap. DeepSeek's bubble, (PP/2 -
 * 1)(F&B + B - 3W) for DualPipe and (PP - 1)(...) for DualPipeV (report
 * §3.2.1, Table 2), takes F&B as "the execution time of two mutually
 * overlapped forward and backward chunks": the merged unit, f + B less what
 * it hides, not the inline passes. And the rank it holds for is the one that
 * merges the most units: ranks nearer the ends of the V run more of their
 * first F0s and last B1s alone (m - 2p + r + 1 F0&B1 units on rank r), and
 * those passes, longer than the merged ones, fill part of their wait: rank
 * r's idle is the bubble less (n_max - n_r) units' saving (the simulator, on
 * equal stages with free links: exact for every f, b, w, p <= 8, m from 2p,
 * the rest of the closed form added once by dual_turn; tests/sim
 * test_dualpipe_merged_fill_grid). So
 * each rank's fill (ramp, from the passes inline) loses one unit's saving
 * per kind it runs, and the steady state is each rank's busy time as if it
 * merged as many units as the rank that merges the most. */
static double dual_fb_makespan(const pipe_model *pm, const fb_units *fb, int64_t rounds,
                               const double *round, const double *ramp)
{
    bool dpipe = pm->sched == MP_SCHED_DUALPIPE;
    int64_t p = pm->p, ranks = dpipe ? p / 2 : p;
    double scale = dpipe && p > 1 ? (double)(p / 2 - 1) / (double)(p - 1) : 1.0;
    double *eff = rounds > 0 ? malloc(sizeof *eff * (size_t)(2 * p)) : NULL;
    if (!eff) /* the inline fills: an upper bound */
        return mp_pipeline_makespan_ranks(rounds, 2, p, round, ramp);
    double *fill = eff + p;
    int64_t most = 0;
    for (int64_t h = 0; h < ranks; h++)
        most = fb[h].n[0] > most ? fb[h].n[0] : most;
    for (int64_t r = 0; r < p; r++) {
        const fb_units *u = &fb[dpipe && r >= ranks ? p - 1 - r : r];
        double cut = (u->n[0] > 0 ? u->x[0] : 0.0) + (u->n[1] > 0 ? u->x[1] : 0.0);
        fill[r] = fmax(0.0, ramp[r] - cut * scale);
        eff[r] = round[r] - (double)(most - u->n[0]) * u->x[0] / (double)rounds;
    }
    double t = mp_pipeline_makespan_ranks(rounds, 2, p, eff, fill);
    free(eff);
    return t;
}

/* A DualPipe(V) transfer's time on its link (pipeline.c's wire): rank r's
 * larger activation of its two chunks (an MTP stage's wider send) over the
 * link's bandwidth; lat, bw from p2p_link. */
static double dual_wire(const pipe_model *pm, int64_t r, double bw)
{
    double bytes = 0.0;
    for (int64_t ch = 0; ch < 2 && pm->v == 2; ch++) {
        const stage_sum *ss = &pm->st[rank_stage(pm, r, ch)];
        bytes = fmax(bytes, ss->wide_send > 0.0 ? ss->wide_send : pm->p2p_bytes);
    }
    return bw > 0.0 ? bytes / bw : 0.0;
}

/* DualPipe(V)'s makespan beyond the steady state and the ranks' fills, once
 * per step (pipeline.c mp_dualpipe_turn: the turn of the V, the fills' overlap
 * where b > f, the hand-overs' links), from the last rank of the V (DualPipe:
 * the later of the two middle ranks): its chunk 0's forward, chunk 1's input
 * and weight gradients (fb: their times inline, before the EP overlap shares
 * a unit's saving out). */
static double dual_turn(const pipe_model *pm, const fb_units *fb, double lat, double bw)
{
    bool dpipe = pm->sched == MP_SCHED_DUALPIPE;
    int64_t ranks = dpipe ? pm->p / 2 : pm->p;
    if (ranks < 1 || pm->v != 2)
        return 0.0;
    double t = -INFINITY;
    for (int64_t r = ranks - 1; r <= (dpipe ? ranks : ranks - 1) && r < pm->p; r++) {
        const stage_sum *s0 = &pm->st[rank_stage(pm, r, 0)], *s1 = &pm->st[rank_stage(pm, r, 1)];
        double f = fb ? fb[r].raw_f[0] : s0->fwd, b = fb ? fb[r].raw_b[1] : s1->bwd - s1->wgrad;
        t = fmax(t, mp_dualpipe_turn(pm->sched, pm->p, f, b, s1->wgrad, lat, dual_wire(pm, r, bw)));
    }
    return t;
}

/* DualPipe(V)'s pipeline makespan from its own order on the stages' times
 * (dualpipe_replay.c: the simulator's lists run op by op as the engine runs
 * them), exact on uneven stages where the closed form's rank-by-rank
 * generalisation (dual_fb_makespan, mp_pipeline_makespan_ranks with
 * dual_turn) is not: the V's rank 0 holds the embedding and the head, a
 * plan's split its own. Each stage's F and input-gradient B inline (fb:
 * before the EP overlap shares a unit's saving out), its W, its activation's
 * time on the link; under the EP overlap each F&B unit as one merged pass,
 * its inline passes less the unit's saving (fb->x; a DualPipe rank
 * p-1-h runs rank h's units with the chunks swapped: its chunk c is rank
 * h's chunk 1-c). False when the lists cannot be built (the rule stays). */
static bool dual_replay(const pipe_model *pm, const fb_units *fb, mp_cost_memo *memo, double lat,
                        double bw, double *makespan)
{
    bool dpipe = pm->sched == MP_SCHED_DUALPIPE;
    int64_t p = pm->p, n = pm->n, ranks = dpipe ? p / 2 : p;
    if (pm->v != 2 || p < 2 || p > INT32_MAX / 2 || pm->m > INT32_MAX ||
        n != (dpipe ? p : 2 * p))
        return false;
    double *t = malloc(sizeof *t * (size_t)(4 * n + 2 * p));
    if (!t)
        return false;
    double *f = t, *b = t + n, *w = t + 2 * n, *wire = t + 3 * n, *unit = t + 4 * n;
    for (int64_t r = 0; r < p; r++)
        for (int64_t ch = 0; ch < 2; ch++) {
            int64_t k = rank_stage(pm, r, ch);
            const stage_sum *ss = &pm->st[k];
            f[k] = fb ? fb[r].raw_f[ch] : ss->fwd;
            b[k] = fb ? fb[r].raw_b[ch] : ss->bwd - ss->wgrad;
            w[k] = ss->wgrad;
            wire[k] = bw > 0.0 ? ss->send_bytes / bw : 0.0; /* the simulator's */
        }
    for (int64_t r = 0; fb && r < p; r++)
        for (int64_t ch = 0; ch < 2; ch++) {
            int64_t h = r < ranks ? r : p - 1 - r, kind = r < ranks ? ch : 1 - ch;
            int64_t kf = rank_stage(pm, r, ch), kb = rank_stage(pm, r, 1 - ch);
            unit[2 * r + ch] = f[kf] + b[kb] + w[kb] - fb[h].x[kind];
        }
    mp_dualpipe_times dt = {.f = f, .b = b, .w = w, .wire = wire, .lat = lat,
                            .unit = fb ? unit : NULL};
    /* from the memo when it holds these times' (replay_slot; with and
     * without the units, keys of different lengths) */
    struct { bool ok; double makespan; } *vm;
    bool filled;
    vm = replay_slot(memo, (int32_t)pm->sched, (int32_t)p, (int32_t)pm->m, t,
                     (size_t)(fb ? 4 * n + 2 * p : 4 * n), lat, sizeof *vm, &filled);
    bool ok;
    if (vm && filled) {
        ok = vm->ok;
        if (ok) *makespan = vm->makespan;
    } else {
        mp_error err;
        ok = mp_dualpipe_replay(pm->sched, (int32_t)p, (int32_t)pm->m, &dt, makespan, &err) ==
             MP_OK;
        if (vm) {
            vm->ok = ok;
            vm->makespan = ok ? *makespan : 0.0;
        }
    }
    free(t);
    return ok;
}

/* ZB-V's transfers that rank r waits for each micro-batch (Megatron's p2p
 * is synchronous; sim/schedule_vorder.c, a send's link time after its F or
 * B): its chunk-0 F's and chunk-1 B's but at the V's turn (rank p-1),
 * its chunk-1 F's but the last stage's, its chunk-0 B's but the first's;
 * each the latency and the activation's bytes on the link (v_op_times). */
static double zbv_rank_links(const pipe_model *pm, int64_t r, double lat, double bw)
{
    int64_t p = pm->p, a = r, z = 2 * p - 1 - r;
    if (pm->v != 2 || pm->n != 2 * p)
        return 0.0;
    double sum = 0.0;
    /* F of a to a + 1, F of z to z + 1, B of z to z - 1, B of a to a - 1 */
    const int64_t from[4] = {a, z, z - 1, a - 1};
    for (int i = 0; i < 4; i++) {
        int64_t k = from[i];
        if (k >= 0 && k != p - 1 && k != 2 * p - 1)
            sum += lat + (bw > 0.0 ? pm->st[k].send_bytes / bw : 0.0);
    }
    return sum;
}

/* ZB-V's pipeline makespan from its own order on the stages' times
 * (zbv_replay.c: the simulator's builder, its chosen order's step), exact
 * on uneven stages where the closed form's rank-by-rank generalisation
 * (mp_pipeline_makespan_ranks) is not: the DP windows' replay's step where
 * they ran it on these times (pm->zbv_span), else replayed here. False
 * when the orders cannot be built (the closed form stays). */
static bool zbv_replay(const mp_config *c, const pipe_model *pm, double *makespan)
{
    int64_t p = pm->p, n = pm->n;
    if (pm->v != 2 || p < 1 || n != 2 * p || p > INT32_MAX / 2 || pm->m > INT32_MAX)
        return false;
    double lat, bw, t_stack[5 * 64];
    mp_v_rank_times rt_stack[32];
    p2p_link(c, &lat, &bw);
    double *t = n <= 64 ? t_stack : malloc(sizeof *t * (size_t)(5 * n));
    mp_v_rank_times *rt = p <= 32 ? rt_stack : malloc(sizeof *rt * (size_t)p);
    bool ok = t && rt;
    if (ok) {
        mp_op_times ot;
        uint64_t key = v_op_times(c, pm, lat, bw, t, &ot);
        bool exact;
        mp_error err;
        if (pm->zbv_span >= 0.0 && key == pm->zbv_key)
            *makespan = pm->zbv_span;
        else
            ok = mp_zbv_replay((int32_t)p, (int32_t)pm->m, &ot, rt, makespan, &exact, &err) ==
                 MP_OK;
    }
    if (t != t_stack)
        free(t);
    if (rt != rt_stack)
        free(rt);
    return ok;
}

/* The share of pipeline rank r's passes through a chunk that the EP
 * all-to-all overlap pairs with a pass of the other direction. Megatron-Core
 * merges a forward and a backward only in the 1F1B steady state: with pp > 1
 * (the interleaved schedule) each rank first runs its warm-up forwards alone,
 * (p - r - 1) * 2 + (v - 1) * p of them and, under
 * --overlap-moe-expert-parallel-comm, one more (megatron/core/pipeline_parallel/
 * schedules.py, get_pp_rank_microbatches; combined_1f1b.py
 * combined_1f1b_schedule_for_interleaved_pipelining), and as many backwards
 * alone in the cool-down; without a pipeline the first forward and the last
 * backward run alone (combined_1f1b_schedule_for_no_pipelining). Of the
 * rank's m * v forwards (and backwards) the rest are paired. */
double mp_moe_a2a_paired_share(int64_t p, int64_t v, int64_t m, int64_t r)
{
    double ops = (double)m * (double)v;
    if (ops <= 0.0)
        return 0.0;
    double alone = p > 1 ? (double)((p - r - 1) * 2 + (v - 1) * p + 1) : 1.0;
    return fmax(0.0, ops - fmin(alone, ops)) / ops;
}

/* The forward FLOPs per sample that recompute runs again, block by block. */
static double recompute_flops(const mp_config *c, const mp_plan *plan)
{
    double extra = 0.0;
    int64_t L = mp_model_blocks(&c->model);
    bool t5 = c->model.arch == MP_ARCH_T5;
    double kind_flops[2][MP_RECOMPUTE_COUNT] = {{-1, -1, -1}, {-1, -1, -1}};
    for (int64_t i = 1; i <= L; i++) {
        mp_recompute r = item_recompute(c, plan, i);
        if (r == MP_RECOMPUTE_NONE)
            continue;
        /* an MoE model's blocks are of two kinds: each costed once */
        int kind = !t5 && mp_model_block_is_moe(&c->model, i - 1);
        if (t5 || kind_flops[kind][r] < 0) {
            mp_block_shape bs;
            mp_block_shape_of(&c->model, c->training.seq, i, &bs);
            kind_flops[kind][r] = r == MP_RECOMPUTE_FULL
                                      ? mp_block_fwd_flops(&c->model, &bs)
                                      : mp_block_attn_core_fwd_flops(&c->model, &bs);
        }
        extra += kind_flops[kind][r];
        if (c->model.arch != MP_ARCH_T5 && !mp_model_is_moe(&c->model) &&
            !(plan && plan->has_layer_recompute)) {
            extra *= (double)L;
            break;
        }
    }
    return extra;
}

/* ZB-H1's critical path (pipeline.c's second term on uneven stages): the
 * last micro-batch's forward down the p ranks and its input gradient back
 * up, m - 1 rounds of the slowest rank's F and B before it, then the Ws left:
 * rank r's last B ends sum_{k<r} (b_k + a hop) before rank 0's and its W
 * follows it. With fewer micro-batches than ranks (a T5 of 4 stages run with
 * one) the deferred Ws cannot fill the cool-down and this, not the filled
 * rounds, is the step: exact for m = 1 (the simulator's lists run that path
 * and nothing beside it), the closed form's bound on equal stages. */
static double zbh1_critical(const pipe_model *pm, const mp_config *c, double pass_comm)
{
    double chain = 0.0, widest = 0.0, down = 0.0, tail = -INFINITY;
    for (int64_t r = 0; r < pm->p; r++) {
        const stage_sum *ss = &pm->st[rank_stage(pm, r, 0)];
        double comm = ss->wide_send > 0.0 ? pass_p2p(c, ss->wide_send) : pass_comm;
        double b_in = ss->bwd - ss->wgrad;
        double leg = ss->fwd + b_in + round_p2p(c, ss, comm);
        chain += leg;
        widest = fmax(widest, leg);
        tail = fmax(tail, ss->wgrad - down);
        down += b_in + comm / 2.0;
    }
    return chain + (double)(pm->m - 1) * widest + tail;
}

/* ---- memory per GPU ---------------------------------------------------- */

/* Weights, gradients and optimizer states of `params` parameters on one GPU
 * (of which `experts` are routed-expert parameters and `fp8` have FP8
 * copies; `tied` more: the head's copy of tied word embeddings), the
 * experts' bytes per parameter in *ew, *eg, *eo. Linear in the four, so a
 * rank's bytes are the sum of its items': the estimate applies it to a
 * rank's sums, the split solver to each item (mp_split_memory). */
typedef struct static_mem {
    double weights, grads, optim;
    double ewb, egb, eob; /* per routed-expert parameter */
} static_mem;

static void static_mem_of(const mp_config *c, int64_t p, double params, double experts,
                          double fp8, static_mem *out)
{
    const mp_parallel *pp = &c->parallel;
    bool fp32 = c->training.precision == MP_DTYPE_FP32;
    double wb, gb, ob;
    mp_static_bytes(c, &wb, &gb, &ob);
    double weights = params * wb + fp8 * mp_fp8_weight_net_bytes(c);
    double grads = params * gb, optim = params * ob;
    double expert_wb, expert_gb, expert_ob;
    expert_static_bytes(c, wb, gb, ob, &expert_wb, &expert_gb, &expert_ob);
    optim += experts * (expert_ob - ob);
    grads += experts * (expert_gb - gb);
    weights += experts * (expert_wb - wb);
    if (pp->zero >= 3 && pp->zero_runtime == MP_ZRT_FSDP2 && p > 1) {
        /* FSDP2 under pipelining (fsdp2_pipelined_dp): every chunk's
         * weights stay gathered through the step, in the training type,
         * and its gradients accumulate unsharded in the reduce type until
         * the reduce-scatter after its last backward */
        double gathered = params;
        if (mp_parallel_edp(pp) > 1) {
            expert_wb += fp32 ? 4.0 : 2.0;
            expert_gb += mp_grad_reduce_bytes(c);
        } else {
            /* experts held whole by one rank of the DP group are no
             * FSDP unit (AutoModel ignores them): no copy, no accumulator */
            gathered -= experts;
        }
        weights += gathered * (fp32 ? 4.0 : 2.0);
        grads += gathered * mp_grad_reduce_bytes(c);
    }
    *out = (static_mem){weights, grads, optim, expert_wb, expert_gb, expert_ob};
}

static double static_mem_total(const mp_config *c, int64_t p, double params, double experts,
                               double fp8)
{
    static_mem sm;
    static_mem_of(c, p, params, experts, fp8, &sm);
    return sm.weights + sm.grads + sm.optim;
}

/* The part of a rank's "other" bytes its items do not scale: the runtime
 * reserve, the p2p buffers both ways (send: the largest output of the
 * rank's stages), the SP all-gather buffer, and ZeRO-3's gathered blocks
 * (block_params: the largest block's parameters on a GPU). */
static double other_fixed(const mp_config *c, int64_t p, double send, double block_params)
{
    const mp_parallel *pp = &c->parallel;
    bool fp32 = c->training.precision == MP_DTYPE_FP32;
    double other = c->hw.runtime_reserve + 4.0 * send;
    if (pp->sp && pp->tp > 1)
        other += send * (double)pp->tp;
    other += mp_cp_gather_bytes(c); /* all_gather CP's whole K/V, dK/dV */
    if (pp->zero >= 3 && !(pp->zero_runtime == MP_ZRT_FSDP2 && p > 1))
        /* the gathered weights of the block being computed and of the
         * one prefetched, and one block's unsharded gradients before
         * their reduce-scatter (all in the training type), and under
         * FP8 the two gathered blocks' FP8 copies */
        other += block_params * (3.0 * (fp32 ? 4.0 : 2.0) + 2.0 * mp_fp8_gathered_copy_bytes(c));
    return other;
}

/* What Megatron-LM keeps on pipeline rank r after its step: each chunk
 * fed by an earlier stage holds the tensor it last received,
 * TransformerBlock.input_tensor (set_input_tensor, megatron/core/transformer/
 * transformer_block.py:463 at d98e8a6, never cleared), and on it the
 * gradient backward_step computed for it (retain_grad, megatron/core/
 * pipeline_parallel/schedules.py:561). The received tensor is
 * get_tensor_shapes' (s/cp [/t under SP], b, h) (schedules.py:2140-2143):
 * whole on every TP rank without SP, which send_bytes is only where the
 * stack sends it whole (p2p_whole_factor). Other frameworks: not counted
 * (no source). */
static double held_after_step(const mp_config *c, const pipe_model *pm, int64_t r)
{
    const mp_parallel *pp = &c->parallel;
    if (pm->p < 2 || mp_plan_framework(c) != MP_FW_MEGATRON)
        return 0.0;
    double held = 0.0, whole = (pp->sp ? 1.0 : (double)pp->tp) / p2p_whole_factor(c);
    for (int64_t ch = 0; ch < pm->v; ch++) {
        int64_t k = rank_stage(pm, r, ch);
        if (k > 0)
            held += 2.0 * pm->st[k - 1].send_bytes * whole;
    }
    return held;
}

/* Pipeline rank r's bytes per GPU at its peak (docs/cost-model.md §3). */
static void rank_memory(const mp_config *c, const mp_plan *plan, const pipe_model *pm, int64_t r,
                        mp_memory *out)
{
    const mp_parallel *pp = &c->parallel;
    int64_t p = pm->p, v = pm->v, m = pm->m;
    double frag = c->hw.allocator_fragmentation;
    double tied_copy = tied_copy_params(c, p);
    double params = 0.0, act = 0.0, edge = 0.0, emb_act = 0.0, block_none = 0.0, send = 0.0;
    double experts = 0.0, routed = 0.0, capacity = 0.0, fp8_params = 0.0;
    for (int64_t ch = 0; ch < v; ch++) {
        const stage_sum *ss = &pm->st[rank_stage(pm, r, ch)];
        params += ss->params + (ss->has_head ? tied_copy : 0.0);
        experts += ss->expert_params;
        fp8_params += ss->fp8_params;
        routed += ss->routed_act;
        capacity += ss->capacity_act;
        act += ss->act;
        /* the head's logits for one micro-batch (the last stage runs
         * each F's B next); the embedding's mask for each in flight */
        edge += ss->act_edge - ss->act_emb;
        emb_act += ss->act_emb;
        if (ss->act_block_none > block_none)
            block_none = ss->act_block_none;
        if (ss->send_bytes > send)
            send = ss->send_bytes;
    }
    /* chunks in flight on rank r at its peak: the schedule's own bound
     * (src/sim/schedule.c, property-tested against the op lists the
     * simulator and executor run) */
    double chunks = mp_pipeline_inflight_chunks(c->parallel.schedule, p, v, m, r);
    double walked_routed = -1.0, walked_capacity = 0.0; /* DualPipe's op walk's */
    edge += emb_act / (double)v * chunks;
    double stash = act / (double)v * chunks;
    if (pp->recompute == MP_RECOMPUTE_FULL || (plan && plan->has_layer_recompute))
        stash += block_none; /* one block re-materialised during its backward */
    if (mp_schedule_splits_backward(pp->schedule) && p > 1) {
        /* ZB-H1, ZB-V and DualPipe(V) run a micro-batch's W after later
         * F and B. The schedule's bound already counts a micro-batch
         * until its W; until then it also keeps the output gradients of
         * its linear layers (w_hold_bytes), for as many Ws as wait at
         * once (sim/schedule.h); DualPipe's wait only below its peak
         * (mp_schedule_w_under_inflight): there a chunk costs the larger
         * of its activations and its held gradients */
        double g = 0.0;
        for (int64_t ch = 0; ch < v; ch++)
            g += w_hold_bytes(pm, rank_stage(pm, r, ch));
        g /= (double)v;
        double walked = -1.0, at_peak[2] = {0.0, 0.0};
        if (pp->schedule == MP_SCHED_DUALPIPE && v == 2 &&
            !(pp->recompute == MP_RECOMPUTE_FULL || (plan && plan->has_layer_recompute))) {
            /* its two chunks are two different stages, in flight in
             * unequal numbers at the peak: walk the rank's op list */
            double a2[2], h2[2];
            for (int64_t ch = 0; ch < 2; ch++) {
                a2[ch] = pm->st[rank_stage(pm, r, ch)].act;
                h2[ch] = w_hold_bytes(pm, rank_stage(pm, r, ch));
            }
            walked = mp_pipeline_stash_peak(pp->schedule, p, v, m, r, a2, h2, at_peak);
        }
        if (walked >= 0.0) {
            stash = walked;
            walked_routed = walked_capacity = 0.0;
            for (int64_t ch = 0; ch < 2; ch++) {
                const stage_sum *ss = &pm->st[rank_stage(pm, r, ch)];
                walked_routed += at_peak[ch] * ss->routed_act;
                walked_capacity += at_peak[ch] * ss->capacity_act;
            }
        }
        else if (mp_pipeline_w_under_inflight(pp->schedule))
            stash += chunks * fmax(0.0, g - act / (double)v);
        else
            stash += g * mp_pipeline_w_pending_chunks(pp->schedule, p, v, m, r);
    }
    /* the deferred wgrad's held inputs and logit gradients (defer_wgrad_of),
     * all of them at the last held micro-batch's forward */
    for (int64_t ch = 0; ch < v; ch++)
        if (rank_stage(pm, r, ch) == pm->defer_stage)
            stash += (double)pm->defer_mb * pm->defer_hold;
    /* PyTorch's caching allocator: activations are allocated and freed
     * every micro-batch in many sizes, and the blocks it caches fragment;
     * reserved exceeds allocated by a fraction of that churn (the profile's
     * allocator_fragmentation, docs/cost-model.md §3) */
    double other = other_fixed(c, p, send, pm->block_params) + edge + frag * stash;
    static_mem sm;
    static_mem_of(c, p, params, experts, fp8_params, &sm);
    memset(out, 0, sizeof *out);
    out->weights = sm.weights;
    out->grads = sm.grads;
    out->optimizer = sm.optim;
    out->activations = stash;
    out->other = other;
    out->peak = sm.weights + sm.grads + sm.optim + stash + other;
    out->allocated_peak = out->peak - c->hw.runtime_reserve - frag * stash;
    out->held_after_step = held_after_step(c, pm, r);
    out->expert_weights = experts * (sm.ewb + mp_fp8_weight_net_bytes(c));
    out->fp8_weights = fp8_params * mp_fp8_weight_copy_bytes(c);
    out->expert_grads = experts * sm.egb;
    out->expert_optimizer = experts * sm.eob;
    out->routed_activations = walked_routed >= 0.0 ? walked_routed : routed / (double)v * chunks;
    out->capacity_activations =
        walked_routed >= 0.0 ? walked_capacity : capacity / (double)v * chunks;
}

mp_status mp_split_memory(const mp_config *c, mp_split_item *items, double *inflight,
                          double *held, double *rank_other, mp_error *err)
{
    const mp_parallel *pp = &c->parallel;
    int64_t L = mp_model_blocks(&c->model), N = L + 2;
    int64_t p = pp->pp, v = mp_schedule_chunks(pp->schedule, pp->vpp);
    int64_t K = mp_schedule_n_stages(pp->schedule, p, pp->vpp), m = mp_config_microbatches(c);
    /* what the stage split's form cannot say: a rank's stages other than
     * chunk*p + rank (the V schedules, DualPipe), DualPipe's walked peak;
     * the split leaves these to Megatron's (mp_search_split) */
    if (mp_schedule_is_v(pp->schedule) || pp->schedule == MP_SCHED_DUALPIPE ||
        mp_pipeline_w_under_inflight(pp->schedule) || K != p * v)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "schedule",
                            "the stage split's memory model does not cover this schedule");
    item_detail *det = malloc(sizeof *det * (size_t)N);
    if (!det)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for %lld items",
                            (long long)N);
    fill_details(c, NULL, NULL, det);
    double frag = c->hw.allocator_fragmentation;
    double p2p = det[L > 0 ? L : 0].send_bytes / p2p_whole_factor(c); /* a TP rank's share */
    bool split_bwd = mp_schedule_splits_backward(pp->schedule) && p > 1;
    double tied = tied_copy_params(c, p);
    double defer_hold = 0.0;
    int64_t defer_mb = defer_hold_of(c, p, m, &defer_hold);
    double none_max = 0.0, block_params = 0.0, send = 0.0;
    for (int64_t i = 0; i < N; i++) {
        const item_detail *d = &det[i];
        mp_split_item *it = &items[i];
        bool head = i == N - 1;
        it->static_bytes = static_mem_total(c, p, d->params + (head ? tied : 0.0),
                                            d->expert_params, d->fp8_params);
        it->hold_bytes = 0.0;
        if (d->is_block) {
            /* stashed per micro-batch in flight, with the allocator's
             * fragmentation of them; a split backward's held output
             * gradients (w_hold_bytes) per micro-batch waiting for its W */
            for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
                it->act[r] = d->act[r] * (1.0 + frag);
            if (split_bwd)
                it->hold_bytes = 9.0 * p2p * (1.0 + frag);
            if (d->act[MP_RECOMPUTE_NONE] > none_max)
                none_max = d->act[MP_RECOMPUTE_NONE];
            if (d->params > block_params)
                block_params = d->params;
        } else if (i == 0) {
            /* the embedding's dropout mask: one per micro-batch in flight */
            for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
                it->act[r] = d->act[MP_RECOMPUTE_NONE];
        } else {
            /* the head's logits, once (its B follows each F); the deferred
             * wgrad's held micro-batches */
            for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
                it->act[r] = 0.0;
            it->static_bytes += d->act[MP_RECOMPUTE_NONE] +
                                (double)defer_mb * defer_hold * (1.0 + frag);
        }
        if (!head && d->send_bytes > send)
            send = d->send_bytes;
    }
    free(det);
    for (int64_t k = 0; k < K; k++) {
        int64_t r = k % p;
        inflight[k] = mp_pipeline_inflight_chunks(pp->schedule, p, v, m, r) / (double)v;
        held[k] = split_bwd ? mp_pipeline_w_pending_chunks(pp->schedule, p, v, m, r) / (double)v
                            : 0.0;
    }
    /* per rank: the p2p buffers of its stages' largest output (none on a
     * last rank that holds only the head's stage, whose output is the
     * loss), and one block re-materialised during its backward: the
     * largest block's, where the estimate takes its rank's largest */
    for (int64_t r = 0; r < p; r++)
        rank_other[r] = other_fixed(c, p, v == 1 && r == p - 1 ? 0.0 : send, block_params) +
                        none_max * (1.0 + frag);
    return MP_OK;
}

mp_status mp_estimate_rank_memory(const mp_config *c, const mp_plan *plan, mp_memory *ranks,
                                  mp_error *err)
{
    pipe_model pm;
    mp_status s = build_pipe(c, plan, true, NULL, NULL, &pm, err);
    if (s != MP_OK)
        return s;
    for (int64_t r = 0; r < pm.p; r++)
        rank_memory(c, plan, &pm, r, &ranks[r]);
    free(pm.st);
    return MP_OK;
}

static mp_status estimate(const mp_config *c, const mp_plan *plan, bool check,
                          mp_cost_memo *memo, mp_estimate *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    pipe_model pm;
    model_facts *mf = facts_of(c, memo);
    mp_status s = build_pipe(c, plan, check, memo, mf, &pm, err);
    if (s != MP_OK)
        return s;
    const mp_parallel *pp = &c->parallel;
    /* DualPipe(V) under the EP overlap: per rank of the V (DualPipe: rank
     * min(r, p-1-r)), its F&B units and the step one unit saves, and the
     * stages' F and B before the saving is shared out (dual_fb_makespan) */
    fb_units *fb = NULL;
    bool dual = pp->schedule == MP_SCHED_DUALPIPE || pp->schedule == MP_SCHED_DUALPIPEV;
    if (pp->moe_a2a_overlap && dual && pm.p > 0) {
        fb = calloc((size_t)pm.p, sizeof *fb);
        if (!fb) {
            free(pm.st);
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        }
        for (int64_t r = 0; r < pm.p; r++)
            for (int64_t ch = 0; ch < 2; ch++) {
                const stage_sum *ss = &pm.st[rank_stage(&pm, r, ch)];
                fb[r].raw_f[ch] = ss->fwd;
                fb[r].raw_b[ch] = ss->bwd - ss->wgrad;
            }
    }
    if (pp->moe_a2a_overlap) {
        double sm = mp_comm_sm_share(c, MP_COMM_EP);
        if (dual) {
            /* the F&B units: one chunk's F with the other's B (a DualPipe
             * rank r holds the same two stages as rank p-1-r: once each) */
            int64_t ranks = pp->schedule == MP_SCHED_DUALPIPE ? pm.p / 2 : pm.p;
            int64_t per = pp->schedule == MP_SCHED_DUALPIPE ? pm.m / 2 : pm.m;
            for (int64_t r = 0; r < ranks && per > 0; r++) {
                int64_t a, b;
                mp_dualpipe_fb_units(pp->schedule, pm.p, pm.m, r, &a, &b);
                stage_sum *s0 = &pm.st[rank_stage(&pm, r, 0)], *s1 = &pm.st[rank_stage(&pm, r, 1)];
                fb[r].n[0] = a;
                fb[r].n[1] = b;
                fb[r].x[0] = hide_a2a_of(s0, s1, sm, (double)a / (double)per);
                fb[r].x[1] = hide_a2a_of(s1, s0, sm, (double)b / (double)per);
            }
        } else if (mp_schedule_is_v(pp->schedule)) {
            /* ZB-V: nothing pairs its passes (Megatron-Core's merged pass
             * is combined 1F1B's, DualPipe's the F&B unit of DualPipe(V));
             * its all-to-all stays inline, as the simulator runs it */
        } else
            for (int64_t r = 0; r < pm.p; r++)
                for (int64_t ch = 0; ch < pm.v; ch++)
                    hide_a2a(&pm.st[rank_stage(&pm, r, ch)], sm,
                             mp_moe_a2a_paired_share(pm.p, pm.v, pm.m, r));
    }
    int64_t p = pm.p, v = pm.v, m = pm.m;
    out->microbatches = m;
    /* passes through each of a rank's chunks: m, but m/2 for dualpipe, whose
     * chunks are the two directions, each with half the micro-batches */
    int64_t rounds = pp->schedule == MP_SCHED_DUALPIPE ? m / 2 : m;

    /* per rank: busy time per micro-batch (round) and fill/drain share (ramp) */
    double round_stack[64], ramp_stack[64];
    double *round = round_stack, *ramp = ramp_stack;
    if (p > 64) {
        round = malloc(sizeof *round * (size_t)p * 2);
        if (!round) {
            free(fb);
            free(pm.st);
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        }
        ramp = round + p;
    }
    bool zb = pp->schedule == MP_SCHED_ZBH1;
    bool batched = batched_p2p(c);
    mp_schedule_kind sk = pp->schedule;
    /* --overlap-p2p-communication on interleaved 1F1B: the steady state
     * hides the hops (round_p2p), the fill and drain do not (below) */
    bool overlapped = overlapped_p2p(c);
    /* the same for every rank and chunk: computed once (a search runs this
     * for each of 10^5 candidates, p*v times each) */
    const double pass_comm = pass_p2p(c, pm.p2p_bytes);
    /* DeepSpeed's TrainSchedule (ds_pipe.c mp_ds_pipe_makespan_ends): its
     * first and last rank talk to one neighbour, two transfers a micro-batch
     * (comm / 2), and each hop of its fill and drain waits for one transfer
     * each way, not four */
    bool ds = mp_ds_pipe_engine(c) && sk == MP_SCHED_1F1B && v == 1;
    /* DualPipe(V): the transfers by latency and link time (pipeline.c) */
    double dual_lat = 0.0, dual_bw = 0.0;
    bool zbv = sk == MP_SCHED_ZBV && v == 2 && pm.n == 2 * p;
    if ((dual || zbv) && p > 1) /* ZB-V's too: the transfers its rank waits for */
        p2p_link(c, &dual_lat, &dual_bw);
    for (int64_t r = 0; r < p; r++) {
        round[r] = ramp[r] = 0.0;
        double wire = dual ? dual_wire(&pm, r, dual_bw) : 0.0;
        /* DualPipe(V)'s steady state: each F&B unit's two sends at one commit */
        if (dual)
            round[r] = mp_dualpipe_unit_links(p, r, dual_lat, wire);
        else if (zbv)
            round[r] = zbv_rank_links(&pm, r, dual_lat, dual_bw);
        for (int64_t ch = 0; ch < v; ch++) {
            int64_t k = rank_stage(&pm, r, ch);
            const stage_sum *ss = &pm.st[k];
            double comm = ss->wide_send > 0.0 ? pass_p2p(c, ss->wide_send) : pass_comm;
            round[r] += ss->fwd + ss->bwd +
                        (dual || zbv ? 0.0
                         : ds && (r == 0 || r == p - 1) ? comm / 2.0
                                                        : round_p2p(c, ss, comm));
            /* the V schedules: their fill per chunk (pipeline.c); the
             * sum over the other ranks / v is (p-1) times it. DualPipe(V)
             * under the EP overlap: from the passes inline, less the
             * merged units' saving (dual_fb_makespan) */
            double b_in = fb ? fb[r].raw_b[ch] : ss->bwd - ss->wgrad;
            double f_in = fb ? fb[r].raw_f[ch] : ss->fwd;
            ramp[r] += sk == MP_SCHED_ZBV ? ss->fwd + comm / 2.0 + fmax(0.0, b_in - ss->wgrad)
                       : sk == MP_SCHED_DUALPIPEV
                           ? mp_dualpipe_fill(f_in, b_in, ss->wgrad, dual_lat, wire)
                       /* dualpipe: (p/2 - 1) fills, not p - 1 (pipeline.c) */
                       : sk == MP_SCHED_DUALPIPE
                           ? mp_dualpipe_fill(f_in, b_in, ss->wgrad, dual_lat, wire) *
                                 (double)(p / 2 - 1) / (double)(p - 1)
                       : zb ? fmax(0.0, ss->fwd + ss->bwd - 2.0 * ss->wgrad + comm)
                       : batched || ds ? ss->fwd + ss->bwd + comm / 2.0
                       : overlapped ? ss->fwd + ss->bwd
                                    : ss->fwd + ss->bwd + comm;
        }
    }
    double makespan;
    bool replayed = dual ? dual_replay(&pm, fb, memo, dual_lat, dual_bw, &makespan)
                    : zbv && zbv_replay(c, &pm, &makespan);
    if (!replayed) {
        makespan = fb ? dual_fb_makespan(&pm, fb, rounds, round, ramp)
                      : mp_pipeline_makespan_ranks(rounds, v, p, round, ramp);
        if (dual)
            makespan += dual_turn(&pm, fb, dual_lat, dual_bw);
    }
    if (zb && p > 1)
        makespan = fmax(makespan, zbh1_critical(&pm, c, pass_comm));
    free(fb);
    if (batched)
        /* Megatron's synchronous interleaved batches: the first rank's
         * warm-up forwards, 2(p - 1) + (v - 1)p, each wait for their own
         * batch, p of them in the fill above (pipeline.c) */
        makespan += (double)(2 * (p - 1) + (v - 2) * p) * pass_comm / 2.0;
    else if (ds)
        makespan -= mp_ds_pipe_makespan_ends(p, m) * pass_comm / 4.0;
    else if (overlapped)
        /* each hop of the first micro-batch's forward down the p v virtual
         * stages and of its backward back up is waited on: nothing runs
         * beside it on the rank that needs it (pipeline.c
         * mp_pipeline_makespan_overlap, the simulator's lists exactly) */
        makespan += (double)mp_pipeline_overlap_fill(p, v) * pass_comm / 2.0;
    int64_t slow = 0;
    for (int64_t r = 1; r < p; r++)
        if (round[r] > round[slow])
            slow = r;

    if (pm.defer_mb > 0) {
        /* deferred output-layer wgrad (defer_wgrad_of; docs/cost-model.md §6):
         * the head rank's first defer_mb rounds lose the GEMM, which runs
         * after its last backward, beside the other ranks' cooldown
         * backwards (one per rank: its B and the gradient's transfer), and
         * shows only where it outlasts them */
        int64_t rh = 0;
        for (int64_t r = 0; r < p; r++)
            for (int64_t ch = 0; ch < v; ch++)
                if (rank_stage(&pm, r, ch) == pm.defer_stage)
                    rh = r;
        double before = round[slow], after = 0.0, drain = 0.0;
        for (int64_t r = 0; r < p; r++) {
            double x = round[r] - (r == rh ? pm.defer_w : 0.0);
            after = fmax(after, x);
            if (r == rh)
                continue;
            for (int64_t ch = 0; ch < v; ch++)
                drain += (pm.st[rank_stage(&pm, r, ch)].bwd + pass_comm / 2.0) / (double)v;
        }
        double flush = (double)pm.defer_mb * pm.defer_w;
        makespan += fmax(0.0, flush - drain) - (double)pm.defer_mb * (before - after);
    }

    /* the slowest rank's busy time, by part */
    double comp = 0.0, rec = 0.0, tp = 0.0, cp = 0.0, p2p = 0.0, dpm = 0.0;
    for (int64_t ch = 0; ch < v; ch++) {
        const stage_sum *ss = &pm.st[rank_stage(&pm, slow, ch)];
        comp += ss->fwd_compute + ss->bwd_compute;
        dpm += ss->dp_f + ss->dp_b;
        rec += ss->recompute;
        tp += ss->tp;
        cp += ss->cp;
        p2p += dual || zbv ? 0.0
               : ds && (slow == 0 || slow == p - 1) ? pass_comm / 2.0
                                                    : round_p2p(c, ss, pass_comm);
    }
    if (dual)
        p2p = mp_dualpipe_unit_links(p, slow, dual_lat, dual_wire(&pm, slow, dual_bw));
    else if (zbv)
        p2p = zbv_rank_links(&pm, slow, dual_lat, dual_bw);
    double busy = (double)rounds * round[slow];
    out->time.compute = (double)rounds * comp;
    out->time.recompute = (double)rounds * rec;
    out->time.tp_comm = (double)rounds * tp;
    out->time.cp_comm = (double)rounds * cp;
    out->time.pp_comm = (double)rounds * p2p;
    out->time.bubble = fmax(0.0, makespan - busy);
    out->time.dp_comm = (double)rounds * dpm + pm.dp_exposed + pm.tied_sync;
    out->time.optimizer = pm.optimizer;
    out->time.step = out->time.compute + out->time.recompute + out->time.tp_comm +
                     out->time.cp_comm + out->time.pp_comm + out->time.bubble +
                     out->time.dp_comm + out->time.optimizer;

    /* memory: the most loaded pipeline rank */
    double best_total = -1.0;
    for (int64_t r = 0; r < p; r++) {
        mp_memory mem;
        rank_memory(c, plan, &pm, r, &mem);
        if (mem.peak > best_total) {
            best_total = mem.peak;
            out->memory = mem;
        }
    }
    out->memory.capacity = c->hw.memory;
    out->fits = out->memory.peak <= out->memory.capacity;
    out->over_bytes = out->fits ? 0.0 : out->memory.peak - out->memory.capacity;

    /* FLOPs and throughput */
    if (mf && !mf->have_flops) {
        mf->params = mp_model_params(&c->model);
        mf->model_flops = mp_model_flops(&c->model, c->training.seq, c->training.global_batch);
        mf->have_flops = true;
    }
    out->params = mf ? mf->params : mp_model_params(&c->model);
    out->model_flops = mf ? mf->model_flops
                          : mp_model_flops(&c->model, c->training.seq, c->training.global_batch);
    double extra; /* recomputed forward FLOPs per sample */
    mp_recompute r_all = c->parallel.recompute;
    if (mf && !(plan && plan->has_layer_recompute)) {
        /* one recompute choice for every block: the model's figure for it */
        if (!mf->have_extra[r_all]) {
            mf->extra[r_all] = recompute_flops(c, plan);
            mf->have_extra[r_all] = true;
        }
        extra = mf->extra[r_all];
    } else {
        extra = recompute_flops(c, plan);
    }
    out->hardware_flops = out->model_flops + extra * (double)c->training.global_batch;
    double gpus = (double)c->training.gpus;
    double step = out->time.step;
    double tokens = (double)c->training.global_batch * (double)c->training.seq;
    /* under fp8 against the BF16 peak: the model FLOPs are the same, and
     * fp8 and bf16 plans compare on one scale (docs/cost-model.md §13) */
    double peak = mp_high_peak(c);
    mp_throughput *th = &out->throughput;
    if (step > 0.0) {
        th->tokens_per_s = tokens / step;
        th->tokens_per_s_per_gpu = th->tokens_per_s / gpus;
        th->model_tflops_per_gpu = out->model_flops / step / gpus / 1e12;
        th->hardware_tflops_per_gpu = out->hardware_flops / step / gpus / 1e12;
        th->mfu = peak > 0 ? out->model_flops / step / gpus / peak : 0.0;
        th->hfu = peak > 0 ? out->hardware_flops / step / gpus / peak : 0.0;
        th->days_for_tokens = c->training.tokens > 0 ? c->training.tokens / th->tokens_per_s / 86400.0
                                                     : 0.0;
        th->gpu_hours_for_tokens = th->days_for_tokens * 24.0 * gpus;
    }
    if (round != round_stack)
        free(round);
    free(pm.st);
    return MP_OK;
}
