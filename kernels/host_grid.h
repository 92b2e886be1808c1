/* host_grid.h — lets one kernel source compile both as CUDA (nvcc, a .cu
 * file) and as plain C17 (the host-run library the unit tests check against
 * the CPU executor, kernels/meson.build), and the device helpers every
 * kernel family shares.
 *
 * The rules a kernel follows so that running its grid as loops is the same
 * computation as running it on a GPU:
 *   - 1-D grids and blocks. blockIdx.x, gridDim.x and blockDim.x read as in
 *     CUDA (on the host they are variables the launch loop sets); threadIdx
 *     does not exist: a thread's work is written inside MK_THREADS(t) { … },
 *     which on the GPU is the calling thread once (t = threadIdx.x) and on the
 *     host a loop over the block's threads.
 *   - A kernel is a sequence of such phases separated by MK_SYNC()
 *     (__syncthreads on the GPU, nothing on the host, where a phase's loop
 *     has finished every thread before the next phase starts). Code between
 *     phases runs in every thread on the GPU and once on the host, so it may
 *     only compute values that are the same in every thread (read from
 *     shared memory or arguments), and loops around phases must run the same
 *     number of times in every thread.
 *   - What a thread carries from one phase to the next lives in a MK_SHARED
 *     array indexed by t (registers do not survive a host phase's loop).
 *   - No warp shuffles, no atomics whose order matters, no dynamic shared
 *     memory: block reductions are the tree over a shared array below, in a
 *     fixed order, so the GPU and the host add the same numbers the same way.
 * What the host run cannot catch (races, shared memory, warps) is listed in
 * docs/exec.md, "Kernels". */
#ifndef MP_KERNELS_HOST_GRID_H
#define MP_KERNELS_HOST_GRID_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "exec/quant.h"
#include "kernels.h"

/* Threads per block of every launch (reductions are trees over this many). */
#define MPK_BLOCK 256
/* At most this many blocks; kernels stride over the rest. */
#define MPK_MAX_GRID 4096

#ifdef __CUDACC__
#include <cuda_runtime.h>

#define MK_KERNEL static __global__ void
/* helpers kernels and launch wrappers share; MK_DEV: kernels only */
#define MK_FN static __host__ __device__ __forceinline__
#define MK_DEV static __device__ __forceinline__
#define MK_SHARED __shared__
#define MK_SYNC() __syncthreads()
#define MK_THREADS(t) for (int t = (int)threadIdx.x, t##_once = 1; t##_once; t##_once = 0)
/* Launches kern on stream; st gets the launch's error code. */
#define MK_LAUNCH(st, kern, grid, stream, ...)                                                 \
    do {                                                                                       \
        kern<<<(unsigned)(grid), MPK_BLOCK, 0, (cudaStream_t)(stream)>>>(__VA_ARGS__);        \
        (st) = (int)cudaGetLastError();                                                        \
    } while (0)

#else /* host C */

typedef struct mk_dim {
    unsigned x;
} mk_dim;
static mk_dim mk_host_block_idx, mk_host_grid_dim, mk_host_block_dim;
#include "host_order.h" /* blocks and threads first to last, or last to first */
/* The i-th of n in the current order. */
#define MK_HOST_NTH(i, n) (mpk_host_reverse_order ? (n) - 1 - (i) : (i))
#define blockIdx mk_host_block_idx
#define gridDim mk_host_grid_dim
#define blockDim mk_host_block_dim

#define MK_KERNEL static void
#define MK_FN static inline
#define MK_DEV static inline
/* one block runs at a time: the kernel's static arrays are its shared memory */
#define MK_SHARED static
#define MK_SYNC() ((void)0)
#define MK_THREADS(t)                                                                          \
    for (int t##_i = 0, t = 0;                                                                 \
         t##_i < (int)blockDim.x && (t = MK_HOST_NTH(t##_i, (int)blockDim.x), 1); t##_i++)
/* The grid as a loop over blocks, each block's phases looping over threads. */
#define MK_LAUNCH(st, kern, grid, stream, ...)                                                 \
    do {                                                                                       \
        (void)(stream);                                                                        \
        mk_host_grid_dim.x = (unsigned)(grid);                                                 \
        mk_host_block_dim.x = MPK_BLOCK;                                                       \
        for (unsigned mk_b = 0; mk_b < mk_host_grid_dim.x; mk_b++) {                           \
            mk_host_block_idx.x = MK_HOST_NTH(mk_b, mk_host_grid_dim.x);                       \
            kern(__VA_ARGS__);                                                                 \
        }                                                                                      \
        (st) = MPK_OK;                                                                         \
    } while (0)
#endif

/* Blocks for n independent items (elementwise kernels stride over the rest). */
MK_FN unsigned mk_grid_for(size_t n)
{
    size_t g = (n + MPK_BLOCK - 1) / MPK_BLOCK;
    return (unsigned)(g < 1 ? 1 : g > MPK_MAX_GRID ? MPK_MAX_GRID : g);
}

/* The grid-stride loop of an elementwise kernel over [0, n). */
#define MK_EACH(t, i, n)                                                                       \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + (size_t)(t); i < (n);                   \
         i += (size_t)gridDim.x * blockDim.x)

