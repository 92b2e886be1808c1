/* embedding.cu — rows gathered from a table and gradients scattered back
 * (model.c: the vocab-parallel token embedding, learned positions, BERT's
 * token types). The scatter-add runs one thread per column over the rows in
 * order, so repeated tokens add up in the CPU's order without atomics. */
#include "host_grid.h"

MK_KERNEL mk_gather_kernel(float *out, const float *table, const int32_t *idx, size_t rows,
                           size_t h, int64_t lo, int64_t n_owned, bool accumulate)
{
    size_t n = rows * h, stride = (size_t)gridDim.x * blockDim.x;
    MK_THREADS(t)
    {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + (size_t)t; i < n; i += stride) {
            size_t r = i / h, c = i % h;
            int64_t tok = idx[r];
            bool own = tok >= lo && tok < lo + n_owned;
            if (own && accumulate)
                out[i] += table[(size_t)(tok - lo) * h + c];
            else if (own)
                out[i] = table[(size_t)(tok - lo) * h + c];
            else if (!accumulate)
                out[i] = 0;
        }
    }
}

int mpk_gather_rows(float *out, const float *table, const int32_t *idx, int rows, int h,
                    int64_t lo, int64_t n_owned, bool accumulate, void *stream)
{
    if (rows < 0 || h < 0 || n_owned < 0)
        return MPK_EINVAL;
    size_t n = (size_t)rows * (size_t)h;
    if (n == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_gather_kernel, mk_grid_for(n), stream, out, table, idx, (size_t)rows,
              (size_t)h, lo, n_owned, accumulate);
    return st;
}

/* Thread c of the grid owns column c of every table row. */
MK_KERNEL mk_scatter_add_kernel(float *table, const float *src, const int32_t *idx, size_t rows,
                                size_t h, int64_t lo, int64_t n_owned)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    MK_THREADS(t)
    {
        for (size_t c = (size_t)blockIdx.x * blockDim.x + (size_t)t; c < h; c += stride)
            for (size_t r = 0; r < rows; r++) {
                int64_t tok = idx[r];
                if (tok >= lo && tok < lo + n_owned)
                    table[(size_t)(tok - lo) * h + c] += src[r * h + c];
            }
    }
}

int mpk_scatter_add_rows(float *table, const float *src, const int32_t *idx, int rows, int h,
                         int64_t lo, int64_t n_owned, void *stream)
{
    if (rows < 0 || h < 0 || n_owned < 0)
        return MPK_EINVAL;
    if (rows == 0 || h == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_scatter_add_kernel, mk_grid_for((size_t)h), stream, table, src, idx,
              (size_t)rows, (size_t)h, lo, n_owned);
    return st;
}
