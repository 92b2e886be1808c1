/* backend_solo.c — a backend for `exec --solo R`: one process runs
 * global rank R's share of a plan at full size, and every collective and
 * pipeline message is left out (docs/design.md §7: its time comes from the cost
 * model instead). Buffers still get the shapes the real exchange would leave:
 * an all-gather repeats this rank's part in every slot, a reduce-scatter keeps
 * this rank's slot, a ring step or a receive leaves what the buffer held. The
 * values are not the plan's (there is nothing to check them against); the
 * compute, which is what --solo measures, is. Memory, compute and clock are
 * those of a base backend (CPU or CUDA), and so are the copies. */
#include <stdio.h>
#include <string.h>

#include "exec/backend.h"
#include "exec/mpi_util.h"

/* The backend whose memory the buffers are in (one per process). */
static const mp_backend *solo_base;

static void solo_move(void *dst, const void *src, size_t bytes)
{
    if (dst != src)
        solo_base->copy(dst, src, bytes, MP_COPY_D2D);
}

static mp_status solo_allreduce(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                                mp_reduce_op op, mp_error *err)
{
    (void)g, (void)kind, (void)buf, (void)count, (void)op, (void)err;
    return MP_OK;
}

static mp_status solo_allgather(const mp_group *g, mp_real_kind kind, const void *send,
                                void *recv, size_t count, mp_error *err)
{
    (void)err;
    size_t bytes = count * mp_real_size(kind);
    for (int r = 0; r < g->size; r++)
        solo_move((char *)recv + (size_t)r * bytes, send, bytes);
    return MP_OK;
}

static mp_status solo_reduce_scatter(const mp_group *g, mp_real_kind kind, const void *send,
                                     void *recv, size_t count, mp_error *err)
{
    (void)err;
    size_t bytes = count * mp_real_size(kind);
    solo_move(recv, (const char *)send + (size_t)g->rank * bytes, bytes);
    return MP_OK;
}

/* every peer sends what this rank sends it: its own block for q in slot q */
static mp_status solo_alltoallv(const mp_group *g, mp_real_kind kind, const void *send,
                                const size_t *send_counts, void *recv, const size_t *recv_counts,
                                mp_error *err)
{
    (void)err;
    size_t es = mp_real_size(kind), from = 0, to = 0;
    for (int q = 0; q < g->size; q++) {
        size_t n = send_counts[q] < recv_counts[q] ? send_counts[q] : recv_counts[q];
        solo_move((char *)recv + to * es, (const char *)send + from * es, n * es);
        from += send_counts[q];
        to += recv_counts[q];
    }
    return MP_OK;
}

static mp_status solo_send(const mp_group *g, mp_real_kind kind, const void *buf, size_t count,
                           int peer, int tag, mp_error *err)
{
    (void)g, (void)kind, (void)buf, (void)count, (void)peer, (void)tag, (void)err;
    return MP_OK;
}

static mp_status solo_recv(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                           int peer, int tag, mp_error *err)
{
    (void)g, (void)kind, (void)buf, (void)count, (void)peer, (void)tag, (void)err;
    return MP_OK;
}

static mp_status solo_send_wait(mp_error *err)
{
    (void)err;
    return MP_OK;
}

static mp_status solo_sendrecv(const mp_group *g, mp_real_kind kind, const void *send, int to,
                               void *recv, int from, size_t count, int tag, mp_error *err)
{
    (void)g, (void)to, (void)from, (void)tag, (void)err;
    solo_move(recv, send, count * mp_real_size(kind));
    return MP_OK;
}

/* The driver's collectives, on host buffers: the one process is every rank
 * of the world, and of a group only the rank it plays. */
static mp_status solo_barrier(const mp_group *g, mp_error *err)
{
    (void)g, (void)err;
    return MP_OK;
}

static mp_status solo_bcast(const mp_group *g, void *buf, size_t bytes, int root, mp_error *err)
{
    (void)g, (void)buf, (void)bytes, (void)root, (void)err;
    return MP_OK;
}

static mp_status solo_gather(const mp_group *g, const void *send, size_t bytes, void *recv,
                             const size_t *counts, int root, mp_error *err)
{
    (void)err;
    if (g->rank != root)
        return MP_OK;
    size_t at = 0;
    for (int r = 0; r < g->rank; r++)
        at += counts[r];
    if (bytes)
        memcpy((char *)recv + at, send, bytes);
    return MP_OK;
}

const mp_backend *mp_backend_solo_of(const mp_backend *base)
{
    static mp_backend solo;
    static char name[32];
    if (solo_base != base) {
        solo_base = base;
        solo = *base; /* its memory, compute and clock */
        snprintf(name, sizeof name, "%s-solo", base->name);
        solo.name = name;
        solo.transport = "none";
        solo.allreduce = solo_allreduce;
        solo.allgather = solo_allgather;
        solo.reduce_scatter = solo_reduce_scatter;
        solo.alltoallv = base->alltoallv ? solo_alltoallv : NULL;
        solo.send = solo_send;
        solo.recv = solo_recv;
        solo.send_wait = solo_send_wait;
        solo.sendrecv = solo_sendrecv;
        solo.barrier = solo_barrier;
        solo.bcast = solo_bcast;
        solo.gather = solo_gather;
    }
    return &solo;
}

const mp_backend *mp_backend_solo(void)
{
    return mp_backend_solo_of(mp_backend_cpu());
}
