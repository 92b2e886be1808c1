/* pipeline.c — closed-form pipeline makespans (docs/cost-model.md §6).
 *
 * Conventions (the simulator is tested against these):
 * - f, b, w are the times of one micro-batch through one (virtual) stage,
 *   the same on every stage; for interleaved 1F1B they are per chunk (a
 *   chunk is 1/v of a rank's layers).
 * - p2p is the time of one activation (or gradient) transfer between
 *   neighbouring ranks. Megatron's p2p is synchronous (batched isend/irecv
 *   waited on before the next compute), so every F and every B on the
 *   critical path is followed by one p2p when p > 1 (interleaved: one per
 *   steady-state F and B pair, below).
 *
 *   GPipe, 1F1B:       (m + p - 1) (f + b + 2 p2p)
 *   interleaved 1F1B:  (m v + p - 1) (f + b + p2p) + (2(p - 1) + (v - 2) p) p2p
 *                      [f, b per chunk; Megatron-Core's synchronous batches:
 *                       each steady-state F and B pair followed by one batch
 *                       whose sends go to the two neighbours at once, each
 *                       of the first rank's 2(p - 1) + (v - 1)p warm-up
 *                       forwards by its own (sim/schedule.c
 *                       build_interleaved_batched); equal to the simulator
 *                       for p >= 3, at p = 2 (refused by Megatron-LM without
 *                       the overlap) both sends share the one link]
 *   ... overlapped:    (m v + p - 1)(f + b) + 2(p v - 1) p2p
 *                      [--overlap-p2p-communication: the steady state hides
 *                       each transfer under the next pass, the first
 *                       micro-batch's hops down and back up are waited on;
 *                       equal to the simulator while p2p <= min(f, b)]
 *   ZB-H1:             max(m (f + b + w + 2 p2p) + (p - 1) max(0, f + b - w + 2 p2p),
 *                          (m + p - 1)(f + b + 2 p2p) + w)
 *   ZB-V:              2m (f + b + w + 2 p2p) + (p - 1)(f + p2p + max(0, b - w))
 *   DualPipeV,         below (mp_dualpipe_makespan): exact on equal stages
 *   DualPipe:          for every f, b, w and link; p2p taken as a latency
 *                      [V schedules: f, b, w per chunk, half a rank's layers;
 *                       DualPipe: per whole stage]
 *   p = 1:             m v (f + b + w)
 *
 * The bubble of 1F1B is (p-1)/m of the ideal m(f+b) (Narayanan 2021),
 * interleaving divides it by v; ZB-H1 (Qi et al. 2024) lets the weight-
 * gradient half W fill the cool-down, leaving (p-1)(f + b - w): a third of
 * 1F1B's bubble when f = b = w. With fewer micro-batches than stages (m < p)
 * there are not enough W to fill it, and the critical path of the last
 * micro-batch's F down and B back up, plus its W, is the bound (the second
 * term; found by the discrete-event simulator: p=4, m=1, f=b=w=1 takes 9).
 *
 * DualPipe(V) on equal stages (sim/schedule.c build_dualpipev; DualPipe is
 * its relabelling on p/2 ranks with m/2 micro-batches a direction, the middle
 * ranks' hand-over a real message): f the forward, b the input gradient, w
 * the weight gradient of one chunk (DualPipe: stage), each transfer lat (its
 * latency) plus wire (its time on the directed link, which carries one
 * message at a time); c = lat + wire, X = max(0, b - w), Xc = max(0, b - w +
 * c); q = p - 1 (DualPipe: p/2 - 1) ranks of the V to fill, n = m (DualPipe:
 * m/2) micro-batches a direction:
 *   T = n (2(f + b + w) + L) + E,  L = 2(lat + 2 wire)  (p = 2: lat + 2 wire)
 *   E, DualPipeV q >= 2: (3q - 1) lat + (2q - 6) wire + (q - 2) Xc + 2X
 *                   + max(2q f, (q - 1) f + q b) + max(0, f - b + c, 2c - 2f, 3c - f - b)
 *   E, DualPipe q >= 2:  (3q + 1) lat + (2q - 2) wire + (q - 1) Xc + X
 *                   + max(2q f, (q - 1) f + q b) + max(0, c - f, lat - b, f - b - wire)
 *   E, DualPipe q = 1:   4 lat + X + max(2f, b) + max(0, c - f, f - b - lat - 2 wire)
 *   E, DualPipeV p = 2:  5 lat + 3 wire + max(2f + X + max(0, f - b), b + X)
 *   E, DualPipe p = 2:   lat;  p = 1: E = 0, L = 0
 * L: in the steady state each F&B unit posts its two sends (F's output and
 * the other chunk's input gradient, both to the same neighbour) at one
 * commit and waits for both: one latency, two wire times. The V's end ranks
 * send from one of their two units only (rank 0's F1&B0 and rank p-1's F0&B1
 * stay on the rank; DualPipe's middle ranks do send), so an inner rank sets
 * the pace, and with p = 2, all ends, half of L. E, the fill: each rank of
 * the V adds two forwards (its chunk-1 forward waits for the next rank's,
 * which that rank sends after the chunk-0 forward it runs first), or where
 * b > f a forward and an input gradient, less one forward over the whole
 * V (the max(2q f, ...)); what of its B no W covers (X; on all but two ranks,
 * DualPipe one, the W waits a hop more: Xc); and three latencies and two
 * wire times of the hand-overs down and back a rank. The last max is the turn
 * of the V: the last rank sends its last warm-up F1 only after its first
 * phase-4 F0 (f - b), or waits for hops longer than the forward or B they
 * would hide under (c - f, ...).
 * How it was found (issue #14): the lists are fixed orders, so the engine's
 * makespan is their longest path, a maximum of forms linear in f, b, w, lat
 * and wire (convex, piecewise linear). Their slopes at thousands of random
 * points (f, b, w from 0.05 to 3, links 0 to 3, p <= 16, m from 2p to 5p)
 * showed 21 forms for DualPipeV (18 for DualPipe), the same for every
 * p >= 5 up to the shift in q above and m only in the steady state; E is
 * their maximum, factored, and the test holds it to the engine (tests/sim
 * test_dualpipe_exact_grid). The fill before, f + max(f, b) + max(0, b - w)
 * + 2 p2p with a turn of max(0, f - b), was exact only for f >= b on free
 * links and an upper bound elsewhere. mp_dualpipe_fill is E's share of a
 * rank, mp_dualpipe_turn the rest, once a step (cost.c's fallback adds the
 * fills rank by rank; on real stages the estimate replays the order,
 * dualpipe_replay.c). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "core/thread_block.h"
#include "planner/cost.h"
#include "planner/pipeline_internal.h"
#include "sim/schedule.h"

double mp_dualpipe_fill(double f, double b, double w, double lat, double wire)
{
    return f + fmax(f, b) + fmax(0.0, b - w + lat + wire) + 3.0 * lat + 2.0 * wire;
}

double mp_dualpipe_unit_links(int64_t p, int64_t r, double lat, double wire)
{
    return (double)((r > 0) + (r < p - 1)) * (lat + 2.0 * wire);
}

double mp_dualpipe_turn(mp_schedule_kind s, int64_t p, double f, double b, double w, double lat,
                        double wire)
{
    bool dv = s == MP_SCHED_DUALPIPEV;
    int64_t q = dv ? p - 1 : p / 2 - 1;
    double c = lat + wire, x = fmax(0.0, b - w), xc = fmax(0.0, b - w + c), extra;
    if (q < 1)
        return dv ? 0.0 : lat; /* DualPipe p = 2: one hand-over's latency */
    if (dv && q == 1)
        extra = 5.0 * lat + 3.0 * wire + fmax(2.0 * f + x + fmax(0.0, f - b), b + x);
    else if (q == 1)
        extra = 4.0 * lat + x + fmax(2.0 * f, b) + fmax(0.0, fmax(c - f, f - b - lat - 2.0 * wire));
    else {
        double qd = (double)q, paced = fmax(2.0 * qd * f, (qd - 1.0) * f + qd * b);
        extra = dv ? (3.0 * qd - 1.0) * lat + (2.0 * qd - 6.0) * wire + (qd - 2.0) * xc + 2.0 * x +
                         paced + fmax(fmax(0.0, f - b + c), fmax(2.0 * (c - f), 3.0 * c - f - b))
                   : (3.0 * qd + 1.0) * lat + (2.0 * qd - 2.0) * wire + (qd - 1.0) * xc + x +
                         paced + fmax(fmax(0.0, c - f), fmax(lat - b, f - b - wire));
    }
    return extra - (double)q * mp_dualpipe_fill(f, b, w, lat, wire);
}

