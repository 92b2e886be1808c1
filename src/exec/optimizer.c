/* optimizer.c — AdamW (bias-corrected moments, decoupled weight decay):
 *   m = b1 m + (1-b1) g,  v = b2 v + (1-b2) g^2,
 *   w = w - lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd w)
 * over a flat range [lo, hi) of the layout: the whole local buffer, or this
 * rank's DP shard with the distributed optimizer (m and v then hold only the
 * shard, indexed from lo). Elementwise, so sharding cannot change a bit.
 * Exact mode puts each updated weight back on its tensor's grid (quant.h).
 * Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"

void mp_adamw_update(real *w, const real *grad, real *m, real *v, const mp_param_layout *lay,
                     size_t lo, size_t hi, const mp_adam_cfg *cfg, int step, bool exact)
{
    real b1 = (real)cfg->beta1, b2 = (real)cfg->beta2, lr = (real)cfg->lr;
    real eps = (real)cfg->eps, wd = (real)cfg->weight_decay;
    real c1 = (real)(1 - pow(cfg->beta1, step)), c2 = (real)(1 - pow(cfg->beta2, step));
    for (int pid = 0; pid < lay->n; pid++) {
        const mp_param *p = &lay->p[pid];
        size_t a = p->offset, b = p->offset + (size_t)p->lrows * (size_t)p->lcols;
        if (a < lo)
            a = lo;
        if (b > hi)
            b = hi;
        /* no decay on biases and LayerNorm parameters, as GPT training does */
        real decay = (p->init == MP_INIT_WEIGHT || p->init == MP_INIT_EMBED) ? wd : 0;
        for (size_t i = a; i < b; i++) {
            real gi = grad[i];
            real *mi = &m[i - lo], *vi = &v[i - lo];
            *mi = b1 * *mi + (1 - b1) * gi;
            *vi = b2 * *vi + (1 - b2) * gi * gi;
            real mhat = *mi / c1, vhat = *vi / c2;
            w[i] -= lr * (mhat / (R_SQRT(vhat) + eps) + decay * w[i]);
        }
        if (exact && b > a)
            mp_quantize(w + a, b - a, mp_init_grid(p->init), MP_EXACT_MAX_INT);
    }
}

