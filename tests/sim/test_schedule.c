/* Property tests of the schedules over every valid p <= 8, v <= 4, m <= 32:
 * each (micro-batch, chunk) computed once in the right order, the transfer
 * convention around it, every send matched by one receive, in-flight
 * micro-batches within the schedule's bound, no deadlock under blocking
 * receives and non-blocking sends (checked here by a tiny independent
 * executor, not by the engine). The V schedules (zb-v, dualpipev: two chunks
 * per rank, rank r holding stages r and 2p-1-r) are held to the same
 * properties, and their p2p messages counted; so is dualpipe (two directions,
 * rank r holding stage r of the forward one and p-1-r of the reverse one,
 * each direction half the micro-batches), for every even p <= 8 and even
 * m >= 2p it accepts. DualPipe(V) are also held op for op to DeepSeek's
 * reference (a fixture) and run under its batched, synchronous transfers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/schedule.h"

#define MAXP 8
#define MAXV 4
#define MAXM 32

typedef struct sched {
    mp_schedule_kind kind;
    int32_t p, v, m;
    bool overlap; /* built with overlap_p2p (mp_schedule_opts) */
    mp_op_list lists[MAXP];
} sched;

/* what build() asks for: Megatron's overlapped p2p or not (the default) */
static bool overlap_p2p;

/* interleaved 1F1B's lists in Megatron's synchronous batches */
static bool batched(const sched *s)
{
    return mp_schedule_batched_p2p(s->kind, s->v, s->overlap);
}

static void sched_free(sched *s)
{
    for (int32_t r = 0; r < s->p; r++)
        mp_op_list_free(&s->lists[r]);
}

static void build(sched *s, mp_schedule_kind kind, int32_t p, int32_t v, int32_t m)
{
    memset(s, 0, sizeof *s);
    /* the lists of the schedule run: zb-h1 at pp 1 is 1f1b's (core/config.h) */
    s->kind = mp_schedule_run_as(kind, p);
    s->p = p;
    s->v = v;
    s->m = m;
    s->overlap = overlap_p2p;
    mp_schedule_opts o = {.overlap_p2p = overlap_p2p};
    for (int32_t r = 0; r < p; r++) {
        mp_error err;
        mp_error_clear(&err);
        mp_status st = mp_schedule_build_opts(kind, p, v, m, r, &o, &s->lists[r], &err);
        if (st != MP_OK)
            fail_msg("build %d p=%d v=%d m=%d r=%d: %s", (int)kind, (int)p, (int)v, (int)m,
                     (int)r, err.msg);
    }
}

/* Visits every valid (kind, p, v, m) of the property range. */
typedef void (*check_fn)(const sched *s);

static bool two_chunks(int kind)
{
    return mp_schedule_is_v(kind) || kind == MP_SCHED_DUALPIPE;
}

/* Whether (micro-batch, chunk) is computed on a rank: always, but for
 * dualpipe only in its micro-batch's direction (the first half forward). */
static bool runs(const sched *s, int32_t mb, int32_t chunk)
{
    return s->kind != MP_SCHED_DUALPIPE || (mb < s->m / 2) == (chunk == 0);
}

static void for_all(check_fn fn)
{
    for (int kind = 0; kind < MP_SCHED_COUNT; kind++)
        for (int32_t p = 1; p <= MAXP; p++)
            for (int32_t v = two_chunks(kind) ? 2 : 1;
                 v <= (kind == MP_SCHED_INTERLEAVED ? MAXV : two_chunks(kind) ? 2 : 1); v++)
                for (int32_t m = 1; m <= MAXM; m++) {
                    if (kind == MP_SCHED_INTERLEAVED && v > 1 && m % p != 0)
                        continue;
                    if (kind == MP_SCHED_DUALPIPEV && m < 2 * p)
                        continue;
                    if (kind == MP_SCHED_DUALPIPE && (p % 2 || m % 2 || m < 2 * p))
                        continue;
                    sched s;
                    build(&s, (mp_schedule_kind)kind, p, v, m);
                    fn(&s);
                    sched_free(&s);
                }
}

#define FAILS(s, r, ...)                                                                     \
    fail_msg("kind=%d p=%d v=%d m=%d rank=%d: %s", (int)(s)->kind, (int)(s)->p, (int)(s)->v, \
             (int)(s)->m, (int)(r), __VA_ARGS__)

/* Each F, B (and W where the backward is split) exactly once per
 * (micro-batch, chunk); F before B before W; W only in those schedules. */
static void check_once_and_order(const sched *s)
{
    for (int32_t r = 0; r < s->p; r++) {
        static int32_t pos[3][MAXM][MAXV];
        memset(pos, -1, sizeof pos);
        const mp_op_list *l = &s->lists[r];
        for (int32_t i = 0; i < l->n; i++) {
            const mp_op *op = &l->ops[i];
            if (op->microbatch < 0 || op->microbatch >= s->m || op->chunk < 0 ||
                op->chunk >= s->v)
                FAILS(s, r, "op index out of range");
            if (op->kind <= MP_OP_W) {
                if (pos[op->kind][op->microbatch][op->chunk] >= 0)
                    FAILS(s, r, "op repeated");
                pos[op->kind][op->microbatch][op->chunk] = i;
            }
        }
        for (int32_t mb = 0; mb < s->m; mb++)
            for (int32_t c = 0; c < s->v; c++) {
                int32_t f = pos[MP_OP_F][mb][c], b = pos[MP_OP_B][mb][c],
                        w = pos[MP_OP_W][mb][c];
                if (!runs(s, mb, c)) {
                    if (f >= 0 || b >= 0 || w >= 0)
                        FAILS(s, r, "a micro-batch computed in the other direction");
                    continue;
                }
                if (f < 0 || b < 0)
                    FAILS(s, r, "missing F or B");
                if (f > b)
                    FAILS(s, r, "B before its F");
                if (mp_schedule_splits_backward(s->kind)) {
                    if (w < 0 || w < b)
                        FAILS(s, r, "W missing or before its B");
                } else if (w >= 0) {
                    FAILS(s, r, "W outside ZB-H1");
                }
            }
    }
}

/* DualPipeV and DualPipe (dualpipev.py's commits, schedule.c), and
 * interleaved 1F1B's synchronous batches: a transfer
 * may stand ops away from its F or B, but each receive comes after the op
 * that took the previous one of its kind and chunk and before its own op,
 * and each send after its op and before the next op of that kind and chunk
 * (the executor keeps one receive buffer and one input gradient per chunk);
 * none at the pipeline's ends; in each run of transfers the sends come
 * before the receives (a commit posts its sends, then waits). */
