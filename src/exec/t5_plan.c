/* t5_plan.c — a T5 plan's refusals and --shrink's T5 (t5_plan.h). */
#include "exec/t5_plan.h"

mp_status mp_exec_t5_check(const mp_plan *plan, mp_error *err)
{
    const mp_model *m = &plan->config.model;
    const mp_parallel *p = &plan->config.parallel;
    if (p->cp > 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.cp",
                            "t5: context parallelism is not supported (Megatron-LM has none "
                            "for encoder-decoder models)");
    if (p->vpp > 1 && p->pp > 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel.vpp",
                            "t5: interleaved pipelines are not supported (Megatron-LM refuses "
                            "them for encoder-decoder models)");
    if (m->encoder_layers < 1 || m->decoder_layers < 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.encoder_layers",
                            "t5: this executor needs an encoder and a decoder block at least");
    if (m->norm != MP_NORM_RMSNORM)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.norm",
                            "t5: norm %s is not supported by this executor (rmsnorm, as T5)",
                            mp_norm_name(m->norm));
    if (m->position != MP_POS_RELATIVE)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.position",
                            "t5: position %s is not supported by this executor (relative, as "
                            "T5)", mp_position_name(m->position));
    return MP_OK;
}

void mp_exec_t5_shrink(const mp_model *m, int pp, mp_gpt_dims *out)
{
    int split = (int)mp_t5_split_rank(m->encoder_layers, m->decoder_layers, pp);
    out->enc_layers = split > 0 ? split : 1;
    out->layers = split > 0 ? pp : 2;
    out->dec_seq = out->seq / 2;
}
