/* t5_block.c — one T5 block, forward and backward side by side: pre-norm
 * self-attention with the stack's relative position bias (bidirectional in
 * the encoder, causal in the decoder), in a decoder block cross-attention
 * (queries from the decoder's stream, keys and values from the encoder's
 * output), and the MLP (ReLU, GeLU or SwiGLU), no biases; the TP/SP
 * collectives as in block.c: QKV, xq, xkv and fc1 column-parallel, proj, xo
 * and fc2 row-parallel. Every op is the backend's (backend.h): with the
 * CUDA backend every tensor here is on the device. Compiled once per
 * precision (real.h). */
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
#include "exec/t5_internal.h"

/* out = norm(x) on this rank's Sl rows, then every row in full[S,h] (SP). */
static mp_status norm_full(mp_gpt *g, real *full, real *xhat, real *rstd, const real *x,
                           const real *w, size_t S, size_t Sl, mp_error *err)
{
    bool sp = g->d.sp && g->tp.size > 1;
    real *loc = sp ? t5_of(g)->W.loc : full;
    mp_model_norm_forward(g, loc, xhat, rstd, x, w, NULL, (int)Sl);
    return sp ? mp_model_tp_gather_rows(g, loc, full, S, Sl, (size_t)g->d.hidden, err)
              : MP_OK;
}

/* out[Sl,h] = res + reduce(in[S,k] @ W[k,h]) (row-parallel), rounded. */
static mp_status row_parallel(mp_gpt *g, real *out, const real *res, const real *in,
                              size_t k, const real *w, size_t S, size_t Sl, const char *site,
                              mp_error *err)
{
    t5_work *W = &t5_of(g)->W;
    size_t h = (size_t)g->d.hidden;
    GEMM(false, false, S, h, k, in, k, w, h, 0.0, W->part, h);
    CHECK(mp_model_tp_reduce_rows(g, W->part, out, S, Sl, h, site, err));
    bq(g, out, Sl * h, MP_Q_ACT);
    g->be->add(MP_REAL_KIND, out, res, Sl * h);
    bq(g, out, Sl * h, MP_Q_ACT);
    return MP_OK;
}

mp_status mp_t5_block_forward(mp_gpt *g, t5_block_acts *B, int l, const real *x,
                              const real *enc_full, mp_error *err)
{
    t5_sizes z = t5_sizes_of(&g->d);
    t5_state *T = t5_of(g);
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact, dec = (size_t)l >= z.E;
    size_t s = dec ? z.sd : z.se, S = dec ? z.Sd : z.Se, Sl = dec ? z.Sdl : z.Sel;
#define P(k) blk(g->w, g, l, (k))
    /* self-attention: qkv[S,3hl] = norm(x) @ Wqkv; att[S,hl]; xmid = x + att @ Wo */
    CHECK(norm_full(g, B->ln1_full, B->ln1_xhat, B->ln1_rstd, x, P(MP_BLK_LN1_W), S, Sl, err));
    GEMM(false, false, S, 3 * z.hl, z.h, B->ln1_full, z.h, P(MP_BLK_QKV_W), 3 * z.hl, 0.0,
         B->qkv, 3 * z.hl);
    bq(g, B->qkv, S * 3 * z.hl, MP_Q_ACT);
    /* selective recomputation keeps no probabilities: they go to scratch */
    mp_t5_attention_forward(g->be, B->att, B->probs ? B->probs : T->W.sprobs, B->qkv, (int)s,
                            (int)z.b, (int)z.al,
                            (int)z.hd, dec,
                            param(g->w, g, dec ? lay->dec_rel : lay->enc_rel), (int)z.al,
                            dec ? T->dec_bucket : T->enc_bucket, ex);
    CHECK(row_parallel(g, B->xmid, x, B->att, z.hl, P(MP_BLK_PROJ_W), S, Sl, "tp-attn", err));
    const real *hin = B->xmid;
    if (dec) {
        /* cross-attention: xq[Sd,hl] = norm(xmid) @ Wxq, xkv[Se,2hl] = enc @ Wxkv
         * (this rank's heads of K, then of V), every decoder row against
         * every encoder row; xmid2 = xmid + xatt @ Wxo */
        CHECK(norm_full(g, B->lnx_full, B->lnx_xhat, B->lnx_rstd, B->xmid, P(MP_BLK_LNX_W), S,
                        Sl, err));
        GEMM(false, false, S, z.hl, z.h, B->lnx_full, z.h, P(MP_BLK_XQ_W), z.hl, 0.0, B->xq,
             z.hl);
        bq(g, B->xq, S * z.hl, MP_Q_ACT);
        GEMM(false, false, z.Se, 2 * z.hl, z.h, enc_full, z.h, P(MP_BLK_XKV_W), 2 * z.hl, 0.0,
             B->xkv, 2 * z.hl);
        bq(g, B->xkv, z.Se * 2 * z.hl, MP_Q_ACT);
        mp_attention_forward_kv(g->be, B->xatt, B->xprobs ? B->xprobs : T->W.sxprobs, B->xq,
                                z.hl, B->xkv, B->xkv + z.hl,
                                2 * z.hl, NULL, (int)z.sd, (int)z.se, (int)z.b, (int)z.al,
                                (int)z.hd, 1, false, ex);
        CHECK(row_parallel(g, B->xmid2, B->xmid, B->xatt, z.hl, P(MP_BLK_XO_W), S, Sl,
                           "tp-attn", err));
        hin = B->xmid2;
    }
    /* MLP: fc1_act[S,Fl] = act(norm(hin) @ W1); xout = hin + fc1_act @ W2 */
    CHECK(norm_full(g, B->ln2_full, B->ln2_xhat, B->ln2_rstd, hin, P(MP_BLK_LN2_W), S, Sl,
                    err));
    GEMM(false, false, S, z.f1, z.h, B->ln2_full, z.h, P(MP_BLK_FC1_W), z.f1, 0.0, B->fc1_pre,
         z.f1);
    bq(g, B->fc1_pre, S * z.f1, MP_Q_ACT);
    mp_mlp_act_forward(g, B->fc1_act, B->fc1_pre, S, z.Fl, false);
    bq(g, B->fc1_act, S * z.Fl, MP_Q_ACT);
    CHECK(row_parallel(g, B->xout, hin, B->fc1_act, z.Fl, P(MP_BLK_FC2_W), S, Sl, "tp-mlp",
                       err));
#undef P
    return MP_OK;
}

