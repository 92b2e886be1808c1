/* model.c — one rank's part of the GPT, forward and backward side by side
 * (llm.c style, shapes in the comments), partitioned as Megatron-LM does:
 *
 *   S = positions * micro_batch token rows, ordered r = pos * b + sample, so
 *   that with sequence parallelism (SP) TP rank k holds rows [k*S/t, (k+1)*S/t),
 *   a contiguous piece of the sequence; Sl = S/t with SP, S without. The
 *   positions are the whole sequence, or with context parallelism (CP) this
 *   rank's two of 2cp chunks (mp_dims_global_pos); attention then runs this
 *   rank's queries against every key and value, gathered over the CP group,
 *   and the keys' and values' gradients are summed back to their owners.
 *   h hidden, hl = h/t, Fl = ffn/t, Vl = vocab/t, hd head dim.
 *
 *   column-parallel GEMM (QKV, fc1, LM head): input replicated [S,h]; its
 *     conjugate "g" = identity forward / all-reduce of the input gradient
 *     backward; with SP all-gather forward / reduce-scatter backward.
 *   row-parallel GEMM (proj, fc2, embedding): partial sums [S,h]; all-reduce
 *     forward / identity backward; with SP reduce-scatter / all-gather.
 *
 * Compiled for float and double (this file includes itself, see real.h). */
#ifndef MP_REAL_BITS
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"

#define MP_REAL_BITS 32
#include "exec/model.c"
#undef MP_REAL_BITS
#define MP_REAL_BITS 64
#include "exec/model.c"
#undef MP_REAL_BITS
#else
#include "exec/real.h"

/* Saved activations of one block for one micro-batch. */
typedef struct RN(block_acts) {
    real *ln1_xhat, *ln1_rstd, *ln1_full; /* [Sl,h] [Sl] [S,h] */
    real *qkv, *probs, *att;              /* [S,row] [b,a/t,s,sk] [S,hl]; row = hl + 2 kc */
    real *kv_full;                        /* CP: [sk*b,2kc] every position's K|V */
    real *xmid;                           /* [Sl,h] residual after attention */
    real *ln2_xhat, *ln2_rstd, *ln2_full; /* [Sl,h] [Sl] [S,h] */
    real *fc1_pre, *fc1_act;              /* [S,f1] [S,Fl]; f1 = 2 Fl ([gate|up]) for SwiGLU */
    real *xout;                           /* [Sl,h] block output */
} RN(block_acts);

struct RN(mp_acts) {
    real *mem;
    int32_t *tokens, *targets; /* [S] */
    real *x0;                  /* [Sl,h] the stage's input: embedding output, or received */
    RN(block_acts) *blk;       /* [blocks of the stage] */
    real *lnf_xhat, *lnf_rstd, *lnf_full; /* [Sl,h] [Sl] [S,h] */
    real *logits;              /* [S,Vl]: logits, then probabilities, then d logits */
    /* BERT's heads: the masked-LM transform [S,h] (dense output, GeLU output,
     * LayerNorm x-hat, rstd [S], output), the pooler [b,h] (dense output, tanh)
     * and the two-way head's probabilities [b,2] */
    real *mlm_pre, *mlm_act, *mlm_xhat, *mlm_rstd, *mlm_out, *pool_pre, *pooled, *nsp_p;
};

/* Workspace of one rank (shared by all micro-batches). */
typedef struct RN(work) {
    real *part;  /* [S,h] partial sums before a TP reduction */
    real *loc;   /* [Sl,h] LayerNorm output before the SP all-gather */
    real *dres;  /* [Sl,h] gradient of the residual stream */
    real *dln;   /* [Sl,h] */
    real *dtmp;  /* [Sl,h] */
    real *dfull; /* [S,h] */
    real *datt;  /* [S,hl] */
    real *dqkv;  /* [S,row] */
    real *dfc;   /* [S,f1] */
    real *dact;  /* [S,Fl] SwiGLU: gradient of its output */
    real *stats; /* [3S] cross-entropy max, sum, target logit */
    real *att_scratch; /* [s*sk] attention backward: one head's dP, then dS */
    real *kv_loc;   /* CP: [S,2kc] this rank's K|V, or its share of their gradient */
    real *kv_ranks; /* CP: [cp][S,2kc] every rank's K|V (or gradients), rank after rank */
    real *dkv_full; /* CP: [sk*b,2kc] gradient of every position's K|V from these queries */
    RN(block_acts) sblk; /* recomputation: one block's activations (probs alone for
                            selective), rebuilt in backward; empty without */
} RN(work);

typedef struct RN(sizes) {
    size_t S, Sl, h, hl, Fl, Vl, hd, al, s, b, L;
    size_t gl, rep;               /* key/value heads of this rank; query heads per one */
    size_t kc, row;               /* K (and V) columns; a QKV row: hl + 2 kc */
    size_t f1;                    /* fc1's output columns: Fl, or 2 Fl for SwiGLU */
    size_t sk, cp;                /* key positions (the whole sequence), CP degree */
    size_t first_block, n_blocks; /* the blocks of this pipeline stage */
    int most_recompute;           /* the most any block of the stage recomputes */
    bool emb, head;               /* the stage holds the embedding / the head */
} RN(sizes);

static RN(sizes) RN(sizes_of)(const mp_gpt_dims *d)
{
    RN(sizes) z;
    z.s = (size_t)mp_dims_positions(d);
    z.sk = (size_t)d->seq;
    z.cp = (size_t)mp_dims_cp(d);
    z.b = (size_t)d->micro_batch;
    z.S = z.s * z.b;
    z.Sl = (size_t)mp_dims_local_tokens(d);
    z.h = (size_t)d->hidden;
    z.hl = z.h / (size_t)d->tp;
    z.Fl = (size_t)d->ffn / (size_t)d->tp;
    z.Vl = (size_t)d->vocab / (size_t)d->tp;
    z.hd = (size_t)mp_dims_head_dim(d);
    z.al = (size_t)d->heads / (size_t)d->tp;
    z.gl = (size_t)mp_dims_kv_heads(d) / (size_t)d->tp;
    z.rep = z.al / z.gl;
    z.kc = z.gl * z.hd;
    z.row = z.hl + 2 * z.kc;
    z.f1 = d->swiglu ? 2 * z.Fl : z.Fl;
    z.L = (size_t)d->layers;
    int ib, ie;
    mp_dims_items(d, &ib, &ie);
    int fb = (ib > 1 ? ib : 1) - 1, lb = (ie < d->layers + 1 ? ie : d->layers + 1) - 1;
    z.first_block = (size_t)fb;
    z.n_blocks = lb > fb ? (size_t)(lb - fb) : 0;
    z.emb = ib == 0;
    z.head = ie == d->layers + 2;
    z.most_recompute = 0;
    for (size_t k = 0; k < z.n_blocks; k++) {
        int r = mp_dims_block_recompute(d, (int)(z.first_block + k));
        z.most_recompute = r > z.most_recompute ? r : z.most_recompute;
    }
    return z;
}

/* Bump allocation from one block: first a pass that counts (base NULL). */
static real *RN(take)(real *base, size_t *used, size_t n)
{
    real *p = base ? base + *used : NULL;
    *used += n;
    return p;
}

/* One block's activations: all of them (mode 0), all but the attention
 * probabilities (1: selective), or the block's output alone (2: full; its
 * input is the previous block's output or x0). Fields not kept are NULL. */
