/* test_cuda_shim.c — the emulation's device memory (cuda_host_shim.h) is
 * kept apart from the host's as a GPU's is, so that megaplan-cuda-emu fails
 * where a GPU would: host code that dereferences a device pointer crashes
 * (checked in a child process: SIGSEGV), copies whose kind does not match
 * where their pointers live fail, and cuBLAS refuses a host operand. While a
 * shim call or a kernel runs (open), the same memory is readable; freed
 * blocks are handed out again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/cuda_host_shim.h"

/* Whether a child that reads *p crashed (a signal, or under ASan its SEGV
 * report's exit status). */
static bool child_crashes_reading(const float *p, bool open)
{
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        if (open)
            shim_device_open();
        volatile float x = *p;
        (void)x;
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) || WEXITSTATUS(status) != 0;
}

static void host_reads_of_device_memory_crash(void **state)
{
    (void)state;
    float *d = NULL;
    assert_int_equal(cudaMalloc((void **)&d, 64 * sizeof *d), cudaSuccess);
    assert_true(child_crashes_reading(d, false));
    assert_false(child_crashes_reading(d, true)); /* what a kernel does */
    assert_int_equal(cudaFree(d), cudaSuccess);
}

static void copies_must_name_where_pointers_live(void **state)
{
    (void)state;
    float host[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8] = {0};
    float *d = NULL, *e = NULL;
    assert_int_equal(cudaMalloc((void **)&d, sizeof host), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&e, sizeof host), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, NULL),
                     cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(e, d, sizeof host, cudaMemcpyDeviceToDevice, NULL),
                     cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(back, e, sizeof host, cudaMemcpyDeviceToHost, NULL),
                     cudaSuccess);
    assert_memory_equal(back, host, sizeof host);
    /* a host buffer where the device's is expected, and the reverse */
    assert_int_equal(cudaMemcpyAsync(back, host, sizeof host, cudaMemcpyDeviceToHost, NULL),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpyAsync(back, d, sizeof host, cudaMemcpyDeviceToDevice, NULL),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpyAsync(d, e, sizeof host, cudaMemcpyHostToDevice, NULL),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy2DAsync(back, 4, host, 4, 4, 8, cudaMemcpyDeviceToHost, NULL),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaMemsetAsync(back, 0, sizeof back, NULL), cudaErrorInvalidValue);
    /* a GEMM on a host operand */
    float one = 1, zero = 0;
    assert_int_equal(cublasGemmEx(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, host,
                                  CUDA_R_32F, 2, d, CUDA_R_32F, 2, &zero, e, CUDA_R_32F, 2,
                                  CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasGemmEx(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, CUDA_R_32F,
                                  2, d, CUDA_R_32F, 2, &zero, e, CUDA_R_32F, 2,
                                  CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaFree(host), cudaErrorInvalidValue);
    /* a freed block comes back */
    assert_int_equal(cudaFree(e), cudaSuccess);
    float *f = NULL;
    assert_int_equal(cudaMalloc((void **)&f, sizeof host), cudaSuccess);
    assert_ptr_equal(f, e);
    cudaFree(f);
    cudaFree(d);
}

/* The grouped GEMM's stand-in: the products of separate cublasGemmEx calls
 * bit for bit; address arrays on the host and a bf16-rounding compute type
 * refused, as cuBLAS documents. */
static void grouped_gemm_is_separate_gemms(void **state)
{
    (void)state;
    enum { G = 3, M = 4, N = 5, K = 6 };
    float host[G][M * K + K * N], *a[G], *b[G], *c[G], *want[G];
    float one = 1, zero = 0, al[G] = {1, 1, 1}, be[G] = {0, 0, 0};
    for (int g = 0; g < G; g++) {
        for (int i = 0; i < M * K + K * N; i++)
            host[g][i] = (float)((i * 7 + g * 3) % 11) - 5.0f;
        assert_int_equal(cudaMalloc((void **)&a[g], M * K * sizeof(float)), cudaSuccess);
        assert_int_equal(cudaMalloc((void **)&b[g], K * N * sizeof(float)), cudaSuccess);
        assert_int_equal(cudaMalloc((void **)&c[g], M * N * sizeof(float)), cudaSuccess);
        assert_int_equal(cudaMalloc((void **)&want[g], M * N * sizeof(float)), cudaSuccess);
        cudaMemcpyAsync(a[g], host[g], M * K * sizeof(float), cudaMemcpyHostToDevice, NULL);
        cudaMemcpyAsync(b[g], host[g] + M * K, K * N * sizeof(float), cudaMemcpyHostToDevice,
                        NULL);
        assert_int_equal(cublasGemmEx(NULL, CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, &one, a[g],
                                      CUDA_R_32F, M, b[g], CUDA_R_32F, N, &zero, want[g],
                                      CUDA_R_32F, M, CUBLAS_COMPUTE_32F_PEDANTIC,
                                      CUBLAS_GEMM_DEFAULT),
                         CUBLAS_STATUS_SUCCESS);
    }
    cublasOperation_t ta[G] = {CUBLAS_OP_N, CUBLAS_OP_N, CUBLAS_OP_N};
    cublasOperation_t tb[G] = {CUBLAS_OP_T, CUBLAS_OP_T, CUBLAS_OP_T};
    int m[G] = {M, M, M}, n[G] = {N, N, N}, k[G] = {K, K, K}, lda[G] = {M, M, M};
    int ldb[G] = {N, N, N}, size[G] = {1, 1, 1};
    const void *hp[3 * G];
    for (int g = 0; g < G; g++)
        hp[g] = a[g], hp[G + g] = b[g], hp[2 * G + g] = c[g];
    void **dp = NULL;
    assert_int_equal(cudaMalloc((void **)&dp, sizeof hp), cudaSuccess);
    cudaMemcpyAsync(dp, hp, sizeof hp, cudaMemcpyHostToDevice, NULL);
    assert_int_equal(cublasGemmGroupedBatchedEx(NULL, ta, tb, m, n, k, al,
                                                (const void *const *)dp, CUDA_R_32F, lda,
                                                (const void *const *)dp + G, CUDA_R_32F, ldb, be,
                                                dp + 2 * G, CUDA_R_32F, lda, G, size,
                                                CUBLAS_COMPUTE_32F_PEDANTIC),
                     CUBLAS_STATUS_SUCCESS);
    for (int g = 0; g < G; g++) {
        float got[M * N], ref[M * N];
        cudaMemcpyAsync(got, c[g], sizeof got, cudaMemcpyDeviceToHost, NULL);
        cudaMemcpyAsync(ref, want[g], sizeof ref, cudaMemcpyDeviceToHost, NULL);
        assert_memory_equal(got, ref, sizeof got);
    }
    /* the address arrays on the host; a compute type cuBLAS lacks for it */
    assert_int_equal(cublasGemmGroupedBatchedEx(NULL, ta, tb, m, n, k, al,
                                                (const void *const *)hp, CUDA_R_32F, lda,
                                                (const void *const *)hp + G, CUDA_R_32F, ldb, be,
                                                (void *const *)(hp + 2 * G), CUDA_R_32F, lda, G,
                                                size, CUBLAS_COMPUTE_32F_PEDANTIC),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasGemmGroupedBatchedEx(NULL, ta, tb, m, n, k, al,
                                                (const void *const *)dp, CUDA_R_32F, lda,
                                                (const void *const *)dp + G, CUDA_R_32F, ldb, be,
                                                dp + 2 * G, CUDA_R_32F, lda, G, size,
                                                CUBLAS_COMPUTE_32F_FAST_16BF),
                     CUBLAS_STATUS_NOT_SUPPORTED);
    for (int g = 0; g < G; g++)
        cudaFree(a[g]), cudaFree(b[g]), cudaFree(c[g]), cudaFree(want[g]);
    cudaFree(dp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(host_reads_of_device_memory_crash),
        cmocka_unit_test(copies_must_name_where_pointers_live),
        cmocka_unit_test(grouped_gemm_is_separate_gemms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
