/* softmax.cu — attention's softmax and its backward (attention.c's row
 * loops; Q K^T, P V and their gradients are the backend's GEMMs). One block
 * per query row. The maximum is the same in any order; the row sums are
 * not, so exact mode adds them as the CPU does, one thread in key order. */
#include "softmax_row.h"

/* The last key query row i sees. */
MK_DEV size_t mk_last_key(const int32_t *qpos, size_t i, size_t sk, bool causal)
{
    size_t g = !causal ? sk - 1 : qpos ? (size_t)qpos[i] : i;
    return g < sk ? g : sk - 1;
}

MK_KERNEL mk_softmax_fwd_kernel(float *p, size_t mats, size_t s, size_t sk, const int32_t *qpos,
                                bool causal, float scale, bool exact, mk_grid ga, mk_grid gp)
{
    MK_SHARED float red[MPK_BLOCK];
    MK_SHARED float stat[2]; /* max, sum */
    for (size_t row = blockIdx.x; row < mats * s; row += gridDim.x) {
        float *pi = p + row * sk;
        size_t n = mk_last_key(qpos, row % s, sk, causal) + 1;
        MK_THREADS(t) { red[t] = mk_row_scale_max(pi, 0, n, t, scale, exact, ga); }
        MK_SYNC();
        mk_block_reduce(red, &stat[0], true);
        MK_THREADS(t) { red[t] = mk_row_exp_sum(pi, 0, n, t, stat[0]); }
        MK_SYNC();
        if (exact) {
            MK_THREADS(t)
            {
                if (t == 0) {
                    float sum = 0;
                    for (size_t j = 0; j < n; j++)
                        sum += pi[j];
                    stat[1] = sum;
                }
            }
        } else {
            mk_block_reduce(red, &stat[1], false);
        }
        MK_SYNC();
        MK_THREADS(t)
        {
            float sum = stat[1];
            for (size_t j = (size_t)t; j < sk; j += MPK_BLOCK) {
                float v = j < n ? pi[j] / sum : 0;
                pi[j] = exact ? mk_round_to(v, gp) : v;
            }
        }
        MK_SYNC();
    }
}

int mpk_softmax_forward(float *p, int mats, int s, int sk, const int32_t *qpos, bool causal,
                        float scale, bool exact, void *stream)
{
    if (mats < 0 || s < 0 || sk < 1)
        return MPK_EINVAL;
    size_t rows = (size_t)mats * (size_t)s;
    if (rows == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_softmax_fwd_kernel, mk_grid_for(rows * MPK_BLOCK), stream, p, (size_t)mats,
              (size_t)s, (size_t)sk, qpos, causal, scale, exact,
              mk_grid_of(MP_Q_ACT, MP_EXACT_MAX_INT), mk_grid_of(MP_Q_PROB, MP_EXACT_MAX_INT));
    return st;
}

MK_KERNEL mk_softmax_bwd_kernel(float *ds, const float *p, size_t mats, size_t s, size_t sk,
                                const int32_t *qpos, bool causal, float scale, bool exact,
                                mk_grid gg)
{
    MK_SHARED float red[MPK_BLOCK];
    MK_SHARED float stat[1]; /* sum_j P dP */
    for (size_t row = blockIdx.x; row < mats * s; row += gridDim.x) {
        const float *pi = p + row * sk;
        float *di = ds + row * sk;
        size_t n = mk_last_key(qpos, row % s, sk, causal) + 1;
        if (exact) {
            MK_THREADS(t)
            {
                if (t == 0) {
                    float dot = 0;
                    for (size_t j = 0; j < n; j++)
                        dot += pi[j] * di[j];
                    stat[0] = dot;
                }
            }
        } else {
            MK_THREADS(t)
            {
                float a = 0;
                for (size_t j = (size_t)t; j < n; j += MPK_BLOCK)
                    a += pi[j] * di[j];
                red[t] = a;
            }
            MK_SYNC();
            mk_block_reduce(red, &stat[0], false);
        }
        MK_SYNC();
        MK_THREADS(t)
        {
            float dot = stat[0];
            for (size_t j = (size_t)t; j < sk; j += MPK_BLOCK) {
                float v = j < n ? pi[j] * (di[j] - dot) * scale : 0;
                di[j] = exact ? mk_round_to(v, gg) : v;
            }
        }
        MK_SYNC();
    }
}

int mpk_softmax_backward(float *ds, const float *p, int mats, int s, int sk, const int32_t *qpos,
                         bool causal, float scale, bool exact, void *stream)
{
    if (mats < 0 || s < 0 || sk < 1)
        return MPK_EINVAL;
    size_t rows = (size_t)mats * (size_t)s;
    if (rows == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_softmax_bwd_kernel, mk_grid_for(rows * MPK_BLOCK), stream, ds, p,
              (size_t)mats, (size_t)s, (size_t)sk, qpos, causal, scale, exact,
              mk_grid_of(MP_Q_GRAD_ATT, MP_EXACT_MAX_INT));
    return st;
}
