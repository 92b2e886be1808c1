/* alltoall_mpi.c — MPI_Ialltoallv under the watchdog (alltoall_mpi.h). */
#include "exec/alltoall_mpi.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "exec/mpi_util.h"
#include "exec/watchdog.h"

mp_status mp_alltoallv_mpi(const mp_group *g, mp_real_kind kind, const void *send,
                           const size_t *send_counts, void *recv, const size_t *recv_counts,
                           mp_error *err)
{
    size_t es = mp_real_size(kind);
    if (g->size <= 1) {
        if (recv != send)
            memmove(recv, send, send_counts[0] * es);
        return MP_OK;
    }
    int n = g->size;
    int *c = malloc(4 * (size_t)n * sizeof *c);
    if (!c)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for an all-to-all");
    int *sc = c, *sd = c + n, *rc = c + 2 * n, *rd = c + 3 * n;
    size_t so = 0, ro = 0;
    for (int q = 0; q < n; q++) {
        if (send_counts[q] > INT_MAX || recv_counts[q] > INT_MAX || so > INT_MAX ||
            ro > INT_MAX) {
            free(c);
            return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL,
                                "all-to-all of more than %d elements", INT_MAX);
        }
        sc[q] = (int)send_counts[q], sd[q] = (int)so;
        rc[q] = (int)recv_counts[q], rd[q] = (int)ro;
        so += send_counts[q];
        ro += recv_counts[q];
    }
    MPI_Request req;
    int rcode = MPI_Ialltoallv(send, sc, sd, mp_mpi_type(kind), recv, rc, rd, mp_mpi_type(kind),
                               g->comm, &req);
    mp_status st = rcode != MPI_SUCCESS
                       ? mp_mpi_failed(rcode, "MPI_Ialltoallv", err)
                       : mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "all-to-all", g, -1, err);
    free(c);
    return st;
}
