/* coll_mpi.h — the driver's and the check's collectives over MPI, on host
 * buffers, under the watchdog: the backend table's barrier / bcast / gather
 * (backend.h) for every backend that has MPI (the CPU's and the CUDA's). */
#ifndef MP_EXEC_COLL_MPI_H
#define MP_EXEC_COLL_MPI_H

#include "exec/backend.h"

mp_status mp_coll_mpi_barrier(const mp_group *g, mp_error *err);
mp_status mp_coll_mpi_bcast(const mp_group *g, void *buf, size_t bytes, int root,
                            mp_error *err);
mp_status mp_coll_mpi_gather(const mp_group *g, const void *send, size_t bytes, void *recv,
                             const size_t *counts, int root, mp_error *err);
#endif
