/* t5_layers.c — T5's own layers, forward and backward side by side: ReLU,
 * and self-attention with the relative position bias added to its scores
 * (cross-attention has no bias and is attention.c's mp_attention_forward_kv;
 * the buckets are t5_bucket.c's). Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

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

/* Per sample n and head a, as attention.c's but with the bias:
 *   S = Q K^T / sqrt(hd) + bias, P = softmax(S) (causal: j <= i), O = P V.
 * Scores and the softmax are row loops in a fixed order, the two products
 * the backend's GEMMs on strided views; exact mode rounds each score after
 * the bias is added, the same function of the same bits in every run. */
void mp_t5_attention_forward(const mp_backend *be, real *out, real *probs, const real *qkv,
                             int s, int b, int heads_local, int hd, bool causal,
                             const real *table, int table_ld, const int *bucket, bool exact)
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
            for (int i = 0; i < s; i++) {
                int last = causal ? i : s - 1;
                real *pi = p + (size_t)i * s, mx = -INFINITY, sum = 0;
                for (int j = 0; j <= last; j++)
                    pi[j] = pi[j] * scale + table[(size_t)bucket[(size_t)i * s + j] * table_ld + a];
                mp_q(exact, pi, (size_t)last + 1, MP_Q_ACT);
                for (int j = 0; j <= last; j++)
                    mx = pi[j] > mx ? pi[j] : mx;
                for (int j = 0; j <= last; j++)
                    sum += pi[j] = R_EXP(pi[j] - mx);
                for (int j = 0; j <= last; j++)
                    pi[j] /= sum;
                mp_q(exact, pi, (size_t)last + 1, MP_Q_PROB);
                memset(pi + last + 1, 0, (size_t)(s - 1 - last) * sizeof(real));
            }
            be->gemm(MP_REAL_KIND, false, false, s, hd, s, 1.0, p, s, v, ld, 0.0, o, ldo);
            for (int i = 0; i < s; i++)
                mp_q(exact, o + (size_t)i * ldo, (size_t)hd, MP_Q_ACT);
        }
}

/* dV = P^T dO; dP = dO V^T; dS = P (dP - rowsum(P dP)); the bias's gradient
 * is dS itself, added at each score's bucket; dQ = dS K / sqrt(hd),
 * dK = dS^T Q / sqrt(hd). */
void mp_t5_attention_backward(const mp_backend *be, real *dqkv, const real *dout,
                              const real *qkv, const real *probs, int s, int b,
                              int heads_local, int hd, bool causal, real *dtable,
                              int table_ld, const int *bucket, real *scratch, bool exact)
{
    size_t hl = (size_t)heads_local * hd, row = 3 * hl, S = (size_t)s * b;
    int ld = (int)((size_t)b * row), ldo = (int)((size_t)b * hl);
    real scale = (real)1 / R_SQRT((real)hd);
    memset(dqkv, 0, S * row * sizeof(real));
    for (int n = 0; n < b; n++)
        for (int a = 0; a < heads_local; a++) {
            const real *p = probs + ((size_t)n * heads_local + a) * (size_t)s * s;
            const real *dO = dout + (size_t)n * hl + (size_t)a * hd;
            const real *q = qkv + (size_t)n * row + (size_t)a * hd, *k = q + hl, *v = q + 2 * hl;
            real *dq = dqkv + (size_t)n * row + (size_t)a * hd, *dk = dq + hl, *dv = dq + 2 * hl;
            real *ds = scratch;
            be->gemm(MP_REAL_KIND, true, false, s, hd, s, 1.0, p, s, dO, ldo, 1.0, dv, ld);
            be->gemm(MP_REAL_KIND, false, true, s, s, hd, 1.0, dO, ldo, v, ld, 0.0, ds, s);
            for (int i = 0; i < s; i++) {
                int last = causal ? i : s - 1;
                const real *pi = p + (size_t)i * s;
                real *di = ds + (size_t)i * s, dot = 0;
                for (int j = 0; j <= last; j++)
                    dot += pi[j] * di[j];
                for (int j = 0; j <= last; j++)
                    di[j] = pi[j] * (di[j] - dot);
                mp_q(exact, di, (size_t)last + 1, MP_Q_GRAD_ATT);
                for (int j = 0; j <= last; j++) {
                    dtable[(size_t)bucket[(size_t)i * s + j] * table_ld + a] += di[j];
                    di[j] *= scale;
                }
                mp_q(exact, di, (size_t)last + 1, MP_Q_GRAD_ATT);
                memset(di + last + 1, 0, (size_t)(s - 1 - last) * sizeof(real));
            }
            be->gemm(MP_REAL_KIND, false, false, s, hd, s, 1.0, ds, s, k, ld, 0.0, dq, ld);
            be->gemm(MP_REAL_KIND, true, false, s, hd, s, 1.0, ds, s, q, ld, 1.0, dk, ld);
        }
    mp_q(exact, dqkv, S * row, MP_Q_GRAD_ATT);
}