static void RN(layout_block)(RN(block_acts) *B, real *base, size_t *u, const RN(sizes) *z,
                             int mode)
{
    memset(B, 0, sizeof *B);
    if (mode < 2) {
        B->ln1_xhat = RN(take)(base, u, z->Sl * z->h);
        B->ln1_rstd = RN(take)(base, u, z->Sl);
        B->ln1_full = RN(take)(base, u, z->S * z->h);
        B->qkv = RN(take)(base, u, z->S * z->row);
        if (mode == 0)
            B->probs = RN(take)(base, u, z->b * z->al * z->s * z->sk);
        B->att = RN(take)(base, u, z->S * z->hl);
        if (z->cp > 1)
            B->kv_full = RN(take)(base, u, z->sk * z->b * 2 * z->kc);
        B->xmid = RN(take)(base, u, z->Sl * z->h);
        B->ln2_xhat = RN(take)(base, u, z->Sl * z->h);
        B->ln2_rstd = RN(take)(base, u, z->Sl);
        B->ln2_full = RN(take)(base, u, z->S * z->h);
        B->fc1_pre = RN(take)(base, u, z->S * z->f1);
        B->fc1_act = RN(take)(base, u, z->S * z->Fl);
    }
    B->xout = RN(take)(base, u, z->Sl * z->h);
}

static size_t RN(layout_acts)(RN(mp_acts) *A, real *base, const RN(sizes) *z,
                              const mp_gpt_dims *d)
{
    size_t u = 0;
    /* tokens and targets ride in the same block, as reals' worth of int32 */
    size_t int_reals = (2 * z->S * sizeof(int32_t) + sizeof(real) - 1) / sizeof(real);
    real *ints = RN(take)(base, &u, int_reals);
    if (base) {
        A->tokens = (int32_t *)(void *)ints;
        A->targets = A->tokens + z->S;
    }
    A->x0 = RN(take)(base, &u, z->Sl * z->h);
    for (size_t l = 0; l < z->n_blocks; l++) {
        RN(block_acts) tmp, *B = base ? &A->blk[l] : &tmp;
        RN(layout_block)(B, base, &u, z,
                         mp_dims_block_recompute(d, (int)(z->first_block + l)));
    }
    A->lnf_xhat = RN(take)(base, &u, z->Sl * z->h);
    A->lnf_rstd = RN(take)(base, &u, z->Sl);
    A->lnf_full = RN(take)(base, &u, z->S * z->h);
    A->logits = RN(take)(base, &u, z->S * z->Vl);
    if (d->bert) {
        A->mlm_pre = RN(take)(base, &u, z->S * z->h);
        A->mlm_act = RN(take)(base, &u, z->S * z->h);
        A->mlm_xhat = RN(take)(base, &u, z->S * z->h);
        A->mlm_rstd = RN(take)(base, &u, z->S);
        A->mlm_out = RN(take)(base, &u, z->S * z->h);
        A->pool_pre = RN(take)(base, &u, z->b * z->h);
        A->pooled = RN(take)(base, &u, z->b * z->h);
        A->nsp_p = RN(take)(base, &u, z->b * 2);
    }
    return u;
}

static size_t RN(layout_work)(RN(work) *W, real *base, const RN(sizes) *z)
{
    size_t u = 0;
    W->part = RN(take)(base, &u, z->S * z->h);
    W->loc = RN(take)(base, &u, z->Sl * z->h);
    W->dres = RN(take)(base, &u, z->Sl * z->h);
    W->dln = RN(take)(base, &u, z->Sl * z->h);
    W->dtmp = RN(take)(base, &u, z->Sl * z->h);
    W->dfull = RN(take)(base, &u, z->S * z->h);
    W->datt = RN(take)(base, &u, z->S * z->hl);
    W->dqkv = RN(take)(base, &u, z->S * z->row);
    W->dfc = RN(take)(base, &u, z->S * z->f1);
    W->dact = RN(take)(base, &u, z->S * z->Fl);
    W->stats = RN(take)(base, &u, 3 * z->S);
    W->att_scratch = RN(take)(base, &u, z->s * z->sk);
    size_t kv = z->cp > 1 ? z->sk * z->b * 2 * z->kc : 0;
    W->kv_loc = RN(take)(base, &u, z->cp > 1 ? z->S * 2 * z->kc : 0);
    W->kv_ranks = RN(take)(base, &u, kv);
    W->dkv_full = RN(take)(base, &u, kv);
    /* full recompute rebuilds a whole block here; selective only its probabilities */
    if (z->most_recompute == 2)
        RN(layout_block)(&W->sblk, base, &u, z, 0);
    else if (z->most_recompute == 1) {
        memset(&W->sblk, 0, sizeof W->sblk);
        W->sblk.probs = RN(take)(base, &u, z->b * z->al * z->s * z->sk);
    } else {
        memset(&W->sblk, 0, sizeof W->sblk);
    }
    return u;
}

static RN(work) RN(work_of)(const RN(mp_gpt) *g)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    RN(work) W;
    RN(layout_work)(&W, g->ws, &z);
    return W;
}

mp_status RN(mp_gpt_init)(RN(mp_gpt) *g, const mp_gpt_dims *d, const mp_param_layout *lay,
                          const mp_backend *be, mp_group tp, int n_slots, size_t pad_to,
                          bool exact, uint64_t seed, mp_probe *probe, mp_error *err)
{
    memset(g, 0, sizeof *g);
    g->d = *d;
    g->lay = lay;
    g->be = be;
    g->tp = tp;
    g->exact = exact;
    g->probe = probe;
    g->grad_scale = 1;
    g->keep_microbatch = -1;
    RN(sizes) z = RN(sizes_of)(d);
    if (pad_to < 1)
        pad_to = 1;
    g->n_alloc = (lay->total + pad_to - 1) / pad_to * pad_to;
    g->w = calloc(g->n_alloc, sizeof(real));
    g->g = calloc(g->n_alloc, sizeof(real));
    g->slots = calloc((size_t)n_slots, sizeof *g->slots);
    RN(work) W;
    size_t nws = RN(layout_work)(&W, NULL, &z);
    g->ws = calloc(nws, sizeof(real));
    g->qpos = malloc(z.s * sizeof *g->qpos);
    if (!g->w || !g->g || !g->slots || !g->ws || !g->qpos)
        goto oom;
    for (size_t i = 0; i < z.s; i++)
        g->qpos[i] = mp_dims_global_pos(d, (int)i);
    g->n_slots = n_slots;
    for (int i = 0; i < n_slots; i++) {
        RN(mp_acts) probe_layout;
        RN(mp_acts) *A = calloc(1, sizeof *A);
        if (!A)
            goto oom;
        g->slots[i] = A;
        A->blk = calloc(z.n_blocks ? z.n_blocks : 1, sizeof *A->blk);
        size_t n = RN(layout_acts)(&probe_layout, NULL, &z, d);
        A->mem = calloc(n, sizeof(real));
        if (!A->blk || !A->mem)
            goto oom;
        RN(layout_acts)(A, A->mem, &z, d);
        g->slot_reals = n;
    }
    /* Initial values: a function of (seed, tensor, full index) only. */
    for (int pid = 0; pid < lay->n; pid++) {
        const mp_param *p = &lay->p[pid];
        size_t n = (size_t)p->lrows * (size_t)p->lcols;
        for (size_t i = 0; i < n; i++)
            g->w[p->offset + i] = (real)mp_param_init_value(
                p, p->ref_index, seed, mp_param_full_index(p, d->tp_rank, i), exact);
    }
    return MP_OK;
oom:
    RN(mp_gpt_free)(g);
    return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL,
                        "out of memory for the model (try --shrink)");
}