static void check_fb_convention(const sched *s)
{
    int32_t last = (int32_t)mp_schedule_n_stages(s->kind, s->p, s->v) - 1;
    for (int32_t r = 0; r < s->p; r++) {
        const mp_op_list *l = &s->lists[r];
        /* per (F or B, chunk): the micro-batch received and not yet used,
         * and the one computed and not yet sent; -1 none */
        int32_t got[2][MAXV], owed[2][MAXV];
        memset(got, -1, sizeof got);
        memset(owed, -1, sizeof owed);
        bool run_recv = false;
        for (int32_t i = 0; i < l->n; i++) {
            const mp_op *op = &l->ops[i];
            int32_t k = (int32_t)mp_schedule_stage(s->kind, s->p, r, op->chunk), c = op->chunk;
            switch ((mp_op_kind)op->kind) {
            case MP_OP_F:
            case MP_OP_B: {
                int d = op->kind == MP_OP_B;
                bool in = d ? k < last : k > 0, out = d ? k > 0 : k < last;
                if (owed[d][c] >= 0)
                    FAILS(s, r, "a send after the next op of its kind and chunk");
                if (in != (got[d][c] == op->microbatch))
                    FAILS(s, r, "an F or B without its receive before it");
                got[d][c] = -1;
                owed[d][c] = out ? op->microbatch : -1;
                run_recv = false;
                break;
            }
            case MP_OP_W: run_recv = false; break;
            case MP_OP_RECV_FWD:
            case MP_OP_RECV_BWD: {
                int d = op->kind == MP_OP_RECV_BWD;
                if (got[d][c] >= 0)
                    FAILS(s, r, "a receive before the previous one's op");
                got[d][c] = op->microbatch;
                run_recv = true;
                break;
            }
            default: {
                int d = op->kind == MP_OP_SEND_BWD;
                if (run_recv)
                    FAILS(s, r, "a send after a receive of the same commit");
                if (owed[d][c] != op->microbatch)
                    FAILS(s, r, "a send before its op");
                owed[d][c] = -1;
                break;
            }
            }
        }
        for (int d = 0; d < 2; d++)
            for (int c = 0; c < s->v; c++)
                if (got[d][c] >= 0 || owed[d][c] >= 0)
                    FAILS(s, r, "a transfer left at the end");
    }
}

/* RECV_FWD right before F, SEND_FWD right after; RECV_BWD right before B,
 * SEND_BWD right after; none at the pipeline's ends; nothing else around. */
static void check_megatron_batches(const sched *s);

static void check_transfer_convention(const sched *s)
{
    if (s->kind == MP_SCHED_DUALPIPEV || s->kind == MP_SCHED_DUALPIPE) {
        check_fb_convention(s);
        return;
    }
    if (batched(s)) {
        check_fb_convention(s);
        check_megatron_batches(s);
        return;
    }
    int32_t last = s->p * s->v - 1;
    for (int32_t r = 0; r < s->p; r++) {
        const mp_op_list *l = &s->lists[r];
        int32_t transfers = 0, expected = 0;
        for (int32_t i = 0; i < l->n; i++) {
            const mp_op *op = &l->ops[i];
            int32_t k = (int32_t)mp_schedule_stage(s->kind, s->p, r, op->chunk);
            const mp_op *prev = i > 0 ? &l->ops[i - 1] : NULL;
            const mp_op *next = i + 1 < l->n ? &l->ops[i + 1] : NULL;
            bool same_prev = prev && prev->microbatch == op->microbatch && prev->chunk == op->chunk;
            bool same_next = next && next->microbatch == op->microbatch && next->chunk == op->chunk;
            switch ((mp_op_kind)op->kind) {
            case MP_OP_F:
                expected += (k > 0) + (k < last);
                if ((k > 0) != (same_prev && prev->kind == MP_OP_RECV_FWD))
                    FAILS(s, r, "RECV_FWD not right before F");
                if ((k < last) != (same_next && next->kind == MP_OP_SEND_FWD))
                    FAILS(s, r, "SEND_FWD not right after F");
                break;
            case MP_OP_B:
                expected += (k > 0) + (k < last);
                if ((k < last) != (same_prev && prev->kind == MP_OP_RECV_BWD))
                    FAILS(s, r, "RECV_BWD not right before B");
                if ((k > 0) != (same_next && next->kind == MP_OP_SEND_BWD))
                    FAILS(s, r, "SEND_BWD not right after B");
                break;
            case MP_OP_W: break;
            default: transfers++; break;
            }
        }
        if (transfers != expected)
            FAILS(s, r, "stray transfer ops");
    }
}

/* Interleaved 1F1B without overlap_p2p, restated from Megatron-Core
 * (schedules.py, forward_backward_pipelining_with_interleaving, Megatron-LM
 * d98e8a64): the run of transfers after each compute op holds exactly the
 * messages Megatron's p2p call after it moves. Warm-up F k (k < w, w =
 * 2(p-r-1) + (v-1)p capped at mv): its output, the next F's input, and on
 * the last one the first B's gradient (send_forward_recv_forward; lines
 * 1633-1658). Steady state: nothing between F(w+k) and B(k); after B(k)
 * both outputs and both next inputs (send_forward_backward_recv_forward_
 * backward, lines 1900-1944). Cool-down B k: its gradient out, the next
 * B's in (send_backward_recv_backward, line 2053). Plus the first F's input
 * before anything. Nothing at the pipeline's ends. */
typedef struct want_set {
    mp_op op[6];
    int n;
} want_set;

static void want(want_set *w, const sched *s, int32_t r, mp_op_kind kind, const mp_op *of)
{
    int32_t last = s->p * s->v - 1;
    int32_t k = (int32_t)mp_schedule_stage(s->kind, s->p, r, of->chunk);
    bool ok = kind == MP_OP_SEND_FWD || kind == MP_OP_RECV_BWD ? k < last : k > 0;
    if (ok)
        w->op[w->n++] = (mp_op){.kind = (uint8_t)kind, .microbatch = of->microbatch,
                                .chunk = of->chunk};
}

/* what fails, NULL if nothing; *at the rank */
static const char *megatron_batches_fail(const sched *s, int32_t *at)
{
    for (int32_t r = 0; r < s->p; r++) {
        *at = r;
        const mp_op_list *l = &s->lists[r];
        int32_t total = s->m * s->v, w = (s->p - r - 1) * 2 + (s->v - 1) * s->p;
        if (w > total)
            w = total;
        mp_op fs[MAXM * MAXV], bs[MAXM * MAXV];
        int32_t nf = 0, nb = 0;
        for (int32_t i = 0; i < l->n; i++) {
            if (l->ops[i].kind == MP_OP_F)
                fs[nf++] = l->ops[i];
            else if (l->ops[i].kind == MP_OP_B)
                bs[nb++] = l->ops[i];
        }
        if (nf != total || nb != total)
            return "not m*v forwards and backwards";
        int32_t i = 0, f = 0, b = 0; /* computed so far */
        for (;;) {
            want_set ws = {.n = 0};
            if (f == 0 && b == 0) {
                want(&ws, s, r, MP_OP_RECV_FWD, &fs[0]);
            } else if (l->ops[i - 1].kind == MP_OP_F && f <= w) { /* warm-up F f-1 */
                want(&ws, s, r, MP_OP_SEND_FWD, &fs[f - 1]);
                if (f < total)
                    want(&ws, s, r, MP_OP_RECV_FWD, &fs[f]);
                if (f == w)
                    want(&ws, s, r, MP_OP_RECV_BWD, &bs[0]);
            } else if (l->ops[i - 1].kind == MP_OP_B && b <= total - w) { /* steady B b-1 */
                want(&ws, s, r, MP_OP_SEND_FWD, &fs[f - 1]);
                want(&ws, s, r, MP_OP_SEND_BWD, &bs[b - 1]);
                if (f < total)
                    want(&ws, s, r, MP_OP_RECV_FWD, &fs[f]);
                want(&ws, s, r, MP_OP_RECV_BWD, &bs[b]);
            } else if (l->ops[i - 1].kind == MP_OP_B) { /* cool-down */
                want(&ws, s, r, MP_OP_SEND_BWD, &bs[b - 1]);
                if (b < total)
                    want(&ws, s, r, MP_OP_RECV_BWD, &bs[b]);
            }
            /* the run of transfers from i: the same set */
            int32_t n = 0;
            for (; i < l->n && l->ops[i].kind > MP_OP_W; i++, n++) {
                bool found = false;
                for (int j = 0; j < ws.n && !found; j++)
                    if (ws.op[j].kind == l->ops[i].kind &&
                        ws.op[j].microbatch == l->ops[i].microbatch &&
                        ws.op[j].chunk == l->ops[i].chunk) {
                        ws.op[j].kind = 0xff;
                        found = true;
                    }
                if (!found)
                    return "a transfer outside Megatron's batch";
            }
            if (n != ws.n)
                return "a batch short of Megatron's transfers";
            if (i == l->n)
                break;
            if (l->ops[i].kind == MP_OP_F)
                f++;
            else
                b++;
            i++;
        }
    }
    return NULL;
}

