/* rope.h — the rotary embedding's angles: dimension pair k of a head of hd
 * columns turns by pos * inv_freq(k), and the turned values are scaled by
 * the attention factor. Plain (LLaMA's): inv_freq = theta^(-2k/hd), factor 1.
 * YaRN (GPT-OSS; HF transformers' _compute_yarn_parameters): the
 * frequencies below a ramp are divided by `factor` (interpolated), those
 * above kept (extrapolated), the ramp between them mixing the two linearly;
 * cos and sin are scaled by 0.1 ln factor + 1 (DeepSeek-V3: by a ratio of
 * two such, the softmax by another squared). One plain-C function of the
 * spec and k, so that the partitioned run, the reference (fp32 and fp64) and
 * every backend compute each angle from the same double. */
#ifndef MP_EXEC_ROPE_H
#define MP_EXEC_ROPE_H

#include <stdbool.h>

typedef struct mp_rope_spec {
    double theta; /* the base (0: 10000) */
    bool yarn;
    double factor;         /* YaRN's context factor (s) */
    int original_seq;      /* the context the model was trained on before */
    double beta_fast;      /* rotations over original_seq where the ramp starts (0: 32) */
    double beta_slow;      /* ... and ends (0: 1) */
    bool unrounded;        /* the ramp's bounds as computed (HF's truncate false) */
    /* DeepSeek's variant (0: absent; model.h's attn.yarn_mscale*): cos and
     * sin x g(mscale)/g(mscale_all_dim) when both are given, and its latent
     * attention's softmax scale x g(mscale_all_dim)^2, g(m) = 0.1 m ln factor + 1 */
    double mscale, mscale_all_dim;
} mp_rope_spec;

/* The inverse frequency of pair k of a head of hd columns (NULL spec: plain
 * angles, base 10000). */
double mp_rope_inv_freq(const mp_rope_spec *r, int k, int hd);
/* The factor cos and sin are scaled by (1 without YaRN). */
double mp_rope_attention_factor(const mp_rope_spec *r);
/* The factor the softmax scale 1/sqrt(d) is multiplied by (DeepSeek's
 * g(mscale_all_dim)^2; 1 without it). */
double mp_rope_softmax_scale(const mp_rope_spec *r);
/* YaRN's ramp over the pairs of a head of hd columns: the extrapolation
 * weight of pair k is 1 - clamp((k - lo) / (hi - lo), 0, 1). */
void mp_rope_yarn_range(const mp_rope_spec *r, int hd, double *lo, double *hi);

#endif
