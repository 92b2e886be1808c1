/* moe_layer.c — an MoE block's FFN (moe.h; docs/exec.md, "Mixture of
 * experts"), forward and backward side by side: the router (a replicated
 * linear layer to one logit per expert, softmax or sigmoid scores), top-k
 * with ties to the lower expert index, the weights renormalised over the k
 * chosen, the capacity drop, the dispatch of each kept (token, expert) row to
 * the expert's EP rank by all-to-all, the experts' FFNs (each split over TP as
 * the dense MLP is), the combine back by all-to-all and the weighted sum.
 *
 * With etp = tp every rank of a TP group routes the same S token rows of its
 * micro-batch (ln2_full: with SP after the all-gather), each within its own
 * EP group of the same t, to experts split over TP; with etp = 1 each rank
 * routes its own Sl rows to whole experts. The routing is a per-token function of
 * those rows, so it is the same in the reference, which holds every expert
 * (ep = 1: the all-to-alls are copies). What the partition changes is only
 * which rank computes a row and in which order rows meet in a GEMM: in exact
 * mode every sum is exact (quant.h), so partitioned == reference bit for bit.
 *
 * The routing and the row shuffles are the backend's MoE ops (backend.h:
 * moe_ops.c on the CPU, kernels/moe.cu on CUDA); the host reads only the
 * row counts, to size the all-to-alls and the experts' GEMMs.
 * Compiled for float and double. */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"
#include "exec/model_internal.h"
#include "exec/moe_oss.h"

/* One block's MoE state (moe.h's layout) as pointers. */
typedef struct moe_state {
    real *logits, *scores, *choice, *wgt, *kept, *sorder, *counts, *ne, *y, *x, *pre, *act,
        *rorder, *bufa, *bufb, *dact, *dpre, *dwl, *dwf, *spre, *sact, *sdact, *sdpre, *sdx,
        *capc;
    mp_moe_sizes z;
    size_t nsend, nrecv; /* rows sent and received by the dispatch */
    /* host copies of counts [2*ep] and ne [El] (the backend's memory may be a device's) */
    real hcounts[2 * MP_MOE_MAX_EXPERTS], hne[MP_MOE_MAX_EXPERTS];
} moe_state;

/* The rows the dispatch sent and received, from host copies of its counts
 * and of the local experts' row counts (the backend's memory may be a
 * device's). */
static void moe_count(const mp_gpt *g, moe_state *M)
{
    g->be->copy(M->hcounts, M->counts, 2 * M->z.ep * sizeof(real), MP_COPY_D2H);
    g->be->copy(M->hne, M->ne, M->z.El * sizeof(real), MP_COPY_D2H);
    M->nsend = M->nrecv = 0;
    for (size_t q = 0; q < M->z.ep; q++) {
        M->nsend += (size_t)M->hcounts[q];
        M->nrecv += (size_t)M->hcounts[M->z.ep + q];
    }
}

/* An operand of one GEMM per local expert e: at + o * per_row + e *
 * per_expert, o the rows of the experts before e. */
typedef struct expert_operand {
    const real *at;
    size_t per_row, per_expert;
} expert_operand;

/* A GEMM dimension that is each expert's row count. */
#define EXPERT_ROWS 0

/* For each local expert e with rows, C_e = op(A_e) op(B_e) + beta C_e (m, n,
 * k as given, or EXPERT_ROWS: the expert's rows), in expert order, as one
 * grouped call of the backend (cuBLAS: one launch for all the experts). */
