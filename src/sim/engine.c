/* engine.c — the discrete-event engine behind mp_simulate.
 *
 * Every pipeline rank runs its schedule (sim/schedule.c) in order on one
 * compute stream. A binary heap holds, per runnable rank, the time it can run
 * its next op; the engine takes the earliest rank and runs its ops until it
 * blocks (exact: see run_pipeline):
 *   F, B, W      occupy the compute stream for the stage's duration;
 *   SEND         puts the message on the directed link to the peer for
 *                bytes/bandwidth (one message at a time); it lands latency
 *                later. By default the rank waits until it has landed, as
 *                Megatron does (batched isend/irecv, waited on before the
 *                next compute); with async_p2p the rank goes on at once, as
 *                the executor's MPI_Isend does. DualPipe(V), and
 *                interleaved 1F1B in Megatron's synchronous batches
 *                (mp_schedule_batched_p2p), post a commit's transfers (a run
 *                of SEND/RECV ops) together and wait for all of them
 *                (run_send, end_commit); so do the overlapped interleaved
 *                lists' warm-up and cool-down, a run of ops marked sync,
 *                even with async_p2p (schedule.c build_interleaved);
 *   RECV         blocks until its message has landed; a rank blocked on a
 *                message leaves the heap and the matching SEND puts it back.
 * When the heap runs dry with ops left, the schedule deadlocks (the same ops
 * would hang the executor, which has the same blocking semantics).
 * After the pipeline, each rank's DP gradient reductions (one per chunk, on
 * the dp stream) and the optimizer step are placed; see docs/simulator.md.
 * The breakdown is the critical rank's: the least idle one (critical_rank).
 * All state is in flat arrays allocated once per run: no per-event malloc. */
#include <stdlib.h>
#include <string.h>

#include "sim/heap.h"
#include "sim/schedule.h"
#include "sim/simulate.h"

typedef struct rank_state {
    int32_t pc;          /* next op */
    int64_t waiting;     /* message key it is blocked on, or -1 */
    double now;          /* time its compute stream is free */
    double busy;         /* seconds of F/B/W */
    double recompute, tp, cp; /* parts of busy */
    double pp_wait;      /* seconds blocked while a message was on the wire */
    double dp_wait;      /* seconds a forward waited for its parameters' all-gather
                          * or ran slower beside it, or waited for a message
                          * that such waits upstream delayed (run_recv) */
    double gather_free;  /* when its parameter all-gathers end (place_gathers) */
    double dp_lag;       /* seconds its clock has been pushed by DP waits, its own
                          * and (through the messages it waited for) its
                          * upstream neighbours' (run_compute, run_recv) */
    double ep_free;      /* time its ep stream (MoE dispatch + combine) is free */
    double ep_from;      /* start of the ep stream's busy span that ends at ep_free */
    double stash, peak_stash;
    double static_bytes;
    double link_free[2]; /* directed links to the next / previous rank */
    double commit_at;    /* when the open commit was posted, -1 = none */
    double commit_done;  /* ... and when its sends have all landed */
} rank_state;

typedef struct engine {
    mp_schedule_kind kind;
    int32_t p, v, m, n_stages;
    const mp_pipeline_cost *pc;
    bool zb;
    double opt_slow; /* the optimizer step slowed by the next step's gathers (place_gathers) */
    mp_op_list *lists;
    rank_state *ranks;
    double *arrival;     /* per message key: landing time, -1 = not sent yet */
    double *xfer_start;  /* per message key: when it got onto the link */
    double *msg_lag;     /* per message key: the sender's dp_lag (with gathers only) */
    int32_t *grads_left; /* per stage: weight-gradient ops still to run */
    double *last_grad_start, *last_grad_end; /* per stage: the last one's span */
    /* aligned DP (pc->dp_aligned with dp_overlap; place_dp) and the
     * parameter all-gathers at the step's start (pc->dp_gather with
     * dp_overlap; place_gathers): per stage */
    bool aligned, gathers;
    int32_t *launch_left; /* backwards still to run before its reduction launches, -1 unarmed */
    double *launch_at;    /* when its reduction launches, -1: after the last backward */
    double *params_ready; /* when its first forward may start, -1 once it has */
    double *gather_end;   /* when its parameters' all-gather ends */
    mp_heap heap;
    bool record;
    bool async_p2p;
    bool commits;        /* DualPipe(V), Megatron's interleaved batches: transfers
                          * posted a commit at a time */
    /* ep_overlap (mp_sim_options): on 1F1B and interleaved 1F1B Megatron-Core's
     * combined 1F1B (combined: each steady-state B with the F after it as
     * one merged pass, run_pair; the passes alone keep their all-to-all
     * inline), on the other schedules the ep stream (stream_ep: an op's
     * dispatch and combine after its compute, under the next op's);
     * DualPipe(V) (fb_merged): each F&B unit's F with its B and W as one
     * merged pass (run_fb), the passes alone inline as combined 1F1B's;
     * ZB-V inline: nothing merges its passes (Megatron-Core's merged pass
     * is combined 1F1B's, which ZB-V is not; DualPipe's repository merges
     * only DualPipe(V)'s F&B units), as the estimate counts it */
    bool combined, stream_ep, fb_merged;
    /* stream_ep: per (virtual stage, micro-batch), when the F's and the B's
     * output is complete, its combine done (run_ep; read by the op of the
     * same micro-batch that consumes it: run_send, and B after its F);
     * combined with async p2p: fwd_ready alone, for the merged pass's
     * forward output, sent before the pass ends (run_pair) */
    double *fwd_ready, *bwd_ready;
    mp_sim_result *out;
    mp_sim_memory_point *mem;
    size_t n_mem, cap_mem;
    size_t *last_mem;    /* per rank: index of its latest memory point + 1, 0 = none */
    bool oom;
} engine;

/* The virtual stage (index into the stage costs) chunk `chunk` of `rank` runs. */
static int32_t stage_index(const engine *e, int32_t rank, int32_t chunk)
{
    return (int32_t)mp_schedule_stage(e->kind, e->p, rank, chunk);
}

static const mp_stage_cost *stage_of(const engine *e, int32_t rank, int32_t chunk)
{
    return &e->pc->stages[stage_index(e, rank, chunk)];
}

/* Message key: direction, destination virtual stage, micro-batch. */
static int64_t message_key(const engine *e, int dir, int32_t dest_stage, int32_t mb)
{
    return ((int64_t)dir * e->n_stages + dest_stage) * e->m + mb;
}

static double op_duration(const engine *e, const mp_stage_cost *sc, mp_op_kind k)
{
    if (k == MP_OP_F)
        return sc->fwd;
    if (!e->zb)
        return sc->bwd;
    /* A cost model that does not split the backward: halve it. */
    if (sc->bwd_input + sc->bwd_weight <= 0)
        return sc->bwd / 2;
    return k == MP_OP_B ? sc->bwd_input : sc->bwd_weight;
}

/* What of a backward of `stage` the deferred output-layer wgrad takes out
 * (mp_pipeline_cost.defer_*: the head stage's first defer_mb micro-batches) */
static double deferred_cut(const engine *e, int32_t stage, int32_t mb)
{
    const mp_pipeline_cost *pc = e->pc;
    return pc->defer_mb > 0 && stage == pc->defer_stage && mb < pc->defer_mb ? pc->defer_w : 0;
}

static void add_event(engine *e, double start, double end, int32_t rank, mp_stream stream,
                      mp_event_kind kind, int32_t mb, int32_t chunk)
{
    if (!e->record || e->oom)
        return;
    mp_event ev = {.start = start, .end = end, .rank = rank, .stream = (uint8_t)stream,
                   .kind = (uint8_t)kind, .microbatch = mb, .chunk = chunk};
    if (mp_timeline_add(&e->out->timeline, &ev, NULL) != MP_OK)
        e->oom = true;
}

static void add_memory(engine *e, double t, int32_t rank, double bytes)
{
    if (!e->record || e->oom)
        return;
    /* A free and an allocation at the same instant are one step, not a dip. */
    size_t last = e->last_mem[rank];
    if (last > 0 && e->mem[last - 1].time == t) {
        e->mem[last - 1].bytes = bytes;
        return;
    }
    if (e->n_mem == e->cap_mem) {
        size_t cap = e->cap_mem ? e->cap_mem * 2 : 1024;
        mp_sim_memory_point *m = realloc(e->mem, cap * sizeof *m);
        if (!m) {
            e->oom = true;
            return;
        }
        e->mem = m;
        e->cap_mem = cap;
    }
    e->mem[e->n_mem++] = (mp_sim_memory_point){.time = t, .rank = rank, .bytes = bytes};
    e->last_mem[rank] = e->n_mem;
}

/* The MoE dispatch and combine of an F or B (its stage's ep_comm), on the ep
 * stream. Inline (no overlap): the last `ep` seconds of the op, its compute
 * stream waiting. Overlapped: after the op's compute, once the ep stream is
 * free, while the compute stream goes on with the next op; returns the
 * seconds taken off the compute stream. */
static double *ready_slot(const engine *e, int32_t r, const mp_op *op, bool fwd)
{
    double *a = fwd ? e->fwd_ready : e->bwd_ready;
    return a ? &a[(int64_t)stage_index(e, r, op->chunk) * e->m + op->microbatch] : NULL;
}

