/* block.c — one transformer block, forward and backward side by side: the
 * norms, attention (with rotary embeddings and grouped-query heads where the
 * model has them) and the MLP, with their TP/SP collectives, and selective
 * recomputation's rebuilt attention probabilities. Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"
#include "exec/model_internal.h"
#include "exec/test_mutant.h"

/* Test-only (the mutant build of tests/exec/meson.build): the error that the
 * environment's MP_TEST_HEAD_MUTANT names, planted so that the PyTorch fixture
 * qwen.bin is shown to catch it: k-norm-q-scale (K's heads normed with Q's
 * scale), norm-after-rope (QK-norm after the rotation instead of before). */
#ifdef MP_TEST_HEAD_MUTANT
#define mutant(what) mp_test_mutant_named("MP_TEST_HEAD_MUTANT", (what))
#else
#define mutant(what) ((void)(what), false)
#endif

/* out = norm(x) with scale w (and shift b for LayerNorm) */
void mp_model_norm_forward(const mp_gpt *g, real *out, real *xhat, real *rstd,
                           const real *x, const real *w, const real *b, int rows)
{
    double eps = mp_dims_norm_eps(&g->d);
    if (g->d.rmsnorm)
        g->be->rmsnorm_forward(MP_REAL_KIND, out, xhat, rstd, x, w, rows, g->d.hidden, eps,
                               g->exact);
    else
        g->be->layernorm_forward(MP_REAL_KIND, out, xhat, rstd, x, w, b, rows, g->d.hidden,
                                 eps, g->exact);
}

void mp_model_norm_backward(const mp_gpt *g, real *dx, real *dw, real *db,
                            const real *dout, const real *xhat, const real *rstd,
                            const real *w, int rows)
{
    if (g->d.rmsnorm)
        g->be->rmsnorm_backward(MP_REAL_KIND, dx, dw, dout, xhat, rstd, w, rows, g->d.hidden,
                                g->exact);
    else
        g->be->layernorm_backward(MP_REAL_KIND, dx, dw, db, dout, xhat, rstd, w, rows,
                                  g->d.hidden, g->exact);
}

/* Block l's GPT-OSS variants (window, sinks and their gradients), or NULL
 * when its attention is plain. */
static const mp_attn_oss *oss_of(const mp_gpt *g, int l, mp_attn_oss *x)
{
    x->window = mp_dims_block_window(&g->d, l);
    x->sink = blk(g->w, g, l, MP_BLK_SINK);
    x->dsink = blk(g->g, g, l, MP_BLK_SINK);
    return x->window > 0 || x->sink ? x : NULL;
}

/* QK-norm (Qwen3; HF's q_norm / k_norm, Megatron-Core's --qk-layernorm),
 * in place on qkv[S,row] after the projection and before RoPE: in each row
 * r, every query head a (columns a*hd .. of Q) and every key head j (of K)
 *   rstd = 1/sqrt(sum(x^2)/hd + eps),  xhat = x * rstd,  x <- xhat * w
 * (eps the model's norm_eps, as HF's Qwen3 q_norm/k_norm take rms_norm_eps)
 * with w = the query scale wq[hd] for Q's heads and wk[hd] for K's, shared
 * by the heads. xhat [S, al+gl, hd] (Q's heads, then K's) and rstd
 * [S, al+gl] are kept for the backward. The backend's RMSNorm over rows of
 * hd: one row's heads are contiguous (al of Q, then gl of K); in place is
 * safe on both backends, as each output element is written by whoever read
 * it, after the row's statistics. */
static void qk_norm_forward(mp_gpt *g, block_acts *B, int l)
{
    sizes z = sizes_of(&g->d);
    const real *wq = blk(g->w, g, l, MP_BLK_QNORM_W), *wk = blk(g->w, g, l, MP_BLK_KNORM_W);
    size_t nh = z.al + z.gl;
    double eps = mp_dims_norm_eps(&g->d);
    for (size_t r = 0; r < z.S; r++) {
        real *q = B->qkv + r * z.row, *k = q + z.hl;
        real *xh = B->qk_xhat + r * nh * z.hd, *rs = B->qk_rstd + r * nh;
        /* q[al, hd] <- rmsnorm(q) * wq;  k[gl, hd] <- rmsnorm(k) * wk */
        g->be->rmsnorm_forward(MP_REAL_KIND, q, xh, rs, q, wq, (int)z.al, (int)z.hd, eps,
                               g->exact);
        g->be->rmsnorm_forward(MP_REAL_KIND, k, xh + z.hl, rs + z.al, k,
                               mutant("k-norm-q-scale") ? wq : wk, (int)z.gl, (int)z.hd, eps,
                               g->exact);
    }
}

