/* watchdog.c — waits with a deadline (watchdog.h). */
#include "exec/watchdog.h"

#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "exec/mpi_util.h"

static double timeout_s; /* 0: none */

void mp_watch_set_timeout(double seconds)
{
    timeout_s = seconds > 0 ? seconds : 0;
}

double mp_watch_timeout(void)
{
    return timeout_s;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

mp_status mp_watch_poll(mp_poll_fn poll, mp_describe_fn describe, void *ctx, mp_error *err)
{
    double start = 0;
    for (long spins = 0;; spins++) {
        int r = poll(ctx, err);
        if (r > 0)
            return MP_OK;
        if (r < 0)
            return err ? err->code : MP_ERUNTIME;
        /* Short waits spin (MPI progresses inside the poll); longer ones
         * give the core away, then sleep a little, at most a 1/100 of the
         * time already waited (so a long wait ends at most 1% late). */
        if (spins < 64)
            continue;
        double t = now();
        if (start == 0)
            start = t;
        double waited = t - start;
        if (timeout_s > 0 && waited > timeout_s) {
            char what[192];
            describe(ctx, what, sizeof what);
            return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL,
                                "%s waited %.1f s, longer than the timeout of %.3g s (--timeout): "
                                "a peer rank is stopped, stuck or dead; ending the job",
                                what, waited, timeout_s);
        }
        if (waited < 1e-3) {
            sched_yield();
        } else {
            double pause = waited / 100 < 1e-3 ? waited / 100 : 1e-3;
            struct timespec ts = {0, (long)(pause * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
}

typedef struct mpi_wait {
    MPI_Request *reqs;
    int n;
    MPI_Status *statuses;
    const char *op;
    const mp_group *g;
    int peer;
} mpi_wait;

static int poll_mpi(void *ctx, mp_error *err)
{
    mpi_wait *w = ctx;
    int done = 0;
    int rc = MPI_Testall(w->n, w->reqs, &done, w->statuses);
    if (rc != MPI_SUCCESS) {
        mp_mpi_failed(rc, w->op, err);
        return -1;
    }
    return done ? 1 : 0;
}

static void describe_mpi(void *ctx, char *buf, size_t size)
{
    const mpi_wait *w = ctx;
    char name[MPI_MAX_OBJECT_NAME] = "?";
    int len = 0;
    MPI_Comm_get_name(w->g->comm, name, &len);
    if (w->peer >= 0)
        snprintf(buf, size, "%s from rank %d of the %s group (%d ranks)", w->op, w->peer, name,
                 w->g->size);
    else
        snprintf(buf, size, "%s over the %s group (%d ranks)", w->op, name, w->g->size);
}

mp_status mp_watch_mpi(MPI_Request *reqs, int n, MPI_Status *statuses, const char *op,
                       const mp_group *g, int peer, mp_error *err)
{
    mpi_wait w = {reqs, n, statuses, op, g, peer};
    return mp_watch_poll(poll_mpi, describe_mpi, &w, err);
}

mp_status mp_watch_barrier(const mp_group *g, mp_error *err)
{
    MPI_Request req;
    int rc = MPI_Ibarrier(g->comm, &req);
    if (rc != MPI_SUCCESS)
        return mp_mpi_failed(rc, "MPI_Ibarrier", err);
    return mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "barrier", g, -1, err);
}

mp_status mp_watch_bcast(const mp_group *g, void *buf, int count, MPI_Datatype type, int root,
                         mp_error *err)
{
    MPI_Request req;
    int rc = MPI_Ibcast(buf, count, type, root, g->comm, &req);
    if (rc != MPI_SUCCESS)
        return mp_mpi_failed(rc, "MPI_Ibcast", err);
    return mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "broadcast", g, -1, err);
}
