/* mtp.c — DeepSeek-V3's multi-token prediction (arXiv 2412.19437 §2.2) as
 * Megatron-Core's multi_token_prediction.py runs it, on the last pipeline
 * stage after the model's head. Module k = 0..D-1 (D = mtp_layers):
 *
 *   tok_k[i]  = token[i + k + 1], 0 past the end (Megatron's roll_tensor:
 *               roll left by one per module, the vacated slot zeroed)
 *   tgt_k[i]  = target[i + k + 1], none past the end (the loss mask, rolled
 *               the same way)
 *   e_k       = wte[tok_k]                        (the shared embedding)
 *   h_{k-1}   = the main model's hidden states after its final norm (k = 0),
 *               else module k-1's output after its own final norm
 *   x_k       = [enorm(e_k) | hnorm(h_{k-1})] @ W_eh   ([2h] -> h; the
 *               embedding first, as Megatron's torch.cat((decoder_input,
 *               hidden_states), -1))
 *   h_k       = fnorm(block_k(x_k))   (block_k: the type of the model's last
 *               block, its rotary positions unshifted, as Megatron passes
 *               the main model's rotary embedding)
 *   loss     += mtp_scale / D * sum_i ce(h_k[i] @ W_head^T, tgt_k[i]) / n_k
 *
 * n_k = the rows with a target (b (s - k - 1)), where the main loss divides
 * by b s: the executor's loss sums are over the global batch's b s tokens, so
 * module k's terms are weighted w_k = mtp_scale / D * s / (s - k - 1).
 *
 * Partitioned as Megatron's: the embedding vocabulary-parallel (reduced over
 * TP, with SP reduce-scattered), the norms on this rank's rows, W_eh
 * column-parallel on [enorm | hnorm] gathered over SP, its output columns
 * all-gathered over TP and, with SP, this rank's rows kept; the block as the
 * model's; the head vocabulary-parallel. Rows are r = pos * b + sample, so a
 * shift by k + 1 positions is a shift by (k + 1) b rows; with context
 * parallelism the rank's two chunks take their neighbours' first positions
 * from the CP ranks that hold them, as Megatron's roll_tensor does (roll_one).
 *
 * With Megatron's standalone MTP stage (d.mtp_split) the modules run there
 * (module_forward, module_backward), from the main model's normed hidden
 * states it receives or computes, and hand each h_k on in the stage's wide
 * output; the last stage rolls the targets alike and computes each module's
 * loss from the received h_k (module_loss, module_loss_backward), sending
 * back each h_k's gradient.
 *
 * Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"
#include "exec/model_internal.h"
#include "exec/test_mutant.h"

/* One module's activations for one micro-batch. */
typedef struct mtp_acts {
    int32_t *tok, *tgt;             /* [S] shifted tokens and targets (-1: none) */
    real *e;                        /* [Sl,h] embedding of tok */
    real *en, *en_xhat, *en_rstd;   /* [Sl,h] [Sl,h] [Sl] enorm */
    real *hn, *hn_xhat, *hn_rstd;   /* [Sl,h] [Sl,h] [Sl] hnorm */
    real *cat_loc, *cat_full;       /* [Sl,2h] [en | hn]; [S,2h] SP-gathered */
    real *proj_loc;                 /* [S,hl] this rank's columns of the projection (hl = h/t,
                                       not sizes' hl: latent attention's is its value heads') */
    real *x;                        /* [Sl,h] the block's input */
    block_acts blk;                 /* the block's (all of them, no recomputation) */
    real *fn, *fn_xhat, *fn_rstd;   /* [Sl,h] [Sl,h] [Sl] the final norm: h_k */
    real *fn_full;                  /* [S,h] SP-gathered */
    real *logits;                   /* [S,Vl] logits, probabilities, d logits */
} mtp_acts;

/* Backward scratch shared by the modules of one micro-batch. */
typedef struct mtp_work {
    real *dcarry;   /* [Sl,h] gradient of h_k from module k+1; at the end, of the main
                       model's final-norm output */
    real *dstream;  /* [Sl,h] gradient along the module's residual stream */
    real *dfn;      /* [Sl,h] */
    real *dfull;    /* [S,h] the projection output's gradient, SP-gathered */
    real *dloc;     /* [S,hl] its columns on this rank */
    real *dcat;     /* [S,2h] partial sums of the projection input's gradient */
    real *dcat_loc; /* [Sl,2h] */
    real *de;       /* [Sl,h] the embedding's gradient */
    real *de_full;  /* [S,h] SP-gathered */
    real *gather;   /* [tp][S,hl] every rank's projection columns */
} mtp_work;

