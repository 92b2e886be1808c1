/* model_internal.h — what the files of one rank's model share (model.c,
 * block.c, cp_ring.c, bert_heads.c): the saved activations and workspace,
 * sizes, buffer layouts, small helpers and the functions each file gives the
 * others. Each of them is compiled once per precision (real.h); the
 * functions declared at the end have their lines in real_names.h. */
#ifndef MP_EXEC_MODEL_INTERNAL_H
#define MP_EXEC_MODEL_INTERNAL_H

#include "exec/kernels.h"
#include "exec/quant.h"

#include "exec/mla.h"
#include "exec/moe.h"

/* Saved activations of one block for one micro-batch. */
typedef struct block_acts {
    real *ln1_xhat, *ln1_rstd, *ln1_full; /* [Sl,h] [Sl] [S,h] */
    real *qkv, *probs, *att;              /* [S,row] [b,a/t,s,sk] [S,hl]; row = hl + 2 kc */
    real *kv_full;                        /* CP: [sk*b,kvw] every position's K|V */
    real *xmid;                           /* [Sl,h] residual after attention */
    real *ln2_xhat, *ln2_rstd, *ln2_full; /* [Sl,h] [Sl] [S,h] */
    real *fc1_pre, *fc1_act;              /* [S,f1] [S,Fl]; f1 = 2 Fl ([gate|up]) for SwiGLU */
    real *xout;                           /* [Sl,h] block output */
    real *moe;                            /* an MoE model's block state (exec/moe.h) */
    real *mla;                            /* latent attention's block state (exec/mla.h) */
    real *qk_xhat, *qk_rstd;              /* QK-norm: [S,hl+kc] the normed Q|K heads before
                                             their scales, [S,al+gl] each head row's 1/rms */
} block_acts;

struct mp_acts {
    real *mem;
    int32_t *tokens, *targets; /* [S] */
    int32_t *host_tokens;      /* [S] the tokens on the host (BERT's two-way labels) */
    real *x0;                  /* [Sl,h] the stage's input: embedding output, or received */
    block_acts *blk;       /* [blocks of the stage] */
    real *lnf_xhat, *lnf_rstd, *lnf_full; /* [Sl,h] [Sl] [S,h] */
    real *logits;              /* [S,Vl]: logits, then probabilities, then d logits */
    /* BERT's heads: the masked-LM transform [S,h] (dense output, GeLU output,
     * LayerNorm x-hat, rstd [S], output), the pooler [b,h] (dense output, tanh)
     * and the two-way head's probabilities [b,2] */
    real *mlm_pre, *mlm_act, *mlm_xhat, *mlm_rstd, *mlm_out, *pool_pre, *pooled, *nsp_p;
    real *mtp; /* the MTP modules' activations and scratch (mtp.c), on the head's stage */
    real *wide; /* [1 + D][Sl,h] a standalone MTP stage's output: the main model's
                   normed hidden states, then each module's */
};

/* Workspace of one rank (shared by all micro-batches). */
typedef struct work {
    real *part;  /* [S,h] partial sums before a TP reduction */
    real *loc;   /* [Sl,h] LayerNorm output before the SP all-gather */
    real *dres;  /* [Sl,h] gradient of the residual stream */
    real *dwide; /* [1 + D][Sl,h] after a standalone MTP stage: the input's gradient */
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
    real *mla;       /* latent attention's workspace (exec/mla.h) */
    real *qk_tmp;    /* QK-norm: [hl+kc] one row's Q|K input gradient (block.c) */
    real *moe;       /* the MoE blocks' scratch: their transients and what selective
                        recomputation rebuilds (exec/moe.h, MP_MOE_WORK) */
    block_acts sblk; /* recomputation: one block's activations (probs alone for
                            selective), rebuilt in backward; empty without */
} work;

