/* kernels.h — the executor's elementwise, row-wise and optimizer kernels for
 * the CUDA backend, behind one C interface (the GEMMs are cuBLAS calls in the
 * backend, the collectives NCCL or MPI calls).
 *
 * Every entry takes device pointers (with the host-run build, kernels/meson.build's
 * host library, ordinary host pointers), sizes in elements, and a stream:
 * a cudaStream_t passed as void * so that plain C can include this header
 * (NULL: the default stream). It launches its kernels on that stream and
 * returns at once: MPK_OK, MPK_EINVAL for sizes it cannot run, or a CUDA
 * error code (cudaError_t, positive) from the launch; it never exits or
 * prints. mpk_strerror() names a code.
 *
 * The math is the CPU executor's (src/exec/layers.c, attention.c, model.c,
 * optimizer.c, their _f32 versions), operation for operation and in the same
 * order, so that on exact mode's dyadic data (src/exec/quant.h) the results
 * are bitwise equal to the CPU's. `exact` does what it does there (rounds
 * onto the grids) and also makes the row reductions that are not exact in
 * any order (LayerNorm and RMSNorm statistics, softmax sums) run in the CPU's
 * order, by one thread; otherwise they are block reductions in a fixed
 * order. Column reductions (bias, norm scale and embedding gradients) always
 * run over rows in order 0, 1, ..., one thread per column: deterministic and
 * equal to the CPU's sums bit for bit on any data. docs/exec.md ("Kernels")
 * says what differs on a GPU: exp, tanh and log.
 *
 * Shapes are row-major. Rows r of activations are token rows (pos*b + sample). */
#ifndef MP_KERNELS_H
#define MP_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { MPK_OK = 0, MPK_EINVAL = -1 };

/* A message for a code these functions returned (static storage). */
const char *mpk_strerror(int code);

/* ---- exact mode's rounding (quant.h) ---- */

/* x[n] = round(x * 2^grid) / 2^grid (half to even), clamped to |x| <= max_int * 2^-grid
 * (mp_quantize). */
int mpk_quantize(float *x, size_t n, int grid, int max_int, void *stream);
/* The same on rows of a strided matrix: x[rows, cols], rows ld elements apart. */
int mpk_quantize_2d(float *x, int rows, int cols, size_t ld, int grid, int max_int,
                    void *stream);

/* ---- embedding (model.c) ---- idx[rows] device int32 (tokens, positions or
 * segments); a table row t is owned when lo <= t < lo + n_owned (the vocab-
 * parallel slice of this TP rank; lo = 0, n_owned = table rows otherwise). */

/* out[rows, h]: accumulate false: out[r] = table[idx[r] - lo] if owned, else 0;
 * accumulate true: out[r] += table[idx[r] - lo] if owned (learned positions,
 * token types). table[n_owned, h]. */
int mpk_gather_rows(float *out, const float *table, const int32_t *idx, int rows, int h,
                    int64_t lo, int64_t n_owned, bool accumulate, void *stream);
/* table[idx[r] - lo] += src[r] for r = 0, 1, ..., rows-1 in that order, owned rows
 * only (the embedding gradients). src[rows, h], table[n_owned, h]. */
int mpk_scatter_add_rows(float *table, const float *src, const int32_t *idx, int rows, int h,
                         int64_t lo, int64_t n_owned, void *stream);

/* ---- norms (layers.c) ---- x, out, xhat, dx, dout [rows, h]; rstd [rows]; w, b, dw, db [h] */

/* out = xhat * w + b, xhat = (x - mean) * rstd, rstd = 1/sqrt(var + eps);
 * keeps xhat and rstd. eps: the model's norm_eps as a float, 0 < eps < 1
 * (else MPK_EINVAL). */
int mpk_layernorm_forward(float *out, float *xhat, float *rstd, const float *x, const float *w,
                          const float *b, int rows, int h, float eps, bool exact, void *stream);
/* dx overwritten (may not alias dout); dw, db accumulated over rows in order. */
int mpk_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                           const float *xhat, const float *rstd, const float *w, int rows, int h,
                           bool exact, void *stream);
/* RMSNorm: out = xhat * w, xhat = x * rstd, rstd = 1/sqrt(mean(x^2) + eps). */
int mpk_rmsnorm_forward(float *out, float *xhat, float *rstd, const float *x, const float *w,
                        int rows, int h, float eps, bool exact, void *stream);
/* dx overwritten (may not alias dout); dw accumulated. */
int mpk_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *xhat,
                         const float *rstd, const float *w, int rows, int h, bool exact,
                         void *stream);

/* ---- activations, bias, residual (layers.c, bert_heads.c) ---- */

