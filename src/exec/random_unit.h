/* random_unit.h — the values GEMM rates are measured on (mp_cuda_gemm_peak,
 * bench/bench_gemm_cuda.c): xorshift64 draws in [-1, 1) with 24 random bits.
 * Random, not zeros or a repeated value: an H200 runs the same product ~13%
 * faster on low-entropy data (fewer bits toggle), which would flatter a peak. */
#ifndef MP_EXEC_RANDOM_UNIT_H
#define MP_EXEC_RANDOM_UNIT_H

#include <stdint.h>
#include <string.h>

/* The next value of the sequence that *state carries (any nonzero start). */
static inline float mp_random_unit(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    *state = x;
    return (float)((double)(x >> 40) / 8388608.0 - 1.0);
}

/* bf16 bits of v, truncated (the values need only be random, not rounded). */
static inline uint16_t mp_bf16_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (uint16_t)(u >> 16);
}

#endif
