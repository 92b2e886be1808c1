/* kt_mem_cuda.c — the kernel tests' buffers in GPU memory (cudart's C API). */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "kt_mem.h"

static void kt_check(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(rc));
        exit(1);
    }
}

void *kt_up(const void *host, size_t bytes)
{
    void *p = NULL;
    kt_check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    kt_check(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    return p;
}

void kt_down(void *host, const void *dev, size_t bytes)
{
    kt_check(cudaDeviceSynchronize(), "kernel");
    kt_check(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

void kt_free(void *dev) { kt_check(cudaFree(dev), "cudaFree"); }

bool kt_available(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

bool kt_reverse_order(bool reverse) { return !reverse; }

const char *kt_where(void) { return "cuda"; }