/* out[n] = gelu(in) (tanh approximation); out may alias in. */
int mpk_gelu_forward(float *out, const float *in, size_t n, void *stream);
/* din[n] = dout * gelu'(in); din may alias dout. */
int mpk_gelu_backward(float *din, const float *dout, const float *in, size_t n, void *stream);
/* The exact (erf) GELU, x Phi(x), and its gradient; the same aliasing. */
int mpk_gelu_erf_forward(float *out, const float *in, size_t n, void *stream);
int mpk_gelu_erf_backward(float *din, const float *dout, const float *in, size_t n,
                          void *stream);
/* GEGLU: gu[rows, 2f] = [gate | up] -> out[rows, f] = gelu(gate) * up, GELU's
 * tanh form or (erf != 0) the exact one; backward into dgu[rows, 2f]. */
int mpk_geglu_forward(float *out, const float *gu, int rows, int f, int erf, void *stream);
int mpk_geglu_backward(float *dgu, const float *dout, const float *gu, int rows, int f, int erf,
                       void *stream);
/* out[rows, f] = silu(gu[:, :f]) * gu[:, f:], gu[rows, 2f] = [gate | up]. */
int mpk_swiglu_forward(float *out, const float *gu, int rows, int f, void *stream);
/* dgu[rows, 2f] from dout[rows, f]. */
int mpk_swiglu_backward(float *dgu, const float *dout, const float *gu, int rows, int f,
                        void *stream);
/* out[n] = tanh(in) (BERT's pooler); out may alias in. */
int mpk_tanh_forward(float *out, const float *in, size_t n, void *stream);
/* dx[n] *= 1 - y * y, y = tanh output. */
int mpk_tanh_backward(float *dx, const float *y, size_t n, void *stream);
/* y[rows, cols] += b[cols] */
int mpk_bias_add(float *y, const float *b, int rows, int cols, void *stream);
/* db[cols] += sum over rows (in order) of dy[rows, cols] */
int mpk_bias_grad(float *db, const float *dy, int rows, int cols, void *stream);
/* y[n] += x[n] (residual) */
int mpk_add(float *y, const float *x, size_t n, void *stream);
/* x[n] *= alpha (the loss gradient's scale, fp16 loss scaling) */
int mpk_scale(float *x, size_t n, float alpha, void *stream);

/* ---- T5 (t5_layers.c; t5.cu) ---- */

/* out[n] = max(in, 0); out may alias in. */
int mpk_relu_forward(float *out, const float *in, size_t n, void *stream);
/* din[n] = dout where in > 0, else 0; din may alias dout. */
int mpk_relu_backward(float *din, const float *dout, const float *in, size_t n, void *stream);
/* One head's scores p[s, sk] (keys 0..g(i), g(i) = i when causal, else sk - 1):
 * p = p * scale + table[bucket[i*sk + j] * table_ld + head], the rest untouched.
 * bucket: device int32 [s, sk]. */
int mpk_rel_bias_add(float *p, int s, int sk, bool causal, float scale, const float *table,
                     int table_ld, int head, const int32_t *bucket, void *stream);
/* Its backward on ds[s, sk] = dS: dtable[k * table_ld + head] += ds over the
 * seen scores of bucket k (k < buckets), in row-then-key order (one thread a
 * bucket: the CPU's sums bit for bit); then ds *= scale on the seen scores,
 * rounded onto MP_Q_GRAD_ATT when exact. */
int mpk_rel_bias_grad(float *ds, float *dtable, int s, int sk, bool causal, float scale,
                      int buckets, int table_ld, int head, const int32_t *bucket, bool exact,
                      void *stream);

/* ---- rotary embeddings (layers.c mp_rope) ---- */

/* Host function, no device: cs[s, hd/2, 2] = mscale (cos, sin) of pos[i] *
 * inv_freq[k] (the CPU's frequencies, exec/rope.h: 10000^(-2k/hd), or YaRN's
 * with its attention factor mscale), computed in double as the CPU does and,
 * in exact mode, rounded onto the probability grid (up to 2 * MP_EXACT_MAX_INT
 * units: mscale may exceed 1). Copy it to the device once per run. pos and
 * inv_freq are host arrays. */
void mpk_rope_table(float *cs, const int32_t *pos, int s, int hd, const double *inv_freq,
                    double mscale, bool exact);
/* In place on `heads` heads of hd columns (from column 0) of x's rows r = i*b + n
 * (ld elements apart), i < s, turned by cs[i] (device copy of mpk_rope_table);
 * inverse: the opposite turn (the backward). exact: each row's heads*hd values
 * rounded onto `grid`. */
int mpk_rope(float *x, size_t ld, int heads, int hd, const float *cs, int s, int b,
             bool inverse, bool exact, int grid, void *stream);

