/* moe_ops.c — the MoE layer's routing and row shuffles on the host: the CPU
 * backend's ops of backend.h's mixture-of-experts section (moe_layer.c
 * calls them through the table; kernels/moe.cu is the CUDA backend's copy,
 * held to these bit for bit by tests/kernels). Expert indices, slots, row
 * numbers and counts are reals (exact below 2^24). Compiled for float and
 * double. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "exec/kernels.h"
#include "exec/moe.h"
#include "exec/real.h"

void mp_moe_scores(real *scores, const real *logits, size_t S, size_t E, bool sigmoid)
{
    for (size_t r = 0; r < S; r++) {
        const real *lg = logits + r * E;
        real *p = scores + r * E;
        if (sigmoid) {
            for (size_t e = 0; e < E; e++)
                p[e] = (real)(1.0 / (1.0 + exp(-(double)lg[e])));
        } else {
            double mx = lg[0], sum = 0;
            for (size_t e = 1; e < E; e++)
                mx = lg[e] > mx ? lg[e] : mx;
            for (size_t e = 0; e < E; e++)
                sum += exp((double)lg[e] - mx);
            for (size_t e = 0; e < E; e++)
                p[e] = (real)(exp((double)lg[e] - mx) / sum);
        }
    }
}

void mp_moe_topk(real *choice, real *wgt, const real *scores, const real *bias, size_t S,
                 size_t E, size_t k, size_t groups, size_t group_k, double scale)
{
    unsigned char taken[MP_MOE_MAX_EXPERTS + MP_MOE_MAX_GROUPS];
    double q[MP_MOE_MAX_EXPERTS + MP_MOE_MAX_GROUPS];
    size_t pick[MP_MOE_MAX_EXPERTS];
    for (size_t r = 0; r < S; r++) {
        const real *p = scores + r * E;
        /* the expert bias joins the scores for the choice only, in their precision */
        for (size_t e = 0; e < E; e++)
            q[e] = bias ? (double)(real)(p[e] + bias[e]) : (double)p[e];
        mp_moe_pick(q, E, k, groups, group_k, sizeof(real) == sizeof(float), pick, taken, q + E);
        double sum = 0;
        for (size_t j = 0; j < k; j++) {
            choice[r * k + j] = (real)pick[j];
            sum += p[pick[j]];
        }
        /* the unbiased scores renormalised over the chosen, times the scale */
        for (size_t j = 0; j < k; j++)
            wgt[r * k + j] = (real)((sum > 0 ? p[pick[j]] / sum : 1.0 / (double)k) * scale);
    }
}

void mp_moe_capacity(real *kept, const real *all, size_t rows, size_t b, size_t E, size_t k,
                     size_t cp, size_t me, size_t r0, size_t S, size_t capacity)
{
    /* expert e of sample smp keeps its first `capacity` slots, walked in
     * global position order, then slot order; with CP the positions of CP
     * rank c are its chunks c and 2cp-1-c of 2cp (mp_dims_global_pos) */
    if (!capacity) { /* no limit */
        for (size_t s = 0; s < S * k; s++)
            kept[s] = 1;
        return;
    }
    size_t pos = rows / b, seq = pos * cp, chunk = cp > 1 ? pos / 2 : pos;
    for (size_t smp = 0; smp < b; smp++)
        for (size_t e = 0; e < E; e++) {
            size_t load = 0;
            for (size_t gp = 0; gp < seq; gp++) {
                size_t part = gp / chunk, c = part < cp ? part : 2 * cp - 1 - part;
                size_t i = cp > 1 ? (part < cp ? 0 : chunk) + gp % chunk : gp;
                size_t r = i * b + smp;
                for (size_t j = 0; j < k; j++) {
                    if ((size_t)all[(c * rows + r) * k + j] != e)
                        continue;
                    bool keep = load < capacity;
                    load += keep;
                    if (c == me && r >= r0 && r < r0 + S)
                        kept[(r - r0) * k + j] = keep ? 1 : 0;
                }
            }
        }
}

void mp_moe_send_order(real *sorder, real *counts, real *tags, size_t tag_ld,
                       const real *choice, const real *kept, size_t Sk, size_t El, size_t ep)
{
    size_t i = 0;
    for (size_t q = 0; q < ep; q++) {
        size_t n = 0;
        for (size_t s = 0; s < Sk; s++) {
            size_t e = (size_t)choice[s];
            if (!kept[s] || e / El != q)
                continue;
            tags[i * tag_ld] = (real)(e % El);
            sorder[i++] = (real)s;
            n++;
        }
        counts[q] = (real)n;
    }
}

