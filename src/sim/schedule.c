/* schedule.c — the one schedule generator: per pipeline rank, the ordered
 * F/B/W compute ops with the SEND/RECV ops around them.
 *
 * Communication convention (the executor relies on it): RECV_FWD right before
 * the F that consumes it, SEND_FWD right after the F that produced it; RECV_BWD
 * right before B, SEND_BWD right after B. The first virtual stage receives no
 * activation and sends no gradient, the last sends no activation and receives
 * no gradient. W never communicates. Two exceptions: DualPipeV (and DualPipe,
 * its relabelling) places each transfer where DeepSeek's dualpipev.py
 * commits it, which can be ops before its receiver or after its sender
 * (build_dualpipev); and interleaved 1F1B without overlap_p2p places them
 * where Megatron-Core's synchronous interleaved schedule batches them, a
 * steady-state F's output sent only after the B that follows it
 * (build_interleaved_batched). Receives block, sends do not: a
 * schedule is deadlock-free exactly when it runs under those semantics.
 *
 * Placement: chunk c of rank r runs virtual stage mp_schedule_stage (c*p + r;
 * the V schedules r and 2p-1-r, so rank p-1 hands its chunk 0's output to its
 * own chunk 1: a SEND/RECV pair with itself, which costs nothing). */
#include "sim/schedule.h"
#include "sim/schedule_internal.h"
#include "sim/schedule_vorder.h"

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
    mp_schedule_kind s;
    int32_t p, v, rank;
    bool batched; /* interleaved: Megatron's batched synchronous p2p */
    bool sync;    /* mark the transfers pushed now mp_op.sync */
} builder;

static void push(builder *b, mp_op_kind kind, int32_t mb, int32_t chunk)
{
    mp_op_list *l = b->out;
    l->ops[l->n++] = (mp_op){.kind = (uint8_t)kind,
                             .sync = (uint8_t)(b->sync && kind >= MP_OP_SEND_FWD),
                             .microbatch = mb,
                             .chunk = chunk};
}

static int32_t virtual_stage(const builder *b, int32_t chunk)
{
    return (int32_t)mp_schedule_stage(b->s, b->p, b->rank, chunk);
}

/* The transfers around a forward or a backward, each half by itself. */
static void recv_fwd(builder *b, int32_t mb, int32_t chunk)
{
    if (virtual_stage(b, chunk) > 0)
        push(b, MP_OP_RECV_FWD, mb, chunk);
}

static void send_fwd(builder *b, int32_t mb, int32_t chunk)
{
    if (virtual_stage(b, chunk) < mp_schedule_n_stages(b->s, b->p, b->v) - 1)
        push(b, MP_OP_SEND_FWD, mb, chunk);
}

static void recv_bwd(builder *b, int32_t mb, int32_t chunk)
{
    if (virtual_stage(b, chunk) < mp_schedule_n_stages(b->s, b->p, b->v) - 1)
        push(b, MP_OP_RECV_BWD, mb, chunk);
}

static void send_bwd(builder *b, int32_t mb, int32_t chunk)
{
    if (virtual_stage(b, chunk) > 0)
        push(b, MP_OP_SEND_BWD, mb, chunk);
}

static void forward(builder *b, int32_t mb, int32_t chunk)
{
    recv_fwd(b, mb, chunk);
    push(b, MP_OP_F, mb, chunk);
    send_fwd(b, mb, chunk);
}

