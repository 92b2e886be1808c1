/* t5.cu — T5's own layers (src/exec/t5_layers.c): ReLU and its gradient, and
 * the relative position bias of one head's attention scores and its
 * gradient. Each expression is the CPU's, operation for operation; the
 * bias table's gradient is summed by one thread per bucket over the scores
 * in the CPU's order (row after row, key after key), so it equals the CPU's
 * sums bit for bit on any data. */
#include "host_grid.h"

MK_KERNEL mk_relu_fwd_kernel(float *out, const float *in, size_t n)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n)
        out[i] = in[i] > 0 ? in[i] : 0;
    }
}

int mpk_relu_forward(float *out, const float *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_relu_fwd_kernel, out, in, n);
}

MK_KERNEL mk_relu_bwd_kernel(float *din, const float *dout, const float *in, size_t n)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, n)
        din[i] = in[i] > 0 ? dout[i] : 0;
    }
}

int mpk_relu_backward(float *din, const float *dout, const float *in, size_t n, void *stream)
{
    MK_ELEMENTWISE(n, stream, mk_relu_bwd_kernel, din, dout, in, n);
}

/* The last key query row i sees. */
MK_DEV size_t mk_t5_last(size_t i, size_t sk, bool causal)
{
    size_t g = causal ? i : sk - 1;
    return g < sk ? g : sk - 1;
}

MK_KERNEL mk_rel_bias_add_kernel(float *p, size_t s, size_t sk, bool causal, float scale,
                                 const float *table, size_t table_ld, size_t head,
                                 const int32_t *bucket)
{
    MK_THREADS(t)
    {
        MK_EACH(t, e, s * sk)
        {
            size_t i = e / sk, j = e % sk;
            if (j <= mk_t5_last(i, sk, causal))
                p[e] = p[e] * scale + table[(size_t)bucket[e] * table_ld + head];
        }
    }
}

int mpk_rel_bias_add(float *p, int s, int sk, bool causal, float scale, const float *table,
                     int table_ld, int head, const int32_t *bucket, void *stream)
{
    if (s < 0 || sk < 1 || table_ld < 1 || head < 0 || head >= table_ld)
        return MPK_EINVAL;
    size_t n = (size_t)s * (size_t)sk;
    MK_ELEMENTWISE(n, stream, mk_rel_bias_add_kernel, p, (size_t)s, (size_t)sk, causal, scale,
                   table, (size_t)table_ld, (size_t)head, bucket);
}

/* dtable[k, head] += ds[i, j] for each seen score of bucket k, in (i, j) order. */
MK_KERNEL mk_rel_bias_table_kernel(float *dtable, const float *ds, size_t s, size_t sk,
                                   bool causal, size_t buckets, size_t table_ld, size_t head,
                                   const int32_t *bucket)
{
    MK_THREADS(t)
    {
        MK_EACH(t, k, buckets)
        {
            float acc = dtable[k * table_ld + head];
            for (size_t i = 0; i < s; i++) {
                size_t last = mk_t5_last(i, sk, causal);
                for (size_t j = 0; j <= last; j++)
                    if ((size_t)bucket[i * sk + j] == k)
                        acc += ds[i * sk + j];
            }
            dtable[k * table_ld + head] = acc;
        }
    }
}

/* ds *= scale on the seen scores, rounded onto gg in exact mode. */
MK_KERNEL mk_rel_bias_scale_kernel(float *ds, size_t s, size_t sk, bool causal, float scale,
                                   bool exact, mk_grid gg)
{
    MK_THREADS(t)
    {
        MK_EACH(t, e, s * sk)
        {
            size_t i = e / sk, j = e % sk;
            if (j <= mk_t5_last(i, sk, causal)) {
                float v = ds[e] * scale;
                ds[e] = exact ? mk_round_to(v, gg) : v;
            }
        }
    }
}

int mpk_rel_bias_grad(float *ds, float *dtable, int s, int sk, bool causal, float scale,
                      int buckets, int table_ld, int head, const int32_t *bucket, bool exact,
                      void *stream)
{
    if (s < 0 || sk < 1 || buckets < 1 || table_ld < 1 || head < 0 || head >= table_ld)
        return MPK_EINVAL;
    if (s == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_rel_bias_table_kernel, mk_grid_for((size_t)buckets), stream, dtable, ds,
              (size_t)s, (size_t)sk, causal, (size_t)buckets, (size_t)table_ld, (size_t)head,
              bucket);
    if (st != MPK_OK)
        return st;
    size_t n = (size_t)s * (size_t)sk;
    MK_LAUNCH(st, mk_rel_bias_scale_kernel, mk_grid_for(n), stream, ds, (size_t)s, (size_t)sk,
              causal, scale, exact, mk_grid_of(MP_Q_GRAD_ATT, MP_EXACT_MAX_INT));
    return st;
}
