/* cuda_check.h — the CUDA benchmarks' one way to fail: a call that does not
 * return success ends the program with its name and code (exit 1). The
 * including file defines BENCH_NAME, the program's name for the message. */
#ifndef MEGAPLAN_BENCH_CUDA_CHECK_H
#define MEGAPLAN_BENCH_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static void die(const char *what, int code)
{
    fprintf(stderr, "%s: %s failed (%d)\n", BENCH_NAME, what, code);
    exit(1);
}

#define CK(call)                                                                            \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess)                                                              \
            die(#call, (int)e_);                                                            \
    } while (0)
#define CB(call)                                                                            \
    do {                                                                                    \
        cublasStatus_t s_ = (call);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                    \
            die(#call, (int)s_);                                                            \
    } while (0)

#endif
