/* test_exec_layers.c — the executor's layers and model, one rank, no MPI:
 * every backward against central finite differences of its forward (in
 * double), the tensor-parallel slicing, and exact mode's data (on its grids,
 * and not degenerate: a test of bit equality on all-zero gradients would
 * prove nothing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/moe.h"
#include "exec/params.h"
#include "exec/quant.h"
#include "exec/runtime.h"
#include "exec/t5.h"

static double frand(uint64_t *s)
{
    *s = mp_mix64(*s);
    return (double)(*s >> 11) * 0x1.0p-53 * 2 - 1;
}

/* ---- LayerNorm ---- */

static double ln_loss(const double *x, const double *w, const double *b, const double *dy,
                      int rows, int h, double eps)
{
    double *out = malloc(sizeof(double) * (size_t)rows * h);
    double *xh = malloc(sizeof(double) * (size_t)rows * h), rs[8];
    mp_layernorm_forward_f64(out, xh, rs, x, w, b, rows, h, eps, false);
    double s = 0;
    for (int i = 0; i < rows * h; i++)
        s += out[i] * dy[i];
    free(out);
    free(xh);
    return s;
}

/* The backward against central differences of the forward, at the usual
 * epsilon and at one large enough to weigh in rstd (the backward reads the
 * kept rstd, so it must hold for any eps). */
static void layernorm_backward_case(double eps)
{
    enum { R = 3, H = 8 };
    double x[R * H], w[H], b[H], dy[R * H], out[R * H], xh[R * H], rs[R], dx[R * H];
    double dw[H] = {0}, db[H] = {0};
    uint64_t s = 7;
    for (int i = 0; i < R * H; i++) {
        x[i] = frand(&s) * 2;
        dy[i] = frand(&s);
    }
    for (int i = 0; i < H; i++) {
        w[i] = 1 + 0.3 * frand(&s);
        b[i] = 0.1 * frand(&s);
    }
    mp_layernorm_forward_f64(out, xh, rs, x, w, b, R, H, eps, false);
    mp_layernorm_backward_f64(dx, dw, db, dy, xh, rs, w, R, H, false);
    const double e = 1e-6;
    for (int i = 0; i < R * H; i++) {
        double keep = x[i];
        x[i] = keep + e;
        double up = ln_loss(x, w, b, dy, R, H, eps);
        x[i] = keep - e;
        double down = ln_loss(x, w, b, dy, R, H, eps);
        x[i] = keep;
        assert_true(fabs((up - down) / (2 * e) - dx[i]) < 1e-6);
    }
    for (int i = 0; i < H; i++) {
        double keep = w[i];
        w[i] = keep + e;
        double up = ln_loss(x, w, b, dy, R, H, eps);
        w[i] = keep - e;
        double down = ln_loss(x, w, b, dy, R, H, eps);
        w[i] = keep;
        assert_true(fabs((up - down) / (2 * e) - dw[i]) < 1e-6);
        keep = b[i];
        b[i] = keep + e;
        up = ln_loss(x, w, b, dy, R, H, eps);
        b[i] = keep - e;
        down = ln_loss(x, w, b, dy, R, H, eps);
        b[i] = keep;
        assert_true(fabs((up - down) / (2 * e) - db[i]) < 1e-6);
    }
}

static void test_layernorm_backward(void **state)
{
    (void)state;
    layernorm_backward_case(1e-5);
    layernorm_backward_case(0.25);
}

/* ---- RMSNorm and SwiGLU ---- */

static double rms_loss(const double *x, const double *w, const double *dy, int rows, int h,
                       double eps)
{
    double out[64], xh[64], rs[8], s = 0;
    mp_rmsnorm_forward_f64(out, xh, rs, x, w, rows, h, eps, false);
    for (int i = 0; i < rows * h; i++)
        s += out[i] * dy[i];
    return s;
}

static void rmsnorm_backward_case(double eps)
{
    enum { R = 3, H = 8 };
    double x[R * H], w[H], dy[R * H], out[R * H], xh[R * H], rs[R], dx[R * H], dw[H] = {0};
    uint64_t s = 11;
    for (int i = 0; i < R * H; i++) {
        x[i] = frand(&s) * 2 + 0.5; /* not centred: RMSNorm has no mean to take out */
        dy[i] = frand(&s);
    }
    for (int i = 0; i < H; i++)
        w[i] = 1 + 0.3 * frand(&s);
    mp_rmsnorm_forward_f64(out, xh, rs, x, w, R, H, eps, false);
    mp_rmsnorm_backward_f64(dx, dw, dy, xh, rs, w, R, H, false);
    const double e = 1e-6;
    for (int i = 0; i < R * H; i++) {
        double keep = x[i];
        x[i] = keep + e;
        double up = rms_loss(x, w, dy, R, H, eps);
        x[i] = keep - e;
        double down = rms_loss(x, w, dy, R, H, eps);
        x[i] = keep;
        assert_true(fabs((up - down) / (2 * e) - dx[i]) < 1e-6);
    }
    for (int i = 0; i < H; i++) {
        double keep = w[i];
        w[i] = keep + e;
        double up = rms_loss(x, w, dy, R, H, eps);
        w[i] = keep - e;
        double down = rms_loss(x, w, dy, R, H, eps);
        w[i] = keep;
        assert_true(fabs((up - down) / (2 * e) - dw[i]) < 1e-6);
    }
}

static void test_rmsnorm_backward(void **state)
{
    (void)state;
    rmsnorm_backward_case(1e-5);
    rmsnorm_backward_case(0.25);
}

/* The epsilon is the one asked for: rows of mean 0 and variance (mean
 * square) 1, [1, -1, 1, -1] and [2, 0, -2, 0] / sqrt(2), give rstd =
 * 1/sqrt(1 + eps) exactly as the definition (Ba et al. 2016, LayerNorm;
 * Zhang & Sennrich 2019, RMSNorm: both add eps to the variance / mean
 * square under the root) for eps 1e-5 (Llama 2), 1e-6 (T5, Qwen3,
 * DeepSeek-V3), 1e-12 (BERT) and 0.5, and every one differs. */
static void test_norm_eps_used(void **state)
{
    (void)state;
    const double r2 = sqrt(2.0);
    double x[8] = {1, -1, 1, -1, 2 / r2, 0, -2 / r2, 0}, w[4] = {1, 1, 1, 1}, b[4] = {0};
    double out[8], xh[8], rs[2], seen[4][2];
    const double eps[] = {1e-5, 1e-6, 1e-12, 0.5};
    for (int k = 0; k < 4; k++) {
        double want = 1 / sqrt(1 + eps[k]);
        mp_layernorm_forward_f64(out, xh, rs, x, w, b, 2, 4, eps[k], false);
        for (int r = 0; r < 2; r++)
            assert_true(fabs(rs[r] - want) <= 1e-15 * want);
        seen[k][0] = rs[0];
        mp_rmsnorm_forward_f64(out, xh, rs, x, w, 2, 4, eps[k], false);
        for (int r = 0; r < 2; r++)
            assert_true(fabs(rs[r] - want) <= 1e-15 * want);
        seen[k][1] = rs[0];
        for (int j = 0; j < k; j++)
            assert_true(seen[j][0] != seen[k][0] && seen[j][1] != seen[k][1]);
    }
}

/* A gated unit's backward (SwiGLU's, GEGLU's two forms) against central
 * differences of its forward. */
typedef void (*gate_fwd)(double *, const double *, int, int, bool);
typedef void (*gate_bwd)(double *, const double *, const double *, int, int, bool);

static void swiglu_fwd(double *o, const double *gu, int r, int f, bool erf)
{
    (void)erf;
    mp_swiglu_forward_f64(o, gu, r, f);
}
static void swiglu_bwd(double *d, const double *dy, const double *gu, int r, int f, bool erf)
{
    (void)erf;
    mp_swiglu_backward_f64(d, dy, gu, r, f);
}

static void check_gated_backward(gate_fwd fwd, gate_bwd bwd, bool erf)
{
    enum { R = 2, F = 5 };
    double gu[R * 2 * F], dy[R * F], out[R * F], dgu[R * 2 * F];
    uint64_t s = 5;
    for (int i = 0; i < R * 2 * F; i++)
        gu[i] = frand(&s) * 4;
    for (int i = 0; i < R * F; i++)
        dy[i] = frand(&s);
    bwd(dgu, dy, gu, R, F, erf);
    for (int i = 0; i < R * 2 * F; i++) {
        double keep = gu[i], up = 0, down = 0;
        gu[i] = keep + 1e-6;
        fwd(out, gu, R, F, erf);
        for (int k = 0; k < R * F; k++)
            up += out[k] * dy[k];
        gu[i] = keep - 1e-6;
        fwd(out, gu, R, F, erf);
        for (int k = 0; k < R * F; k++)
            down += out[k] * dy[k];
        gu[i] = keep;
        assert_true(fabs((up - down) / 2e-6 - dgu[i]) < 1e-7);
    }
}

static void test_swiglu_backward(void **state)
{
    (void)state;
    check_gated_backward(swiglu_fwd, swiglu_bwd, false);
    check_gated_backward(mp_geglu_forward_f64, mp_geglu_backward_f64, false);
    check_gated_backward(mp_geglu_forward_f64, mp_geglu_backward_f64, true);
}