static void check_megatron_batches(const sched *s)
{
    int32_t r = -1;
    const char *why = megatron_batches_fail(s, &r);
    if (why)
        FAILS(s, r, why);
}

/* Every send matched by exactly one receive on the peer, with the same
 * message id (the MPI tag), and vice versa. */
static void check_send_recv_matching(const sched *s)
{
    /* count[src][dst][id]: +1 per send, -1 per receive */
    int32_t ids = 2 * s->v * s->m;
    int32_t *count = calloc((size_t)s->p * s->p * ids, sizeof *count);
    assert_non_null(count);
    for (int32_t r = 0; r < s->p; r++) {
        const mp_op_list *l = &s->lists[r];
        for (int32_t i = 0; i < l->n; i++) {
            const mp_op *op = &l->ops[i];
            int32_t peer, peer_chunk;
            if (op->kind <= MP_OP_W) {
                if (mp_op_peer(s->kind, s->p, s->v, r, op, &peer, &peer_chunk) ||
                    mp_op_message_id(s->kind, s->p, s->v, s->m, r, op) != -1)
                    FAILS(s, r, "compute op with a peer");
                continue;
            }
            if (!mp_op_peer(s->kind, s->p, s->v, r, op, &peer, &peer_chunk))
                FAILS(s, r, "transfer without a peer");
            int32_t id = mp_op_message_id(s->kind, s->p, s->v, s->m, r, op);
            if (id < 0 || id >= ids)
                FAILS(s, r, "message id out of range");
            bool send = op->kind == MP_OP_SEND_FWD || op->kind == MP_OP_SEND_BWD;
            int32_t src = send ? r : peer, dst = send ? peer : r;
            count[((size_t)src * s->p + dst) * ids + id] += send ? 1 : -1;
            /* A forward message goes to the next virtual stage. */
            int32_t k = (int32_t)mp_schedule_stage(s->kind, s->p, r, op->chunk),
                    kp = (int32_t)mp_schedule_stage(s->kind, s->p, peer, peer_chunk);
            bool toward_next = op->kind == MP_OP_SEND_FWD || op->kind == MP_OP_RECV_BWD;
            if (kp != (toward_next ? k + 1 : k - 1))
                FAILS(s, r, "peer is not the neighbouring virtual stage");
            /* dualpipe: a message stays in its direction, one rank along it
             * (up for the forward direction's activations) */
            if (s->kind == MP_SCHED_DUALPIPE &&
                (peer_chunk != op->chunk ||
                 peer != r + ((toward_next == (op->chunk == 0)) ? 1 : -1)))
                FAILS(s, r, "dualpipe peer outside the message's direction");
        }
    }
    for (size_t i = 0; i < (size_t)s->p * s->p * ids; i++)
        if (count[i] != 0) {
            free(count);
            FAILS(s, -1, "unmatched send or receive");
        }
    free(count);
}

/* In-flight (F done, B -- W for ZB-H1 -- not yet) never above the schedule's
 * bound, and the bound is reached (it is the schedule's memory, not a loose
 * upper limit). The bounds are restated here from the papers. */
static int32_t expected_bound(const sched *s, int32_t r)
{
    int32_t p = s->p, v = s->v, m = s->m;
    switch (s->kind) {
    case MP_SCHED_GPIPE: return m;
    case MP_SCHED_1F1B: return p - r < m ? p - r : m;
    case MP_SCHED_ZBH1: return p < m ? p : m;
    /* ZB-V: 2p chunk activations, half a stage each: 1F1B's p micro-batches */
    case MP_SCHED_ZBV: return 2 * p < 2 * m ? 2 * p : 2 * m;
    /* DualPipeV: "PP + 1" stages' activations (deepseek-ai/DualPipe README) */
    case MP_SCHED_DUALPIPEV: return 2 * p + 1 < 2 * m ? 2 * p + 1 : 2 * m;
    /* DualPipe: "PP + 1" whole-stage activations (DeepSeek-V3 report, Table 2) */
    case MP_SCHED_DUALPIPE: return p + 1 < m ? p + 1 : m;
    default:
        if (v == 1)
            return p - r < m ? p - r : m;
        {
            /* Megatron: warm-up (p - r - 1)*2 + (v - 1)*p, capped at m*v, plus one. */
            int32_t w = (p - r - 1) * 2 + (v - 1) * p;
            if (w > m * v)
                w = m * v;
            return w + 1 < m * v ? w + 1 : m * v;
        }
    }
}

static void check_inflight(const sched *s)
{
    for (int32_t r = 0; r < s->p; r++) {
        const mp_op_list *l = &s->lists[r];
        int32_t live = 0, peak = 0;
        mp_op_kind release = mp_schedule_splits_backward(s->kind) ? MP_OP_W : MP_OP_B;
        for (int32_t i = 0; i < l->n; i++) {
            if (l->ops[i].kind == MP_OP_F && ++live > peak)
                peak = live;
            if (l->ops[i].kind == release)
                live--;
        }
        int32_t bound = expected_bound(s, r);
        /* the V schedules' bound is their first rank's, dualpipe's its two
         * end ranks'; the others hold less */
        bool end_rank = r == 0 || (s->kind == MP_SCHED_DUALPIPE && r == s->p - 1);
        if (two_chunks(s->kind) && !end_rank && peak <= bound)
            peak = bound;
        if (peak != bound) {
            char msg[96];
            snprintf(msg, sizeof msg, "peak in-flight %d, schedule bound %d", (int)peak,
                     (int)bound);
            FAILS(s, r, msg);
        }
        if (mp_schedule_inflight_bound(s->kind, s->p, s->v, s->m, r) != bound)
            FAILS(s, r, "mp_schedule_inflight_bound disagrees");
        if ((s->kind == MP_SCHED_1F1B || s->kind == MP_SCHED_ZBH1) && peak > s->p)
            FAILS(s, r, "more than p in flight");
    }
}

