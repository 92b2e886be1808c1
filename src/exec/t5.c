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
 * Compiled for float and double (this file includes itself, see real.h). */
#ifndef MP_REAL_BITS
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/t5.h"

#define MP_REAL_BITS 32
#include "exec/t5.c"
#undef MP_REAL_BITS
#define MP_REAL_BITS 64
#include "exec/t5.c"
#undef MP_REAL_BITS
#else
#include "exec/real.h"
#include "exec/model_internal.h"
#include "exec/t5_internal.h"

static size_t RN(t5_layout_acts)(RN(t5_acts) *A, real *base, const RN(t5_sizes) *z)
{
    size_t u = 0, h = z->h;
    size_t int_reals = ((z->Se + 2 * z->Sd) * sizeof(int32_t) + sizeof(real) - 1) / sizeof(real);
    real *ints = RN(take)(base, &u, int_reals);
    if (base) {
        A->enc_tok = (int32_t *)(void *)ints;
        A->dec_in = A->enc_tok + z->Se;
        A->dec_tgt = A->dec_in + z->Sd;
    }
    A->enc_x0 = RN(take)(base, &u, z->Sel * h);
    A->dec_x0 = RN(take)(base, &u, z->Sdl * h);
    for (size_t l = 0; l < z->L; l++) {
        RN(t5_block_acts) tmp, *B = base ? &A->blk[l] : &tmp;
        bool dec = l >= z->E;
        size_t s = dec ? z->sd : z->se, S = dec ? z->Sd : z->Se, Sl = dec ? z->Sdl : z->Sel;
        memset(B, 0, sizeof *B);
        B->ln1_xhat = RN(take)(base, &u, Sl * h);
        B->ln1_rstd = RN(take)(base, &u, Sl);
        B->ln1_full = RN(take)(base, &u, S * h);
        B->qkv = RN(take)(base, &u, S * 3 * z->hl);
        B->probs = RN(take)(base, &u, z->b * z->al * s * s);
        B->att = RN(take)(base, &u, S * z->hl);
        B->xmid = RN(take)(base, &u, Sl * h);
        if (dec) {
            B->lnx_xhat = RN(take)(base, &u, Sl * h);
            B->lnx_rstd = RN(take)(base, &u, Sl);
            B->lnx_full = RN(take)(base, &u, S * h);
            B->xq = RN(take)(base, &u, S * z->hl);
            B->xkv = RN(take)(base, &u, z->Se * 2 * z->hl);
            B->xprobs = RN(take)(base, &u, z->b * z->al * z->sd * z->se);
            B->xatt = RN(take)(base, &u, S * z->hl);
            B->xmid2 = RN(take)(base, &u, Sl * h);
        }
        B->ln2_xhat = RN(take)(base, &u, Sl * h);
        B->ln2_rstd = RN(take)(base, &u, Sl);
        B->ln2_full = RN(take)(base, &u, S * h);
        B->fc1_pre = RN(take)(base, &u, S * z->f1);
        B->fc1_act = RN(take)(base, &u, S * z->Fl);
        B->xout = RN(take)(base, &u, Sl * h);
    }
    A->encf_xhat = RN(take)(base, &u, z->Sel * h);
    A->encf_rstd = RN(take)(base, &u, z->Sel);
    A->enc_out = RN(take)(base, &u, z->Sel * h);
    A->enc_full = RN(take)(base, &u, z->Se * h);
    A->lnf_xhat = RN(take)(base, &u, z->Sdl * h);
    A->lnf_rstd = RN(take)(base, &u, z->Sdl);
    A->lnf_full = RN(take)(base, &u, z->Sd * h);
    A->logits = RN(take)(base, &u, z->Sd * z->Vl);
    return u;
}

