/* t5_internal.h — what t5.c and t5_block.c share: sizes, the saved
 * activations of one micro-batch, the workspace. Both files are compiled once
 * per precision (real.h); the functions declared here have their lines in
 * real_names.h. */
#ifndef MP_EXEC_T5_INTERNAL_H
#define MP_EXEC_T5_INTERNAL_H

#include "exec/model_internal.h"
#include "exec/t5.h"

typedef struct t5_sizes {
    size_t b, se, sd;     /* micro-batch, encoder and decoder positions */
    size_t Se, Sd;        /* token rows of the encoder and of the decoder */
    size_t Sel, Sdl;      /* this rank's rows of them (SP: a piece of the sequence) */
    size_t Smax, Slmax;   /* the larger of each pair (the encoder's: sd <= se) */
    size_t h, hl, al, hd, Fl, f1, Vl, E, L;
} t5_sizes;

static inline t5_sizes t5_sizes_of(const mp_gpt_dims *d)
{
    t5_sizes z;
    size_t t = (size_t)d->tp;
    bool sp = d->sp && d->tp > 1;
    z.b = (size_t)d->micro_batch;
    z.se = (size_t)d->seq;
    z.sd = (size_t)d->dec_seq;
    z.Se = z.se * z.b;
    z.Sd = z.sd * z.b;
    z.Sel = sp ? z.Se / t : z.Se;
    z.Sdl = sp ? z.Sd / t : z.Sd;
    z.Smax = z.Se > z.Sd ? z.Se : z.Sd;
    z.Slmax = z.Sel > z.Sdl ? z.Sel : z.Sdl;
    z.h = (size_t)d->hidden;
    z.hl = z.h / t;
    z.al = (size_t)d->heads / t;
    z.hd = z.h / (size_t)d->heads;
    z.Fl = (size_t)d->ffn / t;
    z.f1 = d->gated ? 2 * z.Fl : z.Fl;
    z.Vl = (size_t)d->vocab / t;
    z.E = (size_t)d->enc_layers;
    z.L = (size_t)d->layers;
    return z;
}

/* What this rank's pipeline stage (items [ib, ie) of mp_gpt_dims) holds:
 * item 0 the embedding, 1..E the encoder's blocks (item E with the encoder's
 * final norm), E+1..L the decoder's (the decoder's input embedding with item
 * E+1), L+1 the final norm, head and loss. */
typedef struct t5_stage {
    int ib, ie;
    bool emb, enc, enc_lnf, dec, dec_emb, head; /* enc/dec: any item of that side */
    size_t enc_b, enc_e, dec_b, dec_e;          /* its blocks of each side: [b, e) */
} t5_stage;

static inline t5_stage t5_stage_of(const mp_gpt_dims *d)
{
    t5_stage t;
    int E = d->enc_layers, L = d->layers;
    mp_dims_items(d, &t.ib, &t.ie);
    t.emb = t.ib == 0;
    t.enc = t.ib <= E;
    t.enc_lnf = t.ib <= E && E < t.ie;
    t.dec = t.ie > E + 1;
    t.dec_emb = t.ib <= E + 1 && E + 1 < t.ie;
    t.head = t.ie == L + 2;
    t.enc_b = (size_t)(t.ib > 1 ? t.ib - 1 : 0);
    t.enc_e = (size_t)((t.ie < E + 1 ? t.ie : E + 1) - 1);
    t.enc_e = t.enc_e > t.enc_b ? t.enc_e : t.enc_b;
    t.dec_b = (size_t)((t.ib > E + 1 ? t.ib : E + 1) - 1);
    t.dec_e = (size_t)((t.ie < L + 1 ? t.ie : L + 1) - 1);
    t.dec_e = t.dec_e > t.dec_b ? t.dec_e : t.dec_b;
    return t;
}

/* One block's activations; the cross-attention's only in decoder blocks. */
typedef struct t5_block_acts {
    real *ln1_xhat, *ln1_rstd, *ln1_full; /* [Sl,h] [Sl] [S,h] */
    real *qkv, *probs, *att, *xmid;       /* [S,3hl] [b,al,s,s] [S,hl] [Sl,h] */
    real *lnx_xhat, *lnx_rstd, *lnx_full; /* decoder: the cross-attention's norm */
    real *xq, *xkv, *xprobs, *xatt;       /* [Sd,hl] [Se,2hl] [b,al,sd,se] [Sd,hl] */
    real *xmid2;                          /* [Sl,h] residual after cross-attention */
    real *ln2_xhat, *ln2_rstd, *ln2_full; /* [Sl,h] [Sl] [S,h] */
    real *fc1_pre, *fc1_act;              /* [S,f1] [S,Fl] */
    real *xout;                           /* [Sl,h] */
} t5_block_acts;