/* Its backward on dqkv[S,row] (the gradients of the normed Q and K, after
 * RoPE's backward), each row's through the workspace's qk_tmp and back (the
 * CUDA backend's scale gradient reads dout after dx is written):
 *   dx = rstd * (dy*w - xhat * mean(dy*w*xhat))   per head row of hd,
 *   dwq[hd] += sum over rows and Q heads of dy * xhat (dwk: K's heads).
 * The scales' gradients are this rank's heads' share (and its tokens' under
 * CP): reduce_grads sums them over TP (params.c), DP x CP as every weight. */
static void qk_norm_backward(mp_gpt *g, block_acts *B, int l, real *dqkv)
{
    sizes z = sizes_of(&g->d);
    const real *wq = blk(g->w, g, l, MP_BLK_QNORM_W), *wk = blk(g->w, g, l, MP_BLK_KNORM_W);
    real *dwq = blk(g->g, g, l, MP_BLK_QNORM_W), *dwk = blk(g->g, g, l, MP_BLK_KNORM_W);
    size_t nh = z.al + z.gl;
    real *tmp = work_of(g).qk_tmp;
    for (size_t r = 0; r < z.S; r++) {
        real *dq = dqkv + r * z.row, *dk = dq + z.hl;
        const real *xh = B->qk_xhat + r * nh * z.hd, *rs = B->qk_rstd + r * nh;
        /* tmp[al, hd] = dq's, dwq[hd] += ...;  tmp[al.., gl, hd] = dk's, dwk[hd] += ... */
        g->be->rmsnorm_backward(MP_REAL_KIND, tmp, dwq, dq, xh, rs, wq, (int)z.al, (int)z.hd,
                                g->exact);
        g->be->rmsnorm_backward(MP_REAL_KIND, tmp + z.hl, dwk, dk, xh + z.hl, rs + z.al, wk,
                                (int)z.gl, (int)z.hd, g->exact);
        be_copy(g, dq, tmp, z.hl + z.kc); /* Q's then K's columns, contiguous in the row */
    }
}

/* att[S,hl] from V's Q, K and V (CP: against every position's K|V in
 * kv_full), the probabilities into probs: the forward's and selective
 * recomputation's core attention. */
static void core_attention(mp_gpt *g, block_acts *V, real *probs, int l)
{
    sizes z = sizes_of(&g->d);
    bool cp = z.cp > 1;
    const real *k = cp ? V->kv_full : V->qkv + z.hl;
    size_t kv_row = cp ? 2 * z.kc : z.row;
    const int *qpos = cp ? g->qpos_be : NULL;
    mp_attn_oss xs;
    const mp_attn_oss *x = oss_of(g, l, &xs);
    if (x)
        mp_attention_forward_oss(g->be, V->att, probs, V->qkv, z.row, k, k + z.kc, kv_row, qpos,
                                 (int)z.s, (int)z.sk, (int)z.b, (int)z.al, (int)z.hd,
                                 (int)z.rep, x, g->exact);
    else
        mp_attention_forward_kv(g->be, V->att, probs, V->qkv, z.row, k, k + z.kc, kv_row, qpos,
                                (int)z.s, (int)z.sk, (int)z.b, (int)z.al, (int)z.hd,
                                (int)z.rep, !g->d.bert, g->exact);
}

/* The block's first norm and attention up to att[S,hl] (before the output
 * projection): the QKV heads' (latent attention: mla.c). */
static mp_status attention_forward(mp_gpt *g, block_acts *B, int l, const real *x,
                                   mp_error *err)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    const real *bias;