double mp_dualpipe_makespan(mp_schedule_kind s, int64_t p, int64_t m, double f, double b, double w,
                            double lat, double wire)
{
    if (p < 1 || m < 1)
        return 0.0;
    bool dv = s == MP_SCHED_DUALPIPEV;
    int64_t n = dv ? m : m / 2, q = dv ? p - 1 : p / 2 - 1;
    double work = (double)n * (2.0 * (f + b + w) + mp_dualpipe_unit_links(p, p / 2, lat, wire));
    if (p == 1)
        return work;
    return work + (double)(q > 0 ? q : 0) * mp_dualpipe_fill(f, b, w, lat, wire) +
           mp_dualpipe_turn(s, p, f, b, w, lat, wire);
}

/* ZB-V on equal stages, f, b, w per chunk (each rank runs 2m chunk passes
 * of each); see the comment at the top. The estimate itself takes ZB-V's
 * step from the order the simulator builds (zbv_replay.c): list scheduling
 * over the real times, which this form only bounds (GPT-3 175B's even
 * split at pp 16 runs 3-6% under it: rank 0 sends two transfers a
 * micro-batch, not four). */
static double v_makespan(int64_t p, int64_t m, double f, double b, double w, double comm)
{
    double work = 2.0 * (double)m * (f + b + w + comm);
    double filled = work + (double)(p - 1) * (f + comm / 2.0 + fmax(0.0, b - w));
    /* too few micro-batches to fill it: the last one's F down the V and its B
     * back, then its W */
    double critical = 2.0 * (double)p * (f + b + comm) + w + (double)(m - 1) * (f + b + w);
    return filled > critical ? filled : critical;
}

