/* step.c — one training step as the plan's schedule says: the op list of
 * this rank's pipeline stage (mp_schedule_build, the generator the simulator
 * uses too) drives forward and backward per micro-batch and the activations
 * and gradients sent between stages; then the gradient reductions and the
 * optimizer. Compiled once per precision (real.h). */
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/t5.h"
#include "exec/real.h"

mp_status mp_trainer_init(mp_trainer *t, mp_gpt *model, mp_group dp, bool dist_opt,
                          const mp_adam_cfg *adam, int microbatches, const mp_op_list *ops,
                          mp_error *err)
{
    memset(t, 0, sizeof *t);
    t->model = model;
    t->be = model->be;
    t->dp = dp;
    t->adam = *adam;
    t->microbatches = microbatches;
    t->ops = ops;
    if (model->n_alloc % (size_t)dp.size)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "parameter buffer not padded to the DP degree");
    /* the dense part over DP (x CP), an MoE model's experts over expert-DP */
    mp_status st = mp_shard_parts_init(t, dist_opt, err);
    if (st)
        return st;
    t->m = t->be->alloc((t->moment_n ? t->moment_n : 1) * sizeof(real));
    t->v = t->be->alloc((t->moment_n ? t->moment_n : 1) * sizeof(real));
    t->shard_buf = t->dist_opt ? t->be->alloc(t->shard_n * sizeof(real)) : NULL;
    if (!t->m || !t->v || (t->dist_opt && !t->shard_buf)) {
        mp_trainer_free(t);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for AdamW state");
    }
    return MP_OK;
}

void mp_trainer_free(mp_trainer *t)
{
    if (!t->be)
        return; /* never initialised */
    t->be->free(t->m);
    t->be->free(t->v);
    t->be->free(t->shard_buf);
    t->be->free(t->recv_act);
    t->be->free(t->recv_grad);
    t->be->free(t->poison);
    t->m = t->v = t->shard_buf = t->recv_act = t->recv_grad = t->poison = NULL;
}

/* Elements of the largest tensor that crosses this stage's boundaries. */
static size_t boundary_count(const mp_gpt *g)
{
    size_t in = mp_gpt_stage_input_count(g), out = mp_gpt_stage_output_count(g);
    return in > out ? in : out;
}

mp_status mp_trainer_set_pipeline(mp_trainer *t, mp_group pp, mp_group emb,
                                  mp_error *err)
{
    t->pp = pp;
    t->emb = emb;
    if (pp.size <= 1)
        return MP_OK;
    size_t n = boundary_count(t->model);
    t->recv_act = t->be->alloc(n * sizeof(real));
    t->recv_grad = t->be->alloc(n * sizeof(real));
    if (!t->recv_act || !t->recv_grad)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the pipeline");
    return MP_OK;
}

/* Micro-batch -> activation slot: at most n_slots micro-batches are in
 * flight (forward done, backward not yet), as the schedule bounds them. */
static int slot_for(int *slot_mb, int n_slots, int mb, bool take)
{
    for (int i = 0; i < n_slots; i++)
        if (slot_mb[i] == mb)
            return i;
    if (!take)
        return -1;
    for (int i = 0; i < n_slots; i++)
        if (slot_mb[i] < 0) {
            slot_mb[i] = mb;
            return i;
        }
    return -1;
}

/* Micro-batch -> slot of each model chunk on this rank. */
typedef struct chunk_slots {
    int *slot_mb;
    int n_slots;
} chunk_slots;

static mp_status run_ops(mp_trainer *chunks, int n_chunks, const int32_t *tokens,
                         const int32_t *targets, chunk_slots *cs, double *loss_sum,
                         mp_error *err);
static mp_status reduce_grads(mp_trainer *t, mp_error *err);

/* The V placement puts the first and the last stage on pipeline rank 0
 * (dualpipe: on ranks 0 and pp-1, one in each chunk): the tied embedding's
 * two copies (the embedding's, the head's; with MTP, tied or not, the last
 * stage's copy for the modules' input) are on this rank, and each takes
 * their sum here, as the embedding group's all-reduce does across ranks
 * otherwise. */