static void backward(builder *b, int32_t mb, int32_t chunk)
{
    recv_bwd(b, mb, chunk);
    push(b, MP_OP_B, mb, chunk);
    send_bwd(b, mb, chunk);
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

/* Megatron's interleaved order with each transfer at its own F or B: the
 * order of --overlap-p2p-communication, which posts a steady-state forward's
 * send and receive before the backward that follows and waits on them after
 * it. Without --overlap-p2p-communication-warmup-flush (its default; NeMo
 * and Megatron-Bridge leave it off) Megatron-Core (d98e8a64,
 * megatron/core/pipeline_parallel/schedules.py,
 * forward_backward_pipelining_with_interleaving; core_v0.8.0 the same) waits
 * where it posts on everything outside the steady state: the first input
 * (recv_forward, line 1545), each warm-up F's output with the next F's
 * input (a blocking send_forward_recv_forward, line 1655; in 0.8 posted
 * asynchronously and waited on before the next F, with nothing between),
 * the last steady-state B's gradient with the first cool-down B's
 * (bwd_wait_handles, waited on before the cool-down, lines 1958-1960) and
 * each cool-down B's gradient with the next B's (a blocking
 * send_backward_recv_backward, line 2053). Those transfers are marked sync:
 * each run of them is posted together and waited on whole (engine.c
 * end_commit). The first B's gradient is received asynchronously (posted
 * after the last warm-up F, lines 1697-1722; waited on before the B). The
 * op order is that of the per-op placement either way. */
static void build_interleaved(builder *b, int32_t m)
{
    int32_t p = b->p, v = b->v, total = m * v;
    int32_t warmup = interleaved_warmup(p, v, m, b->rank);
    int32_t mb, chunk;
    b->sync = true;
    for (int32_t k = 0; k < warmup; k++) {
        interleaved_id(p, v, k, true, &mb, &chunk);
        forward(b, mb, chunk);
    }
    for (int32_t k = 0; k < total - warmup; k++) {
        interleaved_id(p, v, warmup + k, true, &mb, &chunk);
        b->sync = k == 0; /* the last warm-up batch received its input */
        recv_fwd(b, mb, chunk);
        b->sync = false;
        push(b, MP_OP_F, mb, chunk);
        send_fwd(b, mb, chunk);
        interleaved_id(p, v, k, false, &mb, &chunk);
        recv_bwd(b, mb, chunk);
        push(b, MP_OP_B, mb, chunk);
        b->sync = k == total - warmup - 1; /* waited on before the cool-down */
        send_bwd(b, mb, chunk);
    }
    b->sync = true;
    for (int32_t k = total - warmup; k < total; k++) {
        interleaved_id(p, v, k, false, &mb, &chunk);
        backward(b, mb, chunk);
    }
    b->sync = false;
}

/* The receive of virtual micro-batch k's input (fwd) or output gradient,
 * unless k is past the last. */
static void recv_id(builder *b, int32_t m, int32_t k, bool fwd)
{
    int32_t mb, chunk;
    if (k >= m * b->v)
        return;
    interleaved_id(b->p, b->v, k, fwd, &mb, &chunk);
    if (fwd)
        recv_fwd(b, mb, chunk);
    else
        recv_bwd(b, mb, chunk);
}

/* The F or B of virtual micro-batch k; *mb and *chunk say which. */
static void compute_id(builder *b, int32_t k, bool fwd, int32_t *mb, int32_t *chunk)
{
    interleaved_id(b->p, b->v, k, fwd, mb, chunk);
    push(b, fwd ? MP_OP_F : MP_OP_B, *mb, *chunk);
}

/* Megatron-Core's interleaved 1F1B without overlap_p2p_comm (Megatron-LM
 * d98e8a64, megatron/core/pipeline_parallel/schedules.py,
 * forward_backward_pipelining_with_interleaving): the compute order of
 * build_interleaved, the transfers batched as it posts them, each batch
 * one NCCL batch_isend_irecv waited on whole (p2p_communication.py
 * _communicate, batch_p2p_comm's _batched_p2p_ops, then a wait on every
 * request). Before the warm-up the first input
 * (recv_forward, line 1545). Each warm-up F(k) is followed by
 * send_forward_recv_forward: its output out, the input of F(k+1) in
 * (line 1655); the last warm-up F's batch also receives the first B's
 * gradient (send_forward_backward_recv_forward_backward, lines 1633-1654).
 * Each steady-state iteration runs F(w+k) then B(k) and only then one
 * send_forward_backward_recv_forward_backward with both outputs and both
 * next inputs (lines 1900-1944): the forward's output leaves after the
 * backward. Each cool-down B(k) is followed by send_backward_recv_backward,
 * its gradient out and the next B's in (line 2053). Within a batch the sends
 * come first (every one is posted before any is waited on); a batch's two
 * receives are from different ranks when p > 2, which Megatron-LM requires
 * without the overlap (arguments.py). */
static void build_interleaved_batched(builder *b, int32_t m)
{
    int32_t total = m * b->v, warmup = interleaved_warmup(b->p, b->v, m, b->rank);
    int32_t fmb, fc, bmb, bc;
    recv_id(b, m, 0, true);
    for (int32_t k = 0; k < warmup; k++) {
        compute_id(b, k, true, &fmb, &fc);
        send_fwd(b, fmb, fc);
        recv_id(b, m, k + 1, true);
        if (k == warmup - 1) /* the first backward's gradient */
            recv_id(b, m, 0, false);
    }
    for (int32_t k = 0; k < total - warmup; k++) {
        compute_id(b, warmup + k, true, &fmb, &fc);
        compute_id(b, k, false, &bmb, &bc);
        send_fwd(b, fmb, fc);
        send_bwd(b, bmb, bc);
        recv_id(b, m, warmup + k + 1, true);
        recv_id(b, m, k + 1, false);
    }
    for (int32_t k = total - warmup; k < total; k++) {
        compute_id(b, k, false, &bmb, &bc);
        send_bwd(b, bmb, bc);
        recv_id(b, m, k + 1, false);
    }
}

/* ZB-V (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory"):
 * two chunks per rank in a V, B split from W. The compute order comes from
 * list scheduling all ranks together over the ops' times
 * (sim/schedule_vorder.c: unit times unless the caller has real ones);
 * here the transfers are put around it. */
static mp_status build_zbv_all(builder *bs, int32_t p, int32_t m, const mp_op_times *t,
                               mp_error *err)
{
    mp_op_list *order = calloc((size_t)p, sizeof *order);
    mp_op *ops = malloc((size_t)p * 6 * m * sizeof *ops);
    if (!order || !ops) {
        free(order);
        free(ops);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    }
    for (int32_t r = 0; r < p; r++)
        order[r] = (mp_op_list){.ops = ops + (size_t)r * 6 * m, .cap = 6 * m};
    bool fallback = false;
    mp_status st = mp_schedule_zbv_order(p, m, t, order, &fallback, err);
    for (int32_t r = 0; r < p && st == MP_OK; r++)
        for (int32_t i = 0; i < order[r].n; i++) {
            const mp_op *op = &order[r].ops[i];
            if (op->kind == MP_OP_F)
                forward(&bs[r], op->microbatch, op->chunk);
            else if (op->kind == MP_OP_B)
                backward(&bs[r], op->microbatch, op->chunk);
            else
                push(&bs[r], MP_OP_W, op->microbatch, op->chunk);
        }
    for (int32_t r = 0; r < p && st == MP_OK; r++)
        bs[r].out->fallback = fallback;
    free(ops);
    free(order);
    return st;
}

/* DualPipeV (DeepSeek, the deepseek-ai/DualPipe repository; Sea AI Lab's
 * "cut-in-half" of DualPipe): the V placement, eight phases per rank, op for
 * op as dualpipev.py's `step` runs them, transfers included. The reference
 * appends each receive and send to a list and posts the list at the next
 * _commit_and_wait_comm (at the start of every chunk call), which waits for
 * all of it: here each transfer is written at that commit, in the list's
 * order (its sends come before its receives, so a send does not wait behind
 * a receive). So a receive can come ops before its F or B (the next F0's
 * input at phase 2's F1, the next F1's before phase 3's W) and a send after
 * the next op (phase 2's F0 after F1; the last rank's last phase-2 F1 held
 * into phase 4). An F&B pair (which DualPipe overlaps) runs F, then B with
 * its W, as does every B that is not deferred. Rank p-1's hand-overs between
 * its chunks, which dualpipev.py makes inside the compute, are SEND/RECV
 * pairs with itself, placed where dualpipe.py's middle ranks place the
 * message that DualPipe's two halves exchange there (schedule_dualpipe.c
 * relabels these lists). Needs m >= 2p. */
typedef struct dpv_state {
    builder *b;
    int32_t next_f[2], next_b[2];     /* compute, per chunk */
    int32_t rf[2], rb[2], sf[2], sb[2]; /* transfers, per chunk */
    int32_t *wq; /* deferred W, (mb << 1) | chunk: dualpipe's WeightGradStore, FIFO */
    int32_t wq_head, wq_tail;
    mp_op q[8]; /* transfers waiting for the next commit */
    int32_t nq;
} dpv_state;

static void dpv_queue(dpv_state *d, mp_op_kind kind, int32_t *count, int32_t c)
{
    d->q[d->nq++] = (mp_op){.kind = (uint8_t)kind, .microbatch = count[c]++, .chunk = c};
}

/* dualpipev.py's _recv_forward etc.: nothing at the V's two ends */
static void dpv_recv_f(dpv_state *d, int32_t c)
{
    if (virtual_stage(d->b, c) > 0)
        dpv_queue(d, MP_OP_RECV_FWD, d->rf, c);
}

static void dpv_send_f(dpv_state *d, int32_t c)
{
    if (virtual_stage(d->b, c) < 2 * d->b->p - 1)
        dpv_queue(d, MP_OP_SEND_FWD, d->sf, c);
}

static void dpv_recv_b(dpv_state *d, int32_t c)
{
    if (virtual_stage(d->b, c) < 2 * d->b->p - 1)
        dpv_queue(d, MP_OP_RECV_BWD, d->rb, c);
}

static void dpv_send_b(dpv_state *d, int32_t c)
{
    if (virtual_stage(d->b, c) > 0)
        dpv_queue(d, MP_OP_SEND_BWD, d->sb, c);
}

/* _commit_and_wait_comm */
static void dpv_commit(dpv_state *d)
{
    for (int32_t i = 0; i < d->nq; i++)
        push(d->b, (mp_op_kind)d->q[i].kind, d->q[i].microbatch, d->q[i].chunk);
    d->nq = 0;
}

static void dpv_compute_f(dpv_state *d, int32_t c)
{
    push(d->b, MP_OP_F, d->next_f[c]++, c);
}

/* a B whose W is deferred (enable_zb) or run with it */
static void dpv_compute_b(dpv_state *d, int32_t c, bool defer_w)
{
    int32_t i = d->next_b[c]++;
    push(d->b, MP_OP_B, i, c);
    if (defer_w)
        d->wq[d->wq_tail++] = (i << 1) | c;
    else
        push(d->b, MP_OP_W, i, c);
}

static void dpv_forward(dpv_state *d, int32_t c, bool recv, bool send)
{
    if (recv)
        dpv_recv_f(d, c);
    dpv_commit(d);
    dpv_compute_f(d, c);
    if (send)
        dpv_send_f(d, c);
}

static void dpv_backward(dpv_state *d, int32_t c, bool defer_w, bool send)
{
    dpv_recv_b(d, c);
    dpv_commit(d);
    dpv_compute_b(d, c, defer_w);
    if (send)
        dpv_send_b(d, c);
}

/* F of chunk ca with B of chunk cb (and its W) */
static void dpv_fb(dpv_state *d, int32_t ca, int32_t cb, bool recv_a)
{
    if (recv_a)
        dpv_recv_f(d, ca);
    dpv_recv_b(d, cb);
    dpv_commit(d);
    dpv_compute_f(d, ca);
    d->b->out->ops[d->b->out->n - 1].fb = 1; /* the engine's merged pass (run_fb) */
    dpv_compute_b(d, cb, false);
    dpv_send_f(d, ca);
    dpv_send_b(d, cb);
}

static void dpv_w(dpv_state *d)
{
    dpv_commit(d);
    int32_t w = d->wq[d->wq_head++];
    push(d->b, MP_OP_W, w >> 1, w & 1);
}

static void build_dualpipev(builder *b, int32_t m, int32_t *wq)
{
    int32_t p = b->p, r = b->rank;
    bool turn = r == p - 1; /* dualpipev.py's last rank, dualpipe.py's middle ones */
    dpv_state d = {.b = b, .wq = wq};
    for (int32_t i = 0; i < (p - r - 1) * 2; i++) /* 1: nF0 */
        dpv_forward(&d, 0, true, true);
    dpv_recv_f(&d, 0); /* 2: nF0F1 */
    for (int32_t i = 0; i < r + 1; i++) {
        dpv_forward(&d, 0, false, turn);
        dpv_recv_f(&d, 0);
        /* the last rank holds its last F1's output until phase 4 */
        dpv_forward(&d, 1, true, !turn || i < r);
        if (!turn)
            dpv_send_f(&d, 0);
    }
    for (int32_t i = 0; i < p - r - 1; i++) { /* 3: nB1W1F1, zero bubble */
        dpv_backward(&d, 1, true, true);
        dpv_recv_f(&d, 1);
        dpv_w(&d);
        dpv_forward(&d, 1, false, true);
    }
    for (int32_t i = 0; i < m - 2 * p + r + 1; i++) { /* 4: nF0B1F1B0 (F&B pairs) */
        if (i == 0 && turn) { /* the turn of the V: not overlapped */
            dpv_forward(&d, 0, false, false);
            dpv_send_f(&d, 1);
            dpv_backward(&d, 1, false, false);
            dpv_send_f(&d, 0);
            dpv_send_b(&d, 1);
        } else {
            dpv_fb(&d, 0, 1, i > 0);
        }
        dpv_fb(&d, 1, 0, true);
    }
    for (int32_t i = 0; i < p - r - 1; i++) { /* 5: nB1F1B0 */
        dpv_backward(&d, 1, false, true);
        dpv_fb(&d, 1, 0, true);
    }
    bool zb = false; /* 6: nB1B0, the second half deferring W */
    for (int32_t i = 0; i < r + 1; i++) {
        if (i == (r + 1) / 2 && r % 2 == 1)
            zb = true;
        dpv_backward(&d, 1, zb, true);
        if (i == (r + 1) / 2 && r % 2 == 0)
            zb = true;
        dpv_backward(&d, 0, zb, true);
    }
    for (int32_t i = 0; i < p - r - 1; i++) { /* 7: nWB0 */
        dpv_w(&d);
        dpv_backward(&d, 0, true, true);
    }
    while (d.wq_head < d.wq_tail) /* 8: nW */
        dpv_w(&d);
    dpv_commit(&d);
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
    if ((mp_schedule_is_v(s) || s == MP_SCHED_DUALPIPE) && v != 2)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "vpp",
                            "%s runs two chunks per rank (vpp 2, not %d)", mp_schedule_name(s),
                            (int)v);
    if (v > 1 && s != MP_SCHED_INTERLEAVED && !mp_schedule_is_v(s) && s != MP_SCHED_DUALPIPE)
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
    if (s == MP_SCHED_DUALPIPEV && m < 2 * p)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "microbatches",
                            "dualpipev needs at least 2*pp micro-batches (%d < %d)", (int)m,
                            (int)(2 * p));
    if (s == MP_SCHED_DUALPIPE && p % 2)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "pp",
                            "dualpipe pairs rank r with rank pp-1-r: it needs an even pp (not %d)",
                            (int)p);
    if (s == MP_SCHED_DUALPIPE && (m % 2 || m < 2 * p))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "microbatches",
                            "dualpipe needs an even number of micro-batches, at least 2*pp "
                            "(%d, pp %d)",
                            (int)m, (int)p);
    if (rank < 0 || rank >= p)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "rank",
                            "pipeline rank %d outside 0..%d", (int)rank, (int)p - 1);
    return MP_OK;
}

