/* backend.h — what the executor needs from a machine: memory, matrix
 * products, the layers' elementwise and row-wise ops, collectives over a
 * group of ranks, and a clock. The CPU backend (backend_cpu.c: host memory,
 * OpenBLAS, the functions of layers.c, MPI) and the CUDA backend
 * (backend_cuda.c: device memory, cuBLAS, the kernels of kernels/, NCCL)
 * implement it. The model's code calls only these on the tensors it holds,
 * never BLAS, MPI, memcpy or a loop over their elements: with the CUDA
 * backend every tensor of the model lives on the device. The driver and the
 * check talk to the other ranks through this table too.
 *
 * Every numeric entry takes the real kind of its pointers (float or double;
 * the CUDA backend has float alone: the double reference always runs on the
 * CPU backend). Ops return nothing: a failure (a kernel launch, a cuBLAS call)
 * is kept and reported by the next `sync`, which the model calls at the end
 * of each forward, backward and optimizer step. */
#ifndef MP_EXEC_BACKEND_H
#define MP_EXEC_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "core/error.h"
#include "exec/rope.h"

typedef enum { MP_REAL32, MP_REAL64 } mp_real_kind;
typedef enum { MP_RED_SUM, MP_RED_MAX } mp_reduce_op;
/* Where a copy's source and destination live: the backend's memory (device
 * for CUDA) or the host's. On the CPU backend all four are memcpy. */
typedef enum { MP_COPY_D2D, MP_COPY_H2D, MP_COPY_D2H, MP_COPY_H2H } mp_copy_dir;

struct mp_param_layout;
struct mp_adam_cfg;

/* A communicator with its size and this rank's place in it. Size-1 groups
 * make every collective a no-op (the unpartitioned reference uses them). */
typedef struct mp_group {
    MPI_Comm comm;
    int size, rank;
} mp_group;