/* Launch an elementwise kernel over n items (nothing to do for n = 0). */
#define MK_ELEMENTWISE(n, stream, kern, ...)                                                   \
    do {                                                                                       \
        if ((n) == 0)                                                                          \
            return MPK_OK;                                                                     \
        int st_;                                                                               \
        MK_LAUNCH(st_, kern, mk_grid_for(n), stream, __VA_ARGS__);                             \
        return st_;                                                                            \
    } while (0)

/* An elementwise kernel: out[i] = f(in[i]) for i < n. */
#define MK_MAP_KERNEL(name, t_out, t_in, f)                                                    \
    MK_KERNEL name(t_out *out, const t_in *in, size_t n)                                      \
    {                                                                                          \
        MK_THREADS(t)                                                                          \
        {                                                                                      \
            MK_EACH(t, i, n)                                                                   \
            out[i] = f(in[i]);                                                                 \
        }                                                                                      \
    }

/* ---- transcendental functions ----
 * The CPU executor calls glibc's expf, tanhf, logf and erff. CUDA's single-precision
 * versions differ from them by up to 2 units in the last place; the double
 * versions rounded to float are (nearly always) the correctly rounded result,
 * which glibc's float functions also return but for rare inputs (they are
 * within 0.502 ulp). The GPU therefore evaluates in double: exact mode then
 * rounds onto a grid far coarser than an ulp, where a 1-ulp difference
 * survives only next to a rounding midpoint. sqrt and division are correctly
 * rounded on both (nvcc's default -prec-sqrt/-prec-div; kernels/meson.build
 * also turns off FMA contraction, which the host's C17 mode leaves off). */
#ifdef __CUDA_ARCH__
#define MK_LIBM(f_double, f_float, x) ((float)f_double((double)(x)))
#else
#define MK_LIBM(f_double, f_float, x) f_float(x)
#endif
MK_FN float mk_exp(float x) { return MK_LIBM(exp, expf, x); }
MK_FN float mk_tanh(float x) { return MK_LIBM(tanh, tanhf, x); }
MK_FN float mk_log(float x) { return MK_LIBM(log, logf, x); }
MK_FN float mk_erf(float x) { return MK_LIBM(erf, erff, x); }

/* One value onto exact mode's grid, as mp_quantize does: k = round half to
 * even of x * 2^grid (exact), clamped to +-lim, times 2^-grid. */
typedef struct mk_grid {
    float up, down, lim;
} mk_grid;

MK_FN mk_grid mk_grid_of(int grid, int max_int)
{
    mk_grid g = {(float)ldexp(1.0, grid), (float)ldexp(1.0, -grid), (float)max_int};
    return g;
}

MK_FN float mk_round_to(float x, mk_grid g)
{
    float k = (float)nearbyint((double)(x * g.up));
    if (k > g.lim)
        k = g.lim;
    if (k < -g.lim)
        k = -g.lim;
    return k * g.down;
}

/* The bits of a float and back (memcpy: no aliasing questions in C or C++). */
MK_FN uint32_t mk_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

MK_FN float mk_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- block reduction of red[MPK_BLOCK] (MK_SHARED, one value per thread,
 * written in the phase before the call): a tree in a fixed order, the sum
 * or the maximum, which thread 0 stores in *out; red is free again after the
 * call's last barrier. Of two equal maxima (+0 and -0) either may survive:
 * no result below depends on which (x - (+0) = x - (-0), and so their exps). */
MK_DEV void mk_block_reduce(float *red, float *out, bool max)
{
    for (int stride = MPK_BLOCK / 2; stride > 0; stride /= 2) {
        MK_THREADS(t)
        {
            if (t < stride)
                red[t] = !max ? red[t] + red[t + stride]
                              : red[t + stride] > red[t] ? red[t + stride] : red[t];
        }
        MK_SYNC();
    }
    MK_THREADS(t)
    {
        if (t == 0)
            *out = red[0];
    }
    MK_SYNC();
}

#endif
