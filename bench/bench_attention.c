/* bench_attention.c — the executor's causal attention (forward and backward,
 * its products as the backend's GEMMs on per-head views) against a plain
 * loop implementation of the same forward (scores, softmax, weighted sum, one
 * dot product at a time, as the executor did before), one thread, in one run
 * so that the ratio holds on a noisy machine. Also checks that both forwards
 * agree to fp32 rounding.
 *   bench_attention [seq] [heads] [head_dim] [reps]   (defaults 512 4 64 3) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/kernels.h"

void openblas_set_num_threads(int);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The loops: qkv[s, 3*hl] (b = 1), out[s, hl], probs[heads, s, s]. */
static void loop_forward(float *out, float *probs, const float *qkv, int s, int heads, int hd)
{
    size_t hl = (size_t)heads * hd, row = 3 * hl;
    float scale = 1.0f / sqrtf((float)hd);
    for (int a = 0; a < heads; a++)
        for (int i = 0; i < s; i++) {
            const float *q = qkv + (size_t)i * row + (size_t)a * hd;
            float *pi = probs + ((size_t)a * s + i) * s, mx = -INFINITY, sum = 0;
            for (int j = 0; j <= i; j++) {
                const float *k = qkv + (size_t)j * row + hl + (size_t)a * hd;
                float dot = 0;
                for (int c = 0; c < hd; c++)
                    dot += q[c] * k[c];
                pi[j] = dot * scale;
                mx = pi[j] > mx ? pi[j] : mx;
            }
            for (int j = 0; j <= i; j++) {
                pi[j] = expf(pi[j] - mx);
                sum += pi[j];
            }
            float *o = out + (size_t)i * hl + (size_t)a * hd;
            memset(o, 0, (size_t)hd * sizeof *o);
            for (int j = 0; j <= i; j++) {
                const float *v = qkv + (size_t)j * row + 2 * hl + (size_t)a * hd;
                for (int c = 0; c < hd; c++)
                    o[c] += pi[j] / sum * v[c];
            }
        }
}

int main(int argc, char **argv)
{
    int s = argc > 1 ? atoi(argv[1]) : 512, heads = argc > 2 ? atoi(argv[2]) : 4;
    int hd = argc > 3 ? atoi(argv[3]) : 64, reps = argc > 4 ? atoi(argv[4]) : 3;
    if (s < 8 || s > 8192 || heads < 1 || heads > 64 || hd < 4 || hd > 256 || reps < 1) {
        fprintf(stderr, "usage: bench_attention [seq] [heads] [head_dim] [reps]\n");
        return 2;
    }
    openblas_set_num_threads(1);
    const mp_backend *be = mp_backend_cpu();
    size_t hl = (size_t)heads * hd, n_qkv = (size_t)s * 3 * hl, n_p = (size_t)heads * s * s;
    float *qkv = malloc(n_qkv * sizeof *qkv), *out = malloc((size_t)s * hl * sizeof *out);
    float *ref = malloc((size_t)s * hl * sizeof *ref), *probs = malloc(n_p * sizeof *probs);
    float *dout = malloc((size_t)s * hl * sizeof *dout), *dqkv = malloc(n_qkv * sizeof *dqkv);
    float *scratch = malloc((size_t)s * s * sizeof *scratch);
    if (!qkv || !out || !ref || !probs || !dout || !dqkv || !scratch) {
        fprintf(stderr, "bench_attention: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n_qkv; i++)
        qkv[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < (size_t)s * hl; i++)
        dout[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    double best_loop = INFINITY, best_fwd = INFINITY, best_bwd = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        loop_forward(ref, probs, qkv, s, heads, hd);
        double t1 = now();
        mp_attention_forward_f32(be, out, probs, qkv, s, 1, heads, hd, false);
        double t2 = now();
        mp_attention_backward_f32(be, dqkv, dout, qkv, probs, s, 1, heads, hd, scratch, false);
        double t3 = now();
        best_loop = fmin(best_loop, t1 - t0);
        best_fwd = fmin(best_fwd, t2 - t1);
        best_bwd = fmin(best_bwd, t3 - t2);
    }
    double worst = 0, scale = 0;
    for (size_t i = 0; i < (size_t)s * hl; i++) {
        worst = fmax(worst, fabs((double)out[i] - ref[i]));
        scale = fmax(scale, fabs((double)ref[i]));
    }
    printf("causal attention, seq %d, %d heads of %d, one sample, one thread, best of %d:\n", s,
           heads, hd, reps);
    printf("  forward, loops (one dot product at a time)   %9.3f ms\n", 1e3 * best_loop);
    printf("  forward, GEMMs on per-head views (exec)      %9.3f ms   %.1fx faster\n",
           1e3 * best_fwd, best_loop / best_fwd);
    printf("  backward, GEMMs (exec)                       %9.3f ms\n", 1e3 * best_bwd);
    printf("  forwards agree to %.2g of the output's scale\n", worst / scale);
    int bad = !(worst <= 1e-5 * scale);
    if (bad)
        printf("  MISMATCH between the two forwards\n");
    free(qkv);
    free(out);
    free(ref);
    free(probs);
    free(dout);
    free(dqkv);
    free(scratch);
    return bad;
}