/* Ws waiting with their output gradients (B done, W not yet, not run at
 * once after its B): never more than mp_schedule_w_pending_bound, which
 * ZB-H1 reaches on every rank but the first when m >= p; and for DualPipe(V) never more
 * than the in-flight bound together with the chunks in flight. */
static void check_w_pending(const sched *s)
{
    for (int32_t r = 0; r < s->p; r++) {
        const mp_op_list *l = &s->lists[r];
        int32_t live = 0, wait = 0, peak_wait = 0, peak_sum = 0;
        bool split = mp_schedule_splits_backward(s->kind);
        for (int32_t i = 0; i < l->n; i++) {
            const mp_op *o = &l->ops[i];
            if (o->kind == MP_OP_F)
                live++;
            if (split && o->kind == MP_OP_B && !mp_op_list_bw_adjacent(l, i, +1))
                wait++;
            if (wait > peak_wait)
                peak_wait = wait;
            if (live + wait > peak_sum)
                peak_sum = live + wait;
            if (o->kind == (split ? MP_OP_W : MP_OP_B))
                live--;
            if (split && o->kind == MP_OP_W && !mp_op_list_bw_adjacent(l, i, -1))
                wait--;
        }
        int32_t bound = mp_schedule_w_pending_bound(s->kind, s->p, s->v, s->m, r);
        if (peak_wait > bound)
            FAILS(s, r, "more Ws waiting than mp_schedule_w_pending_bound");
        if (s->kind == MP_SCHED_ZBH1 && r > 0 && s->m >= s->p && peak_wait != bound)
            FAILS(s, r, "ZB-H1's bound is not reached");
        if (!split && bound != 0)
            FAILS(s, r, "a W bound without split backward");
        if (mp_schedule_w_under_inflight(s->kind) &&
            peak_sum > mp_schedule_inflight_bound(s->kind, s->p, s->v, s->m, r))
            FAILS(s, r, "Ws waiting above DualPipe's in-flight bound");
    }
}

/* Runs all ranks with blocking receives and non-blocking (buffered) sends,
 * round-robin, until done or no rank can move: exactly the executor's
 * semantics. */
static bool runs_without_deadlock(const sched *s)
{
    int32_t ids = 2 * s->v * s->m;
    size_t slots = (size_t)s->p * s->p * ids;
    int32_t *sent = calloc(slots, sizeof *sent);
    int32_t pc[MAXP] = {0};
    assert_non_null(sent);
    bool progress = true, done = false;
    while (progress && !done) {
        progress = false;
        done = true;
        for (int32_t r = 0; r < s->p; r++) {
            const mp_op_list *l = &s->lists[r];
            while (pc[r] < l->n) {
                const mp_op *op = &l->ops[pc[r]];
                int32_t peer, peer_chunk;
                if (op->kind >= MP_OP_SEND_FWD) {
                    mp_op_peer(s->kind, s->p, s->v, r, op, &peer, &peer_chunk);
                    int32_t id = mp_op_message_id(s->kind, s->p, s->v, s->m, r, op);
                    bool send = op->kind == MP_OP_SEND_FWD || op->kind == MP_OP_SEND_BWD;
                    if (send) {
                        sent[((size_t)r * s->p + peer) * ids + id]++;
                    } else {
                        int32_t *slot = &sent[((size_t)peer * s->p + r) * ids + id];
                        if (*slot == 0)
                            break; /* blocked on this receive */
                        (*slot)--;
                    }
                }
                pc[r]++;
                progress = true;
            }
            if (pc[r] < l->n)
                done = false;
        }
    }
    free(sent);
    return done;
}

static void check_no_deadlock(const sched *s)
{
    if (!runs_without_deadlock(s))
        FAILS(s, -1, "deadlock under blocking receives");
}

/* Transfer op of rank r: its slot (source, destination, message id) among
 * p * p * 2vm, its peer and whether it sends; false for a hand-over to itself. */
static bool message_slot(const sched *s, int32_t r, const mp_op *op, size_t *k, int32_t *peer,
                         bool *send)
{
    int32_t pc;
    mp_op_peer(s->kind, s->p, s->v, r, op, peer, &pc);
    if (*peer == r)
        return false;
    *send = op->kind == MP_OP_SEND_FWD || op->kind == MP_OP_SEND_BWD;
    int32_t src = *send ? r : *peer, dst = *send ? *peer : r;
    *k = ((size_t)src * s->p + dst) * (size_t)(2 * s->v * s->m) +
         (size_t)mp_op_message_id(s->kind, s->p, s->v, s->m, r, op);
    return true;
}

/* DualPipe(V) as the reference runs it on NCCL (dualpipev.py: each
 * _commit_and_wait_comm posts its transfers with batch_isend_irecv and waits
 * for all of them, sends included): a commit -- a run of transfer ops --
 * completes once every peer has posted the commit that holds the other side
 * of each of its messages; and between two ranks the messages are received
 * in the order they are sent (NCCL matches a pair's sends and receives in
 * order, without tags). Rank p-1's hand-overs to itself are no messages in
 * dualpipev.py. Returns what fails, or NULL. */
static const char *commits_fail(const sched *s)
{
    int32_t p = s->p, ids = 2 * s->v * s->m;
    size_t slots = (size_t)p * p * ids;
    int32_t *at[2] = {malloc(slots * sizeof(int32_t)), malloc(slots * sizeof(int32_t))};
    int32_t *commit[MAXP], seq_s[MAXP][MAXP], seq_r[MAXP][MAXP];
    int32_t *order[2] = {calloc(slots, sizeof(int32_t)), calloc(slots, sizeof(int32_t))};
    assert_true(at[0] && at[1] && order[0] && order[1]);
    memset(seq_s, 0, sizeof seq_s);
    memset(seq_r, 0, sizeof seq_r);
    const char *why = NULL;
    for (int32_t r = 0; r < p; r++) { /* each transfer's commit, per side */
        const mp_op_list *l = &s->lists[r];
        assert_non_null(commit[r] = malloc(sizeof(int32_t) * (size_t)(l->n + 1)));
        int32_t c = -1;
        for (int32_t i = 0; i < l->n; i++) {
            const mp_op *op = &l->ops[i];
            int32_t peer;
            if (op->kind <= MP_OP_W) {
                commit[r][i] = -1;
                continue;
            }
            if (i == 0 || l->ops[i - 1].kind <= MP_OP_W)
                c++;
            commit[r][i] = c;
            size_t k;
            bool send;
            if (!message_slot(s, r, op, &k, &peer, &send))
                continue;
            at[send][k] = c;
            /* the n-th message of the pair on both sides */
            order[send][k] = send ? seq_s[r][peer]++ : seq_r[peer][r]++;
        }
    }
    for (size_t k = 0; k < slots && !why; k++)
        if (order[0][k] != order[1][k])
            why = "a pair's messages received out of their sending order";
    int32_t pos[MAXP] = {0}, reached[MAXP];
    for (int32_t r = 0; r < p; r++)
        reached[r] = -1;
    bool progress = true, done = false;
    while (!why && progress && !done) {
        progress = false;
        done = true;
        for (int32_t r = 0; r < p; r++) {
            const mp_op_list *l = &s->lists[r];
            while (pos[r] < l->n) {
                if (l->ops[pos[r]].kind <= MP_OP_W) {
                    pos[r]++;
                    progress = true;
                    continue;
                }
                int32_t c = commit[r][pos[r]], end = pos[r];
                if (reached[r] < c)
                    progress = true;
                reached[r] = c;
                bool ready = true;
                for (; end < l->n && l->ops[end].kind > MP_OP_W && ready; end++) {
                    size_t k;
                    int32_t peer;
                    bool send;
                    if (message_slot(s, r, &l->ops[end], &k, &peer, &send))
                        ready = reached[peer] >= at[!send][k];
                }
                if (!ready)
                    break;
                pos[r] = end;
                progress = true;
            }
            if (pos[r] < l->n)
                done = false;
        }
    }
    if (!why && !done)
        why = "deadlock with the reference's batched transfers";
    for (int32_t r = 0; r < p; r++)
        free(commit[r]);
    free(at[0]);
    free(at[1]);
    free(order[0]);
    free(order[1]);
    return why;
}

