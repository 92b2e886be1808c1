/* t5_layers.c — T5's own layers, forward and backward side by side: ReLU,
 * and self-attention with the relative position bias added to its scores
 * (cross-attention has no bias and is attention.c's mp_attention_forward_kv;
 * the buckets are t5_bucket.c's). The row loops here are the CPU backend's
 * (backend.h's relu_*, rel_bias_*); the attention calls the backend alone.
 * Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "exec/backend.h"
#include "exec/quant.h"
#include "exec/t5.h"

#include "exec/real.h"

void mp_relu_forward(real *out, const real *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = in[i] > 0 ? in[i] : 0;
}

void mp_relu_backward(real *din, const real *dout, const real *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        din[i] = in[i] > 0 ? dout[i] : 0;
}

/* The relative position bias of one head's scores (backend.h's rel_bias_add). */
void mp_t5_rel_bias_add(real *p, int s, int sk, bool causal, real scale, const real *table,
                        int table_ld, int head, const int32_t *bucket)
{
    for (int i = 0; i < s; i++) {
        int last = causal ? i : sk - 1;
        real *pi = p + (size_t)i * sk;
        const int32_t *bi = bucket + (size_t)i * sk;
        for (int j = 0; j <= last; j++)
            pi[j] = pi[j] * scale + table[(size_t)bi[j] * table_ld + head];
    }
}

/* Its backward (rel_bias_grad): the bias's gradient is dS itself, added at
 * each score's bucket, row after row; then dS times the scale. */
void mp_t5_rel_bias_grad(real *ds, real *dtable, int s, int sk, bool causal, real scale,
                         int table_ld, int head, const int32_t *bucket, bool exact)
{
    for (int i = 0; i < s; i++) {
        int last = causal ? i : sk - 1;
        real *di = ds + (size_t)i * sk;
        const int32_t *bi = bucket + (size_t)i * sk;
        for (int j = 0; j <= last; j++) {
            dtable[(size_t)bi[j] * table_ld + head] += di[j];
            di[j] *= scale;
        }
        mp_q(exact, di, (size_t)last + 1, MP_Q_GRAD_ATT);
    }
}

/* Per sample n and head a, as attention.c's but with the bias:
 *   S = Q K^T / sqrt(hd) + bias, P = softmax(S) (causal: j <= i), O = P V.
 * Every step is the backend's: the two products GEMMs on strided views, the
 * bias rel_bias_add, the softmax attn_softmax with scale 1 (it rounds each
 * biased score in exact mode, then the probabilities); the same function of
 * the same bits in every run. */
void mp_t5_attention_forward(const mp_backend *be, real *out, real *probs, const real *qkv,
                             int s, int b, int heads_local, int hd, bool causal,
                             const real *table, int table_ld, const int32_t *bucket, bool exact)
{
    size_t hl = (size_t)heads_local * hd, row = 3 * hl;
    int ld = (int)((size_t)b * row), ldo = (int)((size_t)b * hl);
    real scale = (real)1 / R_SQRT((real)hd);
    for (int n = 0; n < b; n++)
        for (int a = 0; a < heads_local; a++) {
            real *p = probs + ((size_t)n * heads_local + a) * (size_t)s * s;
            const real *q = qkv + (size_t)n * row + (size_t)a * hd, *k = q + hl, *v = q + 2 * hl;
            real *o = out + (size_t)n * hl + (size_t)a * hd;
            be->gemm(MP_REAL_KIND, false, true, s, s, hd, 1.0, q, ld, k, ld, 0.0, p, s);
            be->rel_bias_add(MP_REAL_KIND, p, s, s, causal, (double)scale, table, table_ld, a,
                             bucket);
            be->attn_softmax(MP_REAL_KIND, p, s, s, NULL, causal, 1.0, exact);
            be->gemm(MP_REAL_KIND, false, false, s, hd, s, 1.0, p, s, v, ld, 0.0, o, ldo);
            if (exact)
                be->quantize(MP_REAL_KIND, o, (size_t)s, (size_t)hd, (size_t)ldo, MP_Q_ACT,
                             MP_EXACT_MAX_INT);
        }
}

/* dV = P^T dO; dP = dO V^T; dS = P (dP - rowsum(P dP)) (attn_softmax_backward
 * with scale 1, rounded); the bias's gradient is dS itself, added at each
 * score's bucket, and dS times 1/sqrt(hd) rounded again (rel_bias_grad);
 * dQ = dS K, dK = dS^T Q. */
void mp_t5_attention_backward(const mp_backend *be, real *dqkv, const real *dout,
                              const real *qkv, const real *probs, int s, int b,
                              int heads_local, int hd, bool causal, real *dtable,
                              int table_ld, const int32_t *bucket, real *scratch, bool exact)
{
    size_t hl = (size_t)heads_local * hd, row = 3 * hl, S = (size_t)s * b;
    int ld = (int)((size_t)b * row), ldo = (int)((size_t)b * hl);
    real scale = (real)1 / R_SQRT((real)hd);
    be->zero(dqkv, S * row * sizeof(real));
    for (int n = 0; n < b; n++)
        for (int a = 0; a < heads_local; a++) {
            const real *p = probs + ((size_t)n * heads_local + a) * (size_t)s * s;
            const real *dO = dout + (size_t)n * hl + (size_t)a * hd;
            const real *q = qkv + (size_t)n * row + (size_t)a * hd, *k = q + hl, *v = q + 2 * hl;
            real *dq = dqkv + (size_t)n * row + (size_t)a * hd, *dk = dq + hl, *dv = dq + 2 * hl;
            real *ds = scratch;
            be->gemm(MP_REAL_KIND, true, false, s, hd, s, 1.0, p, s, dO, ldo, 1.0, dv, ld);
            be->gemm(MP_REAL_KIND, false, true, s, s, hd, 1.0, dO, ldo, v, ld, 0.0, ds, s);
            be->attn_softmax_backward(MP_REAL_KIND, ds, p, s, s, NULL, causal, 1.0, exact);
            be->rel_bias_grad(MP_REAL_KIND, ds, dtable, s, s, causal, (double)scale,
                              MP_T5_BUCKETS, table_ld, a, bucket, exact);
            be->gemm(MP_REAL_KIND, false, false, s, hd, s, 1.0, ds, s, k, ld, 0.0, dq, ld);
            be->gemm(MP_REAL_KIND, true, false, s, hd, s, 1.0, ds, s, q, ld, 1.0, dk, ld);
        }
    if (exact)
        be->quantize(MP_REAL_KIND, dqkv, 1, S * row, S * row, MP_Q_GRAD_ATT, MP_EXACT_MAX_INT);
}