/* Room for every op: per (micro-batch, chunk) F, B, W and four transfers. */
static mp_status alloc_list(mp_op_list *out, int32_t v, int32_t m, mp_error *err)
{
    int64_t cap = (int64_t)m * v * 7;
    out->ops = malloc((size_t)cap * sizeof *out->ops);
    if (!out->ops)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    out->cap = (int32_t)cap;
    return MP_OK;
}

/* One rank's list, for every schedule generated rank by rank. */
static mp_status build_rank(builder *b, int32_t m, mp_error *err)
{
    switch (b->s) {
    case MP_SCHED_GPIPE: build_gpipe(b, m); break;
    case MP_SCHED_1F1B: build_1f1b(b, m); break;
    case MP_SCHED_ZBH1: build_zbh1(b, m); break;
    case MP_SCHED_INTERLEAVED:
        /* With one chunk Megatron runs its non-interleaved 1F1B. */
        if (b->v == 1)
            build_1f1b(b, m);
        else if (b->batched)
            build_interleaved_batched(b, m);
        else
            build_interleaved(b, m);
        break;
    case MP_SCHED_DUALPIPEV: {
        int32_t *wq = malloc((size_t)2 * m * sizeof *wq);
        if (!wq)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
        build_dualpipev(b, m, wq);
        free(wq);
        break;
    }
    case MP_SCHED_DUALPIPE: return mp_schedule_build_dualpipe(b->p, m, b->rank, b->out, err);
    default: break;
    }
    return MP_OK;
}

