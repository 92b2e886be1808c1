/* cuda_bench.h — what the CUDA benchmarks share: one way to fail (a call that
 * does not return success ends the program with its name and code, exit 1),
 * the device check (no device: exit 77, a skip as meson counts it) and random
 * bf16 operands. The including file defines BENCH_NAME, the program's name
 * for the messages. */
#ifndef MEGAPLAN_BENCH_CUDA_BENCH_H
#define MEGAPLAN_BENCH_CUDA_BENCH_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "exec/random_unit.h"

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

/* Device 0's properties; without a CUDA device the program ends (77). */
static struct cudaDeviceProp bench_device(void)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        fprintf(stderr, "%s: no CUDA device\n", BENCH_NAME);
        exit(77);
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    return prop;
}

/* bytes of random bf16 values, as a model's are (exec/random_unit.h; the rate
 * of a tensor core depends on the bits it toggles): one 64 MiB block made on
 * the host from seed, copied over the buffer (the block's repeats are far
 * apart for any GEMM tile). */
static void fill_random(void *dev, size_t bytes, uint64_t seed)
{
    size_t block = (size_t)64 << 20, n = block / 2;
    uint16_t *h = malloc(block);
    if (!h)
        die("malloc", 0);
    for (size_t i = 0; i < n; i++)
        h[i] = mp_bf16_bits(mp_random_unit(&seed));
    CK(cudaMemcpy(dev, h, block < bytes ? block : bytes, cudaMemcpyHostToDevice));
    for (size_t at = block; at < bytes; at += block)
        CK(cudaMemcpy((char *)dev + at, dev, bytes - at < block ? bytes - at : block,
                      cudaMemcpyDeviceToDevice));
    free(h);
}

#endif