void RN(mp_gpt_free)(RN(mp_gpt) *g)
{
    if (g->slots)
        for (int i = 0; i < g->n_slots; i++)
            if (g->slots[i]) {
                free(g->slots[i]->blk);
                free(g->slots[i]->mem);
                free(g->slots[i]);
            }
    free(g->slots);
    free(g->w);
    free(g->g);
    free(g->ws);
    free(g->qpos);
    free(g->kept_logits);
    memset(g, 0, sizeof *g);
}

/* ---- TP collectives, timed on the tp stream ---- */

/* partial[S,cols] summed over TP -> out[Sl,cols]: all-reduce (out may alias
 * partial) or, with SP, reduce-scatter along the sequence. */
static mp_status RN(tp_reduce)(RN(mp_gpt) *g, real *partial, real *out, size_t cols,
                               const char *site, mp_error *err)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    double t = g->be->now();
    mp_status st = MP_OK;
    bool drop = mp_probe_drops(g->probe, site);
    if (!g->d.sp || g->tp.size == 1) {
        if (!drop)
            st = g->be->allreduce(&g->tp, MP_REAL_KIND, partial, z.S * cols, MP_RED_SUM, err);
        if (out != partial)
            memcpy(out, partial, z.S * cols * sizeof(real));
    } else if (drop) {
        memcpy(out, partial + (size_t)g->tp.rank * z.Sl * cols, z.Sl * cols * sizeof(real));
    } else {
        st = g->be->reduce_scatter(&g->tp, MP_REAL_KIND, partial, out, z.Sl * cols, err);
    }
    if (g->tp.size > 1)
        mp_probe_record(g->probe, t, MP_STREAM_TP, MP_EV_TP_COMM, true);
    return st;
}

/* loc[Sl,cols] -> full[S,cols]: SP all-gather; without SP a copy (or nothing). */
static mp_status RN(tp_gather)(RN(mp_gpt) *g, const real *loc, real *full, size_t cols,
                               mp_error *err)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    if (!g->d.sp || g->tp.size == 1) {
        if (full != loc)
            memcpy(full, loc, z.S * cols * sizeof(real));
        return MP_OK;
    }
    double t = g->be->now();
    mp_status st = g->be->allgather(&g->tp, MP_REAL_KIND, loc, full, z.Sl * cols, err);
    mp_probe_record(g->probe, t, MP_STREAM_TP, MP_EV_TP_COMM, true);
    return st;
}

static real *RN(param)(real *buf, const RN(mp_gpt) *g, int pid)
{
    return buf + g->lay->p[pid].offset;
}

#define GEMM(ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc)                                 \
    g->be->gemm(MP_REAL_KIND, ta, tb, (int)(m), (int)(n), (int)(k), 1.0, A, (int)(lda), B,  \
                (int)(ldb), beta, C, (int)(ldc))
#define CHECK(x)                                                                           \
    do {                                                                                   \
        mp_status st_ = (x);                                                               \
        if (st_ != MP_OK)                                                                  \
            return st_;                                                                    \
    } while (0)

/* ---- context parallelism: every key and value for this rank's queries ---- */

/* Row of (rank c's local position i, sample n) in the position-major
 * [sk*b] order of the whole sequence. */
static size_t RN(cp_full_row)(const RN(mp_gpt) *g, const RN(sizes) *z, int c, size_t i,
                              size_t n)
{
    mp_gpt_dims other = g->d;
    other.cp_rank = c;
    return (size_t)mp_dims_global_pos(&other, (int)i) * z->b + n;
}

/* kv_full[sk*b,2kc] = every rank's K|V columns of qkv, by position: a ring
 * of cp - 1 steps, each rank passing on the block it last received (the K/V
 * traffic of ring attention). */
static mp_status RN(cp_gather_kv)(RN(mp_gpt) *g, const real *qkv, real *kv_full, mp_error *err)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    RN(work) W = RN(work_of)(g);
    size_t w = 2 * z.kc, blk = z.S * w;
    int cp = (int)z.cp, me = g->cp.rank, next = (me + 1) % cp, prev = (me + cp - 1) % cp;
    real *mine = W.kv_ranks + (size_t)me * blk;
    for (size_t r = 0; r < z.S; r++)
        memcpy(mine + r * w, qkv + r * z.row + z.hl, w * sizeof(real));
    for (int k = 1; k < cp; k++) {
        /* step k: pass on rank (me - k + 1)'s block, receive rank (me - k)'s */
        int out = (me - k + 1 + cp) % cp, in = (me - k + cp) % cp;
        double t = g->be->now();
        CHECK(g->be->sendrecv(&g->cp, MP_REAL_KIND, W.kv_ranks + (size_t)out * blk, next,
                              W.kv_ranks + (size_t)in * blk, prev, blk, k, err));
        mp_probe_record(g->probe, t, MP_STREAM_CP, MP_EV_CP_COMM, true);
    }
    for (int c = 0; c < cp; c++)
        for (size_t i = 0; i < z.s; i++)
            for (size_t n = 0; n < z.b; n++)
                memcpy(kv_full + RN(cp_full_row)(g, &z, c, i, n) * w,
                       W.kv_ranks + ((size_t)c * z.S + i * z.b + n) * w, w * sizeof(real));
    return MP_OK;
}

/* dkv_full[sk*b,2kc] (these queries' share) summed over the CP group; this
 * rank's rows go to the K|V columns of dqkv[S,row]. A ring of cp - 1 steps:
 * each block's partial sum travels from rank owner + 1 around to its owner,
 * every rank adding its share on the way. */
static mp_status RN(cp_reduce_dkv)(RN(mp_gpt) *g, const real *dkv_full, real *dqkv,
                                   mp_error *err)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    RN(work) W = RN(work_of)(g);
    size_t w = 2 * z.kc, blk = z.S * w;
    int cp = (int)z.cp, me = g->cp.rank, next = (me + 1) % cp, prev = (me + cp - 1) % cp;
    for (int c = 0; c < cp; c++)
        for (size_t i = 0; i < z.s; i++)
            for (size_t n = 0; n < z.b; n++)
                memcpy(W.kv_ranks + ((size_t)c * z.S + i * z.b + n) * w,
                       dkv_full + RN(cp_full_row)(g, &z, c, i, n) * w, w * sizeof(real));
    bool drop = mp_probe_drops(g->probe, "cp-dkv");
    for (int k = 1; k < cp && !drop; k++) {
        /* step k: pass on the sum for rank (me - k)'s block, receive the sum
         * for rank (me - k - 1)'s and add this rank's share to it */
        int out = (me - k + cp) % cp, in = (me - k - 1 + 2 * cp) % cp;
        double t = g->be->now();
        CHECK(g->be->sendrecv(&g->cp, MP_REAL_KIND, W.kv_ranks + (size_t)out * blk, next,
                              W.kv_loc, prev, blk, cp + k, err));
        RN(mp_add)(W.kv_ranks + (size_t)in * blk, W.kv_loc, blk);
        mp_probe_record(g->probe, t, MP_STREAM_CP, MP_EV_CP_COMM, true);
    }
    const real *sum = W.kv_ranks + (size_t)me * blk;
    for (size_t r = 0; r < z.S; r++)
        memcpy(dqkv + r * z.row + z.hl, sum + r * w, w * sizeof(real));
    return MP_OK;
}

/* ---- one transformer block ---- */

/* Tensor k of block l in buf (weights or gradients), or NULL when the model
 * has none (LLaMA: no biases, RMSNorm has no shift). */