static double run_ep(engine *e, int32_t r, const mp_op *op, double ep, double start,
                     double *end)
{
    rank_state *rs = &e->ranks[r];
    double *ready = op->kind == MP_OP_W ? NULL : ready_slot(e, r, op, op->kind == MP_OP_F);
    if (ready)
        *ready = *end;
    if (ep <= 0 || op->kind == MP_OP_W)
        return 0;
    if (!e->stream_ep) {
        add_event(e, *end - ep, *end, r, MP_STREAM_EP, MP_EV_EP_COMM, op->microbatch, op->chunk);
        return 0;
    }
    double compute_end = *end - ep > start ? *end - ep : start;
    double from = compute_end > rs->ep_free ? compute_end : rs->ep_free;
    if (from > rs->ep_free)
        rs->ep_from = from; /* a new busy span; else the span goes on */
    rs->ep_free = from + ep;
    if (ready)
        *ready = rs->ep_free;
    add_event(e, from, rs->ep_free, r, MP_STREAM_EP, MP_EV_EP_COMM, op->microbatch, op->chunk);
    *end = compute_end;
    return ep;
}

/* SM contention (docs/cost-model.md): seconds that `work` seconds of compute
 * starting at `start` take while earlier dispatches and combines are still
 * on the ep stream, whose kernels hold pc->ep_sm_share of the SMs: full
 * rate before the busy span, 1 - share in it, full rate after it. */
static double contended(const engine *e, const rank_state *rs, double start, double work)
{
    double f = e->pc->ep_sm_share;
    if (!e->stream_ep || !(f > 0) || !(work > 0) || rs->ep_free <= start)
        return work;
    double from = rs->ep_from > start ? rs->ep_from : start;
    double lead = from - start;
    if (work <= lead)
        return work;
    double rest = work - lead, span = rs->ep_free - from;
    double after = rest + f * span; /* the span's work done at 1 - f, the rest after it */
    if (f >= 1)
        return lead + after;
    double within = rest / (1 - f); /* all of it inside the span */
    return lead + (within < after ? within : after);
}

/* A micro-batch's weight gradients of `stage` are complete (its B, or W
 * where the backward is split), computed from start to end on rank r. */
static void grads_done(engine *e, int32_t r, int32_t stage, double start, double end)
{
    if (e->aligned) {
        /* Megatron-Core launches chunk j's reduction r backwards after
         * its last one on pipeline rank r (schedules.py,
         * backward_step_helper_postprocess) */
        for (int32_t c = 0; c < e->v; c++) {
            int32_t sk = stage_index(e, r, c);
            if (e->launch_left[sk] > 0 && --e->launch_left[sk] == 0)
                e->launch_at[sk] = end;
        }
    }
    if (--e->grads_left[stage] == 0) {
        e->last_grad_start[stage] = start;
        e->last_grad_end[stage] = end;
        if (e->aligned) {
            e->launch_left[stage] = r;
            if (r == 0)
                e->launch_at[stage] = end;
        }
    }
}

static void run_compute(engine *e, int32_t r, const mp_op *op)
{
    rank_state *rs = &e->ranks[r];
    const mp_stage_cost *sc = stage_of(e, r, op->chunk);
    mp_op_kind k = (mp_op_kind)op->kind;
    int32_t stage = stage_index(e, r, op->chunk);
    double dp_wait0 = rs->dp_wait;
    bool first_fwd = e->gathers && k == MP_OP_F && e->params_ready[stage] >= 0;
    if (first_fwd && e->params_ready[stage] > rs->now) {
        /* align_param_gather: the chunk's first forward waits for its parameters */
        rs->dp_wait += e->params_ready[stage] - rs->now;
        rs->now = e->params_ready[stage];
    }
    if (k == MP_OP_B && e->fwd_ready) {
        /* the backward starts from its own forward's output, the loss's
         * input on the last stage: complete once that forward's combine is
         * done (an exposed part of the all-to-all) */
        double ready = *ready_slot(e, r, op, true);
        if (ready > rs->now) {
            rs->busy += ready - rs->now;
            rs->tp += ready - rs->now;
            rs->now = ready;
        }
    }
    double start = rs->now, dur = op_duration(e, sc, k);
    double cut = k == MP_OP_B ? deferred_cut(e, stage, op->microbatch) : 0;
    dur = dur > cut ? dur - cut : 0;
    double ep = k == MP_OP_F ? sc->ep_comm_fwd : sc->ep_comm_bwd;
    if (ep > dur)
        ep = dur;
    if (op->kind == MP_OP_W)
        ep = 0; /* W carries no dispatch or combine (run_ep) */
    dur = ep + contended(e, rs, start, dur - ep);
    /* beside the parameter all-gathers the compute runs at 1 - dp_sm_gather
     * of its rate (mp_overlap_excess); the lost time counts as DP */
    double slow = 0, sg = e->pc->dp_sm_gather;
    if (e->gathers && sg > 0 && start < rs->gather_free) {
        slow = sg * (rs->gather_free - start);
        if (sg < 1 && dur * sg / (1 - sg) < slow)
            slow = dur * sg / (1 - sg);
        rs->dp_wait += slow;
    }
    double end = start + dur + slow;
    double hidden = run_ep(e, r, op, ep, start, &end);
    if (first_fwd) {
        /* its last layers' weights arrive with the gather's last bucket */
        if (e->gather_end[stage] > end) {
            rs->dp_wait += e->gather_end[stage] - end;
            end = e->gather_end[stage];
        }
        e->params_ready[stage] = -1;
    }
    rs->dp_lag += rs->dp_wait - dp_wait0;
    dur -= hidden;
    rs->busy += dur;
    rs->now = end;
    if (k == MP_OP_F) {
        /* Activations are allocated as the forward runs: count them from its start. */
        rs->stash += sc->act_bytes;
        if (rs->stash > rs->peak_stash)
            rs->peak_stash = rs->stash;
        add_memory(e, start, r, rs->static_bytes + rs->stash);
        add_event(e, start, end, r, MP_STREAM_COMPUTE, MP_EV_F, op->microbatch, op->chunk);
        /* the exposed TP part; the dispatch and combine are on the ep stream */
        double tp = sc->tp_comm_fwd - ep;
        rs->tp += tp + (hidden > 0 ? 0 : ep);
        rs->cp += sc->cp_comm_fwd;
        if (tp > 0) {
            double tp_end = hidden > 0 ? end : end - ep;
            add_event(e, tp_end - tp, tp_end, r, MP_STREAM_TP, MP_EV_TP_COMM, op->microbatch,
                      op->chunk);
        }
        if (sc->cp_comm_fwd > 0)
            add_event(e, start, start + sc->cp_comm_fwd, r, MP_STREAM_CP, MP_EV_CP_COMM,
                      op->microbatch, op->chunk);
        return;
    }
    if (k == MP_OP_B) {
        /* The recomputed forward runs first: shown as its own "R" event. */
        double rc = sc->recompute > 0 && sc->recompute < dur ? sc->recompute : 0;
        if (rc > 0)
            add_event(e, start, start + rc, r, MP_STREAM_COMPUTE, MP_EV_RECOMPUTE, op->microbatch,
                      op->chunk);
        add_event(e, start + rc, end, r, MP_STREAM_COMPUTE, MP_EV_B, op->microbatch, op->chunk);
        rs->recompute += sc->recompute;
        double tp = sc->tp_comm_bwd - ep;
        rs->tp += tp + (hidden > 0 ? 0 : ep);
        rs->cp += sc->cp_comm_bwd;
        if (tp > 0) {
            double tp_end = hidden > 0 ? end : end - ep;
            add_event(e, tp_end - tp, tp_end, r, MP_STREAM_TP, MP_EV_TP_COMM, op->microbatch,
                      op->chunk);
        }
        if (sc->cp_comm_bwd > 0)
            add_event(e, start, start + sc->cp_comm_bwd, r, MP_STREAM_CP, MP_EV_CP_COMM,
                      op->microbatch, op->chunk);
        if (e->zb && sc->edge_bytes > 0) {
            /* the loss's logits go with the backward of the loss, not with W */
            rs->stash -= sc->edge_bytes;
            add_memory(e, end, r, rs->static_bytes + rs->stash);
        }
        if (e->zb && sc->w_hold_bytes > 0 && !mp_op_list_bw_adjacent(&e->lists[r], rs->pc, +1)) {
            rs->stash += sc->w_hold_bytes;
            if (rs->stash > rs->peak_stash)
                rs->peak_stash = rs->stash;
            add_memory(e, end, r, rs->static_bytes + rs->stash);
        }
    } else {
        add_event(e, start, end, r, MP_STREAM_COMPUTE, MP_EV_W, op->microbatch, op->chunk);
    }
    /* The op that ends a micro-batch's use of its activations and produces its
     * weight gradient: B, or W where the backward is split (which keeps what
     * W needs until W). */
    if ((k == MP_OP_B) != e->zb) {
        /* a deferred output-layer wgrad keeps its input and gradient */
        rs->stash -= sc->act_bytes - (e->zb ? sc->edge_bytes : 0.0) -
                     (cut > 0 ? e->pc->defer_hold : 0.0);
        if (k == MP_OP_W && sc->w_hold_bytes > 0 && !mp_op_list_bw_adjacent(&e->lists[r], rs->pc, -1))
            rs->stash -= sc->w_hold_bytes;
        add_memory(e, end, r, rs->static_bytes + rs->stash);
        grads_done(e, r, stage, start, end);
    }
}

/* Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm): the
 * end time of `work` seconds of compute from t while the comm stream runs
 * the spans span[0..n) (in time order, not overlapping), whose kernels hold
 * `share` of the SMs: full rate outside them, 1 - share inside (the rule of
 * contended() for any number of spans). */
static double beside_comm(double t, double work, const double (*span)[2], int n, double share)
{
    for (int i = 0; i < n && work > 0; i++) {
        double a = span[i][0] > t ? span[i][0] : t, b = span[i][1];
        if (b <= t || !(share > 0))
            continue;
        if (work <= a - t)
            return t + work;
        work -= a - t;
        t = a;
        if (share < 1) {
            double cap = (b - t) * (1 - share);
            if (work <= cap)
                return t + work / (1 - share);
            work -= cap;
        }
        t = b;
    }
    return t + (work > 0 ? work : 0);
}

/* A merged pass's piece, when it takes time. */
static void span_event(engine *e, double start, double end, int32_t rank, mp_stream stream,
                       mp_event_kind kind, int32_t mb, int32_t chunk)
{
    if (end > start)
        add_event(e, start, end, rank, stream, kind, mb, chunk);
}

/* One pass's parts (planner/cost.c hide_a2a): the dispatch and the combine
 * (half its all-to-all each), the expert node (of the backward: the input
 * gradients g, the weight gradients w), the rest (attention, router,
 * permutation, exposed TP) and, apart (combined 1F1B), the model chunk's
 * edges: pre, what runs before the merged layers (F's embedding, B's head),
 * and post, what runs after them (F's head, B's embedding). Without apart
 * (DualPipe(V)'s F&B unit) the edges stay in the rest. */
typedef struct pass_parts {
    double a2a_half, experts, wgrad, rest, pre, post;
} pass_parts;

static pass_parts parts_of(const mp_stage_cost *sc, bool fwd, bool apart)
{
    double dur = fwd ? sc->fwd : sc->bwd, ep = fwd ? sc->ep_comm_fwd : sc->ep_comm_bwd;
    double x = fwd ? sc->expert_fwd : sc->expert_bwd;
    ep = ep < dur ? ep : dur;
    x = x < dur - ep ? x : dur - ep;
    double w = fwd ? 0 : sc->expert_wgrad < x ? sc->expert_wgrad : x;
    pass_parts q = {.a2a_half = ep / 2, .experts = x - w, .wgrad = w, .rest = dur - ep - x};
    if (apart) {
        double pre = fwd ? sc->embed_fwd : sc->head_bwd, post = fwd ? sc->head_fwd : sc->embed_bwd;
        q.pre = pre > 0 ? pre < q.rest ? pre : q.rest : 0;
        q.rest -= q.pre;
        q.post = post > 0 ? post < q.rest ? post : q.rest : 0;
        q.rest -= q.post;
    }
    return q;
}

/* The merged pass of a steady-state backward b and the forward f after it
 * (model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run, lines
 * 198-229 of core_v0.14.0 and core_v0.15.0), on the stage's sums (exact for
 * identical layers: each phase of L layers of 1/L of the parts is 1/L of
 * the stage's phase; the estimate takes the same sums). Every node waits for
 * its micro-batch's previous node, and each stream runs in issue order:
 *
 *     comm:    combine B (b_B)  | dispatch F (a_F), dispatch B (a_B)   | combine F (b_F)
 *     compute: rest F (r_F)     | B's expert dgrad g_B, wgrad w_B, F's | rest B (r_B)
 *                               | experts e_F                          |
 *
 * so each phase starts when both streams have ended the one before; in the
 * middle one B's dispatch waits for g_B and F's experts for F's dispatch,
 * w_B (backward_dw) for nothing. Compute beside the comm stream runs at
 * 1 - ep_sm_share of its rate (beside_comm). Combined 1F1B runs the model
 * chunk's edges outside the phases, on the compute stream with no
 * all-to-all beside them: F's embedding and B's head (output layer and
 * loss) before the layer loop, F's head and B's embedding after it
 * (TransformerModelChunkSchedulePlan.run, core_v0.15.0 lines 425-438 and
 * 493-497), as the estimate adds them to the pair whole (planner/cost.c
 * hide_a2a_of); DualPipe(V)'s F&B unit keeps them in its phases. Both
 * outputs are complete when the pass ends, and its sends follow
 * (pair_lists). */
static void run_pair(engine *e, int32_t r, const mp_op *ob, const mp_op *of)
{
    rank_state *rs = &e->ranks[r];
    const mp_stage_cost *sb = stage_of(e, r, ob->chunk), *sf = stage_of(e, r, of->chunk);
    bool apart = !e->fb_merged;
    pass_parts B = parts_of(sb, false, apart), F = parts_of(sf, true, apart);
    /* the deferred wgrad is the head's: out of B's head backward first */
    double cut = deferred_cut(e, stage_index(e, r, ob->chunk), ob->microbatch);
    double cut_head = B.pre < cut ? B.pre : cut;
    B.pre -= cut_head;
    B.rest = B.rest > cut - cut_head ? B.rest - (cut - cut_head) : 0;
    double s = e->pc->ep_sm_share, t0 = rs->now, sp[2][2];
    int32_t mb = ob->microbatch, cb = ob->chunk, mf = of->microbatch, cf = of->chunk;
    if (e->fb_merged) {
        /* DualPipe(V)'s unit pairs two stages of a rank: a pass of a stage
         * without all-to-all (dense layers) waits for no communication, so
         * its compute beyond what covers the other pass's phase-1 (F) or
         * phase-3 (B) all-to-all runs beside that pass's dispatches, after
         * B's expert dgrad (DeepSeek-V3 §3.2.1, Figure 4, whose caption has
         * the two passes' transformer-block boundaries not aligned) */
        double keep_f = B.a2a_half * (1 - s), keep_b = F.a2a_half * (1 - s);
        if (F.a2a_half <= 0 && F.rest > keep_f) {
            F.experts += F.rest - keep_f;
            F.rest = keep_f;
        }
        if (B.a2a_half <= 0 && B.rest > keep_b) {
            B.wgrad += B.rest - keep_b;
            B.rest = keep_b;
        }
    }
    /* DualPipe(V): a pass alone before it may still hold the ep stream
     * (stream_ep), and B waits for its own forward's combine (run_compute) */
    double free_at = e->stream_ep && rs->ep_free > t0 ? rs->ep_free : t0;
    if (e->fb_merged && e->fwd_ready && *ready_slot(e, r, ob, true) > t0) {
        double ready = *ready_slot(e, r, ob, true);
        rs->busy += ready - t0;
        rs->tp += ready - t0;
        t0 = rs->now = ready;
    }
    /* before the layers: F's embedding, then B's head (combined 1F1B) */
    double tl = t0 + F.pre + B.pre;
    span_event(e, t0, t0 + F.pre, r, MP_STREAM_COMPUTE, MP_EV_F, mf, cf);
    span_event(e, t0 + F.pre, tl, r, MP_STREAM_COMPUTE, MP_EV_B, mb, cb);
    /* phase 1: B's combine beside F's attention */
    sp[0][0] = free_at > tl ? free_at : tl;
    sp[0][1] = sp[0][0] + B.a2a_half;
    double rf_end = beside_comm(tl, F.rest, sp, 1, s);
    double t1 = rf_end > sp[0][1] ? rf_end : sp[0][1];
    span_event(e, sp[0][0], sp[0][1], r, MP_STREAM_EP, MP_EV_EP_COMM, mb, cb);
    span_event(e, tl, rf_end, r, MP_STREAM_COMPUTE, MP_EV_F, mf, cf);
    /* phase 2: the dispatches beside the experts, in their event order */
    sp[0][0] = t1;
    sp[0][1] = t1 + F.a2a_half;
    double g_end = beside_comm(t1, B.experts, sp, 1, s);
    sp[1][0] = g_end > sp[0][1] ? g_end : sp[0][1];
    sp[1][1] = sp[1][0] + B.a2a_half;
    double w_end = beside_comm(g_end, B.wgrad, sp, 2, s);
    double ef_start = w_end > sp[0][1] ? w_end : sp[0][1];
    double ef_end = beside_comm(ef_start, F.experts, sp, 2, s);
    double t2 = ef_end > sp[1][1] ? ef_end : sp[1][1];
    span_event(e, sp[0][0], sp[0][1], r, MP_STREAM_EP, MP_EV_EP_COMM, mf, cf);
    span_event(e, sp[1][0], sp[1][1], r, MP_STREAM_EP, MP_EV_EP_COMM, mb, cb);
    span_event(e, t1, w_end, r, MP_STREAM_COMPUTE, MP_EV_B, mb, cb);
    span_event(e, ef_start, ef_end, r, MP_STREAM_COMPUTE, MP_EV_F, mf, cf);
    /* phase 3: F's combine beside B's attention (its recompute first) */
    sp[0][0] = t2;
    sp[0][1] = t2 + F.a2a_half;
    double rb_end = beside_comm(t2, B.rest, sp, 1, s);
    double t3 = rb_end > sp[0][1] ? rb_end : sp[0][1];
    span_event(e, t2, sp[0][1], r, MP_STREAM_EP, MP_EV_EP_COMM, mf, cf);
    double rc = sb->recompute > 0 && sb->recompute < rb_end - t2 ? sb->recompute : 0;
    if (rc > 0)
        span_event(e, t2, t2 + rc, r, MP_STREAM_COMPUTE, MP_EV_RECOMPUTE, mb, cb);
    span_event(e, t2 + rc, rb_end, r, MP_STREAM_COMPUTE, MP_EV_B, mb, cb);
    /* after the layers: F's head (from F's output, its combine done), then
     * B's embedding (combined 1F1B) */
    double t4 = t3 + F.post + B.post;
    span_event(e, t3, t3 + F.post, r, MP_STREAM_COMPUTE, MP_EV_F, mf, cf);
    span_event(e, t3 + F.post, t4, r, MP_STREAM_COMPUTE, MP_EV_B, mb, cb);
    /* beside the parameter all-gathers (run_compute's rule) */
    double dur = t4 - t0, slow = 0, sg = e->pc->dp_sm_gather;
    if (e->gathers && sg > 0 && t0 < rs->gather_free) {
        slow = sg * (rs->gather_free - t0);
        if (sg < 1 && dur * sg / (1 - sg) < slow)
            slow = dur * sg / (1 - sg);
        rs->dp_wait += slow;
        rs->dp_lag += slow;
    }
    double end = t4 + slow;
    /* what the pass hid of the two all-to-alls; the rest is exposed TP */
    double hidden = sf->fwd + sb->bwd - dur;
    hidden = hidden > 0 ? hidden : 0;
    rs->busy += dur;
    rs->recompute += sb->recompute;
    rs->tp += sf->tp_comm_fwd + sb->tp_comm_bwd - hidden;
    rs->cp += sf->cp_comm_fwd + sb->cp_comm_bwd;
    double tp_f = sf->tp_comm_fwd - 2 * F.a2a_half, tp_b = sb->tp_comm_bwd - 2 * B.a2a_half;
    if (tp_f > 0)
        span_event(e, rf_end - tp_f, rf_end, r, MP_STREAM_TP, MP_EV_TP_COMM, mf, cf);
    if (tp_b > 0)
        span_event(e, rb_end - tp_b, rb_end, r, MP_STREAM_TP, MP_EV_TP_COMM, mb, cb);
    if (sf->cp_comm_fwd > 0)
        span_event(e, tl, tl + sf->cp_comm_fwd, r, MP_STREAM_CP, MP_EV_CP_COMM, mf, cf);
    if (sb->cp_comm_bwd > 0)
        span_event(e, t2, t2 + sb->cp_comm_bwd, r, MP_STREAM_CP, MP_EV_CP_COMM, mb, cb);
    /* F's layers allocate their activations as B's layers free theirs: the
     * stash moves by the difference, counted from the pass's start when it
     * grows (a forward's from its start, run_compute) */
    double before = rs->stash;
    rs->stash += sf->act_bytes - sb->act_bytes + (cut > 0 ? e->pc->defer_hold : 0.0);
    double high = rs->stash > before ? rs->stash : before;
    if (high > rs->peak_stash)
        rs->peak_stash = high;
    add_memory(e, t0, r, rs->static_bytes + high);
    add_memory(e, end, r, rs->static_bytes + rs->stash);
    /* With Megatron's overlapped p2p the forward's output goes out on the
     * comm stream once F's last node, its combine, is done, under B's rest
     * (model_chunk_schedule_plan.py, TransformerModelChunkSchedulePlan.run:
     * post_forward on the comm stream after f_schedule_plan's last event,
     * lines 474-479 of core_v0.15.0; with a head, F's output is the loss,
     * complete after the head's forward); B's gradient after B's last node,
     * at the pass's end. Without it both go after the merged step. */
    double *f_ready = ready_slot(e, r, of, true);
    if (f_ready)
        *f_ready = (F.post > 0 ? t3 + F.post : t2 + F.a2a_half) + slow;
    double *b_ready = ready_slot(e, r, ob, false);
    if (b_ready)
        *b_ready = end;
    if (e->stream_ep && t2 + F.a2a_half > rs->ep_free) { /* its last comm span */
        rs->ep_from = t2;
        rs->ep_free = t2 + F.a2a_half;
    }
    grads_done(e, r, stage_index(e, r, ob->chunk), t0, end);
    rs->now = end;
}

