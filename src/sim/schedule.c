/* schedule.c — the one schedule generator: per pipeline rank, the ordered
 * F/B/W compute ops with the SEND/RECV ops around them.
 *
 * Communication convention (the executor relies on it): RECV_FWD right before
 * the F that consumes it, SEND_FWD right after the F that produced it; RECV_BWD
 * right before B, SEND_BWD right after B. The first virtual stage receives no
 * activation and sends no gradient, the last sends no activation and receives
 * no gradient. W (ZB-H1) never communicates. Receives block, sends do not: a
 * schedule is deadlock-free exactly when it runs under those semantics. */
#include "sim/schedule.h"

#include "core/plan.h" /* MP_MAX_STAGES */

#include <stdlib.h>

/* Anything larger is refused as absurd (and keeps every count inside int32). */
#define MAX_MICROBATCHES (1 << 22)

const char *mp_op_kind_name(mp_op_kind k)
{
    switch (k) {
    case MP_OP_F: return "F";
    case MP_OP_B: return "B";
    case MP_OP_W: return "W";
    case MP_OP_SEND_FWD: return "send-fwd";
    case MP_OP_RECV_FWD: return "recv-fwd";
    case MP_OP_SEND_BWD: return "send-bwd";
    case MP_OP_RECV_BWD: return "recv-bwd";
    default: return "?";
    }
}

void mp_op_list_free(mp_op_list *l)
{
    if (!l)
        return;
    free(l->ops);
    l->ops = NULL;
    l->n = l->cap = 0;
}

/* The builder: ops go into a list sized up front, so pushing cannot fail. */
typedef struct builder {
    mp_op_list *out;
    int32_t p, v, rank;
} builder;

static void push(builder *b, mp_op_kind kind, int32_t mb, int32_t chunk)
{
    mp_op_list *l = b->out;
    l->ops[l->n++] = (mp_op){.kind = (uint8_t)kind, .microbatch = mb, .chunk = chunk};
}

static int32_t virtual_stage(const builder *b, int32_t chunk)
{
    return chunk * b->p + b->rank;
}

static void forward(builder *b, int32_t mb, int32_t chunk)
{
    int32_t k = virtual_stage(b, chunk);
    if (k > 0)
        push(b, MP_OP_RECV_FWD, mb, chunk);
    push(b, MP_OP_F, mb, chunk);
    if (k < b->p * b->v - 1)
        push(b, MP_OP_SEND_FWD, mb, chunk);
}

static void backward(builder *b, int32_t mb, int32_t chunk)
{
    int32_t k = virtual_stage(b, chunk);
    if (k < b->p * b->v - 1)
        push(b, MP_OP_RECV_BWD, mb, chunk);
    push(b, MP_OP_B, mb, chunk);
    if (k > 0)
        push(b, MP_OP_SEND_BWD, mb, chunk);
}

static int32_t min32(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/* GPipe: all forwards, then all backwards in reverse order (the last
 * micro-batch's gradient is the first one available on the last stage). */
static void build_gpipe(builder *b, int32_t m)
{
    for (int32_t i = 0; i < m; i++)
        forward(b, i, 0);
    for (int32_t i = m - 1; i >= 0; i--)
        backward(b, i, 0);
}

/* 1F1B (PipeDream-flush, Megatron's non-interleaved schedule): p-rank-1
 * warm-up forwards, then one forward one backward, then the cool-down. */
static void build_1f1b(builder *b, int32_t m)
{
    int32_t warmup = min32(b->p - b->rank - 1, m);
    for (int32_t i = 0; i < warmup; i++)
        forward(b, i, 0);
    for (int32_t i = 0; i < m - warmup; i++) {
        forward(b, warmup + i, 0);
        backward(b, i, 0);
    }
    for (int32_t i = m - warmup; i < m; i++)
        backward(b, i, 0);
}

/* ZB-H1 (Qi et al. 2023): 1F1B's warm-up, B split from W. Rank r defers its
 * W by r micro-batches, so the input-gradient chain runs up the pipeline at
 * B speed while every rank holds at most p micro-batches (F done, W not):
 * the deferred Ws fill the cool-down bubble. */
static void build_zbh1(builder *b, int32_t m)
{
    int32_t warmup = min32(b->p - b->rank - 1, m);
    int32_t lag = b->rank;
    int32_t next_w = 0;
    for (int32_t i = 0; i < warmup; i++)
        forward(b, i, 0);
    for (int32_t i = 0; i < m; i++) {
        if (warmup + i < m)
            forward(b, warmup + i, 0);
        backward(b, i, 0);
        if (i - lag >= 0)
            push(b, MP_OP_W, next_w++, 0);
    }
    while (next_w < m)
        push(b, MP_OP_W, next_w++, 0);
}

/* Megatron's interleaved order: virtual micro-batch k (0 .. m*v-1) is
 * micro-batch (k / (p*v))*p + k % p of chunk (k % (p*v)) / p going forward;
 * backward visits the chunks in reverse. */
static void interleaved_id(int32_t p, int32_t v, int32_t k, bool fwd, int32_t *mb,
                           int32_t *chunk)
{
    int32_t group = k / (p * v), in_group = k % (p * v);
    int32_t c = in_group / p;
    *chunk = fwd ? c : v - 1 - c;
    *mb = group * p + in_group % p;
}

static int32_t interleaved_warmup(int32_t p, int32_t v, int32_t m, int32_t rank)
{
    int64_t w = (int64_t)(p - rank - 1) * 2 + (int64_t)(v - 1) * p;
    int64_t total = (int64_t)m * v;
    return (int32_t)(w < total ? w : total);
}

static void build_interleaved(builder *b, int32_t m)
{
    int32_t p = b->p, v = b->v, total = m * v;
    int32_t warmup = interleaved_warmup(p, v, m, b->rank);
    int32_t mb, chunk;
    for (int32_t k = 0; k < warmup; k++) {
        interleaved_id(p, v, k, true, &mb, &chunk);
        forward(b, mb, chunk);
    }
    for (int32_t k = 0; k < total - warmup; k++) {
        interleaved_id(p, v, warmup + k, true, &mb, &chunk);
        forward(b, mb, chunk);
        interleaved_id(p, v, k, false, &mb, &chunk);
        backward(b, mb, chunk);
    }
    for (int32_t k = total - warmup; k < total; k++) {
        interleaved_id(p, v, k, false, &mb, &chunk);
        backward(b, mb, chunk);
    }
}

static mp_status check_args(mp_schedule_kind s, int32_t p, int32_t v, int32_t m, int32_t rank,
                            mp_error *err)
{
    if ((unsigned)s >= MP_SCHED_COUNT)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "schedule", "unknown schedule %d", (int)s);
    if (p < 1 || p > MP_MAX_STAGES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "pp",
                            "pipeline size %d must be in 1..%d", (int)p, MP_MAX_STAGES);
    if (v < 1 || (int64_t)p * v > MP_MAX_STAGES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "vpp",
                            "virtual stages %d must be >= 1 with pp*vpp <= %d", (int)v,
                            MP_MAX_STAGES);
    if (v > 1 && s != MP_SCHED_INTERLEAVED)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "vpp",
                            "vpp %d needs the interleaved-1f1b schedule", (int)v);
    if (m < 1 || m > MAX_MICROBATCHES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "microbatches",
                            "micro-batches %d must be in 1..%d", (int)m, MAX_MICROBATCHES);
    if ((int64_t)m * v > MAX_MICROBATCHES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "microbatches",
                            "micro-batches x vpp = %d x %d is absurdly large (at most %d)",
                            (int)m, (int)v, MAX_MICROBATCHES);
    if (s == MP_SCHED_INTERLEAVED && v > 1 && m % p != 0)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "microbatches",
                            "interleaved-1f1b needs the micro-batches (%d) to be a multiple "
                            "of pp (%d)",
                            (int)m, (int)p);
    if (rank < 0 || rank >= p)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "rank",
                            "pipeline rank %d outside 0..%d", (int)rank, (int)p - 1);
    return MP_OK;
}