/* ---- attention's softmax (attention.c); the products are the backend's GEMMs ----
 * p, ds [mats, s, sk]: one s x sk matrix per (sample, head), query row i
 * seeing keys 0..g(i), g(i) = sk - 1 without causal, else qpos[i] (device
 * int32[s], the global position) or i when qpos is NULL. */

/* In place: scores S = Q K^T -> P = softmax(scale * S) on keys 0..g(i), 0 beyond
 * (exact: scaled scores rounded onto MP_Q_ACT, P onto MP_Q_PROB). */
int mpk_softmax_forward(float *p, int mats, int s, int sk, const int32_t *qpos, bool causal,
                        float scale, bool exact, void *stream);
/* In place: ds holds dP = dO V^T and becomes dS = P (dP - rowsum(P dP)) * scale on
 * keys 0..g(i), 0 beyond (exact: rounded onto MP_Q_GRAD_ATT). */
int mpk_softmax_backward(float *ds, const float *p, int mats, int s, int sk, const int32_t *qpos,
                         bool causal, float scale, bool exact, void *stream);

/* ---- GPT-OSS's (attention_sink.c): one s x sk matrix (one head), query row
 * i seeing keys max(0, g(i) - window + 1) .. g(i) (window 0: from key 0),
 * with sink (device, one float; NULL: none) a logit that joins each row's
 * maximum and denominator and takes no value. ---- */

/* In place, as mpk_softmax_forward on the row's keys (0 elsewhere). */
int mpk_softmax_oss_forward(float *p, int s, int sk, const int32_t *qpos, bool causal,
                            int window, const float *sink, float scale, bool exact,
                            void *stream);
/* In place, as mpk_softmax_backward on the row's keys; when dsink is given,
 * *dsink += the sum over rows, in row order, of -(1 - sum p) sum p dP (each
 * row's term rounded onto MP_Q_GRAD_ATT in exact mode), terms[s] (device)
 * holding the rows' terms in between. */
int mpk_softmax_oss_backward(float *ds, float *dsink, float *terms, const float *p, int s,
                             int sk, const int32_t *qpos, bool causal, int window, float scale,
                             bool exact, void *stream);
/* out[rows, f] = g sigmoid(1.702 g) (u + 1), g = min(gate, limit), u = up
 * clamped to [-limit, limit]; gu[rows, 2f] = [gate | up]. */
int mpk_swiglu_clamped_forward(float *out, const float *gu, int rows, int f, float limit,
                               void *stream);
/* dgu[rows, 2f] from dout[rows, f]; zero where a clamp held. */
int mpk_swiglu_clamped_backward(float *dgu, const float *dout, const float *gu, int rows, int f,
                                float limit, void *stream);

/* ---- vocab-parallel cross-entropy (model.c), as Megatron does it under TP:
 * logits[S, Vl] hold this TP rank's vocabulary slice [lo, lo + Vl); targets[S]
 * device int32 (< 0: no loss, BERT's unmasked tokens). The caller reduces
 * between the calls: MAX over TP of mx, SUM over TP of sum and tl. ---- */

/* mx[S] = max of each row of logits. */
int mpk_ce_max(float *mx, const float *logits, int S, int Vl, void *stream);
/* tl[S] = logit of the target if this rank holds it, else 0; then logits[r] =
 * exp(logits[r] - mx[r]) (exact: rounded onto MP_Q_PROB) and sum[S] = their sum. */
int mpk_ce_exp_sum(float *logits, float *sum, float *tl, const float *mx, const int32_t *targets,
                   int S, int Vl, int64_t lo, bool exact, void *stream);
/* loss[S] = log(sum) + mx - tl (0 where target < 0; exact: rounded onto MP_Q_LOSS,
 * MP_Q_LOSS_MAX_INT); logits[r] /= sum[r] (exact: onto MP_Q_PROB): the
 * probabilities. The caller adds loss[] in row order in float, as the CPU does. */
int mpk_ce_loss(float *loss, float *logits, const float *sum, const float *mx, const float *tl,
                const int32_t *targets, int S, int Vl, bool exact, void *stream);
/* In place, probabilities -> d logits = (p - onehot(target - lo)) * grad_scale;
 * zero_ignored (BERT): rows whose target < 0 become 0. */
int mpk_ce_backward(float *logits, const int32_t *targets, int S, int Vl, int64_t lo,
                    float grad_scale, bool zero_ignored, void *stream);

/* ---- AdamW on fp32 master weights (optimizer.c) ---- */

