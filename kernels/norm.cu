/* norm.cu — LayerNorm and RMSNorm, forward and backward (layers.c). One
 * block per row. The row statistics are sums whose order matters even on
 * exact data (the centred squares are not on a grid), so exact mode computes
 * them as the CPU does, one thread adding in index order; otherwise a fixed
 * block tree. RMSNorm is LayerNorm with the mean held at 0 and no shift: the
 * CPU's RMSNorm expressions are then the same operations on the same values
 * (x - 0 = x, a - 0 = a). The scale and shift gradients are column sums over
 * the rows in order, the CPU's order. */
#include "host_grid.h"

/* eps: the model's norm_eps as the CPU's float code has it ((real)eps,
 * layers.c), added to the variance or mean square before the square root */
MK_KERNEL mk_norm_fwd_kernel(float *out, float *xhat, float *rstd, const float *x, const float *w,
                             const float *b, size_t rows, size_t h, float eps, bool rms,
                             bool exact, mk_grid ga)
{
    MK_SHARED float red[MPK_BLOCK];
    MK_SHARED float stat[2]; /* mean, rstd of the row */
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * h;
        if (exact) {
            MK_THREADS(t)
            {
                if (t == 0) {
                    float mean = 0, var = 0;
                    for (size_t i = 0; !rms && i < h; i++)
                        mean += xr[i];
                    mean /= (float)h;
                    if (rms)
                        mean = 0;
                    for (size_t i = 0; i < h; i++) {
                        float c = xr[i] - mean;
                        var += c * c;
                    }
                    var /= (float)h;
                    stat[0] = mean;
                    stat[1] = (float)1 / sqrtf(var + eps);
                }
            }
        } else {
            if (!rms) {
                MK_THREADS(t)
                {
                    float a = 0;
                    for (size_t i = (size_t)t; i < h; i += MPK_BLOCK)
                        a += xr[i];
                    red[t] = a;
                }
                MK_SYNC();
                mk_block_reduce(red, &stat[0], false);
            }
            MK_THREADS(t)
            {
                if (t == 0)
                    stat[0] = rms ? 0 : stat[0] / (float)h;
            }
            MK_SYNC();
            MK_THREADS(t)
            {
                float a = 0, mean = stat[0];
                for (size_t i = (size_t)t; i < h; i += MPK_BLOCK) {
                    float c = xr[i] - mean;
                    a += c * c;
                }
                red[t] = a;
            }
            MK_SYNC();
            mk_block_reduce(red, &stat[1], false);
            MK_THREADS(t)
            {
                if (t == 0)
                    stat[1] = (float)1 / sqrtf(stat[1] / (float)h + eps);
            }
        }
        MK_SYNC();
        MK_THREADS(t)
        {
            float mean = stat[0], rs = stat[1];
            if (t == 0)
                rstd[r] = rs;
            for (size_t i = (size_t)t; i < h; i += MPK_BLOCK) {
                float xh = (xr[i] - mean) * rs;
                if (exact)
                    xh = mk_round_to(xh, ga);
                xhat[r * h + i] = xh;
                float o = rms ? xh * w[i] : xh * w[i] + b[i];
                out[r * h + i] = exact ? mk_round_to(o, ga) : o;
            }
        }
        MK_SYNC(); /* stat and red are the next row's */
    }
}

/* dx = rstd (dout w - mean(dout w) - xhat mean(dout w xhat)), mean(dout w) = 0 for RMSNorm. */
MK_KERNEL mk_norm_bwd_kernel(float *dx, const float *dout, const float *xhat, const float *rstd,
                             const float *w, size_t rows, size_t h, bool rms, bool exact,
                             mk_grid gg)
{
    MK_SHARED float red[MPK_BLOCK], red2[MPK_BLOCK];
    MK_SHARED float stat[2]; /* mean(g), mean(g xhat) */
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *dy = dout + r * h, *xh = xhat + r * h;
        if (exact) {
            MK_THREADS(t)
            {
                if (t == 0) {
                    float mg = 0, mgx = 0;
                    for (size_t i = 0; i < h; i++) {
                        float g = dy[i] * w[i];
                        mg += g;
                        mgx += g * xh[i];
                    }
                    stat[0] = rms ? 0 : mg / (float)h;
                    stat[1] = mgx / (float)h;
                }
            }
        } else {
            MK_THREADS(t)
            {
                float a = 0, a2 = 0;
                for (size_t i = (size_t)t; i < h; i += MPK_BLOCK) {
                    float g = dy[i] * w[i];
                    a += g;
                    a2 += g * xh[i];
                }
                red[t] = a;
                red2[t] = a2;
            }
            MK_SYNC();
            mk_block_reduce(red, &stat[0], false);
            mk_block_reduce(red2, &stat[1], false);
            MK_THREADS(t)
            {
                if (t == 0) {
                    stat[0] = rms ? 0 : stat[0] / (float)h;
                    stat[1] = stat[1] / (float)h;
                }
            }
        }
        MK_SYNC();
        MK_THREADS(t)
        {
            float mg = stat[0], mgx = stat[1], rs = rstd[r];
            for (size_t i = (size_t)t; i < h; i += MPK_BLOCK) {
                float d = rs * (dy[i] * w[i] - mg - xh[i] * mgx);
                dx[r * h + i] = exact ? mk_round_to(d, gg) : d;
            }
        }
        MK_SYNC();
    }
}