double mp_pipeline_makespan(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, double f,
                            double b, double w, double p2p)
{
    if (p < 1 || m < 1)
        return 0.0;
    if (s == MP_SCHED_DUALPIPE || s == MP_SCHED_DUALPIPEV)
        /* p2p as a latency: a transfer that holds no link */
        return mp_dualpipe_makespan(s, p, m, f, b, w, p > 1 ? p2p : 0.0, 0.0);
    if (mp_schedule_is_v(s))
        return v_makespan(p, m, f, b, w, p > 1 ? 2.0 * p2p : 0.0);
    if (s != MP_SCHED_INTERLEAVED || v < 1)
        v = 1;
    if (s != MP_SCHED_ZBH1) {
        b += w; /* without the split, B includes the weight gradients */
        w = 0.0;
    }
    if (p == 1)
        return (double)(m * v) * (f + b + w);
    double comm = 2.0 * p2p;
    if (s == MP_SCHED_ZBH1) {
        double ramp = f + b - w + comm;
        double filled = (double)m * (f + b + w + comm) + (double)(p - 1) * (ramp > 0.0 ? ramp : 0.0);
        double critical = (double)(m + p - 1) * (f + b + comm) + w;
        return filled > critical ? filled : critical;
    }
    if (s == MP_SCHED_INTERLEAVED && v > 1)
        return (double)(m * v + p - 1) * (f + b + p2p) + (double)(2 * (p - 1) + (v - 2) * p) * p2p;
    return (double)(m * v + p - 1) * (f + b + comm);
}

int64_t mp_pipeline_overlap_fill(int64_t p, int64_t v)
{
    return p > 1 ? 2 * (p * v - 1) : 0;
}

double mp_pipeline_makespan_overlap(int64_t p, int64_t v, int64_t m, double f, double b,
                                    double hop)
{
    if (p < 1 || m < 1)
        return 0.0;
    return (double)(m * v + p - 1) * (f + b) + (double)mp_pipeline_overlap_fill(p, v) * hop;
}