bool mp_schedule_batched_p2p(mp_schedule_kind s, int32_t v, bool overlap_p2p)
{
    return s == MP_SCHED_INTERLEAVED && v > 1 && !overlap_p2p;
}

mp_status mp_schedule_build_all(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                mp_op_list *out, mp_error *err)
{
    return mp_schedule_build_all_opts(s, p, v, m, NULL, out, err);
}

mp_status mp_schedule_build_all_timed(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                      const mp_op_times *t, mp_op_list *out, mp_error *err)
{
    mp_schedule_opts o = {.t = t};
    return mp_schedule_build_all_opts(s, p, v, m, &o, out, err);
}

mp_status mp_schedule_build_all_opts(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                     const mp_schedule_opts *o, mp_op_list *out, mp_error *err)
{
    const mp_op_times *t = o ? o->t : NULL;
    bool batched = mp_schedule_batched_p2p(s, v, o && o->overlap_p2p);
    for (int32_t r = 0; r < (p > 0 && p <= MP_MAX_STAGES ? p : 0); r++)
        out[r] = (mp_op_list){0};
    mp_status st = check_args(s, p, v, m, 0, err);
    if (st != MP_OK)
        return st;
    s = mp_schedule_run_as(s, p); /* zb-h1 at pp 1 is 1f1b (core/config.h) */
    builder bs[MP_MAX_STAGES];
    for (int32_t r = 0; r < p && st == MP_OK; r++) {
        st = alloc_list(&out[r], v, m, err);
        bs[r] = (builder){.out = &out[r], .s = s, .p = p, .v = v, .rank = r, .batched = batched};
    }
    if (st == MP_OK && s == MP_SCHED_ZBV) {
        st = build_zbv_all(bs, p, m, t, err);
    } else {
        for (int32_t r = 0; r < p && st == MP_OK; r++)
            st = build_rank(&bs[r], m, err);
    }
    if (st != MP_OK)
        for (int32_t r = 0; r < p; r++)
            mp_op_list_free(&out[r]);
    return st;
}

