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
 * The routing and the row shuffles are loops over host memory: MoE runs on
 * backends whose memory is the host's (exec refuses it elsewhere).
 * Compiled for float and double. */
#include <math.h>
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
} moe_state;

static moe_state moe_state_of(const mp_gpt *g, real *base)
{
    sizes s = sizes_of(&g->d);
    moe_state M;
    M.z = mp_moe_sizes_of(&g->d, s.S, s.Sl);
    mp_moe_layout L = mp_moe_layout_of(&M.z);
    M.logits = base + L.logits, M.scores = base + L.scores, M.choice = base + L.choice;
    M.wgt = base + L.wgt, M.kept = base + L.kept, M.sorder = base + L.sorder;
    M.counts = base + L.counts, M.ne = base + L.ne, M.y = base + L.y, M.x = base + L.x;
    M.pre = base + L.pre, M.act = base + L.act, M.rorder = base + L.rorder;
    M.bufa = base + L.bufa, M.bufb = base + L.bufb, M.dact = base + L.dact;
    M.dpre = base + L.dpre, M.dwl = base + L.dwl, M.dwf = base + L.dwf;
    M.spre = base + L.spre, M.sact = base + L.sact, M.sdact = base + L.sdact;
    M.sdpre = base + L.sdpre, M.sdx = base + L.sdx, M.capc = base + L.capc;
    M.nsend = M.nrecv = 0;
    for (size_t q = 0; q < M.z.ep; q++) {
        M.nsend += (size_t)M.counts[q];
        M.nrecv += (size_t)M.counts[M.z.ep + q];
    }
    return M;
}

/* All-to-all over the EP group of rows `width` reals wide: counts[q] rows to
 * (rcounts[q] from) EP rank q. Without EP a copy. */
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

/* The capacity drop (load[b*E] zeroed): which of this rank's slots are kept. */
static mp_status moe_capacity(mp_gpt *g, moe_state *M, size_t *load, mp_error *err)
{
    const mp_moe_sizes *z = &M->z;
    size_t S = z->S, k = z->k, E = z->E, b = (size_t)g->d.micro_batch;
    size_t cp = (size_t)mp_dims_cp(&g->d), rows = z->Sfull, pos = rows / b;
    const real *all = M->choice; /* the TP group's rows' choices */
    size_t r0 = 0;
    if (mp_dims_moe_local(&g->d)) {
        CHECK(mp_model_tp_gather_rows(g, M->choice, M->dwf, rows, S, k, err));
        all = M->dwf, r0 = (size_t)g->tp.rank * S;
    }
    if (cp > 1) { /* every CP rank's, rank after rank */
        double t = g->be->now();
        CHECK(g->be->allgather(&g->cp, MP_REAL_KIND, all, M->capc, rows * k, err));
        mp_probe_record(g->probe, t, MP_STREAM_CP, MP_EV_CP_COMM, true);
        all = M->capc;
    }
    size_t seq = pos * cp;
    size_t *owner = malloc(2 * seq * sizeof *owner), *local = owner + seq;
    if (!owner)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the capacity");
    for (size_t c = 0; c < cp; c++) {
        mp_gpt_dims dc = g->d;
        dc.cp_rank = (int)c;
        for (size_t i = 0; i < pos; i++) {
            size_t gp = (size_t)mp_dims_global_pos(&dc, (int)i);
            owner[gp] = c, local[gp] = i;
        }
    }
    size_t me = cp > 1 ? (size_t)g->cp.rank : 0;
    for (size_t gp = 0; gp < seq; gp++)
        for (size_t smp = 0; smp < b; smp++) {
            size_t c = owner[gp], r = local[gp] * b + smp;
            for (size_t j = 0; j < k; j++) {
                size_t e = (size_t)all[(c * rows + r) * k + j];
                bool keep = load[smp * E + e] < z->capacity;
                load[smp * E + e] += keep;
                if (c == me && r >= r0 && r < r0 + S)
                    M->kept[(r - r0) * k + j] = keep ? 1 : 0;
            }
        }
    free(owner);
    return MP_OK;
}

/* Scores, top-k (group-limited, with the expert bias: mp_moe_pick), weights
 * and the capacity drop of every token row of block l. */