static real *RN(blk)(real *buf, const RN(mp_gpt) *g, int l, int k)
{
    int pid = mp_block_param(g->lay, l, k);
    return pid >= 0 ? buf + g->lay->p[pid].offset : NULL;
}

/* out = norm(x) with scale w (and shift b for LayerNorm) */
static void RN(norm_forward)(const RN(mp_gpt) *g, real *out, real *xhat, real *rstd,
                             const real *x, const real *w, const real *b, int rows)
{
    if (g->d.rmsnorm)
        RN(mp_rmsnorm_forward)(out, xhat, rstd, x, w, rows, g->d.hidden, g->exact);
    else
        RN(mp_layernorm_forward)(out, xhat, rstd, x, w, b, rows, g->d.hidden, g->exact);
}

static void RN(norm_backward)(const RN(mp_gpt) *g, real *dx, real *dw, real *db,
                              const real *dout, const real *xhat, const real *rstd,
                              const real *w, int rows)
{
    if (g->d.rmsnorm)
        RN(mp_rmsnorm_backward)(dx, dw, dout, xhat, rstd, w, rows, g->d.hidden, g->exact);
    else
        RN(mp_layernorm_backward)(dx, dw, db, dout, xhat, rstd, w, rows, g->d.hidden,
                                  g->exact);
}

static mp_status RN(block_forward)(RN(mp_gpt) *g, RN(block_acts) *B, int l, const real *x,
                                   mp_error *err)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    RN(work) W = RN(work_of)(g);
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    const real *bias;
#define P(k) RN(blk)(g->w, g, l, (k))
    /* ln1 = norm(x) [Sl,h]; ln1_full [S,h] (SP: all-gather) */
    RN(norm_forward)(g, sp ? W.loc : B->ln1_full, B->ln1_xhat, B->ln1_rstd, x, P(MP_BLK_LN1_W),
                     P(MP_BLK_LN1_B), (int)z.Sl);
    if (sp)
        CHECK(RN(tp_gather)(g, W.loc, B->ln1_full, z.h, err));
    /* qkv[S,row] = ln1_full[S,h] @ Wqkv[h,row] + b   (column-parallel: this
     * rank's Q heads, then its K and V heads) */
    GEMM(false, false, z.S, z.row, z.h, B->ln1_full, z.h, P(MP_BLK_QKV_W), z.row, 0.0, B->qkv,
         z.row);
    if ((bias = P(MP_BLK_QKV_B)))
        RN(mp_bias_add)(B->qkv, bias, (int)z.S, (int)z.row);
    RN(mp_q)(ex, B->qkv, z.S * z.row, MP_Q_ACT);
    if (g->d.rope) { /* turn Q and K by their positions' angles */
        RN(mp_rope)(B->qkv, z.row, (int)z.al, (int)z.hd, g->qpos, (int)z.s, (int)z.b, false, ex,
                    MP_Q_ACT);
        RN(mp_rope)(B->qkv + z.hl, z.row, (int)z.gl, (int)z.hd, g->qpos, (int)z.s, (int)z.b,
                    false, ex, MP_Q_ACT);
    }
    /* att[S,hl] = causal attention over this rank's heads (CP: this rank's
     * queries against every position's K|V); selective recompute keeps no
     * probabilities: they go to scratch and are rebuilt in backward */
    real *probs = B->probs ? B->probs : W.sblk.probs;
    if (z.cp > 1) {
        CHECK(RN(cp_gather_kv)(g, B->qkv, B->kv_full, err));
        RN(mp_attention_forward_kv)(g->be, B->att, probs, B->qkv, z.row, B->kv_full,
                                    B->kv_full + z.kc, 2 * z.kc, g->qpos, (int)z.s, (int)z.sk,
                                    (int)z.b, (int)z.al, (int)z.hd, (int)z.rep, !g->d.bert, ex);
    } else {
        RN(mp_attention_forward_kv)(g->be, B->att, probs, B->qkv, z.row, B->qkv + z.hl,
                                    B->qkv + z.hl + z.kc, z.row, NULL, (int)z.s, (int)z.s,
                                    (int)z.b, (int)z.al, (int)z.hd, (int)z.rep, !g->d.bert, ex);
    }
    /* xmid[Sl,h] = x + reduce(att @ Wo[hl,h]) + bo   (row-parallel) */
    GEMM(false, false, z.S, z.h, z.hl, B->att, z.hl, P(MP_BLK_PROJ_W), z.h, 0.0, W.part, z.h);
    CHECK(RN(tp_reduce)(g, W.part, B->xmid, z.h, "tp-attn", err));
    if ((bias = P(MP_BLK_PROJ_B)))
        RN(mp_bias_add)(B->xmid, bias, (int)z.Sl, (int)z.h);
    RN(mp_q)(ex, B->xmid, z.Sl * z.h, MP_Q_ACT);
    RN(mp_add)(B->xmid, x, z.Sl * z.h);
    RN(mp_q)(ex, B->xmid, z.Sl * z.h, MP_Q_ACT);
    /* ln2 */
    RN(norm_forward)(g, sp ? W.loc : B->ln2_full, B->ln2_xhat, B->ln2_rstd, B->xmid,
                     P(MP_BLK_LN2_W), P(MP_BLK_LN2_B), (int)z.Sl);
    if (sp)
        CHECK(RN(tp_gather)(g, W.loc, B->ln2_full, z.h, err));
    /* fc1_pre[S,f1] = ln2_full @ W1[h,f1] + b1; fc1_act[S,Fl] = gelu(fc1_pre), or
     * SwiGLU: silu(gate) * up of fc1_pre = [gate | up] */
    GEMM(false, false, z.S, z.f1, z.h, B->ln2_full, z.h, P(MP_BLK_FC1_W), z.f1, 0.0,
         B->fc1_pre, z.f1);
    if ((bias = P(MP_BLK_FC1_B)))
        RN(mp_bias_add)(B->fc1_pre, bias, (int)z.S, (int)z.f1);
    RN(mp_q)(ex, B->fc1_pre, z.S * z.f1, MP_Q_ACT);
    if (g->d.swiglu)
        RN(mp_swiglu_forward)(B->fc1_act, B->fc1_pre, (int)z.S, (int)z.Fl);
    else
        RN(mp_gelu_forward)(B->fc1_act, B->fc1_pre, z.S * z.Fl);
    RN(mp_q)(ex, B->fc1_act, z.S * z.Fl, MP_Q_ACT);
    /* xout[Sl,h] = xmid + reduce(fc1_act @ W2[Fl,h]) + b2 */
    GEMM(false, false, z.S, z.h, z.Fl, B->fc1_act, z.Fl, P(MP_BLK_FC2_W), z.h, 0.0, W.part,
         z.h);
    CHECK(RN(tp_reduce)(g, W.part, B->xout, z.h, "tp-mlp", err));
    if ((bias = P(MP_BLK_FC2_B)))
        RN(mp_bias_add)(B->xout, bias, (int)z.Sl, (int)z.h);
    RN(mp_q)(ex, B->xout, z.Sl * z.h, MP_Q_ACT);
    RN(mp_add)(B->xout, B->xmid, z.Sl * z.h);
    RN(mp_q)(ex, B->xout, z.Sl * z.h, MP_Q_ACT);
#undef P
    return MP_OK;
}

