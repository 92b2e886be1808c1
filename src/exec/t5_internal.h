/* t5_internal.h — what t5.c and t5_block.c share: sizes, the saved
 * activations of one micro-batch, the workspace. Read once per real type
 * after model_internal.h (no include guard): every name goes through RN(). */

typedef struct RN(t5_sizes) {
    size_t b, se, sd;     /* micro-batch, encoder and decoder positions */
    size_t Se, Sd;        /* token rows of the encoder and of the decoder */
    size_t Sel, Sdl;      /* this rank's rows of them (SP: a piece of the sequence) */
    size_t Smax, Slmax;   /* the larger of each pair (the encoder's: sd <= se) */
    size_t h, hl, al, hd, Fl, f1, Vl, E, L;
} RN(t5_sizes);

static inline RN(t5_sizes) RN(t5_sizes_of)(const mp_gpt_dims *d)
{
    RN(t5_sizes) z;
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
    z.f1 = d->swiglu ? 2 * z.Fl : z.Fl;
    z.Vl = (size_t)d->vocab / t;
    z.E = (size_t)d->enc_layers;
    z.L = (size_t)d->layers;
    return z;
}

/* One block's activations; the cross-attention's only in decoder blocks. */
typedef struct RN(t5_block_acts) {
    real *ln1_xhat, *ln1_rstd, *ln1_full; /* [Sl,h] [Sl] [S,h] */
    real *qkv, *probs, *att, *xmid;       /* [S,3hl] [b,al,s,s] [S,hl] [Sl,h] */
    real *lnx_xhat, *lnx_rstd, *lnx_full; /* decoder: the cross-attention's norm */
    real *xq, *xkv, *xprobs, *xatt;       /* [Sd,hl] [Se,2hl] [b,al,sd,se] [Sd,hl] */
    real *xmid2;                          /* [Sl,h] residual after cross-attention */
    real *ln2_xhat, *ln2_rstd, *ln2_full; /* [Sl,h] [Sl] [S,h] */
    real *fc1_pre, *fc1_act;              /* [S,f1] [S,Fl] */
    real *xout;                           /* [Sl,h] */
} RN(t5_block_acts);

typedef struct RN(t5_acts) {
    real *mem;
    int32_t *enc_tok, *dec_in, *dec_tgt;  /* [Se] [Sd] [Sd] */
    real *enc_x0, *dec_x0;                /* [Sel,h] [Sdl,h] the embeddings' outputs */
    RN(t5_block_acts) *blk;               /* [L]: the encoder's, then the decoder's */
    real *encf_xhat, *encf_rstd, *enc_out; /* the encoder's final norm [Sel,h] [Sel] [Sel,h] */
    real *enc_full;                       /* [Se,h] its output, every row (cross-attention's K|V input) */
    real *lnf_xhat, *lnf_rstd, *lnf_full; /* the decoder's final norm [Sdl,h] [Sdl] [Sd,h] */
    real *logits;                         /* [Sd,Vl] */
} RN(t5_acts);

typedef struct RN(t5_work) {
    real *part, *loc, *dfull;            /* [Smax,h] [Slmax,h] [Smax,h] */
    real *dres, *denc_res;               /* [Sdl,h] [Sel,h] residual gradients */
    real *dln, *dtmp;                    /* [Slmax,h] */
    real *datt, *dqkv, *dxq, *dxkv;      /* [Smax,hl] [Smax,3hl] [Sd,hl] [Se,2hl] */
    real *dfc, *dact;                    /* [Smax,f1] [Smax,Fl] */
    real *denc_part;                     /* [Se,h] d enc_full from every cross-attention,
                                            this rank's heads' share (summed over TP once) */
    real *denc;                          /* [Sel,h] */
    real *stats, *loss;                  /* [3 Sd] [Sd] cross-entropy */
    real *scratch;                       /* [se*se] attention backward */
} RN(t5_work);

typedef struct RN(t5_state) {
    RN(t5_acts) *slots;
    int n_slots;
    real *wmem;
    RN(t5_work) W;
    int *enc_bucket, *dec_bucket; /* [se*se] [sd*sd] bucket of each (query, key) */
} RN(t5_state);

static inline RN(t5_state) *RN(t5_of)(const RN(mp_gpt) *g)
{
    return (RN(t5_state) *)g->t5;
}

mp_status RN(mp_t5_block_forward)(RN(mp_gpt) *g, RN(t5_block_acts) *B, int l, const real *x,
                                  const real *enc_full, mp_error *err);
mp_status RN(mp_t5_block_backward)(RN(mp_gpt) *g, RN(t5_block_acts) *B, int l, real *dres,
                                   const real *enc_full, mp_error *err);