/* DualPipe(V)'s commits, and interleaved 1F1B's synchronous batches, which
 * Megatron-Core posts as NCCL batches too (p2p_communication.py
 * _batched_p2p_ops; test_interleaved_batches_nccl) */
static void check_commits(const sched *s)
{
    const char *why;
    if ((s->kind == MP_SCHED_DUALPIPEV || s->kind == MP_SCHED_DUALPIPE || batched(s)) &&
        (why = commits_fail(s)) != NULL)
        FAILS(s, -1, why);
}

static void test_dualpipe_commits(void **state)
{
    (void)state;
    for_all(check_commits);
    /* the check can fail: two ranks that each send first and receive in a
     * later commit run with buffered sends, not with the reference's */
    sched s;
    build(&s, MP_SCHED_1F1B, 2, 1, 2);
    static const mp_op cross[2][5] = {
        {{.kind = MP_OP_F}, {.kind = MP_OP_SEND_FWD}, {.kind = MP_OP_F, .microbatch = 1},
         {.kind = MP_OP_RECV_BWD}, {.kind = MP_OP_B}},
        {{.kind = MP_OP_B}, {.kind = MP_OP_SEND_BWD}, {.kind = MP_OP_F, .microbatch = 1},
         {.kind = MP_OP_RECV_FWD}, {.kind = MP_OP_F}}};
    for (int r = 0; r < 2; r++) {
        memcpy(s.lists[r].ops, cross[r], sizeof cross[r]);
        s.lists[r].n = 5;
    }
    assert_true(runs_without_deadlock(&s));
    const char *why = commits_fail(&s);
    assert_non_null(why);
    assert_non_null(strstr(why, "deadlock"));
    sched_free(&s);
    /* and so can the order: rank 0's first two activations sent swapped */
    build(&s, MP_SCHED_DUALPIPEV, 2, 2, 4);
    mp_op_list *l = &s.lists[0];
    int32_t a = 0, b;
    while (l->ops[a].kind != MP_OP_SEND_FWD)
        a++;
    for (b = a + 1; l->ops[b].kind != MP_OP_SEND_FWD; b++)
        ;
    mp_op swap = l->ops[a];
    l->ops[a] = l->ops[b];
    l->ops[b] = swap;
    why = commits_fail(&s);
    assert_non_null(why);
    assert_non_null(strstr(why, "order"));
    sched_free(&s);
}

/* Interleaved 1F1B's batches under NCCL's semantics (commits_fail): every
 * case of the property range runs to the end (test_dualpipe_commits), p = 2
 * too, because each batch of the lists sends and receives the activation
 * before the gradient. Megatron-Core's own batch puts the previous rank's
 * transfers first (p2p_communication.py _batched_p2p_ops: send_prev,
 * recv_prev, send_next, recv_next): at p = 2, where both neighbours are one
 * rank, the gradient is then sent before the activation that the other
 * side receives first, out of order for NCCL, which matches a pair's
 * messages in order -- why Megatron-LM asks for pp > 2 without
 * --overlap-p2p-communication (arguments.py). Shown here by putting one
 * steady-state batch's gradient first. */
static void test_interleaved_batches_nccl(void **state)
{
    (void)state;
    sched s;
    build(&s, MP_SCHED_INTERLEAVED, 2, 2, 4);
    assert_true(runs_without_deadlock(&s));
    assert_null(commits_fail(&s));
    mp_op_list *l = &s.lists[0];
    int32_t i = 0;
    while (!(l->ops[i].kind == MP_OP_SEND_FWD && l->ops[i + 1].kind == MP_OP_SEND_BWD))
        i++;
    mp_op t = l->ops[i];
    l->ops[i] = l->ops[i + 1];
    l->ops[i + 1] = t;
    assert_true(runs_without_deadlock(&s)); /* tagged MPI does not mind */
    const char *why = commits_fail(&s);
    assert_non_null(why);
    assert_non_null(strstr(why, "order"));
    sched_free(&s);
}

static void test_once_and_order(void **state)
{
    (void)state;
    for_all(check_once_and_order);
}

static void test_transfer_convention(void **state)
{
    (void)state;
    for_all(check_transfer_convention);
}

/* Messages between different ranks: the V's turn at rank p-1 stays local,
 * so a V schedule sends 4(p-1)m, twice 1F1B's 2(p-1)m. */
static void check_p2p_count(const sched *s)
{
    int64_t n = 0;
    for (int32_t r = 0; r < s->p; r++)
        for (int32_t i = 0; i < s->lists[r].n; i++) {
            const mp_op *op = &s->lists[r].ops[i];
            int32_t peer, peer_chunk;
            if ((op->kind == MP_OP_SEND_FWD || op->kind == MP_OP_SEND_BWD) &&
                mp_op_peer(s->kind, s->p, s->v, r, op, &peer, &peer_chunk) && peer != r)
                n++;
        }
    if (n != mp_schedule_p2p_messages(s->kind, s->p, s->v, s->m))
        FAILS(s, -1, "p2p message count differs from mp_schedule_p2p_messages");
    if (mp_schedule_is_v(s->kind) && n != 2 * mp_schedule_p2p_messages(MP_SCHED_1F1B, s->p, 1, s->m))
        FAILS(s, -1, "a V schedule does not send twice 1F1B's messages");
    /* dualpipe: each micro-batch crosses p-1 boundaries, one way or the other */
    if (s->kind == MP_SCHED_DUALPIPE && n != mp_schedule_p2p_messages(MP_SCHED_1F1B, s->p, 1, s->m))
        FAILS(s, -1, "dualpipe does not send 1F1B's messages");
}

static void test_p2p_count(void **state)
{
    (void)state;
    for_all(check_p2p_count);
}

static void test_send_recv_matching(void **state)
{
    (void)state;
    for_all(check_send_recv_matching);
}

static void test_inflight_bound(void **state)
{
    (void)state;
    for_all(check_inflight);
}

static void test_w_pending_bound(void **state)
{
    (void)state;
    for_all(check_w_pending);
}

