/* model_attn.c — the attention variants of a model (sliding window, sinks)
 * and GPT-OSS's other departures from a LLaMA block (linear biases, the
 * clamped SwiGLU): which blocks are windowed, and the consistency rules
 * (docs/cost-model.md, "Sliding-window attention and sinks"). */
#include "core/model.h"
#include "core/tables.h"
#include "core/units.h"

bool mp_model_block_is_windowed(const mp_model *m, int64_t block0)
{
    if (m->attn.window <= 0)
        return false;
    int64_t f = m->attn.window_skip_freq;
    return f <= 0 || (block0 + 1) % f != 0;
}

int64_t mp_model_windowed_blocks(const mp_model *m)
{
    if (m->attn.window <= 0)
        return 0;
    int64_t L = mp_model_blocks(m), f = m->attn.window_skip_freq;
    return f <= 0 ? L : L - L / f; /* blocks f, 2f, ... (1-based) keep full attention */
}

#define FAIL(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

double mp_model_rope_theta(const mp_model *m)
{
    return m->attn.rope_theta > 0.0 ? m->attn.rope_theta : 10000.0;
}
double mp_model_yarn_beta_fast(const mp_model *m)
{
    return m->attn.yarn_beta_fast > 0.0 ? m->attn.yarn_beta_fast : 32.0;
}
double mp_model_yarn_beta_slow(const mp_model *m)
{
    return m->attn.yarn_beta_slow > 0.0 ? m->attn.yarn_beta_slow : 1.0;
}

/* The rotary angles' fields: each changes the math, so none is accepted
 * where it would be ignored, and YaRN's scale and original context, which
 * have no safe default, are required with it. */
static mp_status finish_rope(const mp_model *m, mp_error *err)
{
    const struct mp_attn *a = &m->attn;
    if (a->rope_theta != 0.0 && m->position != MP_POS_ROPE)
        return FAIL("attn.rope_theta", "the rotary base needs position rope (got %s)",
                    mp_position_name(m->position));
    if (a->rope_theta != 0.0 && !(a->rope_theta > 1.0 && a->rope_theta <= 1e12)) {
        /* the whole accepted set, so that 0.5 is not told "at least 0" nor
         * 1e13 "exceed 1"; the number exact ("got 0.99999999", not "got 1") */
        char got[32];
        mp_format_double(a->rope_theta, got, sizeof got);
        return FAIL("attn.rope_theta", "the rotary base must be in (1, 1e+12], or 0 for the "
                                       "default 10000 (got %s)", got);
    }
    if (!a->rope_yarn) {
        const char *given = a->yarn_factor != 0.0          ? "attn.yarn_factor"
                            : a->yarn_original_seq != 0    ? "attn.yarn_original_seq"
                            : a->yarn_beta_fast != 0.0     ? "attn.yarn_beta_fast"
                            : a->yarn_beta_slow != 0.0     ? "attn.yarn_beta_slow"
                            : a->yarn_mscale != 0.0        ? "attn.yarn_mscale"
                            : a->yarn_mscale_all_dim != 0.0 ? "attn.yarn_mscale_all_dim"
                                                           : NULL;
        if (given)
            return FAIL(given, "given without attn.rope_yarn: true");
        return MP_OK;
    }
    char num[32], num2[32]; /* exact: %g said "got 1" for 0.9999999 */
    if (!(a->yarn_factor >= 1.0)) {
        mp_format_double(a->yarn_factor, num, sizeof num);
        return FAIL("attn.yarn_factor", "YaRN needs its context factor (>= 1; GPT-OSS: 32, "
                                        "HF's rope_scaling.factor), got %s", num);
    }
    if (a->yarn_original_seq < 1)
        return FAIL("attn.yarn_original_seq", "YaRN needs the original context (GPT-OSS: 4096, "
                                              "HF's original_max_position_embeddings)");
    if (!(mp_model_yarn_beta_fast(m) > mp_model_yarn_beta_slow(m))) {
        mp_format_double(mp_model_yarn_beta_fast(m), num, sizeof num);
        mp_format_double(mp_model_yarn_beta_slow(m), num2, sizeof num2);
        return FAIL("attn.yarn_beta_fast", "must exceed attn.yarn_beta_slow (%s <= %s): the "
                                           "ramp runs from beta_fast rotations down to beta_slow",
                    num, num2);
    }
    /* DeepSeek's variant rescales its latent attention's softmax, which
     * other attention does not have in HF's code */
    const char *ds = a->yarn_mscale != 0.0          ? "attn.yarn_mscale"
                     : a->yarn_mscale_all_dim != 0.0 ? "attn.yarn_mscale_all_dim"
                                                     : NULL;
    if (ds && !mp_model_is_mla(m))
        return FAIL(ds, "DeepSeek's YaRN variant is modelled with latent attention (mla) only");
    if (a->yarn_mscale != 0.0 && a->yarn_mscale_all_dim == 0.0)
        return FAIL("attn.yarn_mscale", "needs attn.yarn_mscale_all_dim: HF uses mscale only "
                                        "as the ratio of the two");
    return MP_OK;
}

mp_status mp_model_finish_attn(mp_model *m, mp_error *err)
{
    const struct mp_attn *a = &m->attn;
    bool decoder = m->arch == MP_ARCH_GPT || m->arch == MP_ARCH_LLAMA;
    if (a->window_skip_freq && !a->window)
        return FAIL("attn.window_skip_freq", "given without attn.window");
    if (a->window) {
        if (!decoder)
            return FAIL("attn.window", "a sliding window is for causal decoder-only models "
                                       "(gpt, llama), not %s", mp_arch_name(m->arch));
        if (mp_model_is_mla(m))
            return FAIL("attn.window", "not modelled with latent attention (mla)");
        if (a->window_skip_freq == 1)
            return FAIL("attn.window_skip_freq", "1 keeps full attention in every block: "
                                                 "leave attn.window out instead");
    }
    if (a->sinks && !decoder)
        return FAIL("attn.sinks", "attention sinks are for causal decoder-only models (gpt, "
                                  "llama), not %s", mp_arch_name(m->arch));
    if (a->sinks && mp_model_is_mla(m))
        return FAIL("attn.sinks", "not modelled with latent attention (mla)");
    if (a->qk_norm && m->arch != MP_ARCH_LLAMA)
        return FAIL("attn.qk_norm", "QK-norm (Qwen3) is modelled for arch llama only, not %s",
                    mp_arch_name(m->arch));
    if (a->qk_norm && mp_model_is_mla(m))
        return FAIL("attn.qk_norm", "not modelled with latent attention (mla has its own "
                                    "latent norms)");
    if (m->linear_bias && m->arch != MP_ARCH_LLAMA)
        return FAIL("linear_bias", "only for arch llama (%s has its biases already)",
                    mp_arch_name(m->arch));
    if (a->rope_yarn && m->position != MP_POS_ROPE)
        return FAIL("attn.rope_yarn", "YaRN scales rotary embeddings: it needs position rope (got %s)",
                    mp_position_name(m->position));
    mp_status st = finish_rope(m, err);
    if (st != MP_OK)
        return st;
    if (m->glu_limit > 0.0) {
        if (m->activation != MP_ACT_SWIGLU)
            return FAIL("glu_limit", "the clamped SwiGLU needs activation swiglu (got %s)",
                        mp_activation_name(m->activation));
        if (!mp_model_is_moe(m))
            return FAIL("glu_limit", "the clamped SwiGLU is an expert activation: it needs "
                                     "moe.experts > 0 (as Megatron's "
                                     "--activation-func-clamp-value does)");
    }
    return MP_OK;
}
