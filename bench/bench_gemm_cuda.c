/* bench_gemm_cuda.c — cuBLAS alone on the GEMMs of a Megatron transformer
 * layer, on one GPU: what the cost model's GEMM time (mp_gemm_mnk_time) is
 * set against where a GPU is lent (tools/gpu-check.sh, step g). No MPI, no
 * megaplan code: the shapes and the way Megatron-Core calls them.
 *
 * For each model, tensor-parallel degree t and tokens per micro-batch T
 * (b s), the four layer GEMMs (QKV, attention projection, FFN 1, FFN 2),
 * each three ways as Megatron-Core runs them with bf16 weights:
 *   fprop  Y[T, n] = X[T, k] W[n, k]^T   bf16 in and out
 *   dgrad  dX[T, k] = dY[T, n] W[n, k]   bf16 in and out
 *   wgrad  dW[n, k] += dY^T X            fp32 out, beta 1 (the fused
 *                                        accumulation into main_grad)
 * all with fp32 accumulation (CUBLAS_COMPUTE_32F), plus one tiny GEMM
 * repeated (the per-call floor), device-to-device copies (the bandwidth
 * an elementwise kernel sees), and each fprop at 4096 and 8192 tokens and t 2, 4, 8
 * run as Transformer Engine's TP overlap runs it: `parts` calls back to back,
 * each on its T/parts rows (what = split, out = fprop/<parts>; parts = t for
 * a ring exchange, 4 for a pipeline), which is what the cost model's
 * gemm_call_overhead per further call is checked against (docs/cost-model.md
 * §5, "TP overlap's split GEMMs"). Each time is the mean of REPS calls (or
 * split sequences) after WARM, by CUDA events around the batch.
 *
 * Output: CSV on stdout, one row per measurement:
 *   what,model,t,tokens,gemm,m,n,k,out,us,tflops_or_gbs
 * usage: bench_gemm_cuda [--quick]   (--quick: one model, for a smoke run) */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "bench_gemm_cuda"
#include "cuda_bench.h"

enum { WARM = 2, REPS = 5 };

typedef struct model {
    const char *name;
    int hidden, ffn, heads, kv_heads, head_dim;
    int gated; /* SwiGLU: FFN 1 has two halves */
} model;

static const model models[] = {
    {"gpt3-175b", 12288, 49152, 96, 96, 128, 0},
    {"gpt-22b", 6144, 24576, 48, 48, 128, 0},
    {"llama3-8b", 4096, 14336, 32, 8, 128, 1},
    {"llama3-70b", 8192, 28672, 64, 8, 128, 1},
    {"llama3-405b", 16384, 53248, 128, 8, 128, 1},
};


static cublasHandle_t blas;
static cudaEvent_t t0, t1;
static void *buf_a, *buf_b, *buf_c;

/* What one timed repetition runs (a GEMM, a split sequence, a copy). */
typedef struct job {
    bool ta, tb, fp32_out;
    int m, n, k, parts; /* parts > 0: the fprop as that many calls on m/parts rows */
    float beta;
    size_t copy_bytes;  /* > 0: a device-to-device copy of this many bytes */
} job;

