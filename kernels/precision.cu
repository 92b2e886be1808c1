/* precision.cu — casts between fp32 and bf16 / fp16 (round to nearest even,
 * overflow to infinity, NaN kept NaN) and fp16 loss scaling's unscale with
 * its inf/NaN check. The casts are integer code on the bits, so the host run
 * and every GPU give the same bits without relying on cuda_bf16.h. */
#include "host_grid.h"

MK_FN uint16_t mk_f32_to_bf16(float x)
{
    uint32_t u = mk_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

MK_FN uint16_t mk_f32_to_f16(float x)
{
    uint32_t u = mk_bits(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, the payload's top bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 (halfway from 65504, odd) and inf: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal half: >= 2^-14 */
        uint32_t h = ((((a >> 23) - 127 + 15) << 10) | ((a >> 13) & 0x3ffu));
        uint32_t rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    if (a <= 0x33000000u) /* <= 2^-25: the tie and below round to 0 */
        return (uint16_t)sign;
    /* subnormal half: units of 2^-24; value = m 2^(e-23), e in [-25, -15] */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    int shift = -((int)(a >> 23) - 127 + 1);
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

MK_FN float mk_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16, e = ((uint32_t)h >> 10) & 0x1fu,
             m = (uint32_t)h & 0x3ffu;
    if (e == 0x1f)
        return mk_from_bits(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* zero or subnormal: m 2^-24, exact in float */
        float f = (float)m * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    return mk_from_bits(sign | ((e - 15 + 127) << 23) | (m << 13));
}

MK_FN float mk_bf16_to_f32(uint16_t b) { return mk_from_bits((uint32_t)b << 16); }

MK_MAP_KERNEL(mk_to_bf16_kernel, uint16_t, float, mk_f32_to_bf16)
MK_MAP_KERNEL(mk_from_bf16_kernel, float, uint16_t, mk_bf16_to_f32)
MK_MAP_KERNEL(mk_to_f16_kernel, uint16_t, float, mk_f32_to_f16)
MK_MAP_KERNEL(mk_from_f16_kernel, float, uint16_t, mk_f16_to_f32)

int mpk_f32_to_bf16(uint16_t *out, const float *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_to_bf16_kernel, out, in, n);
}

int mpk_bf16_to_f32(float *out, const uint16_t *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_from_bf16_kernel, out, in, n);
}

int mpk_f32_to_f16(uint16_t *out, const float *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_to_f16_kernel, out, in, n);
}

int mpk_f16_to_f32(float *out, const uint16_t *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_from_f16_kernel, out, in, n);
}

/* A column-major operand packed for a bf16 GEMM: cols runs of rows floats,
 * ld apart in `in`, rounded and stored rows apart in `out`. The index split is
 * 32-bit when it fits: a 64-bit division costs a GPU tens of instructions per
 * element, more than the element's load. */
MK_FN size_t mk_run_of(size_t i, size_t rows, size_t n)
{
    return n <= 0xffffffffu ? (size_t)((uint32_t)i / (uint32_t)rows) : i / rows;
}

MK_KERNEL mk_to_bf16_2d_kernel(uint16_t *out, const float *in, size_t rows, size_t n, size_t ld)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n)
        {
            size_t col = mk_run_of(i, rows, n);
            out[i] = mk_f32_to_bf16(in[col * ld + (i - col * rows)]);
        }
    }
}

/* Four at a time where runs and strides are multiples of 4 and the buffers
 * aligned: one 16-byte load and one 8-byte store per thread, which the
 * H200 needs to approach its bandwidth (one element per thread moved the
 * operands at under half of it: docs/gpu/2026-12-04-b's 8192^3 products). */
#ifdef __CUDACC__
#define MK_ALIGNAS(n) alignas(n)
#else
#define MK_ALIGNAS(n) _Alignas(n)
#endif
typedef struct { MK_ALIGNAS(16) float v[4]; } mk_f32x4;
typedef struct { MK_ALIGNAS(8) uint16_t v[4]; } mk_bf16x4;

MK_KERNEL mk_to_bf16_2d_x4_kernel(mk_bf16x4 *out, const mk_f32x4 *in, size_t rows4, size_t n4,
                                  size_t ld4)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n4)
        {
            size_t col = mk_run_of(i, rows4, n4);
            mk_f32x4 x = in[col * ld4 + (i - col * rows4)];
            mk_bf16x4 y;
            for (int j = 0; j < 4; j++)
                y.v[j] = mk_f32_to_bf16(x.v[j]);
            out[i] = y;
        }
    }
}

int mpk_f32_to_bf16_2d(uint16_t *out, const float *in, size_t rows, size_t cols, size_t ld,
                       void *stream)
{
    if (ld < rows)
        return MPK_EINVAL;
    if (rows % 4 == 0 && ld % 4 == 0 && (uintptr_t)in % 16 == 0 && (uintptr_t)out % 8 == 0)
        MK_ELEMENTWISE(rows * cols / 4, stream, mk_to_bf16_2d_x4_kernel, (mk_bf16x4 *)out,
                       (const mk_f32x4 *)in, rows / 4, rows * cols / 4, ld / 4);
    MK_ELEMENTWISE(rows * cols, stream, mk_to_bf16_2d_kernel, out, in, rows, rows * cols, ld);
}

/* Every thread that meets inf or NaN stores the same 1: the order of the
 * stores cannot matter, so no atomic is needed. */
MK_KERNEL mk_unscale_kernel(float *x, size_t n, float inv_scale, int *found)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n)
        {
            if ((mk_bits(x[i]) & 0x7f800000u) == 0x7f800000u)
                *found = 1;
            x[i] *= inv_scale;
        }
    }
}

int mpk_unscale_check(float *x, size_t n, float inv_scale, int *found_nonfinite, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_unscale_kernel, x, n, inv_scale, found_nonfinite);
}