/* DualPipe(V)'s F&B unit (deepseek-ai/DualPipe dualpipev.py lines 207-216,
 * dualpipe.py lines 205-214: _forward_backward_chunk; the overlap itself is
 * the module's overlapped_forward_backward, called in
 * _forward_backward_compute_chunk, dualpipev.py lines 120-185): the list's
 * F marked fb, then B of the other chunk with its W (which the unit does not
 * defer), nothing between them (schedule.c dpv_fb). Not the last rank's F0
 * B1 at the turn of the V, which dualpipev.py runs apart "to further reduce
 * bubble size" (line 357), though with p = 1 nothing lies between them in
 * the list. DeepSeek splits each chunk into attention, dispatch, MLP and
 * combine and hides B's combine under F's attention, F's dispatch under B's
 * MLP, B's dispatch under F's MLP and F's combine under B's attention
 * (DeepSeek-V3 technical report §3.2.1 and its Figure 4, as transcribed in
 * Ascend/MindSpeed docs/features/megatron_moe/megatron-moe-fb-overlap.md):
 * the pairing and order of Megatron-Core's merged pass, so run_pair runs it,
 * on the whole backward (B and W: the attention's weight gradients with B's
 * rest, the experts' with B's expert part). Both outputs go out at the
 * unit's next commit, after the pass (_send_forward, _send_backward follow
 * the compute). Returns the ops it took (3), or 0 when op is no F&B unit. */
static int32_t run_fb(engine *e, int32_t r, const mp_op *op)
{
    const mp_op_list *l = &e->lists[r];
    int32_t i = (int32_t)(op - l->ops);
    if (!e->fb_merged || !op->fb || i + 2 >= l->n || op[1].kind != MP_OP_B ||
        op[1].chunk == op->chunk || op[2].kind != MP_OP_W || op[2].chunk != op[1].chunk ||
        op[2].microbatch != op[1].microbatch)
        return 0;
    if (e->gathers && e->params_ready[stage_index(e, r, op->chunk)] >= 0)
        return 0; /* the chunk's first forward waits for its parameters (run_compute) */
    run_pair(e, r, op + 1, op);
    return 3;
}

/* Combined 1F1B's order (combined_1f1b.py; schedules.py
 * get_pp_rank_microbatches): each steady-state backward k runs merged with
 * forward k + w + 1, w being the plain schedule's warm-up, which is the F
 * the list has next after B k's transfers: forward w runs alone as one more
 * warm-up forward ("we schedule one extra micro-batch forward step before
 * the 1f1b stages", core_v0.15.0 schedules.py lines 730-734), and as many
 * backwards alone in the cool-down (without a pipeline the first forward
 * and the last backward, combined_1f1b_schedule_for_no_pipelining). The
 * step receives both inputs before the merged compute and sends both
 * outputs after it (schedules.py, the steady state's
 * send_forward_backward_recv_forward_backward after the merged step;
 * with overlapped p2p the forward's send first, from the comm stream, then
 * the backward's, model_chunk_schedule_plan.py lines 474-485): each
 * [B, SEND_BWD?, RECV_FWD?, F, SEND_FWD?] becomes
 * [RECV_FWD?, B, F, SEND_FWD?, SEND_BWD?], the B and F adjacent
 * (run_pipeline runs them as run_pair). */
static void pair_lists(engine *e)
{
    for (int32_t r = 0; r < e->p; r++) {
        mp_op *ops = e->lists[r].ops;
        int32_t n = e->lists[r].n;
        for (int32_t i = 0; i < n; i++) {
            if (ops[i].kind != MP_OP_B)
                continue;
            int32_t j = i + 1;
            mp_op send = {0}, recv = {0};
            bool has_send = j < n && ops[j].kind == MP_OP_SEND_BWD;
            if (has_send)
                send = ops[j++];
            bool has_recv = j < n && ops[j].kind == MP_OP_RECV_FWD;
            if (has_recv)
                recv = ops[j++];
            if (j >= n || ops[j].kind != MP_OP_F ||
                (e->gathers && e->params_ready[stage_index(e, r, ops[j].chunk)] >= 0 &&
                 ops[j].microbatch == 0))
                continue;
            mp_op b = ops[i], f = ops[j], fsend = {0};
            bool has_fsend = j + 1 < n && ops[j + 1].kind == MP_OP_SEND_FWD;
            if (has_fsend)
                fsend = ops[++j];
            int32_t k = i;
            if (has_recv)
                ops[k++] = recv;
            ops[k++] = b;
            ops[k++] = f;
            if (has_fsend)
                ops[k++] = fsend;
            if (has_send)
                ops[k++] = send;
            i = j;
        }
    }
}

static int32_t link_slot(const engine *e, int32_t from, int32_t to)
{
    return to == (from + 1) % e->p ? 0 : 1;
}