static void sum_local_tied(mp_trainer *chunks, int n_chunks)
{
    bool local = mp_schedule_is_v(chunks[0].schedule) || chunks[0].schedule == MP_SCHED_DUALPIPE;
    const mp_gpt_dims *d = &chunks[0].model->d;
    if (n_chunks != 2 || !local || !(d->tied || d->mtp_layers > 0) ||
        mp_probe_drops(chunks[0].model->probe, "pp-embgrad")) /* test-only: left out */
        return;
    /* the chunk with the first stage's embedding (item 0), and the other's copy */
    int e = chunks[0].model->d.item_begin == 0 ? 0 : 1;
    mp_gpt *g0 = chunks[e].model, *g1 = chunks[1 - e].model;
    int copy = g1->lay->wte >= 0 ? g1->lay->wte : g1->lay->head;
    if (g0->lay->wte < 0 || copy < 0 || (!d->tied && g1->lay->wte < 0))
        return;
    const mp_param *a = &g0->lay->p[g0->lay->wte], *b = &g1->lay->p[copy];
    size_t n = (size_t)a->lrows * (size_t)a->lcols;
    g0->be->add(MP_REAL_KIND, g0->g + a->offset, g1->g + b->offset, n);
    g0->be->copy(g1->g + b->offset, g0->g + a->offset, n * sizeof(real), MP_COPY_D2D);
}

/* DualPipe: stage k's two copies, chunk 0 of pipeline rank k (the forward
 * direction's micro-batches) and chunk 1 of rank pp-1-k (the reverse
 * direction's), each hold part of its gradient; both take the sum over the
 * mirror group, so the copies stay equal through the optimizer. So do the
 * expert bias's token counts (each copy routed its half of the micro-batches),
 * so that both copies move the bias by the whole step's load, as the
 * reference does. Both ranks of a pair visit their stages in increasing
 * order, so their calls match. */
static mp_status sum_mirrors(mp_trainer *chunks, int n_chunks, mp_error *err)
{
    if (n_chunks != 2 || chunks[0].schedule != MP_SCHED_DUALPIPE || chunks[0].mirror.size <= 1)
        return MP_OK;
    int p = chunks[0].pp.size, r = chunks[0].pp.rank;
    int first = r <= p - 1 - r ? 0 : 1; /* the chunk of the lower stage, min(r, p-1-r) */
    for (int i = 0; i < 2; i++) {
        mp_gpt *g = chunks[i ? 1 - first : first].model;
        if (mp_probe_drops(g->probe, "pp-mirror"))
            continue;
        double t0 = g->be->now();
        mp_status st = g->be->allreduce(&chunks[0].mirror, MP_REAL_KIND, g->g, g->lay->total,
                                        MP_RED_SUM, err);
        if (!st && g->route_load && !mp_probe_drops(g->probe, "pp-mirror-load"))
            st = g->be->allreduce(&chunks[0].mirror, MP_REAL_KIND, g->route_load,
                                  (size_t)mp_dims_blocks(&g->d) * (size_t)g->d.experts,
                                  MP_RED_SUM, err);
        if (st)
            return st;
        mp_probe_record(g->probe, t0, MP_STREAM_PP_SEND, MP_EV_OTHER, false);
    }
    return MP_OK;
}

/* The chunk's copy of the embedding (its own, an embedding copy, a tied
 * head), or NULL. */
static const mp_param *emb_copy(const mp_gpt *g)
{
    int k = g->lay->wte >= 0 ? g->lay->wte : g->d.tied ? g->lay->head : -1;
    return k >= 0 ? &g->lay->p[k] : NULL;
}

/* Megatron's standalone MTP stage: the copies of the embedding (the first
 * stage's, the MTP stage's, a tied head's) sum their gradients over the
 * embedding group (exec.c: the pipeline ranks that hold one). A rank may hold
 * two (interleaved: the first stage and the MTP stage on one rank): it adds
 * them first, takes part once, and gives every copy the sum. */
