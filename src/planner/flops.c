/* flops.c — parameter counts and model FLOPs (docs/cost-model.md §1-2).
 *
 * GPT: 12Lh^2(1 + 13/(12h) + (V+s)/(12Lh)) parameters and 72·B·s·L·h^2(1 + s/(6h)
 * + V/(12hL)) FLOPs per iteration (Narayanan et al. 2021). The general form
 * counts each matrix: grouped-query attention (kv_heads), SwiGLU (three
 * matrices), biases only where the family has them, cross attention (T5). */
#include <math.h>

#include "planner/cost.h"
#include "planner/cost_internal.h"

double mp_dtype_bytes(mp_dtype d)
{
    switch (d) {
    case MP_DTYPE_FP32:
    case MP_DTYPE_TF32: return 4.0;
    default: return 2.0;
    }
}

double mp_padded_vocab(int64_t vocab, int64_t tp)
{
    double mult = 128.0 * (double)(tp > 0 ? tp : 1);
    return ceil((double)vocab / mult) * mult;
}

static bool has_biases(const mp_model *m)
{
    return m->arch == MP_ARCH_GPT || m->arch == MP_ARCH_BERT || m->linear_bias;
}

static double norm_params(const mp_model *m)
{
    return m->norm == MP_NORM_LAYERNORM ? 2.0 * (double)m->hidden : (double)m->hidden;
}

static double head_dim(const mp_model *m)
{
    if (m->head_dim > 0)
        return (double)m->head_dim;
    return m->heads > 0 ? (double)m->hidden / (double)m->heads : 0.0;
}

static double kv_heads(const mp_model *m)
{
    return m->kv_heads > 0 ? (double)m->kv_heads : (double)m->heads;
}

static double ffn(const mp_model *m)
{
    return m->ffn_hidden > 0 ? (double)m->ffn_hidden : 4.0 * (double)m->hidden;
}

/* Matrices of one attention block (Q, K, V, output), without biases. */
static double attn_matrix_params(const mp_model *m)
{
    if (mp_model_is_mla(m))
        return mp_mla_attn_params(m);
    double h = (double)m->hidden, qd = (double)m->heads * head_dim(m), kvd = kv_heads(m) * head_dim(m);
    return h * qd + 2.0 * h * kvd + qd * h;
}

static double attn_bias_params(const mp_model *m)
{
    double qd = (double)m->heads * head_dim(m), kvd = kv_heads(m) * head_dim(m);
    return has_biases(m) ? qd + 2.0 * kvd + (double)m->hidden : 0.0;
}

static double mlp_matrices(const mp_model *m)
{
    return mp_activation_is_gated(m->activation) ? 3.0 : 2.0;
}

static double mlp_params(const mp_model *m)
{
    double h = (double)m->hidden, f = ffn(m);
    double p = mlp_matrices(m) * h * f;
    if (has_biases(m))
        p += (mlp_matrices(m) - 1.0) * f + h;
    return p;
}

double mp_block_params(const mp_model *m, mp_block_kind kind)
{
    /* attention sinks: one learned logit per head; QK-norm (Qwen3): a
     * scale of head_dim for the queries and one for the keys */
    double attn = attn_matrix_params(m) + attn_bias_params(m) +
                  (m->attn.sinks ? (double)m->heads : 0.0) +
                  (m->attn.qk_norm ? 2.0 * head_dim(m) : 0.0);
    double mlp = kind == MP_BLOCK_MOE ? mp_moe_mlp_params(m, false) : mlp_params(m);
    double p = attn + mlp + 2.0 * norm_params(m);
    if (kind == MP_BLOCK_T5_DEC)
        p += attn + norm_params(m); /* cross attention and its norm */
    return p;
}

double mp_embedding_params(const mp_model *m, int64_t seq)
{
    double h = (double)m->hidden;
    double p = (double)m->vocab * h;
    if (m->position == MP_POS_LEARNED)
        p += (double)(seq > 0 ? seq : m->seq) * h;
    if (m->arch == MP_ARCH_BERT)
        p += 2.0 * h + norm_params(m); /* token types, embedding LayerNorm */
    if (m->position == MP_POS_RELATIVE)
        p += 32.0 * (double)m->heads * (m->arch == MP_ARCH_T5 ? 2.0 : 1.0); /* T5 buckets */
    return p;
}

double mp_head_params(const mp_model *m, bool count_tied_copy)
{
    double h = (double)m->hidden;
    double p = 0.0;
    if (m->arch == MP_ARCH_BERT) {
        /* pooler, MLM transform (dense + LayerNorm), output bias (Devlin 2019) */
        p += (h * h + h) + (h * h + h) + norm_params(m) + (double)m->vocab;
    } else {
        p += norm_params(m) * (m->arch == MP_ARCH_T5 ? 2.0 : 1.0); /* final norm(s) */
    }
    if (!m->tied_embeddings || count_tied_copy)
        p += (double)m->vocab * h;
    return p;
}