typedef struct sizes {
    size_t S, Sl, h, hl, Fl, Vl, hd, al, s, b, L;
    size_t gl, rep;               /* key/value heads of this rank; query heads per one */
    size_t kc, row;               /* K (and V) columns; a QKV row: hl + 2 kc */
    size_t kvo, kvw;              /* where K|V starts in a QKV row and its width (CP's ring
                                     carries it): hl, 2 kc; latent attention's [Q | K | V]:
                                     kc, kc + hl */
    size_t f1;                    /* fc1's output columns: Fl, or 2 Fl for SwiGLU */
    size_t sk, cp;                /* key positions (the whole sequence), CP degree */
    size_t first_block, n_blocks; /* the blocks of this pipeline stage */
    int most_recompute;           /* the most any block of the stage recomputes */
    unsigned rebuilds;            /* the modules (MP_RCM_* bits) selective recomputation
                                     rebuilds in any block of the stage */
    bool emb, head;               /* the stage holds the embedding / the head */
    bool lnf, mtp;                /* it runs the final norm / the MTP modules (both with the
                                     head, but with a standalone MTP stage: the last block's
                                     stage, the MTP stage) */
    size_t win, wout;             /* its input and output, in [Sl,h] activations: 1, or
                                     1 + D after a standalone MTP stage ([h | h_0 ..]) */
    size_t moe;                   /* reals one MoE block keeps when it keeps everything (0:
                                     dense model) */
    size_t moe_work;              /* reals of the MoE scratch (moe.h; 0: dense model) */
    size_t hdv;                   /* a value head's columns (hd but with latent attention) */
    size_t mla, mla_work;         /* reals of one block's latent-attention state and of its
                                     workspace (0: none) */
    bool qk_norm;                 /* QK-norm on the Q and K heads (block.c) */
} sizes;

/* The modules selective recomputation rebuilds in block l (MP_RCM_* bits of
 * core/config.h: core_attn the attention probabilities, moe_act the routed
 * experts' activation, layernorm the two norms' outputs, mla_up_proj latent
 * attention's up-projected and turned Q, K, V, mlp a dense MLP's fc1 output
 * and activation, moe an MoE block's whole layer, shared_experts its shared
 * experts' inside); 0 otherwise. */
enum {
    RB_CORE_ATTN = 1u << MP_RCM_CORE_ATTN, RB_MOE_ACT = 1u << MP_RCM_MOE_ACT,
    RB_LAYERNORM = 1u << MP_RCM_LAYERNORM, RB_MLA_UP = 1u << MP_RCM_MLA_UP_PROJ,
    RB_MLP = 1u << MP_RCM_MLP, RB_MOE = 1u << MP_RCM_MOE,
    RB_SHARED = 1u << MP_RCM_SHARED_EXPERTS
};
static inline unsigned block_rebuilds(const mp_gpt_dims *d, int l)
{
    unsigned rb = 0;
    for (int k = 0; k < MP_RCM_COUNT; k++)
        rb |= mp_dims_block_rebuilds(d, l, k) ? 1u << k : 0u;
    return rb;
}

static inline sizes sizes_of(const mp_gpt_dims *d)
{
    sizes z;
    z.s = (size_t)mp_dims_positions(d);
    z.sk = (size_t)d->seq;
    z.cp = (size_t)mp_dims_cp(d);
    z.b = (size_t)d->micro_batch;
    z.S = z.s * z.b;
    z.Sl = (size_t)mp_dims_local_tokens(d);
    z.h = (size_t)d->hidden;
    z.hl = (size_t)d->heads * (size_t)mp_dims_head_dim(d) / (size_t)d->tp; /* Q's and the
                                                                 attention output's width */
    z.Fl = (size_t)d->ffn / (size_t)d->tp;
    z.Vl = (size_t)d->vocab / (size_t)d->tp;
    z.hd = (size_t)mp_dims_head_dim(d);
    z.al = (size_t)d->heads / (size_t)d->tp;
    z.gl = (size_t)mp_dims_kv_heads(d) / (size_t)d->tp;
    z.rep = z.al / z.gl;
    z.kc = z.gl * z.hd;
    z.hdv = z.hd;
    if (mp_dims_is_mla(d)) {
        /* [Q | K | V] with Q and K of nope + rope columns a head, V of v_dim;
         * every query head its own key and value head */
        z.hd = (size_t)(d->nope_dim + d->rope_dim);
        z.hdv = (size_t)d->v_dim;
        z.gl = z.al;
        z.rep = 1;
        z.kc = z.al * z.hd;
        z.hl = z.al * z.hdv;
    }
    z.row = z.hl + 2 * z.kc;
    z.qk_norm = d->qk_norm && !mp_dims_is_mla(d);
    z.kvo = mp_dims_is_mla(d) ? z.kc : z.hl;
    z.kvw = z.row - z.kvo;
    mp_mla_sizes mz = mp_mla_sizes_of(d, z.S, z.Sl);
    z.mla = mp_mla_layout_of(&mz).total;
    z.mla_work = mp_mla_work_of(&mz).total;
    z.f1 = d->gated ? 2 * z.Fl : z.Fl;
    z.L = (size_t)d->layers;
    int ib, ie;
    mp_dims_items(d, &ib, &ie);
    int fb = (ib > 1 ? ib : 1) - 1, lb = (ie < d->layers + 1 ? ie : d->layers + 1) - 1;
    z.first_block = (size_t)fb;
    z.n_blocks = lb > fb ? (size_t)(lb - fb) : 0;
    z.emb = ib == 0;
    z.head = ie == d->layers + 2;
    z.lnf = d->mtp_split ? ib <= d->layers && d->layers < ie : z.head;
    z.mtp = d->mtp_layers > 0 && (d->mtp_split ? d->mtp_split == MP_MTP_ON : z.head);
    z.win = d->mtp_split == MP_MTP_AFTER ? 1 + (size_t)d->mtp_layers : 1;
    z.wout = d->mtp_split >= MP_MTP_ON ? 1 + (size_t)d->mtp_layers : 1;
    z.moe = mp_moe_block_reals(d, z.S, z.Sl, 0);
    z.most_recompute = 0;
    z.rebuilds = 0;
    for (size_t k = 0; k < z.n_blocks; k++) {
        int r = mp_dims_block_recompute(d, (int)(z.first_block + k));
        z.most_recompute = r > z.most_recompute ? r : z.most_recompute;
        z.rebuilds |= block_rebuilds(d, (int)(z.first_block + k));
    }
    /* the scratch of the block that drops the most (each part dropped moves
     * from the block's region to the scratch) */
    z.moe_work = mp_moe_work_reals(d, z.S, z.Sl, z.rebuilds);
    return z;
}