static mp_status sum_mtp_copies(mp_trainer *chunks, int n_chunks, mp_error *err)
{
    if (!chunks[0].model->d.mtp_split || mp_probe_drops(chunks[0].model->probe, "pp-embgrad"))
        return MP_OK;
    int first = -1;
    const mp_param *p0 = NULL;
    mp_status st = MP_OK;
    for (int c = 0; c < n_chunks; c++) {
        mp_gpt *g = chunks[c].model;
        const mp_param *p = emb_copy(g);
        if (!p)
            continue;
        size_t n = (size_t)p->lrows * (size_t)p->lcols;
        /* ZeRO-2/3: the shards whole first (test-only: not, "zero-tied-sum") */
        if (!mp_probe_drops(g->probe, "zero-tied-sum") &&
            (st = mp_zero_unshard_grad(&chunks[c], (size_t)p->offset, n, err)))
            return st;
        if (first < 0)
            first = c, p0 = p;
        else
            g->be->add(MP_REAL_KIND, chunks[first].model->g + p0->offset, g->g + p->offset, n);
    }
    if (first < 0)
        return MP_OK;
    mp_trainer *t = &chunks[first];
    mp_gpt *g0 = t->model;
    size_t n = (size_t)p0->lrows * (size_t)p0->lcols;
    double t0 = g0->be->now();
    if (t->emb.size > 1 &&
        (st = g0->be->allreduce(&t->emb, MP_REAL_KIND, g0->g + p0->offset, n, MP_RED_SUM, err)))
        return st;
    for (int c = first; c < n_chunks; c++) {
        mp_gpt *g = chunks[c].model;
        const mp_param *p = emb_copy(g);
        if (!p)
            continue;
        if (c != first)
            g->be->copy(g->g + p->offset, g0->g + p0->offset, n * sizeof(real), MP_COPY_D2D);
        mp_zero_reshard_grad(&chunks[c], (size_t)p->offset, n);
    }
    mp_probe_record(g0->probe, t0, MP_STREAM_PP_SEND, MP_EV_OTHER, false);
    return MP_OK;
}

mp_status mp_trainer_grads(mp_trainer *t, const int32_t *tokens, const int32_t *targets,
                           double *loss_sum, mp_error *err)
{
    return mp_trainer_grads_chunks(t, 1, tokens, targets, loss_sum, err);
}

mp_status mp_trainer_grads_chunks(mp_trainer *chunks, int n_chunks,
                                  const int32_t *tokens, const int32_t *targets,
                                  double *loss_sum, mp_error *err)
{
    chunk_slots *cs = calloc((size_t)n_chunks, sizeof *cs);
    if (!cs)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    mp_status st = MP_OK;
    for (int c = 0; c < n_chunks && !st; c++) {
        mp_gpt *g = chunks[c].model;
        g->be->zero(g->g, g->n_alloc * sizeof(real));
        cs[c].n_slots = g->n_slots;
        cs[c].slot_mb = malloc((size_t)g->n_slots * sizeof *cs[c].slot_mb);
        if (!cs[c].slot_mb)
            st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        for (int i = 0; cs[c].slot_mb && i < g->n_slots; i++)
            cs[c].slot_mb[i] = -1;
    }
    if (!st)
        st = run_ops(chunks, n_chunks, tokens, targets, cs, loss_sum, err);
    for (int c = 0; c < n_chunks; c++) {
        free(cs[c].slot_mb);
        chunks[c].model->stage_in = chunks[c].model->stage_grad_in = NULL;
    }
    free(cs);
    if (!st && chunks[0].pp.size > 1)
        st = chunks[0].model->be->send_wait(err);
    if (!st)
        st = sum_mirrors(chunks, n_chunks, err);
    if (!st)
        sum_local_tied(chunks, n_chunks);
    if (!st)
        st = sum_mtp_copies(chunks, n_chunks, err);
    /* every chunk's reductions, in the same order on every rank */
    for (int c = 0; c < n_chunks && !st; c++)
        st = reduce_grads(&chunks[c], err);
    return st;
}

/* Messages a rank sends to itself: the V schedules' turn at pipeline rank
 * pp-1, whose chunk 0 hands its output to its chunk 1 (and chunk 1 its input
 * gradient back). A copy kept here by tag until the receive takes it; the
 * executor is one thread per process, like the MPI transport's send list. */
typedef struct local_msg {
    int tag;
    real *data;
} local_msg;
static local_msg *local_box;
static size_t local_n, local_cap;

static mp_status local_send(const mp_backend *be, const real *buf, size_t n, int tag,
                            mp_error *err)
{
    if (local_n == local_cap) {
        size_t cap = local_cap ? 2 * local_cap : 8;
        local_msg *b = realloc(local_box, cap * sizeof *b);
        if (!b)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a message");
        local_box = b;
        local_cap = cap;
    }
    real *copy = be->alloc((n ? n : 1) * sizeof(real));
    if (!copy)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a message");
    be->copy(copy, buf, n * sizeof(real), MP_COPY_D2D);
    local_box[local_n++] = (local_msg){.tag = tag, .data = copy};
    return MP_OK;
}

