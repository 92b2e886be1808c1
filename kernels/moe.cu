/* moe.cu — the MoE layer's routing and row shuffles (src/exec/moe_ops.c,
 * the CPU backend's copy, operation for operation; moe_layer.c calls them
 * through the backend table). Indices, slots and counts are floats (exact
 * below 2^24), as in the layer's state.
 *
 * Parallel over what is independent, sequential in the CPU's order where
 * the result depends on it: a row's softmax, top-k and router gradient run
 * in one thread (E is small: the experts), so do the sums over a row's k
 * slots and a dot product over h; the dispatch's and the expert order's
 * placement runs one thread per destination (EP rank, local expert) over the
 * slots in order, the row copies that follow in parallel; the scatter-add of the backward runs
 * one thread per column over the rows in order (embedding.cu's pattern). */
#include "host_grid.h"

/* ---- scores and top-k ---- */

/* One thread per row: sigmoid, or softmax with the max and the sum of exp in
 * the CPU's order, in double (moe_ops.c). */
MK_KERNEL mk_moe_scores_kernel(float *scores, const float *logits, size_t S, size_t E,
                               bool sigmoid)
{
    MK_THREADS(t)
    {
        MK_EACH(t, r, S)
        {
            const float *lg = logits + r * E;
            float *p = scores + r * E;
            if (sigmoid) {
                for (size_t e = 0; e < E; e++)
                    p[e] = (float)(1.0 / (1.0 + exp(-(double)lg[e])));
            } else {
                double mx = lg[0], sum = 0;
                for (size_t e = 1; e < E; e++)
                    mx = lg[e] > mx ? lg[e] : mx;
                for (size_t e = 0; e < E; e++)
                    sum += exp((double)lg[e] - mx);
                for (size_t e = 0; e < E; e++)
                    p[e] = (float)(exp((double)lg[e] - mx) / sum);
            }
        }
    }
}

int mpk_moe_scores(float *scores, const float *logits, size_t S, size_t E, bool sigmoid,
                   void *stream)
{
    if (E == 0)
        return S ? MPK_EINVAL : MPK_OK;
    MK_ELEMENTWISE(S, stream, mk_moe_scores_kernel, scores, logits, S, E, sigmoid);
}

/* A token's selection score of expert e: its score, plus the bias rounded to
 * float as the CPU adds it. */
MK_DEV double mk_moe_q(const float *p, const float *bias, size_t e)
{
    return bias ? (double)(float)(p[e] + bias[e]) : (double)p[e];
}

/* A row's experts taken so far, one bit each (the top-k's scratch is per
 * thread: small, so that a GPU's local memory for every resident thread is). */
MK_DEV bool mk_bit(const uint32_t *set, size_t i) { return (set[i / 32] >> (i % 32)) & 1u; }
MK_DEV void mk_set_bit(uint32_t *set, size_t i, bool on)
{
    set[i / 32] = on ? set[i / 32] | (1u << (i % 32)) : set[i / 32] & ~(1u << (i % 32));
}

/* The best of experts [lo, lo + n) not yet taken (equal: the lower index);
 * n when none (moe_pick.c's best_left). */
MK_DEV size_t mk_moe_best(const float *p, const float *bias, size_t lo, const uint32_t *taken,
                          size_t n)
{
    size_t best = n;
    double bq = 0;
    for (size_t i = 0; i < n; i++) {
        double q = mk_moe_q(p, bias, lo + i);
        if (!mk_bit(taken, lo + i) && (best == n || q > bq))
            best = i, bq = q;
    }
    return best;
}

/* One thread per row: mp_moe_pick (src/exec/moe_pick.c) with f32 group sums
 * (so a float holds each exactly), then the weights (moe_ops.c). */