static void test_no_deadlock(void **state)
{
    (void)state;
    for_all(check_no_deadlock);
}

/* The deadlock checker itself must catch a deadlock: two ranks that each
 * receive before sending. */
/* ZB-V's order built from real, uneven op times (sim/schedule_vorder.c):
 * random F, B, W per stage and link times, and the shape of a real model
 * (rank 0 holding the embedding and a heavy head): every property above
 * holds, the in-flight count stays within the unit-time bound, and one
 * rank's list is the same as the all-ranks build's. */
static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

static double uniform_in(uint64_t *x, double lo, double hi)
{
    return lo + (hi - lo) * (double)(lcg(x) % 1000000) / 1e6;
}

static void test_zbv_real_times(void **state)
{
    (void)state;
    uint64_t x = 14;
    double f[2 * MAXP], b[2 * MAXP], w[2 * MAXP], link[2 * MAXP];
    for (int32_t p = 1; p <= MAXP; p++)
        for (int32_t m = 1; m <= MAXM; m++)
            for (int trial = 0; trial < 6; trial++) {
                for (int32_t k = 0; k < 2 * p; k++) {
                    f[k] = uniform_in(&x, 0.1, 3);
                    b[k] = trial == 5 ? 0 : uniform_in(&x, 0.1, 3);
                    w[k] = uniform_in(&x, 0, 3);
                    link[k] = trial % 2 ? uniform_in(&x, 0, 2) : 0;
                }
                if (trial >= 3) { /* rank 0: the embedding and a head 4x a block */
                    f[0] *= 1.2;
                    f[2 * p - 1] *= 4;
                    b[2 * p - 1] *= 4;
                    w[2 * p - 1] *= 4;
                }
                mp_op_times t = {.f = f, .b = b, .w = w, .link = link};
                sched s = {.kind = MP_SCHED_ZBV, .p = p, .v = 2, .m = m};
                mp_error err;
                mp_error_clear(&err);
                if (mp_schedule_build_all_timed(MP_SCHED_ZBV, p, 2, m, &t, s.lists, &err))
                    fail_msg("zb-v p=%d m=%d trial %d: %s", (int)p, (int)m, trial, err.msg);
                check_once_and_order(&s);
                check_fb_convention(&s);
                check_transfer_convention(&s);
                check_send_recv_matching(&s);
                check_no_deadlock(&s);
                int32_t bound = expected_bound(&s, 0);
                for (int32_t r = 0; r < p; r++) {
                    const mp_op_list *l = &s.lists[r];
                    int32_t live = 0;
                    for (int32_t i = 0; i < l->n; i++) {
                        live += l->ops[i].kind == MP_OP_F;
                        live -= l->ops[i].kind == MP_OP_W;
                        if (live > bound)
                            FAILS(&s, r, "more chunk activations than the unit-time bound");
                    }
                }
                int32_t r = (int32_t)(lcg(&x) % (uint64_t)p);
                mp_op_list one;
                assert_int_equal(
                    mp_schedule_build_timed(MP_SCHED_ZBV, p, 2, m, r, &t, &one, &err), MP_OK);
                assert_int_equal(one.n, s.lists[r].n);
                for (int32_t i = 0; i < one.n; i++) {
                    const mp_op *a = &one.ops[i], *c = &s.lists[r].ops[i];
                    if (a->kind != c->kind || a->microbatch != c->microbatch ||
                        a->chunk != c->chunk)
                        FAILS(&s, r, "one rank's list differs from the all-ranks build");
                }
                mp_op_list_free(&one);
                sched_free(&s);
            }
}

static void test_deadlock_checker_catches_deadlock(void **state)
{
    (void)state;
    sched s;
    build(&s, MP_SCHED_1F1B, 2, 1, 2);
    /* Rank 0: put its first backward receive before everything. */
    mp_op_list *l = &s.lists[0];
    mp_op first = l->ops[0];
    int32_t j = 0;
    while (l->ops[j].kind != MP_OP_RECV_BWD)
        j++;
    mp_op recv = l->ops[j];
    memmove(&l->ops[1], &l->ops[0], (size_t)j * sizeof *l->ops);
    l->ops[0] = recv;
    assert_int_equal(l->ops[1].kind, first.kind);
    assert_false(runs_without_deadlock(&s));
    sched_free(&s);
}

/* Megatron's interleaved order on p=2, v=2, m=4, rank 0, by hand:
 * warm-up (2-0-1)*2 + (2-1)*2 = 4 forwards: F0.0 F1.0 F0.1 F1.1, then
 * 1F1B pairs (F2.0 B0.1) (F3.0 B1.1) (F2.1 B0.0) (F3.1 B1.0), cool-down
 * B2.1 B3.1 B2.0 B3.0. */
static void test_interleaved_order_by_hand(void **state)
{
    (void)state;
    static const struct { uint8_t k; int32_t mb, c; } want[] = {
        {MP_OP_F, 0, 0}, {MP_OP_F, 1, 0}, {MP_OP_F, 0, 1}, {MP_OP_F, 1, 1},
        {MP_OP_F, 2, 0}, {MP_OP_B, 0, 1}, {MP_OP_F, 3, 0}, {MP_OP_B, 1, 1},
        {MP_OP_F, 2, 1}, {MP_OP_B, 0, 0}, {MP_OP_F, 3, 1}, {MP_OP_B, 1, 0},
        {MP_OP_B, 2, 1}, {MP_OP_B, 3, 1}, {MP_OP_B, 2, 0}, {MP_OP_B, 3, 0}};
    mp_op_list l;
    mp_error err;
    assert_int_equal(mp_schedule_build(MP_SCHED_INTERLEAVED, 2, 2, 4, 0, &l, &err), MP_OK);
    size_t j = 0;
    for (int32_t i = 0; i < l.n; i++) {
        if (l.ops[i].kind > MP_OP_W)
            continue;
        assert_true(j < sizeof want / sizeof want[0]);
        assert_int_equal(l.ops[i].kind, want[j].k);
        assert_int_equal(l.ops[i].microbatch, want[j].mb);
        assert_int_equal(l.ops[i].chunk, want[j].c);
        j++;
    }
    assert_int_equal(j, sizeof want / sizeof want[0]);
    mp_op_list_free(&l);
}

/* Megatron-Core's synchronous interleaved batches on p=3, v=2, m=3, rank 1,
 * by hand from schedules.py (forward_backward_pipelining_with_interleaving):
 * recv_forward; warm-up (3-1-1)*2 + (2-1)*3 = 5 forwards, each followed by
 * send_forward_recv_forward (its output out, the next input in), the last
 * also receiving B0.1's gradient; one steady-state iteration F2.1 B0.1
 * followed by send_forward_backward_recv_forward_backward: F2.1's output
 * goes out only after B0.1, with B0.1's gradient, and B1.1's comes in (no
 * forward left to receive); then the cool-down, each B's gradient out and
 * the next one's in. */
