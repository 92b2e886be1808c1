/* activation.cu — the elementwise layers (layers.c, bert_heads.c): GeLU
 * (tanh approximation and the exact erf form), SwiGLU, GEGLU, tanh, bias
 * add and its gradient, residual add, scaling. Each expression is the CPU's, operation for operation. */
#include "host_grid.h"

#define MK_GELU_K 0.7978845608028654 /* sqrt(2/pi), layers.c GELU_K */

MK_FN float mk_gelu_tanh_of(float x)
{
    return (float)0.5 * x * (1 + mk_tanh((float)MK_GELU_K * (x + (float)0.044715 * x * x * x)));
}

MK_FN float mk_gelu_tanh_grad(float x)
{
    float u = (float)MK_GELU_K * (x + (float)0.044715 * x * x * x);
    float th = mk_tanh(u);
    float du = (float)MK_GELU_K * (1 + (float)(3 * 0.044715) * x * x);
    return (float)0.5 * (1 + th) + (float)0.5 * x * (1 - th * th) * du;
}

MK_MAP_KERNEL(mk_gelu_fwd_kernel, float, float, mk_gelu_tanh_of)

int mpk_gelu_forward(float *out, const float *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_gelu_fwd_kernel, out, in, n);
}

/* din[i] = dout[i] * grad(in[i]): an elementwise activation's backward */
#define MK_GRAD_KERNEL(name, grad)                                                           \
    MK_KERNEL name(float *din, const float *dout, const float *in, size_t n)                 \
    {                                                                                        \
        MK_THREADS(t)                                                                        \
        {                                                                                    \
            MK_EACH(t, i, n)                                                                 \
            din[i] = dout[i] * grad(in[i]);                                                  \
        }                                                                                    \
    }

MK_GRAD_KERNEL(mk_gelu_bwd_kernel, mk_gelu_tanh_grad)

int mpk_gelu_backward(float *din, const float *dout, const float *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_gelu_bwd_kernel, din, dout, in, n);
}

/* The exact GELU, layers.c's gelu_erf_of / gelu_erf_grad */
#define MK_RSQRT2 0.7071067811865476   /* 1/sqrt(2) */
#define MK_RSQRT2PI 0.3989422804014327 /* 1/sqrt(2 pi) */

MK_FN float mk_gelu_erf_of(float x)
{
    return (float)0.5 * x * (1 + mk_erf(x * (float)MK_RSQRT2));
}

MK_FN float mk_gelu_erf_grad(float x)
{
    float cdf = (float)0.5 * (1 + mk_erf(x * (float)MK_RSQRT2));
    return cdf + x * (float)MK_RSQRT2PI * mk_exp((float)-0.5 * x * x);
}

MK_MAP_KERNEL(mk_gelu_erf_fwd_kernel, float, float, mk_gelu_erf_of)

int mpk_gelu_erf_forward(float *out, const float *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_gelu_erf_fwd_kernel, out, in, n);
}

MK_GRAD_KERNEL(mk_gelu_erf_bwd_kernel, mk_gelu_erf_grad)

int mpk_gelu_erf_backward(float *din, const float *dout, const float *in, size_t n,
                          void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_gelu_erf_bwd_kernel, din, dout, in, n);
}

MK_KERNEL mk_geglu_fwd_kernel(float *out, const float *gu, size_t rows, size_t f, int erf)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, rows * f)
        {
            size_t r = i / f, c = i % f;
            float x = gu[r * 2 * f + c], up = gu[r * 2 * f + f + c];
            out[i] = (erf ? mk_gelu_erf_of(x) : mk_gelu_tanh_of(x)) * up;
        }
    }
}

int mpk_geglu_forward(float *out, const float *gu, int rows, int f, int erf, void *stream)
{
    if (rows < 0 || f < 0)
        return MPK_EINVAL;
    MK_ELEMENTWISE((size_t)rows * (size_t)f, stream, mk_geglu_fwd_kernel, out, gu,
                   (size_t)rows, (size_t)f, erf);
}

MK_KERNEL mk_geglu_bwd_kernel(float *dgu, const float *dout, const float *gu, size_t rows,
                              size_t f, int erf)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, rows * f)
        {
            size_t r = i / f, c = i % f;
            float x = gu[r * 2 * f + c], up = gu[r * 2 * f + f + c], dy = dout[i];
            float a = erf ? mk_gelu_erf_of(x) : mk_gelu_tanh_of(x);
            float da = erf ? mk_gelu_erf_grad(x) : mk_gelu_tanh_grad(x);
            dgu[r * 2 * f + c] = dy * up * da;
            dgu[r * 2 * f + f + c] = dy * a;
        }
    }
}