/* Bump allocation from one block: first a pass that counts (base NULL). */
static inline real *take(real *base, size_t *used, size_t n)
{
    real *p = base ? base + *used : NULL;
    *used += n;
    return p;
}

/* Reals an MoE block l keeps (moe.h; 0 for a dense block) when it
 * rebuilds rb (block_rebuilds). */
static inline size_t block_moe_reals(const mp_gpt_dims *d, const sizes *z, int l, unsigned rb)
{
    return mp_dims_block_is_moe(d, l) ? mp_moe_block_reals(d, z->S, z->Sl, rb) : 0;
}

/* One block's activations: all of them (mode 0), all but what selective
 * recomputation rebuilds (1; rb: block_rebuilds), or the block's output alone
 * (2: full; its input is the previous block's output or x0). Fields not kept
 * are NULL; an MoE block's region holds moe reals (block_moe_reals). */
static inline void layout_block(block_acts *B, real *base, size_t *u, const sizes *z,
                             int mode, unsigned rb, size_t moe)
{
    memset(B, 0, sizeof *B);
    if (mode != 1)
        rb = 0;
    if (mode < 2) {
        B->ln1_xhat = take(base, u, z->Sl * z->h);
        B->ln1_rstd = take(base, u, z->Sl);
        if (!(rb & RB_LAYERNORM))
            B->ln1_full = take(base, u, z->S * z->h);
        if (!(rb & RB_MLA_UP) || !z->mla) /* latent attention's Q, K, V: mla_up_proj */
            B->qkv = take(base, u, z->S * z->row);
        if (!(rb & RB_CORE_ATTN))
            B->probs = take(base, u, z->b * z->al * z->s * z->sk);
        B->att = take(base, u, z->S * z->hl);
        if (z->qk_norm) {
            B->qk_xhat = take(base, u, z->S * (z->hl + z->kc));
            B->qk_rstd = take(base, u, z->S * (z->al + z->gl));
        }
        if (z->cp > 1)
            B->kv_full = take(base, u, z->sk * z->b * z->kvw);
        B->xmid = take(base, u, z->Sl * z->h);
        B->ln2_xhat = take(base, u, z->Sl * z->h);
        B->ln2_rstd = take(base, u, z->Sl);
        if (!(rb & RB_LAYERNORM))
            B->ln2_full = take(base, u, z->S * z->h);
        if (!(rb & RB_MLP)) {
            B->fc1_pre = take(base, u, z->S * z->f1);
            B->fc1_act = take(base, u, z->S * z->Fl);
        }
        B->moe = z->moe ? take(base, u, moe) : NULL;
        B->mla = z->mla ? take(base, u, z->mla) : NULL;
    }
    B->xout = take(base, u, z->Sl * z->h);
}

/* mtp.c: the reals of a slot's MTP area (0 without MTP or off the head's stage). */
size_t mp_mtp_reals(const sizes *z, const mp_gpt_dims *d);

