/* backend_solo.c — the CPU backend for `exec --solo R`: one process runs
 * global rank R's share of a plan at full size, and every collective and
 * pipeline message is left out (DESIGN §7: its time comes from the cost
 * model instead). Buffers still get the shapes the real exchange would leave:
 * an all-gather repeats this rank's part in every slot, a reduce-scatter keeps
 * this rank's slot, a ring step or a receive leaves what the buffer held. The
 * values are not the plan's (there is nothing to check them against); the
 * compute, which is what --solo measures, is. */
#include <string.h>

#include "exec/backend.h"
#include "exec/mpi_util.h"

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
        if ((char *)recv + (size_t)r * bytes != (const char *)send)
            memmove((char *)recv + (size_t)r * bytes, send, bytes);
    return MP_OK;
}

static mp_status solo_reduce_scatter(const mp_group *g, mp_real_kind kind, const void *send,
                                     void *recv, size_t count, mp_error *err)
{
    (void)err;
    size_t bytes = count * mp_real_size(kind);
    memmove(recv, (const char *)send + (size_t)g->rank * bytes, bytes);
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
    memmove(recv, send, count * mp_real_size(kind));
    return MP_OK;
}

const mp_backend *mp_backend_solo(void)
{
    static mp_backend solo;
    if (!solo.name) {
        solo = *mp_backend_cpu(); /* its GEMM and clock */
        solo.name = "cpu-solo";
        solo.allreduce = solo_allreduce;
        solo.allgather = solo_allgather;
        solo.reduce_scatter = solo_reduce_scatter;
        solo.send = solo_send;
        solo.recv = solo_recv;
        solo.send_wait = solo_send_wait;
        solo.sendrecv = solo_sendrecv;
    }
    return &solo;
}