static size_t RN(t5_layout_work)(RN(t5_work) *W, real *base, const RN(t5_sizes) *z)
{
    size_t u = 0, h = z->h;
    W->part = RN(take)(base, &u, z->Smax * h);
    W->loc = RN(take)(base, &u, z->Slmax * h);
    W->dfull = RN(take)(base, &u, z->Smax * h);
    W->dres = RN(take)(base, &u, z->Sdl * h);
    W->denc_res = RN(take)(base, &u, z->Sel * h);
    W->dln = RN(take)(base, &u, z->Slmax * h);
    W->dtmp = RN(take)(base, &u, z->Slmax * h);
    W->datt = RN(take)(base, &u, z->Smax * z->hl);
    W->dqkv = RN(take)(base, &u, z->Smax * 3 * z->hl);
    W->dxq = RN(take)(base, &u, z->Sd * z->hl);
    W->dxkv = RN(take)(base, &u, z->Se * 2 * z->hl);
    W->dfc = RN(take)(base, &u, z->Smax * z->f1);
    W->dact = RN(take)(base, &u, z->Smax * z->Fl);
    W->denc_part = RN(take)(base, &u, z->Se * h);
    W->denc = RN(take)(base, &u, z->Sel * h);
    W->stats = RN(take)(base, &u, 3 * z->Sd);
    W->loss = RN(take)(base, &u, z->Sd);
    W->scratch = RN(take)(base, &u, z->se * z->se);
    return u;
}

static int *RN(t5_buckets)(size_t s, bool bidirectional)
{
    int *bk = malloc(s * s * sizeof *bk);
    for (size_t i = 0; bk && i < s; i++)
        for (size_t j = 0; j < s; j++)
            bk[i * s + j] = mp_t5_bucket((int)j - (int)i, bidirectional);
    return bk;
}

mp_status RN(mp_t5_alloc)(RN(mp_gpt) *g, int n_slots)
{
    RN(t5_sizes) z = RN(t5_sizes_of)(&g->d);
    RN(t5_state) *T = calloc(1, sizeof *T);
    if (!T)
        return MP_ENOMEM;
    g->t5 = T;
    T->slots = calloc((size_t)n_slots, sizeof *T->slots);
    if (!T->slots)
        return MP_ENOMEM;
    T->n_slots = n_slots;
    RN(t5_acts) probe;
    size_t n = RN(t5_layout_acts)(&probe, NULL, &z);
    for (int i = 0; i < n_slots; i++) {
        RN(t5_acts) *A = &T->slots[i];
        A->blk = calloc(z.L ? z.L : 1, sizeof *A->blk);
        A->mem = calloc(n, sizeof(real));
        if (!A->blk || !A->mem)
            return MP_ENOMEM;
        RN(t5_layout_acts)(A, A->mem, &z);
    }
    g->slot_reals = n;
    T->wmem = calloc(RN(t5_layout_work)(&T->W, NULL, &z), sizeof(real));
    T->enc_bucket = RN(t5_buckets)(z.se, true);
    T->dec_bucket = RN(t5_buckets)(z.sd, false);
    if (!T->wmem || !T->enc_bucket || !T->dec_bucket)
        return MP_ENOMEM;
    RN(t5_layout_work)(&T->W, T->wmem, &z);
    return MP_OK;
}

void RN(mp_t5_free)(RN(mp_gpt) *g)
{
    RN(t5_state) *T = RN(t5_of)(g);
    if (!T)
        return;
    for (int i = 0; T->slots && i < T->n_slots; i++) {
        free(T->slots[i].blk);
        free(T->slots[i].mem);
    }
    free(T->slots);
    free(T->wmem);
    free(T->enc_bucket);
    free(T->dec_bucket);
    free(T);
    g->t5 = NULL;
}

