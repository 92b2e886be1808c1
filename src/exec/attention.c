/* attention.c — causal self-attention over the heads this rank holds, for
 * the sequence positions it holds (all, or with context parallelism its two
 * chunks, against every key gathered from the CP group). A head is never
 * split across ranks and every query runs over its keys in position order,
 * so scores, softmax and weighted sums are computed in the same order in the
 * partitioned run and in the reference. Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"

/* Forward, per sample n and head a (hd = head dim, scale = 1/sqrt(hd), the
 * _dv variant's times its scale_mul), for
 * this rank's s query positions (global position qpos[i], or i) against sk
 * key positions:
 *   S[i,j] = scale * q_i . k_j  for j <= qpos[i]   [s, sk] (causal)
 *   P[i,:] = softmax(S[i, :qpos[i]+1])             probs[n, a, i, j]
 *   out_i  = sum_j P[i,j] v_j                      out[i*b + n, a*hd ..]
 * Rows are r = position*b + sample; q rows are q_row apart, k and v rows
 * kv_row apart (the same buffer as q without CP, the gathered keys with).
 * Grouped-query attention: query head a reads key/value head a / rep.
 * Without `causal` (BERT) every query sees every key.
 * The two products are the backend's GEMMs on strided views (one sample's
 * rows of one head are b rows apart); Q K^T is computed whole and the causal
 * part kept. The scale and the softmax are row loops, the same in every run;
 * exact mode's sums are exact in any order (quant.h). */
void mp_attention_forward_kv(const mp_backend *be, real *out, real *probs,
                             const real *q_base, size_t q_row, const real *k_base,
                             const real *v_base, size_t kv_row, const int *qpos, int s, int sk,
                             int b, int heads_local, int hd, int rep, bool causal, bool exact)
{
    mp_attention_forward_dv(be, out, probs, q_base, q_row, k_base, v_base, kv_row, qpos, s, sk,
                            b, heads_local, hd, hd, rep, causal, 1.0, exact);
}

/* 1/sqrt(hd), times scale_mul (DeepSeek's YaRN: rope.h's
 * mp_rope_softmax_scale) in double, as HF's scaling, when that is not 1. */
static real softmax_scale(int hd, double scale_mul)
{
    if (scale_mul == 1.0)
        return (real)1 / R_SQRT((real)hd);
    return (real)(scale_mul / sqrt((double)hd));
}

/* The forward of every variant: x (NULL: plain) GPT-OSS's window and sinks. */
static void forward_any(const mp_backend *be, real *out, real *probs, const real *q_base,
                        size_t q_row, const real *k_base, const real *v_base, size_t kv_row,
                        const int *qpos, int s, int sk, int b, int heads_local, int hd, int hdv,
                        int rep, bool causal, double scale_mul, const mp_attn_oss *x,
                        bool exact)
{
    size_t hl = (size_t)heads_local * hdv;
    real scale = softmax_scale(hd, scale_mul);
    for (int n = 0; n < b; n++)
        for (int a = 0; a < heads_local; a++) {
            real *p = probs + ((size_t)n * heads_local + a) * (size_t)s * sk;
            const real *q = q_base + (size_t)n * q_row + (size_t)a * hd;
            const real *k = k_base + (size_t)n * kv_row + (size_t)(a / rep) * hd;
            const real *v = v_base + (size_t)n * kv_row + (size_t)(a / rep) * hdv;
            real *o = out + (size_t)n * hl + (size_t)a * hdv;
            /* p[s, sk] = q[s, hd] k[sk, hd]^T */
            be->gemm(MP_REAL_KIND, false, true, s, sk, hd, 1.0, q, (int)(b * q_row), k,
                     (int)(b * kv_row), 0.0, p, sk);
            if (x)
                be->attn_softmax_oss(MP_REAL_KIND, p, s, sk, qpos, causal, x->window,
                                     x->sink ? x->sink + a : NULL, (double)scale, exact);
            else
                be->attn_softmax(MP_REAL_KIND, p, s, sk, qpos, causal, (double)scale, exact);
            /* o[s, hdv] = p[s, sk] v[sk, hdv] */
            be->gemm(MP_REAL_KIND, false, false, s, hdv, sk, 1.0, p, sk, v, (int)(b * kv_row),
                     0.0, o, (int)(b * hl));
            if (exact)
                be->quantize(MP_REAL_KIND, o, (size_t)s, (size_t)hdv, (size_t)b * hl, MP_Q_ACT,
                             MP_EXACT_MAX_INT);
        }
}