/* dres[Sl,h]: in d loss/d xout, out d loss/d x. */
static mp_status RN(block_backward)(RN(mp_gpt) *g, RN(block_acts) *B, int l, real *dres,
                                    mp_error *err)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    RN(work) W = RN(work_of)(g);
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    real *bias;
#define P(k) RN(blk)(g->w, g, l, (k))
#define G(k) RN(blk)(g->g, g, l, (k))
    /* MLP: db2 += sum dres; dfull[S,h] (SP: all-gather) */
    if ((bias = G(MP_BLK_FC2_B)))
        RN(mp_bias_grad)(bias, dres, (int)z.Sl, (int)z.h);
    real *dfull = sp ? W.dfull : dres;
    if (sp)
        CHECK(RN(tp_gather)(g, dres, W.dfull, z.h, err));
    /* dW2[Fl,h] += fc1_act^T @ dfull;  d fc1_act[S,Fl] = dfull @ W2^T */
    GEMM(true, false, z.Fl, z.h, z.S, B->fc1_act, z.Fl, dfull, z.h, 1.0, G(MP_BLK_FC2_W), z.h);
    real *dact = g->d.swiglu ? W.dact : W.dfc;
    GEMM(false, true, z.S, z.Fl, z.h, dfull, z.h, P(MP_BLK_FC2_W), z.h, 0.0, dact, z.Fl);
    RN(mp_q)(ex, dact, z.S * z.Fl, MP_Q_GRAD);
    /* through gelu (in place) or SwiGLU (into dfc[S,2Fl]); db1, dW1[h,f1] +=
     * ln2_full^T @ dfc; dln2 = reduce(dfc @ W1^T) */
    if (g->d.swiglu)
        RN(mp_swiglu_backward)(W.dfc, dact, B->fc1_pre, (int)z.S, (int)z.Fl);
    else
        RN(mp_gelu_backward)(W.dfc, W.dfc, B->fc1_pre, z.S * z.Fl);
    RN(mp_q)(ex, W.dfc, z.S * z.f1, MP_Q_GRAD);
    if ((bias = G(MP_BLK_FC1_B)))
        RN(mp_bias_grad)(bias, W.dfc, (int)z.S, (int)z.f1);
    GEMM(true, false, z.h, z.f1, z.S, B->ln2_full, z.h, W.dfc, z.f1, 1.0, G(MP_BLK_FC1_W), z.f1);
    GEMM(false, true, z.S, z.h, z.f1, W.dfc, z.f1, P(MP_BLK_FC1_W), z.f1, 0.0, W.part, z.h);
    CHECK(RN(tp_reduce)(g, W.part, W.dln, z.h, "tp-mlp-bwd", err));
    RN(mp_q)(ex, W.dln, z.Sl * z.h, MP_Q_GRAD);
    RN(norm_backward)(g, W.dtmp, G(MP_BLK_LN2_W), G(MP_BLK_LN2_B), W.dln, B->ln2_xhat,
                      B->ln2_rstd, P(MP_BLK_LN2_W), (int)z.Sl);
    RN(mp_add)(dres, W.dtmp, z.Sl * z.h);
    RN(mp_q)(ex, dres, z.Sl * z.h, MP_Q_GRAD);
    /* attention: dbo, dWo[hl,h] += att^T @ dfull; datt[S,hl] = dfull @ Wo^T */
    if ((bias = G(MP_BLK_PROJ_B)))
        RN(mp_bias_grad)(bias, dres, (int)z.Sl, (int)z.h);
    if (sp)
        CHECK(RN(tp_gather)(g, dres, W.dfull, z.h, err));
    GEMM(true, false, z.hl, z.h, z.S, B->att, z.hl, dfull, z.h, 1.0, G(MP_BLK_PROJ_W), z.h);
    GEMM(false, true, z.S, z.hl, z.h, dfull, z.h, P(MP_BLK_PROJ_W), z.h, 0.0, W.datt, z.hl);
    RN(mp_q)(ex, W.datt, z.S * z.hl, MP_Q_GRAD);
    if (z.cp > 1) {
        memset(W.dkv_full, 0, z.sk * z.b * 2 * z.kc * sizeof(real));
        RN(mp_attention_backward_kv)(g->be, W.dqkv, z.row, W.dkv_full, W.dkv_full + z.kc, 2 * z.kc,
                                     W.datt, B->qkv, z.row, B->kv_full, B->kv_full + z.kc,
                                     2 * z.kc, B->probs, g->qpos, (int)z.s, (int)z.sk, (int)z.b,
                                     (int)z.al, (int)z.hd, (int)z.rep, !g->d.bert, W.att_scratch, ex);
        CHECK(RN(cp_reduce_dkv)(g, W.dkv_full, W.dqkv, err));
    } else {
        memset(W.dqkv, 0, z.S * z.row * sizeof(real));
        RN(mp_attention_backward_kv)(g->be, W.dqkv, z.row, W.dqkv + z.hl, W.dqkv + z.hl + z.kc, z.row,
                                     W.datt, B->qkv, z.row, B->qkv + z.hl, B->qkv + z.hl + z.kc,
                                     z.row, B->probs, NULL, (int)z.s, (int)z.s, (int)z.b,
                                     (int)z.al, (int)z.hd, (int)z.rep, !g->d.bert, W.att_scratch, ex);
    }
    RN(mp_q)(ex, W.dqkv, z.S * z.row, MP_Q_GRAD_ATT); /* the K|V gradients, summed */
    if (g->d.rope) { /* back through the turn of Q and K */
        RN(mp_rope)(W.dqkv, z.row, (int)z.al, (int)z.hd, g->qpos, (int)z.s, (int)z.b, true, ex,
                    MP_Q_GRAD_ATT);
        RN(mp_rope)(W.dqkv + z.hl, z.row, (int)z.gl, (int)z.hd, g->qpos, (int)z.s, (int)z.b,
                    true, ex, MP_Q_GRAD_ATT);
    }
    /* dbqkv, dWqkv[h,row] += ln1_full^T @ dqkv; dln1 = reduce(dqkv @ Wqkv^T) */
    if ((bias = G(MP_BLK_QKV_B)))
        RN(mp_bias_grad)(bias, W.dqkv, (int)z.S, (int)z.row);
    GEMM(true, false, z.h, z.row, z.S, B->ln1_full, z.h, W.dqkv, z.row, 1.0, G(MP_BLK_QKV_W),
         z.row);
    GEMM(false, true, z.S, z.h, z.row, W.dqkv, z.row, P(MP_BLK_QKV_W), z.row, 0.0, W.part, z.h);
    CHECK(RN(tp_reduce)(g, W.part, W.dln, z.h, "tp-attn-bwd", err));
    RN(mp_q)(ex, W.dln, z.Sl * z.h, MP_Q_GRAD);
    RN(norm_backward)(g, W.dtmp, G(MP_BLK_LN1_W), G(MP_BLK_LN1_B), W.dln, B->ln1_xhat,
                      B->ln1_rstd, P(MP_BLK_LN1_W), (int)z.Sl);
    RN(mp_add)(dres, W.dtmp, z.Sl * z.h);
    RN(mp_q)(ex, dres, z.Sl * z.h, MP_Q_GRAD);
#undef P
#undef G
    return MP_OK;
}

/* Selective recomputation: the block's attention probabilities (and its
 * output, again the same) from the Q, K and V it kept. */
