/* mla.c — multi-head latent attention (DeepSeek-V2/V3), forward and backward
 * side by side, with its TP/SP collectives (docs/exec.md, "Multi-head latent
 * attention"; shapes in mla.h). Partitioned as Megatron-Core does: the
 * down-projections and their norms replicated over TP (under SP each rank's
 * own rows, their gradients summed over TP afterwards), the up-projections
 * column-parallel over whole heads, the output projection row-parallel (in
 * block.c, as the dense one). Compiled once per precision (real.h). */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"
#include "exec/model_internal.h"

/* Everything one call needs: sizes, this block's state, the workspace. */
typedef struct mla_ctx {
    sizes z;
    mp_mla_sizes m;
    bool sp;
    real *q_xhat, *q_rstd, *kv_xhat, *kv_rstd, *latq, *latkv, *kr;
    real *wq, *wkv, *wr, *lq, *lkv, *lr, *kv;
    real *n1;       /* [Sl,h] the first norm's output, this rank's rows */
    const int *lpos; /* the positions of this rank's rows (SP: its piece) */
    size_t ls;       /* and how many */
} mla_ctx;

static mla_ctx ctx_of(mp_gpt *g, block_acts *B)
{
    mla_ctx c;
    c.z = sizes_of(&g->d);
    c.m = mp_mla_sizes_of(&g->d, c.z.S, c.z.Sl);
    c.sp = g->d.sp && g->tp.size > 1;
    mp_mla_layout L = mp_mla_layout_of(&c.m);
    real *st = B->mla;
    c.q_xhat = st + L.q_xhat, c.q_rstd = st + L.q_rstd;
    c.kv_xhat = st + L.kv_xhat, c.kv_rstd = st + L.kv_rstd;
    c.latq = st + L.latq, c.latkv = st + L.latkv, c.kr = st + L.kr;
    work W = work_of(g);
    mp_mla_work M = mp_mla_work_of(&c.m);
    c.wq = W.mla + M.wq, c.wkv = W.mla + M.wkv, c.wr = W.mla + M.wr;
    c.lq = W.mla + M.lq, c.lkv = W.mla + M.lkv, c.lr = W.mla + M.lr;
    c.kv = W.mla + M.kv;
    /* queries straight from n1 (q_lora 0) need every row of it: ln1_full is
     * then the SP all-gather, this rank's rows a piece of it */
    bool gathered = c.sp && c.m.rq == 0;
    c.n1 = gathered ? B->ln1_full + (size_t)g->tp.rank * c.z.Sl * c.z.h : B->ln1_full;
    c.ls = c.sp ? c.z.s / (size_t)g->tp.size : c.z.s;
    c.lpos = g->qpos_be + (c.sp ? (size_t)g->tp.rank * c.ls : 0);
    return c;
}

/* The rope part of every local head of q (rows q_row apart) turned by its
 * position's angles, or back. */
static void rope_heads(mp_gpt *g, const mla_ctx *c, real *q, size_t q_row, bool inverse,
                       int grid)
{
    for (size_t a = 0; a < c->m.al; a++)
        g->be->rope(MP_REAL_KIND, q + a * c->m.dqk + c->m.dn, q_row, 1, (int)c->m.dr,
                    &g->d.rope_freq, g->qpos_be, (int)c->z.s, (int)c->z.b, inverse, g->exact,
                    grid);
}

/* cols columns of each of src's heads (src_w columns apart; 0: the same one
 * for every head) into each of dst's (dst_w apart), in all S rows (src_row,
 * dst_row reals apart); where in a head they start is in the pointers. */
static void copy_heads(mp_gpt *g, real *dst, size_t dst_row, size_t dst_w, const real *src,
                       size_t src_row, size_t src_w, size_t cols, size_t S, size_t heads)
{
    for (size_t a = 0; a < heads; a++)
        g->be->copy2d(dst + a * dst_w, dst_row * sizeof(real), src + a * src_w,
                      src_row * sizeof(real), cols * sizeof(real), S, MP_COPY_D2D);
}

static void up_proj(mp_gpt *g, const mla_ctx *cp, block_acts *B, int l);

