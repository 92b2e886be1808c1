/* mtp.c — the multi-token-prediction modules' size and FLOPs
 * (docs/cost-model.md, "Multi-token prediction"). DeepSeek-V3 §2.2 and
 * Megatron-Core's MultiTokenPredictionLayer: module k takes the previous
 * depth's hidden state and the embedding of the tokens k ahead (the shared
 * embedding: a lookup, no FLOPs), normalises each (two RMSNorms), projects
 * their concatenation 2h -> h, runs one transformer block of the model's last
 * block's kind (Megatron builds it with the decoder's layer spec), a final
 * norm, and the shared output head. */
#include "planner/cost_internal.h"

double mp_mtp_module_params(const mp_model *m)
{
    double h = (double)m->hidden;
    mp_block_shape last;
    mp_block_shape_of(m, m->seq, mp_model_blocks(m), &last);
    return 3.0 * h + 2.0 * h * h + mp_block_params(m, last.kind);
}

double mp_mtp_fwd_flops(const mp_model *m, int64_t seq)
{
    if (!mp_model_has_mtp(m))
        return 0.0;
    mp_block_shape last;
    mp_block_shape_of(m, seq, mp_model_blocks(m), &last);
    double h = (double)m->hidden;
    double one = 2.0 * last.s * (2.0 * h) * h + mp_block_fwd_flops(m, &last) +
                 mp_head_fwd_flops(m, seq);
    return (double)m->mtp_layers * one;
}
