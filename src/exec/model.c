/* model.c — one rank's part of the model (GPT, LLaMA-style or BERT): buffers,
 * the TP collectives, and the whole forward and backward (embedding, the
 * stage's blocks, final norm, vocabulary-parallel head and cross-entropy),
 * partitioned as Megatron-LM does. The block itself is in block.c, the CP
 * ring in cp_ring.c, BERT's pooler and head backward in bert_heads.c; what
 * they share is model_internal.h.
 *
 *   S = positions * micro_batch token rows, ordered r = pos * b + sample, so
 *   that with sequence parallelism (SP) TP rank k holds rows [k*S/t, (k+1)*S/t),
 *   a contiguous piece of the sequence; Sl = S/t with SP, S without. The
 *   positions are the whole sequence, or with context parallelism (CP) this
 *   rank's two of 2cp chunks (mp_dims_global_pos); attention then runs this
 *   rank's queries against every key and value, passed around the CP ring,
 *   and the keys' and values' gradients go back around it to their owners.
 *   h hidden, hd head dim, hl = heads hd/t (h/t where heads hd = h), Fl = ffn/t,
 *   Vl = vocab/t.
 *
 *   column-parallel GEMM (QKV, fc1, LM head): input replicated [S,h]; its
 *     conjugate "g" = identity forward / all-reduce of the input gradient
 *     backward; with SP all-gather forward / reduce-scatter backward.
 *   row-parallel GEMM (proj, fc2, embedding): partial sums [S,h]; all-reduce
 *     forward / identity backward; with SP reduce-scatter / all-gather.
 *
 * Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/t5.h"
#include "exec/real.h"
#include "exec/model_internal.h"

mp_status mp_gpt_init(mp_gpt *g, const mp_gpt_dims *d, const mp_param_layout *lay,
                      const mp_backend *be, mp_group tp, int n_slots, size_t pad_to,
                      bool exact, uint64_t seed, mp_probe *probe, mp_error *err)
{
    memset(g, 0, sizeof *g);
    g->d = *d;
    g->lay = lay;
    g->be = be;
    g->tp = tp;
    g->exact = exact;
    g->probe = probe;
    g->grad_scale = 1;
    g->keep_microbatch = -1;
    sizes z = sizes_of(d);
    g->n_alloc = mp_dims_flat_alloc(d, lay->total, pad_to);
    g->w = be->alloc(g->n_alloc * sizeof(real));
    g->g = be->alloc(g->n_alloc * sizeof(real));
    g->slots = calloc((size_t)n_slots, sizeof *g->slots);
    work W;
    size_t nws = layout_work(&W, NULL, &z);
    g->ws = be->alloc(nws * sizeof(real));
    g->qpos = malloc(z.s * sizeof *g->qpos);
    g->qpos_be = be->alloc(z.s * sizeof *g->qpos);
    g->row_pos = be->alloc(z.Sl * sizeof *g->row_pos);
    g->row_seg = be->alloc(z.Sl * sizeof *g->row_seg);
    int *rows = malloc(2 * z.Sl * sizeof *rows);
    if (!g->w || !g->g || !g->slots || !g->ws || !g->qpos || !g->qpos_be || !g->row_pos ||
        !g->row_seg || !rows) {
        free(rows);
        goto oom;
    }
    for (size_t i = 0; i < z.s; i++)
        g->qpos[i] = mp_dims_global_pos(d, (int)i);
    for (size_t rl = 0; rl < z.Sl; rl++) {
        rows[rl] = g->qpos[global_row(g, rl, z.Sl) / z.b];
        rows[z.Sl + rl] = (int)segment(g, (size_t)rows[rl]);
    }
    be->copy(g->qpos_be, g->qpos, z.s * sizeof *g->qpos, MP_COPY_H2D);
    be->copy(g->row_pos, rows, z.Sl * sizeof *rows, MP_COPY_H2D);
    be->copy(g->row_seg, rows + z.Sl, z.Sl * sizeof *rows, MP_COPY_H2D);
    free(rows);
    g->n_slots = n_slots;
    if (d->experts > 0 && d->bias_rate > 0) { /* the expert bias starts at zero */
        size_t nb = (size_t)mp_dims_blocks(d) * (size_t)d->experts * sizeof(real);
        g->route_bias = be->alloc(nb);
        g->route_load = be->alloc(nb);
        if (!g->route_bias || !g->route_load)
            goto oom;
        be->zero(g->route_bias, nb);
        be->zero(g->route_load, nb);
    }
    if (d->t5 && mp_t5_alloc(g, n_slots)) /* T5 keeps its own slots */
        goto oom;
    for (int i = 0; !d->t5 && i < n_slots; i++) {
        mp_acts probe_layout;
        mp_acts *A = calloc(1, sizeof *A);
        if (!A)
            goto oom;
        g->slots[i] = A;
        A->blk = calloc(z.n_blocks ? z.n_blocks : 1, sizeof *A->blk);
        size_t n = layout_acts(&probe_layout, NULL, &z, d);
        A->mem = be->alloc(n * sizeof(real));
        A->host_tokens = malloc(z.S * sizeof *A->host_tokens);
        if (!A->blk || !A->mem || !A->host_tokens)
            goto oom;
        layout_acts(A, A->mem, &z, d);
        g->slot_reals = n;
    }
    /* Initial values: a function of (seed, tensor, full index) only; made on
     * the host one tensor at a time */
    for (int pid = 0; pid < lay->n; pid++) {
        const mp_param *p = &lay->p[pid];
        size_t n = (size_t)p->lrows * (size_t)p->lcols;
        real *host = malloc((n ? n : 1) * sizeof(real));
        if (!host)
            goto oom;
        for (size_t i = 0; i < n; i++)
            host[i] = (real)mp_param_init_value(
                p, p->ref_index, seed, mp_param_full_index(p, d->tp_rank, i), exact);
        be->copy(g->w + p->offset, host, n * sizeof(real), MP_COPY_H2D);
        free(host);
    }
    return MP_OK;
