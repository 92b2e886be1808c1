/* p2p_mpi.h — buffered pipeline sends, blocking receives and ring steps over
 * MPI, as the backend table's send / recv / send_wait / sendrecv (backend.h)
 * for backends whose buffers are host memory. */
#ifndef MP_EXEC_P2P_MPI_H
#define MP_EXEC_P2P_MPI_H

#include "exec/backend.h"

mp_status mp_p2p_mpi_send(const mp_group *g, mp_real_kind kind, const void *buf, size_t count,
                          int peer, int tag, mp_error *err);
mp_status mp_p2p_mpi_recv(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                          int peer, int tag, mp_error *err);
mp_status mp_p2p_mpi_send_wait(mp_error *err);
mp_status mp_p2p_mpi_sendrecv(const mp_group *g, mp_real_kind kind, const void *send, int to,
                              void *recv, int from, size_t count, int tag, mp_error *err);

#endif