static void run_job(const job *j)
{
    float one = 1;
    if (j->copy_bytes) {
        CK(cudaMemcpyAsync(buf_c, buf_a, j->copy_bytes, cudaMemcpyDeviceToDevice, 0));
        return;
    }
    if (j->parts > 0) { /* Y[m, n] = X[m, k] W[n, k]^T, part p on rows p m/parts .. */
        int rows = j->m / j->parts;
        for (int p = 0; p < j->parts; p++) {
            const uint16_t *x = (const uint16_t *)buf_a + (size_t)p * rows * j->k;
            uint16_t *y = (uint16_t *)buf_c + (size_t)p * rows * j->n;
            CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, j->n, rows, j->k, &one, buf_b,
                            CUDA_R_16BF, j->k, x, CUDA_R_16BF, j->k, &j->beta, y, CUDA_R_16BF,
                            j->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
        return;
    }
    /* row-major C[m, n] = op(A) op(B) as cuBLAS's column-major C^T */
    int lda = j->ta ? j->m : j->k, ldb = j->tb ? j->k : j->n;
    CB(cublasGemmEx(blas, j->tb ? CUBLAS_OP_T : CUBLAS_OP_N, j->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                    j->n, j->m, j->k, &one, buf_b, CUDA_R_16BF, ldb, buf_a, CUDA_R_16BF, lda,
                    &j->beta, buf_c, j->fp32_out ? CUDA_R_32F : CUDA_R_16BF, j->n,
                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* The mean microseconds of one repetition of j: REPS back to back after
 * WARM, CUDA events around the batch. */
static double time_job(const job *j)
{
    double us = 0;
    for (int phase = 0; phase < 2; phase++) {
        int calls = phase ? REPS : WARM;
        CK(cudaEventRecord(t0, 0));
        for (int i = 0; i < calls; i++)
            run_job(j);
        CK(cudaEventRecord(t1, 0));
        CK(cudaEventSynchronize(t1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        us = 1e3 * ms / calls;
    }
    return us;
}

/* Row-major C[m, n] = op(A) op(B), one call: its mean microseconds. */
static double time_gemm(bool ta, bool tb, int m, int n, int k, bool fp32_out, float beta)
{
    return time_job(&(job){.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .fp32_out = fp32_out,
                           .beta = beta});
}

/* Y[m, n] = X[m, k] W[n, k]^T (bf16 in and out) as `parts` calls back to
 * back, each on m/parts rows of X and Y (Transformer Engine's split GEMMs);
 * the mean microseconds of the whole sequence. */
static double time_split_fprop(int m, int n, int k, int parts)
{
    return time_job(&(job){.m = m, .n = n, .k = k, .parts = parts});
}

static void row(const char *what, const char *model, int t, int tokens, const char *gemm, int m,
                int n, int k, const char *out, double us, double rate)
{
    printf("%s,%s,%d,%d,%s,%d,%d,%d,%s,%.2f,%.1f\n", what, model, t, tokens, gemm, m, n, k, out,
           us, rate);
}

static void layer(const model *md, int t, int tokens)
{
    int h = md->hidden, qkv = (md->heads + 2 * md->kv_heads) * md->head_dim / t;
    int f1 = (md->gated ? 2 : 1) * md->ffn / t;
    struct {
        const char *name;
        int n, k; /* W[n, k]: n outputs, k inputs */
    } g[] = {{"qkv", qkv, h}, {"proj", h, md->heads * md->head_dim / t}, {"fc1", f1, h},
             {"fc2", h, md->ffn / t}};
    for (int i = 0; i < 4; i++) {
        int n = g[i].n, k = g[i].k;
        double flops = 2.0 * tokens * n * k, us;
        us = time_gemm(false, true, tokens, n, k, false, 0); /* X[T,k] W[n,k]^T */
        row("gemm", md->name, t, tokens, g[i].name, tokens, n, k, "fprop", us, flops / us / 1e6);
        us = time_gemm(false, false, tokens, k, n, false, 0); /* dY[T,n] W[n,k] */
        row("gemm", md->name, t, tokens, g[i].name, tokens, k, n, "dgrad", us, flops / us / 1e6);
        us = time_gemm(true, false, n, k, tokens, true, 1); /* dY^T[n,T] X[T,k] */
        row("gemm", md->name, t, tokens, g[i].name, n, k, tokens, "wgrad", us, flops / us / 1e6);
    }
}

/* A layer's four fprops as Transformer Engine's TP overlap runs them: whole
 * (parts 1), in t parts (a ring exchange) and in 4 (a pipeline). */
static void split_fprops(const model *md, int t, int tokens)
{
    int h = md->hidden;
    int n4[4] = {(md->heads + 2 * md->kv_heads) * md->head_dim / t, h,
                 (md->gated ? 2 : 1) * md->ffn / t, h};
    int k4[4] = {h, md->heads * md->head_dim / t, h, md->ffn / t};
    const char *names[4] = {"qkv", "proj", "fc1", "fc2"};
    int parts_of[3] = {1, t, 4};
    for (int g = 0; g < 4; g++)
        for (int pi = 0; pi < 3; pi++) {
            int parts = parts_of[pi];
            if (pi == 2 && t == 4)
                continue; /* the ring's count already */
            double us = time_split_fprop(tokens, n4[g], k4[g], parts);
            char out[16];
            snprintf(out, sizeof out, "fprop/%d", parts);
            row("split", md->name, t, tokens, names[g], tokens, n4[g], k4[g], out, us,
                2.0 * tokens * n4[g] * (double)k4[g] / us / 1e6);
        }
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    struct cudaDeviceProp prop = bench_device();
    printf("# %s, %d SMs, cuBLAS %d\n", prop.name, prop.multiProcessorCount, CUBLAS_VERSION);
    /* the largest operand: 405B's FFN 1 at t 1 and 16k tokens, 16384 x 106496 */
    size_t bytes = (size_t)16384 * 106496 * 4;
    CK(cudaMalloc(&buf_a, bytes));
    CK(cudaMalloc(&buf_b, bytes));
    CK(cudaMalloc(&buf_c, bytes));
    /* random bf16 values, as a model's are (exec/random_unit.h) */
    fill_random(buf_a, bytes, 0x9e3779b97f4a7c15u);
    fill_random(buf_b, bytes, 0x9e3779b97f4a7c15u);
    CK(cudaMemset(buf_c, 0, bytes));
    CB(cublasCreate(&blas));
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    printf("what,model,t,tokens,gemm,m,n,k,out,us,tflops_or_gbs\n");
    int n_models = quick ? 1 : (int)(sizeof models / sizeof models[0]);
    const int tps[] = {1, 2, 4, 8}, toks[] = {2048, 4096, 8192, 16384};
    for (int mi = 0; mi < n_models; mi++)
        for (int ti = 0; ti < 4; ti++)
            for (int ki = 0; ki < 4; ki++)
                if (!quick || ki == 2)
                    layer(&models[mi], tps[ti], toks[ki]);
    /* TP overlap's split fprops: each model at 4096 and 8192 tokens (a
     * rank's share at cp 2 and at cp 1 of an 8k sequence), t 2, 4 and 8 */
    for (int mi = 0; mi < n_models; mi++)
        for (int ti = 1; ti < 4; ti++)
            for (int tokens = 4096; tokens <= 8192; tokens *= 2)
                split_fprops(&models[mi], tps[ti], tokens);
    /* the per-call floor: a 128^3 product, back to back */
    double us = time_gemm(false, true, 128, 128, 128, false, 0);
    row("floor", "-", 0, 128, "tiny", 128, 128, 128, "fprop", us, 2.0 * 128 * 128 * 128 / us / 1e6);
    /* copies: read + write bytes over time, 1 MiB to 1 GiB */
    for (size_t b = (size_t)1 << 20; b <= (size_t)1 << 30; b <<= 2) {
        double total = time_job(&(job){.copy_bytes = b});
        row("copy", "-", 0, 0, "d2d", (int)(b >> 20), 0, 0, "MiB", total, 2.0 * b / total / 1e3);
    }
    cublasDestroy(blas);
    cudaFree(buf_a), cudaFree(buf_b), cudaFree(buf_c);
    return 0;
}