/* The same with value heads of hdv columns (latent attention: v_head_dim,
 * while queries and keys have hd = nope + rope); out is [S, heads_local*hdv]. */
void mp_attention_forward_dv(const mp_backend *be, real *out, real *probs,
                             const real *q_base, size_t q_row, const real *k_base,
                             const real *v_base, size_t kv_row, const int *qpos, int s, int sk,
                             int b, int heads_local, int hd, int hdv, int rep, bool causal,
                             double scale_mul, bool exact)
{
    forward_any(be, out, probs, q_base, q_row, k_base, v_base, kv_row, qpos, s, sk, b,
                heads_local, hd, hdv, rep, causal, scale_mul, NULL, exact);
}

/* GPT-OSS's causal attention: the window and the sinks of x. */
void mp_attention_forward_oss(const mp_backend *be, real *out, real *probs, const real *q_base,
                              size_t q_row, const real *k_base, const real *v_base,
                              size_t kv_row, const int *qpos, int s, int sk, int b,
                              int heads_local, int hd, int rep, const mp_attn_oss *x,
                              bool exact)
{
    forward_any(be, out, probs, q_base, q_row, k_base, v_base, kv_row, qpos, s, sk, b,
                heads_local, hd, hd, rep, true, 1.0, x, exact);
}

void mp_attention_forward(const mp_backend *be, real *out, real *probs, const real *qkv,
                          int s, int b, int heads_local, int hd, bool exact)
{
    size_t hl = (size_t)heads_local * hd;
    mp_attention_forward_kv(be, out, probs, qkv, 3 * hl, qkv + hl, qkv + 2 * hl, 3 * hl,
                            NULL, s, s, b, heads_local, hd, 1, true, exact);
}

/* Backward, per sample and head, with dO = dout:
 *   dv_j += sum_i P[i,j] dO_i
 *   dP[i,j] = dO_i . v_j
 *   dS[i,j] = P[i,j] (dP[i,j] - sum_j' P[i,j'] dP[i,j'])
 *   dq_i = scale sum_j dS[i,j] k_j,   dk_j += scale sum_i dS[i,j] q_i
 * (the scale is folded into dS). dq is written (its s rows, dq_row apart) and
 * put on the gradient grid; dk and dv are added to (sk rows, dkv_row apart),
 * unrounded: with CP they are partial sums that the caller adds over the
 * ranks before rounding. scratch holds s * sk reals (dP, then dS). */
void mp_attention_backward_kv(const mp_backend *be, real *dq_base, size_t dq_row,
                              real *dk_base, real *dv_base, size_t dkv_row, const real *dout,
                              const real *q_base, size_t q_row, const real *k_base,
                              const real *v_base, size_t kv_row, const real *probs,
                              const int *qpos, int s, int sk, int b, int heads_local, int hd,
                              int rep, bool causal, real *scratch, bool exact)
{
    mp_attention_backward_dv(be, dq_base, dq_row, dk_base, dv_base, dkv_row, dout, q_base, q_row,
                             k_base, v_base, kv_row, probs, qpos, s, sk, b, heads_local, hd, hd,
                             rep, causal, 1.0, scratch, exact);
}