#define P(k) blk(g->w, g, l, (k))
    /* ln1 = norm(x) [Sl,h]; ln1_full [S,h] (SP: all-gather) */
    mp_model_norm_forward(g, sp ? W.loc : B->ln1_full, B->ln1_xhat, B->ln1_rstd, x,
                          P(MP_BLK_LN1_W), P(MP_BLK_LN1_B), (int)z.Sl);
    if (sp)
        CHECK(mp_model_tp_gather(g, W.loc, B->ln1_full, z.h, err));
    /* qkv[S,row] = ln1_full[S,h] @ Wqkv[h,row] + b   (column-parallel: this
     * rank's Q heads, then its K and V heads) */
    GEMM(false, false, z.S, z.row, z.h, B->ln1_full, z.h, P(MP_BLK_QKV_W), z.row, 0.0, B->qkv,
         z.row);
    if ((bias = P(MP_BLK_QKV_B)))
        g->be->bias_add(MP_REAL_KIND, B->qkv, bias, (int)z.S, (int)z.row);
    bq(g, B->qkv, z.S * z.row, MP_Q_ACT);
    /* Qwen3: each Q and K head normed, before RoPE */
    if (z.qk_norm && !mutant("norm-after-rope"))
        qk_norm_forward(g, B, l);
    if (g->d.rope) { /* turn Q and K by their positions' angles */
        g->be->rope(MP_REAL_KIND, B->qkv, z.row, (int)z.al, (int)z.hd, &g->d.rope_freq,
                    g->qpos_be, (int)z.s, (int)z.b, false, ex, MP_Q_ACT);
        g->be->rope(MP_REAL_KIND, B->qkv + z.hl, z.row, (int)z.gl, (int)z.hd, &g->d.rope_freq,
                    g->qpos_be, (int)z.s, (int)z.b, false, ex, MP_Q_ACT);
    }
    if (z.qk_norm && mutant("norm-after-rope"))
        qk_norm_forward(g, B, l);
    /* att[S,hl] = causal attention over this rank's heads (CP: this rank's
     * queries against every position's K|V); selective recompute keeps no
     * probabilities: they go to scratch and are rebuilt in backward */
    if (z.cp > 1)
        CHECK(mp_model_cp_gather_kv(g, B->qkv, B->kv_full, err));
    core_attention(g, B, B->probs ? B->probs : W.sblk.probs, l);
#undef P
    return MP_OK;
}

/* dres[Sl,h] += the gradient through block l's norm w_k (MP_BLK_LN1_W or
 * MP_BLK_LN2_W; its shift, if any, the tensor after) from W.dln[Sl,h] (the
 * gradient of its output); the norm's own gradients accumulated. */
void mp_model_norm_backward_add(mp_gpt *g, int l, int w_k, const real *xhat,
                                const real *rstd, real *dres)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    mp_model_norm_backward(g, W.dtmp, blk(g->g, g, l, w_k), blk(g->g, g, l, w_k + 1), W.dln,
                           xhat, rstd, blk(g->w, g, l, w_k), (int)z.Sl);
    g->be->add(MP_REAL_KIND, dres, W.dtmp, z.Sl * z.h);
    bq(g, dres, z.Sl * z.h, MP_Q_GRAD);
}

/* GELU of the model's form (d.gelu_erf: the exact one, else the tanh
 * approximation) over n elements; din may alias dout. */
void mp_gelu_kind_forward(const mp_gpt *g, real *out, const real *in, size_t n)
{
    if (g->d.gelu_erf)
        g->be->gelu_erf_forward(MP_REAL_KIND, out, in, n);
    else
        g->be->gelu_forward(MP_REAL_KIND, out, in, n);
}

void mp_gelu_kind_backward(const mp_gpt *g, real *din, const real *dout, const real *in,
                           size_t n)
{
    if (g->d.gelu_erf)
        g->be->gelu_erf_backward(MP_REAL_KIND, din, dout, in, n);
    else
        g->be->gelu_backward(MP_REAL_KIND, din, dout, in, n);
}

/* The MLP's activation, act[rows,f] from pre[rows,f1] (f1 = 2f when gated:
 * [gate | up]): GPT-OSS's clamped SwiGLU (where clamp and glu_limit),
 * SwiGLU, GEGLU, ReLU (T5) or GELU, each in the model's GELU form. */
void mp_mlp_act_forward(const mp_gpt *g, real *act, const real *pre, size_t rows, size_t f,
                        bool clamp)
{
    if (clamp && g->d.glu_limit > 0)
        g->be->swiglu_clamped_forward(MP_REAL_KIND, act, pre, (int)rows, (int)f,
                                      g->d.glu_limit);
    else if (g->d.gated && g->d.geglu)
        g->be->geglu_forward(MP_REAL_KIND, act, pre, (int)rows, (int)f, g->d.gelu_erf);
    else if (g->d.gated)
        g->be->swiglu_forward(MP_REAL_KIND, act, pre, (int)rows, (int)f);
    else if (g->d.relu)
        g->be->relu_forward(MP_REAL_KIND, act, pre, rows * f);
    else
        mp_gelu_kind_forward(g, act, pre, rows * f);
}

