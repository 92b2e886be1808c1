/* backend.h — what the executor needs from a machine: matrix products,
 * collectives over a group of ranks, and a clock. The CPU backend
 * (backend_cpu.c: OpenBLAS + MPI) implements it; a CUDA backend (cuBLAS +
 * NCCL, device pointers) implements the same table later. Layer code calls
 * only these, never BLAS or MPI directly. */
#ifndef MP_EXEC_BACKEND_H
#define MP_EXEC_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include <mpi.h>

#include "core/error.h"

typedef enum { MP_REAL32, MP_REAL64 } mp_real_kind;
typedef enum { MP_RED_SUM, MP_RED_MAX } mp_reduce_op;

/* A communicator with its size and this rank's place in it. Size-1 groups
 * make every collective a no-op (the unpartitioned reference uses them). */
typedef struct mp_group {
    MPI_Comm comm;
    int size, rank;
} mp_group;

typedef struct mp_backend {
    const char *name;
    /* Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C. */
    void (*gemm)(mp_real_kind kind, bool trans_a, bool trans_b, int m, int n, int k,
                 double alpha, const void *a, int lda, const void *b, int ldb, double beta,
                 void *c, int ldc);
    /* In place over the group. */
    mp_status (*allreduce)(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                           mp_reduce_op op, mp_error *err);
    /* recv[g.size * count] = concatenation of every rank's send[count], in rank order. */
    mp_status (*allgather)(const mp_group *g, mp_real_kind kind, const void *send, void *recv,
                           size_t count, mp_error *err);
    /* recv[count] = sum over ranks of send[rank * count .. (rank+1) * count). */
    mp_status (*reduce_scatter)(const mp_group *g, mp_real_kind kind, const void *send,
                                void *recv, size_t count, mp_error *err);
    /* Pipeline point-to-point, with the semantics the schedules are checked
     * under (sim/schedule.h): send copies buf and returns at once, never
     * waiting for its receive; recv blocks until the message from peer with
     * this tag has arrived. send_wait completes every send made so far. */
    mp_status (*send)(const mp_group *g, mp_real_kind kind, const void *buf, size_t count,
                      int peer, int tag, mp_error *err);
    mp_status (*recv)(const mp_group *g, mp_real_kind kind, void *buf, size_t count, int peer,
                      int tag, mp_error *err);
    mp_status (*send_wait)(mp_error *err);
    /* One step of a ring: send count elements to `to` and receive count from
     * `from` at once (never deadlocks when every rank of a ring calls it). */
    mp_status (*sendrecv)(const mp_group *g, mp_real_kind kind, const void *send, int to,
                          void *recv, int from, size_t count, int tag, mp_error *err);
    /* Seconds on a clock shared by the ranks of one machine. */
    double (*now)(void);
} mp_backend;

/* OpenBLAS (one thread per rank) and MPI. */
const mp_backend *mp_backend_cpu(void);
/* The same GEMM and clock, every collective and message left out (exec --solo:
 * one process runs one rank's compute; backend_solo.c says what buffers hold). */
const mp_backend *mp_backend_solo(void);

#endif