/* The backward of every variant (x as forward_any's; its dsink added to). */
static void backward_any(const mp_backend *be, real *dq_base, size_t dq_row, real *dk_base,
                         real *dv_base, size_t dkv_row, const real *dout, const real *q_base,
                         size_t q_row, const real *k_base, const real *v_base, size_t kv_row,
                         const real *probs, const int *qpos, int s, int sk, int b,
                         int heads_local, int hd, int hdv, int rep, bool causal,
                         double scale_mul, const mp_attn_oss *x, real *scratch, bool exact)
{
    size_t hl = (size_t)heads_local * hdv, hq = (size_t)heads_local * hd;
    real scale = softmax_scale(hd, scale_mul);
    for (int n = 0; n < b; n++)
        for (int a = 0; a < heads_local; a++) {
            const real *p = probs + ((size_t)n * heads_local + a) * (size_t)s * sk;
            const real *dO = dout + (size_t)n * hl + (size_t)a * hdv;
            const real *q = q_base + (size_t)n * q_row + (size_t)a * hd;
            const real *k = k_base + (size_t)n * kv_row + (size_t)(a / rep) * hd;
            const real *v = v_base + (size_t)n * kv_row + (size_t)(a / rep) * hdv;
            real *dq = dq_base + (size_t)n * dq_row + (size_t)a * hd;
            real *dk = dk_base + (size_t)n * dkv_row + (size_t)(a / rep) * hd;
            real *dv = dv_base + (size_t)n * dkv_row + (size_t)(a / rep) * hdv;
            int ldo = (int)(b * hl), ldq = (int)(b * q_row), ldkv = (int)(b * kv_row);
            int lddq = (int)(b * dq_row), lddkv = (int)(b * dkv_row);
            /* dv[sk, hdv] += p^T dO;  dP[s, sk] = dO v^T */
            be->gemm(MP_REAL_KIND, true, false, sk, hdv, s, 1.0, p, sk, dO, ldo, 1.0, dv, lddkv);
            real *ds = scratch;
            be->gemm(MP_REAL_KIND, false, true, s, sk, hdv, 1.0, dO, ldo, v, ldkv, 0.0, ds, sk);
            if (x)
                be->attn_softmax_oss_backward(MP_REAL_KIND, ds, x->dsink ? x->dsink + a : NULL,
                                              p, s, sk, qpos, causal, x->window,
                                              (double)scale, exact);
            else
                be->attn_softmax_backward(MP_REAL_KIND, ds, p, s, sk, qpos, causal,
                                          (double)scale, exact);
            /* dq[s, hd] = dS k;  dk[sk, hd] += dS^T q */
            be->gemm(MP_REAL_KIND, false, false, s, hd, sk, 1.0, ds, sk, k, ldkv, 0.0, dq, lddq);
            be->gemm(MP_REAL_KIND, true, false, sk, hd, s, 1.0, ds, sk, q, ldq, 1.0, dk, lddkv);
        }
    if (exact)
        be->quantize(MP_REAL_KIND, dq_base, (size_t)s * b, hq, dq_row, MP_Q_GRAD_ATT,
                     MP_EXACT_MAX_INT);
}

/* The same with value heads of hdv columns (dout is [S, heads_local*hdv]). */
void mp_attention_backward_dv(const mp_backend *be, real *dq_base, size_t dq_row,
                              real *dk_base, real *dv_base, size_t dkv_row, const real *dout,
                              const real *q_base, size_t q_row, const real *k_base,
                              const real *v_base, size_t kv_row, const real *probs,
                              const int *qpos, int s, int sk, int b, int heads_local, int hd,
                              int hdv, int rep, bool causal, double scale_mul, real *scratch,
                              bool exact)
{
    backward_any(be, dq_base, dq_row, dk_base, dv_base, dkv_row, dout, q_base, q_row, k_base,
                 v_base, kv_row, probs, qpos, s, sk, b, heads_local, hd, hdv, rep, causal,
                 scale_mul, NULL, scratch, exact);
}

void mp_attention_backward_oss(const mp_backend *be, real *dq_base, size_t dq_row,
                               real *dk_base, real *dv_base, size_t dkv_row, const real *dout,
                               const real *q_base, size_t q_row, const real *k_base,
                               const real *v_base, size_t kv_row, const real *probs,
                               const int *qpos, int s, int sk, int b, int heads_local, int hd,
                               int rep, const mp_attn_oss *x, real *scratch, bool exact)
{
    backward_any(be, dq_base, dq_row, dk_base, dv_base, dkv_row, dout, q_base, q_row, k_base,
                 v_base, kv_row, probs, qpos, s, sk, b, heads_local, hd, hd, rep, true, 1.0, x,
                 scratch, exact);
}

void mp_attention_backward(const mp_backend *be, real *dqkv, const real *dout,
                           const real *qkv, const real *probs, int s, int b, int heads_local,
                           int hd, real *scratch, bool exact)
{
    size_t hl = (size_t)heads_local * hd, row = 3 * hl, S = (size_t)s * b;
    be->zero(dqkv, S * row * sizeof(real));
    mp_attention_backward_kv(be, dqkv, row, dqkv + hl, dqkv + 2 * hl, row, dout, qkv, row,
                             qkv + hl, qkv + 2 * hl, row, probs, NULL, s, s, b, heads_local,
                             hd, 1, true, scratch, exact);
    if (exact)
        be->quantize(MP_REAL_KIND, dqkv, 1, S * row, S * row, MP_Q_GRAD_ATT, MP_EXACT_MAX_INT);
}