static size_t int_reals(size_t n)
{
    return (n * sizeof(int32_t) + sizeof(real) - 1) / sizeof(real);
}

/* The MTP area of a slot: D modules, then the scratch; first a pass that
 * counts (base NULL). */
static size_t layout(mtp_acts *M, mtp_work *Wm, real *base, const sizes *z,
                     const mp_gpt_dims *d)
{
    size_t u = 0, Sl = z->Sl, S = z->S, h = z->h;
    for (int k = 0; k < d->mtp_layers; k++) {
        mtp_acts tmp, *a = base ? &M[k] : &tmp;
        a->tok = (int32_t *)(void *)take(base, &u, int_reals(S));
        a->tgt = (int32_t *)(void *)take(base, &u, int_reals(S));
        a->e = take(base, &u, Sl * h);
        a->en = take(base, &u, Sl * h);
        a->en_xhat = take(base, &u, Sl * h);
        a->en_rstd = take(base, &u, Sl);
        a->hn = take(base, &u, Sl * h);
        a->hn_xhat = take(base, &u, Sl * h);
        a->hn_rstd = take(base, &u, Sl);
        a->cat_loc = take(base, &u, Sl * 2 * h);
        a->cat_full = take(base, &u, S * 2 * h);
        a->proj_loc = take(base, &u, S * (h / (size_t)d->tp));
        a->x = take(base, &u, Sl * h);
        layout_block(&a->blk, base, &u, z, 0, 0, block_moe_reals(d, z, d->layers + k, 0));
        a->fn = take(base, &u, Sl * h);
        a->fn_xhat = take(base, &u, Sl * h);
        a->fn_rstd = take(base, &u, Sl);
        a->fn_full = take(base, &u, S * h);
        a->logits = take(base, &u, S * z->Vl);
    }
    mtp_work tw, *w = base ? Wm : &tw;
    w->dcarry = take(base, &u, Sl * h);
    w->dstream = take(base, &u, Sl * h);
    w->dfn = take(base, &u, Sl * h);
    w->dfull = take(base, &u, S * h);
    w->dloc = take(base, &u, S * (h / (size_t)d->tp));
    w->dcat = take(base, &u, S * 2 * h);
    w->dcat_loc = take(base, &u, Sl * 2 * h);
    w->de = take(base, &u, Sl * h);
    w->de_full = take(base, &u, S * h);
    w->gather = take(base, &u, S * h);
    return u;
}

size_t mp_mtp_reals(const sizes *z, const mp_gpt_dims *d)
{
    return d->mtp_layers > 0 && (z->head || z->mtp) ? layout(NULL, NULL, NULL, z, d) : 0;
}

/* The slot's modules and scratch (M: mtp_layers of them). */
static void view(const mp_gpt *g, mp_acts *A, mtp_acts *M, mtp_work *Wm)
{
    sizes z = sizes_of(&g->d);
    layout(M, Wm, A->mtp, &z, &g->d);
}

#define P(j, k) param(g->w, g, mp_mtp_param(g->lay, (j), (k)))
#define G(j, k) param(g->g, g, mp_mtp_param(g->lay, (j), (k)))
/* A shift without a tensor (RMSNorm): NULL */
#define PB(buf, j, k)                                                                       \
    (mp_mtp_param(g->lay, (j), (k)) >= 0 ? param((buf), g, mp_mtp_param(g->lay, (j), (k)))   \
                                         : NULL)

/* Test-only (the mutant build of tests/exec/meson.build): the error that the
 * environment's MP_TEST_MTP_MUTANT names, planted so that the PyTorch fixture
 * is shown to catch it: shift (module k embeds the tokens shifted k, not
 * k + 1), concat ([hidden | embedding]), norms (enorm's weights on the hidden
 * states, hnorm's on the embedding), hidden (the next module reads the block's
 * output before the final norm), scale (the losses not averaged over modules). */
