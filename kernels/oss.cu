/* oss.cu — GPT-OSS's row-wise ops (src/exec/attention_sink.c): the
 * attention softmax over a sliding window with a learned sink logit, its
 * backward with the sink's gradient, and the clamped SwiGLU. Each
 * expression is the CPU's, operation for operation; exact mode's row sums
 * run in the CPU's order, one thread (as softmax.cu's). The sink's gradient
 * is a sum over the rows: each row's term is kept in a scratch array and one
 * thread adds them in row order, as the CPU does. */
#include "softmax_row.h"

/* Test-only (kernels/meson.build's mutant build of the host library): the
 * error that the environment's MPK_TEST_MUTANT names, planted so that
 * tests/kernels is shown to catch it: window-plus (the band one key wider),
 * sink-dropped (the sink left out of the denominator), dsink-row (the last
 * row's term left out of the sink's gradient), clamp-low (up not clamped
 * below), clamp-grad (the gate's gradient kept where its clamp held). */
#if defined(MPK_TEST_MUTANT) && !defined(__CUDACC__)
#include <stdlib.h>
static int mk_mutant(const char *what)
{
    const char *m = getenv("MPK_TEST_MUTANT");
    return m && strcmp(m, what) == 0;
}
#else
#define mk_mutant(what) 0
#endif

/* The keys query row i sees, [*first, *last] (attention_sink.c's
 * key_range): causal, up to its position (qpos[i], or i); a window w keeps
 * the w keys ending there (window 0: from key 0). */
MK_DEV void mk_oss_keys(const int32_t *qpos, size_t i, size_t sk, bool causal, int window,
                        size_t *first, size_t *last)
{
    long t = qpos ? (long)qpos[i] : (long)i;
    long hi = causal ? t : (long)sk - 1;
    if (hi > (long)sk - 1)
        hi = (long)sk - 1;
    if (window > 0 && mk_mutant("window-plus"))
        window++;
    long lo = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
    *first = (size_t)lo;
    *last = (size_t)hi;
}

MK_KERNEL mk_softmax_oss_fwd_kernel(float *p, size_t s, size_t sk, const int32_t *qpos,
                                    bool causal, int window, const float *sink, float scale,
                                    bool exact, mk_grid ga, mk_grid gp)
{
    MK_SHARED float red[MPK_BLOCK];
    MK_SHARED float stat[2]; /* max, sum */
    for (size_t row = blockIdx.x; row < s; row += gridDim.x) {
        float *pi = p + row * sk;
        size_t lo, hi;
        mk_oss_keys(qpos, row, sk, causal, window, &lo, &hi);
        bool has_sink = sink && !mk_mutant("sink-dropped");
        MK_THREADS(t) { red[t] = mk_row_scale_max(pi, lo, hi + 1, t, scale, exact, ga); }
        MK_SYNC();
        mk_block_reduce(red, &stat[0], true);
        /* the sink joins the maximum (thread 0, after the reduction's last barrier) */
        MK_THREADS(t)
        {
            if (t == 0 && has_sink && *sink > stat[0])
                stat[0] = *sink;
        }
        MK_SYNC();
        MK_THREADS(t) { red[t] = mk_row_exp_sum(pi, lo, hi + 1, t, stat[0]); }
        MK_SYNC();
        if (exact) { /* the CPU's order: the sink's term first, then the keys */
            MK_THREADS(t)
            {
                if (t == 0) {
                    float sum = has_sink ? mk_exp(*sink - stat[0]) : 0;
                    for (size_t j = lo; j <= hi; j++)
                        sum += pi[j];
                    stat[1] = sum;
                }
            }
        } else {
            mk_block_reduce(red, &stat[1], false);
            MK_THREADS(t)
            {
                if (t == 0 && has_sink)
                    stat[1] += mk_exp(*sink - stat[0]);
            }
        }
        MK_SYNC();
        MK_THREADS(t)
        {
            float sum = stat[1];
            for (size_t j = (size_t)t; j < sk; j += MPK_BLOCK) {
                float v = j >= lo && j <= hi ? pi[j] / sum : 0;
                pi[j] = exact && j >= lo && j <= hi ? mk_round_to(v, gp) : v;
            }
        }
        MK_SYNC();
    }
}

int mpk_softmax_oss_forward(float *p, int s, int sk, const int32_t *qpos, bool causal,
                            int window, const float *sink, float scale, bool exact, void *stream)
{
    if (s < 0 || sk < 1 || window < 0)
        return MPK_EINVAL;
    if (s == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_softmax_oss_fwd_kernel, mk_grid_for((size_t)s * MPK_BLOCK), stream, p,
              (size_t)s, (size_t)sk, qpos, causal, window, sink, scale, exact,
              mk_grid_of(MP_Q_ACT, MP_EXACT_MAX_INT), mk_grid_of(MP_Q_PROB, MP_EXACT_MAX_INT));
    return st;
}

/* ds = p (dP - sum p dP) scale on the row's keys, 0 elsewhere; terms[row] =
 * the sink logit's gradient from the row, -(1 - sum p) sum p dP (exact:
 * rounded onto the attention-gradient grid). */
