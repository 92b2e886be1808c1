/* watchdog.h — no wait without an end. Every wait of the executor on its
 * peers (a collective, a pipeline receive, a send's completion, the barrier
 * at a step's start) polls with a deadline: past it the wait returns an error
 * naming the operation and the group, and the caller ends the job (exec
 * prints "rank R: ..." and calls MPI_Abort). A stopped or stuck rank so ends
 * the job instead of hanging every other rank forever.
 *
 * The deadline loop (mp_watch_poll) knows nothing of MPI: a backend that
 * waits on something else (a CUDA stream, an NCCL communicator) passes its
 * own poll function. One executor per process, one thread: the timeout is
 * process-wide. */
#ifndef MP_EXEC_WATCHDOG_H
#define MP_EXEC_WATCHDOG_H

#include <mpi.h>

#include "core/error.h"
#include "exec/backend.h"

/* The derived timeout: this floor plus this multiple of the predicted time
 * between two synchronisations (a step; docs/exec.md). */
#define MP_WATCH_FLOOR_S 60.0
#define MP_WATCH_MULTIPLE 10.0

/* Seconds a single wait may take (0: wait forever, the default). */
void mp_watch_set_timeout(double seconds);
double mp_watch_timeout(void);

/* 1: done, 0: not yet, -1: failed (err set). */
typedef int (*mp_poll_fn)(void *ctx, mp_error *err);

/* Writes what is waited for ("all-reduce over the tp group (2 ranks)"). */
typedef void (*mp_describe_fn)(void *ctx, char *buf, size_t size);

/* Calls poll until it is done, yielding the core between calls (ranks often
 * share cores). Past the timeout: MP_ERUNTIME, "<describe> waited N s ...". */
mp_status mp_watch_poll(mp_poll_fn poll, mp_describe_fn describe, void *ctx, mp_error *err);

/* Completes MPI requests under the watchdog; statuses[n] or MPI_STATUSES_IGNORE.
 * op names the call ("all-reduce", "pipeline receive"); g the group (its
 * communicator's name, set by runtime.c, and size go into the message); peer
 * the group rank waited for, or -1. */
mp_status mp_watch_mpi(MPI_Request *reqs, int n, MPI_Status *statuses, const char *op,
                       const mp_group *g, int peer, mp_error *err);

/* MPI_Barrier and MPI_Bcast on a communicator, under the watchdog. */
mp_status mp_watch_barrier(const mp_group *g, mp_error *err);
mp_status mp_watch_bcast(const mp_group *g, void *buf, int count, MPI_Datatype type, int root,
                         mp_error *err);

#endif