#ifdef MP_TEST_MTP_MUTANT
#define mutant(what) mp_test_mutant_named("MP_TEST_MTP_MUTANT", (what))
#else
#define mutant(what) ((void)(what), false)
#endif

static int emb_param(const mp_gpt *g)
{
    return g->lay->wte >= 0 ? g->lay->wte : g->lay->head; /* a tied head's copy */
}

/* Module k's weight on the loss's rows (the file's comment). */
static double module_weight(const mp_gpt *g, int k)
{
    int s = g->d.seq, rows = s - k - 1;
    double per_module = mutant("scale") ? 1.0 : (double)g->d.mtp_layers;
    return g->d.mtp_scale / per_module * (double)s / (double)(rows > 0 ? rows : 1);
}

/* rows of `cols` reals each from src (row stride ss) to dst (stride ds). */
static void copy_rows(const mp_gpt *g, real *dst, size_t ds, const real *src, size_t ss,
                      size_t rows, size_t cols)
{
    g->be->copy2d(dst, ds * sizeof(real), src, ss * sizeof(real), cols * sizeof(real), rows,
                  MP_COPY_D2D);
}

/* The rows' tokens and targets rolled left by one position, in place, as
 * Megatron's roll_tensor rolls them once per module: the vacated last
 * position gets token 0 and no target (-1). Rows are pos * b + sample, so
 * without CP it is a shift by b rows. With CP the rank's positions are two
 * chunks of the 2 cp (mp_dims_global_pos), and each chunk's last position
 * takes the next chunk's first from the rank that holds it: the first
 * chunk's (chunk c) from CP rank c + 1's first chunk, on the last rank its
 * own second chunk (chunk cp); the second chunk's (2cp - 1 - c) from rank
 * c - 1's second chunk, on rank 0 nothing (the sequence's end). Megatron sends
 * each rank's chunk starts to its two neighbours; here one all-gather over
 * the CP group carries every rank's (4 b values, held as reals: exact below
 * 2^24). xbuf: (cp + 1) 4 b reals on the host, dev as many in the
 * backend's memory (the all-gather's buffers: the device's with CUDA). */
static mp_status roll_one(mp_gpt *g, int32_t *tok, int32_t *tgt, size_t S, real *xbuf,
                          real *dev, mp_error *err)
{
    size_t b = (size_t)g->d.micro_batch, cp = (size_t)mp_dims_cp(&g->d);
    size_t C = S / b / 2, c = cp > 1 ? (size_t)g->cp.rank : 0, w = 4 * b;
    real *mine = xbuf, *all = xbuf + w;
    if (cp > 1) {
        for (size_t j = 0; j < b; j++) {
            mine[j] = (real)tok[j], mine[b + j] = (real)tgt[j];
            mine[2 * b + j] = (real)tok[C * b + j], mine[3 * b + j] = (real)tgt[C * b + j];
        }
        double t0 = g->be->now();
        g->be->copy(dev, mine, w * sizeof *dev, MP_COPY_H2D);
        CHECK(g->be->allgather(&g->cp, MP_REAL_KIND, dev, dev + w, w, err));
        g->be->copy(all, dev + w, cp * w * sizeof *dev, MP_COPY_D2H);
        mp_probe_record(g->probe, t0, MP_STREAM_CP, MP_EV_CP_COMM, true);
    }
    memmove(tok, tok + b, (S - b) * sizeof *tok);
    memmove(tgt, tgt + b, (S - b) * sizeof *tgt);
    /* test-only (--test-drop-allreduce cp-mtp-roll): each chunk rolled alone,
     * as if nothing were exchanged */
    bool alone = cp > 1 && mp_probe_drops(g->probe, "cp-mtp-roll");
    for (size_t j = 0; j < b; j++) {
        tok[S - b + j] = 0, tgt[S - b + j] = -1; /* the sequence's end, or (CP) below */
        if (alone)
            tok[(C - 1) * b + j] = 0, tgt[(C - 1) * b + j] = -1;
        if (cp == 1 || alone)
            continue;
        /* the first chunk's last position: chunk c + 1's first */
        const real *next = c + 1 < cp ? all + (c + 1) * w : mine + 2 * b;
        tok[(C - 1) * b + j] = (int32_t)next[j];
        tgt[(C - 1) * b + j] = (int32_t)next[b + j];
        if (c > 0) { /* the second chunk's last: rank c - 1's second chunk's first */
            tok[S - b + j] = (int32_t)all[(c - 1) * w + 2 * b + j];
            tgt[S - b + j] = (int32_t)all[(c - 1) * w + 3 * b + j];
        }
    }
    return MP_OK;
}