static void RN(recompute_probs)(RN(mp_gpt) *g, RN(block_acts) *V)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    if (z.cp > 1)
        RN(mp_attention_forward_kv)(g->be, V->att, V->probs, V->qkv, z.row, V->kv_full,
                                    V->kv_full + z.kc, 2 * z.kc, g->qpos, (int)z.s, (int)z.sk,
                                    (int)z.b, (int)z.al, (int)z.hd, (int)z.rep, !g->d.bert, g->exact);
    else
        RN(mp_attention_forward_kv)(g->be, V->att, V->probs, V->qkv, z.row, V->qkv + z.hl,
                                    V->qkv + z.hl + z.kc, z.row, NULL, (int)z.s, (int)z.s,
                                    (int)z.b, (int)z.al, (int)z.hd, (int)z.rep, !g->d.bert, g->exact);
}

/* ---- whole model ---- */

/* ---- BERT's heads ---- */

/* Segment (token type) of a global position: the second half is sentence B. */
static size_t RN(segment)(const RN(mp_gpt) *g, size_t pos)
{
    return pos >= (size_t)g->d.seq / 2 ? 1 : 0;
}

/* Whether this rank holds position 0 (its first local position), where the
 * pooler reads each sample; with CP only one rank of the group does. */
static bool RN(holds_first)(const RN(mp_gpt) *g)
{
    return g->qpos[0] == 0;
}

/* Pooler and two-way head on position 0 of each sample (rows 0..b-1 of the
 * full rows): pooled = tanh(x0 @ Wp + bp), p = softmax(pooled @ Wn + bn); the
 * label is the sample's first token's parity. Returns the summed loss. */
static double RN(nsp_forward)(RN(mp_gpt) *g, RN(mp_acts) *A)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact;
    if (!RN(holds_first)(g))
        return 0;
    GEMM(false, false, z.b, z.h, z.h, A->lnf_full, z.h, RN(param)(g->w, g, lay->pool_w), z.h,
         0.0, A->pool_pre, z.h);
    RN(mp_bias_add)(A->pool_pre, RN(param)(g->w, g, lay->pool_b), (int)z.b, (int)z.h);
    RN(mp_q)(ex, A->pool_pre, z.b * z.h, MP_Q_ACT);
    for (size_t i = 0; i < z.b * z.h; i++)
        A->pooled[i] = R_TANH(A->pool_pre[i]);
    RN(mp_q)(ex, A->pooled, z.b * z.h, MP_Q_ACT);
    GEMM(false, false, z.b, 2, z.h, A->pooled, z.h, RN(param)(g->w, g, lay->nsp_w), 2, 0.0,
         A->nsp_p, 2);
    RN(mp_bias_add)(A->nsp_p, RN(param)(g->w, g, lay->nsp_b), (int)z.b, 2);
    RN(mp_q)(ex, A->nsp_p, z.b * 2, MP_Q_ACT);
    real total = 0;
    for (size_t n = 0; n < z.b; n++) {
        real *p = A->nsp_p + n * 2, m = p[0] > p[1] ? p[0] : p[1];
        int label = (int)(A->tokens[n] & 1);
        real zl = p[label];
        p[0] = R_EXP(p[0] - m);
        p[1] = R_EXP(p[1] - m);
        RN(mp_q)(ex, p, 2, MP_Q_PROB);
        real sum = p[0] + p[1];
        real loss = R_LOG(sum) + m - zl;
        p[0] /= sum;
        p[1] /= sum;
        RN(mp_q)(ex, p, 2, MP_Q_PROB);
        if (ex)
            RN(mp_quantize)(&loss, 1, MP_Q_LOSS, MP_Q_LOSS_MAX_INT);
        total += loss;
    }
    return (double)total;
}

/* Backward of BERT's heads into W.dres (this rank's rows of d lnf after the
 * final norm's backward). The vocabulary projection is split over TP, so the
 * gradient of its input is summed over TP in full before the replicated
 * transform; the rest runs on every rank's full rows alike. */
static mp_status RN(bert_head_backward)(RN(mp_gpt) *g, RN(mp_acts) *A, mp_error *err)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    RN(work) W = RN(work_of)(g);
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    size_t lo = (size_t)g->tp.rank * z.Vl;
    /* dlogits = (p - onehot) * grad_scale on masked tokens, 0 elsewhere */
    for (size_t r = 0; r < z.S; r++) {
        real *lr = A->logits + r * z.Vl;
        if (A->targets[r] < 0) {
            memset(lr, 0, z.Vl * sizeof(real));
            continue;
        }
        size_t tgt = (size_t)A->targets[r];
        if (tgt >= lo && tgt < lo + z.Vl)
            lr[tgt - lo] -= 1;
        for (size_t j = 0; j < z.Vl; j++)
            lr[j] *= g->grad_scale;
    }
    /* vocabulary bias and projection; d mlm_out[S,h] = sum over TP of dlogits @ Wv */
    RN(mp_bias_grad)(RN(param)(g->g, g, lay->lm_bias), A->logits, (int)z.S, (int)z.Vl);
    GEMM(true, false, z.Vl, z.h, z.S, A->logits, z.Vl, A->mlm_out, z.h, 1.0,
         RN(param)(g->g, g, lay->head), z.h);
    GEMM(false, false, z.S, z.h, z.Vl, A->logits, z.Vl, RN(param)(g->w, g, lay->head), z.h, 0.0,
         W.dfull, z.h);
    double t = g->be->now();
    if (!mp_probe_drops(g->probe, "tp-head-bwd"))
        CHECK(g->be->allreduce(&g->tp, MP_REAL_KIND, W.dfull, z.S * z.h, MP_RED_SUM, err));
    if (g->tp.size > 1)
        mp_probe_record(g->probe, t, MP_STREAM_TP, MP_EV_TP_COMM, true);
    RN(mp_q)(ex, W.dfull, z.S * z.h, MP_Q_GRAD);
    /* through the transform's LayerNorm (into dact = W.part), GeLU, dense */
    real *dact = W.part;
    RN(mp_layernorm_backward)(dact, RN(param)(g->g, g, lay->mlm_ln_w),
                              RN(param)(g->g, g, lay->mlm_ln_b), W.dfull, A->mlm_xhat,
                              A->mlm_rstd, RN(param)(g->w, g, lay->mlm_ln_w), (int)z.S,
                              (int)z.h, ex);
    RN(mp_gelu_backward)(dact, dact, A->mlm_pre, z.S * z.h);
    RN(mp_q)(ex, dact, z.S * z.h, MP_Q_GRAD);
    RN(mp_bias_grad)(RN(param)(g->g, g, lay->mlm_b), dact, (int)z.S, (int)z.h);
    GEMM(true, false, z.h, z.h, z.S, A->lnf_full, z.h, dact, z.h, 1.0,
         RN(param)(g->g, g, lay->mlm_w), z.h);
    /* d lnf_full[S,h] (full rows, the same on every TP rank) into W.dfull */
    GEMM(false, true, z.S, z.h, z.h, dact, z.h, RN(param)(g->w, g, lay->mlm_w), z.h, 0.0, W.dfull,
         z.h);
    if (RN(holds_first)(g)) {
        /* the two-way head and the pooler, on rows 0..b-1 (position 0) */
        /* d2[b,2] in the CE statistics' room (3S), dpool[b,h] in dln's (Sl >= b) */
        real *d2 = W.stats, *dpool = W.dln;
        for (size_t n = 0; n < z.b; n++) {
            const real *p = A->nsp_p + n * 2;
            int label = (int)(A->tokens[n] & 1);
            d2[2 * n] = (p[0] - (label == 0)) * g->grad_scale;
            d2[2 * n + 1] = (p[1] - (label == 1)) * g->grad_scale;
        }
        RN(mp_bias_grad)(RN(param)(g->g, g, lay->nsp_b), d2, (int)z.b, 2);
        GEMM(true, false, z.h, 2, z.b, A->pooled, z.h, d2, 2, 1.0, RN(param)(g->g, g, lay->nsp_w),
             2);
        GEMM(false, true, z.b, z.h, 2, d2, 2, RN(param)(g->w, g, lay->nsp_w), 2, 0.0, dpool, z.h);
        RN(mp_q)(ex, dpool, z.b * z.h, MP_Q_GRAD);
        for (size_t i = 0; i < z.b * z.h; i++)
            dpool[i] *= 1 - A->pooled[i] * A->pooled[i];
        RN(mp_q)(ex, dpool, z.b * z.h, MP_Q_GRAD);
        RN(mp_bias_grad)(RN(param)(g->g, g, lay->pool_b), dpool, (int)z.b, (int)z.h);
        GEMM(true, false, z.h, z.h, z.b, A->lnf_full, z.h, dpool, z.h, 1.0,
             RN(param)(g->g, g, lay->pool_w), z.h);
        GEMM(false, true, z.b, z.h, z.h, dpool, z.h, RN(param)(g->w, g, lay->pool_w), z.h, 1.0,
             W.dfull, z.h);
    }
    RN(mp_q)(ex, W.dfull, z.S * z.h, MP_Q_GRAD);
    /* this rank's rows (SP: its piece of the sequence), then the final norm */
    memcpy(W.dln, W.dfull + (sp ? (size_t)g->tp.rank * z.Sl * z.h : 0),
           z.Sl * z.h * sizeof(real));
    RN(norm_backward)(g, W.dres, RN(param)(g->g, g, lay->lnf_w),
                      lay->lnf_b >= 0 ? RN(param)(g->g, g, lay->lnf_b) : NULL, W.dln, A->lnf_xhat,
                      A->lnf_rstd, RN(param)(g->w, g, lay->lnf_w), (int)z.Sl);
    return MP_OK;
}