static inline size_t layout_acts(mp_acts *A, real *base, const sizes *z,
                              const mp_gpt_dims *d)
{
    size_t u = 0;
    /* tokens and targets ride in the same block, as reals' worth of int32 */
    size_t int_reals = (2 * z->S * sizeof(int32_t) + sizeof(real) - 1) / sizeof(real);
    real *ints = take(base, &u, int_reals);
    if (base) {
        A->tokens = (int32_t *)(void *)ints;
        A->targets = A->tokens + z->S;
    }
    A->x0 = take(base, &u, z->win * z->Sl * z->h);
    for (size_t l = 0; l < z->n_blocks; l++) {
        block_acts tmp, *B = base ? &A->blk[l] : &tmp;
        int bl = (int)(z->first_block + l);
        int mode = mp_dims_block_recompute(d, bl);
        unsigned rb = mode == 1 ? block_rebuilds(d, bl) : 0;
        layout_block(B, base, &u, z, mode, rb, block_moe_reals(d, z, bl, rb));
    }
    A->lnf_xhat = take(base, &u, z->Sl * z->h);
    A->lnf_rstd = take(base, &u, z->Sl);
    A->lnf_full = take(base, &u, z->S * z->h);
    A->logits = take(base, &u, z->S * z->Vl);
    if (d->bert) {
        A->mlm_pre = take(base, &u, z->S * z->h);
        A->mlm_act = take(base, &u, z->S * z->h);
        A->mlm_xhat = take(base, &u, z->S * z->h);
        A->mlm_rstd = take(base, &u, z->S);
        A->mlm_out = take(base, &u, z->S * z->h);
        A->pool_pre = take(base, &u, z->b * z->h);
        A->pooled = take(base, &u, z->b * z->h);
        A->nsp_p = take(base, &u, z->b * 2);
    }
    size_t nm = mp_mtp_reals(z, d);
    A->mtp = nm ? take(base, &u, nm) : NULL;
    A->wide = z->mtp && z->wout > 1 ? take(base, &u, z->wout * z->Sl * z->h) : NULL;
    return u;
}

static inline size_t layout_work(work *W, real *base, const sizes *z)
{
    size_t u = 0;
    W->part = take(base, &u, z->S * z->h);
    W->loc = take(base, &u, z->Sl * z->h);
    W->dres = take(base, &u, z->Sl * z->h);
    W->dwide = take(base, &u, z->win > 1 ? z->win * z->Sl * z->h : 0);
    W->dln = take(base, &u, z->Sl * z->h);
    W->dtmp = take(base, &u, z->Sl * z->h);
    W->dfull = take(base, &u, z->S * z->h);
    W->datt = take(base, &u, z->S * z->hl);
    W->dqkv = take(base, &u, z->S * z->row);
    W->dfc = take(base, &u, z->S * z->f1);
    W->dact = take(base, &u, z->S * z->Fl);
    W->stats = take(base, &u, 3 * z->S);
    W->att_scratch = take(base, &u, z->s * z->sk);
    size_t kv = z->cp > 1 ? z->sk * z->b * z->kvw : 0;
    W->kv_loc = take(base, &u, z->cp > 1 ? z->S * z->kvw : 0);
    W->kv_ranks = take(base, &u, kv);
    W->dkv_full = take(base, &u, kv);
    W->mla = z->mla_work ? take(base, &u, z->mla_work) : NULL;
    W->qk_tmp = z->qk_norm ? take(base, &u, z->hl + z->kc) : NULL;
    W->moe = z->moe_work ? take(base, &u, z->moe_work) : NULL;
    /* full recompute rebuilds a whole block here; selective only its probabilities */
    if (z->most_recompute == 2)
        layout_block(&W->sblk, base, &u, z, 0, 0, z->moe);
    else if (z->most_recompute == 1) {
        /* what the selective blocks rebuild, one block's worth */
        memset(&W->sblk, 0, sizeof W->sblk);
        if (z->rebuilds & RB_CORE_ATTN)
            W->sblk.probs = take(base, &u, z->b * z->al * z->s * z->sk);
        if (z->rebuilds & RB_LAYERNORM) {
            W->sblk.ln1_full = take(base, &u, z->S * z->h);
            W->sblk.ln2_full = take(base, &u, z->S * z->h);
        }
        if (z->rebuilds & RB_MLP) {
            W->sblk.fc1_pre = take(base, &u, z->S * z->f1);
            W->sblk.fc1_act = take(base, &u, z->S * z->Fl);
        }
        if ((z->rebuilds & RB_MLA_UP) && z->mla)
            W->sblk.qkv = take(base, &u, z->S * z->row);
        /* an MoE block's dropped state is in the MoE scratch (W->moe) */
    } else {
        memset(&W->sblk, 0, sizeof W->sblk);
    }
    return u;
}