/* Every module's shifted tokens and targets into M[k].tok, .tgt: rolled
 * k + 1 positions, zero token / no target past the end (the "shift" mutant's
 * tokens k). xbuf: the exchange's host buffer (roll_one); its device buffer
 * is the TP gather's scratch, free until a projection (checked to hold it). */
static mp_status roll_all(mp_gpt *g, mtp_acts *M, mtp_work *Wm, const int32_t *tokens,
                          const int32_t *targets, real *xbuf, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    size_t S = z.S, b = z.b, cp = (size_t)mp_dims_cp(&g->d), xn = (cp + 1) * 4 * b;
    if (xn > S * z.h)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "the MTP shift's exchange (%zu reals) outgrows its buffer", xn);
    int32_t *host = malloc(3 * S * sizeof *host);
    if (!host)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the MTP shift");
    int32_t *tok_k = host, *tgt_k = host + S, *tok_prev = host + 2 * S;
    memcpy(tok_k, tokens, S * sizeof *tok_k);
    memcpy(tgt_k, targets, S * sizeof *tgt_k);
    mp_status st = MP_OK;
    for (int k = 0; k < g->d.mtp_layers && !st; k++) {
        memcpy(tok_prev, tok_k, S * sizeof *tok_k);
        if ((st = roll_one(g, tok_k, tgt_k, S, xbuf, Wm->gather, err)))
            break;
        g->be->copy(M[k].tok, mutant("shift") ? tok_prev : tok_k, S * sizeof *host, MP_COPY_H2D);
        g->be->copy(M[k].tgt, tgt_k, S * sizeof *host, MP_COPY_H2D);
    }
    free(host);
    return st;
}

/* Module k from h_{k-1} (hprev, this rank's rows [Sl,h]) to a->fn = h_k. */
static mp_status module_forward(mp_gpt *g, mtp_acts *a, mtp_work *Wm, int k, const real *hprev,
                                mp_error *err)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    const mp_backend *be = g->be;
    bool sp = g->d.sp && g->tp.size > 1;
    size_t S = z.S, Sl = z.Sl, h = z.h, hl = h / (size_t)g->d.tp, t = (size_t)g->tp.size;
    size_t row0 = sp ? (size_t)g->tp.rank * Sl : 0, lo = (size_t)g->tp.rank * z.Vl;
    int l = g->d.layers + k;
    /* e[Sl,h] = reduce(wte rows of tok this rank owns) (vocab-parallel) */
    be->gather_rows(MP_REAL_KIND, W.part, param(g->w, g, emb_param(g)), a->tok, lo, z.Vl, S, h,
                    false);
    CHECK(mp_model_tp_reduce(g, W.part, a->e, h, "tp-mtp-embed", err));
    bq(g, a->e, Sl * h, MP_Q_ACT);
    /* en = enorm(e), hn = hnorm(h_{k-1}) [Sl,h]; cat_loc[Sl,2h] = [en | hn] */
    int en_k = mutant("norms") ? MP_MTP_HNORM_W : MP_MTP_ENORM_W;
    int hn_k = mutant("norms") ? MP_MTP_ENORM_W : MP_MTP_HNORM_W;
    mp_model_norm_forward(g, a->en, a->en_xhat, a->en_rstd, a->e, P(k, en_k),
                          PB(g->w, k, en_k + 1), (int)Sl);
    mp_model_norm_forward(g, a->hn, a->hn_xhat, a->hn_rstd, hprev, P(k, hn_k),
                          PB(g->w, k, hn_k + 1), (int)Sl);
    size_t e_at = mutant("concat") ? h : 0;
    copy_rows(g, a->cat_loc + e_at, 2 * h, a->en, h, Sl, h);
    copy_rows(g, a->cat_loc + (h - e_at), 2 * h, a->hn, h, Sl, h);
    /* cat_full[S,2h] (SP: all-gather); proj_loc[S,hl] = cat_full @ W_eh[2h,hl]
     * (column-parallel) */
    CHECK(mp_model_tp_gather_rows(g, a->cat_loc, a->cat_full, S, Sl, 2 * h, err));
    GEMM(false, false, S, hl, 2 * h, a->cat_full, 2 * h, P(k, MP_MTP_EH_W), hl, 0.0,
         a->proj_loc, hl);
    bq(g, a->proj_loc, S * hl, MP_Q_ACT);
    /* x[Sl,h]: every rank's columns side by side (all-gather over TP), with
     * SP this rank's rows of them */
    if (t > 1) {
        CHECK(be->allgather(&g->tp, MP_REAL_KIND, a->proj_loc, Wm->gather, S * hl, err));
        for (size_t q = 0; q < t; q++)
            copy_rows(g, a->x + q * hl, h, Wm->gather + q * S * hl + row0 * hl, hl, Sl, hl);
    } else {
        be_copy(g, a->x, a->proj_loc, S * h);
    }
    /* the block, then h_k = fn[Sl,h] = fnorm(block output) */
    CHECK(mp_model_block_forward(g, &a->blk, l, a->x, err));
    mp_model_norm_forward(g, a->fn, a->fn_xhat, a->fn_rstd, a->blk.xout, P(k, MP_MTP_FNORM_W),
                          PB(g->w, k, MP_MTP_FNORM_B), (int)Sl);
    return MP_OK;
}