double mp_pipeline_makespan_ranks(int64_t m, int64_t v, int64_t p, const double *round,
                                  const double *ramp)
{
    /* Non-uniform generalisation used by estimate: the slowest rank sets the
     * steady state (m rounds of its chunks), the others add their share of
     * the fill and drain. Equal ranks give the closed forms above. */
    if (v < 1)
        v = 1;
    int64_t arg = 0;
    double sum = 0.0;
    for (int64_t k = 0; k < p; k++) {
        if (round[k] > round[arg])
            arg = k;
        sum += ramp[k];
    }
    double fill = (sum - ramp[arg]) / (double)v;
    return (double)m * round[arg] + (fill > 0.0 ? fill : 0.0);
}

/* One of the schedule's per-rank bounds (sim/schedule.h) in chunks. */
static double rank_bound(int32_t (*bound)(mp_schedule_kind, int32_t, int32_t, int32_t, int32_t),
                         mp_schedule_kind s, int64_t p, int64_t v, int64_t m, int64_t r)
{
    v = mp_schedule_chunks(s, v);
    if (p < 1 || m < 1)
        return 0.0;
    /* the schedules take int32 sizes; beyond them (absurd, refused elsewhere)
     * every micro-batch may be in flight */
    if (p > INT32_MAX || v > INT32_MAX || m > INT32_MAX / v || r < 0 || r >= p)
        return (double)(m * v);
    int32_t k = bound(s, (int32_t)p, (int32_t)v, (int32_t)m, (int32_t)r);
    /* -1: not a valid schedule (interleaving with m % p != 0); the check
     * refuses such configurations, so any answer that is an upper bound does */
    return k >= 0 ? (double)k : (double)(m * v);
}

double mp_pipeline_inflight_chunks(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, int64_t r)
{
    return rank_bound(mp_schedule_inflight_bound, s, p, v, m, r);
}

double mp_pipeline_w_pending_chunks(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, int64_t r)
{
    return rank_bound(mp_schedule_w_pending_bound, s, p, v, m, r);
}

/* A rank's states along its op list as counts per chunk: micro-batches
 * holding activations (F done, W not) and holding output gradients (B done,
 * deferred W not), n0 n1 h0 h1. For nonnegative bytes the largest stash is
 * at a state no other state exceeds in every count: only those are kept. */
#define WALK_STATES 48
typedef struct walk_states {
    int32_t key[5]; /* s, p, v, m, r */
    int n;          /* states kept; -1: more than WALK_STATES */
    int32_t st[WALK_STATES][4];
} walk_states;

static void keep_state(walk_states *w, const int32_t c[4])
{
    if (w->n < 0)
        return;
    for (int i = 0; i < w->n; i++) {
        const int32_t *o = w->st[i];
        if (o[0] >= c[0] && o[1] >= c[1] && o[2] >= c[2] && o[3] >= c[3])
            return; /* dominated (or equal) */
    }
    int k = 0; /* drop the states it dominates */
    for (int i = 0; i < w->n; i++) {
        const int32_t *o = w->st[i];
        if (!(c[0] >= o[0] && c[1] >= o[1] && c[2] >= o[2] && c[3] >= o[3]))
            memcpy(w->st[k++], o, sizeof w->st[0]);
    }
    w->n = k;
    if (w->n == WALK_STATES) {
        w->n = -1;
        return;
    }
    memcpy(w->st[w->n++], c, sizeof w->st[0]);
}