static void experts_gemm(const mp_gpt *g, const moe_state *M, bool ta, bool tb, size_t m,
                         size_t n, size_t k, expert_operand A, size_t lda, expert_operand B,
                         size_t ldb, double beta, real *c, size_t c_row, size_t c_expert,
                         size_t ldc)
{
    int ms[MP_MOE_MAX_EXPERTS], ns[MP_MOE_MAX_EXPERTS], ks[MP_MOE_MAX_EXPERTS], cnt = 0;
    const void *as[MP_MOE_MAX_EXPERTS], *bs[MP_MOE_MAX_EXPERTS];
    void *cs[MP_MOE_MAX_EXPERTS];
    for (size_t e = 0, o = 0; e < M->z.El; o += (size_t)M->hne[e++]) {
        size_t rows = (size_t)M->hne[e];
        if (!rows)
            continue;
        ms[cnt] = (int)(m == EXPERT_ROWS ? rows : m);
        ns[cnt] = (int)(n == EXPERT_ROWS ? rows : n);
        ks[cnt] = (int)(k == EXPERT_ROWS ? rows : k);
        as[cnt] = A.at + o * A.per_row + e * A.per_expert;
        bs[cnt] = B.at + o * B.per_row + e * B.per_expert;
        cs[cnt++] = c + o * c_row + e * c_expert;
    }
    if (cnt)
        g->be->gemm_grouped(MP_REAL_KIND, ta, tb, cnt, ms, ns, ks, 1.0, as, (int)lda, bs,
                            (int)ldb, beta, cs, (int)ldc);
}

/* Block l's state: its own region B->moe, the rank's MoE scratch for the
 * parts the block does not keep (what its recomputation rebuilds, and the
 * transients). `dispatched`: the block's forward has filled the counts. */
static moe_state moe_state_of(const mp_gpt *g, const block_acts *B, int l, bool dispatched)
{
    sizes s = sizes_of(&g->d);
    moe_state M;
    M.z = mp_moe_sizes_of(&g->d, s.S, s.Sl);
    mp_moe_layout L = mp_moe_layout_of(&M.z, block_rebuilds(&g->d, l));
    real *base = B->moe, *work = work_of(g).moe;
#define AT(f) ((L.f & MP_MOE_WORK) ? work + (L.f & ~MP_MOE_WORK) : base + L.f)
    M.logits = AT(logits), M.scores = AT(scores), M.choice = AT(choice);
    M.wgt = AT(wgt), M.kept = AT(kept), M.sorder = AT(sorder);
    M.counts = AT(counts), M.ne = AT(ne), M.y = AT(y), M.x = AT(x);
    M.pre = AT(pre), M.act = AT(act), M.rorder = AT(rorder);
    M.bufa = AT(bufa), M.bufb = AT(bufb), M.dact = AT(dact);
    M.dpre = AT(dpre), M.dwl = AT(dwl), M.dwf = AT(dwf);
    M.spre = AT(spre), M.sact = AT(sact), M.sdact = AT(sdact);
    M.sdpre = AT(sdpre), M.sdx = AT(sdx), M.capc = AT(capc);
#undef AT
    M.nsend = M.nrecv = 0;
    if (dispatched)
        moe_count(g, &M);
    return M;
}

/* All-to-all over the EP group of rows `width` reals wide: counts[q] rows to
 * (rcounts[q] from) EP rank q (host arrays). Without EP a copy. */
static mp_status moe_a2a(mp_gpt *g, const real *send, const real *counts,
                         const real *rcounts, size_t width, real *recv, mp_error *err)
{
    size_t ep = g->ep.size > 1 ? (size_t)g->ep.size : 1;
    if (ep == 1) {
        be_copy(g, recv, send, (size_t)counts[0] * width);
        return MP_OK;
    }
    size_t *c = malloc(2 * ep * sizeof *c);
    if (!c)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the dispatch");
    for (size_t q = 0; q < ep; q++) {
        c[q] = (size_t)counts[q] * width;
        c[ep + q] = (size_t)rcounts[q] * width;
    }
    double t = g->be->now();
    mp_status st = g->be->alltoallv(&g->ep, MP_REAL_KIND, send, c, recv, c + ep, err);
    mp_probe_record(g->probe, t, MP_STREAM_TP, MP_EV_TP_COMM, true);
    free(c);
    return st;
}

