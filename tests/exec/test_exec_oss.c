/* test_exec_oss.c — GPT-OSS's parts of the executor, one rank, no MPI: the
 * windowed sink softmax and the clamped SwiGLU against references written
 * here from HuggingFace's definitions (modeling_gpt_oss: the sink logit
 * joins the maximum and the denominator unscaled and takes no value; a
 * query at t sees keys j with t - window < j <= t; gate <= limit, |up| <=
 * limit, (up + 1) gate sigmoid(1.702 gate)), each reference also run with a
 * planted error (window off by one, sink left out, clamp left out) that the
 * comparison must catch; their backwards and every tensor of a model with
 * them against finite differences; and a query split as CP splits it. */
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
#include "exec/params.h"
#include "exec/runtime.h"

static double frand(uint64_t *s)
{
    *s = mp_mix64(*s);
    return (double)(*s >> 11) * 0x1.0p-53 * 2 - 1;
}

/* ---- the softmax: reference and planted errors ---- */

enum { PLANT_NONE, PLANT_WINDOW_PLUS, PLANT_WINDOW_MINUS, PLANT_NO_SINK, PLANT_SINK_SCALED };

/* HF's eager path for one row of scores at position t: mask, [scores | sink]
 * minus their maximum, softmax, the sink's column dropped. */
static void ref_row(double *out, const double *raw, int sk, int t, int window, double sink,
                    double scale, int plant)
{
    int w = plant == PLANT_WINDOW_PLUS ? window + 1 : plant == PLANT_WINDOW_MINUS ? window - 1
                                                                                : window;
    bool has_sink = plant != PLANT_NO_SINK;
    double sk_logit = plant == PLANT_SINK_SCALED ? sink * scale : sink;
    double logit[64], mx = has_sink ? sk_logit : -INFINITY;
    for (int j = 0; j < sk; j++) {
        bool seen = j <= t && (window == 0 || t - j < w);
        logit[j] = seen ? raw[j] * scale : -INFINITY;
        mx = fmax(mx, logit[j]);
    }
    double sum = has_sink ? exp(sk_logit - mx) : 0;
    for (int j = 0; j < sk; j++)
        sum += logit[j] == -INFINITY ? 0 : exp(logit[j] - mx);
    for (int j = 0; j < sk; j++)
        out[j] = logit[j] == -INFINITY ? 0 : exp(logit[j] - mx) / sum;
}

/* The largest difference between the kernel's rows and the reference's. */
static double softmax_gap(int window, int plant)
{
    enum { S = 9 };
    double raw[S * S], p[S * S], ref[S];
    uint64_t s = 3;
    for (int i = 0; i < S * S; i++)
        raw[i] = frand(&s) * 3;
    double sink = 0.7, scale = 0.5, gap = 0;
    memcpy(p, raw, sizeof p);
    mp_attn_softmax_oss_f64(p, S, S, NULL, true, window, &sink, scale, false);
    for (int i = 0; i < S; i++) {
        ref_row(ref, raw + i * S, S, i, window, sink, scale, plant);
        for (int j = 0; j < S; j++)
            gap = fmax(gap, fabs(ref[j] - p[i * S + j]));
    }
    return gap;
}

static void test_sink_softmax_matches_hf(void **state)
{
    (void)state;
    for (int w = 0; w <= 4; w += 2) {
        assert_true(softmax_gap(w, PLANT_NONE) < 1e-15);
        /* the planted errors: each must be seen */
        assert_true(softmax_gap(w, PLANT_NO_SINK) > 1e-3);
        assert_true(softmax_gap(w, PLANT_SINK_SCALED) > 1e-3);
        if (w) {
            assert_true(softmax_gap(w, PLANT_WINDOW_PLUS) > 1e-3);
            assert_true(softmax_gap(w, PLANT_WINDOW_MINUS) > 1e-3);
        }
    }
}

/* The probabilities of a row and its sink sum to one: the sink takes what
 * the keys leave (with window 1 a query sees itself alone). */
static void test_sink_takes_the_rest(void **state)
{
    (void)state;
    double p[4 * 4] = {0}, sink = 0;
    mp_attn_softmax_oss_f64(p, 4, 4, NULL, true, 1, &sink, 1.0, false);
    for (int i = 0; i < 4; i++) /* all scores 0: the key and the sink share alike */
        for (int j = 0; j < 4; j++)
            assert_true(fabs(p[i * 4 + j] - (i == j ? 0.5 : 0.0)) < 1e-15);
}

/* The backward (ds and the sink's gradient) against finite differences of
 * L = sum dP * P, P the forward's probabilities. */
static double sm_loss(const double *raw, const double *dp, int n, int window, double sink,
                      double scale)
{
    double p[64];
    memcpy(p, raw, sizeof(double) * (size_t)(n * n));
    mp_attn_softmax_oss_f64(p, n, n, NULL, true, window, &sink, scale, false);
    double l = 0;
    for (int i = 0; i < n * n; i++)
        l += p[i] * dp[i];
    return l;
}