static bool walk(mp_schedule_kind s, int32_t p, int32_t v, int32_t m, int32_t r, walk_states *w)
{
    mp_op_list l = {0};
    mp_error err;
    w->n = 0;
    if (mp_schedule_build(s, p, v, m, r, &l, &err) != MP_OK) {
        mp_op_list_free(&l);
        return false;
    }
    /* the simulator's count (sim/engine.c): a chunk's activations from its
     * F to the op that ends its backward (its W), its held output gradients
     * from a B to a W that does not follow it at once */
    int32_t c[4] = {0, 0, 0, 0};
    for (int32_t i = 0; i < l.n; i++) {
        const mp_op *o = &l.ops[i];
        if (o->chunk < 0 || o->chunk > 1)
            continue;
        if (o->kind == MP_OP_F)
            c[o->chunk]++;
        else if (o->kind == MP_OP_B && !mp_op_list_bw_adjacent(&l, i, +1))
            c[2 + o->chunk]++;
        else if (o->kind == MP_OP_W) {
            c[o->chunk]--;
            if (!mp_op_list_bw_adjacent(&l, i, -1))
                c[2 + o->chunk]--;
        } else
            continue;
        keep_state(w, c);
    }
    mp_op_list_free(&l);
    return w->n >= 0;
}

enum { WALK_SETS = 2048, WALK_WAYS = 2 };
typedef struct walk_cache {
    walk_states e[WALK_SETS][WALK_WAYS];
    unsigned char used[WALK_SETS][WALK_WAYS], victim[WALK_SETS];
} walk_cache;

static mp_thread_block walk_block = MP_THREAD_BLOCK(free);

/* this thread's table, allocated on its first use; NULL without memory */
static walk_cache *walk_cache_of_thread(void)
{
    return mp_thread_block_get(&walk_block, sizeof(walk_cache));
}

double mp_pipeline_stash_peak(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, int64_t r,
                              const double *act, const double *hold, double *at_peak)
{
    v = mp_schedule_chunks(s, v);
    if (v > 2 || p < 1 || m < 1 || r < 0 || r >= p || p > INT32_MAX || m > INT32_MAX / v)
        return -1.0;
    /* search asks the same (p, m, r) for many candidates: the states per
     * thread, in a direct-mapped table of two-entry sets. A search's
     * candidates cycle through every rank of every (p, m) they try: with pp 32
     * and DualPipe(V) that is thousands of keys, which a short list keyed in
     * arrival order thrashed (the walk then took a third of the search). The
     * table (3 MiB) is allocated by the first call on each thread, not as
     * static thread-local storage, which every thread of every program
     * (exec's MPI and BLAS threads too) would carry; freed at thread exit. */
    walk_cache *cache = walk_cache_of_thread();
    walk_states local;
    int32_t key[5] = {(int32_t)s, (int32_t)p, (int32_t)v, (int32_t)m, (int32_t)r};
    walk_states *w = NULL;
    if (!cache) { /* no memory for the table: walk without it */
        w = &local;
        if (!walk(s, key[1], key[2], key[3], key[4], w))
            return -1.0;
    } else {
        uint32_t h = 2166136261u; /* FNV-1a over the key's values */
        for (int i = 0; i < 5; i++)
            h = (h ^ (uint32_t)key[i]) * 16777619u;
        uint32_t set = h % WALK_SETS;
        for (int i = 0; i < WALK_WAYS && !w; i++)
            if (cache->used[set][i] && !memcmp(cache->e[set][i].key, key, sizeof key))
                w = &cache->e[set][i];
        if (!w) {
            int way = cache->victim[set];
            cache->victim[set] = (unsigned char)((way + 1) % WALK_WAYS);
            w = &cache->e[set][way];
            cache->used[set][way] = 1;
            memcpy(w->key, key, sizeof key);
            if (!walk(s, key[1], key[2], key[3], key[4], w)) {
                w->n = -1;
                return -1.0;
            }
        }
    }
    if (w->n < 0)
        return -1.0;
    double peak = 0.0;
    if (at_peak)
        at_peak[0] = at_peak[1] = 0.0;
    for (int i = 0; i < w->n; i++) {
        const int32_t *c = w->st[i];
        double b = c[0] * act[0] + c[1] * act[1] + c[2] * hold[0] + c[3] * hold[1];
        if (b > peak) {
            peak = b;
            if (at_peak)
                at_peak[0] = c[0], at_peak[1] = c[1];
        }
    }
    return peak;
}

bool mp_pipeline_w_under_inflight(mp_schedule_kind s)
{
    return mp_schedule_w_under_inflight(s);
}