typedef struct t5_acts {
    real *mem;
    int32_t *enc_tok, *dec_in, *dec_tgt;  /* [Se] [Sd] [Sd] */
    real *enc_x0, *dec_x0;                /* [Sel,h] [Sdl,h] the embeddings' outputs */
    t5_block_acts *blk;               /* [L]: the encoder's, then the decoder's */
    real *encf_xhat, *encf_rstd, *enc_out; /* the encoder's final norm [Sel,h] [Sel] [Sel,h] */
    real *enc_full;                       /* [Se,h] its output, every row (cross-attention's K|V input) */
    real *lnf_xhat, *lnf_rstd, *lnf_full; /* the decoder's final norm [Sdl,h] [Sdl] [Sd,h] */
    real *logits;                         /* [Sd,Vl] */
    real *bout;                           /* [(Sdl+Sel),h] a decoder stage's output */
} t5_acts;

typedef struct t5_work {
    real *part, *loc, *dfull;            /* [Smax,h] [Slmax,h] [Smax,h] */
    real *dres, *denc_res;               /* [Sdl,h] [Sel,h] residual gradients */
    real *dln, *dtmp;                    /* [Slmax,h] */
    real *datt, *dqkv, *dxq, *dxkv;      /* [Smax,hl] [Smax,3hl] [Sd,hl] [Se,2hl] */
    real *dfc, *dact;                    /* [Smax,f1] [Smax,Fl] */
    real *denc_part;                     /* [Se,h] d enc_full from every cross-attention,
                                            this rank's heads' share (summed over TP once) */
    real *denc;                          /* [Sel,h] d enc_out, summed over TP and over
                                            the later stages' cross-attentions, not
                                            rounded until the encoder's final norm */
    real *denc_tmp;                      /* [Sel,h] */
    real *bgrad;                         /* [(Sdl+Sel),h] a decoder stage's input gradient */
    real *stats, *loss;                  /* [3 Sd] [Sd] cross-entropy */
    real *scratch;                       /* [se*se] attention backward */
    /* recomputation: selective's rebuilt probabilities [b,al,se,se] and
     * [b,al,sd,se]; full's whole block, of the encoder's shape and of the
     * decoder's (empty when no block recomputes so) */
    real *sprobs, *sxprobs;
    t5_block_acts sblk[2];
} t5_work;

typedef struct t5_state {
    t5_acts *slots;
    int n_slots;
    real *wmem;
    t5_work W;
    int32_t *enc_bucket, *dec_bucket; /* [se*se] [sd*sd] bucket of each (query, key), in
                                         the backend's memory */
    int32_t *host_ints;               /* [Se + 2 Sd] the slot's token arrays, made on the host */
    mp_group stack[2];            /* the pipeline stages with encoder / decoder blocks
                                     (owned; size 1: none to sum with) */
} t5_state;

static inline t5_state *t5_of(const mp_gpt *g)
{
    return (t5_state *)g->t5;
}

/* One block's activations: all of them (mode 0), all but the attention
 * probabilities (1: selective), or its output alone (2: full). */
static inline void t5_layout_block(t5_block_acts *B, real *base, size_t *u,
                                   const t5_sizes *z, bool dec, int mode)
{
    size_t h = z->h, s = dec ? z->sd : z->se, S = dec ? z->Sd : z->Se;
    size_t Sl = dec ? z->Sdl : z->Sel;
    memset(B, 0, sizeof *B);
    if (mode < 2) {
        B->ln1_xhat = take(base, u, Sl * h);
        B->ln1_rstd = take(base, u, Sl);
        B->ln1_full = take(base, u, S * h);
        B->qkv = take(base, u, S * 3 * z->hl);
        if (mode == 0)
            B->probs = take(base, u, z->b * z->al * s * s);
        B->att = take(base, u, S * z->hl);
        B->xmid = take(base, u, Sl * h);
        if (dec) {
            B->lnx_xhat = take(base, u, Sl * h);
            B->lnx_rstd = take(base, u, Sl);
            B->lnx_full = take(base, u, S * h);
            B->xq = take(base, u, S * z->hl);
            B->xkv = take(base, u, z->Se * 2 * z->hl);
            if (mode == 0)
                B->xprobs = take(base, u, z->b * z->al * z->sd * z->se);
            B->xatt = take(base, u, S * z->hl);
            B->xmid2 = take(base, u, Sl * h);
        }
        B->ln2_xhat = take(base, u, Sl * h);
        B->ln2_rstd = take(base, u, Sl);
        B->ln2_full = take(base, u, S * h);
        B->fc1_pre = take(base, u, S * z->f1);
        B->fc1_act = take(base, u, S * z->Fl);
    }
    B->xout = take(base, u, Sl * h);
}

mp_status mp_t5_block_forward(mp_gpt *g, t5_block_acts *B, int l, const real *x,
                              const real *enc_full, mp_error *err);
mp_status mp_t5_block_backward(mp_gpt *g, t5_block_acts *B, int l, real *dres,
                               const real *enc_full, mp_error *err);
/* Selective recomputation: block l's attention probabilities (and outputs,
 * the same again) from the Q, K, V it kept. */
void mp_t5_recompute_probs(mp_gpt *g, t5_block_acts *B, int l);

#endif