/* Global row of local residual row rl (SP: this rank's piece of the sequence). */
static size_t RN(global_row)(const RN(mp_gpt) *g, size_t rl, size_t Sl)
{
    return (g->d.sp && g->tp.size > 1) ? (size_t)g->tp.rank * Sl + rl : rl;
}

mp_status RN(mp_gpt_forward)(RN(mp_gpt) *g, int slot, const int32_t *tokens,
                             const int32_t *targets, double *loss_sum, mp_error *err)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    RN(work) W = RN(work_of)(g);
    RN(mp_acts) *A = g->slots[slot];
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    memcpy(A->tokens, tokens, z.S * sizeof *tokens);
    memcpy(A->targets, targets, z.S * sizeof *targets);
    size_t lo = (size_t)g->tp.rank * z.Vl;
    if (z.emb) {
        /* embedding (vocab-parallel): part[S,h] = wte rows this rank owns, else 0;
         * x0[Sl,h] = reduce(part) + wpe[pos] (learned positions; RoPE turns Q, K) */
        const real *wte = RN(param)(g->w, g, lay->wte);
        const real *wpe = lay->wpe >= 0 ? RN(param)(g->w, g, lay->wpe) : NULL;
        for (size_t r = 0; r < z.S; r++) {
            size_t tok = (size_t)tokens[r];
            real *dst = W.part + r * z.h;
            if (tok >= lo && tok < lo + z.Vl)
                memcpy(dst, wte + (tok - lo) * z.h, z.h * sizeof(real));
            else
                memset(dst, 0, z.h * sizeof(real));
        }
        CHECK(RN(tp_reduce)(g, W.part, A->x0, z.h, "tp-embed", err));
        const real *tte = lay->tte >= 0 ? RN(param)(g->w, g, lay->tte) : NULL;
        for (size_t rl = 0; wpe && rl < z.Sl; rl++) {
            size_t pos = (size_t)g->qpos[RN(global_row)(g, rl, z.Sl) / z.b];
            RN(mp_add)(A->x0 + rl * z.h, wpe + pos * z.h, z.h);
            if (tte) /* BERT: the second half of the sequence is segment 1 */
                RN(mp_add)(A->x0 + rl * z.h, tte + RN(segment)(g, pos) * z.h, z.h);
        }
        RN(mp_q)(ex, A->x0, z.Sl * z.h, MP_Q_ACT);
    } else {
        /* a later pipeline stage: the previous stage's output [Sl,h] */
        if (!g->stage_in)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "pipeline stage without its input activation");
        memcpy(A->x0, g->stage_in, z.Sl * z.h * sizeof(real));
    }
    /* blocks */
    const real *x = A->x0;
    for (size_t k = 0; k < z.n_blocks; k++) {
        int l = (int)(z.first_block + k);
        if (mp_dims_block_recompute(&g->d, l) == 2) {
            /* full recomputation: the block runs in scratch, only its output is kept */
            RN(block_acts) V = W.sblk;
            V.xout = A->blk[k].xout;
            CHECK(RN(block_forward)(g, &V, l, x, err));
        } else {
            CHECK(RN(block_forward)(g, &A->blk[k], l, x, err));
        }
        x = A->blk[k].xout;
    }
    if (!z.head)
        return MP_OK; /* the stage's output is mp_gpt_stage_output() */
    /* final norm; logits[S,Vl] = lnf_full @ Whead[Vl,h]^T (vocab-parallel) */
    RN(norm_forward)(g, sp ? W.loc : A->lnf_full, A->lnf_xhat, A->lnf_rstd, x,
                     RN(param)(g->w, g, lay->lnf_w),
                     lay->lnf_b >= 0 ? RN(param)(g->w, g, lay->lnf_b) : NULL, (int)z.Sl);
    if (sp)
        CHECK(RN(tp_gather)(g, W.loc, A->lnf_full, z.h, err));
    const real *wh = RN(param)(g->w, g, lay->head);
    const real *hin = A->lnf_full;
    if (g->d.bert) {
        /* BERT: mlm_out = LN(gelu(lnf_full @ Wd + bd)) on every rank's full rows */
        GEMM(false, false, z.S, z.h, z.h, A->lnf_full, z.h, RN(param)(g->w, g, lay->mlm_w), z.h,
             0.0, A->mlm_pre, z.h);
        RN(mp_bias_add)(A->mlm_pre, RN(param)(g->w, g, lay->mlm_b), (int)z.S, (int)z.h);
        RN(mp_q)(ex, A->mlm_pre, z.S * z.h, MP_Q_ACT);
        RN(mp_gelu_forward)(A->mlm_act, A->mlm_pre, z.S * z.h);
        RN(mp_q)(ex, A->mlm_act, z.S * z.h, MP_Q_ACT);
        RN(mp_layernorm_forward)(A->mlm_out, A->mlm_xhat, A->mlm_rstd, A->mlm_act,
                                 RN(param)(g->w, g, lay->mlm_ln_w),
                                 RN(param)(g->w, g, lay->mlm_ln_b), (int)z.S, (int)z.h, ex);
        hin = A->mlm_out;
    }
    GEMM(false, true, z.S, z.Vl, z.h, hin, z.h, wh, z.h, 0.0, A->logits, z.Vl);
    if (g->d.bert)
        RN(mp_bias_add)(A->logits, RN(param)(g->w, g, lay->lm_bias), (int)z.S, (int)z.Vl);
    RN(mp_q)(ex, A->logits, z.S * z.Vl, MP_Q_ACT);
    if (g->kept_logits && g->microbatch_now == g->keep_microbatch)
        memcpy(g->kept_logits, A->logits, z.S * z.Vl * sizeof(real));
    /* vocab-parallel cross-entropy: max, sum of exp and the target's logit are
     * reduced over TP; loss_r = log(sum) + max - logit[target] */
    real *mx = W.stats, *sum = W.stats + z.S, *tl = W.stats + 2 * z.S;
    for (size_t r = 0; r < z.S; r++) {
        const real *lr = A->logits + r * z.Vl;
        real m = -INFINITY;
        for (size_t j = 0; j < z.Vl; j++)
            m = lr[j] > m ? lr[j] : m;
        mx[r] = m;
    }
    double t = g->be->now();
    CHECK(g->be->allreduce(&g->tp, MP_REAL_KIND, mx, z.S, MP_RED_MAX, err));
    for (size_t r = 0; r < z.S; r++) {
        real *lr = A->logits + r * z.Vl;
        size_t tgt = (size_t)targets[r];
        tl[r] = (tgt >= lo && tgt < lo + z.Vl) ? lr[tgt - lo] : 0;
        for (size_t j = 0; j < z.Vl; j++)
            lr[j] = R_EXP(lr[j] - mx[r]);
        RN(mp_q)(ex, lr, z.Vl, MP_Q_PROB);
        real s = 0;
        for (size_t j = 0; j < z.Vl; j++)
            s += lr[j];
        sum[r] = s;
    }
    if (!mp_probe_drops(g->probe, "tp-ce"))
        CHECK(g->be->allreduce(&g->tp, MP_REAL_KIND, sum, 2 * z.S, MP_RED_SUM, err));
    if (g->tp.size > 1)
        mp_probe_record(g->probe, t, MP_STREAM_TP, MP_EV_TP_COMM, true);
    real *loss = W.part; /* [S] scratch */
    for (size_t r = 0; r < z.S; r++) {
        /* BERT: only the masked tokens (target >= 0) have a loss */
        loss[r] = targets[r] < 0 ? 0 : R_LOG(sum[r]) + mx[r] - tl[r];
        real *lr = A->logits + r * z.Vl;
        for (size_t j = 0; j < z.Vl; j++)
            lr[j] /= sum[r];
        RN(mp_q)(ex, lr, z.Vl, MP_Q_PROB);
    }
    if (ex)
        RN(mp_quantize)(loss, z.S, MP_Q_LOSS, MP_Q_LOSS_MAX_INT);
    real total = 0;
    for (size_t r = 0; r < z.S; r++)
        total += loss[r];
    *loss_sum += (double)total;
    if (g->d.bert)
        *loss_sum += RN(nsp_forward)(g, A);
    return MP_OK;
}

