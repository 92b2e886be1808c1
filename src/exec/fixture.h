/* fixture.h — one training step computed by an independent implementation
 * (tools/make_fixtures.py, PyTorch), loaded so that `exec --test-fixture`
 * can run the same step with the same weights and data under any partition
 * and compare every tensor with it (docs/exec.md, "PyTorch fixtures").
 * The file format is described in tools/make_fixtures.py. */
#ifndef MP_EXEC_FIXTURE_H
#define MP_EXEC_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "exec/params.h"

/* fp32 against PyTorch fp32: the two differ only in summation order and in
 * the libm of exp/tanh/rsqrt, about 1e-6 of each tensor's scale on these
 * models (measured, docs/exec.md); a wrong formula moves whole tensors by
 * 1e-3 or more (GeLU's constant: 1e-2). */
#define MP_FIXTURE_TOL 1e-4

typedef struct mp_fixture_tensor {
    char name[80];
    bool is_int;   /* int32, else float32 */
    int ndim;
    int dims[4];
    size_t n;      /* elements */
    void *data;
} mp_fixture_tensor;

/* config fields, in the file's order */
enum {
    MP_FX_ARCH, MP_FX_LAYERS, MP_FX_HIDDEN, MP_FX_HEADS, MP_FX_KV_HEADS, MP_FX_FFN, MP_FX_VOCAB,
    MP_FX_SEQ, MP_FX_SEQUENCES, MP_FX_TIED, MP_FX_RMSNORM, MP_FX_SWIGLU, MP_FX_ROPE, MP_FX_NO_BIAS,
    MP_FX_ENC_LAYERS, MP_FX_DEC_SEQ,
    MP_FX_CONFIG_BASE, /* the fields every file has; those after, 0 when absent: */
    /* latent attention (0: none) */
    MP_FX_Q_LORA = MP_FX_CONFIG_BASE, MP_FX_KV_LORA, MP_FX_ROPE_DIM, MP_FX_NOPE_DIM, MP_FX_V_DIM,
    /* mixture of experts (0 experts: none; dropless) */
    MP_FX_EXPERTS, MP_FX_TOP_K, MP_FX_EXPERT_FFN, MP_FX_FIRST_DENSE, MP_FX_SHARED_FFN,
    MP_FX_ROUTER_SIGMOID,
    MP_FX_CONFIG_MOE, /* the fields of a file with experts; those after, 0 when absent: */
    /* DeepSeek-V3's routing: groups (0: none), groups a token, scale x 1000 (0: 1) */
    MP_FX_ROUTE_GROUPS = MP_FX_CONFIG_MOE, MP_FX_ROUTE_GROUP_TOP_K, MP_FX_ROUTE_SCALE_MILLI,
    MP_FX_CONFIG_ROUTE, /* the fields of a file with that routing; those after, 0 when absent: */
    /* multi-token prediction: modules (0: none), mtp_loss_scale x 1000 */
    MP_FX_MTP_LAYERS = MP_FX_CONFIG_ROUTE, MP_FX_MTP_SCALE_MILLI,
    MP_FX_CONFIG_MTP, /* the fields of a file with MTP modules; those after, 0 when absent: */
    /* GPT-OSS: window (0: none), full attention every n-th block (0: never),
     * sinks, the clamped SwiGLU's limit x 1000 (0: plain), the experts' and
     * router's biases */
    MP_FX_WINDOW = MP_FX_CONFIG_MTP, MP_FX_WINDOW_SKIP_FREQ, MP_FX_SINKS, MP_FX_GLU_LIMIT_MILLI,
    MP_FX_EXPERT_BIAS,
    MP_FX_CONFIG_OSS, /* the fields of a GPT-OSS file; those after, 0 when absent: */
    /* the rotary angles: base (0: 10000), YaRN's factor x 1000 (0: no YaRN),
     * original context, betas x 1000, unrounded ramp bounds */
    MP_FX_ROPE_THETA = MP_FX_CONFIG_OSS, MP_FX_YARN_FACTOR_MILLI, MP_FX_YARN_ORIGINAL_SEQ,
    MP_FX_YARN_BETA_FAST_MILLI, MP_FX_YARN_BETA_SLOW_MILLI, MP_FX_YARN_UNROUNDED,
    MP_FX_CONFIG_ROPE, /* the fields of a file with its own angles; those after, 0 when absent: */
    /* DeepSeek's YaRN variant: mscale and mscale_all_dim x 1000 (0: absent) */
    MP_FX_YARN_MSCALE_MILLI = MP_FX_CONFIG_ROPE, MP_FX_YARN_MSCALE_ALL_DIM_MILLI,
    MP_FX_CONFIG_DSYARN, /* the fields of a file with DeepSeek's YaRN; those after, 0 when absent: */
    /* Qwen3's attention: a head width of its own (0: hidden / heads), QK-norm */
    MP_FX_OWN_HEAD_DIM = MP_FX_CONFIG_DSYARN, MP_FX_QK_NORM,
    MP_FX_CONFIG_COUNT
};

typedef struct mp_fixture {
    const char *path;
    mp_fixture_tensor *t;
    int n;
    int config[MP_FX_CONFIG_COUNT];
    double lr, beta1, beta2, eps, weight_decay;
} mp_fixture;

mp_status mp_fixture_load(const char *path, mp_fixture *fx, mp_error *err);
void mp_fixture_free(mp_fixture *fx);
/* The tensor called name, or NULL. */
const mp_fixture_tensor *mp_fixture_find(const mp_fixture *fx, const char *name);

/* The run's model (before its TP split) must be the fixture's, and the
 * global batch its sequences; else MP_EINPUT naming the first field that differs. */
mp_status mp_fixture_match(const mp_fixture *fx, const mp_gpt_dims *d, int sequences,
                           mp_error *err);

/* buf = tensors "<prefix><name>" of every parameter of lay (one rank's
 * model chunk: its TP part, at its offsets), each found by the name of the
 * whole model's tensor (ref_lay, mp_param.ref_index). */
mp_status mp_fixture_fill(const mp_fixture *fx, const char *prefix, const mp_param_layout *lay,
                          const mp_param_layout *ref_lay, int tp_rank, float *buf,
                          mp_error *err);

/* The sigmoid router's expert bias at the step's start ([layers, experts],
 * d's MoE blocks') from tensors "route_bias:layers.L" when the file has them
 * (else left as it is: zero); an error when it has them and the run keeps
 * no bias (bias NULL). */
mp_status mp_fixture_route_bias(const mp_fixture *fx, const mp_gpt_dims *d, float *bias,
                                mp_error *err);

/* Rows of int32 tensor name ([sequences, len]: "tokens", "targets", T5's
 * "dec_tokens") for micro-batches [first, first + n) of b sequences each,
 * in exec's row order (r = position * b + sample), micro-batch k's rows
 * from out + k * stride. */
void mp_fixture_rows(const mp_fixture *fx, const char *name, int first, int n, int b,
                     int stride, int32_t *out);
/* Tokens and targets of micro-batches [first, first + n) of b sequences
 * each, in exec's row order (r = position * b + sample), into tok/tgt
 * [n][seq*b] (T5's decoder targets: the first dec_seq*b of each). */
void mp_fixture_batch(const mp_fixture *fx, int first, int n, int b, int32_t *tok,
                      int32_t *tgt);
/* The logits of micro-batch mb of b sequences, rows as exec's: out[len*b][V]
 * (len: seq, or T5's decoder length). */
void mp_fixture_logits(const mp_fixture *fx, int mb, int b, float *out);

#endif
