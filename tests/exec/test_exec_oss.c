/* test_exec_oss.c — GPT-OSS's parts of the executor, one rank, no MPI: the
 * windowed sink softmax and the clamped SwiGLU against references written
 * here from HuggingFace's definitions (modeling_gpt_oss: the sink logit
 * joins the maximum and the denominator unscaled and takes no value; a
 * query at t sees keys j with t - window < j <= t; gate <= limit, |up| <=
 * limit, (up + 1) gate sigmoid(1.702 gate)), each reference also run with a
 * planted error (window off by one, sink left out, clamp left out) that the
 * comparison must catch; their backwards against finite differences (a
 * GPT-OSS model's every tensor: test_exec_layers.c); a query split as CP
 * splits it; the new tensors' TP and EP split. */
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

/* ---- the parameter table: GPT-OSS's tensors, split as Megatron splits them ---- */

static mp_gpt_dims tiny_oss(int tp, int tp_rank, int ep, int ep_rank, int etp)
{
    return (mp_gpt_dims){.hidden = 16, .heads = 4, .kv_heads = 2, .ffn = 32, .vocab = 24,
                         .seq = 8, .micro_batch = 2, .layers = 2, .tp = tp, .tp_rank = tp_rank,
                         .sp = tp > 1, .rmsnorm = true, .gated = true, .rope = true,
                         .window = 3, .window_skip_freq = 2, .sinks = true, .glu_limit = 1.5,
                         .experts = 4, .top_k = 2, .expert_ffn = 16, .ep = ep,
                         .ep_rank = ep_rank, .etp = etp, .expert_bias = true};
}

static const mp_param *find(const mp_param_layout *lay, const char *name)
{
    for (int i = 0; i < lay->n; i++)
        if (!strcmp(lay->p[i].name, name))
            return &lay->p[i];
    fail_msg("no tensor %s", name);
    return NULL;
}

/* The sinks split with the heads; the router's bias replicated; each expert's
 * fc1 bias split with its fc1 (etp = tp) or whole (etp = 1), its fc2 bias
 * whole; this rank's experts' rows only. */
static void test_oss_tensors_split(void **state)
{
    (void)state;
    mp_error err;
    for (int etp = 0; etp <= 1; etp++) {
        mp_gpt_dims d = tiny_oss(2, 1, 2, 1, etp);
        mp_param_layout lay;
        assert_int_equal(mp_param_layout_build(&d, &lay, &err), MP_OK);
        const mp_param *sk = find(&lay, "layers.1.sinks");
        assert_int_equal(sk->cols, 4);
        assert_int_equal(sk->lcols, 2);
        const mp_param *rb = find(&lay, "layers.0.router.bias");
        assert_int_equal(rb->lcols, 4);
        const mp_param *b1 = find(&lay, "layers.0.experts.fc1.bias");
        assert_int_equal(b1->rows, 4);
        assert_int_equal(b1->lrows, 2); /* ep 2: two experts a rank */
        assert_int_equal(b1->lcols, etp == 1 ? 32 : 16);
        const mp_param *b2 = find(&lay, "layers.0.experts.fc2.bias");
        assert_int_equal(b2->lrows, 2);
        assert_int_equal(b2->lcols, 16);
        find(&lay, "layers.0.qkv.bias");
        find(&lay, "layers.0.proj.bias");
        mp_param_layout_free(&lay);
    }
}

/* ---- YaRN's rotary angles ---- */

/* GPT-OSS's frequencies (head_dim 64, its config.json's rope_theta and
 * rope_scaling) as HF transformers 5.24's own _compute_yarn_parameters gives
 * them (float32; pairs 0..7 extrapolated, 8..17 on the ramp, 18.. divided by
 * 32), and its attention factor; exec computes them in double. */