int mpk_geglu_backward(float *dgu, const float *dout, const float *gu, int rows, int f, int erf,
                       void *stream)
{
    if (rows < 0 || f < 0)
        return MPK_EINVAL;
    MK_ELEMENTWISE((size_t)rows * (size_t)f, stream, mk_geglu_bwd_kernel, dgu, dout, gu,
                   (size_t)rows, (size_t)f, erf);
}

MK_KERNEL mk_swiglu_fwd_kernel(float *out, const float *gu, size_t rows, size_t f)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, rows * f)
        {
            size_t r = i / f, c = i % f;
            float x = gu[r * 2 * f + c], up = gu[r * 2 * f + f + c];
            out[i] = x / (1 + mk_exp(-x)) * up;
        }
    }
}

int mpk_swiglu_forward(float *out, const float *gu, int rows, int f, void *stream)
{
    if (rows < 0 || f < 0)
        return MPK_EINVAL;
    MK_ELEMENTWISE((size_t)rows * (size_t)f, stream, mk_swiglu_fwd_kernel, out, gu,
                   (size_t)rows, (size_t)f);
}

MK_KERNEL mk_swiglu_bwd_kernel(float *dgu, const float *dout, const float *gu, size_t rows,
                               size_t f)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, rows * f)
        {
            size_t r = i / f, c = i % f;
            float x = gu[r * 2 * f + c], up = gu[r * 2 * f + f + c], dy = dout[i];
            float sg = 1 / (1 + mk_exp(-x));
            dgu[r * 2 * f + c] = dy * up * sg * (1 + x * (1 - sg));
            dgu[r * 2 * f + f + c] = dy * x * sg;
        }
    }
}

int mpk_swiglu_backward(float *dgu, const float *dout, const float *gu, int rows, int f,
                        void *stream)
{
    if (rows < 0 || f < 0)
        return MPK_EINVAL;
    MK_ELEMENTWISE((size_t)rows * (size_t)f, stream, mk_swiglu_bwd_kernel, dgu, dout, gu,
                   (size_t)rows, (size_t)f);
}

MK_MAP_KERNEL(mk_tanh_fwd_kernel, float, float, mk_tanh)

int mpk_tanh_forward(float *out, const float *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_tanh_fwd_kernel, out, in, n);
}

MK_KERNEL mk_tanh_bwd_kernel(float *dx, const float *y, size_t n)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n)
        dx[i] *= 1 - y[i] * y[i];
    }
}

int mpk_tanh_backward(float *dx, const float *y, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_tanh_bwd_kernel, dx, y, n);
}

MK_KERNEL mk_bias_add_kernel(float *y, const float *b, size_t rows, size_t cols)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, rows * cols)
        y[i] += b[i % cols];
    }
}

int mpk_bias_add(float *y, const float *b, int rows, int cols, void *stream)
{
    if (rows < 0 || cols < 0)
        return MPK_EINVAL;
    MK_ELEMENTWISE((size_t)rows * (size_t)cols, stream, mk_bias_add_kernel, y, b, (size_t)rows,
                   (size_t)cols);
}

/* One thread per column, over the rows in order (the CPU's order). */
MK_KERNEL mk_bias_grad_kernel(float *db, const float *dy, size_t rows, size_t cols)
{
    MK_THREADS(t)
    {
        MK_EACH(t, c, cols)
        {
            float a = db[c];
            for (size_t r = 0; r < rows; r++)
                a += dy[r * cols + c];
            db[c] = a;
        }
    }
}

int mpk_bias_grad(float *db, const float *dy, int rows, int cols, void *stream)
{
    if (rows < 0 || cols < 0)
        return MPK_EINVAL;
    if (rows == 0)
        return MPK_OK;
    MK_ELEMENTWISE((size_t)cols, stream, mk_bias_grad_kernel, db, dy, (size_t)rows,
                   (size_t)cols);
}

MK_KERNEL mk_add_kernel(float *y, const float *x, size_t n)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n)
        y[i] += x[i];
    }
}

int mpk_add(float *y, const float *x, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_add_kernel, y, x, n);
}

MK_KERNEL mk_scale_kernel(float *x, size_t n, float alpha)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n)
        x[i] *= alpha;
    }
}

int mpk_scale(float *x, size_t n, float alpha, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_scale_kernel, x, n, alpha);
}
