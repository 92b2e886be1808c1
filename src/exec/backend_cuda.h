/* backend_cuda.h — the CUDA backend (backend_cuda.c): device memory, one
 * compute and one communication stream, cuBLAS GEMMs, the kernels of
 * kernels/ for the layer ops, NCCL collectives (or MPI through host buffers
 * when the node has fewer GPUs than ranks). Built only with meson's `cuda`
 * option (HAVE_EXEC_CUDA), into megaplan-cuda only (MP_WITH_CUDA: megaplan
 * hands `--backend cuda` to it, so the other verbs never load the CUDA libraries). */
#ifndef MP_EXEC_BACKEND_CUDA_H
#define MP_EXEC_BACKEND_CUDA_H

#include <stdbool.h>

#include "core/error.h"
#include "exec/backend.h"

#define MP_CUDA_MAX_GROUPS 8

typedef struct mp_cuda_setup {
    /* GEMM inputs rounded to bf16 with fp32 accumulation (the plan's bf16 or
     * fp16 precision, as Megatron runs it: master weights, gradients and
     * optimizer state stay fp32); false: fp32 GEMMs with TF32 off */
    bool bf16;
    bool solo;         /* exec --solo: no communicators at all */
    MPI_Comm world;    /* every rank of the run */
    /* The groups collectives will run over (size-1 groups need none). */
    const mp_group *groups[MP_CUDA_MAX_GROUPS];
    int n_groups;
} mp_cuda_setup;

/* The number of CUDA devices; none (or no driver): MP_EINPUT, "no CUDA device". */
mp_status mp_cuda_devices(int *count, mp_error *err);
/* Picks this rank's device by local rank (OMPI_COMM_WORLD_LOCAL_RANK,
 * SLURM_LOCALID, else its place among the ranks sharing its node), makes the
 * streams and cuBLAS handle and, when every rank of the node has a device of
 * its own and NCCL is built in, one NCCL communicator per group (unique id
 * broadcast over the group's MPI communicator). Collective over setup->world. */
mp_status mp_backend_cuda_open(const mp_cuda_setup *setup, const mp_backend **out,
                               mp_error *err);
/* The GEMMs since the last call: FLOPs and device seconds of the timed ones
 * (the first 65536; the executor's achieved cuBLAS rate, the rounding of
 * staged operands included), all calls, and those of them that ran on bf16
 * copies of their operands (bf16 plans' larger products). */
typedef struct mp_cuda_gemm_stat {
    double flops, seconds;
    long calls, staged;
    double staged_flops, staged_seconds;
} mp_cuda_gemm_stat;
void mp_cuda_gemm_stats(mp_cuda_gemm_stat *out);
/* The open device's name and memory (bytes). */
void mp_cuda_describe(char *name, size_t size, double *memory);
/* The cuBLAS bf16 GEMM rate alone (tensor cores, fp32 accumulation) on an
 * n x n x n product, FLOP/s: the peak the executor's GEMMs are set against. */
mp_status mp_cuda_gemm_peak(int n, bool bf16, double *flops, mp_error *err);

#endif