/* The capacity drop: which of this rank's slots are kept (capacity 0: all). */
static mp_status moe_capacity(mp_gpt *g, moe_state *M, mp_error *err)
{
    const mp_moe_sizes *z = &M->z;
    size_t S = z->S, k = z->k, E = z->E, b = (size_t)g->d.micro_batch;
    size_t cp = (size_t)mp_dims_cp(&g->d), rows = z->Sfull;
    const real *all = M->choice; /* the TP group's rows' choices */
    size_t r0 = 0;
    if (z->capacity && mp_dims_moe_local(&g->d)) {
        CHECK(mp_model_tp_gather_rows(g, M->choice, M->dwf, rows, S, k, err));
        all = M->dwf, r0 = (size_t)g->tp.rank * S;
    }
    if (z->capacity && cp > 1) { /* every CP rank's, rank after rank */
        double t = g->be->now();
        CHECK(g->be->allgather(&g->cp, MP_REAL_KIND, all, M->capc, rows * k, err));
        mp_probe_record(g->probe, t, MP_STREAM_CP, MP_EV_CP_COMM, true);
        all = M->capc;
    }
    size_t me = cp > 1 ? (size_t)g->cp.rank : 0;
    g->be->moe_capacity(MP_REAL_KIND, M->kept, all, rows, b, E, k, cp, me, r0, S, z->capacity);
    return MP_OK;
}

/* Scores, top-k (group-limited, with the expert bias: mp_moe_pick), weights
 * and the capacity drop of every token row of block l. */
static mp_status moe_route(mp_gpt *g, moe_state *M, int l, mp_error *err)
{
    const mp_moe_sizes *z = &M->z;
    size_t S = z->S, E = z->E, k = z->k;
    g->be->moe_scores(MP_REAL_KIND, M->scores, M->logits, S, E, g->d.router_sigmoid);
    bq(g, M->scores, S * E, MP_Q_PROB);
    const mp_gpt_dims *d = &g->d;
    size_t G = d->route_groups > 1 ? (size_t)d->route_groups : 1;
    /* the expert bias joins the scores for the choice only, in their precision */
    const real *bias = g->route_bias ? g->route_bias + (size_t)l * E : NULL;
    double scale = d->route_scale > 0 ? d->route_scale : 1.0;
    g->be->moe_topk(MP_REAL_KIND, M->choice, M->wgt, M->scores, bias, S, E, k, G,
                    (size_t)d->route_group_top_k, scale);
    bq(g, M->wgt, S * k, MP_Q_PROB);
    /* capacity: per sample (rows are position * b + sample), each expert keeps
     * its first `capacity` slots in position order, then slot order. With
     * etp = 1 each TP rank routes its own rows: the TP group's choices first;
     * with CP the CP ranks' too, walked in global position order */
    CHECK(moe_capacity(g, M, err));
    /* test-only (--test-drop-allreduce ep-route): the first token's first
     * choice goes to the next expert, as a dispatch bug would send it */
    if (mp_probe_drops(g->probe, "ep-route")) {
        real c0;
        g->be->copy(&c0, M->choice, sizeof c0, MP_COPY_D2H);
        c0 = (real)(((size_t)c0 + 1) % E);
        g->be->copy(M->choice, &c0, sizeof c0, MP_COPY_H2D);
    }
    return MP_OK;
}

/* The dispatch: kept slots' rows [x | local expert] to their experts' EP
 * ranks, rank after rank, each in slot order; the experts' rows regrouped
 * expert after expert (in the order received) into M->x. */
