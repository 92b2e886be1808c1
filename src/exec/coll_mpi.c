/* coll_mpi.c — barrier, broadcast and gather of host buffers over MPI, each
 * wait under the watchdog (coll_mpi.h). */
#include "exec/coll_mpi.h"

#include <limits.h>
#include <stdlib.h>

#include "exec/mpi_util.h"
#include "exec/watchdog.h"

mp_status mp_coll_mpi_barrier(const mp_group *g, mp_error *err)
{
    return mp_watch_barrier(g, err);
}

mp_status mp_coll_mpi_bcast(const mp_group *g, void *buf, size_t bytes, int root,
                            mp_error *err)
{
    if (bytes > INT_MAX)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL,
                            "broadcast of %zu bytes is too large", bytes);
    return mp_watch_bcast(g, buf, (int)bytes, MPI_BYTE, root, err);
}

mp_status mp_coll_mpi_gather(const mp_group *g, const void *send, size_t bytes, void *recv,
                             const size_t *counts, int root, mp_error *err)
{
    bool at_root = g->rank == root;
    int *cnt = at_root ? calloc((size_t)g->size, sizeof *cnt) : NULL;
    int *displs = at_root ? calloc((size_t)g->size, sizeof *displs) : NULL;
    mp_status st = MP_OK;
    if (at_root && (!cnt || !displs))
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a gather");
    size_t total = 0;
    for (int r = 0; at_root && !st && r < g->size; r++) {
        cnt[r] = (int)counts[r];
        displs[r] = (int)total;
        total += counts[r];
        if (counts[r] > INT_MAX || total > INT_MAX)
            st = mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "gather too large");
    }
    if (bytes > INT_MAX && !st)
        st = mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "gather too large");
    if (!st) {
        MPI_Request req;
        int rc = MPI_Igatherv(send, (int)bytes, MPI_BYTE, recv, cnt, displs, MPI_BYTE, root,
                              g->comm, &req);
        st = rc != MPI_SUCCESS ? mp_mpi_failed(rc, "MPI_Igatherv", err)
                               : mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "gather", g, -1,
                                              err);
    }
    free(cnt);
    free(displs);
    return st;
}