static mp_status local_recv(const mp_backend *be, real *buf, size_t n, int tag,
                            mp_error *err)
{
    for (size_t i = 0; i < local_n; i++)
        if (local_box[i].tag == tag) {
            be->copy(buf, local_box[i].data, n * sizeof(real), MP_COPY_D2D);
            be->free(local_box[i].data);
            local_box[i] = local_box[--local_n];
            return MP_OK;
        }
    /* the schedule sends before it receives (tests/sim/test_schedule.c) */
    return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                        "local pipeline message %d received before it was sent", tag);
}

/* A SEND/RECV op: the schedule puts RECV_FWD right before the F that uses
 * it and SEND_FWD right after the F that made it (RECV_BWD / SEND_BWD around
 * B alike), so the data is the model's stage input / output of that op.
 * DualPipe(V) may receive ops earlier and send ops later (where dualpipev.py
 * commits them), and so may interleaved 1F1B in Megatron's synchronous
 * batches (sim/schedule.c build_interleaved_batched), but a receive still
 * comes after the op that used the
 * chunk's previous one and a send before the chunk's next op of its kind
 * (tests/sim/test_schedule.c check_fb_convention): the buffers are the same. */
static mp_status pipeline_op(mp_trainer *t, int n_chunks, const mp_op *op, int *slot_mb,
                             int n_slots, mp_error *err)
{
    mp_gpt *g = t->model;
    const mp_backend *be = g->be;
    int32_t p = t->pp.size, peer = 0, peer_chunk = 0;
    if (p <= 1 || !mp_op_peer(t->schedule, p, n_chunks, t->pp.rank, op, &peer, &peer_chunk))
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "schedule op %s on a rank without pipeline peers",
                            mp_op_kind_name((mp_op_kind)op->kind));
    int tag = mp_op_message_id(t->schedule, p, n_chunks, t->microbatches, t->pp.rank, op);
    /* forward: the stage's input in, its output out; backward: their gradients */
    size_t n_in = mp_gpt_stage_input_count(g), n_out = mp_gpt_stage_output_count(g);
    double t0 = be->now();
    mp_status st = MP_OK;
    mp_stream stream = MP_STREAM_PP_SEND;
    mp_event_kind kind = MP_EV_SEND_FWD;
    bool local = peer == t->pp.rank;
    switch ((mp_op_kind)op->kind) {
    case MP_OP_RECV_FWD:
        st = local ? local_recv(be, t->recv_act, n_in, tag, err)
                   : be->recv(&t->pp, MP_REAL_KIND, t->recv_act, n_in, peer, tag, err);
        g->stage_in = t->recv_act;
        stream = MP_STREAM_PP_RECV, kind = MP_EV_RECV_FWD;
        break;
    case MP_OP_RECV_BWD:
        st = local ? local_recv(be, t->recv_grad, n_out, tag, err)
                   : be->recv(&t->pp, MP_REAL_KIND, t->recv_grad, n_out, peer, tag, err);
        g->stage_grad_in = t->recv_grad;
        stream = MP_STREAM_PP_RECV, kind = MP_EV_RECV_BWD;
        break;
    case MP_OP_SEND_FWD: {
        int s = slot_for(slot_mb, n_slots, op->microbatch, false);
        if (s < 0)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "send of micro-batch %d's activation before its forward",
                                (int)op->microbatch);
        st = local ? local_send(be, mp_gpt_stage_output(g, s), n_out, tag, err)
                   : be->send(&t->pp, MP_REAL_KIND, mp_gpt_stage_output(g, s), n_out, peer,
                              tag, err);
        break;
    }
    case MP_OP_SEND_BWD:
        st = local ? local_send(be, mp_gpt_stage_input_grad(g), n_in, tag, err)
                   : be->send(&t->pp, MP_REAL_KIND, mp_gpt_stage_input_grad(g), n_in, peer,
                              tag, err);
        kind = MP_EV_SEND_BWD;
        break;
    default:
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL, "unknown schedule op %d",
                            (int)op->kind);
    }
    if (st)
        return st;
    mp_probe_record(g->probe, t0, stream, kind, true);
    return MP_OK;
}