/* Its backward: dpre[rows,f1] from dact[rows,f] (dpre may alias dact when
 * not gated). */
void mp_mlp_act_backward(const mp_gpt *g, real *dpre, const real *dact, const real *pre,
                         size_t rows, size_t f, bool clamp)
{
    if (clamp && g->d.glu_limit > 0)
        g->be->swiglu_clamped_backward(MP_REAL_KIND, dpre, dact, pre, (int)rows, (int)f,
                                       g->d.glu_limit);
    else if (g->d.gated && g->d.geglu)
        g->be->geglu_backward(MP_REAL_KIND, dpre, dact, pre, (int)rows, (int)f, g->d.gelu_erf);
    else if (g->d.gated)
        g->be->swiglu_backward(MP_REAL_KIND, dpre, dact, pre, (int)rows, (int)f);
    else if (g->d.relu)
        g->be->relu_backward(MP_REAL_KIND, dpre, dact, pre, rows * f);
    else
        mp_gelu_kind_backward(g, dpre, dact, pre, rows * f);
}

/* A dense MLP's first half: fc1_pre[S,f1] = ln2_full @ W1[h,f1] + b1;
 * fc1_act[S,Fl] = gelu(fc1_pre), or gated: act(gate) * up of fc1_pre =
 * [gate | up] (mp_mlp_act_forward; the forward's, and selective recomputation's `mlp`). */
static void fc1_forward(mp_gpt *g, block_acts *B, int l)
{
    sizes z = sizes_of(&g->d);
    const real *bias;
    GEMM(false, false, z.S, z.f1, z.h, B->ln2_full, z.h, blk(g->w, g, l, MP_BLK_FC1_W), z.f1,
         0.0, B->fc1_pre, z.f1);
    if ((bias = blk(g->w, g, l, MP_BLK_FC1_B)))
        g->be->bias_add(MP_REAL_KIND, B->fc1_pre, bias, (int)z.S, (int)z.f1);
    bq(g, B->fc1_pre, z.S * z.f1, MP_Q_ACT);
    mp_mlp_act_forward(g, B->fc1_act, B->fc1_pre, z.S, z.Fl, true);
    bq(g, B->fc1_act, z.S * z.Fl, MP_Q_ACT);
}

mp_status mp_model_block_forward(mp_gpt *g, block_acts *B, int l, const real *x,
                                 mp_error *err)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    bool sp = g->d.sp && g->tp.size > 1;
    const real *bias;
#define P(k) blk(g->w, g, l, (k))
    if (mp_dims_is_mla(&g->d))
        CHECK(mp_mla_forward(g, B, l, x, err));
    else
        CHECK(attention_forward(g, B, l, x, err));
    /* xmid[Sl,h] = x + reduce(att @ Wo[hl,h]) + bo   (row-parallel; hl = al*dv
     * with latent attention) */
    GEMM(false, false, z.S, z.h, z.hl, B->att, z.hl, P(MP_BLK_PROJ_W), z.h, 0.0, W.part, z.h);
    CHECK(mp_model_tp_reduce(g, W.part, B->xmid, z.h, "tp-attn", err));
    if ((bias = P(MP_BLK_PROJ_B)))
        g->be->bias_add(MP_REAL_KIND, B->xmid, bias, (int)z.Sl, (int)z.h);
    bq(g, B->xmid, z.Sl * z.h, MP_Q_ACT);
    g->be->add(MP_REAL_KIND, B->xmid, x, z.Sl * z.h);
    bq(g, B->xmid, z.Sl * z.h, MP_Q_ACT);
    /* ln2 */
    mp_model_norm_forward(g, sp ? W.loc : B->ln2_full, B->ln2_xhat, B->ln2_rstd, B->xmid,
                          P(MP_BLK_LN2_W), P(MP_BLK_LN2_B), (int)z.Sl);
    if (sp)
        CHECK(mp_model_tp_gather(g, W.loc, B->ln2_full, z.h, err));
    if (mp_dims_block_is_moe(&g->d, l)) { /* the routed experts instead of the MLP */
        CHECK(mp_moe_forward(g, B, l, err));
        goto residual;
    }
    fc1_forward(g, B, l);
    /* xout[Sl,h] = xmid + reduce(fc1_act @ W2[Fl,h]) + b2 */
    GEMM(false, false, z.S, z.h, z.Fl, B->fc1_act, z.Fl, P(MP_BLK_FC2_W), z.h, 0.0, W.part,
         z.h);
    CHECK(mp_model_tp_reduce(g, W.part, B->xout, z.h, "tp-mlp", err));
    if ((bias = P(MP_BLK_FC2_B)))
        g->be->bias_add(MP_REAL_KIND, B->xout, bias, (int)z.Sl, (int)z.h);
    bq(g, B->xout, z.Sl * z.h, MP_Q_ACT);