mp_status mp_mla_forward(mp_gpt *g, block_acts *B, int l, const real *x, mp_error *err)
{
    mla_ctx c = ctx_of(g, B);
    const sizes z = c.z;
    const mp_mla_sizes m = c.m;
    bool ex = g->exact;
    work W = work_of(g);
#define P(k) blk(g->w, g, l, (k))
    /* n1[Sl,h] = norm(x) (q_lora 0 under SP: all-gathered into ln1_full[S,h]) */
    bool gathered = c.sp && m.rq == 0;
    mp_model_norm_forward(g, gathered ? W.loc : B->ln1_full, B->ln1_xhat, B->ln1_rstd, x,
                          P(MP_BLK_LN1_W), P(MP_BLK_LN1_B), (int)z.Sl);
    if (gathered)
        CHECK(mp_model_tp_gather(g, W.loc, B->ln1_full, z.h, err));
    /* down-projections on this rank's rows (replicated weights):
     *   cq[Sl,rq] = n1 @ W_dq[h,rq];  [c_kv | k_r][Sl,rkv+dr] = n1 @ W_dkv[h,rkv+dr] */
    const real *wkvd = P(MP_BLK_MLA_KVDOWN_W);
    size_t kvd = m.rkv + m.dr;
    if (m.rq) {
        GEMM(false, false, z.Sl, m.rq, z.h, c.n1, z.h, P(MP_BLK_MLA_QDOWN_W), m.rq, 0.0, c.lq,
             m.rq);
        bq(g, c.lq, z.Sl * m.rq, MP_Q_ACT);
    }
    GEMM(false, false, z.Sl, m.rkv, z.h, c.n1, z.h, wkvd, kvd, 0.0, c.lkv, m.rkv);
    GEMM(false, false, z.Sl, m.dr, z.h, c.n1, z.h, wkvd + m.rkv, kvd, 0.0,
         c.sp ? c.lr : c.kr, m.dr);
    bq(g, c.lkv, z.Sl * m.rkv, MP_Q_ACT);
    bq(g, c.sp ? c.lr : c.kr, z.Sl * m.dr, MP_Q_ACT);
    /* latq[S,rq] = RMSNorm(cq), latkv[S,rkv] = RMSNorm(c_kv), kr[S,dr] = k_r:
     * this rank's rows, all-gathered over TP under SP */
    if (m.rq) {
        g->be->rmsnorm_forward(MP_REAL_KIND, c.sp ? c.wq : c.latq, c.q_xhat, c.q_rstd, c.lq,
                               P(MP_BLK_MLA_QNORM_W), (int)z.Sl, (int)m.rq,
                               mp_dims_norm_eps(&g->d), ex);
        if (c.sp)
            CHECK(mp_model_tp_gather_rows(g, c.wq, c.latq, z.S, z.Sl, m.rq, err));
    }
    g->be->rmsnorm_forward(MP_REAL_KIND, c.sp ? c.wkv : c.latkv, c.kv_xhat, c.kv_rstd, c.lkv,
                           P(MP_BLK_MLA_KVNORM_W), (int)z.Sl, (int)m.rkv,
                           mp_dims_norm_eps(&g->d), ex);
    if (c.sp) {
        CHECK(mp_model_tp_gather_rows(g, c.wkv, c.latkv, z.S, z.Sl, m.rkv, err));
        CHECK(mp_model_tp_gather_rows(g, c.lr, c.kr, z.S, z.Sl, m.dr, err));
    }
    /* the shared rotary key turned by each row's position: kr[S,dr] */
    g->be->rope(MP_REAL_KIND, c.kr, m.dr, 1, (int)m.dr, &g->d.rope_freq, g->qpos_be, (int)z.s,
                (int)z.b, false, ex, MP_Q_ACT);
    up_proj(g, &c, B, l);
    /* att[S,al*dv] = causal softmax(Q K^T / sqrt(dqk)) V over this rank's heads
     * (CP: every position's K|V around the ring first, kv_full[sk*b,kc+hl]) */
    if (z.cp > 1)
        CHECK(mp_model_cp_gather_kv(g, B->qkv, B->kv_full, err));
    mp_mla_recompute_probs(g, B);
#undef P
    return MP_OK;
}

/* The factor DeepSeek's YaRN multiplies the softmax scale by (1 without it;
 * rope.h). Test-only (`--test-drop-allreduce mla-softmax-mscale`): left out
 * in the partitioned run, which the check against the reference must catch. */
static double softmax_mul(const mp_gpt *g)
{
    if (mp_probe_drops(g->probe, "mla-softmax-mscale"))
        return 1.0;
    return mp_rope_softmax_scale(&g->d.rope_freq);
}

/* Before the backward of a block that recomputes mla_up_proj: its Q, K, V
 * again from the kept latents and turned rotary key (the forward's ops, so
 * the same bits); with CP the gathered K|V (kv_full) was kept. */
