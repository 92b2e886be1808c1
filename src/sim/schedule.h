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
    MP_OP_B,        /* backward; for ZB-H1, ZB-V, DualPipeV the input-gradient half only */
    MP_OP_W,        /* weight-gradient half (the schedules that split the backward) */
    MP_OP_SEND_FWD, /* send F's output activation to the next stage */
    MP_OP_RECV_FWD, /* receive F's input activation from the previous stage */
    MP_OP_SEND_BWD, /* send B's input gradient to the previous stage */
    MP_OP_RECV_BWD, /* receive the output gradient from the next stage */
    MP_OP_KIND_COUNT
} mp_op_kind;

typedef struct mp_op {
    uint8_t kind;       /* mp_op_kind */
    uint8_t xfer;       /* 0 in the lists built here; the V replay's hints
                           (schedule_vorder.c MP_XFER_*) in its compute-only
                           copies of lists whose transfers are not each at
                           their own F or B */
    uint8_t fb;         /* 1 on the F that opens a DualPipe(V) F&B unit (the
                           F, then the other chunk's B and its W, which
                           DeepSeek overlaps: schedule.c dpv_fb), else 0 */
    uint8_t sync;       /* 1 on a transfer the overlapped interleaved lists
                           wait on where it is posted, with the transfers
                           next to it (Megatron-Core's warm-up and cool-down
                           without overlap_p2p_comm_warmup_flush:
                           schedule.c build_interleaved), else 0 */
    int32_t microbatch; /* 0..m-1 */
    int32_t chunk;      /* model chunk on this rank, 0..v-1; virtual stage:
                           mp_schedule_stage (chunk*p + rank; V: rank, 2p-1-rank) */
} mp_op;

typedef struct mp_op_list {
    mp_op *ops;
    int32_t n, cap;
    /* zb-v: the order is the fallback (sim/schedule_vorder.c), taken only
     * if the greedy orders stalled; false otherwise */
    bool fallback;
} mp_op_list;

const char *mp_op_kind_name(mp_op_kind k); /* "F", "B", "W", "send-fwd", ... */

/* Per-op times that ZB-V's order is built from (the other schedules' orders
 * do not depend on them). Arrays indexed by virtual stage (p*v entries): f,
 * b, w the time of one micro-batch's F, B (input gradient) and W (weight
 * gradient) on that stage; link[k] the time of a message between stages k
 * and k+1, either way (unused where both are on one rank); link may be NULL
 * (free transfers). act[k]: the activation bytes one micro-batch stashes on
 * stage k; a rank holds at most p (act of its chunk 0 + act of its chunk 1),
 * the closed form's 2p chunks at their mean (NULL: equal, 2p chunks). A NULL
 * mp_op_times is the unit-time order: F = B = W = 1, free transfers. Any
 * unit: only ratios matter. lat: the part of every link time that is
 * latency, the rest occupying the link (bytes over bandwidth): a second
 * message on a link in one DualPipe(V) commit starts link - lat after the
 * first (schedule_vorder.c replay, as sim/engine.c queues it); 0: the whole
 * link time occupies it. */
typedef struct mp_op_times {
    const double *f, *b, *w, *link, *act;
    double lat;
} mp_op_times;

/* The op list of one pipeline rank. v must be 1 except for interleaved, and
 * 2 for the V schedules (zb-v, dualpipev) and dualpipe (its chunk is the
 * direction: 0 carries micro-batches 0..m/2-1 from rank 0 up, 1 carries
 * m/2..m-1 from rank p-1 down). Returns MP_EINPUT for invalid (p, v, m)
 * (e.g. interleaved with m % p != 0, dualpipev with m < 2p, dualpipe with an
 * odd p or m or m < 2p). */
mp_status mp_schedule_build(mp_schedule_kind s, int32_t p, int32_t v, int32_t m, int32_t rank,
                            mp_op_list *out, mp_error *err);
/* The op lists of all p ranks at once (out[0..p-1]); the same lists as p
 * calls of mp_schedule_build, cheaper for zb-v, whose ranks are generated
 * together. On failure every list is empty. */
mp_status mp_schedule_build_all(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                mp_op_list *out, mp_error *err);
/* The same with the order built from real op times (t may be NULL: the
 * unit-time order, what mp_schedule_build and mp_schedule_build_all give).
 * The simulator builds with its stage costs (mp_sim_schedule in
 * sim/simulate.h), and the executor asks it for the same lists. */
mp_status mp_schedule_build_timed(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                  int32_t rank, const mp_op_times *t, mp_op_list *out,
                                  mp_error *err);
mp_status mp_schedule_build_all_timed(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                      const mp_op_times *t, mp_op_list *out, mp_error *err);
/* Every option of a build: t as above; overlap_p2p, Megatron's
 * --overlap-p2p-communication (overlap_p2p_comm), which only the interleaved
 * schedule with v > 1 reads. Without it (the default of every call above)
 * interleaved 1F1B places its transfers as Megatron-Core's synchronous
 * interleaved schedule posts them: after each warm-up F one batch sending its
 * output and receiving the next F's input (the last one also the first B's
 * gradient), after each steady-state F and B pair one batch of both outputs
 * and both next inputs (send_forward_backward_recv_forward_backward), after
 * each cool-down B its gradient out and the next B's in; each batch's sends
 * before its receives. With it each transfer sits at its own F or B, as for
 * the other schedules; those of the warm-up and cool-down (and the last
 * steady-state B's gradient) are marked sync: Megatron-Core waits on them
 * where it posts them unless overlap_p2p_comm_warmup_flush is set. */