/* Returns the rank woken by this send, or -1. */
static int32_t run_send(engine *e, int32_t r, const mp_op *op)
{
    int32_t peer, peer_chunk;
    if (!mp_op_peer(e->kind, e->p, e->v, r, op, &peer, &peer_chunk))
        return -1;
    bool fwd = op->kind == MP_OP_SEND_FWD;
    int32_t dest_stage = stage_index(e, peer, peer_chunk);
    /* A gradient is the size of the activation that came the other way. */
    double bytes = fwd ? stage_of(e, r, op->chunk)->send_bytes
                       : e->pc->stages[dest_stage].send_bytes;
    double wire = e->pc->p2p_bw > 0 ? bytes / e->pc->p2p_bw : 0;
    rank_state *rs = &e->ranks[r];
    /* DualPipe(V): every send of a commit is posted when the commit is
     * (end_commit), not after the one before it has landed */
    double posted = rs->commit_at >= 0 ? rs->commit_at : rs->now;
    /* the output exists once its op's combine is done (later on the ep stream) */
    const double *ready = ready_slot(e, r, op, fwd);
    double start = ready && *ready > posted ? *ready : posted, land = start;
    if (ready && e->combined)
        start = *ready; /* a merged pass's forward output, sent under its backward (run_pair) */
    if (peer != r) { /* to itself (the V's turn at rank p-1) the data stays put */
        double *link = &rs->link_free[link_slot(e, r, peer)];
        start = start > *link ? start : *link;
        land = start + wire + e->pc->p2p_latency;
        *link = start + wire;
    }
    int64_t key = message_key(e, fwd ? 0 : 1, dest_stage, op->microbatch);
    e->arrival[key] = land;
    e->xfer_start[key] = start;
    if (e->msg_lag)
        e->msg_lag[key] = rs->dp_lag;
    if (land > start)
        add_event(e, start, land, r, MP_STREAM_PP_SEND, fwd ? MP_EV_SEND_FWD : MP_EV_SEND_BWD,
                  op->microbatch, op->chunk);
    /* Megatron waits for its sends before computing again; DeepSpeed's
     * engine then also for the receive its step posts after the send
     * (p2p_serial transfers of the same size) */
    double done = land;
    if (peer != r)
        done += e->pc->p2p_serial * (wire + e->pc->p2p_latency);
    if (rs->commit_at >= 0 && (op->sync || !e->async_p2p)) {
        if (done > rs->commit_done)
            rs->commit_done = done; /* waited for with the rest (end_commit) */
    } else if (!e->async_p2p && done > rs->now) {
        rs->pp_wait += done - rs->now;
        rs->now = done;
    }
    return e->ranks[peer].waiting == key ? peer : -1;
}

/* Returns false when the message has not been sent yet (the rank blocks). */
static bool run_recv(engine *e, int32_t r, const mp_op *op)
{
    bool fwd = op->kind == MP_OP_RECV_FWD;
    int64_t key = message_key(e, fwd ? 0 : 1, stage_index(e, r, op->chunk), op->microbatch);
    rank_state *rs = &e->ranks[r];
    if (e->arrival[key] < 0) {
        rs->waiting = key;
        return false;
    }
    rs->waiting = -1;
    double land = e->arrival[key], on_wire = e->xfer_start[key];
    if (land > rs->now) {
        /* Waiting for a sender still computing is bubble; for data on the wire, pp comm. */
        double from = rs->now > on_wire ? rs->now : on_wire, wait = land - rs->now;
        /* ... except what DP waits upstream added to the sender's clock
         * beyond ours: without them the message would have landed that much
         * earlier, so that part of the wait is DP (to first order) */
        if (e->msg_lag && e->msg_lag[key] > rs->dp_lag) {
            double dp = e->msg_lag[key] - rs->dp_lag;
            if (dp > wait)
                dp = wait;
            rs->dp_wait += dp;
            rs->dp_lag += dp;
            wait -= dp;
        }
        rs->pp_wait += land - from < wait ? land - from : wait;
        rs->now = land;
    }
    if (land > on_wire)
        add_event(e, on_wire, land, r, MP_STREAM_PP_RECV, fwd ? MP_EV_RECV_FWD : MP_EV_RECV_BWD,
                  op->microbatch, op->chunk);
    return true;
}

/* DualPipe(V)'s _commit_and_wait_comm (deepseek-ai/DualPipe dualpipev.py,
 * dualpipe.py): a commit, a run of transfer ops, is posted at once by
 * batch_isend_irecv and waited for whole. Its sends start together when it
 * is posted (run_send), each on its directed link, so sends to the two
 * neighbours are in flight at once and sends to one neighbour follow each
 * other on that link in list order; its receives complete as their messages
 * land (run_recv); the rank goes on once the last of them all is done. */
static bool is_transfer(const mp_op *op)
{
    return op->kind >= MP_OP_SEND_FWD;
}

/* A transfer in a commit: every one on the schedules that post in commits,
 * those marked sync on the overlapped interleaved lists (schedule.c
 * build_interleaved: Megatron-Core's warm-up and cool-down). */
static bool in_commit(const engine *e, const mp_op *op)
{
    return is_transfer(op) && (e->commits || op->sync);
}

static void open_commit(rank_state *rs)
{
    if (rs->commit_at < 0)
        rs->commit_at = rs->commit_done = rs->now;
}

static void end_commit(rank_state *rs)
{
    if (rs->commit_at < 0)
        return;
    if (rs->commit_done > rs->now) { /* waiting for its own sends: p2p */
        rs->pp_wait += rs->commit_done - rs->now;
        rs->now = rs->commit_done;
    }
    rs->commit_at = -1;
}

static mp_status run_pipeline(engine *e, mp_error *err)
{
    for (int32_t r = 0; r < e->p; r++)
        mp_heap_push(&e->heap, 0.0, r);
    mp_heap_item it;
    while (mp_heap_pop(&e->heap, &it)) {
        int32_t r = it.id;
        rank_state *rs = &e->ranks[r];
        /* Run this rank until it blocks on a receive. A rank's times depend
         * only on its own op order and on when its messages land (each link
         * has one sender), so running ahead of other ranks' clocks gives the
         * same times as one pop per op, without the heap traffic. */
        while (rs->pc < e->lists[r].n) {
            const mp_op *op = &e->lists[r].ops[rs->pc];
            bool blocked = false;
            if (in_commit(e, op))
                open_commit(rs);
            switch ((mp_op_kind)op->kind) {
            case MP_OP_B:
                /* combined 1F1B: a B with the F after it is one merged pass */
                if (e->combined && rs->pc + 1 < e->lists[r].n && op[1].kind == MP_OP_F) {
                    run_pair(e, r, op, op + 1);
                    rs->pc++;
                } else {
                    run_compute(e, r, op);
                }
                break;
            case MP_OP_F: {
                /* DualPipe(V): an F&B unit is one merged pass */
                int32_t took = run_fb(e, r, op);
                if (took > 0)
                    rs->pc += took - 1;
                else
                    run_compute(e, r, op);
                break;
            }
            case MP_OP_W: run_compute(e, r, op); break;
            case MP_OP_SEND_FWD:
            case MP_OP_SEND_BWD: {
                int32_t woken = run_send(e, r, op);
                if (woken >= 0)
                    mp_heap_push(&e->heap, e->ranks[woken].now, woken);
                break;
            }
            default:
                /* blocked: the matching send pushes it back */
                blocked = !run_recv(e, r, op);
                break;
            }
            if (blocked)
                break;
            rs->pc++;
            if (rs->commit_at >= 0 &&
                (rs->pc == e->lists[r].n || !in_commit(e, &e->lists[r].ops[rs->pc])))
                end_commit(rs);
        }
    }
    const mp_pipeline_cost *pc = e->pc;
    if (pc->defer_mb > 0 && pc->defer_stage >= 0 && pc->defer_stage < e->n_stages) {
        /* the deferred output-layer wgrad: run back to back after the rank's
         * last op (Megatron-Core finish_embedding_wgrad_compute), and the
         * stage's gradients complete only then */
        for (int32_t r = 0; r < e->p; r++)
            for (int32_t c = 0; c < e->v; c++) {
                if (stage_index(e, r, c) != pc->defer_stage)
                    continue;
                rank_state *rs = &e->ranks[r];
                double start = rs->now, flush = pc->defer_mb * pc->defer_w;
                add_event(e, start, start + flush, r, MP_STREAM_COMPUTE, MP_EV_W, -1, c);
                rs->busy += flush;
                rs->now = start + flush;
                rs->stash -= pc->defer_mb * pc->defer_hold;
                add_memory(e, rs->now, r, rs->static_bytes + rs->stash);
                int32_t st = pc->defer_stage;
                if (e->last_grad_end[st] < rs->now)
                    e->last_grad_end[st] = rs->now;
                if (e->aligned && e->launch_at[st] >= 0 && e->launch_at[st] < rs->now)
                    e->launch_at[st] = rs->now;
            }
    }
    for (int32_t r = 0; r < e->p; r++) {
        if (e->ranks[r].pc < e->lists[r].n) {
            const mp_op *op = &e->lists[r].ops[e->ranks[r].pc];
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "schedule",
                                "%s schedule deadlocks (p=%d v=%d m=%d): rank %d waits forever "
                                "at op %d (%s %d.%d)",
                                mp_schedule_name(e->kind), (int)e->p, (int)e->v, (int)e->m,
                                (int)r, (int)e->ranks[r].pc,
                                mp_op_kind_name((mp_op_kind)op->kind), (int)op->microbatch,
                                (int)op->chunk);
        }
    }
    return MP_OK;
}

/* The most loaded rank's gradient bytes (a chunk's share of dp_time is its
 * grad_bytes over these). */