mp_status mp_schedule_build(mp_schedule_kind s, int32_t p, int32_t v, int32_t m, int32_t rank,
                            mp_op_list *out, mp_error *err)
{
    return mp_schedule_build_opts(s, p, v, m, rank, NULL, out, err);
}

mp_status mp_schedule_build_timed(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                  int32_t rank, const mp_op_times *t, mp_op_list *out,
                                  mp_error *err)
{
    mp_schedule_opts o = {.t = t};
    return mp_schedule_build_opts(s, p, v, m, rank, &o, out, err);
}

mp_status mp_schedule_build_opts(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                 int32_t rank, const mp_schedule_opts *o, mp_op_list *out,
                                 mp_error *err)
{
    out->ops = NULL;
    out->n = out->cap = 0;
    mp_status st = check_args(s, p, v, m, rank, err);
    if (st != MP_OK)
        return st;
    s = mp_schedule_run_as(s, p); /* zb-h1 at pp 1 is 1f1b (core/config.h) */
    if (s == MP_SCHED_ZBV) {
        /* generated for all ranks together: keep this rank's */
        mp_op_list *all = calloc((size_t)p, sizeof *all);
        if (!all)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
        st = mp_schedule_build_all_opts(s, p, v, m, o, all, err);
        if (st == MP_OK) {
            *out = all[rank];
            all[rank] = (mp_op_list){0};
        }
        for (int32_t r = 0; r < p; r++)
            mp_op_list_free(&all[r]);
        free(all);
        return st;
    }
    if ((st = alloc_list(out, v, m, err)) != MP_OK)
        return st;
    builder b = {.out = out, .s = s, .p = p, .v = v, .rank = rank,
                 .batched = mp_schedule_batched_p2p(s, v, o && o->overlap_p2p)};
    st = build_rank(&b, m, err);
    if (st != MP_OK)
        mp_op_list_free(out);
    return st;
}