/* ---- GeLU ---- */

static void test_gelu_backward(void **state)
{
    (void)state;
    for (int erf = 0; erf < 2; erf++) {
        void (*fwd)(double *, const double *, size_t) =
            erf ? mp_gelu_erf_forward_f64 : mp_gelu_forward_f64;
        for (double x = -4; x <= 4; x += 0.37) {
            double up, down, d, one = 1, in;
            in = x + 1e-6;
            fwd(&up, &in, 1);
            in = x - 1e-6;
            fwd(&down, &in, 1);
            (erf ? mp_gelu_erf_backward_f64 : mp_gelu_backward_f64)(&d, &one, &x, 1);
            assert_true(fabs((up - down) / 2e-6 - d) < 1e-7);
        }
        double zero = 0, g;
        fwd(&g, &zero, 1);
        assert_true(g == 0);
    }
}

/* ---- attention ---- */

enum { AS = 5, AB = 2, AH = 2, AD = 4 };
#define AHL (AH * AD)
#define AROWS (AS * AB)

static double att_loss(const double *qkv, const double *dy)
{
    double out[AROWS * AHL], probs[AB * AH * AS * AS];
    mp_attention_forward_f64(mp_backend_cpu(), out, probs, qkv, AS, AB, AH, AD, false);
    double s = 0;
    for (int i = 0; i < AROWS * AHL; i++)
        s += out[i] * dy[i];
    return s;
}

static void test_attention_backward(void **state)
{
    (void)state;
    double qkv[AROWS * 3 * AHL], dy[AROWS * AHL], out[AROWS * AHL], probs[AB * AH * AS * AS];
    double dqkv[AROWS * 3 * AHL], scratch[AS * AS];
    uint64_t s = 11;
    for (size_t i = 0; i < sizeof qkv / sizeof *qkv; i++)
        qkv[i] = frand(&s);
    for (size_t i = 0; i < sizeof dy / sizeof *dy; i++)
        dy[i] = frand(&s);
    mp_attention_forward_f64(mp_backend_cpu(), out, probs, qkv, AS, AB, AH, AD, false);
    /* causal: row 0 of each head attends only to itself */
    for (int n = 0; n < AB; n++)
        for (int a = 0; a < AH; a++) {
            const double *p = probs + ((size_t)n * AH + a) * AS * AS;
            assert_true(fabs(p[0] - 1) < 1e-15);
            for (int j = 1; j < AS; j++)
                assert_true(p[j] == 0);
        }
    mp_attention_backward_f64(mp_backend_cpu(), dqkv, dy, qkv, probs, AS, AB, AH, AD, scratch,
                              false);
    const double e = 1e-6;
    for (size_t i = 0; i < sizeof qkv / sizeof *qkv; i++) {
        double keep = qkv[i];
        qkv[i] = keep + e;
        double up = att_loss(qkv, dy);
        qkv[i] = keep - e;
        double down = att_loss(qkv, dy);
        qkv[i] = keep;
        assert_true(fabs((up - down) / (2 * e) - dqkv[i]) < 1e-6);
    }
}

/* ---- the whole model: every tensor's gradient against finite differences ---- */

static mp_gpt_dims tiny_dims(int tp, int tp_rank, bool sp, bool tied)
{
    return (mp_gpt_dims){.hidden = 16, .heads = 4, .ffn = 32, .vocab = 24, .seq = 8,
                         .micro_batch = 2, .layers = 2, .tied = tied, .tp = tp,
                         .tp_rank = tp_rank, .sp = sp};
}

static void make_tokens(int32_t *tok, int32_t *tgt, int n, int V)
{
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)(mp_mix64((uint64_t)i * 3 + 1) % (uint64_t)V);
        tgt[i] = (int32_t)(mp_mix64((uint64_t)i * 5 + 2) % (uint64_t)V);
    }
}

static double model_loss(mp_gpt_f64 *g, const int32_t *tok, const int32_t *tgt)
{
    double loss = 0;
    mp_error err;
    assert_int_equal(mp_gpt_forward_f64(g, 0, tok, tgt, &loss, &err), MP_OK);
    return loss;
}

/* LLaMA's parts: RMSNorm, SwiGLU, RoPE, grouped-query attention (4 query
 * heads on 2 key/value heads), no biases. */
static mp_gpt_dims tiny_llama_dims(int tp, int tp_rank, bool sp, bool tied, int heads, int kv)
{
    mp_gpt_dims d = tiny_dims(tp, tp_rank, sp, tied);
    d.heads = heads;
    d.kv_heads = kv;
    d.rmsnorm = d.gated = d.rope = d.no_bias = true;
    return d;
}

