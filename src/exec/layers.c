/* layers.c — the elementwise and row-wise layers of the GPT and its LLaMA
 * variants, forward and backward side by side: LayerNorm, RMSNorm, GeLU,
 * SwiGLU, rotary embeddings, bias, residual add, and exact mode's rounding
 * onto dyadic grids (quant.h). Compiled once per precision
 * (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"

void mp_quantize(real *x, size_t n, int grid, int max_int)
{
    /* ldexp by a power of two is exact; nearbyint rounds half to even in the
     * default rounding mode; both are the same function of the same bits in
     * every run. */
    real up = (real)ldexp(1.0, grid), down = (real)ldexp(1.0, -grid), lim = (real)max_int;
    for (size_t i = 0; i < n; i++) {
        real k = (real)nearbyint((double)(x[i] * up));
        if (k > lim)
            k = lim;
        if (k < -lim)
            k = -lim;
        x[i] = k * down;
    }
}

void mp_q(bool exact, real *x, size_t n, int grid)
{
    if (exact)
        mp_quantize(x, n, grid, MP_EXACT_MAX_INT);
}

/* LayerNorm over the last dimension h of x[rows, h]:
 *   mean = sum(x)/h, rstd = 1/sqrt(var + eps), xhat = (x - mean) * rstd,
 *   out = xhat * w + b,
 * eps the model's norm_eps rounded to the precision (real)eps. Each row is
 * computed by the same code in the same order whichever run it is in;
 * exact mode rounds xhat (it enters the dw sum over tokens) and out. The
 * backward needs no eps: it reads the kept xhat and rstd. */
void mp_layernorm_forward(real *out, real *xhat, real *rstd, const real *x, const real *w,
                          const real *b, int rows, int h, double eps, bool exact)
{
    for (int r = 0; r < rows; r++) {
        const real *xr = x + (size_t)r * h;
        real *xh = xhat + (size_t)r * h, *o = out + (size_t)r * h;
        real mean = 0, var = 0;
        for (int i = 0; i < h; i++)
            mean += xr[i];
        mean /= (real)h;
        for (int i = 0; i < h; i++) {
            real c = xr[i] - mean;
            var += c * c;
        }
        var /= (real)h;
        real rs = (real)1 / R_SQRT(var + (real)eps);
        rstd[r] = rs;
        for (int i = 0; i < h; i++)
            xh[i] = (xr[i] - mean) * rs;
        mp_q(exact, xh, (size_t)h, MP_Q_ACT);
        for (int i = 0; i < h; i++)
            o[i] = xh[i] * w[i] + b[i];
        mp_q(exact, o, (size_t)h, MP_Q_ACT);
    }
}

/* Backward: with g = dout * w,
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
 *   dw += sum_rows dout * xhat,  db += sum_rows dout. */
void mp_layernorm_backward(real *dx, real *dw, real *db, const real *dout, const real *xhat,
                           const real *rstd, const real *w, int rows, int h, bool exact)
{
    for (int r = 0; r < rows; r++) {
        const real *dy = dout + (size_t)r * h, *xh = xhat + (size_t)r * h;
        real *d = dx + (size_t)r * h;
        real mg = 0, mgx = 0;
        for (int i = 0; i < h; i++) {
            real g = dy[i] * w[i];
            mg += g;
            mgx += g * xh[i];
            dw[i] += dy[i] * xh[i];
            db[i] += dy[i];
        }
        mg /= (real)h;
        mgx /= (real)h;
        for (int i = 0; i < h; i++)
            d[i] = rstd[r] * (dy[i] * w[i] - mg - xh[i] * mgx);
        mp_q(exact, d, (size_t)h, MP_Q_GRAD);
    }
}

/* gelu(x) = x/2 (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2/pi).
 * MP_TEST_GELU_C is defined only by the test build of tests/exec/meson.build
 * (megaplan-gelu-mutant): a wrong constant that the PyTorch fixtures must catch. */
