/* t5.c — T5 in the executor: one rank's encoder-decoder, its activation
 * slots and workspace, and the whole forward and backward (the shared
 * vocabulary-parallel embedding for the encoder's and the decoder's tokens,
 * the encoder stack and its final norm, the decoder stack whose
 * cross-attention reads the encoder's output, the decoder's final norm, the
 * head tied to the embedding or not, and the cross-entropy of the decoder's
 * targets). The blocks are t5_block.c; the parameter table is params.c's.
 *
 *   Se = seq * b encoder rows, Sd = dec_seq * b decoder rows (r = pos * b +
 *   sample); with SP each TP rank holds its piece of both sequences, and the
 *   encoder's output is all-gathered once for every cross-attention, its
 *   gradient summed over the decoder blocks and reduced over TP once.
 *
 * Every tensor is in the backend's memory and every op on one is the
 * backend's (backend.h), so the CUDA backend runs it on the device; the
 * tokens are made on the host and copied over.
 *
 * Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/runtime.h"
#include "exec/t5.h"
#include "exec/real.h"
#include "exec/model_internal.h"
#include "exec/t5_internal.h"

static size_t t5_layout_acts(t5_acts *A, real *base, const t5_sizes *z,
                                  const mp_gpt_dims *d)
{
    size_t u = 0, h = z->h;
    size_t int_reals = ((z->Se + 2 * z->Sd) * sizeof(int32_t) + sizeof(real) - 1) / sizeof(real);
    real *ints = take(base, &u, int_reals);
    if (base) {
        A->enc_tok = (int32_t *)(void *)ints;
        A->dec_in = A->enc_tok + z->Se;
        A->dec_tgt = A->dec_in + z->Sd;
    }
    A->enc_x0 = take(base, &u, z->Sel * h);
    A->dec_x0 = take(base, &u, z->Sdl * h);
    for (size_t l = 0; l < z->L; l++) {
        t5_block_acts tmp, *B = base ? &A->blk[l] : &tmp;
        t5_layout_block(B, base, &u, z, l >= z->E, mp_dims_block_recompute(d, (int)l));
    }
    A->encf_xhat = take(base, &u, z->Sel * h);
    A->encf_rstd = take(base, &u, z->Sel);
    A->enc_out = take(base, &u, z->Sel * h);
    A->enc_full = take(base, &u, z->Se * h);
    A->lnf_xhat = take(base, &u, z->Sdl * h);
    A->lnf_rstd = take(base, &u, z->Sdl);
    A->lnf_full = take(base, &u, z->Sd * h);
    A->logits = take(base, &u, z->Sd * z->Vl);
    A->bout = take(base, &u, (z->Sdl + z->Sel) * h);
    return u;
}

static size_t t5_layout_work(t5_work *W, real *base, const t5_sizes *z,
                                  const mp_gpt_dims *d)
{
    size_t u = 0, h = z->h;
    W->part = take(base, &u, z->Smax * h);
    W->loc = take(base, &u, z->Slmax * h);
    W->dfull = take(base, &u, z->Smax * h);
    W->dres = take(base, &u, z->Sdl * h);
    W->denc_res = take(base, &u, z->Sel * h);
    W->dln = take(base, &u, z->Slmax * h);
    W->dtmp = take(base, &u, z->Slmax * h);
    W->datt = take(base, &u, z->Smax * z->hl);
    W->dqkv = take(base, &u, z->Smax * 3 * z->hl);
    W->dxq = take(base, &u, z->Sd * z->hl);
    W->dxkv = take(base, &u, z->Se * 2 * z->hl);
    W->dfc = take(base, &u, z->Smax * z->f1);
    W->dact = take(base, &u, z->Smax * z->Fl);
    W->denc_part = take(base, &u, z->Se * h);
    W->denc = take(base, &u, z->Sel * h);
    W->denc_tmp = take(base, &u, z->Sel * h);
    W->bgrad = take(base, &u, (z->Sdl + z->Sel) * h);
    W->stats = take(base, &u, 3 * z->Sd);
    W->loss = take(base, &u, z->Sd);
    W->scratch = take(base, &u, z->se * z->se);
    /* recomputation's scratch: selective's probabilities if any block keeps
     * none, full's block of each side if any block of it is rebuilt whole */
    bool sel = false, full[2] = {false, false};
    for (size_t l = 0; l < z->L; l++) {
        int r = mp_dims_block_recompute(d, (int)l);
        sel |= r == 1;
        full[l >= z->E] |= r == 2;
    }
    W->sprobs = take(base, &u, sel ? z->b * z->al * z->se * z->se : 0);
    W->sxprobs = take(base, &u, sel ? z->b * z->al * z->sd * z->se : 0);
    for (int k = 0; k < 2; k++) {
        t5_block_acts tmp, *B = base ? &W->sblk[k] : &tmp;
        if (full[k])
            t5_layout_block(B, base, &u, z, k == 1, 0);
        else
            memset(B, 0, sizeof *B);
    }
    return u;
}

