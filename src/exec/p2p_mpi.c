/* p2p_mpi.c — point-to-point over MPI. Pipeline sends never wait for their
 * receive: each send copies its data and starts an MPI_Isend; the copies and
 * requests are kept until send_wait. A blocking MPI_Send would not do: two
 * neighbouring stages that both send before receiving (1F1B's steady state)
 * deadlock once the messages are too large for MPI's eager protocol. Ring
 * steps (context parallelism) pair each send with its receive. */
#include "exec/p2p_mpi.h"

#include "exec/mpi_util.h"
#include "exec/watchdog.h"

#include <stdlib.h>
#include <string.h>

typedef struct pending {
    MPI_Request req;
    void *copy;
    mp_group group; /* for the watchdog's message */
    int peer;
} pending;

/* One executor per process, one thread: the outstanding sends of this rank. */
static pending *outstanding;
static size_t n_out, cap_out;

static mp_status check_args(const mp_group *g, size_t count, int peer, int tag, mp_error *err)
{
    int *tag_ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    if (peer < 0 || peer >= g->size || peer == g->rank)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "pipeline message to rank %d of a group of %d", peer, g->size);
    if (count > (size_t)1 << 30)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model",
                            "a pipeline message of %zu elements is beyond this executor's "
                            "limit of 2^30: use --shrink", count);
    if (tag < 0 || (flag && tag_ub && tag > *tag_ub))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "training.global_batch",
                            "pipeline message tag %d is beyond MPI's limit (%d): fewer "
                            "micro-batches", tag, flag && tag_ub ? *tag_ub : 0);
    return MP_OK;
}

mp_status mp_p2p_mpi_send(const mp_group *g, mp_real_kind kind, const void *buf, size_t count,
                          int peer, int tag, mp_error *err)
{
    mp_status st = check_args(g, count, peer, tag, err);
    if (st)
        return st;
    if (n_out == cap_out) {
        size_t cap = cap_out ? 2 * cap_out : 16;
        pending *p = realloc(outstanding, cap * sizeof *p);
        if (!p)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a send");
        outstanding = p;
        cap_out = cap;
    }
    size_t bytes = count * mp_real_size(kind);
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a send");
    memcpy(copy, buf, bytes);
    pending *p = &outstanding[n_out];
    int rc = MPI_Isend(copy, (int)count, mp_mpi_type(kind), peer, tag, g->comm, &p->req);
    if (rc != MPI_SUCCESS) {
        free(copy);
        return mp_mpi_failed(rc, "MPI_Isend", err);
    }
    p->copy = copy;
    p->group = *g;
    p->peer = peer;
    n_out++;
    return MP_OK;
}

mp_status mp_p2p_mpi_recv(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                          int peer, int tag, mp_error *err)
{
    mp_status st = check_args(g, count, peer, tag, err);
    if (st)
        return st;
    MPI_Status status;
    MPI_Request req;
    int rc = MPI_Irecv(buf, (int)count, mp_mpi_type(kind), peer, tag, g->comm, &req);
    if (rc != MPI_SUCCESS)
        return mp_mpi_failed(rc, "MPI_Irecv", err);
    st = mp_watch_mpi(&req, 1, &status, "pipeline receive", g, peer, err);
    if (st)
        return st;
    int got = 0;
    MPI_Get_count(&status, mp_mpi_type(kind), &got);
    if ((size_t)got != count)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "pipeline message %d from rank %d holds %d elements, not %zu", tag,
                            peer, got, count);
    return MP_OK;
}

mp_status mp_p2p_mpi_send_wait(mp_error *err)
{
    mp_status st = MP_OK;
    for (size_t i = 0; i < n_out; i++) {
        pending *p = &outstanding[i];
        if (st == MP_OK)
            st = mp_watch_mpi(&p->req, 1, MPI_STATUSES_IGNORE, "pipeline send", &p->group,
                              p->peer, err);
        else
            MPI_Request_free(&p->req); /* the job ends; the copy must outlive the request */
        if (st == MP_OK)
            free(p->copy);
    }
    n_out = 0;
    if (st == MP_OK) {
        free(outstanding);
        outstanding = NULL;
        cap_out = 0;
    }
    return st;
}

mp_status mp_p2p_mpi_sendrecv(const mp_group *g, mp_real_kind kind, const void *send, int to,
                              void *recv, int from, size_t count, int tag, mp_error *err)
{
    mp_status st = check_args(g, count, to, tag, err);
    if (!st)
        st = check_args(g, count, from, tag, err);
    if (st)
        return st;
    MPI_Request req[2];
    int rc = MPI_Irecv(recv, (int)count, mp_mpi_type(kind), from, tag, g->comm, &req[0]);
    if (rc != MPI_SUCCESS)
        return mp_mpi_failed(rc, "MPI_Irecv", err);
    rc = MPI_Isend(send, (int)count, mp_mpi_type(kind), to, tag, g->comm, &req[1]);
    if (rc != MPI_SUCCESS) {
        MPI_Cancel(&req[0]);
        MPI_Request_free(&req[0]);
        return mp_mpi_failed(rc, "MPI_Isend", err);
    }
    return mp_watch_mpi(req, 2, MPI_STATUSES_IGNORE, "ring step", g, from, err);
}