bool mp_op_peer(mp_schedule_kind s, int32_t p, int32_t v, int32_t rank, const mp_op *op,
                int32_t *peer_rank, int32_t *peer_chunk)
{
    int32_t k = (int32_t)mp_schedule_stage(s, p, rank, op->chunk), other;
    switch ((mp_op_kind)op->kind) {
    case MP_OP_SEND_FWD:
    case MP_OP_RECV_BWD: other = k + 1; break;
    case MP_OP_RECV_FWD:
    case MP_OP_SEND_BWD: other = k - 1; break;
    default: return false;
    }
    if (other < 0 || other >= mp_schedule_n_stages(s, p, v))
        return false;
    if (s == MP_SCHED_DUALPIPE) { /* the same direction, one rank along it */
        *peer_rank = op->chunk ? p - 1 - other : other;
        *peer_chunk = op->chunk;
    } else if (mp_schedule_is_v(s)) {
        *peer_rank = other < p ? other : 2 * p - 1 - other;
        *peer_chunk = other < p ? 0 : 1;
    } else {
        *peer_rank = other % p;
        *peer_chunk = other / p;
    }
    return true;
}

int32_t mp_op_message_id(mp_schedule_kind s, int32_t p, int32_t v, int32_t m, int32_t rank,
                         const mp_op *op)
{
    int32_t peer_rank, peer_chunk, dir, dest_chunk;
    if (!mp_op_peer(s, p, v, rank, op, &peer_rank, &peer_chunk))
        return -1;
    switch ((mp_op_kind)op->kind) {
    case MP_OP_SEND_FWD: dir = 0; dest_chunk = peer_chunk; break;
    case MP_OP_RECV_FWD: dir = 0; dest_chunk = op->chunk; break;
    case MP_OP_SEND_BWD: dir = 1; dest_chunk = peer_chunk; break;
    default: dir = 1; dest_chunk = op->chunk; break; /* MP_OP_RECV_BWD */
    }
    return (dir * v + dest_chunk) * m + op->microbatch;
}

