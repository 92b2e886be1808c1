/* quantize.cu — exact mode's rounding onto dyadic grids (src/exec/quant.h,
 * mp_quantize in layers.c), and the status messages of every entry. */
#include "host_grid.h"

const char *mpk_strerror(int code)
{
    if (code == MPK_OK)
        return "no error";
    if (code == MPK_EINVAL)
        return "invalid kernel arguments (negative size or bad grid)";
#ifdef __CUDACC__
    return cudaGetErrorString((cudaError_t)code);
#else
    return "unknown kernel error";
#endif
}

#ifndef __CUDACC__
int mpk_host_reverse_order;

void mpk_host_set_reverse_order(int reverse) { mpk_host_reverse_order = reverse; }
#endif

/* x[rows, cols] (rows ld apart) rounded in place; a 1-D range is one row. */
MK_KERNEL mk_quantize_kernel(float *x, size_t rows, size_t cols, size_t ld, mk_grid g)
{
    size_t n = rows * cols, stride = (size_t)gridDim.x * blockDim.x;
    MK_THREADS(t)
    {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + (size_t)t; i < n; i += stride) {
            float *p = x + (i / cols) * ld + i % cols;
            *p = mk_round_to(*p, g);
        }
    }
}

int mpk_quantize_2d(float *x, int rows, int cols, size_t ld, int grid, int max_int,
                    void *stream)
{
    if (rows < 0 || cols < 0 || max_int < 0 || (size_t)cols > ld)
        return MPK_EINVAL;
    size_t n = (size_t)rows * (size_t)cols;
    if (n == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_quantize_kernel, mk_grid_for(n), stream, x, (size_t)rows, (size_t)cols,
              ld, mk_grid_of(grid, max_int));
    return st;
}

int mpk_quantize(float *x, size_t n, int grid, int max_int, void *stream)
{
    if (max_int < 0)
        return MPK_EINVAL;
    if (n == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_quantize_kernel, mk_grid_for(n), stream, x, (size_t)1, n, n,
              mk_grid_of(grid, max_int));
    return st;
}
