/* alltoall_mpi.h — the CPU backend's all-to-all with counts (backend.h,
 * `alltoallv`): MoE's dispatch and combine over the expert-parallel group. */
#ifndef MP_EXEC_ALLTOALL_MPI_H
#define MP_EXEC_ALLTOALL_MPI_H

#include "exec/backend.h"

mp_status mp_alltoallv_mpi(const mp_group *g, mp_real_kind kind, const void *send,
                           const size_t *send_counts, void *recv, const size_t *recv_counts,
                           mp_error *err);

#endif