MK_KERNEL mk_moe_topk_kernel(float *choice, float *wgt, const float *scores, const float *bias,
                             size_t S, size_t E, size_t k, size_t groups, size_t group_k,
                             double scale)
{
    MK_THREADS(t)
    {
        MK_EACH(t, r, S)
        {
            uint32_t taken[MPK_MOE_MAX_EXPERTS / 32], gtaken[MPK_MOE_MAX_GROUPS / 32];
            float gscore[MPK_MOE_MAX_GROUPS];
            const float *p = scores + r * E;
            for (size_t i = 0; i < (E + 31) / 32; i++)
                taken[i] = 0;
            if (groups > 1 && group_k < groups) {
                size_t per = E / groups, m = k / group_k;
                for (size_t gi = 0; gi < groups; gi++) {
                    double sum = 0;
                    for (size_t j = 0; j < m; j++) {
                        size_t b = mk_moe_best(p, bias, gi * per, taken, per);
                        mk_set_bit(taken, gi * per + b, true);
                        double q = mk_moe_q(p, bias, gi * per + b);
                        sum = j ? sum + q : q;
                        sum = (double)(float)sum;
                    }
                    for (size_t i = 0; i < per; i++)
                        mk_set_bit(taken, gi * per + i, false);
                    gscore[gi] = (float)sum;
                    mk_set_bit(gtaken, gi, false);
                }
                for (size_t j = 0; j < group_k; j++) { /* best groups; equal: the lower */
                    size_t best = groups;
                    for (size_t gi = 0; gi < groups; gi++)
                        if (!mk_bit(gtaken, gi) && (best == groups || gscore[gi] > gscore[best]))
                            best = gi;
                    mk_set_bit(gtaken, best, true);
                }
                for (size_t e = 0; e < E; e++)
                    mk_set_bit(taken, e, !mk_bit(gtaken, e / per));
            }
            float *ch = choice + r * k;
            double sum = 0;
            for (size_t j = 0; j < k; j++) {
                size_t b = mk_moe_best(p, bias, 0, taken, E);
                mk_set_bit(taken, b, true);
                ch[j] = (float)b;
                sum += p[b];
            }
            for (size_t j = 0; j < k; j++)
                wgt[r * k + j] =
                    (float)((sum > 0 ? p[(size_t)ch[j]] / sum : 1.0 / (double)k) * scale);
        }
    }
}

int mpk_moe_topk(float *choice, float *wgt, const float *scores, const float *bias, size_t S,
                 size_t E, size_t k, size_t groups, size_t group_k, double scale, void *stream)
{
    if (E > MPK_MOE_MAX_EXPERTS || groups > MPK_MOE_MAX_GROUPS || k > E ||
        (groups > 1 && group_k < groups && (E % groups || group_k == 0)))
        return MPK_EINVAL;
    MK_ELEMENTWISE(S, stream, mk_moe_topk_kernel, choice, wgt, scores, bias, S, E, k, groups,
                   group_k, scale);
}

/* ---- capacity ---- */

/* One thread per (sample, expert): its slots in global position order, then
 * slot order; each slot is one expert's, so the threads write apart. */
MK_KERNEL mk_moe_capacity_kernel(float *kept, const float *all, size_t rows, size_t b,
                                 size_t E, size_t k, size_t cp, size_t me, size_t r0, size_t S,
                                 size_t capacity)
{
    size_t pos = rows / b, seq = pos * cp, chunk = cp > 1 ? pos / 2 : pos;
    MK_THREADS(t)
    {
        MK_EACH(t, id, b * E)
        {
            size_t smp = id / E, e = id % E, load = 0;
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
                        kept[(r - r0) * k + j] = keep ? 1.0f : 0.0f;
                }
            }
        }
    }
}

MK_KERNEL mk_moe_fill_kernel(float *x, size_t n, float v)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n)
        x[i] = v;
    }
}