static inline work work_of(const mp_gpt *g)
{
    sizes z = sizes_of(&g->d);
    work W;
    layout_work(&W, g->ws, &z);
    return W;
}

static inline real *param(real *buf, const mp_gpt *g, int pid)
{
    return buf + g->lay->p[pid].offset;
}

/* Tensor k of block l in buf (weights or gradients), or NULL when the model
 * has none (LLaMA: no biases, RMSNorm has no shift). */
static inline real *blk(real *buf, const mp_gpt *g, int l, int k)
{
    int pid = mp_block_param(g->lay, l, k);
    return pid >= 0 ? buf + g->lay->p[pid].offset : NULL;
}

/* Segment (token type) of a global position: the second half is sentence B. */
static inline size_t segment(const mp_gpt *g, size_t pos)
{
    return pos >= (size_t)g->d.seq / 2 ? 1 : 0;
}

/* Whether this rank holds position 0 (its first local position), where the
 * pooler reads each sample; with CP only one rank of the group does. */
static inline bool holds_first(const mp_gpt *g)
{
    return g->qpos[0] == 0;
}

/* Global row of local residual row rl (SP: this rank's piece of the sequence). */
static inline size_t global_row(const mp_gpt *g, size_t rl, size_t Sl)
{
    return (g->d.sp && g->tp.size > 1) ? (size_t)g->tp.rank * Sl + rl : rl;
}

/* Exact mode's rounding of x[n] onto 2^-grid, on the backend. */
static inline void bq(const mp_gpt *g, real *x, size_t n, int grid)
{
    if (g->exact)
        g->be->quantize(MP_REAL_KIND, x, 1, n, n, grid, MP_EXACT_MAX_INT);
}

/* n reals from src to dst, both in the backend's memory. */
static inline void be_copy(const mp_gpt *g, real *dst, const real *src, size_t n)
{
    if (dst != src)
        g->be->copy(dst, src, n * sizeof(real), MP_COPY_D2D);
}

#ifndef MP_MODEL_MACROS
#define MP_MODEL_MACROS
#define GEMM(ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc)                                 \
    g->be->gemm(MP_REAL_KIND, ta, tb, (int)(m), (int)(n), (int)(k), 1.0, A, (int)(lda), B,  \
                (int)(ldb), beta, C, (int)(ldc))
#define CHECK(x)                                                                           \
    do {                                                                                   \
        mp_status st_ = (x);                                                               \
        if (st_ != MP_OK)                                                                  \
            return st_;                                                                    \
    } while (0)
#endif

/* Across the model's files (mp_model_ names keep them apart from the API). */
mp_status mp_model_tp_reduce(mp_gpt *g, real *partial, real *out, size_t cols,
                             const char *site, mp_error *err);
mp_status mp_model_tp_gather(mp_gpt *g, const real *loc, real *full, size_t cols,
                             mp_error *err);
/* The same for S rows (Sl of them this rank's under SP) other than the model's. */
mp_status mp_model_tp_reduce_rows(mp_gpt *g, real *partial, real *out, size_t S,
                                  size_t Sl, size_t cols, const char *site, mp_error *err);
mp_status mp_model_tp_gather_rows(mp_gpt *g, const real *loc, real *full, size_t S,
                                  size_t Sl, size_t cols, mp_error *err);
mp_status mp_model_cross_entropy(mp_gpt *g, real *logits, const int32_t *targets,
                                 size_t S, real *stats, real *loss, double *loss_sum,
                                 mp_error *err);
void mp_model_dlogits(mp_gpt *g, real *logits, const int32_t *targets, size_t S);
mp_status mp_model_cp_gather_kv(mp_gpt *g, const real *qkv, real *kv_full,
                                mp_error *err);
mp_status mp_model_cp_reduce_dkv(mp_gpt *g, const real *dkv_full, real *dqkv,
                                 mp_error *err);
void mp_gelu_kind_forward(const mp_gpt *g, real *out, const real *in, size_t n);
void mp_gelu_kind_backward(const mp_gpt *g, real *din, const real *dout, const real *in,
                           size_t n);