/* The bucket of each (query i, key j) of s positions, in the backend's memory. */
static int32_t *t5_buckets(const mp_backend *be, size_t s, bool bidirectional)
{
    int32_t *host = malloc(s * s * sizeof *host), *bk = be->alloc(s * s * sizeof *bk);
    for (size_t i = 0; host && bk && i < s; i++)
        for (size_t j = 0; j < s; j++)
            host[i * s + j] = mp_t5_bucket((int)j - (int)i, bidirectional);
    if (host && bk)
        be->copy(bk, host, s * s * sizeof *bk, MP_COPY_H2D);
    else if (bk) {
        be->free(bk);
        bk = NULL;
    }
    free(host);
    return bk;
}

mp_status mp_t5_alloc(mp_gpt *g, int n_slots)
{
    t5_sizes z = t5_sizes_of(&g->d);
    t5_state *T = calloc(1, sizeof *T);
    if (!T)
        return MP_ENOMEM;
    g->t5 = T;
    T->slots = calloc((size_t)n_slots, sizeof *T->slots);
    if (!T->slots)
        return MP_ENOMEM;
    T->n_slots = n_slots;
    T->stack[0] = T->stack[1] = (mp_group){.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    t5_acts probe;
    size_t n = t5_layout_acts(&probe, NULL, &z, &g->d);
    for (int i = 0; i < n_slots; i++) {
        t5_acts *A = &T->slots[i];
        A->blk = calloc(z.L ? z.L : 1, sizeof *A->blk);
        A->mem = g->be->alloc(n * sizeof(real));
        if (!A->blk || !A->mem)
            return MP_ENOMEM;
        t5_layout_acts(A, A->mem, &z, &g->d);
    }
    g->slot_reals = n;
    T->wmem = g->be->alloc(t5_layout_work(&T->W, NULL, &z, &g->d) * sizeof(real));
    T->enc_bucket = t5_buckets(g->be, z.se, true);
    T->dec_bucket = t5_buckets(g->be, z.sd, false);
    T->host_ints = malloc((z.Se + 2 * z.Sd) * sizeof *T->host_ints);
    if (!T->wmem || !T->enc_bucket || !T->dec_bucket || !T->host_ints)
        return MP_ENOMEM;
    t5_layout_work(&T->W, T->wmem, &z, &g->d);
    return MP_OK;
}

void mp_t5_free(mp_gpt *g)
{
    t5_state *T = t5_of(g);
    if (!T)
        return;
    const mp_backend *be = g->be;
    for (int i = 0; T->slots && i < T->n_slots; i++) {
        free(T->slots[i].blk);
        be->free(T->slots[i].mem);
    }
    free(T->slots);
    be->free(T->wmem);
    be->free(T->enc_bucket);
    be->free(T->dec_bucket);
    free(T->host_ints);
    for (int k = 0; k < 2; k++)
        mp_group_free(&T->stack[k]);
    free(T);
    g->t5 = NULL;
}

/* x0[Sl,h] = the rows of wte this rank owns for tok[S], summed over TP. */
static mp_status t5_embed(mp_gpt *g, const int32_t *tok, size_t S, size_t Sl, real *x0,
                          mp_error *err)
{
    t5_work *W = &t5_of(g)->W;
    size_t h = (size_t)g->d.hidden, Vl = (size_t)g->d.vocab / (size_t)g->d.tp;
    size_t lo = (size_t)g->tp.rank * Vl;
    const real *wte = param(g->w, g, g->lay->wte);
    g->be->gather_rows(MP_REAL_KIND, W->part, wte, tok, lo, Vl, S, h, false);
    CHECK(mp_model_tp_reduce_rows(g, W->part, x0, S, Sl, h, "tp-embed", err));
    bq(g, x0, Sl * h, MP_Q_ACT);
    return MP_OK;
}

/* d wte rows this rank owns += the gradient dx[Sl,h] of tok's rows (SP: gathered). */
static mp_status t5_embed_backward(mp_gpt *g, const int32_t *tok, size_t S, size_t Sl,
                                   const real *dx, mp_error *err)
{
    t5_work *W = &t5_of(g)->W;
    size_t h = (size_t)g->d.hidden, Vl = (size_t)g->d.vocab / (size_t)g->d.tp;
    size_t lo = (size_t)g->tp.rank * Vl;
    real *gwte = param(g->g, g, g->lay->wte);
    const real *dfull = dx;
    if (g->d.sp && g->tp.size > 1) {
        CHECK(mp_model_tp_gather_rows(g, dx, W->dfull, S, Sl, h, err));
        dfull = W->dfull;
    }
    g->be->scatter_add_rows(MP_REAL_KIND, gwte, dfull, tok, lo, Vl, S, h);
    return MP_OK;
}

/* Block l's forward as its recomputation says: full runs it in scratch
 * and keeps its output alone. */
static mp_status t5_block_forward_of(mp_gpt *g, t5_acts *A, size_t l, const real *x,
                                     const real *enc_full, mp_error *err)
{
    if (mp_dims_block_recompute(&g->d, (int)l) != 2)
        return mp_t5_block_forward(g, &A->blk[l], (int)l, x, enc_full, err);
    t5_block_acts V = t5_of(g)->W.sblk[enc_full != NULL];
    V.xout = A->blk[l].xout;
    return mp_t5_block_forward(g, &V, (int)l, x, enc_full, err);
}

/* Block l's backward, after what its recomputation drops is rebuilt: full
 * runs its forward again from its input (collectives and all) into scratch,
 * selective its attention probabilities from the kept Q, K, V. */
static mp_status t5_block_backward_of(mp_gpt *g, t5_acts *A, const t5_stage *st,
                                      size_t l, real *dres, mp_error *err)
{
    t5_work *W = &t5_of(g)->W;
    bool dec = l >= (size_t)g->d.enc_layers;
    const real *enc_full = dec ? A->enc_full : NULL;
    t5_block_acts V = A->blk[l];
    int mode = mp_dims_block_recompute(&g->d, (int)l);
    if (mode == 2) {
        size_t first = dec ? st->dec_b : st->enc_b;
        const real *x = l > first ? A->blk[l - 1].xout : dec ? A->dec_x0 : A->enc_x0;
        V = W->sblk[dec];
        CHECK(mp_t5_block_forward(g, &V, (int)l, x, enc_full, err));
    } else if (mode == 1) {
        V.probs = W->sprobs;
        V.xprobs = dec ? W->sxprobs : NULL;
        mp_t5_recompute_probs(g, &V, (int)l);
    }
    return mp_t5_block_backward(g, &V, (int)l, dres, enc_full, err);
}

mp_status mp_t5_forward(mp_gpt *g, int slot, const int32_t *tokens,
                        const int32_t *targets, double *loss_sum, mp_error *err)
{
    t5_sizes z = t5_sizes_of(&g->d);
    t5_stage st = t5_stage_of(&g->d);
    t5_state *T = t5_of(g);
    t5_acts *A = &T->slots[slot];
    const mp_param_layout *lay = g->lay;
    bool sp = g->d.sp && g->tp.size > 1;
    size_t eh = z.Sel * z.h, dh = z.Sdl * z.h;
    /* [encoder tokens | decoder input | decoder targets] made on the host:
     * teacher forcing, the decoder reads its targets one position late */
    int32_t *hi = T->host_ints;
    memcpy(hi, tokens, z.Se * sizeof *tokens);
    for (size_t r = 0; r < z.Sd; r++) {
        hi[z.Se + z.Sd + r] = targets[r];
        hi[z.Se + r] = r < z.b ? 0 : targets[r - z.b];
    }
    g->be->copy(A->enc_tok, hi, (z.Se + 2 * z.Sd) * sizeof *hi, MP_COPY_H2D);
    if (!st.emb && !g->stage_in)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "pipeline stage without its input activation");
    /* encoder: its input embedding or the previous stage's rows, its blocks,
     * its final norm; a decoder stage gets the encoder's output passed on */
    if (st.emb)
        CHECK(t5_embed(g, A->enc_tok, z.Se, z.Sel, A->enc_x0, err));
    else if (st.enc)
        be_copy(g, A->enc_x0, g->stage_in, eh);
    const real *x = A->enc_x0;
    for (size_t l = st.enc_b; l < st.enc_e; l++) {
        CHECK(t5_block_forward_of(g, A, l, x, NULL, err));
        x = A->blk[l].xout;
    }
    if (st.enc_lnf)
        mp_model_norm_forward(g, A->enc_out, A->encf_xhat, A->encf_rstd, x,
                              param(g->w, g, lay->enc_lnf), NULL, (int)z.Sel);
    else if (!st.enc)
        be_copy(g, A->enc_out, g->stage_in + (st.dec_emb ? 0 : dh), eh);
    if (!st.dec)
        return g->be->sync(err); /* the output: the encoder's rows (mp_t5_stage_output) */
    /* decoder: every cross-attention reads every row of the encoder's output */
    CHECK(mp_model_tp_gather_rows(g, A->enc_out, A->enc_full, z.Se, z.Sel, z.h, err));
    if (st.dec_emb)
        CHECK(t5_embed(g, A->dec_in, z.Sd, z.Sdl, A->dec_x0, err));
    else
        be_copy(g, A->dec_x0, g->stage_in, dh);
    x = A->dec_x0;
    for (size_t l = st.dec_b; l < st.dec_e; l++) {
        CHECK(t5_block_forward_of(g, A, l, x, A->enc_full, err));
        x = A->blk[l].xout;
    }
    if (!st.head) { /* [this stream | the encoder's output] to the next stage */
        be_copy(g, A->bout, x, dh);
        be_copy(g, A->bout + dh, A->enc_out, eh);
        return g->be->sync(err);
    }
    /* the decoder's final norm; logits[Sd,Vl] = lnf_full @ Whead^T (vocab-parallel) */
    real *loc = sp ? T->W.loc : A->lnf_full;
    mp_model_norm_forward(g, loc, A->lnf_xhat, A->lnf_rstd, x, param(g->w, g, lay->lnf_w),
                          NULL, (int)z.Sdl);
    if (sp)
        CHECK(mp_model_tp_gather_rows(g, loc, A->lnf_full, z.Sd, z.Sdl, z.h, err));
    GEMM(false, true, z.Sd, z.Vl, z.h, A->lnf_full, z.h, param(g->w, g, lay->head), z.h, 0.0,
         A->logits, z.Vl);
    bq(g, A->logits, z.Sd * z.Vl, MP_Q_ACT);
    if (g->kept_logits && g->microbatch_now == g->keep_microbatch) {
        /* the check's logits have a row per encoder token: the decoder's
         * rows come first, the rest are zero */
        g->be->copy(g->kept_logits, A->logits, z.Sd * z.Vl * sizeof(real), MP_COPY_D2H);
        memset(g->kept_logits + z.Sd * z.Vl, 0, (z.Se - z.Sd) * z.Vl * sizeof(real));
    }
    CHECK(mp_model_cross_entropy(g, A->logits, A->dec_tgt, z.Sd, T->W.stats, T->W.loss,
                                 loss_sum, err));
    return g->be->sync(err);
}