int mpk_moe_capacity(float *kept, const float *all, size_t rows, size_t b, size_t E, size_t k,
                     size_t cp, size_t me, size_t r0, size_t S, size_t capacity, void *stream)
{
    if (!capacity)
        MK_ELEMENTWISE(S * k, stream, mk_moe_fill_kernel, kept, S * k, 1.0f);
    if (b == 0 || cp == 0 || rows % b || (cp > 1 && (rows / b) % 2))
        return MPK_EINVAL;
    MK_ELEMENTWISE(b * E, stream, mk_moe_capacity_kernel, kept, all, rows, b, E, k, cp, me, r0,
                   S, capacity);
}

/* ---- the dispatch's order and the expert order: one block; thread q counts
 * destination q's rows, then (after the barrier) writes them from the sum of
 * the lower destinations' counts, in slot order ---- */

MK_KERNEL mk_moe_send_order_kernel(float *sorder, float *counts, float *tags, size_t tag_ld,
                                   const float *choice, const float *kept, size_t Sk, size_t El,
                                   size_t ep)
{
    MK_THREADS(t)
    {
        for (size_t q = (size_t)t; q < ep; q += blockDim.x) {
            size_t n = 0;
            for (size_t s = 0; s < Sk; s++)
                n += kept[s] && (size_t)choice[s] / El == q;
            counts[q] = (float)n;
        }
    }
    MK_SYNC();
    MK_THREADS(t)
    {
        for (size_t q = (size_t)t; q < ep; q += blockDim.x) {
            size_t i = 0;
            for (size_t p = 0; p < q; p++)
                i += (size_t)counts[p];
            for (size_t s = 0; s < Sk; s++) {
                size_t e = (size_t)choice[s];
                if (!kept[s] || e / El != q)
                    continue;
                tags[i * tag_ld] = (float)(e % El);
                sorder[i++] = (float)s;
            }
        }
    }
}

int mpk_moe_send_order(float *sorder, float *counts, float *tags, size_t tag_ld,
                       const float *choice, const float *kept, size_t Sk, size_t El, size_t ep,
                       void *stream)
{
    if (El == 0 || ep == 0)
        return MPK_EINVAL;
    int st;
    MK_LAUNCH(st, mk_moe_send_order_kernel, 1, stream, sorder, counts, tags, tag_ld, choice,
              kept, Sk, El, ep);
    return st;
}

MK_KERNEL mk_moe_expert_order_kernel(float *rorder, float *ne, const float *tags, size_t tag_ld,
                                     size_t n, size_t El)
{
    MK_THREADS(t)
    {
        for (size_t e = (size_t)t; e < El; e += blockDim.x) {
            size_t m = 0;
            for (size_t r = 0; r < n; r++)
                m += (size_t)tags[r * tag_ld] == e;
            ne[e] = (float)m;
        }
    }
    MK_SYNC();
    MK_THREADS(t)
    {
        for (size_t e = (size_t)t; e < El; e += blockDim.x) {
            size_t p = 0;
            for (size_t f = 0; f < e; f++)
                p += (size_t)ne[f];
            for (size_t r = 0; r < n; r++)
                if ((size_t)tags[r * tag_ld] == e)
                    rorder[p++] = (float)r;
        }
    }
}

int mpk_moe_expert_order(float *rorder, float *ne, const float *tags, size_t tag_ld, size_t n,
                         size_t El, void *stream)
{
    int st;
    MK_LAUNCH(st, mk_moe_expert_order_kernel, 1, stream, rorder, ne, tags, tag_ld, n, El);
    return st;
}

/* ---- row permutations ---- */

MK_KERNEL mk_moe_gather_kernel(float *dst, size_t dld, const float *src, size_t sld,
                               const float *idx, size_t div, const float *wgt, size_t n,
                               size_t h)
{
    MK_THREADS(t)
    {
        MK_EACH(t, id, n * h)
        {
            size_t i = id / h, c = id % h, s = idx ? (size_t)idx[i] : i;
            float v = src[(s / div) * sld + c];
            dst[i * dld + c] = wgt ? wgt[s] * v : v;
        }
    }
}