static void test_sink_softmax_backward(void **state)
{
    (void)state;
    enum { N = 6 };
    const int window = 3;
    double raw[N * N], dp[N * N], p[N * N], ds[N * N];
    uint64_t s = 19;
    for (int i = 0; i < N * N; i++) {
        raw[i] = frand(&s) * 2;
        dp[i] = frand(&s);
    }
    double sink = 0.3, scale = 0.7, dsink = 0.25; /* added to */
    memcpy(p, raw, sizeof p);
    mp_attn_softmax_oss_f64(p, N, N, NULL, true, window, &sink, scale, false);
    memcpy(ds, dp, sizeof ds);
    mp_attn_softmax_oss_backward_f64(ds, &dsink, p, N, N, NULL, true, window, scale, false);
    const double e = 1e-6;
    for (int i = 0; i < N * N; i++) {
        double keep = raw[i];
        raw[i] = keep + e;
        double up = sm_loss(raw, dp, N, window, sink, scale);
        raw[i] = keep - e;
        double down = sm_loss(raw, dp, N, window, sink, scale);
        raw[i] = keep;
        assert_true(fabs((up - down) / (2 * e) - ds[i]) < 1e-8);
    }
    double fd = (sm_loss(raw, dp, N, window, sink + e, scale) -
                 sm_loss(raw, dp, N, window, sink - e, scale)) / (2 * e);
    assert_true(fabs(fd) > 1e-3); /* a gradient worth checking */
    assert_true(fabs(fd - (dsink - 0.25)) < 1e-8);
}

/* ---- the clamped SwiGLU ---- */

static double ref_glu(double g, double u, double limit, bool clamp)
{
    if (clamp) {
        g = fmin(g, limit);
        u = fmax(fmin(u, limit), -limit);
    }
    return (u + 1) * g / (1 + exp(-1.702 * g));
}

static void test_clamped_swiglu(void **state)
{
    (void)state;
    enum { R = 3, F = 7 };
    const double limit = 0.75;
    double gu[R * 2 * F], out[R * F], dy[R * F], dgu[R * 2 * F];
    uint64_t s = 23;
    int clamped = 0;
    for (int i = 0; i < R * 2 * F; i++) {
        gu[i] = frand(&s) * 2;
        clamped += fabs(gu[i]) > limit;
    }
    assert_true(clamped > 4); /* the clamps are exercised */
    for (int i = 0; i < R * F; i++)
        dy[i] = frand(&s);
    mp_swiglu_clamped_forward_f64(out, gu, R, F, limit);
    double gap = 0, planted = 0;
    for (int r = 0; r < R; r++)
        for (int i = 0; i < F; i++) {
            double g = gu[r * 2 * F + i], u = gu[r * 2 * F + F + i];
            gap = fmax(gap, fabs(out[r * F + i] - ref_glu(g, u, limit, true)));
            planted = fmax(planted, fabs(out[r * F + i] - ref_glu(g, u, limit, false)));
        }
    assert_true(gap < 1e-15);
    assert_true(planted > 1e-2); /* the clamp left out is seen */
    mp_swiglu_clamped_backward_f64(dgu, dy, gu, R, F, limit);
    for (int i = 0; i < R * 2 * F; i++) {
        double keep = gu[i], up = 0, down = 0;
        gu[i] = keep + 1e-6;
        mp_swiglu_clamped_forward_f64(out, gu, R, F, limit);
        for (int k = 0; k < R * F; k++)
            up += out[k] * dy[k];
        gu[i] = keep - 1e-6;
        mp_swiglu_clamped_forward_f64(out, gu, R, F, limit);
        for (int k = 0; k < R * F; k++)
            down += out[k] * dy[k];
        gu[i] = keep;
        assert_true(fabs((up - down) / 2e-6 - dgu[i]) < 1e-7);
    }
}

/* ---- CP's split of the queries with a window and sinks ---- */

/* Context parallelism gives a rank two chunks of the queries (qpos: their
 * global positions) against every key: each of its rows must be the
 * unsplit run's row bit for bit, with the window and sinks too. */