static mp_status moe_dispatch(mp_gpt *g, moe_state *M, const real *x,
                              mp_error *err)
{
    const mp_moe_sizes *z = &M->z;
    size_t h = z->h, w = h + 1;
    const mp_backend *be = g->be;
    be->moe_send_order(MP_REAL_KIND, M->sorder, M->counts, M->bufa + h, w, M->choice, M->kept,
                       z->S * z->k, z->El, z->ep);
    moe_count(g, M); /* nsend */
    be->moe_gather(MP_REAL_KIND, M->bufa, w, x, h, M->sorder, z->k, NULL, M->nsend, h);
    /* how many rows each EP rank sends this one */
    real ones[MP_MOE_MAX_EXPERTS];
    for (size_t q = 0; q < z->ep; q++)
        ones[q] = 1;
    CHECK(moe_a2a(g, M->counts, ones, ones, 1, M->counts + z->ep, err));
    moe_count(g, M); /* nrecv */
    CHECK(moe_a2a(g, M->bufa, M->hcounts, M->hcounts + z->ep, w, M->bufb, err));
    be->moe_expert_order(MP_REAL_KIND, M->rorder, M->ne, M->bufb + h, w, M->nrecv, z->El);
    moe_count(g, M); /* ne */
    be->moe_gather(MP_REAL_KIND, M->x, h, M->bufb, w, M->rorder, 1, NULL, M->nrecv, h);
    return MP_OK;
}

/* rows[nrecv, h] in expert order -> back to their senders; the result in
 * send order lands in out[nsend, h] (bufb is the staging buffer). */
static mp_status moe_return(mp_gpt *g, moe_state *M, const real *rows, real *out,
                            mp_error *err)
{
    size_t h = M->z.h;
    g->be->moe_scatter(MP_REAL_KIND, M->bufb, h, rows, h, M->rorder, 1, M->nrecv, h, false);
    return moe_a2a(g, M->bufb, M->hcounts + M->z.ep, M->hcounts, h, out, err);
}

/* The rows this rank routes: ln2_full (every TP rank the same), or with
 * etp = 1 this rank's own rows of it (SP: rows tp.rank * Sl ...). */
static const real *moe_input(const mp_gpt *g, const block_acts *B,
                             const mp_moe_sizes *z)
{
    return mp_dims_moe_local(&g->d) ? B->ln2_full + (size_t)g->tp.rank * z->Sl * z->h
                                    : B->ln2_full;
}

/* Token row (in the routed rows) of this rank's residual row rl. */
static size_t moe_row(const mp_gpt *g, size_t rl, size_t Sl)
{
    return mp_dims_moe_local(&g->d) ? rl : global_row(g, rl, Sl);
}

/* The shared experts' first half: spre[Sfull,s1l] = ln2_full @ W1 and its
 * activation sact[Sfull,sl] (the forward's, and selective recomputation's
 * `shared_experts`). */
static void moe_shared_fc1(mp_gpt *g, moe_state *M, const block_acts *B, int l)
{
    const mp_moe_sizes *z = &M->z;
    size_t S = z->Sfull, h = z->h, sl = z->sl, s1l = z->s1l;
    GEMM(false, false, S, s1l, h, B->ln2_full, h, blk(g->w, g, l, MP_BLK_SHR_FC1_W), s1l,
         0.0, M->spre, s1l);
    bq(g, M->spre, S * s1l, MP_Q_ACT);
    mp_mlp_act_forward(g, M->sact, M->spre, S, sl, false);
    bq(g, M->sact, S * sl, MP_Q_ACT);
}

/* The shared experts: one MLP of their summed width over the TP group's
 * rows, split over TP as the dense MLP (fc1 column-, fc2 row-parallel), its
 * output reduced over TP and added to out[Sl,h]. */
static mp_status moe_shared_forward(mp_gpt *g, moe_state *M, block_acts *B, int l, real *out,
                                    mp_error *err)
{
    const mp_moe_sizes *z = &M->z;
    work W = work_of(g);
    size_t S = z->Sfull, h = z->h, sl = z->sl;
    moe_shared_fc1(g, M, B, l);
    GEMM(false, false, S, h, sl, M->sact, sl, blk(g->w, g, l, MP_BLK_SHR_FC2_W), h, 0.0,
         W.part, h);
    CHECK(mp_model_tp_reduce(g, W.part, W.loc, h, "tp-moe", err));
    bq(g, W.loc, z->Sl * h, MP_Q_ACT);
    g->be->add(MP_REAL_KIND, out, W.loc, z->Sl * h);
    bq(g, out, z->Sl * h, MP_Q_ACT);
    return MP_OK;
}

