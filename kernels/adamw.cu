/* adamw.cu — AdamW on fp32 master weights (optimizer.c), elementwise, one
 * tensor's range per launch (its decay and grid are the tensor's). */
#include "host_grid.h"

mpk_adam_args mpk_adam_args_make(double lr, double beta1, double beta2, double eps,
                                 double weight_decay, bool decays, int step, int grid)
{
    mpk_adam_args a;
    a.lr = (float)lr;
    a.beta1 = (float)beta1;
    a.beta2 = (float)beta2;
    a.eps = (float)eps;
    a.decay = decays ? (float)weight_decay : 0;
    a.c1 = (float)(1 - pow(beta1, step));
    a.c2 = (float)(1 - pow(beta2, step));
    a.grid = grid;
    return a;
}

MK_KERNEL mk_adamw_kernel(float *w, const float *g, float *m, float *v, size_t n, mpk_adam_args a,
                          mk_grid gw)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n)
        {
            float gi = g[i];
            m[i] = a.beta1 * m[i] + (1 - a.beta1) * gi;
            v[i] = a.beta2 * v[i] + (1 - a.beta2) * gi * gi;
            float mhat = m[i] / a.c1, vhat = v[i] / a.c2;
            float wi = w[i] - a.lr * (mhat / (sqrtf(vhat) + a.eps) + a.decay * w[i]);
            w[i] = a.grid >= 0 ? mk_round_to(wi, gw) : wi;
        }
    }
}

int mpk_adamw(float *w, const float *g, float *m, float *v, size_t n, mpk_adam_args a,
              void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_adamw_kernel, w, g, m, v, n, a,
                   mk_grid_of(a.grid >= 0 ? a.grid : 0, MP_EXACT_MAX_INT));
}
