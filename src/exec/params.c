/* params.c — the parameter table of the executor's GPT and its initial values. */
#include "exec/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/quant.h"

uint64_t mp_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The item of the MTP modules' tensors: the head's, or with Megatron's
 * standalone MTP stage (d->mtp_split) that stage's, which may hold no item. */
#define MTP_ITEM (-2)

/* Counts every tensor of the whole model (ref) and keeps those on this stage. */
typedef struct builder {
    mp_param_layout *l;
    const mp_gpt_dims *d;
    int ref, item_begin, item_end;
    bool mtp_here; /* the stage holds the MTP modules (item MTP_ITEM) */
    int n_sec, sec[3]; /* the sections of the next MP_SPLIT_QKV tensor added */
    int n_exp;         /* experts stacked in the next tensors added (0: none) */
} builder;

static int add_as(builder *b, const char *name, int rows, int cols, mp_split split,
                  mp_init_class init, bool sp_partial, int item, int ref_index)
{
    mp_param_layout *l = b->l;
    const mp_gpt_dims *d = b->d;
    if (item == MTP_ITEM ? !b->mtp_here : item < b->item_begin || item >= b->item_end)
        return -1;
    mp_param *p = &l->p[l->n];
    memset(p, 0, sizeof *p);
    if (split == MP_SPLIT_QKV) {
        p->n_sec = b->n_sec;
        memcpy(p->sec_cols, b->sec, sizeof p->sec_cols);
    }
    snprintf(p->name, sizeof p->name, "%s", name);
    p->rows = rows;
    p->cols = cols;
    p->lrows = split == MP_SPLIT_ROWS ? rows / d->tp : rows;
    if (b->n_exp) { /* this rank's experts of the stack, each split over TP */
        p->n_exp = b->n_exp;
        p->exp_local = b->n_exp / mp_dims_ep(d);
        p->exp_first = d->ep_rank * p->exp_local;
        p->lrows = p->lrows / b->n_exp * p->exp_local;
    }
    p->lcols = (split == MP_SPLIT_COLS || split == MP_SPLIT_QKV) ? cols / d->tp : cols;
    p->split = split;
    p->init = init;
    p->sp_partial = sp_partial && d->sp && d->tp > 1;
    p->offset = l->total;
    p->item = item;
    p->ref_index = ref_index;
    l->total += (size_t)p->lrows * (size_t)p->lcols;
    return l->n++;
}

static int add(builder *b, const char *name, int rows, int cols, mp_split split,
               mp_init_class init, bool sp_partial, int item)
{
    int ref = b->ref++;
    return add_as(b, name, rows, cols, split, init, sp_partial, item, ref);
}

/* One latent-attention block's tensors (params.h, MP_BLK_MLA_*): the
 * down-projections and their norms replicated over TP (under SP each rank's
 * rows only, so their gradients are summed over TP), the up-projections
 * column-parallel by whole heads, as Megatron-Core splits them. */
static void add_mla_block(builder *b, int *blk, const char *side, int li, int item)
{
    const mp_gpt_dims *d = b->d;
    int h = d->hidden, dqk = d->nope_dim + d->rope_dim;
    char n[64];
    struct {
        int k;
        const char *name;
        int rows, cols;
        mp_split split;
        mp_init_class init;
        bool down;
    } t[] = {
        {MP_BLK_MLA_QDOWN_W, "q_down.weight", h, d->q_lora, MP_SPLIT_NONE, MP_INIT_WEIGHT, true},
        {MP_BLK_MLA_QNORM_W, "q_norm.weight", 1, d->q_lora, MP_SPLIT_NONE, MP_INIT_GAMMA, true},
        {MP_BLK_MLA_QUP_W, d->q_lora ? "q_up.weight" : "q.weight", d->q_lora ? d->q_lora : h,
         d->heads * dqk, MP_SPLIT_COLS, MP_INIT_WEIGHT, false},
        {MP_BLK_MLA_KVDOWN_W, "kv_down.weight", h, d->kv_lora + d->rope_dim, MP_SPLIT_NONE,
         MP_INIT_WEIGHT, true},
        {MP_BLK_MLA_KVNORM_W, "kv_norm.weight", 1, d->kv_lora, MP_SPLIT_NONE, MP_INIT_GAMMA,
         true},
        {MP_BLK_MLA_KVUP_W, "kv_up.weight", d->kv_lora, d->heads * (d->nope_dim + d->v_dim),
         MP_SPLIT_COLS, MP_INIT_WEIGHT, false},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (t[i].cols == 0) /* q_lora 0: no query down-projection nor its norm */
            continue;
        snprintf(n, sizeof n, "%slayers.%d.%s", side, li, t[i].name);
        blk[t[i].k] = add(b, n, t[i].rows, t[i].cols, t[i].split, t[i].init, t[i].down, item);
        if (blk[t[i].k] >= 0)
            b->l->p[blk[t[i].k]].latent_down = t[i].down;
    }
}

