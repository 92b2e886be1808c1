/* schedule_vorder.h — the compute order of ZB-V from per-op times
 * (schedule_vorder.c); sim/schedule.c adds the transfers around it. */
#ifndef MP_SCHEDULE_VORDER_H
#define MP_SCHEDULE_VORDER_H

#include "sim/schedule.h"

/* ZB-V's F/B/W ops of every rank (out[0..p-1], each with room for 6m ops,
 * n = 0 on entry), in the order the list scheduling runs them, without the
 * transfers. t == NULL: unit times, no transfer time; else the fastest
 * under t of the unit-time order and two list schedulings over t. The
 * greedy cannot stall (the proof is at try_f); if it ever did, the order
 * falls back to the greedy that holds at most p micro-batches of each chunk
 * (complete and within the memory cap under any times) and *fallback
 * (may be NULL) is set. MP_ENOMEM. */
mp_status mp_schedule_zbv_order(int32_t p, int32_t m, const mp_op_times *t, mp_op_list *out,
                                bool *fallback, mp_error *err);
/* The V placement's lists (zb-v, dualpipev: out of mp_schedule_build_all or
 * _timed, sends and receives included) run under t as the list scheduling
 * times them (each rank's ops in order, each as soon as its input has
 * landed, a receive waiting for its message, a send posting its op's
 * output where the list has it; a run of transfers is one commit, its
 * sends posted together, each behind the commit's earlier ones on its link
 * (t->lat), and the rank going on once all of it is done, as sim/engine.c
 * runs DualPipe(V)'s), without the memory cap: end[r][i], when op i of
 * rank r ends (a send or receive: when the rank is free after it). The planner places the DP reductions from it (planner/cost.c
 * dp_tail_windows). MP_EINTERNAL if the lists stall, MP_ENOMEM. */
mp_status mp_schedule_v_replay(int32_t p, int32_t m, const mp_op_times *t, const mp_op_list *lists,
                               double *const *end, mp_error *err);
/* Per rank, what the planner's DP windows need from the V lists replayed as
 * mp_schedule_v_replay runs them: when the rank is free after its last op
 * (its latest op end, sends included), when chunk c's last W ends and when
 * its forward of micro-batch 0 ends. */
typedef struct mp_v_rank_times {
    double end, w_end[2], f0_end[2];
} mp_v_rank_times;
/* Those times (rt[0..p-1]) of the lists mp_schedule_build_all_timed(s, p,
 * 2, m, s == zb-v ? t : NULL) gives, replayed under t (not NULL) -- the
 * values mp_schedule_v_replay gives for them, bit for bit -- without
 * building the lists' transfers (compute-only copies whose ops carry where
 * the lists receive and send): zb-v's chosen order is timed by the replay
 * that chooses it, the time-free orders (zb-v's unit-time one, dualpipev's)
 * are built once per (schedule, p, m) and thread. MP_EINPUT for another
 * schedule, MP_EINTERNAL if the lists stall, MP_ENOMEM. */
mp_status mp_schedule_v_times(mp_schedule_kind s, int32_t p, int32_t m, const mp_op_times *t,
                              mp_v_rank_times *rt, mp_error *err);
/* ZB-V's rank times (as mp_schedule_v_times) for m micro-batches with the
 * orders built for only `built` of them (< m; else exactly
 * mp_schedule_v_times): each of the five orders (mp_schedule_zbv_order)
 * built and timed for `built`, its step extended by m - built times its
 * pace (the larger of its last half's and the busiest rank's round: f + b
 * + w over its two stages and the sends it waits for, which no order
 * beats), the fastest so extended chosen and its ends and last Ws shifted
 * by as much (first forwards as they are). The planner's bounded fallback
 * where building the orders for m would cost too much: an estimate, not
 * the simulator's order (its error: tests/sim/test_vorder.c). Kept per
 * thread as mp_schedule_v_times' answers are. */
mp_status mp_schedule_zbv_times(int32_t p, int32_t m, int32_t built, const mp_op_times *t,
                                mp_v_rank_times *rt, mp_error *err);
/* What the planner's DP windows read -- per rank, its end less each chunk's
 * last W, each chunk's first forward, rank 0's end less the rank's -- equal
 * in rt to those of mp_schedule_v_times(s, p, m) (its absolute times may be
 * a shorter replay's, *used micro-batches). zb-v: that call (used = m; its
 * real-time orders have no steady state to cut at). dualpipev: its replay is
 * max-plus linear in the op times (each op starts at the later of its
 * rank's previous op and its input's landing), and its order for m
 * micro-batches is the order for m - 1 with one more phase-4 block (F0 B1
 * W1 F1 B0 W0, each micro-batch one later) on every rank. Level i (block i
 * of every rank) depends only on levels i - 2p + 1 .. i (a chunk-0 backward
 * needs its own forward, 2p - 1 - r blocks back on rank r), so once 2p
 * consecutive levels each end exactly one constant later than the level
 * before, every later level does too, and the ops after the last level
 * (phases 5-8) start from the same state, shifted: any larger m gives the
 * same windows. Replays 6p, 18p, 54p, ... micro-batches below m and stops
 * at the first that shows such a run of levels (each to 1e-12 of the
 * step's length), else replays all m. Kept per thread as
 * mp_schedule_v_times' answers are. MP_EINPUT, MP_EINTERNAL, MP_ENOMEM as
 * mp_schedule_v_times. */
mp_status mp_schedule_v_windows(mp_schedule_kind s, int32_t p, int32_t m, const mp_op_times *t,
                                mp_v_rank_times *rt, int32_t *used, mp_error *err);
/* Its answers are kept per thread, keyed on (s, p, m) and t bit for bit
 * (p <= 32): a search costs many candidates whose stages cost the same.
 * Off (benchmarks: the replay's own cost), every call replays. On at start. */
void mp_schedule_v_times_keep(bool on);
/* That fallback order alone (t may be NULL: unit times), for the tests. */
mp_status mp_schedule_zbv_fallback_order(int32_t p, int32_t m, const mp_op_times *t,
                                         mp_op_list *out, mp_error *err);
/* Tests only: with on, every later zb-v order is built as if the greedy
 * orders had stalled -- the fallback order, with *fallback set -- so that
 * what runs and reports it (simulate, exec) can be tested; the greedy
 * itself cannot stall. Nothing outside the tests sets it. */
void mp_schedule_zbv_test_stall(bool on);

#endif