static mp_status moe_route(mp_gpt *g, moe_state *M, int l, mp_error *err)
{
    const mp_moe_sizes *z = &M->z;
    size_t S = z->S, E = z->E, k = z->k, b = (size_t)g->d.micro_batch;
    for (size_t r = 0; r < S; r++) {
        const real *lg = M->logits + r * E;
        real *p = M->scores + r * E;
        if (g->d.router_sigmoid) {
            for (size_t e = 0; e < E; e++)
                p[e] = (real)(1.0 / (1.0 + exp(-(double)lg[e])));
        } else {
            double mx = lg[0], sum = 0;
            for (size_t e = 1; e < E; e++)
                mx = lg[e] > mx ? lg[e] : mx;
            for (size_t e = 0; e < E; e++)
                sum += exp((double)lg[e] - mx);
            for (size_t e = 0; e < E; e++)
                p[e] = (real)(exp((double)lg[e] - mx) / sum);
        }
    }
    bq(g, M->scores, S * E, MP_Q_PROB);
    const mp_gpt_dims *d = &g->d;
    size_t G = d->route_groups > 1 ? (size_t)d->route_groups : 1;
    /* the expert bias joins the scores for the choice only, in their precision */
    const real *bias = g->route_bias ? g->route_bias + (size_t)l * E : NULL;
    double scale = d->route_scale > 0 ? d->route_scale : 1.0;
    unsigned char *taken = malloc(E + G);
    double *q = malloc((E + G) * sizeof *q);
    size_t *pick = malloc(k * sizeof *pick);
    size_t *load = z->capacity ? calloc(b * E, sizeof *load) : NULL;
    if (!taken || !q || !pick || (z->capacity && !load)) {
        free(taken);
        free(q);
        free(pick);
        free(load);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the router");
    }
    for (size_t r = 0; r < S; r++) {
        const real *p = M->scores + r * E;
        for (size_t e = 0; e < E; e++)
            q[e] = bias ? (double)(real)(p[e] + bias[e]) : (double)p[e];
        mp_moe_pick(q, E, k, G, (size_t)d->route_group_top_k, sizeof(real) == sizeof(float),
                    pick, taken, q + E);
        double sum = 0;
        for (size_t j = 0; j < k; j++) {
            M->choice[r * k + j] = (real)pick[j];
            sum += p[pick[j]];
        }
        /* the unbiased scores renormalised over the chosen, times the scale */
        for (size_t j = 0; j < k; j++)
            M->wgt[r * k + j] =
                (real)((sum > 0 ? p[pick[j]] / sum : 1.0 / (double)k) * scale);
    }
    free(q);
    free(pick);
    free(taken);
    bq(g, M->wgt, S * k, MP_Q_PROB);
    /* capacity: per sample (rows are position * b + sample), each expert keeps
     * its first `capacity` slots in position order, then slot order. With
     * etp = 1 each TP rank routes its own rows: the TP group's choices first;
     * with CP the CP ranks' too, walked in global position order */
    mp_status st = MP_OK;
    if (load)
        st = moe_capacity(g, M, load, err);
    else
        for (size_t s = 0; s < S * k; s++)
            M->kept[s] = 1;
    free(load);
    if (st)
        return st;
    /* test-only (--test-drop-allreduce ep-route): the first token's first
     * choice goes to the next expert, as a dispatch bug would send it */
    if (mp_probe_drops(g->probe, "ep-route"))
        M->choice[0] = (real)(((size_t)M->choice[0] + 1) % E);
    return MP_OK;
}

/* The dispatch: kept slots' rows [x | local expert] to their experts' EP
 * ranks, rank after rank, each in slot order; the experts' rows regrouped
 * expert after expert (in the order received) into M->x. */
static mp_status moe_dispatch(mp_gpt *g, moe_state *M, const real *x,
                              mp_error *err)
{
    const mp_moe_sizes *z = &M->z;
    size_t h = z->h, w = h + 1, i = 0;
    for (size_t q = 0; q < z->ep; q++) {
        size_t n = 0;
        for (size_t s = 0; s < z->S * z->k; s++) {
            size_t e = (size_t)M->choice[s];
            if (!M->kept[s] || e / z->El != q)
                continue;
            memcpy(M->bufa + i * w, x + (s / z->k) * h, h * sizeof(real));
            M->bufa[i * w + h] = (real)(e % z->El);
            M->sorder[i++] = (real)s;
            n++;
        }
        M->counts[q] = (real)n;
    }
    /* how many rows each EP rank sends this one */
    real *ones = M->dwf; /* free until the backward: ep ones */
    for (size_t q = 0; q < z->ep; q++)
        ones[q] = 1;
    CHECK(moe_a2a(g, M->counts, ones, ones, 1, M->counts + z->ep, err));
    *M = moe_state_of(g, M->logits);
    CHECK(moe_a2a(g, M->bufa, M->counts, M->counts + z->ep, w, M->bufb, err));
    size_t p = 0;
    for (size_t e = 0; e < z->El; e++) {
        size_t n = 0;
        for (size_t r = 0; r < M->nrecv; r++) {
            if ((size_t)M->bufb[r * w + h] != e)
                continue;
            memcpy(M->x + p * h, M->bufb + r * w, h * sizeof(real));
            M->rorder[p++] = (real)r;
            n++;
        }
        M->ne[e] = (real)n;
    }
    return MP_OK;
}