/* The routed experts' activation: act[nrecv,fl] = gelu(pre), or the gated
 * unit's act(gate) * up (the forward's, and selective recomputation's `moe_act`). */
static void moe_activation(mp_gpt *g, moe_state *M)
{
    size_t fl = M->z.fl;
    mp_mlp_act_forward(g, M->act, M->pre, M->nrecv, fl, true);
    bq(g, M->act, M->nrecv * fl, MP_Q_ACT);
}

/* Their backward from dfull[Sfull,h] (every TP row's output gradient): the
 * weights' gradients, and the input's TP partial sum added into dx[Sfull,h]. */
static void moe_shared_backward(mp_gpt *g, moe_state *M, block_acts *B, int l,
                                   const real *dfull, real *dx)
{
    const mp_moe_sizes *z = &M->z;
    size_t S = z->Sfull, h = z->h, sl = z->sl, s1l = z->s1l;
    const real *W1 = blk(g->w, g, l, MP_BLK_SHR_FC1_W);
    const real *W2 = blk(g->w, g, l, MP_BLK_SHR_FC2_W);
    GEMM(true, false, sl, h, S, M->sact, sl, dfull, h, 1.0, blk(g->g, g, l, MP_BLK_SHR_FC2_W),
         h);
    GEMM(false, true, S, sl, h, dfull, h, W2, h, 0.0, M->sdact, sl);
    bq(g, M->sdact, S * sl, MP_Q_GRAD);
    mp_mlp_act_backward(g, M->sdpre, M->sdact, M->spre, S, sl, false);
    bq(g, M->sdpre, S * s1l, MP_Q_GRAD);
    GEMM(true, false, h, s1l, S, B->ln2_full, h, M->sdpre, s1l, 1.0,
         blk(g->g, g, l, MP_BLK_SHR_FC1_W), s1l);
    GEMM(false, true, S, h, s1l, M->sdpre, s1l, W1, s1l, 1.0, dx, h);
}