#define GELU_K 0.7978845608028654
#ifdef MP_TEST_GELU_C
#define GELU_C MP_TEST_GELU_C
#else
#define GELU_C 0.044715
#endif

static real gelu_tanh_of(real x)
{
    return (real)0.5 * x * (1 + R_TANH((real)GELU_K * (x + (real)GELU_C * x * x * x)));
}

static real gelu_tanh_grad(real x)
{
    real u = (real)GELU_K * (x + (real)GELU_C * x * x * x);
    real th = R_TANH(u);
    real du = (real)GELU_K * (1 + (real)(3 * GELU_C) * x * x);
    return (real)0.5 * (1 + th) + (real)0.5 * x * (1 - th * th) * du;
}

/* The exact GELU (Hendrycks & Gimpel 2016; torch's nn.GELU(), BERT's,
 * Megatron-Core's F.gelu): gelu(x) = x Phi(x) = x/2 (1 + erf(x / sqrt 2)),
 * gelu'(x) = Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi). */
#define GELU_RSQRT2 0.7071067811865476   /* 1/sqrt(2) */
#define GELU_RSQRT2PI 0.3989422804014327 /* 1/sqrt(2 pi) */

static real gelu_erf_of(real x)
{
    return (real)0.5 * x * (1 + R_ERF(x * (real)GELU_RSQRT2));
}

static real gelu_erf_grad(real x)
{
    real cdf = (real)0.5 * (1 + R_ERF(x * (real)GELU_RSQRT2));
    return cdf + x * (real)GELU_RSQRT2PI * R_EXP((real)-0.5 * x * x);
}

void mp_gelu_forward(real *out, const real *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = gelu_tanh_of(in[i]);
}

void mp_gelu_backward(real *din, const real *dout, const real *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        din[i] = dout[i] * gelu_tanh_grad(in[i]);
}

void mp_gelu_erf_forward(real *out, const real *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = gelu_erf_of(in[i]);
}

void mp_gelu_erf_backward(real *din, const real *dout, const real *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        din[i] = dout[i] * gelu_erf_grad(in[i]);
}

/* GEGLU (Shazeer 2020; T5 1.1's gated-gelu): gu[rows, 2f] holds [gate | up]
 * of each row, as SwiGLU's; out[rows, f] = gelu(gate) * up with GELU's tanh
 * form (HF T5's gelu_new) or, erf, the exact one. Backward: d gate = dout *
 * up * gelu'(gate), d up = dout * gelu(gate). */
void mp_geglu_forward(real *out, const real *gu, int rows, int f, bool erf)
{
    for (int r = 0; r < rows; r++) {
        const real *gr = gu + (size_t)r * 2 * f, *ur = gr + f;
        real *o = out + (size_t)r * f;
        for (int i = 0; i < f; i++)
            o[i] = (erf ? gelu_erf_of(gr[i]) : gelu_tanh_of(gr[i])) * ur[i];
    }
}

void mp_geglu_backward(real *dgu, const real *dout, const real *gu, int rows, int f, bool erf)
{
    for (int r = 0; r < rows; r++) {
        const real *gr = gu + (size_t)r * 2 * f, *ur = gr + f, *dy = dout + (size_t)r * f;
        real *dg = dgu + (size_t)r * 2 * f, *du = dg + f;
        for (int i = 0; i < f; i++) {
            real x = gr[i];
            real a = erf ? gelu_erf_of(x) : gelu_tanh_of(x);
            real da = erf ? gelu_erf_grad(x) : gelu_tanh_grad(x);
            dg[i] = dy[i] * ur[i] * da;
            du[i] = dy[i] * a;
        }
    }
}

/* RMSNorm (LLaMA) over the last dimension h of x[rows, h]:
 *   rstd = 1/sqrt(sum(x^2)/h + eps), xhat = x * rstd, out = xhat * w.
 * Exact mode rounds xhat and out, as LayerNorm does. */