/* The gradient dout[S,k] of a row-parallel GEMM's input from this rank's
 * rows of its output's gradient dres[Sl,h] (SP: all-gathered first), and
 * dW[k,h] += in^T @ d(full). */
static mp_status row_parallel_backward(mp_gpt *g, real *dout, const real *dres,
                                       const real *in, size_t k, const real *w, real *dw,
                                       size_t S, size_t Sl, mp_error *err)
{
    t5_work *W = &t5_of(g)->W;
    size_t h = (size_t)g->d.hidden;
    const real *dfull = dres;
    if (g->d.sp && g->tp.size > 1) {
        CHECK(mp_model_tp_gather_rows(g, dres, W->dfull, S, Sl, h, err));
        dfull = W->dfull;
    }
    GEMM(true, false, k, h, S, in, k, dfull, h, 1.0, dw, h);
    GEMM(false, true, S, k, h, dfull, h, w, h, 0.0, dout, k);
    bq(g, dout, S * k, MP_Q_GRAD);
    return MP_OK;
}

/* dres[Sl,h] += norm's input gradient from dpart[S,h], the partial sums of a
 * column-parallel GEMM's input gradient (reduced over TP here). */
static mp_status norm_backward_into(mp_gpt *g, real *dres, real *dpart, const real *xhat,
                                    const real *rstd, const real *w, real *dw, size_t S,
                                    size_t Sl, const char *site, mp_error *err)
{
    t5_work *W = &t5_of(g)->W;
    size_t h = (size_t)g->d.hidden;
    CHECK(mp_model_tp_reduce_rows(g, dpart, W->dln, S, Sl, h, site, err));
    bq(g, W->dln, Sl * h, MP_Q_GRAD);
    mp_model_norm_backward(g, W->dtmp, dw, NULL, W->dln, xhat, rstd, w, (int)Sl);
    g->be->add(MP_REAL_KIND, dres, W->dtmp, Sl * h);
    bq(g, dres, Sl * h, MP_Q_GRAD);
    return MP_OK;
}

/* dres[Sl,h]: in d loss/d xout, out d loss/d x. A decoder block adds its
 * cross-attention's d enc_full (this rank's heads' share) to W.denc_part. */