/* dw[c] += sum_r dout[r,c] xhat[r,c]; db[c] += sum_r dout[r,c] (db may be NULL). */
MK_KERNEL mk_norm_param_grad_kernel(float *dw, float *db, const float *dout, const float *xhat,
                                    size_t rows, size_t h)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    MK_THREADS(t)
    {
        for (size_t c = (size_t)blockIdx.x * blockDim.x + (size_t)t; c < h; c += stride) {
            float aw = dw[c], ab = db ? db[c] : 0;
            for (size_t r = 0; r < rows; r++) {
                aw += dout[r * h + c] * xhat[r * h + c];
                ab += dout[r * h + c];
            }
            dw[c] = aw;
            if (db)
                db[c] = ab;
        }
    }
}

static int mk_norm_forward(float *out, float *xhat, float *rstd, const float *x, const float *w,
                           const float *b, int rows, int h, float eps, bool rms, bool exact,
                           void *stream)
{
    if (rows < 0 || h < 1 || !(eps > 0.0f) || !(eps < 1.0f))
        return MPK_EINVAL;
    if (rows == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_norm_fwd_kernel, mk_grid_for((size_t)rows * MPK_BLOCK), stream, out, xhat,
              rstd, x, w, b, (size_t)rows, (size_t)h, eps, rms, exact,
              mk_grid_of(MP_Q_ACT, MP_EXACT_MAX_INT));
    return st;
}

static int mk_norm_backward(float *dx, float *dw, float *db, const float *dout,
                            const float *xhat, const float *rstd, const float *w, int rows, int h,
                            bool rms, bool exact, void *stream)
{
    if (rows < 0 || h < 1)
        return MPK_EINVAL;
    if (rows == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_norm_bwd_kernel, mk_grid_for((size_t)rows * MPK_BLOCK), stream, dx, dout,
              xhat, rstd, w, (size_t)rows, (size_t)h, rms, exact,
              mk_grid_of(MP_Q_GRAD, MP_EXACT_MAX_INT));
    if (st != MPK_OK)
        return st;
    MK_LAUNCH(st, mk_norm_param_grad_kernel, mk_grid_for((size_t)h), stream, dw, db, dout, xhat,
              (size_t)rows, (size_t)h);
    return st;
}

int mpk_layernorm_forward(float *out, float *xhat, float *rstd, const float *x, const float *w,
                          const float *b, int rows, int h, float eps, bool exact, void *stream)
{
    return mk_norm_forward(out, xhat, rstd, x, w, b, rows, h, eps, false, exact, stream);
}

int mpk_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                           const float *xhat, const float *rstd, const float *w, int rows, int h,
                           bool exact, void *stream)
{
    return mk_norm_backward(dx, dw, db, dout, xhat, rstd, w, rows, h, false, exact, stream);
}

int mpk_rmsnorm_forward(float *out, float *xhat, float *rstd, const float *x, const float *w,
                        int rows, int h, float eps, bool exact, void *stream)
{
    return mk_norm_forward(out, xhat, rstd, x, w, NULL, rows, h, eps, true, exact, stream);
}

int mpk_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *xhat,
                         const float *rstd, const float *w, int rows, int h, bool exact,
                         void *stream)
{
    return mk_norm_backward(dx, dw, NULL, dout, xhat, rstd, w, rows, h, true, exact, stream);
}