void mp_rmsnorm_forward(real *out, real *xhat, real *rstd, const real *x, const real *w,
                        int rows, int h, double eps, bool exact)
{
    for (int r = 0; r < rows; r++) {
        const real *xr = x + (size_t)r * h;
        real *xh = xhat + (size_t)r * h, *o = out + (size_t)r * h;
        real ms = 0;
        for (int i = 0; i < h; i++)
            ms += xr[i] * xr[i];
        ms /= (real)h;
        real rs = (real)1 / R_SQRT(ms + (real)eps);
        rstd[r] = rs;
        for (int i = 0; i < h; i++)
            xh[i] = xr[i] * rs;
        mp_q(exact, xh, (size_t)h, MP_Q_ACT);
        for (int i = 0; i < h; i++)
            o[i] = xh[i] * w[i];
        mp_q(exact, o, (size_t)h, MP_Q_ACT);
    }
}

/* Backward: with g = dout * w,
 *   dx = rstd * (g - xhat * mean(g * xhat)),   dw += sum_rows dout * xhat. */
void mp_rmsnorm_backward(real *dx, real *dw, const real *dout, const real *xhat,
                         const real *rstd, const real *w, int rows, int h, bool exact)
{
    for (int r = 0; r < rows; r++) {
        const real *dy = dout + (size_t)r * h, *xh = xhat + (size_t)r * h;
        real *d = dx + (size_t)r * h;
        real mgx = 0;
        for (int i = 0; i < h; i++) {
            mgx += dy[i] * w[i] * xh[i];
            dw[i] += dy[i] * xh[i];
        }
        mgx /= (real)h;
        for (int i = 0; i < h; i++)
            d[i] = rstd[r] * (dy[i] * w[i] - xh[i] * mgx);
        mp_q(exact, d, (size_t)h, MP_Q_GRAD);
    }
}

/* SwiGLU: gu[rows, 2f] holds [gate | up] of each row (this rank's share of
 * both); out[rows, f] = silu(gate) * up, silu(x) = x / (1 + e^-x). */
void mp_swiglu_forward(real *out, const real *gu, int rows, int f)
{
    for (int r = 0; r < rows; r++) {
        const real *gr = gu + (size_t)r * 2 * f, *ur = gr + f;
        real *o = out + (size_t)r * f;
        for (int i = 0; i < f; i++) {
            real x = gr[i];
            o[i] = x / (1 + R_EXP(-x)) * ur[i];
        }
    }
}

/* dgu[rows, 2f] from dout[rows, f]: d gate = dout * up * silu'(gate),
 * d up = dout * silu(gate), silu'(x) = s (1 + x (1 - s)), s = sigmoid(x). */
void mp_swiglu_backward(real *dgu, const real *dout, const real *gu, int rows, int f)
{
    for (int r = 0; r < rows; r++) {
        const real *gr = gu + (size_t)r * 2 * f, *ur = gr + f, *dy = dout + (size_t)r * f;
        real *dg = dgu + (size_t)r * 2 * f, *du = dg + f;
        for (int i = 0; i < f; i++) {
            real x = gr[i], sg = 1 / (1 + R_EXP(-x));
            dg[i] = dy[i] * ur[i] * sg * (1 + x * (1 - sg));
            du[i] = dy[i] * x * sg;
        }
    }
}

/* Rotary position embedding (Su et al. 2021; the rotate-half layout of
 * LLaMA, Megatron-LM and HF's GPT-OSS): in each head of width hd, element k
 * and k + hd/2 turn by the angle pos * inv_freq(k) (rope.h: theta^(-2k/hd),
 * or YaRN's frequencies) and are scaled by the attention factor (1, or
 * YaRN's mscale, which HF applies to cos and sin). x holds rows r = i*b + n
 * at position pos[i] (this rank's positions), heads of hd columns from
 * column 0, rows ld apart. inverse: the transpose (the backward: turned
 * back, scaled the same). Exact mode puts the scaled cos and sin on the
 * probability grid (up to twice its usual range: mscale may exceed 1) and the
 * result on `grid`, the same function of the same values in every run. */
