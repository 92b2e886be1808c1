/* backend_cpu.c — the CPU backend: host memory (calloc, memcpy), GEMMs by
 * cblas_sgemm/dgemm (OpenBLAS, one thread per rank: ranks are the
 * parallelism), the layer ops by the functions of layers.c and optimizer.c
 * for the pointers' real kind, collectives by MPI (non-blocking, completed
 * under the watchdog: watchdog.h), time by
 * clock_gettime(CLOCK_MONOTONIC), which all ranks of one machine share. */
#include "exec/alltoall_mpi.h"
#include "exec/backend.h"
#include "exec/coll_mpi.h"
#include "exec/kernels.h"
#include "exec/mpi_util.h"
#include "exec/t5.h"
#include "exec/p2p_mpi.h"
#include "exec/watchdog.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *cpu_alloc(size_t bytes)
{
    return calloc(bytes ? bytes : 1, 1);
}

static void cpu_free(void *p)
{
    free(p);
}

static void cpu_copy(void *dst, const void *src, size_t bytes, mp_copy_dir dir)
{
    (void)dir;
    if (dst != src && bytes)
        memmove(dst, src, bytes);
}

static void cpu_copy2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                       size_t width, size_t rows, mp_copy_dir dir)
{
    (void)dir;
    for (size_t r = 0; r < rows; r++)
        memmove((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch, width);
}

static void cpu_zero(void *p, size_t bytes)
{
    if (bytes)
        memset(p, 0, bytes);
}

static mp_status cpu_sync(mp_error *err)
{
    (void)err;
    return MP_OK;
}

/* Each op calls layers.c's function of the pointers' real kind. */
#define BY_KIND(kind, fn, ...)                                                              \
    do {                                                                                    \
        if ((kind) == MP_REAL32)                                                            \
            fn##_f32(__VA_ARGS__);                                                          \
        else                                                                                \
            fn##_f64(__VA_ARGS__);                                                          \
    } while (0)

static void cpu_quantize(mp_real_kind k, void *x, size_t rows, size_t cols, size_t ld, int grid,
                         int max_int)
{
    BY_KIND(k, mp_quantize_rows, x, rows, cols, ld, grid, max_int);
}

static void cpu_layernorm_forward(mp_real_kind k, void *out, void *xhat, void *rstd,
                                  const void *x, const void *w, const void *b, int rows, int h,
                                  double eps, bool exact)
{
    BY_KIND(k, mp_layernorm_forward, out, xhat, rstd, x, w, b, rows, h, eps, exact);
}

static void cpu_layernorm_backward(mp_real_kind k, void *dx, void *dw, void *db,
                                   const void *dout, const void *xhat, const void *rstd,
                                   const void *w, int rows, int h, bool exact)
{
    BY_KIND(k, mp_layernorm_backward, dx, dw, db, dout, xhat, rstd, w, rows, h, exact);
}

static void cpu_rmsnorm_forward(mp_real_kind k, void *out, void *xhat, void *rstd,
                                const void *x, const void *w, int rows, int h, double eps,
                                bool exact)
{
    BY_KIND(k, mp_rmsnorm_forward, out, xhat, rstd, x, w, rows, h, eps, exact);
}

static void cpu_rmsnorm_backward(mp_real_kind k, void *dx, void *dw, const void *dout,
                                 const void *xhat, const void *rstd, const void *w, int rows,
                                 int h, bool exact)
{
    BY_KIND(k, mp_rmsnorm_backward, dx, dw, dout, xhat, rstd, w, rows, h, exact);
}

static void cpu_gelu_forward(mp_real_kind k, void *out, const void *in, size_t n)
{
    BY_KIND(k, mp_gelu_forward, out, in, n);
}

static void cpu_gelu_backward(mp_real_kind k, void *din, const void *dout, const void *in,
                              size_t n)
{
    BY_KIND(k, mp_gelu_backward, din, dout, in, n);
}

static void cpu_gelu_erf_forward(mp_real_kind k, void *out, const void *in, size_t n)
{
    BY_KIND(k, mp_gelu_erf_forward, out, in, n);
}

static void cpu_gelu_erf_backward(mp_real_kind k, void *din, const void *dout, const void *in,
                                  size_t n)
{
    BY_KIND(k, mp_gelu_erf_backward, din, dout, in, n);
}

static void cpu_geglu_forward(mp_real_kind k, void *out, const void *gu, int rows, int f,
                              bool erf)
{
    BY_KIND(k, mp_geglu_forward, out, gu, rows, f, erf);
}

static void cpu_geglu_backward(mp_real_kind k, void *dgu, const void *dout, const void *gu,
                               int rows, int f, bool erf)
{
    BY_KIND(k, mp_geglu_backward, dgu, dout, gu, rows, f, erf);
}

static void cpu_swiglu_forward(mp_real_kind k, void *out, const void *gu, int rows, int f)
{
    BY_KIND(k, mp_swiglu_forward, out, gu, rows, f);
}

static void cpu_swiglu_backward(mp_real_kind k, void *dgu, const void *dout, const void *gu,
                                int rows, int f)
{
    BY_KIND(k, mp_swiglu_backward, dgu, dout, gu, rows, f);
}

static void cpu_tanh_forward(mp_real_kind k, void *out, const void *in, size_t n)
{
    BY_KIND(k, mp_tanh_forward, out, in, n);
}

static void cpu_tanh_backward(mp_real_kind k, void *dx, const void *y, size_t n)
{
    BY_KIND(k, mp_tanh_backward, dx, y, n);
}

static void cpu_relu_forward(mp_real_kind k, void *out, const void *in, size_t n)
{
    BY_KIND(k, mp_relu_forward, out, in, n);
}

static void cpu_relu_backward(mp_real_kind k, void *din, const void *dout, const void *in,
                              size_t n)
{
    BY_KIND(k, mp_relu_backward, din, dout, in, n);
}

/* scale: a double holding the caller's real, as attn_softmax's */
static void cpu_rel_bias_add(mp_real_kind k, void *p, int s, int sk, bool causal, double scale,
                             const void *table, int table_ld, int head, const int32_t *bucket)
{
    if (k == MP_REAL32)
        mp_t5_rel_bias_add_f32(p, s, sk, causal, (float)scale, table, table_ld, head, bucket);
    else
        mp_t5_rel_bias_add_f64(p, s, sk, causal, scale, table, table_ld, head, bucket);
}

static void cpu_rel_bias_grad(mp_real_kind k, void *ds, void *dtable, int s, int sk,
                              bool causal, double scale, int buckets, int table_ld, int head,
                              const int32_t *bucket, bool exact)
{
    (void)buckets; /* the rows in order: any bucket */
    if (k == MP_REAL32)
        mp_t5_rel_bias_grad_f32(ds, dtable, s, sk, causal, (float)scale, table_ld, head, bucket,
                                exact);
    else
        mp_t5_rel_bias_grad_f64(ds, dtable, s, sk, causal, scale, table_ld, head, bucket,
                                exact);
}

static void cpu_rope(mp_real_kind k, void *x, size_t ld, int heads, int hd,
                     const mp_rope_spec *spec, const int *pos, int s, int b, bool inverse,
                     bool exact, int grid)
{
    BY_KIND(k, mp_rope, x, ld, heads, hd, spec, pos, s, b, inverse, exact, grid);
}

static void cpu_bias_add(mp_real_kind k, void *y, const void *b, int rows, int cols)
{
    BY_KIND(k, mp_bias_add, y, b, rows, cols);
}

static void cpu_bias_grad(mp_real_kind k, void *db, const void *dy, int rows, int cols)
{
    BY_KIND(k, mp_bias_grad, db, dy, rows, cols);
}

static void cpu_add(mp_real_kind k, void *y, const void *x, size_t n)
{
    BY_KIND(k, mp_add, y, x, n);
}

/* scale arrives as a double holding the caller's real: converting back is exact */
static void cpu_attn_softmax(mp_real_kind k, void *p, int s, int sk, const int *qpos,
                             bool causal, double scale, bool exact)
{
    if (k == MP_REAL32)
        mp_attn_softmax_f32(p, s, sk, qpos, causal, (float)scale, exact);
    else
        mp_attn_softmax_f64(p, s, sk, qpos, causal, scale, exact);
}

static void cpu_attn_softmax_backward(mp_real_kind k, void *ds, const void *p, int s, int sk,
                                      const int *qpos, bool causal, double scale, bool exact)
{
    if (k == MP_REAL32)
        mp_attn_softmax_backward_f32(ds, p, s, sk, qpos, causal, (float)scale, exact);
    else
        mp_attn_softmax_backward_f64(ds, p, s, sk, qpos, causal, scale, exact);
}

/* GPT-OSS's variants (attention_sink.c) */
static void cpu_attn_softmax_oss(mp_real_kind k, void *p, int s, int sk, const int *qpos,
                                 bool causal, int window, const void *sink, double scale,
                                 bool exact)
{
    if (k == MP_REAL32)
        mp_attn_softmax_oss_f32(p, s, sk, qpos, causal, window, sink, (float)scale, exact);
    else
        mp_attn_softmax_oss_f64(p, s, sk, qpos, causal, window, sink, scale, exact);
}

static void cpu_attn_softmax_oss_backward(mp_real_kind k, void *ds, void *dsink, const void *p,
                                          int s, int sk, const int *qpos, bool causal,
                                          int window, double scale, bool exact)
{
    if (k == MP_REAL32)
        mp_attn_softmax_oss_backward_f32(ds, dsink, p, s, sk, qpos, causal, window,
                                         (float)scale, exact);
    else
        mp_attn_softmax_oss_backward_f64(ds, dsink, p, s, sk, qpos, causal, window, scale,
                                         exact);
}

static void cpu_swiglu_clamped_forward(mp_real_kind k, void *out, const void *gu, int rows,
                                       int f, double limit)
{
    if (k == MP_REAL32)
        mp_swiglu_clamped_forward_f32(out, gu, rows, f, (float)limit);
    else
        mp_swiglu_clamped_forward_f64(out, gu, rows, f, limit);
}

static void cpu_swiglu_clamped_backward(mp_real_kind k, void *dgu, const void *dout,
                                        const void *gu, int rows, int f, double limit)
{
    if (k == MP_REAL32)
        mp_swiglu_clamped_backward_f32(dgu, dout, gu, rows, f, (float)limit);
    else
        mp_swiglu_clamped_backward_f64(dgu, dout, gu, rows, f, limit);
}

static void cpu_ce_max(mp_real_kind k, void *mx, const void *logits, size_t S, size_t V)
{
    BY_KIND(k, mp_ce_max, mx, logits, S, V);
}

static void cpu_ce_exp_sum(mp_real_kind k, void *logits, void *sum, void *tl, const void *mx,
                           const int32_t *targets, size_t lo, size_t S, size_t V, bool exact)
{
    BY_KIND(k, mp_ce_exp_sum, logits, sum, tl, mx, targets, lo, S, V, exact);
}

static void cpu_ce_loss(mp_real_kind k, void *loss, void *logits, const void *sum,
                        const void *mx, const void *tl, const int32_t *targets, size_t S,
                        size_t V, bool exact)
{
    BY_KIND(k, mp_ce_loss, loss, logits, sum, mx, tl, targets, S, V, exact);
}

static void cpu_ce_backward(mp_real_kind k, void *logits, const int32_t *targets, size_t lo,
                            size_t S, size_t V, double scale, bool masked)
{
    if (k == MP_REAL32)
        mp_ce_backward_f32(logits, targets, lo, S, V, (float)scale, masked);
    else
        mp_ce_backward_f64(logits, targets, lo, S, V, scale, masked);
}

static void cpu_gather_rows(mp_real_kind k, void *out, const void *table, const int32_t *idx,
                            size_t lo, size_t n, size_t rows, size_t h, bool accumulate)
{
    BY_KIND(k, mp_gather_rows, out, table, idx, lo, n, rows, h, accumulate);
}

static void cpu_scatter_add_rows(mp_real_kind k, void *table, const void *x, const int32_t *idx,
                                 size_t lo, size_t n, size_t rows, size_t h)
{
    BY_KIND(k, mp_scatter_add_rows, table, x, idx, lo, n, rows, h);
}

/* ---- mixture of experts (moe_ops.c) ---- */

static void cpu_moe_scores(mp_real_kind k, void *scores, const void *logits, size_t S, size_t E,
                           bool sigmoid)
{
    BY_KIND(k, mp_moe_scores, scores, logits, S, E, sigmoid);
}

static void cpu_moe_topk(mp_real_kind k, void *choice, void *wgt, const void *scores,
                         const void *bias, size_t S, size_t E, size_t kk, size_t groups,
                         size_t group_k, double scale)
{
    BY_KIND(k, mp_moe_topk, choice, wgt, scores, bias, S, E, kk, groups, group_k, scale);
}

static void cpu_moe_capacity(mp_real_kind k, void *kept, const void *all, size_t rows, size_t b,
                             size_t E, size_t kk, size_t cp, size_t me, size_t r0, size_t S,
                             size_t capacity)
{
    BY_KIND(k, mp_moe_capacity, kept, all, rows, b, E, kk, cp, me, r0, S, capacity);
}

static void cpu_moe_send_order(mp_real_kind k, void *sorder, void *counts, void *tags,
                               size_t tag_ld, const void *choice, const void *kept, size_t Sk,
                               size_t El, size_t ep)
{
    BY_KIND(k, mp_moe_send_order, sorder, counts, tags, tag_ld, choice, kept, Sk, El, ep);
}

static void cpu_moe_expert_order(mp_real_kind k, void *rorder, void *ne, const void *tags,
                                 size_t tag_ld, size_t n, size_t El)
{
    BY_KIND(k, mp_moe_expert_order, rorder, ne, tags, tag_ld, n, El);
}

static void cpu_moe_gather(mp_real_kind k, void *dst, size_t dld, const void *src, size_t sld,
                           const void *idx, size_t div, const void *wgt, size_t n, size_t h)
{
    BY_KIND(k, mp_moe_gather, dst, dld, src, sld, idx, div, wgt, n, h);
}

static void cpu_moe_scatter(mp_real_kind k, void *dst, size_t dld, const void *src, size_t sld,
                            const void *idx, size_t div, size_t n, size_t h, bool accumulate)
{
    BY_KIND(k, mp_moe_scatter, dst, dld, src, sld, idx, div, n, h, accumulate);
}

static void cpu_moe_combine(mp_real_kind k, void *out, const void *y, const void *wgt,
                            const void *kept, size_t r0, size_t Sl, size_t kk, size_t h)
{
    BY_KIND(k, mp_moe_combine, out, y, wgt, kept, r0, Sl, kk, h);
}

static void cpu_moe_combine_backward(mp_real_kind k, void *dwl, const void *dout, const void *y,
                                     const void *kept, size_t r0, size_t Sl, size_t kk, size_t h)
{
    BY_KIND(k, mp_moe_combine_backward, dwl, dout, y, kept, r0, Sl, kk, h);
}

static void cpu_moe_count(mp_real_kind k, void *load, const void *choice, const void *kept,
                          size_t Sk, size_t E)
{
    (void)E;
    BY_KIND(k, mp_moe_count, load, choice, kept, Sk);
}

static void cpu_moe_weights_backward(mp_real_kind k, void *dl, const void *scores,
                                     const void *choice, const void *wgt, const void *dwf,
                                     size_t S, size_t E, size_t kk, double scale)
{
    BY_KIND(k, mp_moe_weights_backward, dl, scores, choice, wgt, dwf, S, E, kk, scale);
}

static void cpu_moe_scores_backward(mp_real_kind k, void *dl, const void *scores, size_t S,
                                    size_t E, bool sigmoid)
{
    BY_KIND(k, mp_moe_scores_backward, dl, scores, S, E, sigmoid);
}

static void cpu_moe_bias_update(mp_real_kind k, void *bias, const void *load, size_t E,
                                double rate)
{
    BY_KIND(k, mp_moe_bias_update, bias, load, E, rate);
}

static double cpu_sum(mp_real_kind k, const void *x, size_t n)
{
    return k == MP_REAL32 ? mp_sum_in_order_f32(x, n) : mp_sum_in_order_f64(x, n);
}

static void cpu_adamw(mp_real_kind k, void *w, const void *grad, void *m, void *v,
                      const struct mp_param_layout *lay, size_t lo, size_t hi,
                      const struct mp_adam_cfg *cfg, int step, bool exact)
{
    BY_KIND(k, mp_adamw_update, w, grad, m, v, lay, lo, hi, cfg, step, exact);
}

static void cpu_gemm(mp_real_kind kind, bool trans_a, bool trans_b, int m, int n, int k,
                     double alpha, const void *a, int lda, const void *b, int ldb, double beta,
                     void *c, int ldc)
{
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    if (kind == MP_REAL32)
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta,
                    c, ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_gemm_grouped(mp_real_kind kind, bool trans_a, bool trans_b, int count,
                             const int *m, const int *n, const int *k, double alpha,
                             const void *const *a, int lda, const void *const *b, int ldb,
                             double beta, void *const *c, int ldc)
{
    for (int i = 0; i < count; i++)
        cpu_gemm(kind, trans_a, trans_b, m[i], n[i], k[i], alpha, a[i], lda, b[i], ldb, beta,
                 c[i], ldc);
}

/* MPI counts are int: longer buffers go in slices. */
#define MAX_SLICE ((size_t)1 << 30)

static mp_status cpu_allreduce(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                               mp_reduce_op op, mp_error *err)
{
    if (g->size == 1)
        return MP_OK;
    char *p = buf;
    for (size_t done = 0; done < count;) {
        size_t n = count - done < MAX_SLICE ? count - done : MAX_SLICE;
        MPI_Request req;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, p + done * mp_real_size(kind), (int)n,
                                mp_mpi_type(kind), op == MP_RED_SUM ? MPI_SUM : MPI_MAX, g->comm,
                                &req);
        if (rc != MPI_SUCCESS)
            return mp_mpi_failed(rc, "MPI_Iallreduce", err);
        mp_status st = mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "all-reduce", g, -1, err);
        if (st)
            return st;
        done += n;
    }
    return MP_OK;
}