residual:
    g->be->add(MP_REAL_KIND, B->xout, B->xmid, z.Sl * z.h);
    bq(g, B->xout, z.Sl * z.h, MP_Q_ACT);
#undef P
    return MP_OK;
}

/* dres[Sl,h]: in d loss/d xout, out d loss/d x. */
mp_status mp_model_block_backward(mp_gpt *g, block_acts *B, int l, real *dres,
                                  mp_error *err)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    real *bias;
#define P(k) blk(g->w, g, l, (k))
#define G(k) blk(g->g, g, l, (k))
    /* MLP: db2 += sum dres; dfull[S,h] (SP: all-gather) */
    if ((bias = G(MP_BLK_FC2_B)))
        g->be->bias_grad(MP_REAL_KIND, bias, dres, (int)z.Sl, (int)z.h);
    real *dfull = sp ? W.dfull : dres;
    if (mp_dims_block_is_moe(&g->d, l)) { /* the routed experts instead of the MLP */
        CHECK(mp_moe_backward(g, B, l, dres, W.dln, err));
        goto norm2;
    }
    if (sp)
        CHECK(mp_model_tp_gather(g, dres, W.dfull, z.h, err));
    /* dW2[Fl,h] += fc1_act^T @ dfull;  d fc1_act[S,Fl] = dfull @ W2^T */
    GEMM(true, false, z.Fl, z.h, z.S, B->fc1_act, z.Fl, dfull, z.h, 1.0, G(MP_BLK_FC2_W), z.h);
    real *dact = g->d.gated ? W.dact : W.dfc;
    GEMM(false, true, z.S, z.Fl, z.h, dfull, z.h, P(MP_BLK_FC2_W), z.h, 0.0, dact, z.Fl);
    bq(g, dact, z.S * z.Fl, MP_Q_GRAD);
    /* through gelu (in place) or the gated unit (into dfc[S,2Fl]); db1, dW1[h,f1] +=
     * ln2_full^T @ dfc; dln2 = reduce(dfc @ W1^T) */
    mp_mlp_act_backward(g, W.dfc, dact, B->fc1_pre, z.S, z.Fl, true);
    bq(g, W.dfc, z.S * z.f1, MP_Q_GRAD);
    if ((bias = G(MP_BLK_FC1_B)))
        g->be->bias_grad(MP_REAL_KIND, bias, W.dfc, (int)z.S, (int)z.f1);
    GEMM(true, false, z.h, z.f1, z.S, B->ln2_full, z.h, W.dfc, z.f1, 1.0, G(MP_BLK_FC1_W), z.f1);
    GEMM(false, true, z.S, z.h, z.f1, W.dfc, z.f1, P(MP_BLK_FC1_W), z.f1, 0.0, W.part, z.h);
    CHECK(mp_model_tp_reduce(g, W.part, W.dln, z.h, "tp-mlp-bwd", err));
    bq(g, W.dln, z.Sl * z.h, MP_Q_GRAD);