typedef struct mp_backend {
    const char *name;
    bool host_memory; /* its memory is the host's: its pointers can be read directly */
    const char *transport; /* what carries its collectives: "mpi", "nccl", "none" */
    const char *precision; /* its GEMMs' inputs: "fp32" or "bf16" */
    /* ---- memory: zeroed on allocation; NULL when there is none left ---- */
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
    void (*copy)(void *dst, const void *src, size_t bytes, mp_copy_dir dir);
    /* rows of width bytes, dst_pitch / src_pitch bytes apart */
    void (*copy2d)(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                   size_t width, size_t rows, mp_copy_dir dir);
    void (*zero)(void *p, size_t bytes);
    /* Waits for the work queued so far; the first failure since the last call. */
    mp_status (*sync)(mp_error *err);

    /* ---- layer ops (layers.c says what each computes; kernels_decl.h has
     * the shapes). Index arrays (positions, tokens, targets) are int32 in the
     * backend's memory. ---- */
    /* x[r*ld + c] rounded onto 2^-grid, |units| <= max_int, r < rows, c < cols */
    void (*quantize)(mp_real_kind kind, void *x, size_t rows, size_t cols, size_t ld, int grid,
                     int max_int);
    /* eps: the model's norm_eps (mp_gpt_dims.norm_eps), in the kind's precision */
    void (*layernorm_forward)(mp_real_kind kind, void *out, void *xhat, void *rstd,
                              const void *x, const void *w, const void *b, int rows, int h,
                              double eps, bool exact);
    void (*layernorm_backward)(mp_real_kind kind, void *dx, void *dw, void *db,
                               const void *dout, const void *xhat, const void *rstd,
                               const void *w, int rows, int h, bool exact);
    void (*rmsnorm_forward)(mp_real_kind kind, void *out, void *xhat, void *rstd,
                            const void *x, const void *w, int rows, int h, double eps,
                            bool exact);
    void (*rmsnorm_backward)(mp_real_kind kind, void *dx, void *dw, const void *dout,
                             const void *xhat, const void *rstd, const void *w, int rows, int h,
                             bool exact);
    void (*gelu_forward)(mp_real_kind kind, void *out, const void *in, size_t n);
    void (*gelu_backward)(mp_real_kind kind, void *din, const void *dout, const void *in,
                          size_t n);
    /* the exact (erf) GELU, as gelu_forward / gelu_backward */
    void (*gelu_erf_forward)(mp_real_kind kind, void *out, const void *in, size_t n);
    void (*gelu_erf_backward)(mp_real_kind kind, void *din, const void *dout, const void *in,
                              size_t n);
    /* GEGLU over gu[rows, 2f] = [gate | up] (tanh GELU, or erf: the exact one) */
    void (*geglu_forward)(mp_real_kind kind, void *out, const void *gu, int rows, int f,
                          bool erf);
    void (*geglu_backward)(mp_real_kind kind, void *dgu, const void *dout, const void *gu,
                           int rows, int f, bool erf);
    void (*swiglu_forward)(mp_real_kind kind, void *out, const void *gu, int rows, int f);
    void (*swiglu_backward)(mp_real_kind kind, void *dgu, const void *dout, const void *gu,
                            int rows, int f);
    /* out = tanh(in); backward: dx *= 1 - y^2 with y = tanh(in) */
    void (*tanh_forward)(mp_real_kind kind, void *out, const void *in, size_t n);
    void (*tanh_backward)(mp_real_kind kind, void *dx, const void *y, size_t n);
    void (*rope)(mp_real_kind kind, void *x, size_t ld, int heads, int hd,
                 const mp_rope_spec *spec, const int *pos, int s, int b, bool inverse, bool exact,
                 int grid);
    void (*bias_add)(mp_real_kind kind, void *y, const void *b, int rows, int cols);
    void (*bias_grad)(mp_real_kind kind, void *db, const void *dy, int rows, int cols);
    void (*add)(mp_real_kind kind, void *y, const void *x, size_t n);
    /* Attention's softmax over the score rows p[s, sk] of one head: scale,
     * (exact) round, softmax over keys 0..last (last = sk - 1, or causal: qpos[i],
     * or i when qpos is NULL), round, zeros after. Backward, in place on
     * ds[s, sk] = dP: ds = p (dP - sum p dP) scale, rounded, zeros after. */
    void (*attn_softmax)(mp_real_kind kind, void *p, int s, int sk, const int *qpos,
                         bool causal, double scale, bool exact);
    void (*attn_softmax_backward)(mp_real_kind kind, void *ds, const void *p, int s, int sk,
                                  const int *qpos, bool causal, double scale, bool exact);
    /* GPT-OSS's (attention_sink.c): the same over the keys max(0, pos -
     * window + 1) .. last (window 0: from key 0), with sink (one real, NULL:
     * none) a logit that joins the maximum and the denominator and takes no
     * value; backward adds the sink logit's gradient to *dsink (NULL: none).
     * The clamped SwiGLU: gate <= limit, |up| <= limit, gate sigmoid(1.702
     * gate) (up + 1), zero gradient where a clamp held. CUDA: kernels/oss.cu.
     * A backend may leave them NULL: exec then refuses such models. */
    void (*attn_softmax_oss)(mp_real_kind kind, void *p, int s, int sk, const int *qpos,
                             bool causal, int window, const void *sink, double scale,
                             bool exact);
    void (*attn_softmax_oss_backward)(mp_real_kind kind, void *ds, void *dsink, const void *p,
                                      int s, int sk, const int *qpos, bool causal, int window,
                                      double scale, bool exact);
    void (*swiglu_clamped_forward)(mp_real_kind kind, void *out, const void *gu, int rows,
                                   int f, double limit);
    void (*swiglu_clamped_backward)(mp_real_kind kind, void *dgu, const void *dout,
                                    const void *gu, int rows, int f, double limit);
    /* T5 (t5_layers.c; CUDA: kernels/t5.cu). ReLU: out = max(in, 0); din =
     * dout where in > 0, else 0 (din may alias dout). The relative position
     * bias of one head's scores p[s, sk]: p[i,j] = p[i,j] * scale +
     * table[bucket[i*sk + j] * table_ld + head] on the keys j <= last (last =
     * i when causal, else sk - 1), the rest untouched (attn_softmax with scale
     * 1 follows). Its backward on ds[s, sk] = dS (attn_softmax_backward with
     * scale 1 before): dtable[bucket * table_ld + head] += ds[i,j] over i,
     * then j, in that order; then ds *= scale, rounded (exact) onto the
     * attention gradient grid. bucket is int32 [s * sk] in the backend's memory,
     * each < buckets (dtable's rows). */
    void (*relu_forward)(mp_real_kind kind, void *out, const void *in, size_t n);
    void (*relu_backward)(mp_real_kind kind, void *din, const void *dout, const void *in,
                          size_t n);
    void (*rel_bias_add)(mp_real_kind kind, void *p, int s, int sk, bool causal, double scale,
                         const void *table, int table_ld, int head, const int32_t *bucket);
    void (*rel_bias_grad)(mp_real_kind kind, void *ds, void *dtable, int s, int sk, bool causal,
                          double scale, int buckets, int table_ld, int head,
                          const int32_t *bucket, bool exact);
    /* Vocabulary-parallel cross-entropy over logits[S, V] (this rank's vocabulary
     * columns [lo, lo + V)): the row maxima; then tl = the target's logit (0
     * when another rank holds it), logits = exp(logits - mx) (rounded), sum =
     * their row sums; then, with mx and sum reduced over TP, loss[r] =
     * log(sum) + mx - tl (0 for targets < 0; rounded onto the loss grid in
     * exact mode) and logits /= sum (rounded). Backward in place:
     * d logits = (p - onehot(target)) * scale, rows with target < 0 zeroed
     * when masked. */
    void (*ce_max)(mp_real_kind kind, void *mx, const void *logits, size_t S, size_t V);
    void (*ce_exp_sum)(mp_real_kind kind, void *logits, void *sum, void *tl, const void *mx,
                       const int32_t *targets, size_t lo, size_t S, size_t V, bool exact);
    void (*ce_loss)(mp_real_kind kind, void *loss, void *logits, const void *sum,
                    const void *mx, const void *tl, const int32_t *targets, size_t S, size_t V,
                    bool exact);
    void (*ce_backward)(mp_real_kind kind, void *logits, const int32_t *targets, size_t lo,
                        size_t S, size_t V, double scale, bool masked);
    /* Rows by index: row r takes table row idx[r] - lo when that is in [0, n),
     * else (not accumulating) zeros; scatter adds row r to table row
     * idx[r] - lo, rows in ascending order on the CPU. */
    void (*gather_rows)(mp_real_kind kind, void *out, const void *table, const int32_t *idx,
                        size_t lo, size_t n, size_t rows, size_t h, bool accumulate);
    void (*scatter_add_rows)(mp_real_kind kind, void *table, const void *x, const int32_t *idx,
                             size_t lo, size_t n, size_t rows, size_t h);
    /* Sum of x[0..n) added in index order in the real kind (bitwise the same
     * on every backend: the loss). */
    double (*sum)(mp_real_kind kind, const void *x, size_t n);
    /* AdamW over flat elements [lo, hi) (optimizer.c). */
    void (*adamw)(mp_real_kind kind, void *w, const void *grad, void *m, void *v,
                  const struct mp_param_layout *lay, size_t lo, size_t hi,
                  const struct mp_adam_cfg *cfg, int step, bool exact);

    /* ---- mixture of experts (moe_ops.c on the CPU, kernels/moe.cu on CUDA;
     * moe_layer.c calls them in this order). Expert indices, token slots
     * (token * k + j), row numbers and counts are reals (exact below 2^24).
     * Sums are in double, in the orders given, on every backend. ---- */
    /* scores[S,E] of logits[S,E]: sigmoid, or softmax (max, then the sum of
     * exp in order), each value rounded to the real kind from double. */
    void (*moe_scores)(mp_real_kind kind, void *scores, const void *logits, size_t S, size_t E,
                       bool sigmoid);
    /* choice[S,k], wgt[S,k]: each row's k experts by mp_moe_pick (moe.h) on
     * the scores plus bias[E] (NULL: none; added in the real kind), best
     * first; wgt = scale * p / (sum of p over the chosen), unbiased p. */
    void (*moe_topk)(mp_real_kind kind, void *choice, void *wgt, const void *scores,
                     const void *bias, size_t S, size_t E, size_t k, size_t groups,
                     size_t group_k, double scale);
    /* The capacity drop: all[cp][rows][k] every CP rank's choices (rows =
     * positions * b, position-major; CP rank c holds chunks c and 2cp-1-c of
     * the sequence); expert e of each sample keeps its first `capacity`
     * slots in global position order, then slot order. kept[S,k] = 1 / 0 for
     * CP rank me's rows [r0, r0 + S); capacity 0: every slot 1, all unread. */
    void (*moe_capacity)(mp_real_kind kind, void *kept, const void *all, size_t rows, size_t b,
                         size_t E, size_t k, size_t cp, size_t me, size_t r0, size_t S,
                         size_t capacity);
    /* The dispatch's order: for EP rank q = 0, 1, ... the kept slots s <
     * Sk whose expert lies on q (choice / El == q), in slot order:
     * sorder[i] = s, tags[i * tag_ld] = choice % El, counts[q] their number. */
    void (*moe_send_order)(mp_real_kind kind, void *sorder, void *counts, void *tags,
                           size_t tag_ld, const void *choice, const void *kept, size_t Sk,
                           size_t El, size_t ep);
    /* The received rows by local expert: for e = 0, 1, ... the rows r < n
     * whose tags[r * tag_ld] == e, in r order: rorder[p] = r; ne[e] their number. */
    void (*moe_expert_order)(mp_real_kind kind, void *rorder, void *ne, const void *tags,
                             size_t tag_ld, size_t n, size_t El);
    /* Row i < n of dst (dld apart) = src row idx[i] / div (sld apart; idx
     * NULL: i), h columns, times wgt[idx[i]] when wgt is given. */
    void (*moe_gather)(mp_real_kind kind, void *dst, size_t dld, const void *src, size_t sld,
                       const void *idx, size_t div, const void *wgt, size_t n, size_t h);
    /* dst row idx[i] / div = (accumulate: +=) src row i, i = 0, 1, ..., n-1
     * in that order (without accumulate the targets are distinct). */
    void (*moe_scatter)(mp_real_kind kind, void *dst, size_t dld, const void *src, size_t sld,
                        const void *idx, size_t div, size_t n, size_t h, bool accumulate);
    /* out[rl,h] = sum over j < k with kept[r*k+j] of wgt[r*k+j] * y[rl*k+j, :]
     * (r = r0 + rl); backward: dwl[rl*k+j] = <dout[rl], y[rl*k+j]> (0 dropped). */
    void (*moe_combine)(mp_real_kind kind, void *out, const void *y, const void *wgt,
                        const void *kept, size_t r0, size_t Sl, size_t k, size_t h);
    void (*moe_combine_backward)(mp_real_kind kind, void *dwl, const void *dout, const void *y,
                                 const void *kept, size_t r0, size_t Sl, size_t k, size_t h);
    /* load[choice[s]] += 1 for each kept slot s < Sk (the expert bias's
     * counts; load[E]). */
    void (*moe_count)(mp_real_kind kind, void *load, const void *choice, const void *kept,
                      size_t Sk, size_t E);
    /* The router's backward, in two steps (exact mode rounds between):
     * dl[S,E] = 0 but at the chosen, (scale dwf_j - <wgt, dwf>) / sum p; then
     * in place through the sigmoid or softmax of the scores. */
    void (*moe_weights_backward)(mp_real_kind kind, void *dl, const void *scores,
                                 const void *choice, const void *wgt, const void *dwf, size_t S,
                                 size_t E, size_t k, double scale);
    void (*moe_scores_backward)(mp_real_kind kind, void *dl, const void *scores, size_t S,
                                size_t E, bool sigmoid);
    /* bias[E] += rate * sign(mean(load) - load[e]) (aux-loss-free balancing). */
    void (*moe_bias_update)(mp_real_kind kind, void *bias, const void *load, size_t E,
                            double rate);

    /* Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C. */
    void (*gemm)(mp_real_kind kind, bool trans_a, bool trans_b, int m, int n, int k,
                 double alpha, const void *a, int lda, const void *b, int ldb, double beta,
                 void *c, int ldc);
    /* count products of gemm's kind with the same transposes, alpha, beta and
     * leading dimensions: C_i[m_i, n_i] = alpha op(A_i)[m_i, k_i] op(B_i) +
     * beta C_i, i < count (an MoE layer's local experts; the C_i apart). As
     * count gemm calls (exact mode: bit for bit); the arrays on the host, the
     * matrices in the backend's memory. CPU: one gemm after another; CUDA: one
     * cublasGemmGroupedBatchedEx (bf16 plans: a cublasGemmEx each, the grouped
     * call has no compute type that rounds fp32 inputs to bf16). */
    void (*gemm_grouped)(mp_real_kind kind, bool trans_a, bool trans_b, int count,
                         const int *m, const int *n, const int *k, double alpha,
                         const void *const *a, int lda, const void *const *b, int ldb,
                         double beta, void *const *c, int ldc);
    /* In place over the group. */
    mp_status (*allreduce)(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                           mp_reduce_op op, mp_error *err);
    /* recv[g.size * count] = concatenation of every rank's send[count], in rank order. */
    mp_status (*allgather)(const mp_group *g, mp_real_kind kind, const void *send, void *recv,
                           size_t count, mp_error *err);
    /* recv[count] = sum over ranks of send[rank * count .. (rank+1) * count). */
    mp_status (*reduce_scatter)(const mp_group *g, mp_real_kind kind, const void *send,
                                void *recv, size_t count, mp_error *err);
    /* All-to-all with counts (MoE's dispatch and combine): send holds
     * send_counts[q] elements for each group rank q, rank after rank; recv
     * gets recv_counts[q] from each, rank after rank (the caller knows them:
     * an all-to-all of the counts first). CUDA: grouped ncclSend/ncclRecv
     * (or MPI through host buffers without NCCL). */
    mp_status (*alltoallv)(const mp_group *g, mp_real_kind kind, const void *send,
                           const size_t *send_counts, void *recv, const size_t *recv_counts,
                           mp_error *err);
    /* Pipeline point-to-point, with the semantics the schedules are checked
     * under (sim/schedule.h): send copies buf and returns at once, never
     * waiting for its receive; recv blocks until the message from peer with
     * this tag has arrived. send_wait completes every send made so far. */
    mp_status (*send)(const mp_group *g, mp_real_kind kind, const void *buf, size_t count,
                      int peer, int tag, mp_error *err);
    mp_status (*recv)(const mp_group *g, mp_real_kind kind, void *buf, size_t count, int peer,
                      int tag, mp_error *err);
    mp_status (*send_wait)(mp_error *err);
    /* One step of a ring: send count elements to `to` and receive count from
     * `from` at once (never deadlocks when every rank of a ring calls it). */
    mp_status (*sendrecv)(const mp_group *g, mp_real_kind kind, const void *send, int to,
                          void *recv, int from, size_t count, int tag, mp_error *err);
    /* ---- the driver's and the check's collectives (exec.c, check.c): host
     * buffers on every backend, the CUDA backend's too; each wait under the
     * watchdog. No other executor file calls MPI (tests/exec/mpi_confined.sh). ---- */
    /* Returns once every rank of the group has called it. */
    mp_status (*barrier)(const mp_group *g, mp_error *err);
    /* buf[bytes] of group rank root to every rank. */
    mp_status (*bcast)(const mp_group *g, void *buf, size_t bytes, int root, mp_error *err);
    /* Root's recv = every rank's send, in rank order, counts[r] bytes from
     * rank r (bytes: this rank's); recv and counts are read on root only. */
    mp_status (*gather)(const mp_group *g, const void *send, size_t bytes, void *recv,
                        const size_t *counts, int root, mp_error *err);
    /* Seconds on a clock shared by the ranks of one machine. */
    double (*now)(void);
} mp_backend;

/* OpenBLAS (one thread per rank) and MPI. */
const mp_backend *mp_backend_cpu(void);
/* The CPU backend's compute and clock, every collective and message left out
 * (exec --solo: one process runs one rank's compute; backend_solo.c says what
 * buffers hold). */
const mp_backend *mp_backend_solo(void);
/* The same for any backend: base's memory, compute and clock (a static table
 * per base; the CUDA backend's solo variant). */
const mp_backend *mp_backend_solo_of(const mp_backend *base);

#endif