/* The schedule's ops, in order. */
static mp_status run_ops(mp_trainer *chunks, int n_chunks, const int32_t *tokens,
                         const int32_t *targets, chunk_slots *cs, double *loss_sum,
                         mp_error *err)
{
    const mp_op_list *ops = chunks[0].ops;
    const mp_backend *be = chunks[0].model->be;
    mp_probe *pr = chunks[0].model->probe;
    size_t S = (size_t)mp_dims_tokens(&chunks[0].model->d);
    *loss_sum = 0;
    for (int32_t k = 0; k < ops->n; k++) {
        const mp_op *op = &ops->ops[k];
        if (op->microbatch < 0 || op->microbatch >= chunks[0].microbatches || op->chunk < 0 ||
            op->chunk >= n_chunks)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "schedule op %d names micro-batch %d chunk %d", (int)k,
                                (int)op->microbatch, (int)op->chunk);
        mp_trainer *t = &chunks[op->chunk];
        mp_gpt *g = t->model;
        int *slot_mb = cs[op->chunk].slot_mb, n_slots = cs[op->chunk].n_slots;
        if (pr) {
            pr->microbatch = op->microbatch;
            pr->chunk = op->chunk;
        }
        double t0 = be->now();
        if (op->kind == MP_OP_F) {
            int s = slot_for(slot_mb, n_slots, op->microbatch, true);
            if (s < 0)
                return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                    "more micro-batches in flight than activation slots");
            g->microbatch_now = op->microbatch;
            size_t tok_mb = (size_t)op->microbatch;
            /* test-only (--test-drop-allreduce dualpipe-mtp-tokens): DualPipe's
             * reverse head (chunk 1 past the embedding's stage: where only the
             * MTP modules read the tokens) takes the other direction's
             * micro-batch's tokens */
            if (t->schedule == MP_SCHED_DUALPIPE && op->chunk == 1 && g->d.mtp_layers > 0 &&
                g->d.item_begin > 0 && mp_probe_drops(pr, "dualpipe-mtp-tokens"))
                tok_mb -= (size_t)chunks[0].microbatches / 2;
            mp_status st = mp_zero_gather_params(t, false, false, err);
            if (!st)
                st = mp_gpt_forward(g, s, tokens + tok_mb * S,
                                        targets + (size_t)op->microbatch * S, loss_sum, err);
            if (st)
                return st;
            mp_zero_release_params(t);
            mp_probe_record(pr, t0, MP_STREAM_COMPUTE, MP_EV_F, true);
        } else if (op->kind == MP_OP_B) {
            /* test switch: a rank dies (or stops) mid-step */
            if (pr && pr->kill_step == pr->step)
                raise(pr->kill_signal ? pr->kill_signal : SIGKILL);
            int s = slot_for(slot_mb, n_slots, op->microbatch, false);
            if (s < 0)
                return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                    "backward of micro-batch %d before its forward",
                                    (int)op->microbatch);
            /* test switch: ZeRO-3 without the gather before micro-batch 0's backward */
            bool skip = op->microbatch == 0 && mp_probe_drops(pr, "zero3-gather");
            /* and the experts' part alone */
            bool skip_exp = op->microbatch == 0 && mp_probe_drops(pr, "edp-gather");
            mp_status st = mp_zero_gather_params(t, skip, skip_exp, err);
            if (!st)
                st = mp_gpt_backward(g, s, err);
            if (!st)
                st = mp_zero_reduce_microbatch(t, err);
            if (st)
                return st;
            mp_zero_release_params(t);
            slot_mb[s] = -1;
            mp_probe_record(pr, t0, MP_STREAM_COMPUTE, MP_EV_B, true);
        } else if (op->kind == MP_OP_W) {
            /* ZB-H1's weight-gradient half: B above computed the weight
             * gradients already, so the numerics are those of the schedule */
        } else {
            mp_status st = pipeline_op(t, n_chunks, op, slot_mb, n_slots, err);
            if (st)
                return st;
        }
    }
    if (pr) {
        pr->microbatch = -1;
        pr->chunk = -1;
    }
    return MP_OK;
}