static double max_rank_grad(const engine *e)
{
    double max_grad = 0;
    for (int32_t r = 0; r < e->p; r++) {
        double g = 0;
        for (int32_t c = 0; c < e->v; c++)
            g += stage_of(e, r, c)->grad_bytes;
        if (g > max_grad)
            max_grad = g;
    }
    return max_grad;
}

/* Megatron-Core interleaved 1F1B with --overlap-grad-reduce and
 * align_grad_reduce (docs/cost-model.md §5, planner/cost.c aligned_chunks):
 * each chunk's whole reduction is one launch on the dp stream, after its
 * last backward (launch_at; still pending after the cooldown: at the
 * compute's end), queued behind earlier ones. What overlaps compute slows it
 * by the DP kernels' share of the SMs (mp_overlap_excess): the compute's end
 * moves by that share of the overlap. The tied-embedding sync follows. */
static double place_dp_aligned(engine *e, const double *compute_end, double max_grad)
{
    const mp_pipeline_cost *pc = e->pc;
    double tail = pc->dp_tied + pc->dp_gather_sync;
    double red = pc->dp_time - pc->dp_gather - tail, ready_all = 0;
    if (red < 0)
        red = 0;
    for (int32_t r = 0; r < e->p; r++) {
        double ce = compute_end[r];
        int32_t order[MP_MAX_STAGES];
        double at[MP_MAX_STAGES];
        for (int32_t c = 0; c < e->v; c++) {
            double t = e->launch_at[stage_index(e, r, c)];
            if (t < 0 || t > ce)
                t = ce;
            int32_t i = c;
            while (i > 0 && at[i - 1] > t) {
                order[i] = order[i - 1];
                at[i] = at[i - 1];
                i--;
            }
            order[i] = c;
            at[i] = t;
        }
        double dp_free = 0, overlapped = 0, ce2 = ce;
        bool contended = false;
        for (int32_t i = 0; i < e->v; i++) {
            int32_t c = order[i];
            double share = max_grad > 0 ? stage_of(e, r, c)->grad_bytes / max_grad : 1.0 / e->v;
            double dur = red * share;
            if (at[i] >= ce && !contended) {
                ce2 = ce + pc->dp_sm_reduce * overlapped;
                contended = true;
            }
            double launch = at[i] >= ce ? ce2 : at[i];
            double start = launch > dp_free ? launch : dp_free, end = start + dur;
            if (start < ce)
                overlapped += (end < ce ? end : ce) - start;
            if (dur > 0)
                add_event(e, start, end, r, MP_STREAM_DP, MP_EV_DP_COMM, -1, c);
            dp_free = end;
        }
        if (!contended)
            ce2 = ce + pc->dp_sm_reduce * overlapped;
        /* the tied sync, then a synchronous parameter gather */
        if (tail > 0) {
            double start = ce2 > dp_free ? ce2 : dp_free;
            add_event(e, start, start + tail, r, MP_STREAM_DP, MP_EV_DP_COMM, -1, -1);
            dp_free = start + tail;
        }
        double ready = ce2 > dp_free ? ce2 : dp_free;
        if (ready > ready_all)
            ready_all = ready;
    }
    return ready_all;
}

/* The parameter all-gathers at the step's start (planner/cost.c
 * mp_dp_early_gather_exposed, mp_dp_gather_due_exposed): interleaved with
 * align_param_gather, every rank starts its chunks' gathers together, in
 * chunk order on the dp stream; one chunk per rank, its gather from the first
 * forward's pre-hook, which the host reaches at once; the V schedules
 * (dp_tail) the same, chunk 0's first forward coming before chunk 1's. Chunk 0's first forward starts after its first
 * bucket (pipeline rank 0's; on the other ranks the chunk is one bucket, its
 * whole gather: planner/cost.c first_bucket_frac) and ends no earlier than
 * its gather; each later chunk's first forward waits for its gather; compute beside them runs at 1 -
 * dp_sm_gather of its rate (run_compute). With dp_gather_opt_step
 * (--overlap-param-gather-with-optimizer-step) chunk 0's gather, one bucket,
 * began under the previous optimizer step, the part of it after chunk 0's
 * share: only what is left of it runs here, and the step's optimizer is
 * slowed by dp_sm_gather of the overlap (returned: the latest rank's). */
static double place_gathers(engine *e)
{
    const mp_pipeline_cost *pc = e->pc;
    double max_grad = max_rank_grad(e), opt_slow = 0;
    for (int32_t r = 0; r < e->p; r++) {
        double t = 0, ahead = 0;
        if (pc->dp_gather_opt_step) {
            double all = 0;
            for (int32_t c = 0; c < e->v; c++)
                all += stage_of(e, r, c)->grad_bytes;
            ahead = all > 0 ? pc->optimizer * (1 - stage_of(e, r, 0)->grad_bytes / all) : 0;
        }
        for (int32_t c = 0; c < e->v; c++) {
            int32_t k = stage_index(e, r, c);
            double gb = stage_of(e, r, c)->grad_bytes;
            double g = max_grad > 0 ? pc->dp_gather * gb / max_grad : pc->dp_gather / e->v;
            if (c == 0 && ahead > 0) {
                double slow = pc->dp_sm_gather * (ahead < g ? ahead : g);
                opt_slow = slow > opt_slow ? slow : opt_slow;
                g = g > ahead ? g - ahead : 0; /* what is left at the step's start */
            }
            if (g > 0)
                add_event(e, t, t + g, r, MP_STREAM_DP, MP_EV_DP_COMM, -1, c);
            t += g;
            e->gather_end[k] = t;
            e->params_ready[k] = t;
            if (r == 0 && c == 0 && !pc->dp_gather_opt_step) {
                /* Megatron-Core buckets pipeline rank 0's first chunk only
                 * (planner/cost.c first_bucket_frac): elsewhere the first
                 * forward waits for the chunk's whole gather */
                double b0 = gb > 0 ? pc->dp_bucket_bytes / gb : 1.0;
                if (b0 > 1)
                    b0 = 1;
                e->params_ready[k] = b0 * g;
            }
        }
        e->ranks[r].gather_free = t;
    }
    return opt_slow;
}

/* The split-backward schedules on Megatron-LM with overlap (pc->dp_tail;
 * planner/cost.c mp_dp_tail_reduce_exposed): a chunk's buckets fill as its
 * last weight-gradient op (W; B where the op list fuses them) runs, so its
 * reduction starts with that op (or when the dp stream is free) and its last
 * bucket, dp_bucket_bytes of the chunk's grad_bytes, only after the op ends.
 * The chunks in the order their last ops start, one at a time; what overlaps
 * compute slows it by the DP kernels' SM share: the compute's end moves by
 * that share of the overlap. The tied-embedding sync follows. */
static double place_dp_tail(engine *e, const double *compute_end, double max_grad)
{
    const mp_pipeline_cost *pc = e->pc;
    double red = pc->dp_time - (e->gathers ? pc->dp_gather : 0) - pc->dp_tied, ready_all = 0;
    if (red < 0)
        red = 0;
    for (int32_t r = 0; r < e->p; r++) {
        double ce = compute_end[r];
        int32_t order[MP_MAX_STAGES];
        for (int32_t c = 0; c < e->v; c++) {
            int32_t i = c;
            double t = e->last_grad_start[stage_index(e, r, c)];
            while (i > 0 && e->last_grad_start[stage_index(e, r, order[i - 1])] > t) {
                order[i] = order[i - 1];
                i--;
            }
            order[i] = c;
        }
        double dp_free = 0, overlapped = 0;
        for (int32_t i = 0; i < e->v; i++) {
            int32_t c = order[i], stage = stage_index(e, r, c);
            double gb = stage_of(e, r, c)->grad_bytes;
            double share = max_grad > 0 ? gb / max_grad : 1.0 / e->v;
            double dur = red * share;
            /* Megatron-Core buckets pipeline rank 0's first chunk only
             * (planner/cost.c first_bucket_frac); a chunk of one bucket is
             * reduced from its last op's end */
            double tail = r == 0 && c == 0 && gb > 0 && pc->dp_bucket_bytes < gb
                              ? pc->dp_bucket_bytes / gb
                              : 1.0;
            double from = tail >= 1.0 ? e->last_grad_end[stage] : e->last_grad_start[stage];
            double start = from > dp_free ? from : dp_free;
            double end = start + dur;
            if (e->last_grad_end[stage] + tail * dur > end)
                end = e->last_grad_end[stage] + tail * dur;
            /* its kernels run dur seconds (the last bucket's wait for the
             * op is no work), beside compute until ce */
            if (start < ce)
                overlapped += ce - start < dur ? ce - start : dur;
            if (dur > 0)
                add_event(e, start, end, r, MP_STREAM_DP, MP_EV_DP_COMM, -1, c);
            dp_free = end;
        }
        double ce2 = ce + pc->dp_sm_reduce * overlapped;
        if (pc->dp_tied > 0) {
            double start = ce2 > dp_free ? ce2 : dp_free;
            add_event(e, start, start + pc->dp_tied, r, MP_STREAM_DP, MP_EV_DP_COMM, -1, -1);
            dp_free = start + pc->dp_tied;
        }
        double ready = ce2 > dp_free ? ce2 : dp_free;
        if (ready > ready_all)
            ready_all = ready;
    }
    return ready_all;
}

