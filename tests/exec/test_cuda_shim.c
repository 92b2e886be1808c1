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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(host_reads_of_device_memory_crash),
        cmocka_unit_test(copies_must_name_where_pointers_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
