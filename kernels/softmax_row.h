/* softmax_row.h — one thread's share of a softmax row, shared by the
 * attention softmax (softmax.cu) and GPT-OSS's windowed sink softmax
 * (oss.cu): keys lo, lo + MPK_BLOCK, ... below end, thread t's. */
#ifndef MP_KERNELS_SOFTMAX_ROW_H
#define MP_KERNELS_SOFTMAX_ROW_H

#include "host_grid.h"

/* The keys' scores scaled (exact: rounded onto ga) in place; their maximum. */
MK_DEV float mk_row_scale_max(float *pi, size_t lo, size_t end, int t, float scale, bool exact,
                              mk_grid ga)
{
    float m = -INFINITY;
    for (size_t j = lo + (size_t)t; j < end; j += MPK_BLOCK) {
        float v = pi[j] * scale;
        if (exact)
            v = mk_round_to(v, ga);
        pi[j] = v;
        m = v > m ? v : m;
    }
    return m;
}

/* The keys' exp(score - mx) in place; their sum. */
MK_DEV float mk_row_exp_sum(float *pi, size_t lo, size_t end, int t, float mx)
{
    float a = 0;
    for (size_t j = lo + (size_t)t; j < end; j += MPK_BLOCK) {
        pi[j] = mk_exp(pi[j] - mx);
        a += pi[j];
    }
    return a;
}

#endif