void mp_mla_rebuild_up(mp_gpt *g, block_acts *B, int l)
{
    mla_ctx c = ctx_of(g, B);
    up_proj(g, &c, B, l);
    if (mp_probe_drops(g->probe, "recompute-plant")) /* test-only: a wrong Q */
        mp_model_plant(g, B->qkv, c.z.S * c.z.row);
}

/* The up-projections and the turns (Megatron-Core's qkv_up_proj_and_rope_apply,
 * what mla_up_proj recomputes): B->qkv = [Q | K | V] from the normed latents
 * (q_lora 0: the first norm's output) and the turned rotary key kr. */
static void up_proj(mp_gpt *g, const mla_ctx *cp, block_acts *B, int l)
{
    const mla_ctx c = *cp;
    const sizes z = c.z;
    const mp_mla_sizes m = c.m;
#define P(k) blk(g->w, g, l, (k))
    /* Q[S,al*dqk] = latq @ W_uq[rq, al*dqk] (q_lora 0: n1_full @ W_q[h, al*dqk]),
     * column-parallel by heads; each head [q_nope | q_rope], q_rope turned */
    real *Q = B->qkv, *K = B->qkv + z.kc, *V = B->qkv + 2 * z.kc;
    if (m.rq)
        GEMM(false, false, z.S, z.kc, m.rq, c.latq, m.rq, P(MP_BLK_MLA_QUP_W), z.kc, 0.0, Q,
             z.row);
    else
        GEMM(false, false, z.S, z.kc, z.h, B->ln1_full, z.h, P(MP_BLK_MLA_QUP_W), z.kc, 0.0, Q,
             z.row);
    if (g->exact)
        g->be->quantize(MP_REAL_KIND, Q, z.S, z.kc, z.row, MP_Q_ACT, MP_EXACT_MAX_INT);
    rope_heads(g, &c, Q, z.row, false, MP_Q_ACT);
    /* kv[S,al*(dn+dv)] = latkv @ W_ukv[rkv, al*(dn+dv)], column-parallel by
     * heads, each [k_nope | v]; K's heads are [k_nope | kr], V's v */
    GEMM(false, false, z.S, m.kvw, m.rkv, c.latkv, m.rkv, P(MP_BLK_MLA_KVUP_W), m.kvw, 0.0,
         c.kv, m.kvw);
    bq(g, c.kv, z.S * m.kvw, MP_Q_ACT);
    copy_heads(g, K, z.row, m.dqk, c.kv, m.kvw, m.dn + m.dv, m.dn, z.S, m.al);
    copy_heads(g, K + m.dn, z.row, m.dqk, c.kr, m.dr, 0, m.dr, z.S, m.al);
    copy_heads(g, V, z.row, m.dv, c.kv + m.dn, m.kvw, m.dn + m.dv, m.dv, z.S, m.al);
#undef P
}

/* B->att from B->qkv (and with CP B->kv_full), the probabilities into
 * B->probs, or scratch where selective recomputation keeps none (the
 * forward) and rebuilds them (its backward: B is then the rebuilt view). */
void mp_mla_recompute_probs(mp_gpt *g, block_acts *B)
{
    sizes z = sizes_of(&g->d);
    real *probs = B->probs ? B->probs : work_of(g).sblk.probs;
    if (z.cp > 1)
        mp_attention_forward_dv(g->be, B->att, probs, B->qkv, z.row, B->kv_full,
                                B->kv_full + z.kc, z.kvw, g->qpos_be, (int)z.s, (int)z.sk,
                                (int)z.b, (int)z.al, (int)z.hd, (int)z.hdv, 1, true, softmax_mul(g),
                                g->exact);
    else
        mp_attention_forward_dv(g->be, B->att, probs, B->qkv, z.row, B->qkv + z.kc,
                                B->qkv + 2 * z.kc, z.row, NULL, (int)z.s, (int)z.s, (int)z.b,
                                (int)z.al, (int)z.hd, (int)z.hdv, 1, true, softmax_mul(g),
                                g->exact);
}

/* From W.datt[S,al*dv] (the output projection's input gradient): dres[Sl,h]
 * += the gradient through attention, the projections and the first norm. */