norm2:
    mp_model_norm_backward_add(g, l, MP_BLK_LN2_W, B->ln2_xhat, B->ln2_rstd, dres);
    /* attention: dbo, dWo[hl,h] += att^T @ dfull; datt[S,hl] = dfull @ Wo^T */
    if ((bias = G(MP_BLK_PROJ_B)))
        g->be->bias_grad(MP_REAL_KIND, bias, dres, (int)z.Sl, (int)z.h);
    if (sp)
        CHECK(mp_model_tp_gather(g, dres, W.dfull, z.h, err));
    GEMM(true, false, z.hl, z.h, z.S, B->att, z.hl, dfull, z.h, 1.0, G(MP_BLK_PROJ_W), z.h);
    GEMM(false, true, z.S, z.hl, z.h, dfull, z.h, P(MP_BLK_PROJ_W), z.h, 0.0, W.datt, z.hl);
    bq(g, W.datt, z.S * z.hl, MP_Q_GRAD);
    if (mp_dims_is_mla(&g->d))
        return mp_mla_backward(g, B, l, dres, err);
    /* CP: this rank's queries' share of every position's dK|dV, then summed
     * around the ring; else straight into dqkv */
    bool cp = z.cp > 1;
    real *dk = cp ? W.dkv_full : W.dqkv + z.hl;
    const real *k = cp ? B->kv_full : B->qkv + z.hl;
    size_t kv_row = cp ? 2 * z.kc : z.row;
    const int *qpos = cp ? g->qpos_be : NULL;
    size_t zeroed = cp ? z.sk * z.b * 2 * z.kc : z.S * z.row;
    g->be->zero(cp ? W.dkv_full : W.dqkv, zeroed * sizeof(real));
    mp_attn_oss xs;
    const mp_attn_oss *xo = oss_of(g, l, &xs);
    if (xo)
        mp_attention_backward_oss(g->be, W.dqkv, z.row, dk, dk + z.kc, kv_row, W.datt, B->qkv,
                                  z.row, k, k + z.kc, kv_row, B->probs, qpos, (int)z.s,
                                  (int)z.sk, (int)z.b, (int)z.al, (int)z.hd, (int)z.rep, xo,
                                  W.att_scratch, ex);
    else
        mp_attention_backward_kv(g->be, W.dqkv, z.row, dk, dk + z.kc, kv_row, W.datt, B->qkv,
                                 z.row, k, k + z.kc, kv_row, B->probs, qpos, (int)z.s, (int)z.sk,
                                 (int)z.b, (int)z.al, (int)z.hd, (int)z.rep, !g->d.bert,
                                 W.att_scratch, ex);
    if (cp)
        CHECK(mp_model_cp_reduce_dkv(g, W.dkv_full, W.dqkv, err));
    bq(g, W.dqkv, z.S * z.row, MP_Q_GRAD_ATT); /* the K|V gradients, summed */
    if (g->d.rope) { /* back through the turn of Q and K */
        g->be->rope(MP_REAL_KIND, W.dqkv, z.row, (int)z.al, (int)z.hd, &g->d.rope_freq,
                    g->qpos_be, (int)z.s, (int)z.b, true, ex, MP_Q_GRAD_ATT);
        g->be->rope(MP_REAL_KIND, W.dqkv + z.hl, z.row, (int)z.gl, (int)z.hd, &g->d.rope_freq,
                    g->qpos_be, (int)z.s, (int)z.b, true, ex, MP_Q_GRAD_ATT);
    }
    if (z.qk_norm) { /* back through Q's and K's norms (onto the activation-gradient grid) */
        qk_norm_backward(g, B, l, W.dqkv);
        bq(g, W.dqkv, z.S * z.row, MP_Q_GRAD_ATT);
    }
    /* dbqkv, dWqkv[h,row] += ln1_full^T @ dqkv; dln1 = reduce(dqkv @ Wqkv^T) */
    if ((bias = G(MP_BLK_QKV_B)))
        g->be->bias_grad(MP_REAL_KIND, bias, W.dqkv, (int)z.S, (int)z.row);
    GEMM(true, false, z.h, z.row, z.S, B->ln1_full, z.h, W.dqkv, z.row, 1.0, G(MP_BLK_QKV_W),
         z.row);
    GEMM(false, true, z.S, z.h, z.row, W.dqkv, z.row, P(MP_BLK_QKV_W), z.row, 0.0, W.part, z.h);
    CHECK(mp_model_tp_reduce(g, W.part, W.dln, z.h, "tp-attn-bwd", err));
    bq(g, W.dln, z.Sl * z.h, MP_Q_GRAD);
    mp_model_norm_backward_add(g, l, MP_BLK_LN1_W, B->ln1_xhat, B->ln1_rstd, dres);
#undef P
#undef G
    return MP_OK;
}

/* Selective recomputation's scratch: what B does not keep (NULL) is the
 * workspace's one block's worth (model_internal.h, layout_work). */