/* DP reductions per chunk (dp stream) and the optimizer step. Returns the time
 * the last rank's gradients are reduced. */
static double place_dp(engine *e, bool dp_overlap, const double *compute_end)
{
    const mp_pipeline_cost *pc = e->pc;
    double max_grad = max_rank_grad(e), ready_all = 0;
    if (dp_overlap && e->aligned)
        return place_dp_aligned(e, compute_end, max_grad);
    if (dp_overlap && e->pc->dp_tail && e->zb)
        return place_dp_tail(e, compute_end, max_grad);
    /* The reductions: dp_time less the gathers placed at the step's start
     * (place_gathers) and the tied sync after them. The part of a reduction
     * that cannot hide under backward: the last bucket. */
    double tail = pc->dp_tied + pc->dp_gather_sync;
    double red = pc->dp_time - (e->gathers ? pc->dp_gather : 0) - tail;
    double red_exposed = pc->dp_exposed - (e->gathers ? pc->dp_gather_exposed : 0) - tail;
    if (red < 0)
        red = 0;
    double tail_frac = red > 0 ? red_exposed / red : 0;
    if (tail_frac < 0)
        tail_frac = 0;
    if (tail_frac > 1)
        tail_frac = 1;
    for (int32_t r = 0; r < e->p; r++) {
        double dp_free = 0;
        /* Chunks in the order their gradients complete. */
        int32_t order[MP_MAX_STAGES];
        int32_t n = 0;
        for (int32_t c = 0; c < e->v; c++) {
            int32_t i = n++;
            double t = e->last_grad_end[stage_index(e, r, c)];
            while (i > 0 && e->last_grad_end[stage_index(e, r, order[i - 1])] > t) {
                order[i] = order[i - 1];
                i--;
            }
            order[i] = c;
        }
        for (int32_t i = 0; i < n && red > 0; i++) {
            int32_t c = order[i], stage = stage_index(e, r, c);
            double share = max_grad > 0 ? stage_of(e, r, c)->grad_bytes / max_grad
                                        : 1.0 / e->v;
            double dur = red * share, start, end;
            if (dp_overlap) {
                /* Buckets fill during the chunk's last backward; the last
                 * one cannot start before that backward ends. */
                start = e->last_grad_start[stage] > dp_free ? e->last_grad_start[stage] : dp_free;
                end = start + dur;
                /* Megatron-LM's 1F1B (planner/cost.c rank_whole_reduce):
                 * a rank > 0 is one bucket, all of it after the backward;
                 * rank 0 leaves dp_reduce_exposed0 of its own past it */
                double tf = tail_frac;
                if (pc->dp_rank_whole)
                    tf = r > 0 ? 1.0 : dur > 0 ? pc->dp_reduce_exposed0 / dur : 0;
                if (tf > 1)
                    tf = 1;
                double tail_end = e->last_grad_end[stage] + dur * tf;
                if (tail_end > end)
                    end = tail_end;
            } else {
                start = compute_end[r] > dp_free ? compute_end[r] : dp_free;
                end = start + dur;
            }
            if (dur > 0)
                add_event(e, start, end, r, MP_STREAM_DP, MP_EV_DP_COMM, -1, c);
            dp_free = end;
        }
        /* the tied sync, then a synchronous parameter gather */
        if (tail > 0) {
            double start = compute_end[r] > dp_free ? compute_end[r] : dp_free;
            add_event(e, start, start + tail, r, MP_STREAM_DP, MP_EV_DP_COMM, -1, -1);
            dp_free = start + tail;
        }
        double ready = compute_end[r] > dp_free ? compute_end[r] : dp_free;
        if (ready > ready_all)
            ready_all = ready;
    }
    return ready_all;
}

/* Memory points grouped by rank (each rank's are already in time order). */
static mp_status group_memory(engine *e)
{
    mp_sim_result *out = e->out;
    if (!e->record || e->n_mem == 0)
        return MP_OK;
    out->memory = malloc(e->n_mem * sizeof *out->memory);
    size_t *start = calloc((size_t)e->p + 1, sizeof *start);
    if (!out->memory || !start) {
        free(start);
        return MP_ENOMEM;
    }
    for (size_t i = 0; i < e->n_mem; i++)
        start[e->mem[i].rank + 1]++;
    for (int32_t r = 0; r < e->p; r++)
        start[r + 1] += start[r];
    for (size_t i = 0; i < e->n_mem; i++)
        out->memory[start[e->mem[i].rank]++] = e->mem[i];
    out->n_memory = e->n_mem;
    free(start);
    return MP_OK;
}

void mp_sim_result_free(mp_sim_result *r)
{
    if (!r)
        return;
    free(r->bubble_fraction);
    free(r->peak_memory);
    free(r->memory);
    mp_timeline_free(&r->timeline);
    r->bubble_fraction = r->peak_memory = NULL;
    r->memory = NULL;
    r->n_memory = 0;
}

static void engine_free(engine *e)
{
    if (e->lists)
        for (int32_t r = 0; r < e->p; r++)
            mp_op_list_free(&e->lists[r]);
    free(e->lists);
    free(e->ranks);
    free(e->arrival);
    free(e->xfer_start);
    free(e->msg_lag);
    free(e->grads_left);
    free(e->last_grad_start);
    free(e->last_grad_end);
    free(e->launch_left);
    free(e->launch_at);
    free(e->params_ready);
    free(e->gather_end);
    free(e->fwd_ready);
    free(e->bwd_ready);
    free(e->mem);
    free(e->last_mem);
    mp_heap_free(&e->heap);
}

static mp_status nomem(mp_error *err)
{
    return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory in the simulator");
}

static mp_status engine_setup(engine *e, mp_error *err)
{
    int32_t p = e->p, n = e->n_stages;
    /* 2 messages per (virtual stage, micro-batch): at most 2^21 after
     * mp_sim_check_size */
    size_t keys = (size_t)2 * (size_t)n * (size_t)e->m;
    e->lists = calloc((size_t)p, sizeof *e->lists);
    e->ranks = calloc((size_t)p, sizeof *e->ranks);
    e->arrival = malloc(keys * sizeof *e->arrival);
    e->xfer_start = malloc(keys * sizeof *e->xfer_start);
    e->grads_left = malloc((size_t)n * sizeof *e->grads_left);
    e->last_grad_start = calloc((size_t)n, sizeof *e->last_grad_start);
    e->last_grad_end = calloc((size_t)n, sizeof *e->last_grad_end);
    e->last_mem = calloc((size_t)p, sizeof *e->last_mem);
    if (!e->last_mem || !e->lists || !e->ranks || !e->arrival || !e->xfer_start || !e->grads_left ||
        !e->last_grad_start || !e->last_grad_end || !mp_heap_init(&e->heap, p))
        return nomem(err);
    for (size_t i = 0; i < keys; i++)
        e->arrival[i] = -1;
    for (int32_t k = 0; k < n; k++)
        e->grads_left[k] = e->m;
    if (e->aligned || e->gathers) {
        e->launch_left = malloc((size_t)n * sizeof *e->launch_left);
        e->launch_at = malloc((size_t)n * sizeof *e->launch_at);
        e->params_ready = malloc((size_t)n * sizeof *e->params_ready);
        e->gather_end = malloc((size_t)n * sizeof *e->gather_end);
        if (!e->launch_left || !e->launch_at || !e->params_ready || !e->gather_end)
            return nomem(err);
        if (e->gathers && !(e->msg_lag = calloc(keys, sizeof *e->msg_lag)))
            return nomem(err);
        for (int32_t k = 0; k < n; k++) {
            e->launch_left[k] = -1;
            e->launch_at[k] = -1;
            e->params_ready[k] = -1;
            e->gather_end[k] = 0;
        }
    }
    /* combined 1F1B pairs the lists whose transfers sit at their ops
     * (pair_lists); with synchronous p2p the runs of transfers it leaves
     * between the merged passes are Megatron's batches (commits) */
    mp_status st;
    if (e->combined) {
        mp_schedule_opts o = {.overlap_p2p = true};
        st = mp_schedule_build_all_opts(e->kind, p, e->v, e->m, &o, e->lists, err);
    } else {
        st = mp_sim_schedule(e->kind, p, e->v, e->m, e->pc, -1, e->lists, err);
    }
    if (st != MP_OK)
        return st;
    if (e->gathers)
        e->opt_slow = place_gathers(e);
    if (e->combined)
        pair_lists(e);
    if (e->stream_ep || (e->combined && e->async_p2p)) {
        e->fwd_ready = calloc(keys / 2, sizeof *e->fwd_ready);
        if (e->stream_ep)
            e->bwd_ready = calloc(keys / 2, sizeof *e->bwd_ready);
        if (!e->fwd_ready || (e->stream_ep && !e->bwd_ready))
            return nomem(err);
    }
    for (int32_t r = 0; r < p; r++) {
        rank_state *rs = &e->ranks[r];
        rs->waiting = -1;
        rs->commit_at = -1;
        rs->static_bytes = e->pc->other_bytes;
        for (int32_t c = 0; c < e->v; c++)
            rs->static_bytes += stage_of(e, r, c)->static_bytes;
        add_memory(e, 0, r, rs->static_bytes);
    }
    return MP_OK;
}