mp_status RN(mp_gpt_backward)(RN(mp_gpt) *g, int slot, mp_error *err)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    RN(work) W = RN(work_of)(g);
    RN(mp_acts) *A = g->slots[slot];
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    size_t lo = (size_t)g->tp.rank * z.Vl;
    if (z.head && g->d.bert) {
        CHECK(RN(bert_head_backward)(g, A, err));
    } else if (z.head) {
        /* dlogits[S,Vl] = (p - onehot(target)) * grad_scale, in place */
        for (size_t r = 0; r < z.S; r++) {
            real *lr = A->logits + r * z.Vl;
            size_t tgt = (size_t)A->targets[r];
            if (tgt >= lo && tgt < lo + z.Vl)
                lr[tgt - lo] -= 1;
            for (size_t j = 0; j < z.Vl; j++)
                lr[j] *= g->grad_scale;
        }
        /* dWhead[Vl,h] += dlogits^T @ lnf_full; dlnf = reduce(dlogits @ Whead) */
        GEMM(true, false, z.Vl, z.h, z.S, A->logits, z.Vl, A->lnf_full, z.h, 1.0,
             RN(param)(g->g, g, lay->head), z.h);
        GEMM(false, false, z.S, z.h, z.Vl, A->logits, z.Vl, RN(param)(g->w, g, lay->head), z.h,
             0.0, W.part, z.h);
        CHECK(RN(tp_reduce)(g, W.part, W.dln, z.h, "tp-head-bwd", err));
        RN(mp_q)(ex, W.dln, z.Sl * z.h, MP_Q_GRAD);
        RN(norm_backward)(g, W.dres, RN(param)(g->g, g, lay->lnf_w),
                          lay->lnf_b >= 0 ? RN(param)(g->g, g, lay->lnf_b) : NULL, W.dln,
                          A->lnf_xhat, A->lnf_rstd, RN(param)(g->w, g, lay->lnf_w), (int)z.Sl);
    } else {
        /* a pipeline stage before the last: the next stage's input gradient */
        if (!g->stage_grad_in)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "pipeline stage without its output gradient");
        memcpy(W.dres, g->stage_grad_in, z.Sl * z.h * sizeof(real));
    }
    for (size_t k = z.n_blocks; k-- > 0;) {
        int l = (int)(z.first_block + k), mode = mp_dims_block_recompute(&g->d, l);
        RN(block_acts) V = A->blk[k];
        if (mode == 2) {
            /* full: the block's forward again from its input, collectives and all */
            V = W.sblk;
            V.xout = A->blk[k].xout;
            CHECK(RN(block_forward)(g, &V, l, k ? A->blk[k - 1].xout : A->x0, err));
        } else if (mode == 1) {
            /* selective: the attention probabilities again from the kept Q, K, V */
            V.probs = W.sblk.probs;
            RN(recompute_probs)(g, &V);
        }
        CHECK(RN(block_backward)(g, &V, l, W.dres, err));
    }
    if (!z.emb)
        return MP_OK; /* W.dres is the stage's input gradient: mp_gpt_stage_input_grad() */
    /* embedding: dwpe[pos] += dres (local rows); dwte rows this rank owns */
    real *gwpe = lay->wpe >= 0 ? RN(param)(g->g, g, lay->wpe) : NULL;
    real *gtte = lay->tte >= 0 ? RN(param)(g->g, g, lay->tte) : NULL;
    real *gwte = RN(param)(g->g, g, lay->wte);
    for (size_t rl = 0; gwpe && rl < z.Sl; rl++) {
        size_t pos = (size_t)g->qpos[RN(global_row)(g, rl, z.Sl) / z.b];
        RN(mp_add)(gwpe + pos * z.h, W.dres + rl * z.h, z.h);
        if (gtte)
            RN(mp_add)(gtte + RN(segment)(g, pos) * z.h, W.dres + rl * z.h, z.h);
    }
    const real *dfull = W.dres;
    if (sp) {
        CHECK(RN(tp_gather)(g, W.dres, W.dfull, z.h, err));
        dfull = W.dfull;
    }
    for (size_t r = 0; r < z.S; r++) {
        size_t tok = (size_t)A->tokens[r];
        if (tok >= lo && tok < lo + z.Vl)
            RN(mp_add)(gwte + (tok - lo) * z.h, dfull + r * z.h, z.h);
    }
    return MP_OK;
}

const real *RN(mp_gpt_stage_output)(const RN(mp_gpt) *g, int slot)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    const RN(mp_acts) *A = g->slots[slot];
    return z.n_blocks ? A->blk[z.n_blocks - 1].xout : A->x0;
}

const real *RN(mp_gpt_stage_input_grad)(const RN(mp_gpt) *g)
{
    RN(sizes) z = RN(sizes_of)(&g->d);
    RN(work) W;
    RN(layout_work)(&W, g->ws, &z);
    return W.dres;
}

#undef GEMM
#undef CHECK
#endif
