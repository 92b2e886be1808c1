/* cross_entropy.cu — the vocabulary-parallel cross-entropy (model.c), in the
 * pieces Megatron-LM computes between its TP all-reduces: each rank holds
 * logits [S, Vl] of its vocabulary slice [lo, lo + Vl); the caller reduces
 * the row maxima (MAX), then the sums of exp and the target logits (SUM)
 * over TP between these calls. BERT's two-way head is the same computation
 * with Vl = 2, lo = 0 and the labels as targets. */
#include "host_grid.h"

MK_KERNEL mk_ce_max_kernel(float *mx, const float *logits, size_t S, size_t Vl)
{
    MK_SHARED float red[MPK_BLOCK];
    for (size_t r = blockIdx.x; r < S; r += gridDim.x) {
        MK_THREADS(t)
        {
            float m = -INFINITY;
            for (size_t j = (size_t)t; j < Vl; j += MPK_BLOCK)
                m = logits[r * Vl + j] > m ? logits[r * Vl + j] : m;
            red[t] = m;
        }
        MK_SYNC();
        mk_block_reduce(red, &mx[r], true);
    }
}

int mpk_ce_max(float *mx, const float *logits, int S, int Vl, void *stream)
{
    if (S < 0 || Vl < 1)
        return MPK_EINVAL;
    if (S == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_ce_max_kernel, mk_grid_for((size_t)S * MPK_BLOCK), stream, mx, logits,
              (size_t)S, (size_t)Vl);
    return st;
}

/* The exps are on the probability grid in exact mode, so their sum is exact
 * in any order; it still runs in the CPU's order there, like every exact-mode
 * row sum. */
MK_KERNEL mk_ce_exp_sum_kernel(float *logits, float *sum, float *tl, const float *mx,
                               const int32_t *targets, size_t S, size_t Vl, int64_t lo,
                               bool exact, mk_grid gp)
{
    MK_SHARED float red[MPK_BLOCK];
    for (size_t r = blockIdx.x; r < S; r += gridDim.x) {
        float *lr = logits + r * Vl;
        MK_THREADS(t)
        {
            if (t == 0) {
                int64_t tgt = targets[r];
                tl[r] = tgt >= lo && tgt < lo + (int64_t)Vl ? lr[tgt - lo] : 0;
            }
        }
        MK_SYNC(); /* the target's logit is read before the exps replace it */
        MK_THREADS(t)
        {
            float m = mx[r], a = 0;
            for (size_t j = (size_t)t; j < Vl; j += MPK_BLOCK) {
                float e = mk_exp(lr[j] - m);
                lr[j] = exact ? mk_round_to(e, gp) : e;
                a += lr[j];
            }
            red[t] = a;
        }
        MK_SYNC();
        if (exact) {
            MK_THREADS(t)
            {
                if (t == 0) {
                    float a = 0;
                    for (size_t j = 0; j < Vl; j++)
                        a += lr[j];
                    sum[r] = a;
                }
            }
        } else {
            mk_block_reduce(red, &sum[r], false);
        }
        MK_SYNC();
    }
}

int mpk_ce_exp_sum(float *logits, float *sum, float *tl, const float *mx, const int32_t *targets,
                   int S, int Vl, int64_t lo, bool exact, void *stream)
{
    if (S < 0 || Vl < 1)
        return MPK_EINVAL;
    if (S == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_ce_exp_sum_kernel, mk_grid_for((size_t)S * MPK_BLOCK), stream, logits, sum,
              tl, mx, targets, (size_t)S, (size_t)Vl, lo, exact,
              mk_grid_of(MP_Q_PROB, MP_EXACT_MAX_INT));
    return st;
}

MK_KERNEL mk_ce_loss_kernel(float *loss, float *logits, const float *sum, const float *mx,
                            const float *tl, const int32_t *targets, size_t S, size_t Vl,
                            bool exact, mk_grid gl, mk_grid gp)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, S * Vl)
        {
            size_t r = i / Vl;
            if (i % Vl == 0) {
                float l = targets[r] < 0 ? 0 : mk_log(sum[r]) + mx[r] - tl[r];
                loss[r] = exact ? mk_round_to(l, gl) : l;
            }
            float p = logits[i] / sum[r];
            logits[i] = exact ? mk_round_to(p, gp) : p;
        }
    }
}

int mpk_ce_loss(float *loss, float *logits, const float *sum, const float *mx, const float *tl,
                const int32_t *targets, int S, int Vl, bool exact, void *stream)
{
    if (S < 0 || Vl < 1)
        return MPK_EINVAL;
    MK_ELEMENTWISE((size_t)S * (size_t)Vl, stream, mk_ce_loss_kernel, loss, logits, sum, mx, tl,
                   targets, (size_t)S, (size_t)Vl, exact,
                   mk_grid_of(MP_Q_LOSS, MP_Q_LOSS_MAX_INT),
                   mk_grid_of(MP_Q_PROB, MP_EXACT_MAX_INT));
}

MK_KERNEL mk_ce_bwd_kernel(float *logits, const int32_t *targets, size_t S, size_t Vl, int64_t lo,
                           float grad_scale, bool zero_ignored)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, S * Vl)
        {
            int64_t tgt = targets[i / Vl];
            if (zero_ignored && tgt < 0) {
                logits[i] = 0;
                continue;
            }
            float d = logits[i];
            if (tgt >= 0 && tgt - lo == (int64_t)(i % Vl))
                d -= 1;
            logits[i] = d * grad_scale;
        }
    }
}

int mpk_ce_backward(float *logits, const int32_t *targets, int S, int Vl, int64_t lo,
                    float grad_scale, bool zero_ignored, void *stream)
{
    if (S < 0 || Vl < 1)
        return MPK_EINVAL;
    MK_ELEMENTWISE((size_t)S * (size_t)Vl, stream, mk_ce_bwd_kernel, logits, targets, (size_t)S,
                   (size_t)Vl, lo, grad_scale, zero_ignored);
}
