/* attention.c — causal self-attention over the heads this rank holds.
 * A head is never split across ranks, so each head's scores, softmax and
 * weighted sums are computed by the same code in the same order in the
 * partitioned run and in the reference. Compiled for float and double. */
#ifndef MP_REAL_BITS
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"

#define MP_REAL_BITS 32
#include "exec/attention.c"
#undef MP_REAL_BITS
#define MP_REAL_BITS 64
#include "exec/attention.c"
#undef MP_REAL_BITS
#else
#include "exec/real.h"

/* Forward, per sample n and head a (hd = head dim, scale = 1/sqrt(hd)):
 *   S[i,j] = scale * q_i . k_j  for j <= i        [s, s] (causal)
 *   P[i,:] = softmax(S[i, :i+1])                   probs[n, a, i, j]
 *   out_i  = sum_j P[i,j] v_j                      out[i*b + n, a*hd ..] */
void RN(mp_attention_forward)(real *out, real *probs, const real *qkv, int s, int b,
                              int heads_local, int hd, bool exact)
{
    size_t hl = (size_t)heads_local * hd, row = 3 * hl;
    real scale = (real)1 / R_SQRT((real)hd);
    for (int n = 0; n < b; n++)
        for (int a = 0; a < heads_local; a++) {
            real *p = probs + ((size_t)n * heads_local + a) * (size_t)s * s;
            for (int i = 0; i < s; i++) {
                const real *q = qkv + ((size_t)i * b + n) * row + (size_t)a * hd;
                real *pi = p + (size_t)i * s;
                real mx = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const real *k = qkv + ((size_t)j * b + n) * row + hl + (size_t)a * hd;
                    real dot = 0;
                    for (int c = 0; c < hd; c++)
                        dot += q[c] * k[c];
                    pi[j] = dot * scale;
                }
                RN(mp_q)(exact, pi, (size_t)i + 1, MP_Q_ACT);
                for (int j = 0; j <= i; j++)
                    mx = pi[j] > mx ? pi[j] : mx;
                real sum = 0;
                for (int j = 0; j <= i; j++) {
                    pi[j] = R_EXP(pi[j] - mx);
                    sum += pi[j];
                }
                for (int j = 0; j <= i; j++)
                    pi[j] /= sum;
                RN(mp_q)(exact, pi, (size_t)i + 1, MP_Q_PROB);
                for (int j = i + 1; j < s; j++)
                    pi[j] = 0;
                real *o = out + ((size_t)i * b + n) * hl + (size_t)a * hd;
                for (int c = 0; c < hd; c++)
                    o[c] = 0;
                for (int j = 0; j <= i; j++) {
                    const real *v = qkv + ((size_t)j * b + n) * row + 2 * hl + (size_t)a * hd;
                    for (int c = 0; c < hd; c++)
                        o[c] += pi[j] * v[c];
                }
                RN(mp_q)(exact, o, (size_t)hd, MP_Q_ACT);
            }
        }
}

/* Backward, per sample and head, with dO = dout:
 *   dv_j += sum_i P[i,j] dO_i
 *   dP[i,j] = dO_i . v_j
 *   dS[i,j] = P[i,j] (dP[i,j] - sum_j' P[i,j'] dP[i,j'])
 *   dq_i = scale sum_j dS[i,j] k_j,   dk_j += scale sum_i dS[i,j] q_i */
void RN(mp_attention_backward)(real *dqkv, const real *dout, const real *qkv, const real *probs,
                               int s, int b, int heads_local, int hd, real *scratch, bool exact)
{
    size_t hl = (size_t)heads_local * hd, row = 3 * hl;
    real scale = (real)1 / R_SQRT((real)hd);
    size_t S = (size_t)s * b;
    for (size_t r = 0; r < S; r++)
        memset(dqkv + r * row, 0, row * sizeof(real));
    for (int n = 0; n < b; n++)
        for (int a = 0; a < heads_local; a++) {
            const real *p = probs + ((size_t)n * heads_local + a) * (size_t)s * s;
            for (int i = 0; i < s; i++) {
                const real *pi = p + (size_t)i * s;
                const real *dO = dout + ((size_t)i * b + n) * hl + (size_t)a * hd;
                const real *q = qkv + ((size_t)i * b + n) * row + (size_t)a * hd;
                real *dq = dqkv + ((size_t)i * b + n) * row + (size_t)a * hd;
                real *ds = scratch, dot_pdp = 0;
                for (int j = 0; j <= i; j++) {
                    const real *v = qkv + ((size_t)j * b + n) * row + 2 * hl + (size_t)a * hd;
                    real *dv = dqkv + ((size_t)j * b + n) * row + 2 * hl + (size_t)a * hd;
                    real dp = 0;
                    for (int c = 0; c < hd; c++) {
                        dp += dO[c] * v[c];
                        dv[c] += pi[j] * dO[c];
                    }
                    ds[j] = dp;
                    dot_pdp += pi[j] * dp;
                }
                for (int j = 0; j <= i; j++)
                    ds[j] = pi[j] * (ds[j] - dot_pdp) * scale;
                RN(mp_q)(exact, ds, (size_t)i + 1, MP_Q_GRAD_ATT);
                for (int j = 0; j <= i; j++) {
                    const real *k = qkv + ((size_t)j * b + n) * row + hl + (size_t)a * hd;
                    real *dk = dqkv + ((size_t)j * b + n) * row + hl + (size_t)a * hd;
                    for (int c = 0; c < hd; c++) {
                        dq[c] += ds[j] * k[c];
                        dk[c] += ds[j] * q[c];
                    }
                }
            }
        }
    RN(mp_q)(exact, dqkv, S * row, MP_Q_GRAD_ATT);
}

#endif