/* Module k's loss from h_k (fn, this rank's rows [Sl,h]) through the shared
 * output layer: fn_full[S,h], logits[S,Vl], loss += w_k * sum ce(tgt).
 * rowloss: [S] on the host. */
static mp_status module_loss(mp_gpt *g, mtp_acts *a, int k, const real *fn, real *rowloss,
                             double *loss_sum, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    const mp_backend *be = g->be;
    size_t S = z.S, h = z.h;
    CHECK(mp_model_tp_gather(g, fn, a->fn_full, h, err));
    GEMM(false, true, S, z.Vl, h, a->fn_full, h, param(g->w, g, g->lay->head), h, 0.0,
         a->logits, z.Vl);
    bq(g, a->logits, S * z.Vl, MP_Q_ACT);
    double sum = 0;
    CHECK(mp_model_cross_entropy(g, a->logits, a->tgt, S, W.stats, W.part, &sum, err));
    /* exact mode: each row's weighted term back on the loss's grid, so that
     * sums over any split of the rows (micro-batches, CP ranks) are exact in
     * any order (W.part: the rows' losses, in the backend's memory) */
    double wk = module_weight(g, k), wsum = wk * sum;
    if (g->exact) {
        wsum = 0;
        be->copy(rowloss, W.part, S * sizeof *rowloss, MP_COPY_D2H);
        for (size_t r = 0; r < S; r++)
            wsum += nearbyint(ldexp(wk * (double)rowloss[r], MP_Q_LOSS)) / ldexp(1.0, MP_Q_LOSS);
    }
    *loss_sum += wsum;
    return MP_OK;
}

/* The modules beside the loss (hmain: this rank's rows of the main model's
 * final-norm output), or on a standalone MTP stage (each h_k into
 * A->wide[k + 1]), or that stage's losses on the last stage (each h_k from
 * the received A->x0[k + 1]). */
mp_status mp_mtp_forward(mp_gpt *g, mp_acts *A, const int32_t *tokens, const int32_t *targets,
                         const real *hmain, double *loss_sum, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    int D = g->d.mtp_layers;
    mtp_acts M[MP_MTP_MAX];
    mtp_work Wm;
    view(g, A, M, &Wm);
    size_t S = z.S, Sl = z.Sl, h = z.h, b = z.b, cp = (size_t)mp_dims_cp(&g->d);
    /* xbuf: the roll's exchange, then the rows' losses [S] (exact mode) */
    size_t xn = (cp + 1) * 4 * b;
    real *xbuf = malloc((xn + S) * sizeof *xbuf), *rowloss = xbuf + xn;
    if (!xbuf)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the MTP shift");
    mp_status st = roll_all(g, M, &Wm, tokens, targets, xbuf, err);
    const real *hprev = hmain;
    for (int k = 0; k < D && !st; k++) {
        mtp_acts *a = &M[k];
        if (z.mtp && (st = module_forward(g, a, &Wm, k, hprev, err)))
            break;
        if (z.mtp && !z.head) /* the standalone MTP stage: h_k to the last stage */
            be_copy(g, A->wide + (size_t)(k + 1) * Sl * h, a->fn, Sl * h);
        if (z.head)
            st = module_loss(g, a, k, z.mtp ? a->fn : A->x0 + (size_t)(k + 1) * Sl * h,
                             rowloss, loss_sum, err);
        hprev = mutant("hidden") ? a->blk.xout : a->fn;
    }
    free(xbuf);
    return st;
}