oom:
    mp_gpt_free(g);
    return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL,
                        "out of memory for the model (try --shrink)");
}

size_t mp_gpt_bytes(const mp_gpt_dims *d, const mp_param_layout *lay, int n_slots,
                    size_t pad_to)
{
    sizes z = sizes_of(d);
    size_t n_alloc = mp_dims_flat_alloc(d, lay->total, pad_to);
    work W;
    mp_acts A;
    size_t nws = layout_work(&W, NULL, &z);
    size_t slot = layout_acts(&A, NULL, &z, d);
    size_t blocks = z.n_blocks ? z.n_blocks : 1;
    size_t bias =
        d->experts > 0 && d->bias_rate > 0 ? 2 * (size_t)mp_dims_blocks(d) * d->experts : 0;
    return sizeof(real) * (2 * n_alloc + nws + (size_t)n_slots * slot + bias) +
           z.s * sizeof(int) +
           (size_t)n_slots * (sizeof(mp_acts) + blocks * sizeof(block_acts));
}

void mp_gpt_free(mp_gpt *g)
{
    const mp_backend *be = g->be;
    if (g->slots)
        for (int i = 0; i < g->n_slots; i++)
            if (g->slots[i]) {
                free(g->slots[i]->blk);
                be->free(g->slots[i]->mem);
                free(g->slots[i]->host_tokens);
                free(g->slots[i]);
            }
    free(g->slots);
    mp_t5_free(g);
    if (be) {
        be->free(g->w);
        be->free(g->g);
        be->free(g->ws);
        be->free(g->qpos_be);
        be->free(g->row_pos);
        be->free(g->row_seg);
        be->free(g->route_bias);
        be->free(g->route_load);
    }
    free(g->qpos);
    free(g->kept_logits);
    memset(g, 0, sizeof *g);
}