void mp_model_rebuild_scratch(const mp_gpt *g, block_acts *B)
{
    work W = work_of(g);
    if (!B->probs)
        B->probs = W.sblk.probs;
    if (!B->qkv)
        B->qkv = W.sblk.qkv;
    if (!B->ln1_full)
        B->ln1_full = W.sblk.ln1_full;
    if (!B->ln2_full)
        B->ln2_full = W.sblk.ln2_full;
    if (!B->fc1_pre)
        B->fc1_pre = W.sblk.fc1_pre;
    if (!B->fc1_act)
        B->fc1_act = W.sblk.fc1_act;
}

void mp_model_plant(const mp_gpt *g, real *x, size_t n)
{
    if (!n)
        return;
    real v; /* the last: the first row's query, say, would change no gradient */
    g->be->copy(&v, x + n - 1, sizeof v, MP_COPY_D2H);
    v = v + (real)0.5;
    g->be->copy(x + n - 1, &v, sizeof v, MP_COPY_H2D);
}

/* Before block l's backward, what selective recomputation did not keep, as
 * Megatron-Core's --recompute-modules rebuilds it: layernorm the two norms'
 * outputs (from the block's input x and the kept residual xmid; under SP
 * all-gathered again where the forward gathered them), mla_up_proj latent
 * attention's Q, K, V (from its kept latents), core_attn the attention
 * probabilities, mlp a dense MLP's fc1 output and activation, and in an MoE
 * block moe the whole layer (router, dispatch, experts, combine, shared
 * experts: its all-to-alls again), moe_act the routed experts' activation,
 * shared_experts the shared experts' fc1 and activation. The same ops as the
 * forward's, so the values are the same bit for bit, in that order (each
 * from what the one before rebuilt). `--test-drop-allreduce recompute-rebuild`
 * leaves them stale, `recompute-plant` makes one value of the latent
 * attention's and the MoE layer's rebuilds wrong (the check must then fail). */
mp_status mp_model_rebuild(mp_gpt *g, block_acts *V, int l, const real *x, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    unsigned rb = block_rebuilds(&g->d, l);
    bool sp = g->d.sp && g->tp.size > 1;
    mp_model_rebuild_scratch(g, V);
    if (mp_probe_drops(g->probe, "recompute-rebuild"))
        rb &= RB_CORE_ATTN;
    bool moe = mp_dims_block_is_moe(&g->d, l);
#define P(k) blk(g->w, g, l, (k))
    if (rb & RB_LAYERNORM) {
        /* latent attention keeps its own rows of the norm unless its queries need
         * every row (q_lora 0 under SP, mla.c) */
        bool gather1 = sp && (!mp_dims_is_mla(&g->d) || g->d.q_lora == 0);
        mp_model_norm_forward(g, gather1 ? W.loc : V->ln1_full, V->ln1_xhat, V->ln1_rstd, x,
                              P(MP_BLK_LN1_W), P(MP_BLK_LN1_B), (int)z.Sl);
        if (gather1)
            CHECK(mp_model_tp_gather(g, W.loc, V->ln1_full, z.h, err));
        mp_model_norm_forward(g, sp ? W.loc : V->ln2_full, V->ln2_xhat, V->ln2_rstd, V->xmid,
                              P(MP_BLK_LN2_W), P(MP_BLK_LN2_B), (int)z.Sl);
        if (sp)
            CHECK(mp_model_tp_gather(g, W.loc, V->ln2_full, z.h, err));
    }
    if ((rb & RB_MLA_UP) && mp_dims_is_mla(&g->d))
        mp_mla_rebuild_up(g, V, l);
    if (rb & RB_CORE_ATTN)
        mp_model_recompute_probs(g, V, l);
    if ((rb & RB_MLP) && !moe)
        fc1_forward(g, V, l);
    if (moe && (rb & (RB_MOE | RB_MOE_ACT | RB_SHARED)))
        CHECK(mp_moe_rebuild(g, V, l, rb, err));
#undef P
    return MP_OK;
}

/* Selective recomputation: the block's attention probabilities (and its
 * output, again the same) from the Q, K and V it kept. */
void mp_model_recompute_probs(mp_gpt *g, block_acts *V, int l)
{
    if (mp_dims_is_mla(&g->d))
        mp_mla_recompute_probs(g, V);
    else
        core_attention(g, V, V->probs, l);
}