static void test_interleaved_batched_by_hand(void **state)
{
    (void)state;
    static const char want[] =
        "recv-fwd0.0 F0.0 send-fwd0.0 recv-fwd1.0 F1.0 send-fwd1.0 recv-fwd2.0 F2.0 "
        "send-fwd2.0 recv-fwd0.1 F0.1 send-fwd0.1 recv-fwd1.1 F1.1 send-fwd1.1 recv-fwd2.1 "
        "recv-bwd0.1 F2.1 B0.1 send-fwd2.1 send-bwd0.1 recv-bwd1.1 B1.1 send-bwd1.1 "
        "recv-bwd2.1 B2.1 send-bwd2.1 recv-bwd0.0 B0.0 send-bwd0.0 recv-bwd1.0 B1.0 "
        "send-bwd1.0 recv-bwd2.0 B2.0 send-bwd2.0";
    /* with --overlap-p2p-communication each transfer at its own op */
    static const char want_overlap[] =
        "recv-fwd0.0 F0.0 send-fwd0.0 recv-fwd1.0 F1.0 send-fwd1.0 recv-fwd2.0 F2.0 "
        "send-fwd2.0 recv-fwd0.1 F0.1 send-fwd0.1 recv-fwd1.1 F1.1 send-fwd1.1 recv-fwd2.1 "
        "F2.1 send-fwd2.1 recv-bwd0.1 B0.1 send-bwd0.1 recv-bwd1.1 B1.1 send-bwd1.1 "
        "recv-bwd2.1 B2.1 send-bwd2.1 recv-bwd0.0 B0.0 send-bwd0.0 recv-bwd1.0 B1.0 "
        "send-bwd1.0 recv-bwd2.0 B2.0 send-bwd2.0";
    for (int ov = 0; ov < 2; ov++) {
        mp_op_list l;
        mp_error err;
        mp_schedule_opts o = {.overlap_p2p = ov};
        assert_int_equal(mp_schedule_build_opts(MP_SCHED_INTERLEAVED, 3, 2, 3, 1, &o, &l, &err),
                         MP_OK);
        char got[1024] = "";
        for (int32_t i = 0; i < l.n; i++) {
            char one[32];
            snprintf(one, sizeof one, "%s%s%d.%d", got[0] ? " " : "",
                     mp_op_kind_name((mp_op_kind)l.ops[i].kind), (int)l.ops[i].microbatch,
                     (int)l.ops[i].chunk);
            strncat(got, one, sizeof got - strlen(got) - 1);
        }
        assert_string_equal(got, ov ? want_overlap : want);
        mp_op_list_free(&l);
    }
    /* the default build is the synchronous one */
    assert_true(mp_schedule_batched_p2p(MP_SCHED_INTERLEAVED, 2, false));
    assert_false(mp_schedule_batched_p2p(MP_SCHED_INTERLEAVED, 1, false));
    assert_false(mp_schedule_batched_p2p(MP_SCHED_INTERLEAVED, 2, true));
}

/* The batch check fails on lists whose transfers sit at their ops (the
 * lists megaplan ran for synchronous p2p before, Megatron's overlapped
 * order): a steady-state forward's output sent before its backward. */
static void test_batches_check_can_fail(void **state)
{
    (void)state;
    overlap_p2p = true;
    sched s;
    build(&s, MP_SCHED_INTERLEAVED, 4, 2, 8);
    overlap_p2p = false;
    s.overlap = false;
    int32_t r = -1;
    const char *why = megatron_batches_fail(&s, &r);
    assert_non_null(why);
    sched_free(&s);
}

/* With overlap_p2p the interleaved lists keep each transfer at its op, and
 * are deadlock-free and matched like the rest. */
static void test_overlap_lists(void **state)
{
    (void)state;
    overlap_p2p = true;
    for_all(check_transfer_convention);
    for_all(check_send_recv_matching);
    for_all(check_no_deadlock);
    for_all(check_once_and_order);
    overlap_p2p = false;
}

/* 1F1B on p=4, m=8, rank 1: 2 warm-up forwards, then F/B pairs. */
static void test_1f1b_order_by_hand(void **state)
{
    (void)state;
    static const char want[] = "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7";
    mp_op_list l;
    mp_error err;
    assert_int_equal(mp_schedule_build(MP_SCHED_1F1B, 4, 1, 8, 1, &l, &err), MP_OK);
    char got[128] = "";
    for (int32_t i = 0; i < l.n; i++)
        if (l.ops[i].kind <= MP_OP_W) {
            char one[16];
            snprintf(one, sizeof one, "%s%s%d", got[0] ? " " : "",
                     mp_op_kind_name((mp_op_kind)l.ops[i].kind), (int)l.ops[i].microbatch);
            strncat(got, one, sizeof got - strlen(got) - 1);
        }
    assert_string_equal(got, want);
    mp_op_list_free(&l);
}

/* ZB-H1 on p=4, m=6, last rank: Ws deferred by 3 micro-batches. */
static void test_zbh1_order_by_hand(void **state)
{
    (void)state;
    static const char want[] = "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5";
    mp_op_list l;
    mp_error err;
    assert_int_equal(mp_schedule_build(MP_SCHED_ZBH1, 4, 1, 6, 3, &l, &err), MP_OK);
    char got[160] = "";
    for (int32_t i = 0; i < l.n; i++)
        if (l.ops[i].kind <= MP_OP_W) {
            char one[16];
            snprintf(one, sizeof one, "%s%s%d", got[0] ? " " : "",
                     mp_op_kind_name((mp_op_kind)l.ops[i].kind), (int)l.ops[i].microbatch);
            strncat(got, one, sizeof got - strlen(got) - 1);
        }
    assert_string_equal(got, want);
    mp_op_list_free(&l);
}

static void expect_einput(mp_schedule_kind k, int32_t p, int32_t v, int32_t m, int32_t r,
                          const char *field)
{
    mp_op_list l;
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_schedule_build(k, p, v, m, r, &l, &err), MP_EINPUT);
    assert_int_equal(err.code, MP_EINPUT);
    assert_string_equal(err.field, field);
    assert_null(l.ops);
    assert_int_equal(mp_schedule_inflight_bound(k, p, v, m, r), -1);
}

static void test_invalid_inputs(void **state)
{
    (void)state;
    expect_einput(MP_SCHED_INTERLEAVED, 4, 2, 6, 0, "microbatches"); /* m % p != 0 */
    expect_einput(MP_SCHED_1F1B, 4, 2, 8, 0, "vpp");
    expect_einput(MP_SCHED_GPIPE, 4, 1, 8, 4, "rank");
    expect_einput(MP_SCHED_GPIPE, 4, 1, 8, -1, "rank");
    expect_einput(MP_SCHED_1F1B, 0, 1, 8, 0, "pp");
    expect_einput(MP_SCHED_1F1B, 4, 0, 8, 0, "vpp");
    expect_einput(MP_SCHED_1F1B, 4, 1, 0, 0, "microbatches");
    expect_einput(MP_SCHED_INTERLEAVED, 64, 32, 64, 0, "vpp"); /* > MP_MAX_STAGES */
    expect_einput(MP_SCHED_INTERLEAVED, 4, 4, 1 << 21, 0, "microbatches"); /* m*v absurd */
    expect_einput(MP_SCHED_1F1B, 4, 1, (1 << 22) + 1, 0, "microbatches");
    expect_einput((mp_schedule_kind)MP_SCHED_COUNT, 4, 1, 8, 0, "schedule");
    expect_einput(MP_SCHED_ZBV, 4, 1, 8, 0, "vpp");        /* the V has two chunks */
    expect_einput(MP_SCHED_DUALPIPEV, 4, 3, 8, 0, "vpp");
    expect_einput(MP_SCHED_DUALPIPEV, 4, 2, 7, 0, "microbatches"); /* m < 2p */
    expect_einput(MP_SCHED_DUALPIPE, 4, 1, 8, 0, "vpp");          /* two directions */
    expect_einput(MP_SCHED_DUALPIPE, 3, 2, 8, 0, "pp");           /* odd p */
    expect_einput(MP_SCHED_DUALPIPE, 4, 2, 9, 0, "microbatches"); /* odd m */
    expect_einput(MP_SCHED_DUALPIPE, 4, 2, 6, 0, "microbatches"); /* m < 2p */
}