/* ---- TP collectives, timed on the tp stream ---- */

/* partial[S,cols] summed over TP -> out[Sl,cols]: all-reduce (out may alias
 * partial) or, with SP, reduce-scatter along the sequence. S, Sl: the rows
 * (T5's decoder has other rows than its encoder; mp_model_tp_reduce: the model's). */
mp_status mp_model_tp_reduce_rows(mp_gpt *g, real *partial, real *out, size_t S,
                                  size_t Sl, size_t cols, const char *site, mp_error *err)
{
    struct { size_t S, Sl; } z = {S, Sl};
    double t = g->be->now();
    mp_status st = MP_OK;
    bool drop = mp_probe_drops(g->probe, site);
    if (!g->d.sp || g->tp.size == 1) {
        if (!drop)
            st = g->be->allreduce(&g->tp, MP_REAL_KIND, partial, z.S * cols, MP_RED_SUM, err);
        be_copy(g, out, partial, z.S * cols);
    } else if (drop) {
        be_copy(g, out, partial + (size_t)g->tp.rank * z.Sl * cols, z.Sl * cols);
    } else {
        st = g->be->reduce_scatter(&g->tp, MP_REAL_KIND, partial, out, z.Sl * cols, err);
    }
    if (g->tp.size > 1)
        mp_probe_record(g->probe, t, MP_STREAM_TP, MP_EV_TP_COMM, true);
    return st;
}

mp_status mp_model_tp_reduce(mp_gpt *g, real *partial, real *out, size_t cols,
                             const char *site, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    return mp_model_tp_reduce_rows(g, partial, out, z.S, z.Sl, cols, site, err);
}

/* loc[Sl,cols] -> full[S,cols]: SP all-gather; without SP a copy (or nothing). */
mp_status mp_model_tp_gather_rows(mp_gpt *g, const real *loc, real *full, size_t S,
                                  size_t Sl, size_t cols, mp_error *err)
{
    struct { size_t S, Sl; } z = {S, Sl};
    if (!g->d.sp || g->tp.size == 1) {
        be_copy(g, full, loc, z.S * cols);
        return MP_OK;
    }
    double t = g->be->now();
    mp_status st = g->be->allgather(&g->tp, MP_REAL_KIND, loc, full, z.Sl * cols, err);
    mp_probe_record(g->probe, t, MP_STREAM_TP, MP_EV_TP_COMM, true);
    return st;
}

mp_status mp_model_tp_gather(mp_gpt *g, const real *loc, real *full, size_t cols,
                             mp_error *err)
{
    sizes z = sizes_of(&g->d);
    return mp_model_tp_gather_rows(g, loc, full, z.S, z.Sl, cols, err);
}

/* Vocabulary-parallel cross-entropy of logits[S,Vl] (this rank's columns):
 * max, sum of exp and the target's logit are reduced over TP; loss_r =
 * log(sum) + max - logit[target], added to *loss_sum (rows whose target is
 * negative have none). The logits become the probabilities in place.
 * stats: [3S] scratch, loss: [S] scratch. */
