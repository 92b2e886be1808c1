/* moe_oss.c — GPT-OSS's MoE biases (moe_oss.h). HuggingFace's GptOssExperts
 * add gate_up_proj_bias and down_proj_bias per expert and GptOssTopKRouter a
 * bias to its logits; Megatron's --add-bias-linear gives its grouped experts
 * and router the same. Compiled once per precision (real.h). */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/real.h"
#include "exec/model_internal.h"
#include "exec/moe_oss.h"

void mp_moe_oss_router_bias(const mp_gpt *g, int l, real *logits, size_t S, size_t E)
{
    const real *b = blk(g->w, g, l, MP_BLK_ROUTER_B);
    if (b)
        g->be->bias_add(MP_REAL_KIND, logits, b, (int)S, (int)E);
}

void mp_moe_oss_router_bias_grad(const mp_gpt *g, int l, const real *dl, size_t S, size_t E)
{
    real *db = blk(g->g, g, l, MP_BLK_ROUTER_B);
    if (db)
        g->be->bias_grad(MP_REAL_KIND, db, dl, (int)S, (int)E);
}

/* rows[., cols] += bias row e of each row's expert e */
static void per_expert_add(const mp_gpt *g, real *rows, const real *bias, const real *ne,
                           size_t El, size_t cols)
{
    for (size_t e = 0, o = 0; e < El; o += (size_t)ne[e++])
        if ((size_t)ne[e])
            g->be->bias_add(MP_REAL_KIND, rows + o * cols, bias + e * cols, (int)ne[e],
                            (int)cols);
}

static void per_expert_grad(const mp_gpt *g, real *grad, const real *rows, const real *ne,
                            size_t El, size_t cols)
{
    for (size_t e = 0, o = 0; e < El; o += (size_t)ne[e++])
        if ((size_t)ne[e])
            g->be->bias_grad(MP_REAL_KIND, grad + e * cols, rows + o * cols, (int)ne[e],
                             (int)cols);
}

void mp_moe_oss_fc1_bias(const mp_gpt *g, int l, real *pre, const real *ne, size_t El,
                         size_t f1l)
{
    const real *b = blk(g->w, g, l, MP_BLK_EXP_FC1_B);
    if (b)
        per_expert_add(g, pre, b, ne, El, f1l);
}

void mp_moe_oss_fc2_bias(const mp_gpt *g, int l, real *out, const real *ne, size_t El,
                         size_t h)
{
    const real *b = blk(g->w, g, l, MP_BLK_EXP_FC2_B);
    if (b && (g->tp.rank == 0 || mp_dims_moe_local(&g->d)))
        per_expert_add(g, out, b, ne, El, h);
}

void mp_moe_oss_bias_grads(const mp_gpt *g, int l, const real *dy, const real *dpre,
                           const real *ne, size_t El, size_t f1l, size_t h)
{
    real *g1 = blk(g->g, g, l, MP_BLK_EXP_FC1_B), *g2 = blk(g->g, g, l, MP_BLK_EXP_FC2_B);
    if (g2)
        per_expert_grad(g, g2, dy, ne, El, h);
    if (g1)
        per_expert_grad(g, g1, dpre, ne, El, f1l);
}