static void test_yarn_frequencies_match_hf(void **state)
{
    (void)state;
    const mp_rope_spec oss = {.theta = 150000.0, .yarn = true, .factor = 32.0,
                              .original_seq = 4096, .beta_fast = 32.0, .beta_slow = 1.0,
                              .unrounded = true};
    const struct {
        int k;
        double inv_freq;
    } hf[] = {{0, 1.0},
              {5, 0.15532298386096954},
              {8, 0.05081327259540558},
              {9, 0.031705696135759354},
              {12, 0.006794959306716919},
              {15, 0.00105260219424963},
              {16, 0.0004564839182421565},
              {17, 0.00012931869423482567},
              {18, 3.830881178146228e-05},
              {20, 1.818833698052913e-05},
              {31, 3.023511396804679e-07}};
    for (size_t i = 0; i < sizeof hf / sizeof *hf; i++) {
        double got = mp_rope_inv_freq(&oss, hf[i].k, 64);
        if (fabs(got - hf[i].inv_freq) > 1e-6 * hf[i].inv_freq)
            fail_msg("pair %d: %.9g, HF %.9g", hf[i].k, got, hf[i].inv_freq);
    }
    assert_true(fabs(mp_rope_attention_factor(&oss) - 1.3465735902799727) < 1e-15);
    /* the ramp: [8.09, 17.39] unrounded, [8, 18] rounded out (HF's truncate) */
    double lo, hi;
    mp_rope_yarn_range(&oss, 64, &lo, &hi);
    assert_true(lo > 8.0 && lo < 8.2 && hi > 17.3 && hi < 17.5);
    mp_rope_spec rounded = oss;
    rounded.unrounded = false;
    mp_rope_yarn_range(&rounded, 64, &lo, &hi);
    assert_true(lo == 8.0 && hi == 18.0);
    /* no YaRN: plain angles, base 10000 when none is given, factor 1 */
    assert_true(mp_rope_inv_freq(NULL, 3, 8) == pow(10000.0, -6.0 / 8));
    mp_rope_spec plain = {.theta = 500000.0};
    assert_true(mp_rope_inv_freq(&plain, 3, 8) == pow(500000.0, -6.0 / 8));
    assert_true(mp_rope_attention_factor(&plain) == 1.0);
    assert_true(mp_rope_softmax_scale(&plain) == 1.0 && mp_rope_softmax_scale(&oss) == 1.0);
    /* DeepSeek's variant (HF: get_mscale(s, m) = 0.1 m ln s + 1): cos and sin
     * x g(mscale) / g(mscale_all_dim), 1 for DeepSeek-V3's mscale =
     * mscale_all_dim = 1; the softmax x g(mscale_all_dim)^2 */
    mp_rope_spec ds = {.theta = 10000.0, .yarn = true, .factor = 40.0, .original_seq = 4096,
                       .mscale = 1.0, .mscale_all_dim = 1.0};
    assert_true(mp_rope_attention_factor(&ds) == 1.0);
    double g40 = 1.0 + 0.1 * 3.6888794541139363; /* ln 40 */
    assert_true(fabs(mp_rope_softmax_scale(&ds) - g40 * g40) < 1e-15);
    ds.mscale_all_dim = 0.5;
    assert_true(fabs(mp_rope_attention_factor(&ds) - g40 / (1.0 + 0.05 * 3.6888794541139363)) <
                1e-15);
    /* mscale_all_dim alone: HF's default factor for cos and sin */
    ds.mscale = 0.0;
    assert_true(fabs(mp_rope_attention_factor(&ds) - g40) < 1e-15);
    /* factor 1: no scaling anywhere */
    ds.factor = 1.0;
    assert_true(mp_rope_softmax_scale(&ds) == 1.0 && mp_rope_attention_factor(&ds) == 1.0);
}

/* The backward of the YaRN turn is its transpose, scale included:
 * <R x, y> = <x, R^T y> at CP-like positions; the turn scales each pair's
 * length by the attention factor exactly. */
static void test_yarn_rope_adjoint(void **state)
{
    (void)state;
    enum { S = 5, B = 2, HEADS = 2, HD = 16, LD = 40, N = S * B * LD };
    const int pos[S] = {0, 3, 9, 12, 15};
    const mp_rope_spec oss = {.theta = 150000.0, .yarn = true, .factor = 32.0,
                              .original_seq = 4096, .beta_fast = 32.0, .beta_slow = 1.0,
                              .unrounded = true};
    static double x[N], y[N], rx[N], ry[N];
    uint64_t seed = 7;
    for (int i = 0; i < N; i++) {
        x[i] = rx[i] = frand(&seed);
        y[i] = ry[i] = frand(&seed);
    }
    mp_rope_f64(rx, LD, HEADS, HD, &oss, pos, S, B, false, false, 0);
    mp_rope_f64(ry, LD, HEADS, HD, &oss, pos, S, B, true, false, 0);
    double a = 0, b = 0, nx = 0, nrx = 0;
    for (int r = 0; r < S * B; r++)
        for (int c = 0; c < HEADS * HD; c++) {
            size_t i = (size_t)r * LD + c;
            a += rx[i] * y[i];
            b += x[i] * ry[i];
            nx += x[i] * x[i];
            nrx += rx[i] * rx[i];
        }
    assert_true(fabs(a - b) < 1e-12 * (fabs(a) + 1));
    double m = mp_rope_attention_factor(&oss);
    assert_true(fabs(nrx - m * m * nx) < 1e-12 * nx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sink_softmax_matches_hf),
        cmocka_unit_test(test_sink_takes_the_rest),
        cmocka_unit_test(test_sink_softmax_backward),
        cmocka_unit_test(test_clamped_swiglu),
        cmocka_unit_test(test_window_under_cp_split),
        cmocka_unit_test(test_oss_tensors_split),
        cmocka_unit_test(test_yarn_frequencies_match_hf),
        cmocka_unit_test(test_yarn_rope_adjoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