static mp_status cpu_allgather(const mp_group *g, mp_real_kind kind, const void *send,
                               void *recv, size_t count, mp_error *err)
{
    if (count > MAX_SLICE)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL,
                            "all-gather of %zu elements per rank is too large", count);
    if (g->size == 1) {
        if (recv != send)
            __builtin_memmove(recv, send, count * mp_real_size(kind));
        return MP_OK;
    }
    MPI_Request req;
    int rc = MPI_Iallgather(send, (int)count, mp_mpi_type(kind), recv, (int)count,
                            mp_mpi_type(kind), g->comm, &req);
    if (rc != MPI_SUCCESS)
        return mp_mpi_failed(rc, "MPI_Iallgather", err);
    return mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "all-gather", g, -1, err);
}

static mp_status cpu_reduce_scatter(const mp_group *g, mp_real_kind kind, const void *send,
                                    void *recv, size_t count, mp_error *err)
{
    if (count > MAX_SLICE)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL,
                            "reduce-scatter of %zu elements per rank is too large", count);
    if (g->size == 1) {
        if (recv != send)
            __builtin_memmove(recv, send, count * mp_real_size(kind));
        return MP_OK;
    }
    MPI_Request req;
    int rc = MPI_Ireduce_scatter_block(send, recv, (int)count, mp_mpi_type(kind), MPI_SUM,
                                       g->comm, &req);
    if (rc != MPI_SUCCESS)
        return mp_mpi_failed(rc, "MPI_Ireduce_scatter_block", err);
    return mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE, "reduce-scatter", g, -1, err);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const mp_backend cpu_backend = {
    .name = "cpu",
    .host_memory = true,
    .transport = "mpi",
    .precision = "fp32",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .copy2d = cpu_copy2d,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .quantize = cpu_quantize,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .rmsnorm_forward = cpu_rmsnorm_forward,
    .rmsnorm_backward = cpu_rmsnorm_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .gelu_erf_forward = cpu_gelu_erf_forward,
    .gelu_erf_backward = cpu_gelu_erf_backward,
    .geglu_forward = cpu_geglu_forward,
    .geglu_backward = cpu_geglu_backward,
    .swiglu_forward = cpu_swiglu_forward,
    .swiglu_backward = cpu_swiglu_backward,
    .tanh_forward = cpu_tanh_forward,
    .tanh_backward = cpu_tanh_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .rel_bias_add = cpu_rel_bias_add,
    .rel_bias_grad = cpu_rel_bias_grad,
    .rope = cpu_rope,
    .bias_add = cpu_bias_add,
    .bias_grad = cpu_bias_grad,
    .add = cpu_add,
    .attn_softmax = cpu_attn_softmax,
    .attn_softmax_backward = cpu_attn_softmax_backward,
    .attn_softmax_oss = cpu_attn_softmax_oss,
    .attn_softmax_oss_backward = cpu_attn_softmax_oss_backward,
    .swiglu_clamped_forward = cpu_swiglu_clamped_forward,
    .swiglu_clamped_backward = cpu_swiglu_clamped_backward,
    .ce_max = cpu_ce_max,
    .ce_exp_sum = cpu_ce_exp_sum,
    .ce_loss = cpu_ce_loss,
    .ce_backward = cpu_ce_backward,
    .gather_rows = cpu_gather_rows,
    .scatter_add_rows = cpu_scatter_add_rows,
    .moe_scores = cpu_moe_scores,
    .moe_topk = cpu_moe_topk,
    .moe_capacity = cpu_moe_capacity,
    .moe_send_order = cpu_moe_send_order,
    .moe_expert_order = cpu_moe_expert_order,
    .moe_gather = cpu_moe_gather,
    .moe_scatter = cpu_moe_scatter,
    .moe_combine = cpu_moe_combine,
    .moe_combine_backward = cpu_moe_combine_backward,
    .moe_count = cpu_moe_count,
    .moe_weights_backward = cpu_moe_weights_backward,
    .moe_scores_backward = cpu_moe_scores_backward,
    .moe_bias_update = cpu_moe_bias_update,
    .sum = cpu_sum,
    .adamw = cpu_adamw,
    .gemm = cpu_gemm,
    .gemm_grouped = cpu_gemm_grouped,
    .allreduce = cpu_allreduce,
    .allgather = cpu_allgather,
    .reduce_scatter = cpu_reduce_scatter,
    .alltoallv = mp_alltoallv_mpi,
    .send = mp_p2p_mpi_send,
    .recv = mp_p2p_mpi_recv,
    .send_wait = mp_p2p_mpi_send_wait,
    .sendrecv = mp_p2p_mpi_sendrecv,
    .barrier = mp_coll_mpi_barrier,
    .bcast = mp_coll_mpi_bcast,
    .gather = mp_coll_mpi_gather,
    .now = cpu_now,
};

const mp_backend *mp_backend_cpu(void)
{
    /* one BLAS thread per rank: the ranks are the parallelism, and more
     * threads than cores would oversubscribe the machine */
    static bool single = false;
    if (!single) {
        openblas_set_num_threads(1);
        single = true;
    }
    return &cpu_backend;
}