void mp_rope(real *x, size_t ld, int heads, int hd, const mp_rope_spec *spec, const int *pos,
             int s, int b, bool inverse, bool exact, int grid)
{
    int half = hd / 2;
    double mscale = mp_rope_attention_factor(spec);
    for (int i = 0; i < s; i++) {
        for (int k = 0; k < half; k++) {
            double angle = (double)pos[i] * mp_rope_inv_freq(spec, k, hd);
            real cs[2] = {(real)(cos(angle) * mscale), (real)(sin(angle) * mscale)};
            if (exact)
                mp_quantize(cs, 2, MP_Q_PROB, 2 * MP_EXACT_MAX_INT);
            real c = cs[0], sn = inverse ? -cs[1] : cs[1];
            for (int n = 0; n < b; n++) {
                real *row = x + ((size_t)i * b + n) * ld;
                for (int a = 0; a < heads; a++) {
                    real *x1 = row + (size_t)a * hd + k, *x2 = x1 + half;
                    real u = *x1, v = *x2;
                    *x1 = u * c - v * sn;
                    *x2 = v * c + u * sn;
                }
            }
        }
        for (int n = 0; n < b; n++)
            mp_q(exact, x + ((size_t)i * b + n) * ld, (size_t)heads * hd, grid);
    }
}

void mp_bias_add(real *y, const real *b, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            y[(size_t)r * cols + c] += b[c];
}

void mp_bias_grad(real *db, const real *dy, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            db[c] += dy[(size_t)r * cols + c];
}