static void test_window_under_cp_split(void **state)
{
    (void)state;
    enum { S = 8, B = 2, H = 2, D = 4, HL = H * D, ROW = 3 * HL };
    double qkv[S * B * ROW], out[S * B * HL], probs[B * H * S * S];
    double q_half[S / 2 * B * ROW], out_half[S / 2 * B * HL], probs_half[B * H * S / 2 * S];
    double sink[H] = {0.25, -0.5};
    uint64_t s = 31;
    for (size_t i = 0; i < sizeof qkv / sizeof *qkv; i++)
        qkv[i] = frand(&s);
    mp_attn_oss_f64 x = {.window = 3, .sink = sink, .dsink = NULL};
    const mp_backend *be = mp_backend_cpu();
    mp_attention_forward_oss_f64(be, out, probs, qkv, ROW, qkv + HL, qkv + 2 * HL, ROW, NULL, S,
                                 S, B, H, D, 1, &x, false);
    /* rank 0 of cp 2: chunks 0 and 3 of 4, positions 0, 1 and 6, 7 */
    int qpos[S / 2] = {0, 1, 6, 7};
    for (int i = 0; i < S / 2; i++)
        memcpy(q_half + (size_t)i * B * ROW, qkv + (size_t)qpos[i] * B * ROW,
               sizeof(double) * B * ROW);
    mp_attention_forward_oss_f64(be, out_half, probs_half, q_half, ROW, qkv + HL, qkv + 2 * HL,
                                 ROW, qpos, S / 2, S, B, H, D, 1, &x, false);
    for (int i = 0; i < S / 2; i++)
        assert_memory_equal(out_half + (size_t)i * B * HL, out + (size_t)qpos[i] * B * HL,
                            sizeof(double) * B * HL);
}

/* ---- the whole model: every tensor's gradient against finite differences ---- */

static double model_loss(mp_gpt_f64 *g, const int32_t *tok, const int32_t *tgt)
{
    double loss = 0;
    mp_error err;
    assert_int_equal(mp_gpt_forward_f64(g, 0, tok, tgt, &loss, &err), MP_OK);
    return loss;
}

/* A tiny GPT-OSS: LLaMA's blocks with biases, grouped-query attention, the
 * first block windowed (3), the second full, a sink per head, then (moe)
 * experts with biases and the clamped SwiGLU; every tensor's gradient
 * against central differences and not zero (else the check proves nothing). */
static void check_oss_gradients(bool moe, double limit)
{
    mp_gpt_dims d = {.hidden = 16, .heads = 4, .kv_heads = 2, .ffn = 32, .vocab = 24,
                     .seq = 8, .micro_batch = 2, .layers = 2, .tp = 1, .rmsnorm = true,
                     .swiglu = true, .rope = true, .window = 3, .window_skip_freq = 2,
                     .sinks = true, .glu_limit = limit};
    if (moe) {
        d.experts = 4, d.top_k = 2, d.expert_ffn = 16, d.ep = 1, d.expert_bias = true;
    }
    mp_param_layout lay;
    mp_error err;
    assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
    mp_group self = {.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    mp_gpt_f64 g;
    assert_int_equal(mp_gpt_init_f64(&g, &d, &lay, mp_backend_cpu(), self, 1, 1, false, 99,
                                     NULL, &err),
                     MP_OK);
    for (size_t i = 0; i < lay.total; i++)
        g.w[i] *= 8;
    int S = mp_dims_tokens(&d);
    int32_t tok[64], tgt[64];
    for (int i = 0; i < S; i++) {
        tok[i] = (int32_t)(mp_mix64((uint64_t)i * 3 + 1) % (uint64_t)d.vocab);
        tgt[i] = (int32_t)(mp_mix64((uint64_t)i * 5 + 2) % (uint64_t)d.vocab);
    }
    assert_true(model_loss(&g, tok, tgt) > 0);
    memset(g.g, 0, lay.total * sizeof(double));
    assert_int_equal(mp_gpt_backward_f64(&g, 0, &err), MP_OK);
    const double e = 2.5e-6;
    int sinks = 0, biases = 0;
    for (int pid = 0; pid < lay.n; pid++) {
        const mp_param *p = &lay.p[pid];
        size_t n = (size_t)p->lrows * p->lcols;
        sinks += strstr(p->name, "sinks") != NULL;
        biases += strstr(p->name, ".bias") != NULL;
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
        if (strstr(p->name, "layers.") && !(scale > 1e-9))
            fail_msg("%s: no gradient to check (scale %g)", p->name, scale);
    }
    assert_int_equal(sinks, 2);
    assert_int_equal(biases, moe ? 2 * 5 : 2 * 4); /* qkv, proj, fc1/fc2 or router, experts' */
    mp_gpt_free_f64(&g);
    mp_param_layout_free(&lay);
}

static void test_model_gradients_oss(void **state)
{
    (void)state;
    check_oss_gradients(true, 1.5);
    check_oss_gradients(false, 1.5); /* the dense MLP's clamped SwiGLU and biases */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sink_softmax_matches_hf),
        cmocka_unit_test(test_sink_takes_the_rest),
        cmocka_unit_test(test_sink_softmax_backward),
        cmocka_unit_test(test_clamped_swiglu),
        cmocka_unit_test(test_window_under_cp_split),
        cmocka_unit_test(test_model_gradients_oss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