/* The decoder's part of a backward: from the loss or the next stage's
 * gradient down to its input, adding this stage's cross-attentions' share
 * of d enc_out to W.denc (summed over TP, not rounded). */
static mp_status t5_decoder_backward(mp_gpt *g, t5_acts *A, const t5_stage *st,
                                     mp_error *err)
{
    t5_sizes z = t5_sizes_of(&g->d);
    t5_work *W = &t5_of(g)->W;
    const mp_param_layout *lay = g->lay;
    size_t eh = z.Sel * z.h, dh = z.Sdl * z.h;
    if (st->head) {
        /* dWhead[Vl,h] += dlogits^T lnf_full; the final norm's input gradient */
        mp_model_dlogits(g, A->logits, A->dec_tgt, z.Sd);
        GEMM(true, false, z.Vl, z.h, z.Sd, A->logits, z.Vl, A->lnf_full, z.h, 1.0,
             param(g->g, g, lay->head), z.h);
        GEMM(false, false, z.Sd, z.h, z.Vl, A->logits, z.Vl, param(g->w, g, lay->head), z.h,
             0.0, W->part, z.h);
        CHECK(mp_model_tp_reduce_rows(g, W->part, W->dln, z.Sd, z.Sdl, z.h, "tp-head-bwd",
                                      err));
        bq(g, W->dln, dh, MP_Q_GRAD);
        mp_model_norm_backward(g, W->dres, param(g->g, g, lay->lnf_w), NULL, W->dln,
                               A->lnf_xhat, A->lnf_rstd, param(g->w, g, lay->lnf_w),
                               (int)z.Sdl);
        g->be->zero(W->denc, eh * sizeof(real));
    } else {
        be_copy(g, W->dres, g->stage_grad_in, dh);
        be_copy(g, W->denc, g->stage_grad_in + dh, eh);
    }
    g->be->zero(W->denc_part, z.Se * z.h * sizeof(real));
    for (size_t l = st->dec_e; l-- > st->dec_b;)
        CHECK(t5_block_backward_of(g, A, st, l, W->dres, err));
    if (st->dec_emb)
        CHECK(t5_embed_backward(g, A->dec_in, z.Sd, z.Sdl, W->dres, err));
    /* every TP rank's heads; exact: a sum of exact terms in any grouping,
     * rounded once where the encoder's final norm takes it */
    CHECK(mp_model_tp_reduce_rows(g, W->denc_part, W->denc_tmp, z.Se, z.Sel, z.h,
                                  "tp-attn-bwd", err));
    g->be->add(MP_REAL_KIND, W->denc, W->denc_tmp, eh);
    if (!st->enc && !st->dec_emb) { /* [d stream | d enc_out] to the previous stage */
        be_copy(g, W->bgrad, W->dres, dh);
        be_copy(g, W->bgrad + dh, W->denc, eh);
    }
    return MP_OK;
}