int64_t mp_schedule_p2p_messages(mp_schedule_kind s, int32_t p, int32_t v, int32_t m)
{
    if (p < 2)
        return 0; /* every hand-over is local */
    int64_t boundaries = mp_schedule_n_stages(s, p, v) - 1;
    if (mp_schedule_is_v(s))
        boundaries--; /* rank p-1's hand-over between its chunks is local */
    return boundaries > 0 ? 2 * boundaries * m : 0;
}

int32_t mp_schedule_inflight_bound(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                   int32_t rank)
{
    if (check_args(s, p, v, m, rank, NULL) != MP_OK)
        return -1;
    s = mp_schedule_run_as(s, p);
    switch (s) {
    case MP_SCHED_GPIPE: return m;
    case MP_SCHED_ZBH1: return min32(p, m);
    case MP_SCHED_ZBV: return min32(2 * p, 2 * m);
    case MP_SCHED_DUALPIPEV: return min32(2 * p + 1, 2 * m);
    case MP_SCHED_DUALPIPE: return min32(p + 1, m);
    case MP_SCHED_INTERLEAVED:
        if (v > 1)
            return min32(interleaved_warmup(p, v, m, rank) + 1, m * v);
        return min32(p - rank, m);
    default: return min32(p - rank, m); /* 1F1B */
    }
}

int32_t mp_schedule_w_pending_bound(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                                    int32_t rank)
{
    if (check_args(s, p, v, m, rank, NULL) != MP_OK)
        return -1;
    s = mp_schedule_run_as(s, p);
    switch (s) {
    /* the last stage runs each W p - 1 slots after its B, rank r after r + 1
     * further ops (Qi et al. 2024, Fig. 3): up to r + 1 wait at once */
    case MP_SCHED_ZBH1: return min32(rank + 1, m);
    /* a waiting W keeps its forward's activations: no more wait than are in
     * flight (the V order follows the ops' real times, sim/schedule_vorder.c) */
    case MP_SCHED_ZBV:
    case MP_SCHED_DUALPIPEV:
    case MP_SCHED_DUALPIPE: return mp_schedule_inflight_bound(s, p, v, m, rank);
    default: return 0;
    }
}

bool mp_schedule_w_under_inflight(mp_schedule_kind s)
{
    return s == MP_SCHED_DUALPIPE || s == MP_SCHED_DUALPIPEV;
}

bool mp_op_list_bw_adjacent(const mp_op_list *l, int32_t i, int dir)
{
    const mp_op *at = &l->ops[i];
    for (int32_t j = i + dir; j >= 0 && j < l->n; j += dir) {
        const mp_op *o = &l->ops[j];
        if (o->kind != MP_OP_F && o->kind != MP_OP_B && o->kind != MP_OP_W)
            continue;
        return o->kind == (dir > 0 ? MP_OP_W : MP_OP_B) && o->microbatch == at->microbatch &&
               o->chunk == at->chunk;
    }
    return false;
}