int mpk_moe_gather(float *dst, size_t dld, const float *src, size_t sld, const float *idx,
                   size_t div, const float *wgt, size_t n, size_t h, void *stream)
{
    if (div == 0 || h > dld || h > sld)
        return MPK_EINVAL;
    MK_ELEMENTWISE(n * h, stream, mk_moe_gather_kernel, dst, dld, src, sld, idx, div, wgt, n, h);
}

/* Distinct targets: elementwise. */
MK_KERNEL mk_moe_scatter_kernel(float *dst, size_t dld, const float *src, size_t sld,
                                const float *idx, size_t div, size_t n, size_t h)
{
    MK_THREADS(t)
    {
        MK_EACH(t, id, n * h)
        {
            size_t i = id / h, c = id % h;
            dst[((size_t)idx[i] / div) * dld + c] = src[i * sld + c];
        }
    }
}

/* Adding: thread c owns column c of every target row, rows in order. */
MK_KERNEL mk_moe_scatter_add_kernel(float *dst, size_t dld, const float *src, size_t sld,
                                    const float *idx, size_t div, size_t n, size_t h)
{
    MK_THREADS(t)
    {
        MK_EACH(t, c, h)
        {
            for (size_t i = 0; i < n; i++)
                dst[((size_t)idx[i] / div) * dld + c] += src[i * sld + c];
        }
    }
}

int mpk_moe_scatter(float *dst, size_t dld, const float *src, size_t sld, const float *idx,
                    size_t div, size_t n, size_t h, bool accumulate, void *stream)
{
    if (div == 0 || h > dld || h > sld)
        return MPK_EINVAL;
    if (n == 0)
        return MPK_OK;
    if (accumulate)
        MK_ELEMENTWISE(h, stream, mk_moe_scatter_add_kernel, dst, dld, src, sld, idx, div, n, h);
    MK_ELEMENTWISE(n * h, stream, mk_moe_scatter_kernel, dst, dld, src, sld, idx, div, n, h);
}

/* ---- the combine and its backward ---- */

MK_KERNEL mk_moe_combine_kernel(float *out, const float *y, const float *wgt, const float *kept,
                                size_t r0, size_t Sl, size_t k, size_t h)
{
    MK_THREADS(t)
    {
        MK_EACH(t, id, Sl * h)
        {
            size_t rl = id / h, c = id % h, r = r0 + rl;
            double acc = 0;
            for (size_t j = 0; j < k; j++)
                if (kept[r * k + j])
                    acc += (double)wgt[r * k + j] * (double)y[(rl * k + j) * h + c];
            out[id] = (float)acc;
        }
    }
}

int mpk_moe_combine(float *out, const float *y, const float *wgt, const float *kept, size_t r0,
                    size_t Sl, size_t k, size_t h, void *stream)
{
    MK_ELEMENTWISE(Sl * h, stream, mk_moe_combine_kernel, out, y, wgt, kept, r0, Sl, k, h);
}

MK_KERNEL mk_moe_combine_bwd_kernel(float *dwl, const float *dout, const float *y,
                                    const float *kept, size_t r0, size_t Sl, size_t k, size_t h)
{
    MK_THREADS(t)
    {
        MK_EACH(t, id, Sl * k)
        {
            size_t rl = id / k, j = id % k, r = r0 + rl;
            double acc = 0;
            if (kept[r * k + j])
                for (size_t c = 0; c < h; c++)
                    acc += (double)dout[rl * h + c] * (double)y[(rl * k + j) * h + c];
            dwl[id] = (float)acc;
        }
    }
}

int mpk_moe_combine_backward(float *dwl, const float *dout, const float *y, const float *kept,
                             size_t r0, size_t Sl, size_t k, size_t h, void *stream)
{
    MK_ELEMENTWISE(Sl * k, stream, mk_moe_combine_bwd_kernel, dwl, dout, y, kept, r0, Sl, k, h);
}

