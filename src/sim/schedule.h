/* schedule.h — pipeline schedules as pure functions (p, v, m, rank) -> ops.
 * The only schedule generator in the project: the simulator and the executor
 * run the same lists, so a schedule that deadlocks in one deadlocks in both. */
#ifndef MP_SCHEDULE_H
#define MP_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"

typedef enum mp_op_kind {
    MP_OP_F,        /* forward of (microbatch, chunk) */
    MP_OP_B,        /* backward; for ZB-H1 the input-gradient half only */
    MP_OP_W,        /* ZB-H1 weight-gradient half */
    MP_OP_SEND_FWD, /* send F's output activation to the next stage */
    MP_OP_RECV_FWD, /* receive F's input activation from the previous stage */
    MP_OP_SEND_BWD, /* send B's input gradient to the previous stage */
    MP_OP_RECV_BWD, /* receive the output gradient from the next stage */
    MP_OP_KIND_COUNT
} mp_op_kind;

typedef struct mp_op {
    uint8_t kind;       /* mp_op_kind */
    int32_t microbatch; /* 0..m-1 */
    int32_t chunk;      /* model chunk on this rank, 0..v-1; virtual stage = chunk*p + rank */
} mp_op;

typedef struct mp_op_list {
    mp_op *ops;
    int32_t n, cap;
} mp_op_list;

const char *mp_op_kind_name(mp_op_kind k); /* "F", "B", "W", "send-fwd", ... */

/* The op list of one pipeline rank. v must be 1 except for interleaved.
 * Returns MP_EINPUT for invalid (p, v, m) (e.g. interleaved with m % p != 0). */
mp_status mp_schedule_build(mp_schedule_kind s, int32_t p, int32_t v, int32_t m, int32_t rank,
                            mp_op_list *out, mp_error *err);
void mp_op_list_free(mp_op_list *l);

/* Added by the simulator (additive): what a SEND/RECV op talks to.
 * Virtual stage k = chunk*p + rank; forward data flows k -> k+1, gradients
 * k -> k-1, wrapping from the last rank to rank 0 between chunks. For a
 * SEND/RECV op of `rank`, sets the peer's pipeline rank and chunk and returns
 * true; returns false for F/B/W (no peer). */
bool mp_op_peer(int32_t p, int32_t v, int32_t rank, const mp_op *op, int32_t *peer_rank,
                int32_t *peer_chunk);

/* A message id in [0, 2*v*m), equal for a SEND and the RECV that matches it
 * and distinct for different messages between the same two ranks (usable as an
 * MPI tag). -1 for F/B/W. */
int32_t mp_op_message_id(int32_t p, int32_t v, int32_t m, int32_t rank, const mp_op *op);

/* The most (micro-batch, chunk) forwards a rank of this schedule holds
 * stashed at once (F done, its B -- W for ZB-H1 -- not yet): GPipe m,
 * 1F1B and ZB-H1 min(p - rank, m), interleaved Megatron's warm-up + 1,
 * capped at m*v. -1 for an invalid (p, v, m, rank). */
int32_t mp_schedule_inflight_bound(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                   int32_t rank);

#endif