/* After the last backward: TP reduction of sequence-split gradients, then DP. */
static mp_status reduce_grads(mp_trainer *t, mp_error *err)
{
    mp_gpt *g = t->model;
    const mp_backend *be = g->be;
    mp_probe *pr = g->probe;
    /* Sequence-split gradients (LayerNorms, row-parallel biases, positions):
     * each TP rank holds its tokens' share; sum them over TP. */
    const mp_param_layout *lay = g->lay;
    double t0 = be->now();
    /* Tied embeddings across stages: the first stage's embedding and the last
     * stage's copy for the head each hold part of the gradient; both take the
     * sum, so the two copies stay equal through the optimizer. */
    int tied = lay->wte >= 0 ? lay->wte : lay->head;
    /* (T5: the first decoder stage's copy for its input, tied or not; MTP: the
     * last stage's copy for the modules' input, tied or not) */
    if (t->emb.size > 1 && (g->d.tied || g->d.t5 || g->d.mtp_layers > 0) && tied >= 0 &&
        !g->d.mtp_split /* (sum_mtp_copies) */ && !mp_probe_drops(pr, "pp-embgrad")) {
        const mp_param *p = &lay->p[tied];
        size_t n = (size_t)p->lrows * (size_t)p->lcols;
        /* ZeRO-2/3 (pp with zero_runtime fsdp2): sum the shards whole first */
        mp_status st = mp_probe_drops(pr, "zero-tied-sum")
                           ? MP_OK
                           : mp_zero_unshard_grad(t, (size_t)p->offset, n, err);
        if (!st)
            st = be->allreduce(&t->emb, MP_REAL_KIND, g->g + p->offset, n, MP_RED_SUM, err);
        if (st)
            return st;
        mp_zero_reshard_grad(t, (size_t)p->offset, n);
        mp_probe_record(pr, t0, MP_STREAM_PP_SEND, MP_EV_OTHER, false);
        t0 = be->now();
    }
    if (g->d.t5) { /* each stack's relative bias, summed over its stages */
        mp_status st = mp_t5_reduce_grads(g, err);
        if (st)
            return st;
    }
    bool any = false;
    for (int pid = 0; pid < lay->n; pid++) {
        const mp_param *p = &lay->p[pid];
        if (!p->sp_partial || mp_probe_drops(pr, "tp-lngrad") ||
            (p->latent_down && mp_probe_drops(pr, "tp-mla-grad")) ||
            (p->head_partial && mp_probe_drops(pr, "tp-qknorm-grad")))
            continue;
        any = true;
        mp_status st = be->allreduce(&g->tp, MP_REAL_KIND, g->g + p->offset,
                                     (size_t)p->lrows * (size_t)p->lcols, MP_RED_SUM, err);
        if (st)
            return st;
    }
    if (any)
        mp_probe_record(pr, t0, MP_STREAM_TP, MP_EV_TP_COMM, false);
    /* HSDP: the shard groups' sums over the replicas */
    mp_status rst = mp_zero_reduce_replicas(t, err);
    if (rst)
        return rst;
    /* DP: all-reduce, or reduce-scatter into this rank's shard (ZeRO-2/3:
     * done after each micro-batch's backward); an MoE model's experts over
     * expert-DP, the rest over DP (shard.c) */
    if ((t->dp.size > 1 || g->edp.size > 1) && t->zero < 2 && !mp_probe_drops(pr, "dp-grad")) {
        t0 = be->now();
        mp_status st = mp_shard_reduce(t, false, err);
        if (st)
            return st;
        mp_probe_record(pr, t0, MP_STREAM_DP, MP_EV_DP_COMM, false);
    }
    return MP_OK;
}

mp_status mp_trainer_update(mp_trainer *t, int step, mp_error *err)
{
    mp_gpt *g = t->model;
    const mp_backend *be = g->be;
    double t0 = be->now();
    mp_shard_update(t, step);
    mp_status st = be->sync(err);
    if (st)
        return st;
    mp_probe_record(g->probe, t0, MP_STREAM_COMPUTE, MP_EV_OPTIMIZER, false);
    if (t->dist_opt && t->zero < 3) {
        t0 = be->now();
        st = mp_shard_gather(t, mp_probe_drops(g->probe, "edp-gather"), err);
        if (st)
            return st;
        mp_probe_record(g->probe, t0, MP_STREAM_DP, MP_EV_DP_COMM, false);
    }
    return mp_moe_update_bias(g, err); /* after the weights, as Megatron's finalize step */
}