typedef struct mp_schedule_opts {
    const mp_op_times *t;
    bool overlap_p2p;
} mp_schedule_opts;
mp_status mp_schedule_build_opts(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                 int32_t rank, const mp_schedule_opts *o, mp_op_list *out,
                                 mp_error *err);
mp_status mp_schedule_build_all_opts(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                     const mp_schedule_opts *o, mp_op_list *out, mp_error *err);
/* Whether these lists are Megatron's batched interleaved ones (above): then
 * a run of transfer ops is one batch, posted together and waited on whole. */
bool mp_schedule_batched_p2p(mp_schedule_kind s, int32_t v, bool overlap_p2p);
void mp_op_list_free(mp_op_list *l);

/* What a SEND/RECV op talks to. Virtual stage k = mp_schedule_stage(s, p,
 * rank, chunk); forward data flows k -> k+1, gradients k -> k-1 (interleaved:
 * wrapping from the last rank to rank 0 between chunks; V: turning back at
 * rank p-1, whose two chunks pass the data to themselves -- a message whose
 * peer is the rank itself, a local copy; dualpipe: k in 0..p-1 in both
 * directions, the peer's chunk the same direction). For a SEND/RECV op of `rank`, sets
 * the peer's pipeline rank and chunk and returns true; returns false for
 * F/B/W (no peer). */
bool mp_op_peer(mp_schedule_kind s, int32_t p, int32_t v, int32_t rank, const mp_op *op,
                int32_t *peer_rank, int32_t *peer_chunk);

/* A message id in [0, 2*v*m), equal for a SEND and the RECV that matches it
 * and distinct for different messages between the same two ranks (usable as an
 * MPI tag). -1 for F/B/W. */
int32_t mp_op_message_id(mp_schedule_kind s, int32_t p, int32_t v, int32_t m, int32_t rank,
                         const mp_op *op);

/* Messages of one step that cross between two different ranks (p2p sends;
 * the V schedules' hand-over at rank p-1 is local): 2(pv - 1)m for the
 * chunked schedules counting both directions, 2(2p - 2)m for V -- twice
 * 1F1B's 2(p - 1)m; dualpipe 2(p - 1)m like 1F1B (each micro-batch crosses
 * p - 1 boundaries, in one direction or the other). */
int64_t mp_schedule_p2p_messages(mp_schedule_kind s, int32_t p, int32_t v, int32_t m);

/* The most (micro-batch, chunk) forwards a rank of this schedule holds
 * stashed at once (F done, its B -- W where the backward is split -- not
 * yet): GPipe m, 1F1B min(p - rank, m), ZB-H1 min(p, m), interleaved
 * Megatron's warm-up + 1, capped at m*v; zb-v min(2p, 2m) chunks (= p
 * micro-batches of whole-stage activations, 1F1B's first rank); dualpipev
 * min(2p + 1, 2m) (DeepSeek's "PP + 1"); dualpipe min(p + 1, m) whole-stage
 * activations (DeepSeek's "PP + 1"). -1 for an invalid (p, v, m, rank). */
int32_t mp_schedule_inflight_bound(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                   int32_t rank);

/* Split-backward schedules: the most Ws a rank has waiting at once whose B
 * did not run just before them (a B followed at once by its W is one
 * backward, dualpipe.py's chunks without zero-bubble splitting): each keeps
 * its linear layers' output gradients. ZB-H1 min(rank + 1, m); ZB-V,
 * DualPipe(V) the in-flight bound (a waiting W's activations are in flight);
 * 0 for the others. -1 for an invalid (p, v, m, rank). */
int32_t mp_schedule_w_pending_bound(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                    int32_t rank);
/* DualPipe and DualPipeV: the chunks in flight and the Ws waiting add up to
 * no more than the in-flight bound at any time (the PP + 1 peak falls in
 * the overlapped forward-backward phase, whose backwards are not split:
 * dualpipe.py step 4; Ws wait only in the phases with fewer in flight), so
 * with output gradients no larger than a chunk's activations the peak is
 * the in-flight bound's activations alone. */
bool mp_schedule_w_under_inflight(mp_schedule_kind s);

/* Whether the B at l->ops[i] and its W are adjacent compute ops of the rank
 * (no F, B or W between them; sends and receives may be): then they are one
 * backward, whose linear layers' output gradients live a layer at a time, as
 * DualPipe's chunks without zero-bubble splitting run (dualpipe.py
 * _backward_chunk, enable_zb false); otherwise the B keeps them for its W.
 * dir +1 looks from a B for its W, -1 from a W for its B. */
bool mp_op_list_bw_adjacent(const mp_op_list *l, int32_t i, int dir);

#endif