/* The layer's forward, its output (before the residual) into out[Sl,h]. */
static mp_status moe_forward_into(mp_gpt *g, block_acts *B, int l, real *out, mp_error *err)
{
    moe_state M = moe_state_of(g, B, l, false);
    const mp_moe_sizes *z = &M.z;
    size_t S = z->S, h = z->h, E = z->E, k = z->k, fl = z->fl, f1l = z->f1l;
    const real *Wr = blk(g->w, g, l, MP_BLK_ROUTER_W);
    const real *W1 = blk(g->w, g, l, MP_BLK_EXP_FC1_W);
    const real *W2 = blk(g->w, g, l, MP_BLK_EXP_FC2_W);
    /* logits[S,E] = x @ Wr: x the TP group's rows, or (etp = 1) this rank's */
    const real *x = moe_input(g, B, z);
    GEMM(false, false, S, E, h, x, h, Wr, E, 0.0, M.logits, E);
    mp_moe_oss_router_bias(g, l, M.logits, S, E);
    bq(g, M.logits, S * E, MP_Q_ACT);
    CHECK(moe_route(g, &M, l, err));
    CHECK(moe_dispatch(g, &M, x, err));
    /* each local expert: pre = x_e @ W1_e, act = gelu / SwiGLU, out = act @ W2_e
     * (out: this TP rank's partial sum), into bufa in expert order */
    experts_gemm(g, &M, false, false, EXPERT_ROWS, f1l, h, (expert_operand){M.x, h, 0}, h,
                 (expert_operand){W1, 0, h * f1l}, f1l, 0.0, M.pre, f1l, 0, f1l);
    mp_moe_oss_fc1_bias(g, l, M.pre, M.hne, z->El, f1l);
    bq(g, M.pre, M.nrecv * f1l, MP_Q_ACT);
    moe_activation(g, &M);
    experts_gemm(g, &M, false, false, EXPERT_ROWS, h, fl, (expert_operand){M.act, fl, 0}, fl,
                 (expert_operand){W2, 0, fl * h}, h, 0.0, M.bufa, h, 0, h);
    mp_moe_oss_fc2_bias(g, l, M.bufa, M.hne, z->El, h);
    /* the combine: back to the senders, each slot's row in its place
     * [S*k, h] (zeros where dropped), summed over TP (SP: this rank's tokens) */
    CHECK(moe_return(g, &M, M.bufa, M.bufa, err));
    real *part = M.bufb;
    g->be->zero(part, S * k * h * sizeof(real));
    g->be->moe_scatter(MP_REAL_KIND, part, h, M.bufa, h, M.sorder, 1, M.nsend, h, false);
    if (mp_dims_moe_local(&g->d)) /* whole experts: nothing to sum over TP */
        be_copy(g, M.y, part, S * k * h);
    else
        CHECK(mp_model_tp_reduce_rows(g, part, M.y, S * k, z->Sl * k, h, "tp-moe", err));
    bq(g, M.y, z->Sl * k * h, MP_Q_ACT);
    /* out[Sl,h] = sum over the kept slots of weight * y, slot after slot */
    g->be->moe_combine(MP_REAL_KIND, out, M.y, M.wgt, M.kept, moe_row(g, 0, z->Sl), z->Sl,
                       k, h);
    bq(g, out, z->Sl * h, MP_Q_ACT);
    if (z->sl)
        CHECK(moe_shared_forward(g, &M, B, l, out, err));
    return MP_OK;
}

mp_status mp_moe_forward(mp_gpt *g, block_acts *B, int l, mp_error *err)
{
    return moe_forward_into(g, B, l, B->xout, err);
}

mp_status mp_moe_rebuild(mp_gpt *g, block_acts *B, int l, unsigned rb, mp_error *err)
{
    bool wrong = mp_probe_drops(g->probe, "recompute-plant");
    if (rb & RB_MOE) {
        /* the whole layer again from its input, router, capacity and all-to-alls
         * included; its output is the block's already: into scratch */
        CHECK(moe_forward_into(g, B, l, work_of(g).dtmp, err));
        moe_state M = moe_state_of(g, B, l, true);
        if (wrong)
            mp_model_plant(g, M.y, M.z.Sl * M.z.k * M.z.h);
        return MP_OK;
    }
    moe_state M = moe_state_of(g, B, l, true);
    if (rb & RB_MOE_ACT) {
        moe_activation(g, &M);
        if (wrong)
            mp_model_plant(g, M.act, M.nrecv * M.z.fl);
    }
    if ((rb & RB_SHARED) && M.z.sl) {
        moe_shared_fc1(g, &M, B, l);
        if (wrong)
            mp_model_plant(g, M.sact, M.z.Sfull * M.z.sl);
    }
    return MP_OK;
}

/* The router's backward: from the weights' gradient dwf[S,k] to the
 * logits' (in M->logits), then dWr and the router's share of dx in part. */