static void check_model_gradients_of(mp_gpt_dims d)
{
    mp_param_layout lay;
    mp_error err;
    assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
    mp_group self = {.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    mp_gpt_f64 g;
    assert_int_equal(mp_gpt_init_f64(&g, &d, &lay, mp_backend_cpu(), self, 1, 1, false, 99,
                                     NULL, &err),
                     MP_OK);
    /* larger weights than GPT's 0.02 so that every path carries signal */
    for (size_t i = 0; i < lay.total; i++)
        g.w[i] *= 8;
    int S = mp_dims_tokens(&d);
    int32_t tok[64], tgt[64];
    make_tokens(tok, tgt, S, d.vocab);
    for (int i = 0; d.bert && i < S; i++)
        if (i % 3)
            tgt[i] = -1; /* BERT: a third of the tokens are masked and predicted */
    double loss = model_loss(&g, tok, tgt);
    assert_true(loss > 0);
    memset(g.g, 0, lay.total * sizeof(double));
    assert_int_equal(mp_gpt_backward_f64(&g, 0, &err), MP_OK);
    /* central differences err by O(e^2) times the third derivative: RMSNorm's
     * uncentred activations under 8x weights need a smaller step than
     * LayerNorm's; rounding stays ~1e-16 * loss / e, far below the tolerance */
    const double e = 2.5e-6;
    for (int pid = 0; pid < lay.n; pid++) {
        const mp_param *p = &lay.p[pid];
        size_t n = (size_t)p->lrows * p->lcols;
        double worst = 0, scale = 0;
        for (size_t k = 0; k < 6; k++) {
            size_t i = p->offset + (mp_mix64(k + 17 * (uint64_t)pid) % n);
            double keep = g.w[i];
            g.w[i] = keep + e;
            double up = model_loss(&g, tok, tgt);
            g.w[i] = keep - e;
            double down = model_loss(&g, tok, tgt);
            g.w[i] = keep;
            double fd = (up - down) / (2 * e);
            worst = fmax(worst, fabs(fd - g.g[i]));
            scale = fmax(scale, fabs(fd));
        }
        if (!(worst <= 1e-6 + 1e-5 * scale))
            fail_msg("%s: gradient off by %g (scale %g)", p->name, worst, scale);
        /* latent attention's and GPT-OSS's blocks: every tensor must carry
         * signal, or the comparison above proves nothing about it */
        if ((mp_dims_is_mla(&d) || d.sinks) && strstr(p->name, "layers.") && !(scale > 1e-9))
            fail_msg("%s: no gradient to check (scale %g)", p->name, scale);
    }
    mp_gpt_free_f64(&g);
    mp_param_layout_free(&lay);
}

static void test_model_gradients_tied(void **state)
{
    (void)state;
    check_model_gradients_of(tiny_dims(1, 0, false, true));
}

static void test_model_gradients_untied(void **state)
{
    (void)state;
    check_model_gradients_of(tiny_dims(1, 0, false, false));
}

/* Every LLaMA-style tensor against finite differences: RMSNorm's backward,
 * SwiGLU's, the rotary turn's and grouped-query attention's. */
static void test_model_gradients_llama(void **state)
{
    (void)state;
    /* the parts one at a time, on GPT's blocks */
    mp_gpt_dims d = tiny_dims(1, 0, false, true);
    d.rmsnorm = true;
    check_model_gradients_of(d);
    d = tiny_dims(1, 0, false, true);
    d.gated = true;
    check_model_gradients_of(d);
    d = tiny_dims(1, 0, false, true);
    d.kv_heads = 2;
    check_model_gradients_of(d);
    d = tiny_dims(1, 0, false, true);
    d.rope = true;
    check_model_gradients_of(d);
    /* all of them */
    check_model_gradients_of(tiny_llama_dims(1, 0, false, false, 4, 2));
    check_model_gradients_of(tiny_llama_dims(1, 0, false, true, 4, 4));
}

static mp_gpt_dims tiny_t5_dims(bool tied);
static double *recompute_run(mp_gpt_dims d, const mp_param_layout *lay, double *loss);

/* The exact GELU and GEGLU (tanh and erf) through whole models: GPT's
 * blocks, BERT's (its masked-LM head's GELU too), T5's; and each form
 * reaches the loss: under the 8x weights of these checks the pre-activations
 * are large enough that the two GELUs, and GEGLU against SwiGLU, give
 * different losses (a model that ran another function than it says would
 * give the same). */
static void test_model_gradients_gelu_forms(void **state)
{
    (void)state;
    mp_gpt_dims gpt = tiny_dims(1, 0, false, true), bert = gpt, t5 = tiny_t5_dims(true);
    bert.bert = true;
    t5.relu = false;
    const struct {
        mp_gpt_dims base;
        bool gated, geglu, erf;
    } cases[] = {
        {gpt, false, false, true},  {gpt, true, true, false}, {gpt, true, true, true},
        {bert, false, false, true}, {t5, true, true, false},  {t5, false, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mp_gpt_dims d = cases[i].base;
        d.gated = cases[i].gated;
        d.geglu = cases[i].geglu;
        d.gelu_erf = cases[i].erf;
        check_model_gradients_of(d);
        /* the same model with the other GELU form (GEGLU: and with SwiGLU) */
        mp_gpt_dims other = d;
        other.gelu_erf = !d.gelu_erf;
        mp_param_layout lay;
        mp_error err;
        assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
        double a, b, c = 0;
        free(recompute_run(d, &lay, &a));
        free(recompute_run(other, &lay, &b));
        if (d.geglu) {
            other = d;
            other.geglu = false;
            free(recompute_run(other, &lay, &c));
        }
        mp_param_layout_free(&lay);
        /* rounding moves these losses by ~1e-14; the forms by 1e-6 and more */
        if (!(fabs(a - b) > 1e-8 * a) || (d.geglu && !(fabs(a - c) > 1e-8 * a)))
            fail_msg("case %zu (%s): losses %.17g, other GELU %.17g, SwiGLU %.17g", i,
                     mp_activation_name(mp_dims_activation(&d)), a, b, c);
    }
}

/* BERT: bidirectional attention, token types, the masked-LM transform with
 * its vocabulary bias, the pooler and the two-way head. */
static void test_model_gradients_bert(void **state)
{
    (void)state;
    mp_gpt_dims d = tiny_dims(1, 0, false, true);
    d.bert = true;
    check_model_gradients_of(d);
    d.tied = false;
    check_model_gradients_of(d);
}


/* ---- T5: ReLU, the relative position buckets, biased attention, the model ---- */

static void test_relu_backward(void **state)
{
    (void)state;
    for (double x = -2.05; x <= 2; x += 0.3) {
        double up, down, d, one = 1, in;
        in = x + 1e-6;
        mp_relu_forward_f64(&up, &in, 1);
        in = x - 1e-6;
        mp_relu_forward_f64(&down, &in, 1);
        mp_relu_backward_f64(&d, &one, &x, 1);
        assert_true(fabs((up - down) / 2e-6 - d) < 1e-9);
        assert_true(d == (x > 0 ? 1 : 0));
    }
}

/* HF T5's _relative_position_bucket on hand-worked values: exact distances
 * below half a direction's buckets, logarithmic above, capped. */
static void test_t5_buckets(void **state)
{
    (void)state;
    /* encoder: 16 buckets a direction, keys after the query in 16..31 */
    assert_int_equal(mp_t5_bucket(0, true), 0);
    assert_int_equal(mp_t5_bucket(-1, true), 1);
    assert_int_equal(mp_t5_bucket(1, true), 17);
    assert_int_equal(mp_t5_bucket(-7, true), 7);
    assert_int_equal(mp_t5_bucket(-8, true), 8);    /* 8 + floor(log(1) ...) */
    assert_int_equal(mp_t5_bucket(-100, true), 15); /* 8 + floor(7.29) */
    assert_int_equal(mp_t5_bucket(300, true), 31);
    /* decoder: the future is bucket 0 (masked anyway), the past 32 buckets */
    assert_int_equal(mp_t5_bucket(5, false), 0);
    assert_int_equal(mp_t5_bucket(-3, false), 3);
    assert_int_equal(mp_t5_bucket(-16, false), 16);
    assert_int_equal(mp_t5_bucket(-127, false), 31); /* 16 + floor(15.94) */
    assert_int_equal(mp_t5_bucket(-128, false), 31); /* capped */
    assert_int_equal(mp_t5_bucket(-40, false), 23);  /* 16 + floor(7.05) */
}

static int t5_bucket_of(int i, int j, bool causal)
{
    return mp_t5_bucket(j - i, !causal);
}

static double t5_att_loss(const double *qkv, const double *table, const int *bk, bool causal,
                          const double *dy)
{
    double out[AROWS * AHL], probs[AB * AH * AS * AS];
    mp_t5_attention_forward_f64(mp_backend_cpu(), out, probs, qkv, AS, AB, AH, AD, causal, table,
                                AH, bk, false);
    double s = 0;
    for (int i = 0; i < AROWS * AHL; i++)
        s += out[i] * dy[i];
    return s;
}

/* Self-attention with the relative bias, both directions and causal: every
 * Q, K, V element and every bias entry against central differences. */
static void test_t5_attention_backward(void **state)
{
    (void)state;
    for (int causal = 0; causal < 2; causal++) {
        double qkv[AROWS * 3 * AHL], dy[AROWS * AHL], out[AROWS * AHL];
        double probs[AB * AH * AS * AS], dqkv[AROWS * 3 * AHL], scratch[AS * AS];
        double table[MP_T5_BUCKETS * AH], dtable[MP_T5_BUCKETS * AH] = {0};
        int bk[AS * AS];
        uint64_t s = 13 + (uint64_t)causal;
        for (size_t i = 0; i < sizeof qkv / sizeof *qkv; i++)
            qkv[i] = frand(&s);
        for (size_t i = 0; i < sizeof dy / sizeof *dy; i++)
            dy[i] = frand(&s);
        for (size_t i = 0; i < sizeof table / sizeof *table; i++)
            table[i] = frand(&s);
        for (int i = 0; i < AS; i++)
            for (int j = 0; j < AS; j++)
                bk[i * AS + j] = t5_bucket_of(i, j, causal);
        mp_t5_attention_forward_f64(mp_backend_cpu(), out, probs, qkv, AS, AB, AH, AD, causal,
                                    table, AH, bk, false);
        mp_t5_attention_backward_f64(mp_backend_cpu(), dqkv, dy, qkv, probs, AS, AB, AH, AD,
                                     causal, dtable, AH, bk, scratch, false);
        const double e = 1e-6;
        for (size_t i = 0; i < sizeof qkv / sizeof *qkv; i++) {
            double keep = qkv[i];
            qkv[i] = keep + e;
            double up = t5_att_loss(qkv, table, bk, causal, dy);
            qkv[i] = keep - e;
            double down = t5_att_loss(qkv, table, bk, causal, dy);
            qkv[i] = keep;
            assert_true(fabs((up - down) / (2 * e) - dqkv[i]) < 1e-6);
        }
        int used = 0;
        for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
            double keep = table[i];
            table[i] = keep + e;
            double up = t5_att_loss(qkv, table, bk, causal, dy);
            table[i] = keep - e;
            double down = t5_att_loss(qkv, table, bk, causal, dy);
            table[i] = keep;
            assert_true(fabs((up - down) / (2 * e) - dtable[i]) < 1e-6);
            used += dtable[i] != 0;
        }
        assert_true(used >= 2 * AH); /* the test reaches more than one bucket per head */
    }
}

/* T5 1.0's parts (RMSNorm, ReLU, no biases, relative positions) in an
 * encoder and a decoder block: every tensor against finite differences. */
static mp_gpt_dims tiny_t5_dims(bool tied)
{
    mp_gpt_dims d = tiny_dims(1, 0, false, tied);
    d.t5 = d.relu = d.rmsnorm = d.no_bias = true;
    d.enc_layers = 1;
    d.dec_seq = d.seq / 2;
    return d;
}

static void test_model_gradients_t5(void **state)
{
    (void)state;
    check_model_gradients_of(tiny_t5_dims(true));
    check_model_gradients_of(tiny_t5_dims(false));
    mp_gpt_dims d = tiny_t5_dims(true); /* two of each, gated GeLU-free SwiGLU MLP */
    d.layers = 4;
    d.enc_layers = 2;
    d.relu = false;
    d.gated = true;
    check_model_gradients_of(d);
}

/* RoPE keeps a vector's length and turns back exactly (double). */
static void test_rope_turns_back(void **state)
{
    (void)state;
    int s = 5, b = 2, heads = 3, hd = 8;
    size_t ld = (size_t)heads * hd + 3, n = (size_t)s * b * ld;
    double x[5 * 2 * 27], y[5 * 2 * 27];
    int pos[5] = {0, 3, 4, 9, 15};
    uint64_t st = 7;
    for (size_t i = 0; i < n; i++)
        x[i] = y[i] = frand(&st);
    mp_rope_f64(y, ld, heads, hd, NULL, pos, s, b, false, false, 0);
    for (size_t r = 0; r < (size_t)s * b; r++)
        for (int a = 0; a < heads; a++)
            for (int k = 0; k < hd / 2; k++) {
                size_t i1 = r * ld + (size_t)a * hd + k, i2 = i1 + hd / 2;
                double before = x[i1] * x[i1] + x[i2] * x[i2];
                double after = y[i1] * y[i1] + y[i2] * y[i2];
                assert_true(fabs(before - after) < 1e-12);
                if (r < (size_t)b) /* position 0: no turn */
                    assert_true(fabs(y[i1] - x[i1]) < 1e-15);
            }
    mp_rope_f64(y, ld, heads, hd, NULL, pos, s, b, true, false, 0);
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(y[i] - x[i]) < 1e-12);
}