static mp_status check_cost(mp_schedule_kind s, int32_t p, int32_t v,
                            const mp_pipeline_cost *pc, mp_error *err)
{
    if (!pc || !pc->stages || (int64_t)pc->n_stages != mp_schedule_n_stages(s, p, v))
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "stage costs (%d stages) do not match %s's %lld for pp %d, %d chunks",
                            pc ? (int)pc->n_stages : 0, mp_schedule_name(s),
                            (long long)mp_schedule_n_stages(s, p, v), (int)p, (int)v);
    for (int32_t k = 0; k < pc->n_stages; k++) {
        const mp_stage_cost *s = &pc->stages[k];
        double vals[] = {s->fwd, s->bwd, s->bwd_input, s->bwd_weight, s->send_bytes,
                         s->act_bytes, s->static_bytes, s->grad_bytes, s->ep_comm_fwd,
                         s->ep_comm_bwd, s->expert_fwd, s->expert_bwd, s->expert_wgrad};
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
            if (!(vals[i] >= 0) || vals[i] > 1e300)
                return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                    "stage %d has a negative or non-finite cost", (int)k);
    }
    if (!(pc->p2p_latency >= 0) || !(pc->p2p_bw >= 0) || !(pc->p2p_serial >= 0) ||
        !(pc->dp_time >= 0) ||
        !(pc->optimizer >= 0))
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "pipeline costs must be non-negative");
    if (!(pc->ep_sm_share >= 0 && pc->ep_sm_share <= 1))
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "ep_sm_share must be a share of the SMs, 0 to 1 (got %g)",
                            pc->ep_sm_share);
    return MP_OK;
}

/* The critical pipeline rank, the one whose breakdown the result reports
 * (docs/simulator.md, "What comes out"): the rank with the least idle time in
 * the pipeline, i.e. the most time taken by its own work — F/B/W (with their
 * exposed TP, CP and EP parts) plus its exposed p2p (pp_wait) and DP waits
 * (dp_wait). The pipeline makespan is at least every rank's occupied time; the
 * rank that comes closest has no slack to give, so in the steady state it sets
 * the pace and the others wait on it: the most loaded stage of an uneven
 * pipeline, never a lightly loaded first stage that merely finishes last.
 * Ties (within 1e-9 of the makespan, e.g. uniform stages) go to the rank with
 * more F/B/W time, then to the lowest rank. */
static int32_t critical_rank(const engine *e, double pm)
{
    double tol = 1e-9 * pm;
    int32_t crit = 0;
    for (int32_t r = 1; r < e->p; r++) {
        const rank_state *a = &e->ranks[r], *c = &e->ranks[crit];
        double occ_a = a->busy + a->pp_wait + a->dp_wait;
        double occ_c = c->busy + c->pp_wait + c->dp_wait;
        if (occ_a > occ_c + tol || (occ_a >= occ_c - tol && a->busy > c->busy + tol))
            crit = r;
    }
    return crit;
}

static mp_status fill_result(engine *e, bool dp_overlap, mp_error *err)
{
    mp_sim_result *out = e->out;
    int32_t p = e->p;
    size_t np = (size_t)(p > 0 ? p : 1);
    double *compute_end = calloc(np, sizeof *compute_end);
    out->bubble_fraction = calloc(np, sizeof *out->bubble_fraction);
    out->peak_memory = calloc(np, sizeof *out->peak_memory);
    if (!compute_end || !out->bubble_fraction || !out->peak_memory) {
        free(compute_end);
        return nomem(err);
    }
    double pm = 0;
    for (int32_t r = 0; r < p; r++) {
        /* the last combine may end after the compute stream */
        compute_end[r] = e->ranks[r].now > e->ranks[r].ep_free ? e->ranks[r].now
                                                               : e->ranks[r].ep_free;
        if (compute_end[r] > pm)
            pm = compute_end[r];
    }
    int32_t crit = critical_rank(e, pm);
    double grads_ready = place_dp(e, dp_overlap, compute_end);
    free(compute_end);
    double opt = e->pc->optimizer;
    /* Megatron's optimizer step starts with a global gradient-norm all-reduce:
     * every rank steps once the last rank's gradients are reduced. */
    if (opt > 0)
        for (int32_t r = 0; r < p; r++)
            add_event(e, grads_ready, grads_ready + opt, r, MP_STREAM_COMPUTE, MP_EV_OPTIMIZER,
                      -1, -1);
    for (int32_t r = 0; r < p; r++) {
        out->bubble_fraction[r] = pm > 0 ? (pm - e->ranks[r].busy) / pm : 0;
        out->peak_memory[r] = e->ranks[r].static_bytes + e->ranks[r].peak_stash;
    }
    const rank_state *cr = &e->ranks[crit];
    out->ranks = p;
    out->pipeline_makespan = pm;
    /* the next step's chunk-0 gathers slow this step's optimizer (DP) */
    out->makespan = grads_ready + opt + e->opt_slow;
    out->critical_rank = crit;
    out->microbatches = e->m;
    out->chunks = e->v;
    out->schedule = e->kind;
    out->order_fallback = p > 0 && e->lists[0].fallback;
    mp_times *x = &out->exposed;
    x->step = out->makespan;
    x->recompute = cr->recompute;
    x->tp_comm = cr->tp;
    x->cp_comm = cr->cp;
    x->compute = cr->busy - cr->recompute - cr->tp - cr->cp;
    x->pp_comm = cr->pp_wait;
    x->bubble = pm - cr->busy - cr->pp_wait - cr->dp_wait;
    if (x->bubble < 0)
        x->bubble = 0;
    x->dp_comm = grads_ready - pm + cr->dp_wait + e->opt_slow;
    x->optimizer = opt;
    if (group_memory(e) != MP_OK || e->oom)
        return nomem(err);
    return MP_OK;
}

/* Where Megatron-Core runs its EP all-to-all overlap as combined 1F1B:
 * without a pipeline (combined_1f1b_schedule_for_no_pipelining) and on the
 * interleaved schedule (config_moe.c refuses pp > 1 without a virtual
 * pipeline). On one-chunk 1F1B with pp > 1 a merged pass would wait for the
 * next rank's merged pass and it for this one's previous: the engine keeps
 * the ep stream there, as on the other schedules. */
static bool combined_1f1b(mp_schedule_kind s, int32_t p, int32_t v)
{
    return (s == MP_SCHED_1F1B && p == 1) || (s == MP_SCHED_INTERLEAVED && (v > 1 || p == 1));
}

mp_status mp_simulate_cost(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                           const mp_pipeline_cost *pc, bool dp_overlap,
                           const mp_sim_options *opt, mp_sim_result *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    /* zb-h1 at pp 1 runs as 1f1b (core/config.h mp_schedule_run_as): each
     * backward whole, the lists' and the engine's (no split B/W costs) */
    s = mp_schedule_run_as(s, p);
    bool record = opt && opt->record_timeline;
    mp_timeline_init(&out->timeline, p > 0 ? p : 0, "simulated");
    /* Validate (p, v, m) once up front with the schedule's own rules, after
     * the size: the probe alone is a whole rank's schedule. */
    mp_status st = mp_sim_check_size(p, v, m, record, "microbatches", err);
    if (st != MP_OK)
        return st;
    mp_op_list probe;
    st = mp_schedule_build(s, p, v, m, 0, &probe, err);
    mp_op_list_free(&probe);
    if (st != MP_OK)
        return st;
    if ((st = check_cost(s, p, v, pc, err)) != MP_OK)
        return st;
    /* dualpipe: p stages, each held twice (ranks k and p-1-k); a stage's
     * m weight-gradient ops (m/2 per copy) end with the later copy's, when
     * the two copies' gradients can be summed and reduced */
    engine e = {.kind = s, .p = p, .v = v, .m = m,
                .n_stages = (int32_t)mp_schedule_n_stages(s, p, v), .pc = pc,
                .zb = mp_schedule_splits_backward(s), .record = record,
                .async_p2p = opt && opt->async_p2p,
                .combined = opt && opt->ep_overlap && combined_1f1b(s, p, v),
                .stream_ep = opt && opt->ep_overlap && !combined_1f1b(s, p, v) &&
                             s != MP_SCHED_DUALPIPE && s != MP_SCHED_DUALPIPEV &&
                             s != MP_SCHED_ZBV,
                .fb_merged = opt && opt->ep_overlap &&
                             (s == MP_SCHED_DUALPIPE || s == MP_SCHED_DUALPIPEV),
                .commits = s == MP_SCHED_DUALPIPE || s == MP_SCHED_DUALPIPEV ||
                           mp_schedule_batched_p2p(s, v, pc->p2p_overlap),
                .aligned = dp_overlap && pc->dp_aligned && s == MP_SCHED_INTERLEAVED && v > 1 &&
                           p > 1,
                .gathers = dp_overlap && pc->dp_gather > 0 &&
                           (pc->dp_aligned ? s == MP_SCHED_INTERLEAVED && v > 1 && p > 1
                                           : v == 1 || (pc->dp_tail && (mp_schedule_is_v(s) ||
                                                                        s == MP_SCHED_DUALPIPE))),
                .out = out};
    st = engine_setup(&e, err);
    if (st == MP_OK)
        st = run_pipeline(&e, err);
    if (st == MP_OK)
        st = fill_result(&e, dp_overlap, err);
    engine_free(&e);
    if (st != MP_OK)
        mp_sim_result_free(out);
    return st;
}
