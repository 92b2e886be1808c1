/* quant.h — exact mode's dyadic grids (the argument is in docs/exec.md).
 *
 * In exact mode every tensor that takes part in a sum whose order may differ
 * between the partitioned run and the reference (GEMM reductions, TP and DP
 * collectives, gradient accumulation) holds values i * 2^-g with |i| <= 128.
 * A product of two such values is an integer multiple of its own power of two
 * with at most 2^14 units; a sum of at most MP_EXACT_MAX_TERMS = 2^9 of them
 * stays below 2^23 units, so float holds every partial sum exactly and the
 * order cannot change a bit. Wherever an op makes values off the grid (GEMM
 * outputs after their full reduction, exp, division, rsqrt, tanh), its result
 * is rounded onto the grid by the same function in both runs. */
#ifndef MP_EXEC_QUANT_H
#define MP_EXEC_QUANT_H

#define MP_EXACT_MAX_INT 128
#define MP_EXACT_MAX_TERMS 512

/* Grid exponents g (values are multiples of 2^-g). */
enum {
    MP_Q_ACT = 4,       /* activations: residual stream, LayerNorm and GEMM outputs, logits */
    MP_Q_PROB = 7,      /* probabilities and exp() in softmax / cross-entropy */
    MP_Q_GRAD = 10,     /* activation gradients */
    MP_Q_GRAD_ATT = 11, /* attention-internal gradients and dQKV */
    MP_Q_WEIGHT = 8,    /* GEMM weights */
    MP_Q_EMBED = 4,     /* token and position embeddings */
    MP_Q_GAMMA = 6,     /* LayerNorm scales */
    MP_Q_BIAS = 6       /* biases and LayerNorm shifts */
};

/* Per-token losses are only added, never multiplied: a finer grid and a
 * larger range (sums of <= 2^9 tokens stay below 2^23 units). */
#define MP_Q_LOSS 10
#define MP_Q_LOSS_MAX_INT 16384

/* Scale of d(loss)/d(logits) in exact mode (in tolerance mode: 1/tokens). */
#define MP_EXACT_GRAD_SCALE 0.0625

#endif