/* A mixture of experts: the first block dense, then 4 experts, top-2. */
static mp_gpt_dims tiny_moe_dims(int tp, int tp_rank, bool sp, int ep, int ep_rank)
{
    mp_gpt_dims d = tiny_llama_dims(tp, tp_rank, sp, false, 4, 2);
    d.experts = 4;
    d.top_k = 2;
    d.expert_ffn = 16;
    d.moe_first_dense = 1;
    d.ep = ep;
    d.ep_rank = ep_rank;
    return d;
}

/* The MoE block's router (through the renormalised top-k weights and the
 * softmax or sigmoid), its experts and shared experts against finite
 * differences, dropless and with tokens dropped by capacity. */
static void test_model_gradients_moe(void **state)
{
    (void)state;
    mp_gpt_dims d = tiny_moe_dims(1, 0, false, 1, 0);
    check_model_gradients_of(d);
    d.router_sigmoid = true;
    check_model_gradients_of(d);
    d.router_sigmoid = false;
    d.capacity_factor = 0.75; /* 8 positions x 2 / 4 experts x 0.75: 3 slots a sample */
    d.shared_ffn = 16;
    check_model_gradients_of(d);
    d = tiny_moe_dims(1, 0, false, 1, 0); /* GPT's blocks: GeLU experts */
    d.rmsnorm = d.gated = d.rope = d.no_bias = false;
    d.kv_heads = 0;
    check_model_gradients_of(d);
}

/* The experts' GEMMs go through the backend's grouped entry (one cuBLAS
 * call for all local experts on CUDA), six per MoE block and step (fc1 and
 * fc2 forward; their weight and input gradients backward), each holding
 * several experts' products, with the loss and gradients of the plain CPU
 * backend bit for bit (its grouped entry is a loop of its gemm). */
static int grouped_calls, grouped_gemms;
static void counting_gemm_grouped(mp_real_kind kind, bool ta, bool tb, int count, const int *m,
                                  const int *n, const int *k, double alpha,
                                  const void *const *a, int lda, const void *const *b, int ldb,
                                  double beta, void *const *c, int ldc)
{
    grouped_calls++;
    grouped_gemms += count;
    mp_backend_cpu()->gemm_grouped(kind, ta, tb, count, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                   ldc);
}