MK_KERNEL mk_softmax_oss_bwd_kernel(float *ds, float *terms, const float *p, size_t s, size_t sk,
                                    const int32_t *qpos, bool causal, int window, float scale,
                                    bool exact, mk_grid gg)
{
    MK_SHARED float red[MPK_BLOCK], red_kept[MPK_BLOCK];
    MK_SHARED float stat[2]; /* sum p dP, sum p */
    for (size_t row = blockIdx.x; row < s; row += gridDim.x) {
        const float *pi = p + row * sk;
        float *di = ds + row * sk;
        size_t lo, hi;
        mk_oss_keys(qpos, row, sk, causal, window, &lo, &hi);
        if (exact) {
            MK_THREADS(t)
            {
                if (t == 0) {
                    float dot = 0, kept = 0;
                    for (size_t j = lo; j <= hi; j++) {
                        dot += pi[j] * di[j];
                        kept += pi[j];
                    }
                    stat[0] = dot;
                    stat[1] = kept;
                }
            }
        } else {
            MK_THREADS(t)
            {
                float a = 0, k = 0;
                for (size_t j = lo + (size_t)t; j <= hi; j += MPK_BLOCK) {
                    a += pi[j] * di[j];
                    k += pi[j];
                }
                red[t] = a;
                red_kept[t] = k;
            }
            MK_SYNC();
            mk_block_reduce(red, &stat[0], false);
            mk_block_reduce(red_kept, &stat[1], false);
        }
        MK_SYNC();
        MK_THREADS(t)
        {
            float dot = stat[0];
            for (size_t j = (size_t)t; j < sk; j += MPK_BLOCK) {
                float v = j >= lo && j <= hi ? pi[j] * (di[j] - dot) * scale : 0;
                di[j] = exact && j >= lo && j <= hi ? mk_round_to(v, gg) : v;
            }
            if (t == 0 && terms) {
                float term = -(1 - stat[1]) * dot;
                terms[row] = exact ? mk_round_to(term, gg) : term;
            }
        }
        MK_SYNC();
    }
}

/* *dsink += the rows' terms added in row order (one thread). */
MK_KERNEL mk_sink_sum_kernel(float *dsink, const float *terms, size_t s)
{
    MK_THREADS(t)
    {
        if (t == 0 && blockIdx.x == 0) {
            float acc = 0;
            size_t n = mk_mutant("dsink-row") && s > 0 ? s - 1 : s;
            for (size_t i = 0; i < n; i++)
                acc += terms[i];
            *dsink += acc;
        }
    }
}

int mpk_softmax_oss_backward(float *ds, float *dsink, float *terms, const float *p, int s,
                             int sk, const int32_t *qpos, bool causal, int window, float scale,
                             bool exact, void *stream)
{
    if (s < 0 || sk < 1 || window < 0 || (dsink && !terms))
        return MPK_EINVAL;
    if (s == 0)
        return MPK_OK;
    int st;
    MK_LAUNCH(st, mk_softmax_oss_bwd_kernel, mk_grid_for((size_t)s * MPK_BLOCK), stream, ds,
              dsink ? terms : NULL, p, (size_t)s, (size_t)sk, qpos, causal, window, scale, exact,
              mk_grid_of(MP_Q_GRAD_ATT, MP_EXACT_MAX_INT));
    if (st == MPK_OK && dsink)
        MK_LAUNCH(st, mk_sink_sum_kernel, 1, stream, dsink, terms, (size_t)s);
    return st;
}

/* ---- the clamped SwiGLU (GptOssExperts._apply_gate) ---- */

#define MK_OSS_GLU_ALPHA ((float)1.702) /* as the CPU rounds it: via double */

MK_FN float mk_clamp_hi(float x, float hi) { return x > hi ? hi : x; }

MK_KERNEL mk_swiglu_clamped_fwd_kernel(float *out, const float *gu, size_t rows, size_t f,
                                       float limit)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, rows * f)
        {
            size_t r = i / f, c = i % f;
            float g = mk_clamp_hi(gu[r * 2 * f + c], limit);
            float u = mk_clamp_hi(gu[r * 2 * f + f + c], limit);
            if (!mk_mutant("clamp-low"))
                u = u < -limit ? -limit : u;
            out[i] = g / (1 + mk_exp(-MK_OSS_GLU_ALPHA * g)) * (u + 1);
        }
    }
}

int mpk_swiglu_clamped_forward(float *out, const float *gu, int rows, int f, float limit,
                               void *stream)
{
    if (rows < 0 || f < 0)
        return MPK_EINVAL;
    MK_ELEMENTWISE((size_t)rows * (size_t)f, stream, mk_swiglu_clamped_fwd_kernel, out, gu,
                   (size_t)rows, (size_t)f, limit);
}

MK_KERNEL mk_swiglu_clamped_bwd_kernel(float *dgu, const float *dout, const float *gu,
                                       size_t rows, size_t f, float limit)
{
    MK_THREADS(t)
    {
        MK_EACH(t, i, rows * f)
        {
            size_t r = i / f, c = i % f;
            float gr = gu[r * 2 * f + c], ur = gu[r * 2 * f + f + c], dy = dout[i];
            float g = mk_clamp_hi(gr, limit), u = mk_clamp_hi(ur, limit);
            u = u < -limit ? -limit : u;
            float a = MK_OSS_GLU_ALPHA, sg = 1 / (1 + mk_exp(-a * g));
            bool gate_held = gr > limit && !mk_mutant("clamp-grad");
            dgu[r * 2 * f + c] = gate_held ? 0 : dy * (u + 1) * sg * (1 + a * g * (1 - sg));
            dgu[r * 2 * f + f + c] = ur > limit || ur < -limit ? 0 : dy * g * sg;
        }
    }
}

int mpk_swiglu_clamped_backward(float *dgu, const float *dout, const float *gu, int rows, int f,
                                float limit, void *stream)
{
    if (rows < 0 || f < 0)
        return MPK_EINVAL;
    MK_ELEMENTWISE((size_t)rows * (size_t)f, stream, mk_swiglu_clamped_bwd_kernel, dgu, dout, gu,
                   (size_t)rows, (size_t)f, limit);
}