mp_status mp_model_cross_entropy(mp_gpt *g, real *logits, const int32_t *targets,
                                 size_t S, real *stats, real *loss, double *loss_sum,
                                 mp_error *err)
{
    const mp_backend *be = g->be;
    size_t Vl = (size_t)g->d.vocab / (size_t)g->d.tp, lo = (size_t)g->tp.rank * Vl;
    bool ex = g->exact;
    /* vocab-parallel cross-entropy: max, sum of exp and the target's logit are
     * reduced over TP; loss_r = log(sum) + max - logit[target] (0 where the
     * target is < 0: BERT's unmasked tokens) */
    real *mx = stats, *sum = stats + S, *tl = stats + 2 * S;
    be->ce_max(MP_REAL_KIND, mx, logits, S, Vl);
    double t = be->now();
    CHECK(be->allreduce(&g->tp, MP_REAL_KIND, mx, S, MP_RED_MAX, err));
    be->ce_exp_sum(MP_REAL_KIND, logits, sum, tl, mx, targets, lo, S, Vl, ex);
    if (!mp_probe_drops(g->probe, "tp-ce"))
        CHECK(be->allreduce(&g->tp, MP_REAL_KIND, sum, 2 * S, MP_RED_SUM, err));
    if (g->tp.size > 1)
        mp_probe_record(g->probe, t, MP_STREAM_TP, MP_EV_TP_COMM, true);
    be->ce_loss(MP_REAL_KIND, loss, logits, sum, mx, tl, targets, S, Vl, ex);
    *loss_sum += be->sum(MP_REAL_KIND, loss, S);
    return MP_OK;
}

void mp_model_dlogits(mp_gpt *g, real *logits, const int32_t *targets, size_t S)
{
    size_t Vl = (size_t)g->d.vocab / (size_t)g->d.tp, lo = (size_t)g->tp.rank * Vl;
    /* rows whose target is < 0 (BERT's unmasked tokens) have no loss: zero */
    g->be->ce_backward(MP_REAL_KIND, logits, targets, lo, S, Vl, g->grad_scale, true);
}