static void test_moe_experts_grouped(void **state)
{
    (void)state;
    mp_gpt_dims d = tiny_moe_dims(1, 0, false, 1, 0); /* 2 blocks, the second MoE */
    mp_backend counting = *mp_backend_cpu();
    counting.gemm_grouped = counting_gemm_grouped;
    const mp_backend *backends[2] = {mp_backend_cpu(), &counting};
    mp_param_layout lay;
    mp_error err;
    assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
    mp_group self = {.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    int S = mp_dims_tokens(&d);
    int32_t tok[64], tgt[64];
    make_tokens(tok, tgt, S, d.vocab);
    double loss[2], *grad[2];
    for (int i = 0; i < 2; i++) {
        mp_gpt_f64 g;
        assert_int_equal(mp_gpt_init_f64(&g, &d, &lay, backends[i], self, 1, 1, false, 99, NULL,
                                         &err),
                         MP_OK);
        grouped_calls = grouped_gemms = 0;
        loss[i] = model_loss(&g, tok, tgt);
        memset(g.g, 0, lay.total * sizeof(double));
        assert_int_equal(mp_gpt_backward_f64(&g, 0, &err), MP_OK);
        grad[i] = malloc(lay.total * sizeof(double));
        memcpy(grad[i], g.g, lay.total * sizeof(double));
        mp_gpt_free_f64(&g);
    }
    assert_int_equal(grouped_calls, 6);
    assert_true(grouped_gemms > grouped_calls); /* several experts a call */
    assert_memory_equal(&loss[0], &loss[1], sizeof loss[0]);
    assert_memory_equal(grad[0], grad[1], lay.total * sizeof(double));
    free(grad[0]);
    free(grad[1]);
    mp_param_layout_free(&lay);
}

/* GPT-OSS's blocks (attention_sink.c, moe_oss.c): block 0 windowed (3), block
 * 1 full, a sink per head, biases in every linear layer (the router's and
 * each expert's too), the clamped SwiGLU (limit 1.5, crossed under the 8x
 * weights), every tensor against finite differences; dense blocks too. */
static void test_model_gradients_oss(void **state)
{
    (void)state;
    mp_gpt_dims d = tiny_moe_dims(1, 0, false, 1, 0);
    d.moe_first_dense = 0;
    d.no_bias = false;
    d.expert_bias = d.sinks = true;
    d.window = 3;
    d.window_skip_freq = 2;
    d.glu_limit = 1.5;
    check_model_gradients_of(d);
    d.experts = 0;
    d.expert_bias = false;
    check_model_gradients_of(d);
}

/* Multi-head latent attention (DeepSeek-V2/V3) in LLaMA-style blocks: the
 * query and key/value down-projections, their RMSNorms, the up-projections,
 * the shared rotary key and the output projection from heads x v_head_dim,
 * every tensor against finite differences; queries through their latent or
 * straight from the hidden state; with a mixture of experts; in GPT's blocks. */
static mp_gpt_dims tiny_mla_dims(int tp, int tp_rank, bool sp, int q_lora)
{
    mp_gpt_dims d = tiny_llama_dims(tp, tp_rank, sp, false, 4, 0);
    d.q_lora = q_lora;
    d.kv_lora = 12;
    d.rope_dim = 4;
    d.nope_dim = 6;
    d.v_dim = 5; /* odd and unlike the qk head dim: the value heads' own width */
    return d;
}

/* A DeepSeek-like model (with experts, and for the recomputation tests): latent attention in
 * every block, the first block dense, then 4 routed experts (top-2) and a
 * shared expert; three blocks, so two of them MoE. */
static mp_gpt_dims tiny_deepseek_dims(void)
{
    mp_gpt_dims d = tiny_mla_dims(1, 0, false, 10);
    d.layers = 3;
    d.experts = 4;
    d.top_k = 2;
    d.expert_ffn = 16;
    d.moe_first_dense = 1;
    d.router_sigmoid = true;
    d.shared_ffn = 12;
    return d;
}

static void test_model_gradients_mla(void **state)
{
    (void)state;
    check_model_gradients_of(tiny_mla_dims(1, 0, false, 10));
    check_model_gradients_of(tiny_mla_dims(1, 0, false, 0));
    check_model_gradients_of(tiny_deepseek_dims());
    mp_gpt_dims d = tiny_mla_dims(1, 0, false, 10); /* LayerNorm, GeLU, biases, tied */
    d.rmsnorm = d.gated = d.no_bias = false;
    d.tied = true;
    check_model_gradients_of(d);
}

/* ---- the model's norm epsilon reaches every norm ---- */

/* A CPU backend whose norms note the epsilon each call is given: a forward
 * of a model with an unusual norm_eps must hand it to every norm (the
 * block norms, the final norm, BERT's masked-LM LayerNorm, MLA's latent
 * norms, QK-norm, T5's stacks, MTP's norms), none a constant of its own. */
static mp_backend eps_be;
static double eps_want;
static int eps_calls, eps_wrong;

static void eps_note(double eps)
{
    eps_calls++;
    if (eps != eps_want)
        eps_wrong++;
}

static void eps_layernorm(mp_real_kind k, void *out, void *xhat, void *rstd, const void *x,
                          const void *w, const void *b, int rows, int h, double eps, bool exact)
{
    eps_note(eps);
    mp_backend_cpu()->layernorm_forward(k, out, xhat, rstd, x, w, b, rows, h, eps, exact);
}

static void eps_rmsnorm(mp_real_kind k, void *out, void *xhat, void *rstd, const void *x,
                        const void *w, int rows, int h, double eps, bool exact)
{
    eps_note(eps);
    mp_backend_cpu()->rmsnorm_forward(k, out, xhat, rstd, x, w, rows, h, eps, exact);
}

/* The loss of one forward of d with norm_eps eps; *calls: the norms run. */
static double eps_forward(mp_gpt_dims d, double eps, int *calls)
{
    eps_be = *mp_backend_cpu();
    eps_be.layernorm_forward = eps_layernorm;
    eps_be.rmsnorm_forward = eps_rmsnorm;
    eps_want = d.norm_eps = eps;
    eps_calls = eps_wrong = 0;
    mp_param_layout lay;
    mp_error err;
    assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
    mp_group self = {.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    mp_gpt_f64 g;
    assert_int_equal(mp_gpt_init_f64(&g, &d, &lay, &eps_be, self, 1, 1, false, 99, NULL, &err),
                     MP_OK);
    int32_t tok[64], tgt[64];
    make_tokens(tok, tgt, mp_dims_tokens(&d), d.vocab);
    double loss = model_loss(&g, tok, tgt);
    mp_gpt_free_f64(&g);
    mp_param_layout_free(&lay);
    if (eps_wrong)
        fail_msg("%d of %d norms ran with another epsilon than the model's %g", eps_wrong,
                 eps_calls, eps);
    *calls = eps_calls;
    return loss;
}

static void test_norm_eps_reaches_every_norm(void **state)
{
    (void)state;
    mp_gpt_dims qk = tiny_llama_dims(1, 0, false, false, 4, 2), bert = tiny_dims(1, 0, false, true);
    qk.qk_norm = true;
    bert.bert = true;
    mp_gpt_dims mtp = tiny_llama_dims(1, 0, false, false, 4, 2);
    mtp.mtp_layers = 1;
    mtp.mtp_scale = 0.1;
    int S = mp_dims_tokens(&qk);
    const struct {
        const char *what;
        mp_gpt_dims d;
        int least; /* norms a forward runs at the least */
    } cases[] = {
        /* 2 per block and the final one */
        {"gpt", tiny_dims(1, 0, false, true), 2 * 2 + 1},
        {"llama", tiny_llama_dims(1, 0, false, false, 4, 2), 2 * 2 + 1},
        /* + the masked-LM head's LayerNorm */
        {"bert", bert, 2 * 2 + 2},
        /* + two a token (its query heads, its key heads) in each block */
        {"qk-norm", qk, 2 * 2 + 1 + 2 * 2 * S},
        /* + the query and key/value latents' norms in each block */
        {"mla", tiny_mla_dims(1, 0, false, 10), 2 * 2 + 1 + 2 * 2},
        {"deepseek", tiny_deepseek_dims(), 2 * 3 + 1 + 2 * 3},
        /* encoder block 2, its final norm, decoder block 3, the final norm */
        {"t5", tiny_t5_dims(true), 2 + 1 + 3 + 1},
        /* + the module's two input norms, its block's two, its final one */
        {"mtp", mtp, 2 * 2 + 1 + 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int calls_a, calls_b;
        double a = eps_forward(cases[i].d, 3e-3, &calls_a);
        double b = eps_forward(cases[i].d, 1e-6, &calls_b);
        if (calls_a < cases[i].least || calls_b != calls_a)
            fail_msg("%s: %d and %d norms, expected at least %d", cases[i].what, calls_a,
                     calls_b, cases[i].least);
        /* and the loss follows it */
        if (!(a != b))
            fail_msg("%s: the same loss %.17g with norm_eps 3e-3 and 1e-6", cases[i].what, a);
    }
}

/* The backward against finite differences with an epsilon that weighs in
 * the statistics (the backward reads the kept rstd, so holds for any). */
static void test_model_gradients_norm_eps(void **state)
{
    (void)state;
    mp_gpt_dims d = tiny_dims(1, 0, false, true);
    d.norm_eps = 0.05;
    check_model_gradients_of(d);
    d = tiny_mla_dims(1, 0, false, 10);
    d.qk_norm = false;
    d.norm_eps = 0.05;
    check_model_gradients_of(d);
    d = tiny_llama_dims(1, 0, false, false, 4, 2);
    d.qk_norm = true;
    d.norm_eps = 0.05;
    check_model_gradients_of(d);
}

/* One step's loss and gradients of d (recompute as d says) in double. */
static double *recompute_run(mp_gpt_dims d, const mp_param_layout *lay, double *loss)
{
    mp_group self = {.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    mp_gpt_f64 g;
    mp_error err;
    assert_int_equal(mp_gpt_init_f64(&g, &d, lay, mp_backend_cpu(), self, 1, 1, false, 7,
                                     NULL, &err),
                     MP_OK);
    for (size_t i = 0; i < lay->total; i++)
        g.w[i] *= 8;
    int32_t tok[64], tgt[64];
    make_tokens(tok, tgt, mp_dims_tokens(&d), d.vocab);
    *loss = model_loss(&g, tok, tgt);
    memset(g.g, 0, lay->total * sizeof(double));
    assert_int_equal(mp_gpt_backward_f64(&g, 0, &err), MP_OK);
    double *grad = malloc(lay->total * sizeof *grad);
    memcpy(grad, g.g, lay->total * sizeof *grad);
    mp_gpt_free_f64(&g);
    return grad;
}

/* Megatron's --recompute-modules moe_act, moe, shared_experts and
 * mla_up_proj (alone and together with the others): the gradients are those
 * of the run that keeps everything, bit for bit, and each module's
 * activations are really dropped: a model slot (one micro-batch in flight)
 * is smaller by exactly the dropped tensors of every block that has them,
 * counted here from the shapes, and the workspace larger by one block's
 * worth, where the rebuild lands. */
static void test_recompute_modules_drop_and_rebuild(void **state)
{
    (void)state;
    mp_gpt_dims d = tiny_deepseek_dims();
    mp_param_layout lay;
    mp_error err;
    assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
    double loss0;
    double *g0 = recompute_run(d, &lay, &loss0);
    size_t S = (size_t)mp_dims_tokens(&d), k = (size_t)d.top_k, h = (size_t)d.hidden;
    size_t E = (size_t)d.experts, fe = (size_t)d.expert_ffn, fs = (size_t)d.shared_ffn;
    size_t heads = (size_t)d.heads, dqk = (size_t)(d.nope_dim + d.rope_dim);
    size_t qkv = S * heads * (2 * dqk + (size_t)d.v_dim); /* [Q | K | V] */
    size_t moe_blocks = 2, blocks = 3;
    /* what an MoE block keeps: scores [S,E], choice, weight, kept, send order
     * [S*k] each, counts [2], rows per expert [E], y [S*k,h], the experts'
     * input x [S*k,h], fc1 output [S*k,2fe] and activation [S*k,fe], their
     * order [S*k], and the shared experts' fc1 [S,2fs] and activation [S,fs] */
    size_t moe_all = S * E + 4 * S * k + 2 + E + S * k * h + S * k * h + S * k * 2 * fe +
                     S * k * fe + S * k + S * 2 * fs + S * fs;
    const struct {
        const char *modules;
        unsigned mask;
        size_t per_block; /* reals dropped by each block that has the module */
        size_t n_blocks;
    } cases[] = {
        {"moe_act", 1u << MP_RCM_MOE_ACT, S * k * fe, moe_blocks},
        {"shared_experts", 1u << MP_RCM_SHARED_EXPERTS, S * 3 * fs, moe_blocks},
        {"moe", 1u << MP_RCM_MOE, moe_all, moe_blocks},
        {"moe with moe_act", 1u << MP_RCM_MOE | 1u << MP_RCM_MOE_ACT, moe_all, moe_blocks},
        {"mla_up_proj", 1u << MP_RCM_MLA_UP_PROJ, qkv, blocks},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mp_gpt_dims r = d;
        r.recompute = 1;
        r.recompute_modules = cases[c].mask;
        double loss;
        double *gr = recompute_run(r, &lay, &loss);
        if (loss != loss0 || memcmp(gr, g0, lay.total * sizeof *gr))
            fail_msg("recompute %s: the loss or a gradient differs", cases[c].modules);
        free(gr);
        /* bytes of 1 and 2 slots: the slot and the workspace apart */
        double keep1 = (double)mp_gpt_bytes_f64(&d, &lay, 1, 1);
        double keep2 = (double)mp_gpt_bytes_f64(&d, &lay, 2, 1);
        double drop1 = (double)mp_gpt_bytes_f64(&r, &lay, 1, 1);
        double drop2 = (double)mp_gpt_bytes_f64(&r, &lay, 2, 1);
        double one = (double)(cases[c].per_block * sizeof(double));
        if ((keep2 - keep1) - (drop2 - drop1) != one * (double)cases[c].n_blocks)
            fail_msg("recompute %s: a slot is %g bytes smaller, not %g", cases[c].modules,
                     (keep2 - keep1) - (drop2 - drop1), one * (double)cases[c].n_blocks);
        double work = (drop1 - (drop2 - drop1)) - (keep1 - (keep2 - keep1));
        if (work != one)
            fail_msg("recompute %s: the workspace grew by %g bytes, not %g", cases[c].modules,
                     work, one);
    }
    /* every module at once: still bitwise */
    mp_gpt_dims r = d;
    r.recompute = 1;
    r.recompute_modules = (1u << MP_RCM_COUNT) - 1 - (1u << MP_RCM_MLP);
    double loss;
    double *gr = recompute_run(r, &lay, &loss);
    assert_true(loss == loss0 && !memcmp(gr, g0, lay.total * sizeof *gr));
    free(gr);
    free(g0);
    mp_param_layout_free(&lay);
}

/* The latent-attention tensors' TP parts: the down-projections and their
 * norms whole on every rank, the up-projections' columns (whole heads) and
 * the output projection's rows each on one. */
static void test_mla_slices_partition(void **state)
{
    (void)state;
    for (int tp = 1; tp <= 4; tp *= 2) {
        mp_param_layout lay[4];
        mp_error err;
        for (int r = 0; r < tp; r++) {
            mp_gpt_dims d = tiny_mla_dims(tp, r, tp > 1, 10);
            assert_int_equal(mp_param_layout_build(&d, &lay[r], &err), MP_OK);
        }
        int seen_mla = 0;
        for (int pid = 0; pid < lay[0].n; pid++) {
            const mp_param *p0 = &lay[0].p[pid];
            bool down = strstr(p0->name, "_down.") || strstr(p0->name, "_norm.");
            bool up = strstr(p0->name, "_up.");
            if (!down && !up)
                continue;
            seen_mla++;
            assert_true(p0->latent_down == down);
            assert_int_equal(p0->split, down ? MP_SPLIT_NONE : MP_SPLIT_COLS);
            assert_true(p0->sp_partial == (down && tp > 1)); /* summed over TP under SP */
            size_t full = (size_t)p0->rows * p0->cols;
            unsigned char *seen = calloc(full, 1);
            for (int r = 0; r < tp; r++) {
                const mp_param *p = &lay[r].p[pid];
                for (size_t i = 0; i < (size_t)p->lrows * p->lcols; i++)
                    seen[mp_param_full_index(p, r, i)]++;
            }
            for (size_t f = 0; f < full; f++)
                assert_int_equal(seen[f], down ? tp : 1);
            free(seen);
        }
        assert_int_equal(seen_mla, 2 * 6); /* two blocks of six */
        for (int r = 0; r < tp; r++)
            mp_param_layout_free(&lay[r]);
    }
}

/* Each expert tensor's parts over the (TP, EP) ranks cover it: once with
 * the experts split over TP (etp = tp), once per TP rank with them whole
 * (etp = 1); the other tensors as TP splits them, on every EP rank. */
static void test_expert_slices_partition(void **state)
{
    (void)state;
    for (int tp = 1; tp <= 2; tp++)
    for (int ep = 1; ep <= 4; ep *= 2)
    for (int etp1 = 0; etp1 <= (tp > 1); etp1++) {
        mp_param_layout lay[8];
        mp_error err;
        for (int t = 0; t < tp; t++)
            for (int e = 0; e < ep; e++) {
                mp_gpt_dims d = tiny_moe_dims(tp, t, tp > 1, ep, e);
                d.etp = etp1 ? 1 : tp;
                d.shared_ffn = 16;
                assert_int_equal(mp_param_layout_build(&d, &lay[t * ep + e], &err), MP_OK);
            }
        assert_true(lay[0].expert_lo < lay[0].total);
        for (int pid = 0; pid < lay[0].n; pid++) {
            const mp_param *p0 = &lay[0].p[pid];
            size_t full = (size_t)p0->rows * p0->cols;
            unsigned char *seen = calloc(full, 1);
            for (int t = 0; t < tp; t++)
                for (int e = 0; e < ep; e++) {
                    const mp_param *p = &lay[t * ep + e].p[pid];
                    assert_true(p->offset >= lay[0].expert_lo || !p->n_exp);
                    for (size_t i = 0; i < (size_t)p->lrows * p->lcols; i++) {
                        size_t f = mp_param_full_index(p, t, i);
                        assert_true(f < full);
                        seen[f]++;
                    }
                }
            size_t copies = (p0->split == MP_SPLIT_NONE ? (size_t)tp : 1) *
                            (p0->n_exp ? 1 : (size_t)ep);
            for (size_t f = 0; f < full; f++)
                assert_int_equal(seen[f], copies);
            free(seen);
        }
        for (int r = 0; r < tp * ep; r++)
            mp_param_layout_free(&lay[r]);
    }
}

/* ---- tensor-parallel slicing: the TP parts of every tensor cover it once ---- */

static void test_slices_partition_tensors(void **state)
{
    (void)state;
    for (int variant = 0; variant < 4; variant++)
    for (int tp = 1; tp <= 4; tp *= 2) {
        mp_param_layout lay[4];
        mp_error err;
        for (int r = 0; r < tp; r++) {
            /* GPT; LLaMA with grouped-query attention (8 query, 4 key/value
             * heads: QKV sections of unequal width) and SwiGLU's [gate | up] */
            mp_gpt_dims d = variant % 2 ? tiny_llama_dims(tp, r, tp > 1, variant > 1, 8, 4)
                                        : tiny_dims(tp, r, tp > 1, variant > 1);
            if (variant % 2)
                d.hidden = 32;
            assert_int_equal(mp_param_layout_build(&d, &lay[r], &err), MP_OK);
        }
        for (int pid = 0; pid < lay[0].n; pid++) {
            const mp_param *p0 = &lay[0].p[pid];
            size_t full = (size_t)p0->rows * p0->cols;
            unsigned char *seen = calloc(full, 1);
            for (int r = 0; r < tp; r++) {
                const mp_param *p = &lay[r].p[pid];
                size_t n = (size_t)p->lrows * p->lcols;
                for (size_t i = 0; i < n; i++) {
                    size_t f = mp_param_full_index(p, r, i);
                    assert_true(f < full);
                    seen[f]++;
                }
            }
            size_t copies = p0->split == MP_SPLIT_NONE ? (size_t)tp : 1;
            for (size_t f = 0; f < full; f++)
                assert_int_equal(seen[f], copies);
            free(seen);
        }
        for (int r = 0; r < tp; r++)
            mp_param_layout_free(&lay[r]);
    }
}

/* The QKV column split gives each rank whole heads of Q, K and V; with
 * grouped-query attention, its query heads and the key/value heads they read. */
static void test_qkv_split_keeps_heads(void **state)
{
    (void)state;
    mp_gpt_dims d = tiny_dims(2, 1, false, true);
    mp_param_layout lay;
    mp_error err;
    assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
    const mp_param *p = &lay.p[mp_block_param(&lay, 0, MP_BLK_QKV_B)];
    /* rank 1 of 2, h = 16: local cols [Q 8..15 | K 24..31 | V 40..47] */
    assert_int_equal(mp_param_full_index(p, 1, 0), 8);
    assert_int_equal(mp_param_full_index(p, 1, 8), 24);
    assert_int_equal(mp_param_full_index(p, 1, 23), 47);
    mp_param_layout_free(&lay);
    /* h = 32, 8 query heads, 4 kv heads, hd 4; rank 1 of 2: Q cols 16..31 of
     * [0, 32), K 40..47 of [32, 48), V 56..63 of [48, 64) */
    d = tiny_llama_dims(2, 1, false, true, 8, 4);
    d.hidden = 32;
    assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
    p = &lay.p[mp_block_param(&lay, 0, MP_BLK_QKV_W)];
    assert_int_equal(p->lcols, 32);
    assert_int_equal(mp_param_full_index(p, 1, 0), 16);
    assert_int_equal(mp_param_full_index(p, 1, 16), 40);
    assert_int_equal(mp_param_full_index(p, 1, 24), 56);
    assert_int_equal(mp_param_full_index(p, 1, 31), 63);
    /* SwiGLU's fc1 [gate | up], ffn 32: rank 1 holds gate 16..31 and up 48..63 */
    p = &lay.p[mp_block_param(&lay, 0, MP_BLK_FC1_W)];
    assert_int_equal(mp_param_full_index(p, 1, 0), 16);
    assert_int_equal(mp_param_full_index(p, 1, 16), 48);
    assert_int_equal(mp_block_param(&lay, 0, MP_BLK_QKV_B), -1);
    assert_int_equal(mp_block_param(&lay, 0, MP_BLK_LN1_B), -1);
    mp_param_layout_free(&lay);
}

static void test_rank_order(void **state)
{
    (void)state;
    int t, c, d, p;
    /* r = t + tp*(c + cp*(d + dp*p)), tp=2 cp=2 dp=3 */
    mp_rank_coords(1 + 2 * (1 + 2 * (2 + 3 * 1)), 2, 2, 3, &t, &c, &d, &p);
    assert_int_equal(t, 1);
    assert_int_equal(c, 1);
    assert_int_equal(d, 2);
    assert_int_equal(p, 1);
}

/* ---- exact mode ---- */

static void test_quantize(void **state)
{
    (void)state;
    float x[6] = {0.03f, -0.03f, 100.f, -100.f, 0.09375f, 1.0f / 3};
    mp_quantize_f32(x, 6, 4, 128);
    assert_true(x[0] == 0.0f);    /* 0.48 units -> 0 */
    assert_true(x[1] == -0.0f);
    assert_true(x[2] == 8.0f);    /* clamped to 128/16 */
    assert_true(x[3] == -8.0f);
    assert_true(x[4] == 0.125f);  /* 1.5 units -> 2 (ties to even) */
    assert_true(x[5] == 0.3125f); /* 5.33 units -> 5 */
}

static bool on_grid(float v, int grid, int max_int)
{
    double u = ldexp((double)v, grid);
    return u == floor(u) && fabs(u) <= max_int;
}

/* Exact mode's gradients must be on small grids (so sums are exact) and
 * mostly non-zero (so equality means something). */
/* quiet: tensors allowed to be (nearly) all zero in exact mode (NULL: none) */
static void exact_data_is_alive_of(mp_gpt_dims d, const char *const *quiet)
{
    mp_param_layout lay;
    mp_error err;
    assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
    mp_group self = {.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    mp_gpt_f32 g;
    assert_int_equal(mp_gpt_init_f32(&g, &d, &lay, mp_backend_cpu(), self, 1, 1, true, 5, NULL,
                                     &err),
                     MP_OK);
    g.grad_scale = (float)MP_EXACT_GRAD_SCALE;
    int32_t tok[16], tgt[16];
    make_tokens(tok, tgt, 16, d.vocab);
    double loss = 0;
    assert_int_equal(mp_gpt_forward_f32(&g, 0, tok, tgt, &loss, &err), MP_OK);
    assert_true(on_grid((float)loss, MP_Q_LOSS, 16 * MP_Q_LOSS_MAX_INT));
    memset(g.g, 0, lay.total * sizeof(float));
    assert_int_equal(mp_gpt_backward_f32(&g, 0, &err), MP_OK);
    for (int pid = 0; pid < lay.n; pid++) {
        const mp_param *p = &lay.p[pid];
        size_t n = (size_t)p->lrows * p->lcols, nonzero = 0;
        for (size_t i = 0; i < n; i++) {
            float w = g.w[p->offset + i];
            assert_true(on_grid(w, 10, MP_EXACT_MAX_INT * 64));
            nonzero += g.g[p->offset + i] != 0;
        }
        /* (measured: 86% to 100% per tensor with these grids) */
        double need = 0.5;
        for (int q = 0; quiet && quiet[q]; q++)
            if (!strcmp(p->name, quiet[q]))
                need = 0;
        double reachable = (double)n;
        if (strstr(p->name, "rel_bias")) {
            /* only the buckets of distances within the sequence can learn */
            bool enc = !strncmp(p->name, "encoder", 7), seen[MP_T5_BUCKETS] = {0};
            int s = enc ? d.seq : d.dec_seq, used = 0;
            for (int i = 0; i < s; i++)
                for (int j = 0; j < s; j++) {
                    int k = mp_t5_bucket(j - i, enc);
                    used += !seen[k];
                    seen[k] = true;
                }
            reachable = (double)used * p->lcols;
        }
        if ((double)nonzero < need * reachable)
            fail_msg("%s: only %zu of %zu gradients are non-zero", p->name, nonzero, n);
    }
    mp_gpt_free_f32(&g);
    mp_param_layout_free(&lay);
}

static void test_exact_data_is_alive(void **state)
{
    (void)state;
    mp_gpt_dims d = {.hidden = 32, .heads = 4, .ffn = 128, .vocab = 64, .seq = 16,
                     .micro_batch = 1, .layers = 2, .tied = true, .tp = 1};
    exact_data_is_alive_of(d, NULL);
    /* T5: the encoder sees the loss only through cross-attention, and its
     * self-attention's score gradients (about 1e-6 here) fall below the
     * 2^-11 grid: Q, K, their norm and the encoder's relative bias get no
     * gradient in exact mode (measured: 0 of 128, 5 of 32, 27% of QKV), nor
     * does most of the cross-attention queries' norm (4 of 32), so tolerance
     * mode is what checks them; everything else is alive */
    d.t5 = d.relu = d.rmsnorm = d.no_bias = true;
    d.enc_layers = 1;
    d.dec_seq = 8;
    const char *const quiet[] = {"encoder.rel_bias", "encoder.layers.0.ln1.weight",
                                 "encoder.layers.0.qkv.weight", "decoder.layers.0.lnx.weight",
                                 NULL};
    exact_data_is_alive_of(d, quiet);
    /* GPT-OSS's blocks: the sinks' gradients (a row term each on the
     * attention-gradient grid), the biases, the clamped experts */
    d = (mp_gpt_dims){.hidden = 32, .heads = 4, .kv_heads = 2, .ffn = 64, .vocab = 64,
                      .seq = 16, .micro_batch = 1, .layers = 2, .tied = true, .tp = 1,
                      .rmsnorm = true, .gated = true, .rope = true, .window = 5,
                      .window_skip_freq = 2, .sinks = true, .glu_limit = 0.5, .experts = 4,
                      .top_k = 2, .expert_ffn = 32, .ep = 1, .expert_bias = true};
    exact_data_is_alive_of(d, NULL);
}

/* The exactness argument on its own: a GEMM over K = 512 terms of grid
 * values, computed whole and as 4 partial sums added in another order (as a
 * row-parallel GEMM and its all-reduce do), agrees bit for bit; the same with
 * ordinary random floats does not, which is why exact mode exists. */
static void gemm_split(const float *a, const float *b, float *whole, float *split, int M, int N,
                       int K, int parts)
{
    const mp_backend *be = mp_backend_cpu();
    be->gemm(MP_REAL32, false, false, M, N, K, 1.0, a, K, b, N, 0.0, whole, N);
    float *part = calloc((size_t)M * N, sizeof(float));
    for (int i = 0; i < M * N; i++)
        split[i] = 0;
    for (int p = parts - 1; p >= 0; p--) { /* reverse order on purpose */
        int k0 = p * (K / parts);
        be->gemm(MP_REAL32, false, false, M, N, K / parts, 1.0, a + k0, K, b + (size_t)k0 * N,
                 N, 0.0, part, N);
        for (int i = 0; i < M * N; i++)
            split[i] += part[i];
    }
    free(part);
}

static void test_exact_sums_ignore_order(void **state)
{
    (void)state;
    enum { M = 8, N = 8, K = MP_EXACT_MAX_TERMS };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    float whole[M * N], split[M * N];
    uint64_t s = 3;
    /* the worst case: every value at the limit of its grid, all the same sign */
    for (int i = 0; i < M * K; i++)
        a[i] = ldexpf(128, -MP_Q_ACT);
    for (int i = 0; i < K * N; i++)
        b[i] = ldexpf(i % 7 ? 127 : 128, -MP_Q_WEIGHT);
    gemm_split(a, b, whole, split, M, N, K, 4);
    assert_memory_equal(whole, split, sizeof whole);
    /* random grid values */
    for (int i = 0; i < M * K; i++)
        a[i] = ldexpf((float)floor(frand(&s) * 128), -MP_Q_ACT);
    for (int i = 0; i < K * N; i++)
        b[i] = ldexpf((float)floor(frand(&s) * 128), -MP_Q_WEIGHT);
    gemm_split(a, b, whole, split, M, N, K, 4);
    assert_memory_equal(whole, split, sizeof whole);
    /* ordinary floats: the order shows */
    for (int i = 0; i < M * K; i++)
        a[i] = (float)frand(&s);
    for (int i = 0; i < K * N; i++)
        b[i] = (float)frand(&s);
    gemm_split(a, b, whole, split, M, N, K, 4);
    assert_true(memcmp(whole, split, sizeof whole) != 0);
    free(a);
    free(b);
}

/* Sharded AdamW (distributed optimizer) is elementwise: updating shards
 * separately gives the bits of one update of the whole. */
static void test_sharded_adamw_matches_whole(void **state)
{
    (void)state;
    mp_gpt_dims d = tiny_dims(1, 0, false, true);
    mp_param_layout lay;
    mp_error err;
    assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
    size_t n = lay.total;
    float *w1 = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
    float *g = malloc(n * sizeof(float));
    float *m1 = calloc(n, sizeof(float)), *v1 = calloc(n, sizeof(float));
    float *m2 = calloc(n, sizeof(float)), *v2 = calloc(n, sizeof(float));
    uint64_t s = 5;
    for (size_t i = 0; i < n; i++) {
        w1[i] = w2[i] = (float)frand(&s) * 0.1f;
        g[i] = (float)frand(&s) * 1e-3f;
    }
    mp_adam_cfg cfg = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    for (int step = 1; step <= 3; step++) {
        mp_adamw_update_f32(w1, g, m1, v1, &lay, 0, n, &cfg, step, false);
        size_t cut[4] = {0, n / 3 + 1, 2 * n / 3 + 5, n};
        for (int k = 0; k < 3; k++) /* shard k's moments are indexed from its start */
            mp_adamw_update_f32(w2, g, m2 + cut[k], v2 + cut[k], &lay, cut[k], cut[k + 1], &cfg,
                                step, false);
    }
    assert_memory_equal(w1, w2, n * sizeof(float));
    assert_true(w1[0] != (float)0);
    free(w1);
    free(w2);
    free(g);
    free(m1);
    free(v1);
    free(m2);
    free(v2);
    mp_param_layout_free(&lay);
}

/* Pipeline stages: the model cut into [embedding, block 0] and [block 1,
 * head], run one after the other with the activation and the gradient handed
 * over, gives the whole model's loss and gradients bit for bit (exact mode,
 * so that the tied embedding's two gradient halves add exactly). */
static void check_stages(bool tied)
{
    mp_gpt_dims d = {.hidden = 32, .heads = 4, .ffn = 128, .vocab = 64, .seq = 16,
                     .micro_batch = 1, .layers = 2, .tied = tied, .tp = 1};
    mp_gpt_dims da = d, db = d;
    da.item_begin = 0;
    da.item_end = 2;
    db.item_begin = 2;
    db.item_end = 4;
    mp_param_layout lw, la, lb;
    mp_error err;
    assert_int_equal(mp_param_layout_build(&d, &lw, &err), MP_OK);
    assert_int_equal(mp_param_layout_build(&da, &la, &err), MP_OK);
    assert_int_equal(mp_param_layout_build(&db, &lb, &err), MP_OK);
    assert_true(la.head < 0 && lb.wte < 0 && lb.head >= 0 && mp_block_param(&la, 1, MP_BLK_LN1_W) < 0);
    mp_group self = {.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    mp_gpt_f32 w, a, b;
    const mp_backend *be = mp_backend_cpu();
    assert_int_equal(mp_gpt_init_f32(&w, &d, &lw, be, self, 1, 1, true, 9, NULL, &err), MP_OK);
    assert_int_equal(mp_gpt_init_f32(&a, &da, &la, be, self, 1, 1, true, 9, NULL, &err), MP_OK);
    assert_int_equal(mp_gpt_init_f32(&b, &db, &lb, be, self, 1, 1, true, 9, NULL, &err), MP_OK);
    w.grad_scale = a.grad_scale = b.grad_scale = (float)MP_EXACT_GRAD_SCALE;
    int32_t tok[16], tgt[16];
    make_tokens(tok, tgt, 16, d.vocab);
    double lw_sum = 0, la_sum = 0, lb_sum = 0;
    assert_int_equal(mp_gpt_forward_f32(&w, 0, tok, tgt, &lw_sum, &err), MP_OK);
    assert_int_equal(mp_gpt_backward_f32(&w, 0, &err), MP_OK);
    assert_int_equal(mp_gpt_forward_f32(&a, 0, tok, tgt, &la_sum, &err), MP_OK);
    b.stage_in = mp_gpt_stage_output_f32(&a, 0);
    assert_int_equal(mp_gpt_forward_f32(&b, 0, tok, tgt, &lb_sum, &err), MP_OK);
    assert_true(la_sum == 0 && lb_sum == lw_sum && lw_sum > 0);
    assert_int_equal(mp_gpt_backward_f32(&b, 0, &err), MP_OK);
    a.stage_grad_in = mp_gpt_stage_input_grad_f32(&b);
    assert_int_equal(mp_gpt_backward_f32(&a, 0, &err), MP_OK);
    const mp_param_layout *lays[2] = {&la, &lb};
    mp_gpt_f32 *parts[2] = {&a, &b};
    float *tied_sum = calloc((size_t)d.vocab * d.hidden, sizeof(float));
    int seen = 0;
    for (int k = 0; k < 2; k++)
        for (int pid = 0; pid < lays[k]->n; pid++) {
            const mp_param *p = &lays[k]->p[pid];
            const mp_param *q = &lw.p[p->ref_index];
            size_t n = (size_t)p->lrows * p->lcols;
            assert_int_equal(n, (size_t)q->lrows * q->lcols);
            assert_memory_equal(parts[k]->w + p->offset, w.w + q->offset, n * sizeof(float));
            if (tied && p->ref_index == lw.wte) {
                for (size_t i = 0; i < n; i++)
                    tied_sum[i] += parts[k]->g[p->offset + i];
            } else {
                assert_memory_equal(parts[k]->g + p->offset, w.g + q->offset, n * sizeof(float));
            }
            seen++;
        }
    assert_int_equal(seen, lw.n + (tied ? 1 : 0));
    if (tied)
        assert_memory_equal(tied_sum, w.g + lw.p[lw.wte].offset,
                            (size_t)d.vocab * d.hidden * sizeof(float));
    free(tied_sum);
    mp_gpt_free_f32(&w);
    mp_gpt_free_f32(&a);
    mp_gpt_free_f32(&b);
    mp_param_layout_free(&lw);
    mp_param_layout_free(&la);
    mp_param_layout_free(&lb);
}

static void test_stages_tied(void **state)
{
    (void)state;
    check_stages(true);
}

static void test_stages_untied(void **state)
{
    (void)state;
    check_stages(false);
}

/* Context parallelism's load balancing (Megatron-LM): 2cp chunks, CP rank c
 * holding chunks c and 2cp-1-c, so each rank's queries see as many causal
 * keys; every position belongs to exactly one rank. */
static void test_cp_positions_balance(void **state)
{
    (void)state;
    for (int cp = 2; cp <= 8; cp *= 2) {
        mp_gpt_dims d = {.seq = 16 * cp, .micro_batch = 1, .cp = cp};
        int owner[128];
        for (int i = 0; i < d.seq; i++)
            owner[i] = -1;
        long work0 = -1;
        for (int c = 0; c < cp; c++) {
            d.cp_rank = c;
            assert_int_equal(mp_dims_positions(&d), d.seq / cp);
            long work = 0; /* keys a causal query sees: its position + 1 */
            for (int i = 0; i < mp_dims_positions(&d); i++) {
                int g = mp_dims_global_pos(&d, i);
                assert_true(g >= 0 && g < d.seq);
                assert_int_equal(owner[g], -1);
                owner[g] = c;
                if (i > 0)
                    assert_true(g > mp_dims_global_pos(&d, i - 1)); /* ascending */
                work += g + 1;
            }
            if (work0 < 0)
                work0 = work;
            assert_int_equal(work, work0);
        }
        /* rank 0 holds the first and the last chunk */
        d.cp_rank = 0;
        assert_int_equal(mp_dims_global_pos(&d, 0), 0);
        assert_int_equal(mp_dims_global_pos(&d, mp_dims_positions(&d) - 1), d.seq - 1);
    }
}

/* DeepSeek-V3's group-limited routing on scores made so that the groups
 * change the choice: 8 experts in 4 groups of 2, 2 groups, top 4, a group
 * ranked by the sum of its top 4/2 = 2. Expert 2 (second best alone) lies in
 * group 1, which loses to groups 2 (1.0) and 0 (0.9, tied with group 3: the
 * lower group wins); ties among experts go to the lower index. */
static void test_moe_group_limited_pick(void **state)
{
    (void)state;
    const double q[8] = {0.9, 0.0, 0.8, 0.0, 0.5, 0.5, 0.45, 0.45};
    unsigned char scratch[8 + 4];
    double gscore[4];
    size_t choice[4];
    mp_moe_pick(q, 8, 4, 1, 0, false, choice, scratch, gscore); /* no groups */
    const size_t plain[4] = {0, 2, 4, 5};
    for (int j = 0; j < 4; j++)
        assert_int_equal(choice[j], plain[j]);
    mp_moe_pick(q, 8, 4, 4, 2, false, choice, scratch, gscore);
    const size_t grouped[4] = {0, 4, 5, 1};
    for (int j = 0; j < 4; j++)
        assert_int_equal(choice[j], grouped[j]);
    assert_true(gscore[2] == 1.0 && gscore[0] == gscore[3]);
    /* all groups allowed: the plain choice again */
    mp_moe_pick(q, 8, 4, 4, 4, false, choice, scratch, gscore);
    for (int j = 0; j < 4; j++)
        assert_int_equal(choice[j], plain[j]);
    /* one group of top-1 of each: groups ranked by their best alone */
    mp_moe_pick(q, 8, 1, 4, 1, false, choice, scratch, gscore);
    assert_int_equal(choice[0], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_backward),
        cmocka_unit_test(test_gelu_backward),
        cmocka_unit_test(test_rmsnorm_backward),
        cmocka_unit_test(test_norm_eps_used),
        cmocka_unit_test(test_swiglu_backward),
        cmocka_unit_test(test_attention_backward),
        cmocka_unit_test(test_model_gradients_tied),
        cmocka_unit_test(test_model_gradients_untied),
        cmocka_unit_test(test_model_gradients_llama),
        cmocka_unit_test(test_model_gradients_bert),
        cmocka_unit_test(test_model_gradients_gelu_forms),
        cmocka_unit_test(test_relu_backward),
        cmocka_unit_test(test_t5_buckets),
        cmocka_unit_test(test_t5_attention_backward),
        cmocka_unit_test(test_model_gradients_t5),
        cmocka_unit_test(test_rope_turns_back),
        cmocka_unit_test(test_model_gradients_moe),
        cmocka_unit_test(test_moe_experts_grouped),
        cmocka_unit_test(test_model_gradients_mla),
        cmocka_unit_test(test_norm_eps_reaches_every_norm),
        cmocka_unit_test(test_model_gradients_norm_eps),
        cmocka_unit_test(test_model_gradients_oss),
        cmocka_unit_test(test_mla_slices_partition),
        cmocka_unit_test(test_recompute_modules_drop_and_rebuild),
        cmocka_unit_test(test_slices_partition_tensors),
        cmocka_unit_test(test_expert_slices_partition),
        cmocka_unit_test(test_qkv_split_keeps_heads),
        cmocka_unit_test(test_rank_order),
        cmocka_unit_test(test_quantize),
        cmocka_unit_test(test_exact_data_is_alive),
        cmocka_unit_test(test_exact_sums_ignore_order),
        cmocka_unit_test(test_sharded_adamw_matches_whole),
        cmocka_unit_test(test_stages_tied),
        cmocka_unit_test(test_stages_untied),
        cmocka_unit_test(test_cp_positions_balance),
        cmocka_unit_test(test_moe_group_limited_pick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
