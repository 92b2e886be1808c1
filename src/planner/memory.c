/* memory.c — bytes per parameter and activation bytes per block
 * (Korthikanti et al. 2022, §4; docs/cost-model.md §3).
 *
 * Korthikanti counts, per layer and micro-batch, in 16-bit bytes:
 *   LayerNorm inputs 4sbh, QKV input 2sbh, Q and K 4sbh, V 2sbh, softmax
 *   output 2as²b, dropout mask as²b and output 2as²b, projection input 2sbh,
 *   its dropout mask sbh, FC1 input 2sbh, GeLU input 8sbh, FC2 input 8sbh,
 *   MLP dropout mask sbh  =  sbh(34 + 5as/h).
 * Tensor parallelism splits the parts inside the column/row-parallel region
 * (24sbh + 5as²b); sequence parallelism splits the remaining 10sbh too.
 * The general form below counts the same tensors for grouped-query
 * attention, SwiGLU, families without dropout, flash attention (no s² terms,
 * a fp32 log-sum-exp per row instead) and T5 cross attention. For a GPT
 * block it is exactly Korthikanti's six formulas. */
#include "planner/cost.h"
#include "planner/cost_internal.h"

void mp_static_bytes(const mp_config *c, double *weights, double *grads, double *optimizer)
{
    const mp_parallel *p = &c->parallel;
    double all = (double)(p->dp > 0 ? p->dp : 1) * (double)(p->cp > 0 ? p->cp : 1);
    /* ZeRO-1 (Megatron) shards over every DP rank; ZeRO-2/3 over their shard
     * group, which hybrid sharding keeps inside a scale-up domain */
    double shard = p->zero >= 2 ? (double)mp_zero_shard_ranks(c) : all;
    bool fp32 = c->training.precision == MP_DTYPE_FP32;
    /* 16-bit training: 16-bit weights, fp32 main grads (bf16 with
     * grad_reduce_bf16), fp32 master weights and Adam m and v; fp32
     * training: fp32 weights and grads, Adam m and v */
    double w = fp32 ? 4.0 : 2.0, g = c->training.grad_reduce_bf16 ? 2.0 : 4.0, o = fp32 ? 8.0 : 12.0;
    int64_t stage = p->zero > 0 ? p->zero : p->dist_opt ? 1 : 0;
    if (stage >= 1)
        o /= shard;
    if (stage >= 2)
        /* DeepSpeed's ZeRO-2/3 and FSDP keep the gradients in the 16-bit
         * training type (Rajbhandari et al. 2020, §3: 2 + 2 + 12 bytes),
         * where Megatron keeps fp32 main gradients */
        g = (fp32 ? 4.0 : 2.0) / shard;
    if (stage >= 3)
        w /= shard;
    *weights = w;
    *grads = g;
    *optimizer = o;
}

double mp_static_bytes_per_param(const mp_config *c)
{
    double w, g, o;
    mp_static_bytes(c, &w, &g, &o);
    return w + g + o;
}

double mp_block_act_bytes(const mp_model *m, const mp_block_shape *bs, double b, double tp,
                          double cp, bool sp, mp_recompute r, bool flash)
{
    double h = (double)m->hidden;
    double hd = m->head_dim > 0 ? (double)m->head_dim : h / (double)m->heads;
    double qd = (double)m->heads * hd;
    double kvd = (double)(m->kv_heads > 0 ? m->kv_heads : m->heads) * hd;
    double f = m->ffn_hidden > 0 ? (double)m->ffn_hidden : 4.0 * h;
    double s = bs->s / cp;      /* this rank's query tokens */
    double sb = s * b;
    bool cross = bs->s_cross > 0;
    double n_norm = cross ? 3.0 : 2.0;

    if (r == MP_RECOMPUTE_FULL)  /* only the block's input is kept (sharded with SP) */
        return 2.0 * sb * h / (sp ? tp : 1.0);

    /* outside the tensor-parallel region: replicated on every TP rank unless SP */
    double outside = 2.0 * sb * h * n_norm        /* norm inputs */
                     + 2.0 * sb * h               /* QKV input (norm output) */
                     + 2.0 * sb * h;              /* FC1 input (norm output) */
    if (cross)
        outside += 2.0 * sb * h;                  /* cross-attention Q input */
    if (bs->dropout)
        outside += sb * h * n_norm;               /* residual dropout masks (1 byte) */

    /* inside the region: split over t */
    double inside = 2.0 * sb * qd + 4.0 * sb * kvd  /* Q, K, V */
                    + 2.0 * sb * qd;                /* projection input */
    inside += (m->activation == MP_ACT_SWIGLU ? 4.0 : 2.0) * sb * f; /* activation input(s) */
    inside += 2.0 * sb * f;                         /* FC2 input */
    if (cross)
        inside += 2.0 * sb * qd + 4.0 * bs->s_cross / cp * b * kvd + 2.0 * sb * qd;

    /* attention core: scores (softmax output, dropout mask and output) */
    double core = 0.0;
    double heads = (double)m->heads;
    double s_kv = bs->s; /* each query attends to the whole sequence */
    if (flash) {
        core = 4.0 * heads * sb; /* fp32 log-sum-exp per query row */
        if (cross)
            core *= 2.0;
    } else {
        double per_score = bs->dropout ? 5.0 : 2.0;
        core = per_score * heads * sb * s_kv;
        if (cross)
            core += per_score * heads * sb * bs->s_cross;
    }
    if (r == MP_RECOMPUTE_SELECTIVE)
        core = 0.0;

    return outside / (sp ? tp : 1.0) + (inside + core) / tp;
}

double mp_activation_bytes_per_layer(const mp_model *m, int64_t seq, int64_t micro_batch,
                                     int64_t tp, int64_t cp, bool sp, mp_recompute r)
{
    mp_block_shape bs;
    mp_block_shape_of(m, seq, 1, &bs);
    if (m->arch == MP_ARCH_T5 && m->decoder_layers > 0)
        mp_block_shape_of(m, seq, m->encoder_layers + 1, &bs); /* the larger decoder block */
    return mp_block_act_bytes(m, &bs, (double)micro_batch, (double)(tp > 0 ? tp : 1),
                              (double)(cp > 0 ? cp : 1), sp && tp > 1, r, false);
}

double mp_pipeline_output_bytes(const mp_model *m, int64_t seq, int64_t micro_batch, int64_t pp,
                                int64_t tp, bool sp)
{
    /* each in-flight micro-batch's stage output: b x s x h 16-bit values,
     * sequence-sharded over t with SP */
    double s = (double)(seq > 0 ? seq : m->seq);
    double out = 2.0 * s * (double)micro_batch * (double)m->hidden;
    if (sp && tp > 1)
        out /= (double)tp;
    return (double)(pp > 0 ? pp : 1) * out;
}