mp_status mp_schedule_build(mp_schedule_kind s, int32_t p, int32_t v, int32_t m, int32_t rank,
                            mp_op_list *out, mp_error *err)
{
    out->ops = NULL;
    out->n = out->cap = 0;
    mp_status st = check_args(s, p, v, m, rank, err);
    if (st != MP_OK)
        return st;
    /* At most: per (micro-batch, chunk) F, B, W and four transfers. */
    int64_t cap = (int64_t)m * v * 7;
    out->ops = malloc((size_t)cap * sizeof *out->ops);
    if (!out->ops)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    out->cap = (int32_t)cap;
    builder b = {.out = out, .p = p, .v = v, .rank = rank};
    switch (s) {
    case MP_SCHED_GPIPE: build_gpipe(&b, m); break;
    case MP_SCHED_1F1B: build_1f1b(&b, m); break;
    case MP_SCHED_ZBH1: build_zbh1(&b, m); break;
    case MP_SCHED_INTERLEAVED:
        /* With one chunk Megatron runs its non-interleaved 1F1B. */
        if (v == 1)
            build_1f1b(&b, m);
        else
            build_interleaved(&b, m);
        break;
    default: break;
    }
    return MP_OK;
}

bool mp_op_peer(int32_t p, int32_t v, int32_t rank, const mp_op *op, int32_t *peer_rank,
                int32_t *peer_chunk)
{
    int32_t k = op->chunk * p + rank, other;
    switch ((mp_op_kind)op->kind) {
    case MP_OP_SEND_FWD:
    case MP_OP_RECV_BWD: other = k + 1; break;
    case MP_OP_RECV_FWD:
    case MP_OP_SEND_BWD: other = k - 1; break;
    default: return false;
    }
    if (other < 0 || other >= p * v)
        return false;
    *peer_rank = other % p;
    *peer_chunk = other / p;
    return true;
}

int32_t mp_op_message_id(int32_t p, int32_t v, int32_t m, int32_t rank, const mp_op *op)
{
    int32_t peer_rank, peer_chunk, dir, dest_chunk;
    if (!mp_op_peer(p, v, rank, op, &peer_rank, &peer_chunk))
        return -1;
    switch ((mp_op_kind)op->kind) {
    case MP_OP_SEND_FWD: dir = 0; dest_chunk = peer_chunk; break;
    case MP_OP_RECV_FWD: dir = 0; dest_chunk = op->chunk; break;
    case MP_OP_SEND_BWD: dir = 1; dest_chunk = peer_chunk; break;
    default: dir = 1; dest_chunk = op->chunk; break; /* MP_OP_RECV_BWD */
    }
    return (dir * v + dest_chunk) * m + op->microbatch;
}

int32_t mp_schedule_inflight_bound(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                   int32_t rank)
{
    if (check_args(s, p, v, m, rank, NULL) != MP_OK)
        return -1;
    switch (s) {
    case MP_SCHED_GPIPE: return m;
    case MP_SCHED_ZBH1: return min32(p, m);
    case MP_SCHED_INTERLEAVED:
        if (v > 1)
            return min32(interleaved_warmup(p, v, m, rank) + 1, m * v);
        return min32(p - rank, m);
    default: return min32(p - rank, m); /* 1F1B */
    }
}