/* The update's constants, as the CPU converts them (mpk_adam_args_make). */
typedef struct mpk_adam_args {
    float lr, beta1, beta2, eps, decay; /* decay: weight decay of this tensor (0: none) */
    float c1, c2;                       /* 1 - beta1^step, 1 - beta2^step */
    int grid;                           /* exact mode: the tensor's grid; < 0: no rounding */
} mpk_adam_args;
/* Host function: weight_decay applies when `decays` (weights and embeddings). */
mpk_adam_args mpk_adam_args_make(double lr, double beta1, double beta2, double eps,
                                 double weight_decay, bool decays, int step, int grid);
/* One tensor's range: m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
 * w -= lr (m/c1 / (sqrt(v/c2) + eps) + decay w), then rounded when grid >= 0.
 * w, g, m, v [n] (the caller offsets each to the range). */
int mpk_adamw(float *w, const float *g, float *m, float *v, size_t n, mpk_adam_args a,
              void *stream);

/* ---- precision: casts (round to nearest even; NaN stays NaN) and loss scaling ---- */

int mpk_f32_to_bf16(uint16_t *out, const float *in, size_t n, void *stream);
int mpk_bf16_to_f32(float *out, const uint16_t *in, size_t n, void *stream);
/* A strided column-major operand (cols runs of rows floats, ld >= rows apart)
 * rounded to bf16 and packed rows apart: a bf16 GEMM's input. */
int mpk_f32_to_bf16_2d(uint16_t *out, const float *in, size_t rows, size_t cols, size_t ld,
                       void *stream);
int mpk_f32_to_f16(uint16_t *out, const float *in, size_t n, void *stream);
int mpk_f16_to_f32(float *out, const uint16_t *in, size_t n, void *stream);
/* fp16 loss scaling, after the backward: x[n] *= inv_scale, and *found_nonfinite
 * (device int) is set to 1 if any x was inf or NaN (never cleared here: zero it
 * before the first call of a step; the caller skips the step when it is set). */
int mpk_unscale_check(float *x, size_t n, float inv_scale, int *found_nonfinite, void *stream);

/* ---- mixture of experts (src/exec/moe_ops.c; the backend table's moe_*
 * entries in src/exec/backend.h say what each computes). Expert indices,
 * slots, row numbers and counts are floats. A row's top-k runs in fixed
 * scratch: at most MPK_MOE_MAX_EXPERTS experts in MPK_MOE_MAX_GROUPS groups
 * (MPK_EINVAL beyond; exec refuses such models first). ---- */
#define MPK_MOE_MAX_EXPERTS 1024
#define MPK_MOE_MAX_GROUPS 64

int mpk_moe_scores(float *scores, const float *logits, size_t S, size_t E, bool sigmoid,
                   void *stream);
/* bias may be NULL. */
int mpk_moe_topk(float *choice, float *wgt, const float *scores, const float *bias, size_t S,
                 size_t E, size_t k, size_t groups, size_t group_k, double scale, void *stream);
int mpk_moe_capacity(float *kept, const float *all, size_t rows, size_t b, size_t E, size_t k,
                     size_t cp, size_t me, size_t r0, size_t S, size_t capacity, void *stream);
/* One thread: the prefix over the S*k slots. */
int mpk_moe_send_order(float *sorder, float *counts, float *tags, size_t tag_ld,
                       const float *choice, const float *kept, size_t Sk, size_t El, size_t ep,
                       void *stream);
int mpk_moe_expert_order(float *rorder, float *ne, const float *tags, size_t tag_ld, size_t n,
                         size_t El, void *stream);
/* idx and wgt may be NULL. */
int mpk_moe_gather(float *dst, size_t dld, const float *src, size_t sld, const float *idx,
                   size_t div, const float *wgt, size_t n, size_t h, void *stream);
int mpk_moe_scatter(float *dst, size_t dld, const float *src, size_t sld, const float *idx,
                    size_t div, size_t n, size_t h, bool accumulate, void *stream);
int mpk_moe_combine(float *out, const float *y, const float *wgt, const float *kept, size_t r0,
                    size_t Sl, size_t k, size_t h, void *stream);
int mpk_moe_combine_backward(float *dwl, const float *dout, const float *y, const float *kept,
                             size_t r0, size_t Sl, size_t k, size_t h, void *stream);
/* load[E]: the table's moe_count with the experts' number. */
int mpk_moe_count(float *load, const float *choice, const float *kept, size_t Sk, size_t E,
                  void *stream);
int mpk_moe_weights_backward(float *dl, const float *scores, const float *choice,
                             const float *wgt, const float *dwf, size_t S, size_t E, size_t k,
                             double scale, void *stream);
int mpk_moe_scores_backward(float *dl, const float *scores, size_t S, size_t E, bool sigmoid,
                            void *stream);
int mpk_moe_bias_update(float *bias, const float *load, size_t E, double rate, void *stream);

#ifdef __cplusplus
}
#endif

#endif