/* x0[Sl,h] = the rows of wte this rank owns for tok[S], summed over TP. */
static mp_status RN(t5_embed)(RN(mp_gpt) *g, const int32_t *tok, size_t S, size_t Sl, real *x0,
                              mp_error *err)
{
    RN(t5_work) *W = &RN(t5_of)(g)->W;
    size_t h = (size_t)g->d.hidden, Vl = (size_t)g->d.vocab / (size_t)g->d.tp;
    size_t lo = (size_t)g->tp.rank * Vl;
    const real *wte = RN(param)(g->w, g, g->lay->wte);
    for (size_t r = 0; r < S; r++) {
        size_t t = (size_t)tok[r];
        if (t >= lo && t < lo + Vl)
            memcpy(W->part + r * h, wte + (t - lo) * h, h * sizeof(real));
        else
            memset(W->part + r * h, 0, h * sizeof(real));
    }
    CHECK(RN(mp_model_tp_reduce_rows)(g, W->part, x0, S, Sl, h, "tp-embed", err));
    RN(mp_q)(g->exact, x0, Sl * h, MP_Q_ACT);
    return MP_OK;
}

/* d wte rows this rank owns += the gradient dx[Sl,h] of tok's rows (SP: gathered). */
static mp_status RN(t5_embed_backward)(RN(mp_gpt) *g, const int32_t *tok, size_t S, size_t Sl,
                                       const real *dx, mp_error *err)
{
    RN(t5_work) *W = &RN(t5_of)(g)->W;
    size_t h = (size_t)g->d.hidden, Vl = (size_t)g->d.vocab / (size_t)g->d.tp;
    size_t lo = (size_t)g->tp.rank * Vl;
    real *gwte = RN(param)(g->g, g, g->lay->wte);
    const real *dfull = dx;
    if (g->d.sp && g->tp.size > 1) {
        CHECK(RN(mp_model_tp_gather_rows)(g, dx, W->dfull, S, Sl, h, err));
        dfull = W->dfull;
    }
    for (size_t r = 0; r < S; r++) {
        size_t t = (size_t)tok[r];
        if (t >= lo && t < lo + Vl)
            RN(mp_add)(gwte + (t - lo) * h, dfull + r * h, h);
    }
    return MP_OK;
}

mp_status RN(mp_t5_forward)(RN(mp_gpt) *g, int slot, const int32_t *tokens,
                            const int32_t *targets, double *loss_sum, mp_error *err)
{
    RN(t5_sizes) z = RN(t5_sizes_of)(&g->d);
    RN(t5_state) *T = RN(t5_of)(g);
    RN(t5_acts) *A = &T->slots[slot];
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    memcpy(A->enc_tok, tokens, z.Se * sizeof *tokens);
    /* teacher forcing: the decoder reads its targets one position late */
    for (size_t r = 0; r < z.Sd; r++) {
        A->dec_tgt[r] = targets[r];
        A->dec_in[r] = r < z.b ? 0 : targets[r - z.b];
    }
    CHECK(RN(t5_embed)(g, A->enc_tok, z.Se, z.Sel, A->enc_x0, err));
    CHECK(RN(t5_embed)(g, A->dec_in, z.Sd, z.Sdl, A->dec_x0, err));
    const real *x = A->enc_x0;
    for (size_t l = 0; l < z.E; l++) {
        CHECK(RN(mp_t5_block_forward)(g, &A->blk[l], (int)l, x, NULL, err));
        x = A->blk[l].xout;
    }
    RN(mp_model_norm_forward)(g, A->enc_out, A->encf_xhat, A->encf_rstd, x,
                              RN(param)(g->w, g, lay->enc_lnf), NULL, (int)z.Sel);
    CHECK(RN(mp_model_tp_gather_rows)(g, A->enc_out, A->enc_full, z.Se, z.Sel, z.h, err));
    x = A->dec_x0;
    for (size_t l = z.E; l < z.L; l++) {
        CHECK(RN(mp_t5_block_forward)(g, &A->blk[l], (int)l, x, A->enc_full, err));
        x = A->blk[l].xout;
    }
    /* the decoder's final norm; logits[Sd,Vl] = lnf_full @ Whead^T (vocab-parallel) */
    real *loc = sp ? T->W.loc : A->lnf_full;
    RN(mp_model_norm_forward)(g, loc, A->lnf_xhat, A->lnf_rstd, x, RN(param)(g->w, g, lay->lnf_w),
                              NULL, (int)z.Sdl);
    if (sp)
        CHECK(RN(mp_model_tp_gather_rows)(g, loc, A->lnf_full, z.Sd, z.Sdl, z.h, err));
    GEMM(false, true, z.Sd, z.Vl, z.h, A->lnf_full, z.h, RN(param)(g->w, g, lay->head), z.h, 0.0,
         A->logits, z.Vl);
    RN(mp_q)(ex, A->logits, z.Sd * z.Vl, MP_Q_ACT);
    if (g->kept_logits && g->microbatch_now == g->keep_microbatch) {
        /* the check's logits have a row per encoder token: the decoder's
         * rows come first, the rest are zero */
        memcpy(g->kept_logits, A->logits, z.Sd * z.Vl * sizeof(real));
        memset(g->kept_logits + z.Sd * z.Vl, 0, (z.Se - z.Sd) * z.Vl * sizeof(real));
    }
    return RN(mp_model_cross_entropy)(g, A->logits, A->dec_tgt, z.Sd, T->W.stats, T->W.loss,
                                      loss_sum, err);
}