void mp_moe_expert_order(real *rorder, real *ne, const real *tags, size_t tag_ld, size_t n,
                         size_t El)
{
    size_t p = 0;
    for (size_t e = 0; e < El; e++) {
        size_t m = 0;
        for (size_t r = 0; r < n; r++)
            if ((size_t)tags[r * tag_ld] == e) {
                rorder[p++] = (real)r;
                m++;
            }
        ne[e] = (real)m;
    }
}

void mp_moe_gather(real *dst, size_t dld, const real *src, size_t sld, const real *idx,
                   size_t div, const real *wgt, size_t n, size_t h)
{
    for (size_t i = 0; i < n; i++) {
        size_t s = idx ? (size_t)idx[i] : i;
        const real *from = src + (s / div) * sld;
        real *to = dst + i * dld;
        if (wgt)
            for (size_t c = 0; c < h; c++)
                to[c] = wgt[s] * from[c];
        else
            for (size_t c = 0; c < h; c++)
                to[c] = from[c];
    }
}

void mp_moe_scatter(real *dst, size_t dld, const real *src, size_t sld, const real *idx,
                    size_t div, size_t n, size_t h, bool accumulate)
{
    for (size_t i = 0; i < n; i++) {
        real *to = dst + ((size_t)idx[i] / div) * dld;
        const real *from = src + i * sld;
        if (accumulate)
            for (size_t c = 0; c < h; c++)
                to[c] += from[c];
        else
            for (size_t c = 0; c < h; c++)
                to[c] = from[c];
    }
}

void mp_moe_combine(real *out, const real *y, const real *wgt, const real *kept, size_t r0,
                    size_t Sl, size_t k, size_t h)
{
    for (size_t rl = 0; rl < Sl; rl++) {
        size_t r = r0 + rl;
        for (size_t c = 0; c < h; c++) {
            double acc = 0;
            for (size_t j = 0; j < k; j++)
                if (kept[r * k + j])
                    acc += (double)wgt[r * k + j] * (double)y[(rl * k + j) * h + c];
            out[rl * h + c] = (real)acc;
        }
    }
}

void mp_moe_combine_backward(real *dwl, const real *dout, const real *y, const real *kept,
                             size_t r0, size_t Sl, size_t k, size_t h)
{
    for (size_t rl = 0; rl < Sl; rl++) {
        size_t r = r0 + rl;
        for (size_t j = 0; j < k; j++) {
            double acc = 0;
            if (kept[r * k + j])
                for (size_t c = 0; c < h; c++)
                    acc += (double)dout[rl * h + c] * (double)y[(rl * k + j) * h + c];
            dwl[rl * k + j] = (real)acc;
        }
    }
}

void mp_moe_count(real *load, const real *choice, const real *kept, size_t Sk)
{
    for (size_t s = 0; s < Sk; s++)
        if (kept[s])
            load[(size_t)choice[s]] += 1;
}

void mp_moe_weights_backward(real *dl, const real *scores, const real *choice, const real *wgt,
                             const real *dwf, size_t S, size_t E, size_t k, double scale)
{
    /* w_j = c p_j / sum_i p_i over the chosen (c: the route scale):
     * dp_j = (c dw_j - sum_i w_i dw_i) / sum */
    for (size_t r = 0; r < S; r++) {
        const real *p = scores + r * E;
        real *d = dl + r * E;
        double sum = 0, dot = 0;
        for (size_t j = 0; j < k; j++) {
            sum += p[(size_t)choice[r * k + j]];
            dot += (double)wgt[r * k + j] * (double)dwf[r * k + j];
        }
        for (size_t e = 0; e < E; e++)
            d[e] = 0;
        for (size_t j = 0; j < k && sum > 0; j++)
            d[(size_t)choice[r * k + j]] = (real)((scale * (double)dwf[r * k + j] - dot) / sum);
    }
}

void mp_moe_scores_backward(real *dl, const real *scores, size_t S, size_t E, bool sigmoid)
{
    for (size_t r = 0; r < S; r++) {
        const real *p = scores + r * E;
        real *d = dl + r * E;
        if (sigmoid) {
            for (size_t e = 0; e < E; e++)
                d[e] = (real)((double)d[e] * (double)p[e] * (1.0 - (double)p[e]));
        } else {
            double s = 0;
            for (size_t e = 0; e < E; e++)
                s += (double)p[e] * (double)d[e];
            for (size_t e = 0; e < E; e++)
                d[e] = (real)((double)p[e] * ((double)d[e] - s));
        }
    }
}

void mp_moe_bias_update(real *bias, const real *load, size_t E, double rate)
{
    double total = 0;
    for (size_t e = 0; e < E; e++)
        total += (double)load[e];
    double mean = total / (double)E; /* integers: the sign of mean - load is exact */
    for (size_t e = 0; e < E; e++) {
        double off = mean - (double)load[e];
        real step = (real)(off > 0 ? rate : off < 0 ? -rate : 0.0);
        bias[e] = bias[e] + step;
    }
}
