/* config_precision.c — whether the hardware runs the training precision
 * (docs/cost-model.md §13): a peak rate for it in the profile, and for FP8's
 * mxfp8 recipe the block-scaled tensor cores of Blackwell. */
#include "core/config.h"

#define FAIL(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

mp_status mp_config_check_precision(const mp_config *c, mp_error *err)
{
    const mp_training *t = &c->training;
    const mp_hw *hw = &c->hw;
    if ((unsigned)t->precision >= MP_DTYPE_COUNT || !(hw->peak_flops[t->precision] > 0.0))
        return FAIL("precision", "hardware %s has no %s rate (peak_flops.%s is 0 in its "
                                 "profile)%s",
                    hw->name, mp_dtype_name(t->precision), mp_dtype_name(t->precision),
                    t->precision == MP_DTYPE_FP8 ? ": FP8 training needs Hopper or newer; use "
                                                   "precision bf16"
                                                 : "");
    if (t->grad_reduce_bf16 && t->precision != MP_DTYPE_BF16 && t->precision != MP_DTYPE_FP8)
        return FAIL("grad_reduce_bf16", "bf16 gradients need precision bf16 or fp8, not %s",
                    mp_dtype_name(t->precision));
    if (t->fp8_param_gather && t->precision != MP_DTYPE_FP8)
        return FAIL("fp8_param_gather", "FP8 parameters need precision fp8, not %s",
                    mp_dtype_name(t->precision));
    if (t->optimizer_moments != MP_DTYPE_FP32) {
        /* Megatron-Core's precision-aware optimizer (arguments.py
         * --exp-avg-dtype / --exp-avg-sq-dtype; fp8 moments, which it also
         * takes, need scaling that megaplan does not model) */
        if (t->optimizer_moments != MP_DTYPE_BF16 && t->optimizer_moments != MP_DTYPE_FP16)
            return FAIL("optimizer_moments", "Adam's moments are kept in fp32, bf16 or fp16, "
                                             "not %s",
                        mp_dtype_name(t->optimizer_moments));
        if (t->precision == MP_DTYPE_FP32)
            return FAIL("optimizer_moments", "16-bit moments beside fp32 master weights need "
                                             "16-bit training (precision bf16, fp16 or fp8), "
                                             "not fp32");
        if (t->low_precision_optimizer)
            return FAIL("optimizer_moments", "low_precision_optimizer already keeps the moments "
                                             "in the training type, without fp32 master "
                                             "weights: set one of the two");
    }
    if (t->native_cross_entropy && t->te_cross_entropy)
        return FAIL("native_cross_entropy", "the loss is one fused cross entropy: Megatron-Core's "
                                            "native one or Transformer Engine's "
                                            "(te_cross_entropy), not both");
    if (t->fp8_act_cache != MP_F8AC_OFF) {
        const char *name = mp_fp8_act_cache_name(t->fp8_act_cache);
        if ((unsigned)t->fp8_act_cache >= MP_F8AC_COUNT)
            return FAIL("fp8_act_cache", "expected off, swiglu_input or deepseek");
        /* Megatron-Core raises the same (transformer_config.py: "Storing
         * activation input in FP8 is supported only for SwiGLU.") */
        if (c->model.activation != MP_ACT_SWIGLU)
            return FAIL("fp8_act_cache", "%s stores SwiGLU inputs in FP8, and model %s's "
                                         "activation is not SwiGLU",
                        name, c->model.name);
        if (t->fp8_act_cache == MP_F8AC_DEEPSEEK) {
            if (t->precision != MP_DTYPE_FP8 || t->fp8_recipe != MP_FP8_BLOCKWISE)
                return FAIL("fp8_act_cache", "deepseek caches FP8 with DeepSeek-V3's 1x128 "
                                             "tiles: it needs precision fp8 with fp8_recipe "
                                             "blockwise");
            if (!mp_model_is_moe(&c->model))
                return FAIL("fp8_act_cache", "deepseek caches the MoE layers' SwiGLU inputs, "
                                             "and model %s has no MoE layers (swiglu_input "
                                             "stores every SwiGLU's)",
                            c->model.name);
        }
    }
    if (t->precision != MP_DTYPE_FP8)
        return MP_OK;
    if (!(hw->peak_flops[MP_DTYPE_BF16] > 0.0))
        return FAIL("precision", "fp8 training keeps bf16 for all but its GEMMs, and hardware "
                                 "%s has no bf16 rate", hw->name);
    if (t->fp8_recipe == MP_FP8_MXFP8 && !hw->mxfp8)
        return FAIL("fp8_recipe", "mxfp8 needs tensor cores with block-scaled FP8 (Blackwell); "
                                  "hardware %s has none (mxfp8: false): use delayed, "
                                  "tensorwise or blockwise",
                    hw->name);
    return MP_OK;
}