mp_status mp_gpt_forward(mp_gpt *g, int slot, const int32_t *tokens,
                         const int32_t *targets, double *loss_sum, mp_error *err)
{
    if (g->d.t5)
        return mp_t5_forward(g, slot, tokens, targets, loss_sum, err);
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    mp_acts *A = g->slots[slot];
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    const mp_backend *be = g->be;
    be->copy(A->tokens, tokens, z.S * sizeof *tokens, MP_COPY_H2D);
    be->copy(A->targets, targets, z.S * sizeof *targets, MP_COPY_H2D);
    memcpy(A->host_tokens, tokens, z.S * sizeof *tokens);
    size_t lo = (size_t)g->tp.rank * z.Vl;
    if (z.emb) {
        /* embedding (vocab-parallel): part[S,h] = wte rows this rank owns, else 0;
         * x0[Sl,h] = reduce(part) + wpe[pos] (learned positions; RoPE turns Q, K) */
        const real *wte = param(g->w, g, lay->wte);
        const real *wpe = lay->wpe >= 0 ? param(g->w, g, lay->wpe) : NULL;
        be->gather_rows(MP_REAL_KIND, W.part, wte, A->tokens, lo, z.Vl, z.S, z.h, false);
        CHECK(mp_model_tp_reduce(g, W.part, A->x0, z.h, "tp-embed", err));
        const real *tte = lay->tte >= 0 ? param(g->w, g, lay->tte) : NULL;
        if (wpe)
            be->gather_rows(MP_REAL_KIND, A->x0, wpe, g->row_pos, 0, z.sk, z.Sl, z.h, true);
        if (wpe && tte) /* BERT: the second half of the sequence is segment 1 */
            be->gather_rows(MP_REAL_KIND, A->x0, tte, g->row_seg, 0, 2, z.Sl, z.h, true);
        bq(g, A->x0, z.Sl * z.h, MP_Q_ACT);
    } else {
        /* a later pipeline stage: the previous stage's output [Sl,h] */
        if (!g->stage_in)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "pipeline stage without its input activation");
        be_copy(g, A->x0, g->stage_in, z.win * z.Sl * z.h);
    }
    /* blocks */
    const real *x = A->x0;
    for (size_t k = 0; k < z.n_blocks; k++) {
        int l = (int)(z.first_block + k);
        if (mp_dims_block_recompute(&g->d, l) == 2) {
            /* full recomputation: the block runs in scratch, only its output is kept */
            block_acts V = W.sblk;
            V.xout = A->blk[k].xout;
            CHECK(mp_model_block_forward(g, &V, l, x, err));
        } else {
            /* selective: what the block does not keep goes to the scratch */
            block_acts V = A->blk[k];
            mp_model_rebuild_scratch(g, &V);
            CHECK(mp_model_block_forward(g, &V, l, x, err));
        }
        x = A->blk[k].xout;
    }
    /* final norm: with the head; with a standalone MTP stage after the last
     * block (the stage's output, this rank's rows in lnf_full) */
    if (z.lnf)
        mp_model_norm_forward(g, sp && z.head ? W.loc : A->lnf_full, A->lnf_xhat, A->lnf_rstd,
                              x, param(g->w, g, lay->lnf_w),
                              lay->lnf_b >= 0 ? param(g->w, g, lay->lnf_b) : NULL, (int)z.Sl);
    if (z.mtp && !z.head) {
        /* the standalone MTP stage: [h | h_0 .. h_{D-1}] to the last stage (h:
         * normed here, or by an earlier stage) */
        const real *hmain = z.lnf ? A->lnf_full : A->x0;
        be_copy(g, A->wide, hmain, z.Sl * z.h);
        CHECK(mp_mtp_forward(g, A, tokens, targets, hmain, NULL, err));
    }
    if (!z.head)
        return be->sync(err); /* the stage's output is mp_gpt_stage_output() */
    /* logits[S,Vl] = lnf_full @ Whead[Vl,h]^T (vocab-parallel); after a
     * standalone MTP stage the normed rows are the input's first */
    if (sp && z.lnf)
        CHECK(mp_model_tp_gather(g, W.loc, A->lnf_full, z.h, err));
    else if (!z.lnf)
        CHECK(mp_model_tp_gather(g, A->x0, A->lnf_full, z.h, err));
    const real *wh = param(g->w, g, lay->head);
    const real *hin = A->lnf_full;
    if (g->d.bert) {
        /* BERT: mlm_out = LN(gelu(lnf_full @ Wd + bd)) on every rank's full rows */
        GEMM(false, false, z.S, z.h, z.h, A->lnf_full, z.h, param(g->w, g, lay->mlm_w), z.h,
             0.0, A->mlm_pre, z.h);
        be->bias_add(MP_REAL_KIND, A->mlm_pre, param(g->w, g, lay->mlm_b), (int)z.S,
                     (int)z.h);
        bq(g, A->mlm_pre, z.S * z.h, MP_Q_ACT);
        mp_gelu_kind_forward(g, A->mlm_act, A->mlm_pre, z.S * z.h);
        bq(g, A->mlm_act, z.S * z.h, MP_Q_ACT);
        be->layernorm_forward(MP_REAL_KIND, A->mlm_out, A->mlm_xhat, A->mlm_rstd, A->mlm_act,
                              param(g->w, g, lay->mlm_ln_w),
                              param(g->w, g, lay->mlm_ln_b), (int)z.S, (int)z.h,
                              mp_dims_norm_eps(&g->d), ex);
        hin = A->mlm_out;
    }
    GEMM(false, true, z.S, z.Vl, z.h, hin, z.h, wh, z.h, 0.0, A->logits, z.Vl);
    if (g->d.bert)
        be->bias_add(MP_REAL_KIND, A->logits, param(g->w, g, lay->lm_bias), (int)z.S,
                     (int)z.Vl);
    bq(g, A->logits, z.S * z.Vl, MP_Q_ACT);
    if (g->kept_logits && g->microbatch_now == g->keep_microbatch)
        be->copy(g->kept_logits, A->logits, z.S * z.Vl * sizeof(real), MP_COPY_D2H);
    /* vocab-parallel cross-entropy (logits become probabilities) */
    CHECK(mp_model_cross_entropy(g, A->logits, A->targets, z.S, W.stats, W.part, loss_sum,
                                 err));
    if (g->d.bert)
        *loss_sum += mp_model_nsp_forward(g, A);
    if (A->mtp) /* the multi-token-prediction modules (or their losses), from lnf_full */
        CHECK(mp_mtp_forward(g, A, tokens, targets,
                             A->lnf_full + (sp ? (size_t)g->tp.rank * z.Sl * z.h : 0), loss_sum,
                             err));
    return be->sync(err);
}