void mp_mlp_act_forward(const mp_gpt *g, real *act, const real *pre, size_t rows, size_t f,
                        bool clamp);
void mp_mlp_act_backward(const mp_gpt *g, real *dpre, const real *dact, const real *pre,
                         size_t rows, size_t f, bool clamp);
void mp_model_norm_forward(const mp_gpt *g, real *out, real *xhat, real *rstd,
                           const real *x, const real *w, const real *b, int rows);
void mp_model_norm_backward(const mp_gpt *g, real *dx, real *dw, real *db,
                            const real *dout, const real *xhat, const real *rstd,
                            const real *w, int rows);
void mp_model_norm_backward_add(mp_gpt *g, int l, int w_k, const real *xhat,
                                const real *rstd, real *dres);
mp_status mp_model_block_forward(mp_gpt *g, block_acts *B, int l, const real *x,
                                 mp_error *err);
mp_status mp_model_block_backward(mp_gpt *g, block_acts *B, int l, real *dres,
                                  mp_error *err);
void mp_model_recompute_probs(mp_gpt *g, block_acts *V, int l);
/* Selective recomputation of block l: B's activations that it does not keep
 * (NULL) in the workspace's scratch (forward and backward), and, before its
 * backward, those rebuilt from what it kept and its input x. */
void mp_model_rebuild_scratch(const mp_gpt *g, block_acts *B);
mp_status mp_model_rebuild(mp_gpt *g, block_acts *V, int l, const real *x, mp_error *err);
/* Test-only (`--test-drop-allreduce recompute-plant`): x[n-1] (on the backend)
 * made wrong by a half, where a rebuild lands, so that the check must fail when
 * the backward reads what recomputation rebuilt (n: x's reals; 0: nothing). */
void mp_model_plant(const mp_gpt *g, real *x, size_t n);
/* Selective recomputation's rebuilds in an MoE block (moe_layer.c: rb's moe,
 * moe_act, shared_experts) and in a latent-attention one (mla.c: its Q, K, V). */
mp_status mp_moe_rebuild(mp_gpt *g, block_acts *B, int l, unsigned rb, mp_error *err);
void mp_mla_rebuild_up(mp_gpt *g, block_acts *B, int l);
/* moe_layer.c: an MoE block's FFN. Forward: B->xout[Sl,h] = the experts'
 * weighted outputs for B->ln2_full (before the residual); backward: dln[Sl,h]
 * = the gradient of the norm's output from dout[Sl,h], the weights' gradients
 * accumulated. */
mp_status mp_moe_forward(mp_gpt *g, block_acts *B, int l, mp_error *err);
/* mla.c: a latent-attention block's attention. Forward: from the block's
 * input x[Sl,h], its first norm and B->att[S,al*dv] (before the output
 * projection); backward: from W.datt[S,al*dv], the gradient through the
 * attention, the projections and the first norm added to dres[Sl,h]. */
mp_status mp_mla_forward(mp_gpt *g, block_acts *B, int l, const real *x, mp_error *err);
mp_status mp_mla_backward(mp_gpt *g, block_acts *B, int l, real *dres, mp_error *err);
void mp_mla_recompute_probs(mp_gpt *g, block_acts *V);
mp_status mp_moe_backward(mp_gpt *g, block_acts *B, int l, const real *dout,
                          real *dln, mp_error *err);
double mp_model_nsp_forward(mp_gpt *g, mp_acts *A);
/* mtp.c: the multi-token-prediction modules after the head (forward from
 * hmain, this rank's rows of the final norm's output: their losses added to
 * *loss_sum; backward: their gradients, then mp_mtp_add_hidden_grad adds
 * theirs of the main final-norm output to dln[Sl,h]). With a standalone MTP
 * stage: there the modules alone (forward into A->wide, backward from dwide,
 * the received gradient), on the last stage their losses alone (from A->x0,
 * back into dwide). */
mp_status mp_mtp_forward(mp_gpt *g, mp_acts *A, const int32_t *tokens, const int32_t *targets,
                         const real *hmain, double *loss_sum, mp_error *err);
mp_status mp_mtp_backward(mp_gpt *g, mp_acts *A, real *dwide, mp_error *err);
void mp_mtp_add_hidden_grad(mp_gpt *g, mp_acts *A, real *dln);
mp_status mp_model_bert_head_backward(mp_gpt *g, mp_acts *A, mp_error *err);

#endif
