/* attention_sink.c — GPT-OSS's row-wise ops on the CPU: the attention softmax
 * with a sliding window and a learned sink, and the clamped SwiGLU
 * (HuggingFace's modeling_gpt_oss: GptOssAttention's eager path and
 * GptOssExperts). Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"
#include "exec/test_mutant.h"

/* Test-only (the mutant build of tests/exec/meson.build): the error that the
 * environment's MP_TEST_OSS_MUTANT names, planted so that the PyTorch fixture
 * oss.bin is shown to catch it: window-plus / window-minus (the band one key
 * wider / narrower), sink-dropped (the sink left out of the denominator),
 * sink-scaled (the sink logit scaled as the scores are), clamp-missing (the
 * SwiGLU's gate and up not clamped), window-local (the band measured from the
 * query's row on this rank, not its global position: wrong only under CP). */
#ifdef MP_TEST_OSS_MUTANT
#define mutant(what) mp_test_mutant_named("MP_TEST_OSS_MUTANT", (what))
#else
#define mutant(what) ((void)(what), false)
#endif

/* The keys query row i sees: [first, last]. Causal: last is its position
 * (qpos[i], or i); a window w keeps the w keys ending there (HF's
 * sliding_window: key j is kept when pos - j < w). */
static void key_range(int i, int sk, const int *qpos, bool causal, int window, int *first,
                      int *last)
{
    int t = qpos ? qpos[i] : i;
    *last = causal ? t : sk - 1;
    window += window > 0 ? (mutant("window-plus") ? 1 : mutant("window-minus") ? -1 : 0) : 0;
    /* the band starts window - 1 before the query's global position (under
     * CP not its row on this rank: the planted error window-local) */
    int anchor = mutant("window-local") ? i : t;
    *first = window > 0 && anchor - window + 1 > 0 ? anchor - window + 1 : 0;
}

void mp_attn_softmax_oss(real *p, int s, int sk, const int *qpos, bool causal, int window,
                         const real *sink, real scale, bool exact)
{
    for (int i = 0; i < s; i++) {
        int lo, hi;
        key_range(i, sk, qpos, causal, window, &lo, &hi);
        real *pi = p + (size_t)i * sk;
        for (int j = lo; j <= hi; j++)
            pi[j] *= scale;
        mp_q(exact, pi + lo, (size_t)(hi - lo + 1), MP_Q_ACT);
        /* the sink joins the maximum and the denominator, and takes no value */
        if (mutant("sink-dropped"))
            sink = NULL;
        real sink_scaled = sink ? *sink * scale : 0;
        if (mutant("sink-scaled"))
            sink = &sink_scaled;
        real mx = sink ? *sink : -INFINITY;
        for (int j = lo; j <= hi; j++)
            mx = pi[j] > mx ? pi[j] : mx;
        real sum = sink ? R_EXP(*sink - mx) : 0;
        for (int j = lo; j <= hi; j++) {
            pi[j] = R_EXP(pi[j] - mx);
            sum += pi[j];
        }
        for (int j = lo; j <= hi; j++)
            pi[j] /= sum;
        mp_q(exact, pi + lo, (size_t)(hi - lo + 1), MP_Q_PROB);
        for (int j = 0; j < lo; j++)
            pi[j] = 0;
        for (int j = hi + 1; j < sk; j++)
            pi[j] = 0;
    }
}

/* ds = p (dP - sum p dP) scale over the kept keys. The sink's probability is
 * what the keys leave, 1 - sum p (p as the forward kept it), and its
 * logit's gradient -p_sink sum p dP (unscaled: the sink is added after the
 * scale), summed over the rows in order into *dsink; exact mode rounds each
 * row's term onto the attention-gradient grid, so that the sums over rows,
 * samples and ranks are exact in any order (quant.h). */
void mp_attn_softmax_oss_backward(real *ds, real *dsink, const real *p, int s, int sk,
                                  const int *qpos, bool causal, int window, real scale,
                                  bool exact)
{
    real acc = 0;
    for (int i = 0; i < s; i++) {
        int lo, hi;
        key_range(i, sk, qpos, causal, window, &lo, &hi);
        const real *pi = p + (size_t)i * sk;
        real *di = ds + (size_t)i * sk, dot_pdp = 0, kept = 0;
        for (int j = lo; j <= hi; j++) {
            dot_pdp += pi[j] * di[j];
            kept += pi[j];
        }
        for (int j = lo; j <= hi; j++)
            di[j] = pi[j] * (di[j] - dot_pdp) * scale;
        mp_q(exact, di + lo, (size_t)(hi - lo + 1), MP_Q_GRAD_ATT);
        for (int j = 0; j < lo; j++)
            di[j] = 0;
        for (int j = hi + 1; j < sk; j++)
            di[j] = 0;
        if (dsink) {
            real term = -(1 - kept) * dot_pdp;
            mp_q(exact, &term, 1, MP_Q_GRAD_ATT);
            acc += term;
        }
    }
    if (dsink)
        *dsink += acc;
}

/* GPT-OSS's SwiGLU (HF GptOssExperts._apply_gate): gate clamped above at
 * limit, up to [-limit, limit], out = gate sigmoid(1.702 gate) (up + 1).
 * gu[rows, 2f] holds [gate | up] as the plain SwiGLU's does. */
#define OSS_GLU_ALPHA 1.702

static real clamp_hi(real x, real hi) { return x > hi ? hi : x; }

void mp_swiglu_clamped_forward(real *out, const real *gu, int rows, int f, real limit)
{
    if (mutant("clamp-missing"))
        limit = (real)INFINITY;
    for (int r = 0; r < rows; r++) {
        const real *gr = gu + (size_t)r * 2 * f, *ur = gr + f;
        real *o = out + (size_t)r * f;
        for (int i = 0; i < f; i++) {
            real g = clamp_hi(gr[i], limit), u = clamp_hi(ur[i], limit);
            u = u < -limit ? -limit : u;
            o[i] = g / (1 + R_EXP(-(real)OSS_GLU_ALPHA * g)) * (u + 1);
        }
    }
}

/* The gradient stops where a clamp held (PyTorch's clamp passes it where
 * the input lies inside the bounds, ends included):
 * d gate = dout (up + 1) s (1 + alpha gate (1 - s)), s = sigmoid(alpha gate);
 * d up = dout gate s. */
void mp_swiglu_clamped_backward(real *dgu, const real *dout, const real *gu, int rows, int f,
                                real limit)
{
    for (int r = 0; r < rows; r++) {
        const real *gr = gu + (size_t)r * 2 * f, *ur = gr + f, *dy = dout + (size_t)r * f;
        real *dg = dgu + (size_t)r * 2 * f, *du = dg + f;
        for (int i = 0; i < f; i++) {
            real g = clamp_hi(gr[i], limit), u = clamp_hi(ur[i], limit);
            u = u < -limit ? -limit : u;
            real a = (real)OSS_GLU_ALPHA, sg = 1 / (1 + R_EXP(-a * g));
            dg[i] = gr[i] > limit ? 0 : dy[i] * (u + 1) * sg * (1 + a * g * (1 - sg));
            du[i] = ur[i] > limit || ur[i] < -limit ? 0 : dy[i] * g * sg;
        }
    }
}