mp_status RN(mp_t5_backward)(RN(mp_gpt) *g, int slot, mp_error *err)
{
    RN(t5_sizes) z = RN(t5_sizes_of)(&g->d);
    RN(t5_state) *T = RN(t5_of)(g);
    RN(t5_acts) *A = &T->slots[slot];
    RN(t5_work) *W = &T->W;
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact;
    /* head: dWhead[Vl,h] += dlogits^T lnf_full; the final norm's input gradient */
    RN(mp_model_dlogits)(g, A->logits, A->dec_tgt, z.Sd);
    GEMM(true, false, z.Vl, z.h, z.Sd, A->logits, z.Vl, A->lnf_full, z.h, 1.0,
         RN(param)(g->g, g, lay->head), z.h);
    GEMM(false, false, z.Sd, z.h, z.Vl, A->logits, z.Vl, RN(param)(g->w, g, lay->head), z.h, 0.0,
         W->part, z.h);
    CHECK(RN(mp_model_tp_reduce_rows)(g, W->part, W->dln, z.Sd, z.Sdl, z.h, "tp-head-bwd", err));
    RN(mp_q)(ex, W->dln, z.Sdl * z.h, MP_Q_GRAD);
    RN(mp_model_norm_backward)(g, W->dres, RN(param)(g->g, g, lay->lnf_w), NULL, W->dln,
                               A->lnf_xhat, A->lnf_rstd, RN(param)(g->w, g, lay->lnf_w),
                               (int)z.Sdl);
    /* decoder, its input embedding; the cross-attentions' share of d enc_full */
    memset(W->denc_part, 0, z.Se * z.h * sizeof(real));
    for (size_t l = z.L; l-- > z.E;)
        CHECK(RN(mp_t5_block_backward)(g, &A->blk[l], (int)l, W->dres, A->enc_full, err));
    CHECK(RN(t5_embed_backward)(g, A->dec_in, z.Sd, z.Sdl, W->dres, err));
    /* d enc_out[Sel,h] = the sum over TP (every rank's heads), then the
     * encoder's final norm, its blocks and its input embedding */
    CHECK(RN(mp_model_tp_reduce_rows)(g, W->denc_part, W->denc, z.Se, z.Sel, z.h, "tp-attn-bwd",
                                      err));
    RN(mp_q)(ex, W->denc, z.Sel * z.h, MP_Q_GRAD);
    RN(mp_model_norm_backward)(g, W->denc_res, RN(param)(g->g, g, lay->enc_lnf), NULL, W->denc,
                               A->encf_xhat, A->encf_rstd, RN(param)(g->w, g, lay->enc_lnf),
                               (int)z.Sel);
    for (size_t l = z.E; l-- > 0;)
        CHECK(RN(mp_t5_block_backward)(g, &A->blk[l], (int)l, W->denc_res, NULL, err));
    return RN(t5_embed_backward)(g, A->enc_tok, z.Se, z.Sel, W->denc_res, err);
}

#endif
