/* moe_oss.h — GPT-OSS's biases in an MoE block (moe_oss.c): the router's
 * and each routed expert's fc1 and fc2 biases, applied by moe_layer.c where
 * its GEMMs leave the rows. Each is a no-op when the model has none. Rows are
 * in expert order: ne[e] (a count held as a real, moe.h's layout) rows of
 * this rank's local expert e after those of the experts before it. */
#ifndef MP_EXEC_MOE_OSS_H
#define MP_EXEC_MOE_OSS_H

#include "exec/kernels.h"

/* logits[S,E] += the router's bias; its gradient += the column sums of dl. */
void mp_moe_oss_router_bias(const mp_gpt *g, int l, real *logits, size_t S, size_t E);
void mp_moe_oss_router_bias_grad(const mp_gpt *g, int l, const real *dl, size_t S, size_t E);
/* pre[rows,f1l] += each row's expert's fc1 bias (this TP rank's columns). */
void mp_moe_oss_fc1_bias(const mp_gpt *g, int l, real *pre, const real *ne, size_t El,
                         size_t f1l);
/* out[rows,h] += each row's expert's fc2 bias, on one rank of a TP group
 * whose partial sums follow (every rank when experts are whole, etp = 1). */
void mp_moe_oss_fc2_bias(const mp_gpt *g, int l, real *out, const real *ne, size_t El,
                         size_t h);
/* The experts' bias gradients: fc2's the column sums of dy[rows,h] (the
 * gradient of the expert outputs), fc1's those of dpre[rows,f1l]. */
void mp_moe_oss_bias_grads(const mp_gpt *g, int l, const real *dy, const real *dpre,
                           const real *ne, size_t El, size_t f1l, size_t h);

#endif