static void moe_router_backward(mp_gpt *g, moe_state *M, block_acts *B, int l,
                                real *part)
{
    const mp_moe_sizes *z = &M->z;
    size_t S = z->S, E = z->E, k = z->k, h = z->h;
    real *dl = M->logits; /* the logits are not needed any more */
    double c = g->d.route_scale > 0 ? g->d.route_scale : 1.0;
    g->be->moe_weights_backward(MP_REAL_KIND, dl, M->scores, M->choice, M->wgt, M->dwf, S, E, k,
                                c);
    bq(g, dl, S * E, MP_Q_GRAD);
    g->be->moe_scores_backward(MP_REAL_KIND, dl, M->scores, S, E, g->d.router_sigmoid);
    bq(g, dl, S * E, MP_Q_GRAD);
    mp_moe_oss_router_bias_grad(g, l, dl, S, E);
    /* dWr[h,E] += ln2_full^T @ dl; dx += dl @ Wr^T, on one TP rank only: the
     * router is replicated, the sum over TP that follows must count it once
     * (etp = 1: each rank's own rows, no sum; dWr is then summed over TP as
     * the norms' are under SP) */
    GEMM(true, false, h, E, S, moe_input(g, B, z), h, dl, E, 1.0,
         blk(g->g, g, l, MP_BLK_ROUTER_W), E);
    if (g->tp.rank == 0 || mp_dims_moe_local(&g->d)) /* etp = 1: rows of this rank alone */
        GEMM(false, true, S, h, E, dl, E, blk(g->w, g, l, MP_BLK_ROUTER_W), E, 1.0, part, h);
}

