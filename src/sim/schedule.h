/* schedule.h — pipeline schedules as pure functions (p, v, m, rank) -> ops.
 * The only schedule generator in the project: the simulator and the executor
 * run the same lists, so a schedule that deadlocks in one deadlocks in both. */
#ifndef MP_SCHEDULE_H
#define MP_SCHEDULE_H

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

#endif