mp_status mp_gpt_backward(mp_gpt *g, int slot, mp_error *err)
{
    if (g->d.t5)
        return mp_t5_backward(g, slot, err);
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    mp_acts *A = g->slots[slot];
    const mp_param_layout *lay = g->lay;
    bool sp = g->d.sp && g->tp.size > 1;
    size_t lo = (size_t)g->tp.rank * z.Vl;
    if (z.head && g->d.bert) {
        CHECK(mp_model_bert_head_backward(g, A, err));
    } else if (z.head) {
        if (A->mtp) /* first the MTP modules': their workspace is the model's */
            CHECK(mp_mtp_backward(g, A, W.dwide, err));
        /* dlogits[S,Vl] = (p - onehot(target)) * grad_scale, in place */
        mp_model_dlogits(g, A->logits, A->targets, z.S);
        /* dWhead[Vl,h] += dlogits^T @ lnf_full; dlnf = reduce(dlogits @ Whead) */
        GEMM(true, false, z.Vl, z.h, z.S, A->logits, z.Vl, A->lnf_full, z.h, 1.0,
             param(g->g, g, lay->head), z.h);
        GEMM(false, false, z.S, z.h, z.Vl, A->logits, z.Vl, param(g->w, g, lay->head), z.h,
             0.0, W.part, z.h);
        CHECK(mp_model_tp_reduce(g, W.part, W.dln, z.h, "tp-head-bwd", err));
        bq(g, W.dln, z.Sl * z.h, MP_Q_GRAD);
        if (!z.lnf) { /* after a standalone MTP stage: [dh | dh_0 ..] back to it */
            be_copy(g, W.dwide, W.dln, z.Sl * z.h);
            return g->be->sync(err);
        }
        if (A->mtp) /* the final norm's output feeds the first MTP module too */
            mp_mtp_add_hidden_grad(g, A, W.dln);
        mp_model_norm_backward(g, W.dres, param(g->g, g, lay->lnf_w),
                               lay->lnf_b >= 0 ? param(g->g, g, lay->lnf_b) : NULL, W.dln,
                               A->lnf_xhat, A->lnf_rstd, param(g->w, g, lay->lnf_w),
                               (int)z.Sl);
    } else if (z.mtp || z.lnf || z.win > 1) {
        /* around a standalone MTP stage: the next stage's gradient of [h | h_0 ..]
         * (h alone before the MTP stage; after it the stages pass it on) */
        if (!g->stage_grad_in)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "pipeline stage without its output gradient");
        if (z.win > 1) { /* an empty stage after the MTP stage */
            be_copy(g, W.dwide, g->stage_grad_in, z.win * z.Sl * z.h);
            return g->be->sync(err);
        }
        /* the modules from the h_k's gradients (their blocks' backward uses the
         * workspace), then h's */
        if (z.mtp)
            CHECK(mp_mtp_backward(g, A, (real *)g->stage_grad_in, err));
        be_copy(g, W.dln, g->stage_grad_in, z.Sl * z.h);
        if (z.mtp)
            mp_mtp_add_hidden_grad(g, A, W.dln);
        if (z.lnf)
            mp_model_norm_backward(g, W.dres, param(g->g, g, lay->lnf_w),
                                   lay->lnf_b >= 0 ? param(g->g, g, lay->lnf_b) : NULL, W.dln,
                                   A->lnf_xhat, A->lnf_rstd, param(g->w, g, lay->lnf_w),
                                   (int)z.Sl);
        else
            be_copy(g, W.dres, W.dln, z.Sl * z.h);
    } else {
        /* a pipeline stage before the last: the next stage's input gradient */
        if (!g->stage_grad_in)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "pipeline stage without its output gradient");
        be_copy(g, W.dres, g->stage_grad_in, z.Sl * z.h);
    }
    for (size_t k = z.n_blocks; k-- > 0;) {
        int l = (int)(z.first_block + k), mode = mp_dims_block_recompute(&g->d, l);
        block_acts V = A->blk[k];
        if (mode == 2) {
            /* full: the block's forward again from its input, collectives and all */
            V = W.sblk;
            V.xout = A->blk[k].xout;
            CHECK(mp_model_block_forward(g, &V, l, k ? A->blk[k - 1].xout : A->x0, err));
        } else if (mode == 1) {
            /* selective: the modules it does not keep again (the attention
             * probabilities from the kept Q, K, V; the norms; the MLP's fc1) */
            CHECK(mp_model_rebuild(g, &V, l, k ? A->blk[k - 1].xout : A->x0, err));
        }
        CHECK(mp_model_block_backward(g, &V, l, W.dres, err));
    }
    if (!z.emb) /* W.dres is the stage's input gradient: mp_gpt_stage_input_grad() */
        return g->be->sync(err);
    /* embedding: dwpe[pos] += dres (local rows); dwte rows this rank owns */
    real *gwpe = lay->wpe >= 0 ? param(g->g, g, lay->wpe) : NULL;
    real *gtte = lay->tte >= 0 ? param(g->g, g, lay->tte) : NULL;
    real *gwte = param(g->g, g, lay->wte);
    if (gwpe)
        g->be->scatter_add_rows(MP_REAL_KIND, gwpe, W.dres, g->row_pos, 0, z.sk, z.Sl, z.h);
    if (gwpe && gtte)
        g->be->scatter_add_rows(MP_REAL_KIND, gtte, W.dres, g->row_seg, 0, 2, z.Sl, z.h);
    const real *dfull = W.dres;
    if (sp) {
        CHECK(mp_model_tp_gather(g, W.dres, W.dfull, z.h, err));
        dfull = W.dfull;
    }
    g->be->scatter_add_rows(MP_REAL_KIND, gwte, dfull, A->tokens, lo, z.Vl, z.S, z.h);
    return g->be->sync(err);
}