mp_status mp_moe_backward(mp_gpt *g, block_acts *B, int l, const real *dout,
                          real *dln, mp_error *err)
{
    moe_state M = moe_state_of(g, B, l, true);
    work W = work_of(g);
    const mp_moe_sizes *z = &M.z;
    size_t S = z->S, Sl = z->Sl, h = z->h, k = z->k, fl = z->fl, f1l = z->f1l;
    const real *W1 = blk(g->w, g, l, MP_BLK_EXP_FC1_W);
    const real *W2 = blk(g->w, g, l, MP_BLK_EXP_FC2_W);
    real *G1 = blk(g->g, g, l, MP_BLK_EXP_FC1_W), *G2 = blk(g->g, g, l, MP_BLK_EXP_FC2_W);
    /* d weight[Sl,k] = <dout, y> of this rank's tokens, then every token's */
    g->be->moe_combine_backward(MP_REAL_KIND, M.dwl, dout, M.y, M.kept, moe_row(g, 0, Sl), Sl, k,
                                h);
    bq(g, M.dwl, Sl * k, MP_Q_GRAD);
    if (g->route_load) /* the kept slots of each expert, for the bias */
        g->be->moe_count(MP_REAL_KIND, g->route_load + (size_t)l * z->E, M.choice, M.kept, S * k,
                          z->E);
    bool local = mp_dims_moe_local(&g->d);
    if (local)
        be_copy(g, M.dwf, M.dwl, S * k);
    else
        CHECK(mp_model_tp_gather_rows(g, M.dwl, M.dwf, S, Sl, k, err));
    /* dy = weight * dout of every sent slot (SP: dout of every token first) */
    const real *dfull = dout;
    if (g->d.sp && g->tp.size > 1 && !local) {
        CHECK(mp_model_tp_gather(g, dout, W.dfull, h, err));
        dfull = W.dfull;
    }
    g->be->moe_gather(MP_REAL_KIND, M.bufa, h, dfull, h, M.sorder, k, M.wgt, M.nsend, h);
    bq(g, M.bufa, M.nsend * h, MP_Q_GRAD);
    CHECK(moe_a2a(g, M.bufa, M.hcounts, M.hcounts + z->ep, h, M.bufb, err));
    /* into expert order */
    g->be->moe_gather(MP_REAL_KIND, M.bufa, h, M.bufb, h, M.rorder, 1, NULL, M.nrecv, h);
    /* each local expert: dW2 += act^T @ dy; dact = dy @ W2^T */
    experts_gemm(g, &M, true, false, fl, h, EXPERT_ROWS, (expert_operand){M.act, fl, 0}, fl,
                 (expert_operand){M.bufa, h, 0}, h, 1.0, G2, 0, fl * h, h);
    experts_gemm(g, &M, false, true, EXPERT_ROWS, fl, h, (expert_operand){M.bufa, h, 0}, h,
                 (expert_operand){W2, 0, fl * h}, h, 0.0, M.dact, fl, 0, fl);
    bq(g, M.dact, M.nrecv * fl, MP_Q_GRAD);
    mp_mlp_act_backward(g, M.dpre, M.dact, M.pre, M.nrecv, fl, true);
    bq(g, M.dpre, M.nrecv * f1l, MP_Q_GRAD);
    mp_moe_oss_bias_grads(g, l, M.bufa, M.dpre, M.hne, z->El, f1l, h); /* bufa: dy still */
    /* dW1 += x^T @ dpre; dx = dpre @ W1^T (this TP rank's partial), expert order */
    experts_gemm(g, &M, true, false, h, f1l, EXPERT_ROWS, (expert_operand){M.x, h, 0}, h,
                 (expert_operand){M.dpre, f1l, 0}, f1l, 1.0, G1, 0, h * f1l, f1l);
    experts_gemm(g, &M, false, true, EXPERT_ROWS, h, f1l, (expert_operand){M.dpre, f1l, 0}, f1l,
                 (expert_operand){W1, 0, h * f1l}, f1l, 0.0, M.bufa, h, 0, h);
    CHECK(moe_return(g, &M, M.bufa, M.bufa, err));
    /* part[S,h] = each token's slots' dx, slot after slot, + the router's */
    g->be->zero(W.part, S * h * sizeof(real));
    g->be->moe_scatter(MP_REAL_KIND, W.part, h, M.bufa, h, M.sorder, k, M.nsend, h, true);
    moe_router_backward(g, &M, B, l, W.part);
    if (local) {
        be_copy(g, dln, W.part, Sl * h);
        if (z->sl) { /* the shared experts' part, over the TP group's rows */
            if (g->d.sp && g->tp.size > 1)
                CHECK(mp_model_tp_gather(g, dout, W.dfull, h, err));
            g->be->zero(M.sdx, z->Sfull * h * sizeof(real));
            moe_shared_backward(g, &M, B, l, g->d.sp && g->tp.size > 1 ? W.dfull : dout,
                                M.sdx);
            CHECK(mp_model_tp_reduce(g, M.sdx, W.dtmp, h, "tp-moe-bwd", err));
            g->be->add(MP_REAL_KIND, dln, W.dtmp, Sl * h);
        }
    } else {
        if (z->sl) /* the shared experts' TP partial joins the routed ones' */
            moe_shared_backward(g, &M, B, l, dfull, W.part);
        CHECK(mp_model_tp_reduce(g, W.part, dln, h, "tp-moe-bwd", err));
    }
    bq(g, dln, Sl * h, MP_Q_GRAD);
    return MP_OK;
}


mp_status mp_moe_update_bias(mp_gpt *g, mp_error *err)
{
    if (!g->route_load)
        return MP_OK;
    const mp_gpt_dims *d = &g->d;
    size_t E = (size_t)d->experts, n = (size_t)mp_dims_blocks(d) * E;
    /* the stage's tp x cp x dp ranks are its EP groups times its expert-DP
     * groups: the sum over both is over all of them. With etp = tp each TP
     * rank counted its group's tokens, tp times in all: the sign below
     * does not see a common factor */
    mp_group *grp[2] = {&g->ep, &g->edp};
    for (int i = 0; i < 2; i++)
        if (grp[i]->size > 1)
            CHECK(g->be->allreduce(grp[i], MP_REAL_KIND, g->route_load, n, MP_RED_SUM, err));
    for (int l = 0; l < mp_dims_blocks(d); l++) {
        if (!mp_dims_block_is_moe(d, l))
            continue;
        g->be->moe_bias_update(MP_REAL_KIND, g->route_bias + (size_t)l * E,
                               g->route_load + (size_t)l * E, E, d->bias_rate);
    }
    g->be->zero(g->route_load, n * sizeof(real));
    return MP_OK;
}