mp_status mp_mla_backward(mp_gpt *g, block_acts *B, int l, real *dres, mp_error *err)
{
    mla_ctx c = ctx_of(g, B);
    const sizes z = c.z;
    const mp_mla_sizes m = c.m;
    bool ex = g->exact;
    work W = work_of(g);
#define P(k) blk(g->w, g, l, (k))
#define G(k) blk(g->g, g, l, (k))
    const real *Q = B->qkv, *K = B->qkv + z.kc, *V = B->qkv + 2 * z.kc;
    (void)K, (void)V; /* CP reads them from kv_full */
    real *dQ = W.dqkv, *dK = W.dqkv + z.kc, *dV = W.dqkv + 2 * z.kc;
    /* dQ, dK[S,al*dqk], dV[S,al*dv] through the attention (CP: the gradient
     * of every position's K|V from these queries, summed around the ring to
     * its owner) */
    if (z.cp > 1) {
        g->be->zero(W.dkv_full, z.sk * z.b * z.kvw * sizeof(real));
        mp_attention_backward_dv(g->be, dQ, z.row, W.dkv_full, W.dkv_full + z.kc, z.kvw, W.datt,
                                 Q, z.row, B->kv_full, B->kv_full + z.kc, z.kvw, B->probs,
                                 g->qpos_be, (int)z.s, (int)z.sk, (int)z.b, (int)m.al,
                                 (int)m.dqk, (int)m.dv, 1, true, softmax_mul(g), W.att_scratch,
                                 ex);
        CHECK(mp_model_cp_reduce_dkv(g, W.dkv_full, W.dqkv, err));
    } else {
        g->be->zero(W.dqkv, z.S * z.row * sizeof(real));
        mp_attention_backward_dv(g->be, dQ, z.row, dK, dV, z.row, W.datt, Q, z.row, K, V, z.row,
                                 B->probs, NULL, (int)z.s, (int)z.s, (int)z.b, (int)m.al,
                                 (int)m.dqk, (int)m.dv, 1, true, softmax_mul(g), W.att_scratch,
                                 ex);
    }
    bq(g, W.dqkv, z.S * z.row, MP_Q_GRAD_ATT);
    rope_heads(g, &c, dQ, z.row, true, MP_Q_GRAD_ATT); /* back through q_rope's turn */
    /* d kv[S,al*(dn+dv)] = per head [dK_nope | dV] */
    copy_heads(g, c.kv, m.kvw, m.dn + m.dv, dK, z.row, m.dqk, m.dn, z.S, m.al);
    copy_heads(g, c.kv + m.dn, m.kvw, m.dn + m.dv, dV, z.row, m.dv, m.dv, z.S, m.al);
    /* up-projections (column-parallel): dW_ukv[rkv,kvw] += latkv^T @ dkv;
     * wkv[S,rkv] = dkv @ W_ukv^T (a partial); likewise the queries' */
    GEMM(true, false, m.rkv, m.kvw, z.S, c.latkv, m.rkv, c.kv, m.kvw, 1.0,
         G(MP_BLK_MLA_KVUP_W), m.kvw);
    GEMM(false, true, z.S, m.rkv, m.kvw, c.kv, m.kvw, P(MP_BLK_MLA_KVUP_W), m.kvw, 0.0, c.wkv,
         m.rkv);
    /* wr[S,dr] = the sum of the heads' dK_rope, head by head (this rank's
     * heads: a TP partial); c.kv, free again, holds each head's before it is added */
    copy_heads(g, c.wr, m.dr, 0, dK + m.dn, z.row, 0, m.dr, z.S, 1);
    for (size_t a = 1; a < m.al; a++) {
        copy_heads(g, c.kv, m.dr, 0, dK + a * m.dqk + m.dn, z.row, 0, m.dr, z.S, 1);
        g->be->add(MP_REAL_KIND, c.wr, c.kv, z.S * m.dr);
    }
    if (m.rq) {
        GEMM(true, false, m.rq, z.kc, z.S, c.latq, m.rq, dQ, z.row, 1.0, G(MP_BLK_MLA_QUP_W),
             z.kc);
        GEMM(false, true, z.S, m.rq, z.kc, dQ, z.row, P(MP_BLK_MLA_QUP_W), z.kc, 0.0, c.wq,
             m.rq);
    } else { /* queries straight from n1: its gradient, a TP partial, reduced here */
        GEMM(true, false, z.h, z.kc, z.S, B->ln1_full, z.h, dQ, z.row, 1.0,
             G(MP_BLK_MLA_QUP_W), z.kc);
        GEMM(false, true, z.S, z.h, z.kc, dQ, z.row, P(MP_BLK_MLA_QUP_W), z.kc, 0.0, W.part,
             z.h);
        CHECK(mp_model_tp_reduce(g, W.part, W.dln, z.h, "tp-mla-bwd", err));
    }
    /* the latents' gradients summed over the TP ranks' heads (SP:
     * reduce-scattered to this rank's rows): lq[Sl,rq], lkv[Sl,rkv], lr[Sl,dr] */
    if (m.rq)
        CHECK(mp_model_tp_reduce_rows(g, c.wq, c.lq, z.S, z.Sl, m.rq, "tp-mla-bwd", err));
    CHECK(mp_model_tp_reduce_rows(g, c.wkv, c.lkv, z.S, z.Sl, m.rkv, "tp-mla-bwd", err));
    CHECK(mp_model_tp_reduce_rows(g, c.wr, c.lr, z.S, z.Sl, m.dr, "tp-mla-bwd", err));
    bq(g, c.lq, z.Sl * m.rq, MP_Q_GRAD);
    bq(g, c.lkv, z.Sl * m.rkv, MP_Q_GRAD);
    bq(g, c.lr, z.Sl * m.dr, MP_Q_GRAD_ATT);
    /* back through the rotary key's turn, at this rank's positions */
    g->be->rope(MP_REAL_KIND, c.lr, m.dr, 1, (int)m.dr, &g->d.rope_freq, c.lpos, (int)c.ls,
                (int)z.b, true, ex, MP_Q_GRAD_ATT);
    /* through the latents' norms (replicated weights: under SP their
     * gradients are this rank's rows', summed over TP by the step):
     * wq[Sl,rq] = d cq, wkv[Sl,rkv] = d c_kv */
    if (m.rq) {
        g->be->rmsnorm_backward(MP_REAL_KIND, c.wq, G(MP_BLK_MLA_QNORM_W), c.lq, c.q_xhat,
                                c.q_rstd, P(MP_BLK_MLA_QNORM_W), (int)z.Sl, (int)m.rq, ex);
        bq(g, c.wq, z.Sl * m.rq, MP_Q_GRAD);
    }
    g->be->rmsnorm_backward(MP_REAL_KIND, c.wkv, G(MP_BLK_MLA_KVNORM_W), c.lkv, c.kv_xhat,
                            c.kv_rstd, P(MP_BLK_MLA_KVNORM_W), (int)z.Sl, (int)m.rkv, ex);
    bq(g, c.wkv, z.Sl * m.rkv, MP_Q_GRAD);
    /* down-projections: dW_dq[h,rq] += n1^T @ d cq, dW_dkv[h,rkv+dr] += n1^T @
     * [d c_kv | d k_r]; dln[Sl,h] (+)= d cq @ W_dq^T + [d c_kv | d k_r] @ W_dkv^T */
    real *gkvd = G(MP_BLK_MLA_KVDOWN_W);
    const real *wkvd = P(MP_BLK_MLA_KVDOWN_W);
    size_t kvd = m.rkv + m.dr;
    double beta = m.rq ? 0.0 : 1.0; /* q_lora 0: dln holds the queries' share already */
    if (m.rq) {
        GEMM(true, false, z.h, m.rq, z.Sl, c.n1, z.h, c.wq, m.rq, 1.0, G(MP_BLK_MLA_QDOWN_W),
             m.rq);
        GEMM(false, true, z.Sl, z.h, m.rq, c.wq, m.rq, P(MP_BLK_MLA_QDOWN_W), m.rq, 0.0, W.dln,
             z.h);
        beta = 1.0;
    }
    GEMM(true, false, z.h, m.rkv, z.Sl, c.n1, z.h, c.wkv, m.rkv, 1.0, gkvd, kvd);
    GEMM(true, false, z.h, m.dr, z.Sl, c.n1, z.h, c.lr, m.dr, 1.0, gkvd + m.rkv, kvd);
    GEMM(false, true, z.Sl, z.h, m.rkv, c.wkv, m.rkv, wkvd, kvd, beta, W.dln, z.h);
    GEMM(false, true, z.Sl, z.h, m.dr, c.lr, m.dr, wkvd + m.rkv, kvd, 1.0, W.dln, z.h);
    bq(g, W.dln, z.Sl * z.h, MP_Q_GRAD);
    /* the first norm: dres += its input's gradient */
    mp_model_norm_backward_add(g, l, MP_BLK_LN1_W, B->ln1_xhat, B->ln1_rstd, dres);
#undef P
#undef G
    return MP_OK;
}