void mp_block_shape_of(const mp_model *m, int64_t seq, int64_t block, mp_block_shape *out)
{
    out->kind = MP_BLOCK_SELF;
    out->s = (double)(seq > 0 ? seq : m->seq);
    out->s_cross = 0.0;
    out->causal = m->arch == MP_ARCH_GPT || m->arch == MP_ARCH_LLAMA;
    out->attn_dropout = mp_model_attention_dropout(m) > 0.0;
    out->hidden_dropout = mp_model_hidden_dropout(m) > 0.0;
    out->window = mp_model_block_is_windowed(m, block - 1) ? (double)m->attn.window : 0.0;
    if (mp_model_block_is_moe(m, block - 1))
        out->kind = MP_BLOCK_MOE;
    if (m->arch == MP_ARCH_T5) {
        double se = (double)(m->encoder_seq > 0 ? m->encoder_seq : out->s);
        double sd = (double)(m->decoder_seq > 0 ? m->decoder_seq : out->s);
        if (seq > 0 && m->encoder_seq > 0 && seq != m->encoder_seq) {
            /* --seq overrides the encoder length; the decoder keeps its ratio */
            sd = sd * (double)seq / (double)m->encoder_seq;
            se = (double)seq;
        }
        if (block <= m->encoder_layers) {
            out->kind = MP_BLOCK_T5_ENC;
            out->s = se;
            out->causal = false;
        } else {
            out->kind = MP_BLOCK_T5_DEC;
            out->s = sd;
            out->s_cross = se;
            out->causal = true;
        }
    }
}

double mp_model_params(const mp_model *m)
{
    double p = mp_embedding_params(m, m->seq) + mp_head_params(m, false);
    if (m->arch == MP_ARCH_T5) {
        int64_t enc = m->encoder_layers, dec = mp_model_blocks(m) - m->encoder_layers;
        return p + (double)enc * mp_block_params(m, MP_BLOCK_T5_ENC) +
               (double)dec * mp_block_params(m, MP_BLOCK_T5_DEC);
    }
    int64_t moe = mp_model_moe_blocks(m);
    return p + (double)(mp_model_blocks(m) - moe) * mp_block_params(m, MP_BLOCK_SELF) +
           (double)moe * mp_block_params(m, MP_BLOCK_MOE);
}

double mp_model_active_params(const mp_model *m)
{
    double all = mp_model_params(m);
    if (!mp_model_is_moe(m))
        return all;
    return all - (double)mp_model_moe_blocks(m) *
                     (mp_moe_mlp_params(m, false) - mp_moe_mlp_params(m, true));
}

double mp_block_attn_core_fwd_flops(const mp_model *m, const mp_block_shape *bs)
{
    /* QK^T and AV: 2 * s_q * s_kv * head_dim FLOPs each, per head. A full
     * block counts every key for every query (the causal half is not taken
     * off, Narayanan 2021's convention); a windowed one counts its band the
     * same way: window keys for every query (docs/cost-model.md, §2) */
    double qd = (double)m->heads * head_dim(m);
    double keys = bs->window > 0.0 && bs->window < bs->s ? bs->window : bs->s;
    double f = 4.0 * bs->s * keys * qd;
    if (mp_model_is_mla(m)) /* AV at the value width v_head_dim */
        f = 2.0 * bs->s * bs->s * (double)m->heads * (head_dim(m) + (double)m->mla.v_head_dim);
    if (bs->s_cross > 0)
        f += 4.0 * bs->s * bs->s_cross * qd;
    return f;
}

double mp_block_fwd_flops(const mp_model *m, const mp_block_shape *bs)
{
    double h = (double)m->hidden;
    double mlp = bs->kind == MP_BLOCK_MOE ? mp_moe_mlp_params(m, true) : mlp_matrices(m) * h * ffn(m);
    double f = 2.0 * bs->s * (attn_matrix_params(m) + mlp);
    if (bs->s_cross > 0) {
        double qd = (double)m->heads * head_dim(m), kvd = kv_heads(m) * head_dim(m);
        f += 2.0 * bs->s * (2.0 * h * qd) + 2.0 * bs->s_cross * (2.0 * h * kvd);
    }
    return f + mp_block_attn_core_fwd_flops(m, bs);
}

double mp_head_fwd_flops(const mp_model *m, int64_t seq)
{
    mp_block_shape last;
    mp_block_shape_of(m, seq, mp_model_blocks(m), &last);
    double h = (double)m->hidden;
    double f = 2.0 * last.s * h * (double)m->vocab;
    if (m->arch == MP_ARCH_BERT)
        f += 2.0 * last.s * h * h; /* MLM transform */
    return f;
}

double mp_model_flops(const mp_model *m, int64_t seq, int64_t global_batch)
{
    int64_t nb = mp_model_blocks(m);
    double fwd = mp_head_fwd_flops(m, seq);
    if (m->arch == MP_ARCH_T5) {
        for (int64_t i = 1; i <= nb; i++) {
            mp_block_shape bs;
            mp_block_shape_of(m, seq, i, &bs);
            fwd += mp_block_fwd_flops(m, &bs);
        }
    } else {
        /* up to four kinds of block (dense or MoE, full or windowed
         * attention): each costed once, as the estimate asks for every
         * candidate of a search */
        double kind_fwd[4] = {0, 0, 0, 0}, count[4] = {0, 0, 0, 0};
        for (int64_t i = 0; i < nb; i++) {
            int k = (mp_model_block_is_moe(m, i) ? 2 : 0) + (mp_model_block_is_windowed(m, i) ? 1 : 0);
            if (!count[k]++) {
                mp_block_shape bs;
                mp_block_shape_of(m, seq, i + 1, &bs);
                kind_fwd[k] = mp_block_fwd_flops(m, &bs);
            }
        }
        static const int order[4] = {2, 3, 0, 1}; /* MoE blocks first, as before windows */
        for (int j = 0; j < 4; j++)
            if (count[order[j]] > 0)
                fwd += count[order[j]] * kind_fwd[order[j]];
    }
    fwd += mp_mtp_fwd_flops(m, seq); /* Megatron counts them too (training.py) */
    /* backward = 2 x forward (input and weight gradients) */
    return 3.0 * fwd * (double)global_batch;
}