mp_status mp_t5_block_backward(mp_gpt *g, t5_block_acts *B, int l, real *dres,
                               const real *enc_full, mp_error *err)
{
    t5_sizes z = t5_sizes_of(&g->d);
    t5_state *T = t5_of(g);
    t5_work *W = &T->W;
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact, dec = (size_t)l >= z.E;
    size_t s = dec ? z.sd : z.se, S = dec ? z.Sd : z.Se, Sl = dec ? z.Sdl : z.Sel;
#define P(k) blk(g->w, g, l, (k))
#define G(k) blk(g->g, g, l, (k))
    /* MLP */
    real *dact = g->d.gated ? W->dact : W->dfc;
    CHECK(row_parallel_backward(g, dact, dres, B->fc1_act, z.Fl, P(MP_BLK_FC2_W),
                                G(MP_BLK_FC2_W), S, Sl, err));
    mp_mlp_act_backward(g, W->dfc, dact, B->fc1_pre, S, z.Fl, false);
    bq(g, W->dfc, S * z.f1, MP_Q_GRAD);
    GEMM(true, false, z.h, z.f1, S, B->ln2_full, z.h, W->dfc, z.f1, 1.0, G(MP_BLK_FC1_W), z.f1);
    GEMM(false, true, S, z.h, z.f1, W->dfc, z.f1, P(MP_BLK_FC1_W), z.f1, 0.0, W->part, z.h);
    CHECK(norm_backward_into(g, dres, W->part, B->ln2_xhat, B->ln2_rstd, P(MP_BLK_LN2_W),
                             G(MP_BLK_LN2_W), S, Sl, "tp-mlp-bwd", err));
    if (dec) {
        /* cross-attention: its queries' input gradient goes to this stream,
         * its keys' and values' to the encoder's output */
        CHECK(row_parallel_backward(g, W->datt, dres, B->xatt, z.hl, P(MP_BLK_XO_W),
                                    G(MP_BLK_XO_W), S, Sl, err));
        g->be->zero(W->dxkv, z.Se * 2 * z.hl * sizeof(real));
        mp_attention_backward_kv(g->be, W->dxq, z.hl, W->dxkv, W->dxkv + z.hl, 2 * z.hl,
                                 W->datt, B->xq, z.hl, B->xkv, B->xkv + z.hl, 2 * z.hl,
                                 B->xprobs, NULL, (int)z.sd, (int)z.se, (int)z.b, (int)z.al,
                                 (int)z.hd, 1, false, W->scratch, ex);
        bq(g, W->dxkv, z.Se * 2 * z.hl, MP_Q_GRAD_ATT);
        GEMM(true, false, z.h, z.hl, S, B->lnx_full, z.h, W->dxq, z.hl, 1.0, G(MP_BLK_XQ_W), z.hl);
        GEMM(true, false, z.h, 2 * z.hl, z.Se, enc_full, z.h, W->dxkv, 2 * z.hl, 1.0,
             G(MP_BLK_XKV_W), 2 * z.hl);
        GEMM(false, true, z.Se, z.h, 2 * z.hl, W->dxkv, 2 * z.hl, P(MP_BLK_XKV_W), 2 * z.hl, 1.0,
             W->denc_part, z.h);
        GEMM(false, true, S, z.h, z.hl, W->dxq, z.hl, P(MP_BLK_XQ_W), z.hl, 0.0, W->part, z.h);
        CHECK(norm_backward_into(g, dres, W->part, B->lnx_xhat, B->lnx_rstd, P(MP_BLK_LNX_W),
                                 G(MP_BLK_LNX_W), S, Sl, "tp-attn-bwd", err));
    }
    /* self-attention, the relative bias's gradient into the stack's table */
    CHECK(row_parallel_backward(g, W->datt, dres, B->att, z.hl, P(MP_BLK_PROJ_W),
                                G(MP_BLK_PROJ_W), S, Sl, err));
    mp_t5_attention_backward(g->be, W->dqkv, W->datt, B->qkv, B->probs, (int)s, (int)z.b,
                             (int)z.al, (int)z.hd, dec,
                             param(g->g, g, dec ? lay->dec_rel : lay->enc_rel), (int)z.al,
                             dec ? T->dec_bucket : T->enc_bucket, W->scratch, ex);
    GEMM(true, false, z.h, 3 * z.hl, S, B->ln1_full, z.h, W->dqkv, 3 * z.hl, 1.0,
         G(MP_BLK_QKV_W), 3 * z.hl);
    GEMM(false, true, S, z.h, 3 * z.hl, W->dqkv, 3 * z.hl, P(MP_BLK_QKV_W), 3 * z.hl, 0.0,
         W->part, z.h);
    CHECK(norm_backward_into(g, dres, W->part, B->ln1_xhat, B->ln1_rstd, P(MP_BLK_LN1_W),
                             G(MP_BLK_LN1_W), S, Sl, "tp-attn-bwd", err));
#undef P
#undef G
    return MP_OK;
}

void mp_t5_recompute_probs(mp_gpt *g, t5_block_acts *B, int l)
{
    t5_sizes z = t5_sizes_of(&g->d);
    t5_state *T = t5_of(g);
    const mp_param_layout *lay = g->lay;
    bool dec = (size_t)l >= z.E;
    mp_t5_attention_forward(g->be, B->att, B->probs, B->qkv, (int)(dec ? z.sd : z.se),
                            (int)z.b, (int)z.al, (int)z.hd, dec,
                            param(g->w, g, dec ? lay->dec_rel : lay->enc_rel), (int)z.al,
                            dec ? T->dec_bucket : T->enc_bucket, g->exact);
    if (dec)
        mp_attention_forward_kv(g->be, B->xatt, B->xprobs, B->xq, z.hl, B->xkv, B->xkv + z.hl,
                                2 * z.hl, NULL, (int)z.sd, (int)z.se, (int)z.b, (int)z.al,
                                (int)z.hd, 1, false, g->exact);
}