/* ---- the expert bias's counts and update ---- */

/* Thread e counts expert e's kept slots (integers: exact in any order). */
MK_KERNEL mk_moe_count_kernel(float *load, const float *choice, const float *kept, size_t Sk,
                              size_t E)
{
    MK_THREADS(t)
    {
        MK_EACH(t, e, E)
        {
            for (size_t s = 0; s < Sk; s++)
                if (kept[s] && (size_t)choice[s] == e)
                    load[e] += 1;
        }
    }
}

int mpk_moe_count(float *load, const float *choice, const float *kept, size_t Sk, size_t E,
                  void *stream)
{
    MK_ELEMENTWISE(E, stream, mk_moe_count_kernel, load, choice, kept, Sk, E);
}

/* Every thread adds the loads in order (the same total in each), then moves
 * its expert's bias. */
MK_KERNEL mk_moe_bias_kernel(float *bias, const float *load, size_t E, double rate)
{
    MK_THREADS(t)
    {
        MK_EACH(t, e, E)
        {
            double total = 0;
            for (size_t i = 0; i < E; i++)
                total += (double)load[i];
            double off = total / (double)E - (double)load[e];
            float step = (float)(off > 0 ? rate : off < 0 ? -rate : 0.0);
            bias[e] = bias[e] + step;
        }
    }
}

int mpk_moe_bias_update(float *bias, const float *load, size_t E, double rate, void *stream)
{
    MK_ELEMENTWISE(E, stream, mk_moe_bias_kernel, bias, load, E, rate);
}

/* ---- the router's backward: one thread per row ---- */

MK_KERNEL mk_moe_weights_bwd_kernel(float *dl, const float *scores, const float *choice,
                                    const float *wgt, const float *dwf, size_t S, size_t E,
                                    size_t k, double scale)
{
    MK_THREADS(t)
    {
        MK_EACH(t, r, S)
        {
            const float *p = scores + r * E;
            float *d = dl + r * E;
            double sum = 0, dot = 0;
            for (size_t j = 0; j < k; j++) {
                sum += p[(size_t)choice[r * k + j]];
                dot += (double)wgt[r * k + j] * (double)dwf[r * k + j];
            }
            for (size_t e = 0; e < E; e++)
                d[e] = 0;
            for (size_t j = 0; j < k && sum > 0; j++)
                d[(size_t)choice[r * k + j]] =
                    (float)((scale * (double)dwf[r * k + j] - dot) / sum);
        }
    }
}

int mpk_moe_weights_backward(float *dl, const float *scores, const float *choice,
                             const float *wgt, const float *dwf, size_t S, size_t E, size_t k,
                             double scale, void *stream)
{
    MK_ELEMENTWISE(S, stream, mk_moe_weights_bwd_kernel, dl, scores, choice, wgt, dwf, S, E, k,
                   scale);
}

MK_KERNEL mk_moe_scores_bwd_kernel(float *dl, const float *scores, size_t S, size_t E,
                                   bool sigmoid)
{
    MK_THREADS(t)
    {
        MK_EACH(t, r, S)
        {
            const float *p = scores + r * E;
            float *d = dl + r * E;
            if (sigmoid) {
                for (size_t e = 0; e < E; e++)
                    d[e] = (float)((double)d[e] * (double)p[e] * (1.0 - (double)p[e]));
            } else {
                double s = 0;
                for (size_t e = 0; e < E; e++)
                    s += (double)p[e] * (double)d[e];
                for (size_t e = 0; e < E; e++)
                    d[e] = (float)((double)p[e] * ((double)d[e] - s));
            }
        }
    }
}

int mpk_moe_scores_backward(float *dl, const float *scores, size_t S, size_t E, bool sigmoid,
                            void *stream)
{
    MK_ELEMENTWISE(S, stream, mk_moe_scores_bwd_kernel, dl, scores, S, E, sigmoid);
}
