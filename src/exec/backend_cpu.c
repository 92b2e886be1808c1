/* backend_cpu.c — the CPU backend: GEMMs by cblas_sgemm/dgemm (OpenBLAS, one
 * thread per rank: ranks are the parallelism), collectives by MPI (non-blocking,
 * completed under the watchdog: watchdog.h), time by
 * clock_gettime(CLOCK_MONOTONIC), which all ranks of one machine share. */
#include "exec/backend.h"
#include "exec/mpi_util.h"
#include "exec/p2p_mpi.h"
#include "exec/watchdog.h"

#include <cblas.h>
#include <time.h>

static void cpu_gemm(mp_real_kind kind, bool trans_a, bool trans_b, int m, int n, int k,
                     double alpha, const void *a, int lda, const void *b, int ldb, double beta,
                     void *c, int ldc)
{
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    if (kind == MP_REAL32)
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta,
                    c, ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* MPI counts are int: longer buffers go in slices. */
#define MAX_SLICE ((size_t)1 << 30)

static mp_status cpu_allreduce(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                               mp_reduce_op op, mp_error *err)
{
    if (g->size == 1)
        return MP_OK;
    char *p = buf;
    for (size_t done = 0; done < count;) {
        size_t n = count - done < MAX_SLICE ? count - done : MAX_SLICE;
        MPI_Request req;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, p + done * mp_real_size(kind), (int)n,
                                mp_mpi_type(kind), op == MP_RED_SUM ? MPI_SUM : MPI_MAX, g->comm,
                                &req);
        if (rc != MPI_SUCCESS)
            return mp_mpi_failed(rc, "MPI_Iallreduce", err);
        mp_status st = mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "all-reduce", g, -1, err);
        if (st)
            return st;
        done += n;
    }
    return MP_OK;
}

static mp_status cpu_allgather(const mp_group *g, mp_real_kind kind, const void *send,
                               void *recv, size_t count, mp_error *err)
{
    if (count > MAX_SLICE)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL,
                            "all-gather of %zu elements per rank is too large", count);
    if (g->size == 1) {
        if (recv != send)
            __builtin_memmove(recv, send, count * mp_real_size(kind));
        return MP_OK;
    }
    MPI_Request req;
    int rc = MPI_Iallgather(send, (int)count, mp_mpi_type(kind), recv, (int)count,
                            mp_mpi_type(kind), g->comm, &req);
    if (rc != MPI_SUCCESS)
        return mp_mpi_failed(rc, "MPI_Iallgather", err);
    return mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "all-gather", g, -1, err);
}

static mp_status cpu_reduce_scatter(const mp_group *g, mp_real_kind kind, const void *send,
                                    void *recv, size_t count, mp_error *err)
{
    if (count > MAX_SLICE)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL,
                            "reduce-scatter of %zu elements per rank is too large", count);
    if (g->size == 1) {
        if (recv != send)
            __builtin_memmove(recv, send, count * mp_real_size(kind));
        return MP_OK;
    }
    MPI_Request req;
    int rc = MPI_Ireduce_scatter_block(send, recv, (int)count, mp_mpi_type(kind), MPI_SUM,
                                       g->comm, &req);
    if (rc != MPI_SUCCESS)
        return mp_mpi_failed(rc, "MPI_Ireduce_scatter_block", err);
    return mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "reduce-scatter", g, -1, err);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const mp_backend cpu_backend = {
    .name = "cpu",
    .gemm = cpu_gemm,
    .allreduce = cpu_allreduce,
    .allgather = cpu_allgather,
    .reduce_scatter = cpu_reduce_scatter,
    .send = mp_p2p_mpi_send,
    .recv = mp_p2p_mpi_recv,
    .send_wait = mp_p2p_mpi_send_wait,
    .sendrecv = mp_p2p_mpi_sendrecv,
    .now = cpu_now,
};

const mp_backend *mp_backend_cpu(void)
{
    /* one BLAS thread per rank: the ranks are the parallelism, and more
     * threads than cores would oversubscribe the machine */
    static bool single = false;
    if (!single) {
        openblas_set_num_threads(1);
        single = true;
    }
    return &cpu_backend;
}