/* Block l's tensors: the model's blocks (item l + 1), then the MTP modules' (mtp.layers.k.*,
 * on the head's item). */
static void add_block(builder *bp, mp_param_layout *out, int l)
{
    const mp_gpt_dims *d = bp->d;
    int h = d->hidden, f = d->ffn, g = mp_dims_kv_heads(d);
    bool mtp = l >= d->layers;
    int item = mtp ? MTP_ITEM : l + 1;
    /* QKV: [Q (heads) | K (kv heads) | V (kv heads)]; SwiGLU's fc1: [gate | up] */
    int hd = mp_dims_head_dim(d), qkv = (d->heads + 2 * g) * hd, f1 = d->gated ? 2 * f : f;
    bool bias = !d->no_bias, shift = !d->rmsnorm, mla = mp_dims_is_mla(d);
    char n[48];
    bool dec = d->t5 && l >= d->enc_layers;
    const char *side = mtp ? "mtp." : !d->t5 ? "" : dec ? "decoder." : "encoder.";
    int li = mtp ? l - d->layers : dec ? l - d->enc_layers : l;
    int *blk = out->block + (size_t)l * MP_BLK_COUNT;
    for (int k = 0; k < MP_BLK_COUNT; k++)
        blk[k] = -1;
#define BLK(k, present, suffix, rows, cols, split, init, spp)                                \
    do {                                                                                   \
        if (present) {                                                                     \
            snprintf(n, sizeof n, "%slayers.%d.%s", side, li, suffix);                     \
            blk[k] = add(bp, n, rows, cols, split, init, spp, item);                       \
        }                                                                                  \
    } while (0)
#define SECTIONS(a, b_, c)                                                                 \
    (bp->n_sec = (c) > 0 ? 3 : 2, bp->sec[0] = (a), bp->sec[1] = (b_), bp->sec[2] = (c))
    BLK(MP_BLK_LN1_W, true, "ln1.weight", 1, h, MP_SPLIT_NONE, MP_INIT_GAMMA, true);
    BLK(MP_BLK_LN1_B, shift, "ln1.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, true);
    SECTIONS(d->heads * hd, g * hd, g * hd);
    BLK(MP_BLK_QKV_W, !mla, "qkv.weight", h, qkv, MP_SPLIT_QKV, MP_INIT_WEIGHT, false);
    BLK(MP_BLK_QKV_B, !mla && bias, "qkv.bias", 1, qkv, MP_SPLIT_QKV, MP_INIT_BIAS, false);
    /* QK-norm: one scale of hd for every query head, one for every key
     * head, replicated; each TP rank sums over its own heads only */
    BLK(MP_BLK_QNORM_W, !mla && d->qk_norm, "q_norm.weight", 1, hd, MP_SPLIT_NONE,
        MP_INIT_GAMMA, false);
    BLK(MP_BLK_KNORM_W, !mla && d->qk_norm, "k_norm.weight", 1, hd, MP_SPLIT_NONE,
        MP_INIT_GAMMA, false);
    for (int k = MP_BLK_QNORM_W; k <= MP_BLK_KNORM_W; k++)
        if (blk[k] >= 0 && d->tp > 1)
            out->p[blk[k]].sp_partial = out->p[blk[k]].head_partial = true;
    /* GPT-OSS's sinks: one logit per query head, this rank's heads' */
    BLK(MP_BLK_SINK, !mla && d->sinks, "sinks", 1, d->heads, MP_SPLIT_COLS, MP_INIT_BIAS, false);
    /* a head's sink gradient: minus the sum over its rows of the sink's
     * probability times the row's dP-weighted output, terms that nearly cancel */
    if (blk[MP_BLK_SINK] >= 0)
        out->p[blk[MP_BLK_SINK]].cancelling = true;
    if (mla) /* latent attention: down-projections replicated, up-projections by heads */
        add_mla_block(bp, blk, side, li, item);
    BLK(MP_BLK_PROJ_W, true, "proj.weight", mla ? d->heads * d->v_dim : d->heads * hd, h,
        MP_SPLIT_ROWS,
        MP_INIT_WEIGHT, false);
    BLK(MP_BLK_PROJ_B, bias, "proj.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, true);
    /* T5 decoder: cross-attention, Q from this stream, K|V from the encoder's */
    BLK(MP_BLK_LNX_W, dec, "lnx.weight", 1, h, MP_SPLIT_NONE, MP_INIT_GAMMA, true);
    BLK(MP_BLK_XQ_W, dec, "xq.weight", h, d->heads * hd, MP_SPLIT_COLS, MP_INIT_WEIGHT,
        false);
    SECTIONS(d->heads * hd, d->heads * hd, 0);
    BLK(MP_BLK_XKV_W, dec, "xkv.weight", h, 2 * d->heads * hd, MP_SPLIT_QKV, MP_INIT_WEIGHT,
        false);
    BLK(MP_BLK_XO_W, dec, "xo.weight", h, h, MP_SPLIT_ROWS, MP_INIT_WEIGHT, false);
    BLK(MP_BLK_LN2_W, true, "ln2.weight", 1, h, MP_SPLIT_NONE, MP_INIT_GAMMA, true);
    BLK(MP_BLK_LN2_B, shift, "ln2.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, true);
    SECTIONS(f, f, 0);
    mp_split s1 = d->gated ? MP_SPLIT_QKV : MP_SPLIT_COLS;
    bool moe = mp_dims_block_is_moe(d, l), dense = !moe;
    BLK(MP_BLK_FC1_W, dense, "fc1.weight", h, f1, s1, MP_INIT_WEIGHT, false);
    BLK(MP_BLK_FC1_B, dense && bias, "fc1.bias", 1, f1, s1, MP_INIT_BIAS, false);
    BLK(MP_BLK_FC2_W, dense, "fc2.weight", f, h, MP_SPLIT_ROWS, MP_INIT_WEIGHT, false);
    BLK(MP_BLK_FC2_B, dense && bias, "fc2.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, true);
    /* an MoE block's router, replicated (its experts come after every block) */
    BLK(MP_BLK_ROUTER_W, moe, "router.weight", h, d->experts, MP_SPLIT_NONE,
        MP_INIT_WEIGHT, mp_dims_moe_local(d)); /* local tokens: summed over TP */
    BLK(MP_BLK_ROUTER_B, moe && d->expert_bias, "router.bias", 1, d->experts, MP_SPLIT_NONE,
        MP_INIT_BIAS, mp_dims_moe_local(d));
    int fs = d->shared_ffn;
    SECTIONS(fs, fs, 0);
    BLK(MP_BLK_SHR_FC1_W, moe && fs > 0, "shared.fc1.weight", h, d->gated ? 2 * fs : fs, s1,
        MP_INIT_WEIGHT, false);
    BLK(MP_BLK_SHR_FC2_W, moe && fs > 0, "shared.fc2.weight", fs, h, MP_SPLIT_ROWS,
        MP_INIT_WEIGHT, false);
    if (d->t5 && l == d->enc_layers - 1) /* the encoder's output norm, with its last block */
        out->enc_lnf = add(bp, "encoder.final_ln.weight", 1, h, MP_SPLIT_NONE, MP_INIT_GAMMA,
                           true, l + 1);
#undef SECTIONS
#undef BLK
}

mp_status mp_param_layout_build(const mp_gpt_dims *d, mp_param_layout *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    int h = d->hidden, f = d->ffn, v = d->vocab, t = d->tp, g = mp_dims_kv_heads(d);
    if (d->seq % (2 * mp_dims_cp(d)) && mp_dims_cp(d) > 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.cp",
                            "cp=%d needs seq (%d) divisible into %d chunks", d->cp, d->seq,
                            2 * d->cp);
    if ((!d->head_dim && h % d->heads) || d->heads % t || g % t || d->heads % g || f % t ||
        v % t ||
        (d->sp && mp_dims_positions(d) % t))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.tp",
                            "tp=%d must divide heads (%d), kv_heads (%d), ffn_hidden (%d), vocab "
                            "(%d)%s", t, d->heads, g, f, v,
                            d->sp ? " and, with sp, seq / cp" : "");
    if (d->experts > 0 && (d->experts % mp_dims_ep(d) ||
                           (!mp_dims_moe_local(d) && d->expert_ffn % t) ||
                           d->shared_ffn % t || d->top_k < 1 ||
                           d->top_k > d->experts))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.ep",
                            "ep=%d must divide the experts (%d) and tp=%d the expert and shared "
                            "ffn (%d, %d), with 1 <= top_k (%d) <= experts (%d)", mp_dims_ep(d), d->experts, t,
                            d->expert_ffn, d->shared_ffn, d->top_k, d->experts);
    if (mp_dims_is_mla(d) && (d->rope_dim % 2 || d->rope_dim < 2 || d->nope_dim < 0 ||
                              d->v_dim < 1 || d->q_lora < 0))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.mla.qk_rope_head_dim",
                            "latent attention needs an even rope head dim (%d) and a v head "
                            "dim (%d) of at least 1", d->rope_dim, d->v_dim);
    if (d->rope && !mp_dims_is_mla(d) && mp_dims_head_dim(d) % 2)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.head_dim",
                            "rotary embeddings need an even head dim (%d)", mp_dims_head_dim(d));
    builder b = {.l = out, .d = d};
    mp_dims_items(d, &b.item_begin, &b.item_end);
    b.mtp_here = d->mtp_split ? d->mtp_split == MP_MTP_ON
                              : b.item_begin <= d->layers + 1 && d->layers + 1 < b.item_end;
    if (b.item_begin < 0 || b.item_end > d->layers + 2 || b.item_begin > b.item_end)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "stages",
                            "stage items [%d, %d) outside the model's 0..%d", b.item_begin,
                            b.item_end, d->layers + 1);
    int nb = mp_dims_blocks(d);
    int cap = 3 + MP_BLK_COUNT * nb + 3 + 9 + 4 + (MP_MTP_COUNT + 1) * d->mtp_layers;
    out->p = calloc((size_t)cap, sizeof *out->p);
    out->block = malloc(((size_t)nb * MP_BLK_COUNT + 1) * sizeof *out->block);
    out->mtp = malloc(((size_t)d->mtp_layers * MP_MTP_COUNT + 1) * sizeof *out->mtp);
    if (!out->p || !out->block || !out->mtp) {
        mp_param_layout_free(out);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for parameters");
    }
    out->layers = d->layers;
    out->wte = add(&b, "embedding.wte", v, h, MP_SPLIT_ROWS, MP_INIT_EMBED, false, 0);
    out->wpe = d->rope || d->t5 ? -1 /* rotary or relative positions */
                       : add(&b, "embedding.wpe", d->seq, h, MP_SPLIT_NONE, MP_INIT_EMBED, true, 0);
    out->tte = out->mlm_w = out->mlm_b = out->mlm_ln_w = out->mlm_ln_b = out->lm_bias = -1;
    out->pool_w = out->pool_b = out->nsp_w = out->nsp_b = -1;
    if (d->bert)
        out->tte = add(&b, "embedding.tokentype", 2, h, MP_SPLIT_NONE, MP_INIT_EMBED, true, 0);
    out->enc_rel = out->dec_rel = out->enc_lnf = -1;
    if (d->t5) {
        /* each stack's relative position bias, a column (head) per TP rank,
         * shared by the stack's blocks: every pipeline stage with blocks of
         * a stack holds a copy, their gradients summed over those stages */
        int e0 = b.item_begin > 1 ? b.item_begin : 1;
        int e1 = b.item_end < d->enc_layers + 1 ? b.item_end : d->enc_layers + 1;
        int ref = b.ref++;
        if (e0 < e1)
            out->enc_rel = add_as(&b, "encoder.rel_bias", MP_T5_BUCKETS, d->heads, MP_SPLIT_COLS,
                                  MP_INIT_EMBED, false, e0, ref);
        int d0 = b.item_begin > d->enc_layers + 1 ? b.item_begin : d->enc_layers + 1;
        int d1 = b.item_end < d->layers + 1 ? b.item_end : d->layers + 1;
        ref = b.ref++;
        if (d0 < d1)
            out->dec_rel = add_as(&b, "decoder.rel_bias", MP_T5_BUCKETS, d->heads, MP_SPLIT_COLS,
                                  MP_INIT_EMBED, false, d0, ref);
        /* the first decoder stage embeds the decoder's input: without item 0
         * it holds its own copy of the embedding, as Megatron's does */
        if (out->wte < 0)
            out->wte = add_as(&b, "embedding.wte", v, h, MP_SPLIT_ROWS, MP_INIT_EMBED, false,
                              d->enc_layers + 1, 0);
    }
    bool shift = !d->rmsnorm;
    for (int l = 0; l < d->layers; l++)
        add_block(&b, out, l);
    int head_item = d->layers + 1;
    /* the final norm: with the head, or with a standalone MTP stage on the
     * last block's stage (Megatron's TransformerBlock builds it there when
     * the model has MTP layers) */
    int lnf_item = d->mtp_split ? d->layers : head_item;
    out->lnf_w = add(&b, "final_ln.weight", 1, h, MP_SPLIT_NONE, MP_INIT_GAMMA, true, lnf_item);
    out->lnf_b = shift ? add(&b, "final_ln.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, true,
                             lnf_item)
                       : -1;
    /* (recorded on the head's item all the same: the reference's, which it is) */
    if (out->lnf_w >= 0)
        out->p[out->lnf_w].item = head_item;
    if (out->lnf_b >= 0)
        out->p[out->lnf_b].item = head_item;
    if (d->bert) {
        /* replicated over TP: they run on every rank's full rows (the head
         * gathers them), so their gradients are whole on each rank */
        out->mlm_w = add(&b, "mlm.dense.weight", h, h, MP_SPLIT_NONE, MP_INIT_WEIGHT, false,
                         head_item);
        out->mlm_b = add(&b, "mlm.dense.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, false, head_item);
        out->mlm_ln_w = add(&b, "mlm.ln.weight", 1, h, MP_SPLIT_NONE, MP_INIT_GAMMA, false,
                            head_item);
        out->mlm_ln_b = add(&b, "mlm.ln.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, false,
                            head_item);
        out->lm_bias = add(&b, "lm_head.bias", 1, v, MP_SPLIT_COLS, MP_INIT_BIAS, false,
                           head_item);
        out->pool_w = add(&b, "pooler.weight", h, h, MP_SPLIT_NONE, MP_INIT_WEIGHT, false,
                          head_item);
        out->pool_b = add(&b, "pooler.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, false, head_item);
        out->nsp_w = add(&b, "nsp.weight", h, 2, MP_SPLIT_NONE, MP_INIT_WEIGHT, false, head_item);
        out->nsp_b = add(&b, "nsp.bias", 1, 2, MP_SPLIT_NONE, MP_INIT_BIAS, false, head_item);
    }
    bool has_head = head_item >= b.item_begin && head_item < b.item_end;
    if (!d->tied)
        out->head = add(&b, "lm_head.weight", v, h, MP_SPLIT_ROWS, MP_INIT_WEIGHT, false,
                        head_item);
    else if (!has_head)
        out->head = -1;
    else if (out->wte >= 0)
        out->head = out->wte;
    else /* the last stage's copy of the tied embedding (Megatron keeps one too) */
        out->head = add_as(&b, "lm_head.weight", v, h, MP_SPLIT_ROWS, MP_INIT_EMBED, false,
                           head_item, 0);
    /* The MTP modules (exec/mtp.c), with the head: they embed the shifted
     * tokens, so a last stage without the embedding and without a tied copy
     * holds its own copy (Megatron's MTP stage does), summed over the
     * embedding group as a tied head's is */
    if (d->mtp_layers > 0 && b.mtp_here && out->wte < 0 && (d->mtp_split || !d->tied))
        out->wte = add_as(&b, "embedding.wte", v, h, MP_SPLIT_ROWS, MP_INIT_EMBED, false,
                          MTP_ITEM, 0);
    for (int j = 0; j < d->mtp_layers; j++) {
        char n[48];
        int *m = out->mtp + (size_t)j * MP_MTP_COUNT;
        struct {
            int k;
            const char *name;
            int rows, cols;
            mp_split split;
            mp_init_class init;
            bool sp_partial;
        } t[] = {
            {MP_MTP_ENORM_W, "enorm.weight", 1, h, MP_SPLIT_NONE, MP_INIT_GAMMA, true},
            {MP_MTP_ENORM_B, "enorm.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, true},
            {MP_MTP_HNORM_W, "hnorm.weight", 1, h, MP_SPLIT_NONE, MP_INIT_GAMMA, true},
            {MP_MTP_HNORM_B, "hnorm.bias", 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, true},
            {MP_MTP_EH_W, "eh_proj.weight", 2 * h, h, MP_SPLIT_COLS, MP_INIT_WEIGHT, false},
        };
        for (int k = 0; k < MP_MTP_COUNT; k++)
            m[k] = -1;
        for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
            if (!shift && (t[i].k == MP_MTP_ENORM_B || t[i].k == MP_MTP_HNORM_B))
                continue; /* RMSNorm: no shift */
            snprintf(n, sizeof n, "mtp.layers.%d.%s", j, t[i].name);
            m[t[i].k] = add(&b, n, t[i].rows, t[i].cols, t[i].split, t[i].init, t[i].sp_partial,
                            MTP_ITEM);
        }
        add_block(&b, out, d->layers + j);
        snprintf(n, sizeof n, "mtp.layers.%d.final_ln.weight", j);
        m[MP_MTP_FNORM_W] = add(&b, n, 1, h, MP_SPLIT_NONE, MP_INIT_GAMMA, true, MTP_ITEM);
        snprintf(n, sizeof n, "mtp.layers.%d.final_ln.bias", j);
        if (shift)
            m[MP_MTP_FNORM_B] = add(&b, n, 1, h, MP_SPLIT_NONE, MP_INIT_BIAS, true, MTP_ITEM);
    }
    /* The routed experts of every MoE block, last in the flat buffer: they are
     * reduced over expert-DP, the rest over DP (exec/moe.h) */
    out->expert_lo = out->total;
    for (int l = 0; l < nb && d->experts > 0; l++) {
        if (!mp_dims_block_is_moe(d, l))
            continue;
        int item = l < d->layers ? l + 1 : MTP_ITEM;
        const char *side = l < d->layers ? "" : "mtp.";
        int li = l < d->layers ? l : l - d->layers;
        bool here = item == MTP_ITEM ? b.mtp_here : item >= b.item_begin && item < b.item_end;
        if (out->expert_lo == out->total && here) {
            /* the first expert tensor on this stage starts on a shard
             * boundary of both groups (the gap before it is never used) */
            out->total = mp_dims_flat_alloc(d, out->total, 1);
            out->expert_lo = out->total;
        }
        char n[48];
        int *blk = out->block + (size_t)l * MP_BLK_COUNT, fe = d->expert_ffn;
        bool whole = mp_dims_moe_local(d); /* etp = 1: each expert whole on its rank */
        b.n_exp = d->experts;
        b.n_sec = 2, b.sec[0] = b.sec[1] = fe, b.sec[2] = 0;
        snprintf(n, sizeof n, "%slayers.%d.experts.fc1.weight", side, li);
        blk[MP_BLK_EXP_FC1_W] = add(&b, n, d->experts * h, d->gated ? 2 * fe : fe,
                                    whole ? MP_SPLIT_NONE
                                          : d->gated ? MP_SPLIT_QKV : MP_SPLIT_COLS,
                                    MP_INIT_WEIGHT, false, item);
        snprintf(n, sizeof n, "%slayers.%d.experts.fc2.weight", side, li);
        blk[MP_BLK_EXP_FC2_W] = add(&b, n, d->experts * fe, h,
                                    whole ? MP_SPLIT_NONE : MP_SPLIT_ROWS, MP_INIT_WEIGHT,
                                    false, item);
        if (d->expert_bias) { /* GPT-OSS: each expert's fc1 bias (split as its fc1) and
                              fc2 bias (added once, after the TP sum) */
            snprintf(n, sizeof n, "%slayers.%d.experts.fc1.bias", side, li);
            blk[MP_BLK_EXP_FC1_B] = add(&b, n, d->experts, d->gated ? 2 * fe : fe,
                                        whole ? MP_SPLIT_NONE
                                              : d->gated ? MP_SPLIT_QKV : MP_SPLIT_COLS,
                                        MP_INIT_BIAS, false, item);
            snprintf(n, sizeof n, "%slayers.%d.experts.fc2.bias", side, li);
            blk[MP_BLK_EXP_FC2_B] = add(&b, n, d->experts, h, MP_SPLIT_NONE, MP_INIT_BIAS,
                                        false, item);
        }
        b.n_exp = 0;
    }
    return MP_OK;
}

void mp_param_layout_free(mp_param_layout *l)
{
    free(l->p);
    free(l->block);
    free(l->mtp);
    memset(l, 0, sizeof *l);
}

size_t mp_param_full_index(const mp_param *p, int tp_rank, size_t i)
{
    size_t r = i / (size_t)p->lcols, c = i % (size_t)p->lcols;
    size_t row0 = 0; /* an expert tensor: the full row of this expert's first */
    if (p->n_exp) {
        size_t lper = (size_t)(p->lrows / p->exp_local), per = (size_t)(p->rows / p->n_exp);
        row0 = ((size_t)p->exp_first + r / lper) * per;
        r %= lper;
    }
    switch (p->split) {
    case MP_SPLIT_COLS:
        c += (size_t)tp_rank * (size_t)p->lcols;
        break;
    case MP_SPLIT_QKV: {
        /* local columns: [my share of section 0 | of section 1 | ...] (my Q heads,
         * my K heads, my V heads; or my gate and up columns) */
        size_t full0 = 0, t = (size_t)(p->cols / (p->lcols > 0 ? p->lcols : 1));
        for (int k = 0; k < p->n_sec; k++) {
            size_t full = (size_t)p->sec_cols[k], loc = full / t;
            if (c < loc) {
                c = full0 + (size_t)tp_rank * loc + c;
                break;
            }
            c -= loc;
            full0 += full;
        }
        break;
    }
    case MP_SPLIT_ROWS:
        r += (size_t)tp_rank * (size_t)(p->n_exp ? p->lrows / p->exp_local : p->lrows);
        break;
    case MP_SPLIT_NONE:
        break;
    }
    return (row0 + r) * (size_t)p->cols + c;
}

/* Uniform in [0, 1) from 53 bits of the hash. */
static double unit(uint64_t h)
{
    return (double)(h >> 11) * 0x1.0p-53;
}

double mp_param_init_value(const mp_param *p, int pid, uint64_t seed, size_t full_index,
                           bool exact)
{
    uint64_t h = mp_mix64(mp_mix64(seed ^ ((uint64_t)pid << 40)) ^ full_index);
    double u = unit(h);
    if (exact) {
        /* small integers on the class's grid (quant.h) */
        switch (p->init) {
        case MP_INIT_WEIGHT: return ldexp(floor(u * 49) - 24, -MP_Q_WEIGHT);
        case MP_INIT_EMBED: return ldexp(floor(u * 33) - 16, -MP_Q_EMBED);
        case MP_INIT_GAMMA: return ldexp(floor(u * 17) + 56, -MP_Q_GAMMA);
        case MP_INIT_BIAS: return ldexp(floor(u * 17) - 8, -MP_Q_BIAS);
        }
    }
    switch (p->init) {
    case MP_INIT_WEIGHT: return (2 * u - 1) * 0.0346; /* std 0.02, as GPT-2 */
    case MP_INIT_EMBED: return (2 * u - 1) * 0.0346;
    case MP_INIT_GAMMA: return 1.0 + (2 * u - 1) * 0.1;
    case MP_INIT_BIAS: return (2 * u - 1) * 0.02;
    }
    return 0;
}

int mp_init_grid(mp_init_class c)
{
    switch (c) {
    case MP_INIT_WEIGHT: return MP_Q_WEIGHT;
    case MP_INIT_EMBED: return MP_Q_EMBED;
    case MP_INIT_GAMMA: return MP_Q_GAMMA;
    case MP_INIT_BIAS: return MP_Q_BIAS;
    }
    return MP_Q_WEIGHT;
}
