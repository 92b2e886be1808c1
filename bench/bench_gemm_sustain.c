/* bench_gemm_sustain.c — one layer GEMM back to back for tens of seconds on
 * one GPU: its rate window by window with the SM clock, the board power and
 * the clock-limit reasons the driver gives (NVML) beside it.
 *
 * Why: bench_gemm_cuda (and the maximum-achievable-matmul searches the
 * profiles' GEMM curves are scaled by, docs/cost-model.md §4) time each
 * product over a few calls, well inside the time a GPU's power limit takes
 * to pull its clock down; a training step runs its GEMMs back to back for
 * seconds. Whether the rate a step sustains is the short-burst rate is the
 * open question behind the Blackwell rows (docs/cost-model.md, "Blackwell
 * Ultra on the same recipes": "a GEMM rate measured over minutes rather than
 * a short search is what would settle it"); this measures it on whatever GPU
 * tools/gpu-check.sh is lent (step h).
 *
 * The product: Y[T, n] = X[T, k] W[n, k]^T in bf16 with fp32 accumulation
 * (CUBLAS_COMPUTE_32F), by default LLaMA 3 70B's FFN 1 at t 4 and 8,192
 * tokens (8192 x 14336 x 8192, 1.9e12 FLOPs), random bf16 operands as a
 * model's (the rate of a tensor core depends on the bits it toggles).
 *
 * Output: CSV on stdout, one row per window of about WINDOW_MS:
 *   t_s,window_ms,calls,tflops,sm_mhz,power_w,reasons
 * (t_s: the window's end since the first call; reasons: NVML's clock event
 * reasons bitmask in hex, 0x4 the software power cap, 0x20/0x40 thermal;
 * -1 where NVML is absent), then '#' lines: the first second's and the last
 * five seconds' rate and clock, and their ratio.
 * usage: bench_gemm_sustain [SECONDS [M N K]]   (default 45, 8192 14336 8192)
 * Exit status 77 without a CUDA device (a skip, as meson counts it). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BENCH_NAME "bench_gemm_sustain"
#include "cuda_bench.h"

enum { WINDOW_MS = 250, MAX_WINDOWS = 4096 };

/* NVML, opened at run time: the toolkit here ships neither nvml.h nor a
 * stub library, the driver on a GPU machine ships libnvidia-ml.so.1. These
 * are NVML's documented C signatures (an nvmlDevice_t is an opaque pointer,
 * NVML_CLOCK_SM is 1, the return 0 is NVML_SUCCESS). */
typedef struct nvml {
    void *device;
    int (*clock)(void *device, int type, unsigned *mhz);
    int (*power)(void *device, unsigned *milliwatts);
    int (*reasons)(void *device, unsigned long long *mask);
} nvml;

static nvml nvml_open(void)
{
    nvml n = {0};
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib)
        return n;
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    int (*handle)(unsigned, void **) =
        (int (*)(unsigned, void **))dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    n.clock = (int (*)(void *, int, unsigned *))dlsym(lib, "nvmlDeviceGetClockInfo");
    n.power = (int (*)(void *, unsigned *))dlsym(lib, "nvmlDeviceGetPowerUsage");
    n.reasons = (int (*)(void *, unsigned long long *))dlsym(
        lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!n.reasons) /* its name before NVML 12.2 */
        n.reasons = (int (*)(void *, unsigned long long *))dlsym(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!init || !handle || init() != 0 || handle(0, &n.device) != 0)
        n.device = NULL;
    return n;
}

/* one window's reading: the SM clock (MHz), the board power (W), the reasons */
static void nvml_read(const nvml *n, double *mhz, double *watts, long long *reasons)
{
    unsigned v = 0;
    unsigned long long r = 0;
    *mhz = n->device && n->clock && n->clock(n->device, 1, &v) == 0 ? v : -1.0;
    *watts = n->device && n->power && n->power(n->device, &v) == 0 ? v / 1e3 : -1.0;
    *reasons = n->device && n->reasons && n->reasons(n->device, &r) == 0 ? (long long)r : -1;
}

typedef struct window {
    double end_s, ms, tflops, mhz, watts;
    long calls;
    long long reasons;
} window;