/* Module k's loss back to the output layer's gradient and dfn[Sl,h], the
 * gradient of h_k through it. */
static mp_status module_loss_backward(mp_gpt *g, mtp_acts *a, int k, real *dfn, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    size_t S = z.S, Sl = z.Sl, h = z.h, Vl = z.Vl, lo = (size_t)g->tp.rank * Vl;
    const mp_backend *be = g->be;
    /* dlogits = (p - onehot(tgt)) * grad_scale * w_k (none past the end); exact
     * mode puts the weighted terms back on a grid */
    be->ce_backward(MP_REAL_KIND, a->logits, a->tgt, lo, S, Vl,
                    (double)g->grad_scale * module_weight(g, k), true);
    bq(g, a->logits, S * Vl, MP_Q_GRAD_ATT);
    /* dW_head[Vl,h] += dlogits^T @ fn_full; dfn = reduce(dlogits @ W_head) */
    GEMM(true, false, Vl, h, S, a->logits, Vl, a->fn_full, h, 1.0,
         param(g->g, g, g->lay->head), h);
    work W = work_of(g);
    GEMM(false, false, S, h, Vl, a->logits, Vl, param(g->w, g, g->lay->head), h, 0.0, W.part,
         h);
    CHECK(mp_model_tp_reduce(g, W.part, dfn, h, "tp-mtp-head-bwd", err));
    bq(g, dfn, Sl * h, MP_Q_GRAD);
    return MP_OK;
}

/* Module k back from Wm->dfn (h_k's gradient, the next module's carry added)
 * to its weights, the embedding copy's gradient and Wm->dcarry (h_{k-1}'s). */