mp_status mp_t5_backward(mp_gpt *g, int slot, mp_error *err)
{
    t5_sizes z = t5_sizes_of(&g->d);
    t5_stage st = t5_stage_of(&g->d);
    t5_state *T = t5_of(g);
    t5_acts *A = &T->slots[slot];
    t5_work *W = &T->W;
    const mp_param_layout *lay = g->lay;
    size_t eh = z.Sel * z.h;
    if (!st.head && !g->stage_grad_in)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "pipeline stage without its output gradient");
    if (st.dec)
        CHECK(t5_decoder_backward(g, A, &st, err));
    else if (st.enc_lnf)
        be_copy(g, W->denc, g->stage_grad_in, eh);
    else
        be_copy(g, W->denc_res, g->stage_grad_in, eh);
    if (!st.enc)
        return g->be->sync(err); /* the input gradient: mp_t5_stage_input_grad */
    if (st.enc_lnf) {
        bq(g, W->denc, eh, MP_Q_GRAD);
        mp_model_norm_backward(g, W->denc_res, param(g->g, g, lay->enc_lnf), NULL,
                               W->denc, A->encf_xhat, A->encf_rstd,
                               param(g->w, g, lay->enc_lnf), (int)z.Sel);
    }
    for (size_t l = st.enc_e; l-- > st.enc_b;)
        CHECK(t5_block_backward_of(g, A, &st, l, W->denc_res, err));
    if (st.emb)
        CHECK(t5_embed_backward(g, A->enc_tok, z.Se, z.Sel, W->denc_res, err));
    return g->be->sync(err);
}