const real *mp_gpt_stage_output(const mp_gpt *g, int slot)
{
    if (g->d.t5)
        return mp_t5_stage_output(g, slot);
    sizes z = sizes_of(&g->d);
    const mp_acts *A = g->slots[slot];
    if (A->wide) /* a standalone MTP stage */
        return A->wide;
    if (z.lnf && !z.head) /* the last block's stage before a standalone MTP stage */
        return A->lnf_full;
    return z.n_blocks ? A->blk[z.n_blocks - 1].xout : A->x0;
}

const real *mp_gpt_stage_input_grad(const mp_gpt *g)
{
    if (g->d.t5)
        return mp_t5_stage_input_grad(g);
    sizes z = sizes_of(&g->d);
    work W;
    layout_work(&W, g->ws, &z);
    return z.win > 1 ? W.dwide : W.dres;
}

/* Elements of the activation a stage receives (its input) and sends (its
 * output); the gradients go back the same sizes. This rank's [Sl,h], T5's
 * stages their own (t5.c). */
size_t mp_gpt_stage_input_count(const mp_gpt *g)
{
    if (g->d.t5)
        return mp_t5_stage_count(g, true);
    sizes z = sizes_of(&g->d);
    return z.win * (size_t)mp_dims_local_tokens(&g->d) * (size_t)g->d.hidden;
}

size_t mp_gpt_stage_output_count(const mp_gpt *g)
{
    if (g->d.t5)
        return mp_t5_stage_count(g, false);
    sizes z = sizes_of(&g->d);
    return z.wout * (size_t)mp_dims_local_tokens(&g->d) * (size_t)g->d.hidden;
}