static mp_status module_backward(mp_gpt *g, mtp_acts *a, mtp_work *Wm, int k, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    const mp_backend *be = g->be;
    bool sp = g->d.sp && g->tp.size > 1;
    size_t S = z.S, Sl = z.Sl, h = z.h, hl = h / (size_t)g->d.tp, Vl = z.Vl;
    size_t t = (size_t)g->tp.size, lo = (size_t)g->tp.rank * Vl;
    int l = g->d.layers + k;
    /* back through fnorm into the stream, then the block */
    mp_model_norm_backward(g, Wm->dstream, G(k, MP_MTP_FNORM_W), PB(g->g, k, MP_MTP_FNORM_B),
                           Wm->dfn, a->fn_xhat, a->fn_rstd, P(k, MP_MTP_FNORM_W), (int)Sl);
    bq(g, Wm->dstream, Sl * h, MP_Q_GRAD);
    CHECK(mp_model_block_backward(g, &a->blk, l, Wm->dstream, err));
    /* dfull[S,h] (SP: all-gather of the rows) and this rank's columns dloc[S,hl] */
    const real *dfull = Wm->dstream;
    if (sp) {
        CHECK(mp_model_tp_gather(g, Wm->dstream, Wm->dfull, h, err));
        dfull = Wm->dfull;
    }
    if (t > 1)
        copy_rows(g, Wm->dloc, hl, dfull + (size_t)g->tp.rank * hl, h, S, hl);
    else
        be_copy(g, Wm->dloc, dfull, S * h);
    /* dW_eh[2h,hl] += cat_full^T @ dloc; dcat_loc[Sl,2h] = reduce(dloc @ W_eh^T) */
    GEMM(true, false, 2 * h, hl, S, a->cat_full, 2 * h, Wm->dloc, hl, 1.0, G(k, MP_MTP_EH_W),
         hl);
    GEMM(false, true, S, 2 * h, hl, Wm->dloc, hl, P(k, MP_MTP_EH_W), hl, 0.0, Wm->dcat, 2 * h);
    CHECK(mp_model_tp_reduce_rows(g, Wm->dcat, Wm->dcat_loc, S, Sl, 2 * h, "tp-mtp-proj-bwd",
                                  err));
    bq(g, Wm->dcat_loc, Sl * 2 * h, MP_Q_GRAD);
    /* [den | dhn] -> through enorm to e, through hnorm to h_{k-1} (dcarry) */
    copy_rows(g, Wm->dfn, h, Wm->dcat_loc, 2 * h, Sl, h);
    mp_model_norm_backward(g, Wm->de, G(k, MP_MTP_ENORM_W), PB(g->g, k, MP_MTP_ENORM_B),
                           Wm->dfn, a->en_xhat, a->en_rstd, P(k, MP_MTP_ENORM_W), (int)Sl);
    bq(g, Wm->de, Sl * h, MP_Q_GRAD);
    copy_rows(g, Wm->dfn, h, Wm->dcat_loc + h, 2 * h, Sl, h);
    mp_model_norm_backward(g, Wm->dcarry, G(k, MP_MTP_HNORM_W), PB(g->g, k, MP_MTP_HNORM_B),
                           Wm->dfn, a->hn_xhat, a->hn_rstd, P(k, MP_MTP_HNORM_W), (int)Sl);
    bq(g, Wm->dcarry, Sl * h, MP_Q_GRAD);
    /* the embedding (or this stage's copy): dwte rows of tok this rank owns
     * += de (SP: gathered) */
    const real *de = Wm->de;
    if (sp) {
        CHECK(mp_model_tp_gather(g, Wm->de, Wm->de_full, h, err));
        de = Wm->de_full;
    }
    be->scatter_add_rows(MP_REAL_KIND, param(g->g, g, emb_param(g)), de, a->tok, lo, Vl, S, h);
    return MP_OK;
}

/* From the modules' losses back to their weights, the embedding's and the
 * output layer's gradients, and Wm.dcarry[Sl,h]: the gradient of the main
 * model's final-norm output (mp_mtp_add_hidden_grad adds it). With a
 * standalone MTP stage: on the last stage, the losses back to the gradients
 * of every h_k, into dwide[k + 1]; on the MTP stage, the modules back from
 * those (dwide, received). */
mp_status mp_mtp_backward(mp_gpt *g, mp_acts *A, real *dwide, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    int D = g->d.mtp_layers;
    mtp_acts M[MP_MTP_MAX];
    mtp_work Wm;
    view(g, A, M, &Wm);
    size_t Sl = z.Sl, h = z.h;
    g->be->zero(Wm.dcarry, Sl * h * sizeof(real)); /* the last module's output feeds nothing */
    for (int k = D - 1; k >= 0; k--) {
        mtp_acts *a = &M[k];
        real *part = dwide ? dwide + (size_t)(k + 1) * Sl * h : NULL;
        if (z.head)
            CHECK(module_loss_backward(g, a, k, z.mtp ? Wm.dfn : part, err));
        if (!z.mtp)
            continue;
        if (!z.head)
            be_copy(g, Wm.dfn, part, Sl * h);
        g->be->add(MP_REAL_KIND, Wm.dfn, Wm.dcarry, Sl * h);
        bq(g, Wm.dfn, Sl * h, MP_Q_GRAD);
        CHECK(module_backward(g, a, &Wm, k, err));
    }
    return MP_OK;
}

/* dln[Sl,h] (the main head's gradient of its final-norm output) += the MTP
 * modules' (mp_mtp_backward's Wm.dcarry). */
void mp_mtp_add_hidden_grad(mp_gpt *g, mp_acts *A, real *dln)
{
    sizes z = sizes_of(&g->d);
    mtp_acts M[MP_MTP_MAX];
    mtp_work Wm;
    view(g, A, M, &Wm);
    g->be->add(MP_REAL_KIND, dln, Wm.dcarry, z.Sl * z.h);
    bq(g, dln, z.Sl * z.h, MP_Q_GRAD);
}
#undef P
#undef G
#undef PB