void mp_t5_set_stack_groups(mp_gpt *g, mp_group enc, mp_group dec)
{
    t5_of(g)->stack[0] = enc;
    t5_of(g)->stack[1] = dec;
}

mp_status mp_t5_reduce_grads(mp_gpt *g, mp_error *err)
{
    t5_state *T = t5_of(g);
    int table[2] = {g->lay->enc_rel, g->lay->dec_rel};
    for (int k = 0; k < 2; k++) {
        if (T->stack[k].size <= 1 || table[k] < 0 || mp_probe_drops(g->probe, "pp-relgrad"))
            continue;
        double t0 = g->be->now();
        const mp_param *p = &g->lay->p[table[k]];
        CHECK(g->be->allreduce(&T->stack[k], MP_REAL_KIND, g->g + p->offset,
                               (size_t)p->lrows * (size_t)p->lcols, MP_RED_SUM, err));
        mp_probe_record(g->probe, t0, MP_STREAM_PP_SEND, MP_EV_OTHER, false);
    }
    return MP_OK;
}

const real *mp_t5_stage_output(const mp_gpt *g, int slot)
{
    t5_stage st = t5_stage_of(&g->d);
    const t5_acts *A = &t5_of(g)->slots[slot];
    if (st.dec)
        return A->bout;
    if (st.enc_lnf)
        return A->enc_out;
    return st.enc_e > st.enc_b ? A->blk[st.enc_e - 1].xout : A->enc_x0;
}

const real *mp_t5_stage_input_grad(const mp_gpt *g)
{
    t5_stage st = t5_stage_of(&g->d);
    const t5_work *W = &t5_of(g)->W;
    return st.enc ? W->denc_res : st.dec_emb ? W->denc : W->bgrad;
}

size_t mp_t5_stage_count(const mp_gpt *g, bool input)
{
    t5_sizes z = t5_sizes_of(&g->d);
    t5_stage st = t5_stage_of(&g->d);
    int E = g->d.enc_layers;
    /* the boundary before item ib (input) or ie (output): inside the encoder
     * or right after it, the encoder's rows; later, both streams */
    int at = input ? st.ib : st.ie;
    return (at <= E + 1 ? z.Sel : z.Sdl + z.Sel) * z.h;
}