/* the mean rate and clock of the windows ending in (from_s, to_s] */
static void span(const window *w, int nw, double from_s, double to_s, double *tflops,
                 double *mhz)
{
    double flop_ms = 0, ms = 0, clk = 0;
    int nclk = 0;
    for (int i = 0; i < nw; i++)
        if (w[i].end_s > from_s && w[i].end_s <= to_s) {
            flop_ms += w[i].tflops * w[i].ms;
            ms += w[i].ms;
            if (w[i].mhz > 0)
                clk += w[i].mhz, nclk++;
        }
    *tflops = ms > 0 ? flop_ms / ms : 0;
    *mhz = nclk ? clk / nclk : -1;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 45;
    int m = argc > 4 ? atoi(argv[2]) : 8192, n = argc > 4 ? atoi(argv[3]) : 14336,
        k = argc > 4 ? atoi(argv[4]) : 8192;
    if (!(seconds >= 2 && seconds <= 600) || m < 1 || n < 1 || k < 1) {
        fprintf(stderr, "usage: bench_gemm_sustain [SECONDS (2-600) [M N K]]\n");
        return 2;
    }
    struct cudaDeviceProp prop = bench_device();
    void *x, *wt, *y;
    CK(cudaMalloc(&x, (size_t)m * k * 2));
    CK(cudaMalloc(&wt, (size_t)n * k * 2));
    CK(cudaMalloc(&y, (size_t)m * n * 2));
    fill_random(x, (size_t)m * k * 2, 0x9e3779b97f4a7c15u);
    fill_random(wt, (size_t)n * k * 2, 0x2545f4914f6cdd1du);
    cublasHandle_t blas;
    CB(cublasCreate(&blas));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    nvml nv = nvml_open();
    printf("# %s, %d SMs, cuBLAS %d, NVML %s; Y[%d, %d] = X[%d, %d] W[%d, %d]^T bf16, %.3g FLOPs "
           "a call, %.0f s\n",
           prop.name, prop.multiProcessorCount, CUBLAS_VERSION, nv.device ? "read" : "absent", m,
           n, m, k, n, k, 2.0 * m * n * k, seconds);
    printf("t_s,window_ms,calls,tflops,sm_mhz,power_w,reasons\n");
    float one = 1, zero = 0;
    double flops = 2.0 * m * n * k, elapsed_ms = 0, call_ms = 1;
    static window w[MAX_WINDOWS];
    int nw = 0;
    while (elapsed_ms < seconds * 1e3 && nw < MAX_WINDOWS) {
        /* as many calls as fill a window at the last window's rate */
        long calls = (long)(WINDOW_MS / call_ms);
        if (calls < 1)
            calls = 1;
        CK(cudaEventRecord(e0, 0));
        for (long i = 0; i < calls; i++)
            CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, wt, CUDA_R_16BF, k, x,
                            CUDA_R_16BF, k, &zero, y, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        call_ms = ms / calls;
        elapsed_ms += ms;
        window *c = &w[nw++];
        c->end_s = elapsed_ms / 1e3, c->ms = ms, c->calls = calls;
        c->tflops = flops * calls / (ms * 1e-3) / 1e12;
        nvml_read(&nv, &c->mhz, &c->watts, &c->reasons);
        printf("%.3f,%.2f,%ld,%.1f,%.0f,%.1f,", c->end_s, c->ms, c->calls, c->tflops, c->mhz,
               c->watts);
        if (c->reasons < 0)
            printf("-1\n");
        else
            printf("%#llx\n", (unsigned long long)c->reasons);
    }
    double end = w[nw - 1].end_s, r0, c0, r1, c1;
    span(w, nw, 0, 1.0, &r0, &c0);
    span(w, nw, end - 5.0, end, &r1, &c1);
    printf("# first second: %.1f TFLOP/s at %.0f MHz; last 5 s: %.1f TFLOP/s at %.0f MHz; "
           "sustained / first = %.3f\n",
           r0, c0, r1, c1, r0 > 0 ? r1 / r0 : 0);
    cublasDestroy(blas);
    cudaFree(x), cudaFree(y), cudaFree(wt);
    return 0;
}