/* rows[nrecv, h] in expert order -> back to their senders; the result in
 * send order lands in out[nsend, h] (bufb is the staging buffer). */
static mp_status moe_return(mp_gpt *g, moe_state *M, const real *rows, real *out,
                            mp_error *err)
{
    size_t h = M->z.h;
    for (size_t p = 0; p < M->nrecv; p++)
        memcpy(M->bufb + (size_t)M->rorder[p] * h, rows + p * h, h * sizeof(real));
    return moe_a2a(g, M->bufb, M->counts + M->z.ep, M->counts, h, out, err);
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

/* The shared experts: one MLP of their summed width over the TP group's
 * rows, split over TP as the dense MLP (fc1 column-, fc2 row-parallel), its
 * output reduced over TP and added to xout[Sl,h]. */
static mp_status moe_shared_forward(mp_gpt *g, moe_state *M, block_acts *B,
                                    int l, mp_error *err)
{
    const mp_moe_sizes *z = &M->z;
    work W = work_of(g);
    size_t S = z->Sfull, h = z->h, sl = z->sl, s1l = z->s1l;
    GEMM(false, false, S, s1l, h, B->ln2_full, h, blk(g->w, g, l, MP_BLK_SHR_FC1_W), s1l,
         0.0, M->spre, s1l);
    bq(g, M->spre, S * s1l, MP_Q_ACT);
    if (g->d.swiglu)
        g->be->swiglu_forward(MP_REAL_KIND, M->sact, M->spre, (int)S, (int)sl);
    else
        g->be->gelu_forward(MP_REAL_KIND, M->sact, M->spre, S * sl);
    bq(g, M->sact, S * sl, MP_Q_ACT);
    GEMM(false, false, S, h, sl, M->sact, sl, blk(g->w, g, l, MP_BLK_SHR_FC2_W), h, 0.0,
         W.part, h);
    CHECK(mp_model_tp_reduce(g, W.part, W.loc, h, "tp-moe", err));
    bq(g, W.loc, z->Sl * h, MP_Q_ACT);
    g->be->add(MP_REAL_KIND, B->xout, W.loc, z->Sl * h);
    bq(g, B->xout, z->Sl * h, MP_Q_ACT);
    return MP_OK;
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
    if (g->d.swiglu)
        g->be->swiglu_backward(MP_REAL_KIND, M->sdpre, M->sdact, M->spre, (int)S, (int)sl);
    else
        g->be->gelu_backward(MP_REAL_KIND, M->sdpre, M->sdact, M->spre, S * sl);
    bq(g, M->sdpre, S * s1l, MP_Q_GRAD);
    GEMM(true, false, h, s1l, S, B->ln2_full, h, M->sdpre, s1l, 1.0,
         blk(g->g, g, l, MP_BLK_SHR_FC1_W), s1l);
    GEMM(false, true, S, h, s1l, M->sdpre, s1l, W1, s1l, 1.0, dx, h);
}

mp_status mp_moe_forward(mp_gpt *g, block_acts *B, int l, mp_error *err)
{
    moe_state M = moe_state_of(g, B->moe);
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
    for (size_t e = 0, o = 0; e < z->El; o += (size_t)M.ne[e++]) {
        size_t n = (size_t)M.ne[e];
        if (n)
            GEMM(false, false, n, f1l, h, M.x + o * h, h, W1 + e * h * f1l, f1l, 0.0,
                 M.pre + o * f1l, f1l);
    }
    mp_moe_oss_fc1_bias(g, l, M.pre, M.ne, z->El, f1l);
    bq(g, M.pre, M.nrecv * f1l, MP_Q_ACT);
    if (g->d.glu_limit > 0)
        g->be->swiglu_clamped_forward(MP_REAL_KIND, M.act, M.pre, (int)M.nrecv, (int)fl,
                                      g->d.glu_limit);
    else if (g->d.swiglu)
        g->be->swiglu_forward(MP_REAL_KIND, M.act, M.pre, (int)M.nrecv, (int)fl);
    else
        g->be->gelu_forward(MP_REAL_KIND, M.act, M.pre, M.nrecv * fl);
    bq(g, M.act, M.nrecv * fl, MP_Q_ACT);
    for (size_t e = 0, o = 0; e < z->El; o += (size_t)M.ne[e++]) {
        size_t n = (size_t)M.ne[e];
        if (n)
            GEMM(false, false, n, h, fl, M.act + o * fl, fl, W2 + e * fl * h, h, 0.0,
                 M.bufa + o * h, h);
    }
    mp_moe_oss_fc2_bias(g, l, M.bufa, M.ne, z->El, h);
    /* the combine: back to the senders, each slot's row in its place
     * [S*k, h] (zeros where dropped), summed over TP (SP: this rank's tokens) */
    CHECK(moe_return(g, &M, M.bufa, M.bufa, err));
    real *part = M.bufb;
    g->be->zero(part, S * k * h * sizeof(real));
    for (size_t i = M.nsend; i-- > 0;)
        memmove(part + (size_t)M.sorder[i] * h, M.bufa + i * h, h * sizeof(real));
    if (mp_dims_moe_local(&g->d)) /* whole experts: nothing to sum over TP */
        be_copy(g, M.y, part, S * k * h);
    else
        CHECK(mp_model_tp_reduce_rows(g, part, M.y, S * k, z->Sl * k, h, "tp-moe", err));
    bq(g, M.y, z->Sl * k * h, MP_Q_ACT);
    /* xout[Sl,h] = sum over the kept slots of weight * y, slot after slot */
    for (size_t rl = 0; rl < z->Sl; rl++) {
        size_t r = moe_row(g, rl, z->Sl);
        real *out = B->xout + rl * h;
        for (size_t c = 0; c < h; c++) {
            double acc = 0;
            for (size_t j = 0; j < k; j++)
                if (M.kept[r * k + j])
                    acc += (double)M.wgt[r * k + j] * (double)M.y[(rl * k + j) * h + c];
            out[c] = (real)acc;
        }
    }
    bq(g, B->xout, z->Sl * h, MP_Q_ACT);
    if (z->sl)
        CHECK(moe_shared_forward(g, &M, B, l, err));
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
    /* w_j = c p_j / sum_i p_i over the chosen (c: the route scale):
     * dp_j = (c dw_j - sum_i w_i dw_i) / sum */
    double c = g->d.route_scale > 0 ? g->d.route_scale : 1.0;
    for (size_t r = 0; r < S; r++) {
        const real *p = M->scores + r * E;
        real *d = dl + r * E;
        double sum = 0, dot = 0;
        for (size_t j = 0; j < k; j++) {
            sum += p[(size_t)M->choice[r * k + j]];
            dot += (double)M->wgt[r * k + j] * (double)M->dwf[r * k + j];
        }
        for (size_t e = 0; e < E; e++)
            d[e] = 0;
        for (size_t j = 0; j < k && sum > 0; j++)
            d[(size_t)M->choice[r * k + j]] =
                (real)((c * (double)M->dwf[r * k + j] - dot) / sum);
    }
    bq(g, dl, S * E, MP_Q_GRAD);
    for (size_t r = 0; r < S; r++) {
        const real *p = M->scores + r * E;
        real *d = dl + r * E;
        if (g->d.router_sigmoid) {
            for (size_t e = 0; e < E; e++)
                d[e] = (real)((double)d[e] * (double)p[e] * (1.0 - (double)p[e]));
        } else {
            double s = 0;
            for (size_t e = 0; e < E; e++)
                s += (double)p[e] * (double)d[e];
            for (size_t e = 0; e < E; e++)
                d[e] = (real)((double)p[e] * ((double)d[e] - s));
        }
    }
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
    moe_state M = moe_state_of(g, B->moe);
    work W = work_of(g);
    const mp_moe_sizes *z = &M.z;
    size_t S = z->S, Sl = z->Sl, h = z->h, k = z->k, fl = z->fl, f1l = z->f1l;
    const real *W1 = blk(g->w, g, l, MP_BLK_EXP_FC1_W);
    const real *W2 = blk(g->w, g, l, MP_BLK_EXP_FC2_W);
    real *G1 = blk(g->g, g, l, MP_BLK_EXP_FC1_W), *G2 = blk(g->g, g, l, MP_BLK_EXP_FC2_W);
    /* d weight[Sl,k] = <dout, y> of this rank's tokens, then every token's */
    for (size_t rl = 0; rl < Sl; rl++) {
        size_t r = moe_row(g, rl, Sl);
        for (size_t j = 0; j < k; j++) {
            double acc = 0;
            if (M.kept[r * k + j])
                for (size_t c = 0; c < h; c++)
                    acc += (double)dout[rl * h + c] * (double)M.y[(rl * k + j) * h + c];
            M.dwl[rl * k + j] = (real)acc;
        }
    }
    bq(g, M.dwl, Sl * k, MP_Q_GRAD);
    if (g->route_load) /* the kept slots of each expert, for the bias */
        for (size_t s = 0; s < S * k; s++)
            if (M.kept[s])
                g->route_load[(size_t)l * z->E + (size_t)M.choice[s]] += 1;
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
    for (size_t i = 0; i < M.nsend; i++) {
        size_t s = (size_t)M.sorder[i];
        for (size_t c = 0; c < h; c++)
            M.bufa[i * h + c] = M.wgt[s] * dfull[(s / k) * h + c];
    }
    bq(g, M.bufa, M.nsend * h, MP_Q_GRAD);
    CHECK(moe_a2a(g, M.bufa, M.counts, M.counts + z->ep, h, M.bufb, err));
    for (size_t p = 0; p < M.nrecv; p++) /* into expert order */
        memcpy(M.bufa + p * h, M.bufb + (size_t)M.rorder[p] * h, h * sizeof(real));
    /* each local expert: dW2 += act^T @ dy; dact = dy @ W2^T */
    for (size_t e = 0, o = 0; e < z->El; o += (size_t)M.ne[e++]) {
        size_t n = (size_t)M.ne[e];
        if (!n)
            continue;
        GEMM(true, false, fl, h, n, M.act + o * fl, fl, M.bufa + o * h, h, 1.0, G2 + e * fl * h,
             h);
        GEMM(false, true, n, fl, h, M.bufa + o * h, h, W2 + e * fl * h, h, 0.0, M.dact + o * fl,
             fl);
    }
    bq(g, M.dact, M.nrecv * fl, MP_Q_GRAD);
    if (g->d.glu_limit > 0)
        g->be->swiglu_clamped_backward(MP_REAL_KIND, M.dpre, M.dact, M.pre, (int)M.nrecv,
                                       (int)fl, g->d.glu_limit);
    else if (g->d.swiglu)
        g->be->swiglu_backward(MP_REAL_KIND, M.dpre, M.dact, M.pre, (int)M.nrecv, (int)fl);
    else
        g->be->gelu_backward(MP_REAL_KIND, M.dpre, M.dact, M.pre, M.nrecv * fl);
    bq(g, M.dpre, M.nrecv * f1l, MP_Q_GRAD);
    mp_moe_oss_bias_grads(g, l, M.bufa, M.dpre, M.ne, z->El, f1l, h); /* bufa: dy still */
    /* dW1 += x^T @ dpre; dx = dpre @ W1^T (this TP rank's partial), expert order */
    for (size_t e = 0, o = 0; e < z->El; o += (size_t)M.ne[e++]) {
        size_t n = (size_t)M.ne[e];
        if (!n)
            continue;
        GEMM(true, false, h, f1l, n, M.x + o * h, h, M.dpre + o * f1l, f1l, 1.0,
             G1 + e * h * f1l, f1l);
        GEMM(false, true, n, h, f1l, M.dpre + o * f1l, f1l, W1 + e * h * f1l, f1l, 0.0,
             M.bufa + o * h, h);
    }
    CHECK(moe_return(g, &M, M.bufa, M.bufa, err));
    /* part[S,h] = each token's slots' dx, slot after slot, + the router's */
    g->be->zero(W.part, S * h * sizeof(real));
    for (size_t i = 0; i < M.nsend; i++) {
        real *dst = W.part + ((size_t)M.sorder[i] / k) * h;
        for (size_t c = 0; c < h; c++)
            dst[c] += M.bufa[i * h + c];
    }
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
        real *load = g->route_load + (size_t)l * E, *bias = g->route_bias + (size_t)l * E;
        double total = 0;
        for (size_t e = 0; e < E; e++)
            total += (double)load[e];
        double mean = total / (double)E; /* integers: the sign of mean - load is exact */
        for (size_t e = 0; e < E; e++) {
            double off = mean - (double)load[e];
            real step = (real)(off > 0 ? d->bias_rate : off < 0 ? -d->bias_rate : 0.0);
            bias[e] = bias[e] + step;
        }
    }
    g->be->zero(g->route_load, n * sizeof(real));
    return MP_OK;
}
