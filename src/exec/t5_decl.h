/* t5_decl.h — T5's declarations for one precision (MP_REAL_PASS); read twice
 * by t5.h (no include guard on purpose), each name with its line in
 * real_names.h. Rows r = position * b + sample, as everywhere. */
#include "exec/real.h"

/* ReLU (T5's MLP): out = max(in, 0); din = dout where in > 0, else 0. */
void mp_relu_forward(real *out, const real *in, size_t n);
void mp_relu_backward(real *din, const real *dout, const real *in, size_t n);

/* Self-attention with T5's relative position bias over this rank's heads:
 * qkv[S, 3 hl] = [Q | K | V] (hl = heads_local * hd), out[S, hl],
 * probs[b, heads_local, s, s];
 *   score[i,j] = q_i . k_j / sqrt(hd) + table[bucket[i*s + j], a]
 * (table: [32 buckets, heads_local], rows table_ld apart: this rank's heads'
 * columns), causal (the decoder) or not (the encoder). Backward writes
 * dqkv[S, 3 hl] (rounded onto the attention gradient grid) and adds each
 * score's gradient to dtable at its bucket; scratch holds s * s reals.
 * Every step is the backend's: the tensors and bucket[s*s] (int32) live in its memory. */
void mp_t5_attention_forward(const mp_backend *be, real *out, real *probs, const real *qkv,
                             int s, int b, int heads_local, int hd, bool causal,
                             const real *table, int table_ld, const int32_t *bucket, bool exact);
void mp_t5_attention_backward(const mp_backend *be, real *dqkv, const real *dout,
                              const real *qkv, const real *probs, int s, int b,
                              int heads_local, int hd, bool causal, real *dtable,
                              int table_ld, const int32_t *bucket, real *scratch, bool exact);
/* The CPU backend's rel_bias_add and rel_bias_grad (backend.h) on one head. */
void mp_t5_rel_bias_add(real *p, int s, int sk, bool causal, real scale, const real *table,
                        int table_ld, int head, const int32_t *bucket);
void mp_t5_rel_bias_grad(real *ds, real *dtable, int s, int sk, bool causal, real scale,
                         int table_ld, int head, const int32_t *bucket, bool exact);

/* The T5 state of model g (its activation slots, workspace and buckets):
 * allocated by mp_gpt_init when g->d.t5, freed by mp_gpt_free. */
mp_status mp_t5_alloc(mp_gpt *g, int n_slots);
void mp_t5_free(mp_gpt *g);
/* One micro-batch: tokens[S] the encoder's input, targets[S] whose first
 * dec_seq * b rows are the decoder's targets (its input: them shifted right
 * by one position, token 0 first); the loss is the decoder's. */
mp_status mp_t5_forward(mp_gpt *g, int slot, const int32_t *tokens,
                        const int32_t *targets, double *loss_sum, mp_error *err);
mp_status mp_t5_backward(mp_gpt *g, int slot, mp_error *err);
/* Pipeline stages: the output of the forward in slot, the input gradient of
 * the last backward, and the elements of the stage's input (in) or output.
 * An encoder stage's are its rows of the encoder's stream [Sel,h] (the last
 * encoder stage's: the encoder's output); a decoder stage carries
 * [its stream [Sdl,h] | the encoder's output [Sel,h]] (the first decoder
 * stage receives the encoder's output alone), as Megatron-LM's
 * encoder-decoder pipeline does. */
const real *mp_t5_stage_output(const mp_gpt *g, int slot);
const real *mp_t5_stage_input_grad(const mp_gpt *g);
size_t mp_t5_stage_count(const mp_gpt *g, bool input);
/* Pipelines: the groups of the stages holding encoder and decoder blocks
 * (model g takes them over and frees them), and the sum of each stack's
 * relative-bias gradient over its group, after the last backward. */
void mp_t5_set_stack_groups(mp_gpt *g, mp_group enc, mp_group dec);
mp_status mp_t5_reduce_grads(mp_gpt *g, mp_error *err);