void mp_add(real *y, const real *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

void mp_quantize_rows(real *x, size_t rows, size_t cols, size_t ld, int grid, int max_int)
{
    for (size_t r = 0; r < rows; r++)
        mp_quantize(x + r * ld, cols, grid, max_int);
}

void mp_tanh_forward(real *out, const real *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = R_TANH(in[i]);
}

void mp_tanh_backward(real *dx, const real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dx[i] *= 1 - y[i] * y[i];
}

/* ---- the row-wise parts of attention and cross-entropy, and row lookups ---- */

/* The last key query row i sees. */
static inline int last_key(int i, int sk, const int *qpos, bool causal)
{
    return !causal ? sk - 1 : qpos ? qpos[i] : i;
}

void mp_attn_softmax(real *p, int s, int sk, const int *qpos, bool causal, real scale,
                     bool exact)
{
    for (int i = 0; i < s; i++) {
        int gi = last_key(i, sk, qpos, causal);
        real *pi = p + (size_t)i * sk;
        for (int j = 0; j <= gi; j++)
            pi[j] *= scale;
        mp_q(exact, pi, (size_t)gi + 1, MP_Q_ACT);
        real mx = -INFINITY;
        for (int j = 0; j <= gi; j++)
            mx = pi[j] > mx ? pi[j] : mx;
        real sum = 0;
        for (int j = 0; j <= gi; j++) {
            pi[j] = R_EXP(pi[j] - mx);
            sum += pi[j];
        }
        for (int j = 0; j <= gi; j++)
            pi[j] /= sum;
        mp_q(exact, pi, (size_t)gi + 1, MP_Q_PROB);
        for (int j = gi + 1; j < sk; j++)
            pi[j] = 0;
    }
}

void mp_attn_softmax_backward(real *ds, const real *p, int s, int sk, const int *qpos,
                              bool causal, real scale, bool exact)
{
    for (int i = 0; i < s; i++) {
        int gi = last_key(i, sk, qpos, causal);
        const real *pi = p + (size_t)i * sk;
        real *di = ds + (size_t)i * sk, dot_pdp = 0;
        for (int j = 0; j <= gi; j++)
            dot_pdp += pi[j] * di[j];
        for (int j = 0; j <= gi; j++)
            di[j] = pi[j] * (di[j] - dot_pdp) * scale;
        mp_q(exact, di, (size_t)gi + 1, MP_Q_GRAD_ATT);
        for (int j = gi + 1; j < sk; j++)
            di[j] = 0;
    }
}

/* Whether target t is one of this rank's vocabulary columns [lo, lo + V):
 * a negative target (BERT's unmasked tokens) is no one's. */
static inline bool owns(int32_t t, size_t lo, size_t V)
{
    return t >= 0 && (size_t)t >= lo && (size_t)t < lo + V;
}

void mp_ce_max(real *mx, const real *logits, size_t S, size_t V)
{
    for (size_t r = 0; r < S; r++) {
        const real *lr = logits + r * V;
        real m = -INFINITY;
        for (size_t j = 0; j < V; j++)
            m = lr[j] > m ? lr[j] : m;
        mx[r] = m;
    }
}

void mp_ce_exp_sum(real *logits, real *sum, real *tl, const real *mx,
                   const int32_t *targets, size_t lo, size_t S, size_t V, bool exact)
{
    for (size_t r = 0; r < S; r++) {
        real *lr = logits + r * V;
        tl[r] = owns(targets[r], lo, V) ? lr[(size_t)targets[r] - lo] : 0;
        for (size_t j = 0; j < V; j++)
            lr[j] = R_EXP(lr[j] - mx[r]);
        mp_q(exact, lr, V, MP_Q_PROB);
        real s = 0;
        for (size_t j = 0; j < V; j++)
            s += lr[j];
        sum[r] = s;
    }
}

void mp_ce_loss(real *loss, real *logits, const real *sum, const real *mx, const real *tl,
                const int32_t *targets, size_t S, size_t V, bool exact)
{
    for (size_t r = 0; r < S; r++) {
        loss[r] = targets[r] < 0 ? 0 : R_LOG(sum[r]) + mx[r] - tl[r];
        real *lr = logits + r * V;
        for (size_t j = 0; j < V; j++)
            lr[j] /= sum[r];
        mp_q(exact, lr, V, MP_Q_PROB);
    }
    if (exact)
        mp_quantize(loss, S, MP_Q_LOSS, MP_Q_LOSS_MAX_INT);
}

void mp_ce_backward(real *logits, const int32_t *targets, size_t lo, size_t S, size_t V,
                    real scale, bool masked)
{
    for (size_t r = 0; r < S; r++) {
        real *lr = logits + r * V;
        if (masked && targets[r] < 0) {
            memset(lr, 0, V * sizeof(real));
            continue;
        }
        if (owns(targets[r], lo, V))
            lr[(size_t)targets[r] - lo] -= 1;
        for (size_t j = 0; j < V; j++)
            lr[j] *= scale;
    }
}

void mp_gather_rows(real *out, const real *table, const int32_t *idx, size_t lo, size_t n,
                    size_t rows, size_t h, bool accumulate)
{
    for (size_t r = 0; r < rows; r++) {
        real *dst = out + r * h;
        if (owns(idx[r], lo, n)) {
            const real *src = table + ((size_t)idx[r] - lo) * h;
            if (accumulate)
                mp_add(dst, src, h);
            else
                memcpy(dst, src, h * sizeof(real));
        } else if (!accumulate) {
            memset(dst, 0, h * sizeof(real));
        }
    }
}

void mp_scatter_add_rows(real *table, const real *x, const int32_t *idx, size_t lo, size_t n,
                         size_t rows, size_t h)
{
    for (size_t r = 0; r < rows; r++)
        if (owns(idx[r], lo, n))
            mp_add(table + ((size_t)idx[r] - lo) * h, x + r * h, h);
}

double mp_sum_in_order(const real *x, size_t n)
{
    real total = 0;
    for (size_t i = 0; i < n; i++)
        total += x[i];
    return (double)total;
}