/* DualPipe on p=4, m=8, from dualpipe.py's eight steps by hand (mb.direction;
 * direction 0 carries micro-batches 0-3 up from rank 0, 1 carries 4-7 down
 * from rank 3). Rank 0, half rank 0, phase 0 = forward direction: step 1
 * two F0; step 2 F0 F1; step 3 B1 W1 F1; step 4 (one pair of F&B units)
 * F0 B1 W1, F1 B0 W0; step 5 B1 W1, F1 B0 W0; step 6 B1 W1 and B0 with
 * its W deferred; step 7 the deferred W, B0 (deferred); step 8 its W. Rank 3
 * runs the same order with the directions swapped. */
static void test_dualpipe_order_by_hand(void **state)
{
    (void)state;
    static const char *const want[2] = {
        "F0.0 F1.0 F2.0 F4.1 B4.1 W4.1 F5.1 F3.0 B5.1 W5.1 F6.1 B0.0 W0.0 B6.1 W6.1 F7.1 "
        "B1.0 W1.0 B7.1 W7.1 B2.0 W2.0 B3.0 W3.0",
        "F4.1 F5.1 F6.1 F0.0 B0.0 W0.0 F1.0 F7.1 B1.0 W1.0 F2.0 B4.1 W4.1 B2.0 W2.0 F3.0 "
        "B5.1 W5.1 B3.0 W3.0 B6.1 W6.1 B7.1 W7.1"};
    for (int i = 0; i < 2; i++) {
        mp_op_list l;
        mp_error err;
        assert_int_equal(mp_schedule_build(MP_SCHED_DUALPIPE, 4, 2, 8, i ? 3 : 0, &l, &err),
                         MP_OK);
        char got[400] = "";
        for (int32_t j = 0; j < l.n; j++)
            if (l.ops[j].kind <= MP_OP_W) {
                char one[24];
                snprintf(one, sizeof one, "%s%s%d.%d", got[0] ? " " : "",
                         mp_op_kind_name((mp_op_kind)l.ops[j].kind), (int)l.ops[j].microbatch,
                         (int)l.ops[j].chunk);
                strncat(got, one, sizeof got - strlen(got) - 1);
            }
        assert_string_equal(got, want[i]);
        mp_op_list_free(&l);
    }
}

/* DualPipeV and DualPipe against DeepSeek's reference code, op by op with
 * the transfers: tests/sim/data/dualpipe_reference.txt, which
 * tests/sim/dualpipe_reference.py derives from dualpipev.py's and
 * dualpipe.py's control flow (a transfer at the _commit_and_wait_comm that
 * posts or waits for it) for several (p, m) each. DualPipeV's last rank hands
 * its chunks over without a message in the reference: its SEND/RECV pairs
 * with itself are left out of the comparison (DualPipe's middle ranks, whose
 * lists are DualPipeV's relabelled, exchange them, and are compared whole). */
static const char *reference_path = "tests/sim/data/dualpipe_reference.txt";

static void format_list(mp_schedule_kind kind, int32_t p, int32_t r, const mp_op_list *l,
                        char *out, size_t cap)
{
    static const char *const names[] = {"F", "B", "W", "sf", "rf", "sb", "rb"};
    size_t n = 0;
    out[0] = 0;
    for (int32_t i = 0; i < l->n; i++) {
        const mp_op *op = &l->ops[i];
        int32_t peer, peer_chunk;
        if (op->kind > MP_OP_W && mp_op_peer(kind, p, 2, r, op, &peer, &peer_chunk) &&
            peer == r)
            continue;
        int w = snprintf(out + n, cap - n, "%s%s%d.%d", n ? " " : "", names[op->kind],
                         (int)op->microbatch, (int)op->chunk);
        assert_true(w > 0 && (size_t)w < cap - n);
        n += (size_t)w;
    }
}

static void test_dualpipe_reference(void **state)
{
    (void)state;
    FILE *f = fopen(reference_path, "r");
    if (!f)
        fail_msg("cannot open %s", reference_path);
    static char line[1 << 16], got[1 << 16];
    int cases[2] = {0, 0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        char name[16];
        int p, m, r, at = 0;
        if (sscanf(line, "%15s %d %d %d %n", name, &p, &m, &r, &at) != 4 || at == 0)
            fail_msg("%s: bad line %.40s", reference_path, line);
        line[strcspn(line, "\n")] = 0;
        mp_schedule_kind kind = strcmp(name, "dualpipe") ? MP_SCHED_DUALPIPEV : MP_SCHED_DUALPIPE;
        mp_op_list l;
        mp_error err;
        assert_int_equal(mp_schedule_build(kind, p, 2, m, r, &l, &err), MP_OK);
        format_list(kind, p, r, &l, got, sizeof got);
        mp_op_list_free(&l);
        if (strcmp(got, line + at))
            fail_msg("%s p=%d m=%d rank %d\n  reference %s\n  generated %s", name, p, m, r,
                     line + at, got);
        cases[kind == MP_SCHED_DUALPIPE]++;
    }
    fclose(f);
    /* the fixture has its cases: a file that lost them would pass */
    assert_true(cases[0] >= 40 && cases[1] >= 20);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        reference_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_once_and_order),
        cmocka_unit_test(test_transfer_convention),
        cmocka_unit_test(test_send_recv_matching),
        cmocka_unit_test(test_inflight_bound),
        cmocka_unit_test(test_w_pending_bound),
        cmocka_unit_test(test_p2p_count),
        cmocka_unit_test(test_no_deadlock),
        cmocka_unit_test(test_zbv_real_times),
        cmocka_unit_test(test_deadlock_checker_catches_deadlock),
        cmocka_unit_test(test_dualpipe_commits),
        cmocka_unit_test(test_interleaved_order_by_hand),
        cmocka_unit_test(test_interleaved_batched_by_hand),
        cmocka_unit_test(test_batches_check_can_fail),
        cmocka_unit_test(test_overlap_lists),
        cmocka_unit_test(test_interleaved_batches_nccl),
        cmocka_unit_test(test_dualpipe_order_by_hand),
        cmocka_unit_test(test_dualpipe_reference),
        cmocka_unit_test(test_1f1b_order_by_hand),
        cmocka_unit_test(test_zbh1_order_by_hand),
        cmocka_unit_test(test_invalid_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
