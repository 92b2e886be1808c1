/* backend_cuda.c — the CUDA backend (backend_cuda.h): every tensor of the
 * model in device memory; GEMMs by cuBLAS, the layer ops by the kernels of
 * kernels/ (kernels.h), all on one compute stream; collectives by NCCL on a
 * communication stream ordered against the compute stream by events, or,
 * when the node has fewer GPUs than ranks (NCCL refuses two ranks on one
 * GPU), by MPI through host buffers; pipeline messages by MPI through host
 * buffers (p2p_mpi.c: a send must return before its receive is posted, which
 * the schedules' deadlock check assumes and a stream-ordered ncclSend does
 * not give); the CP ring's steps by ncclSend/ncclRecv in one group.
 *
 * Precision: fp32 GEMMs with TF32 off (CUBLAS_COMPUTE_32F_PEDANTIC) in exact
 * mode and for fp32 plans; for bf16 and fp16 plans cuBLAS rounds the GEMMs'
 * inputs to bf16 and accumulates in fp32 (CUBLAS_COMPUTE_32F_FAST_16BF, the
 * tensor cores), while weights, gradients, activations between ops and the
 * optimizer state stay fp32: Megatron's bf16 recipe with fp32 master weights
 * (docs/exec.md says what that leaves out).
 *
 * Ops return nothing (backend.h): the first failure is kept and the next
 * sync() reports it. */
#include "exec/backend_cuda.h"

#ifdef MP_CUDA_HOST_SHIM
#include "exec/cuda_host_shim.h" /* the emulation test's host stand-ins */
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/alltoall_mpi.h"
#include "exec/kernels.h"
#include "exec/moe.h"
#include "exec/mpi_util.h"
#include "exec/coll_mpi.h"
#include "exec/p2p_mpi.h"
#include "exec/params.h"
#include "exec/random_unit.h"
#include "kernels/kernels.h"
#include "megaplan_config.h"
#if defined(MP_CUDA_HOST_SHIM) && HAVE_NCCL
#undef HAVE_NCCL
#define HAVE_NCCL 0 /* no NCCL without a GPU: the emulation stages through MPI */
#endif
#if HAVE_NCCL
#include <nccl.h>
#endif

#define MAX_ROPE_TABLES 16
#define MAX_TIMED_GEMMS (1 << 16)

typedef struct nccl_link {
    MPI_Comm comm;
#if HAVE_NCCL
    ncclComm_t nccl;
#endif
} nccl_link;

static struct cuda_state {
    bool open, bf16, nccl;
    int device;
    cudaStream_t compute, comm;
    cudaEvent_t compute_done, comm_done;
    cublasHandle_t blas;
    bool failed;
    char failure[256];
    nccl_link links[MP_CUDA_MAX_GROUPS];
    int n_links;
    void *stage[2]; /* host staging buffers for MPI (collectives, messages) */
    size_t stage_bytes[2];
    struct {
        const int *pos;
        int s, hd;
        bool exact;
        mp_rope_spec spec;
        float *cs;
    } rope[MAX_ROPE_TABLES];
    int n_rope;
    /* every GEMM's FLOPs and, for the first MAX_TIMED_GEMMS, its events */
    double gemm_flops, untimed_flops, staged_flops;
    long gemm_calls, gemm_staged;
    cudaEvent_t *gemm_ev; /* [2 * MAX_TIMED_GEMMS], made on first use */
    bool *gemm_was_staged; /* [MAX_TIMED_GEMMS]: the timed call ran on bf16 copies */
    int n_timed;
    float *terms; /* [n_terms] the sink gradient's per-row terms */
    size_t n_terms;
    /* the grouped GEMM's host arrays and the device copy of its matrices'
     * addresses, for up to n_grouped GEMMs */
    struct {
        int *ints;
        float *scale;
        cublasOperation_t *ops;
        const void **ptrs;
    } gh;
    void **gptrs;
    size_t n_grouped;
    uint16_t *b16[2]; /* bf16 plans: a GEMM's two operands rounded (cuda_gemm) */
    size_t n_b16[2];
} C;

static mp_backend cuda_backend;

/* ---- failures: the first is kept for sync() ---- */

static void fail(const char *what, const char *why)
{
    if (C.failed)
        return;
    C.failed = true;
    snprintf(C.failure, sizeof C.failure, "%s: %s", what, why);
}

static void check_cuda(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess)
        fail(what, cudaGetErrorString(rc));
}

static void check_kernel(int rc, const char *what)
{
    if (rc != MPK_OK)
        fail(what, mpk_strerror(rc));
}

static bool is_f32(mp_real_kind kind, const char *what)
{
    if (kind == MP_REAL32)
        return true;
    fail(what, "the CUDA backend computes in float only (the double reference runs on the CPU)");
    return false;
}

/* ---- memory ---- */

static void *cuda_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    /* on the compute stream: everything that uses p is ordered after it (a
     * plain cudaMemset runs on the legacy stream, which the non-blocking
     * compute stream does not wait for) */
    if (cudaMemsetAsync(p, 0, bytes ? bytes : 1, C.compute) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void cuda_free(void *p)
{
    if (p)
        check_cuda(cudaFree(p), "cudaFree");
}

static enum cudaMemcpyKind copy_kind(mp_copy_dir dir)
{
    switch (dir) {
    case MP_COPY_H2D: return cudaMemcpyHostToDevice;
    case MP_COPY_D2H: return cudaMemcpyDeviceToHost;
    case MP_COPY_H2H: return cudaMemcpyHostToHost;
    case MP_COPY_D2D: break;
    }
    return cudaMemcpyDeviceToDevice;
}

/* Copies to the host wait for the stream: the caller reads the result next. */
static void cuda_copy(void *dst, const void *src, size_t bytes, mp_copy_dir dir)
{
    if (!bytes || dst == src)
        return;
    check_cuda(cudaMemcpyAsync(dst, src, bytes, copy_kind(dir), C.compute), "cudaMemcpyAsync");
    if (dir == MP_COPY_D2H || dir == MP_COPY_H2D)
        check_cuda(cudaStreamSynchronize(C.compute), "cudaStreamSynchronize");
}

static void cuda_copy2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                        size_t width, size_t rows, mp_copy_dir dir)
{
    if (!rows || !width)
        return;
    check_cuda(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, copy_kind(dir),
                                 C.compute),
               "cudaMemcpy2DAsync");
    if (dir == MP_COPY_D2H || dir == MP_COPY_H2D)
        check_cuda(cudaStreamSynchronize(C.compute), "cudaStreamSynchronize");
}

static void cuda_zero(void *p, size_t bytes)
{
    if (bytes)
        check_cuda(cudaMemsetAsync(p, 0, bytes, C.compute), "cudaMemsetAsync");
}

static mp_status cuda_sync(mp_error *err)
{
    check_cuda(cudaStreamSynchronize(C.compute), "cudaStreamSynchronize");
    check_cuda(cudaGetLastError(), "a kernel");
    if (!C.failed)
        return MP_OK;
    C.failed = false;
    return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "CUDA backend: %s", C.failure);
}

/* A host buffer of at least bytes (slot 0 or 1), kept between calls. */
static void *stage(int slot, size_t bytes)
{
    if (bytes > C.stage_bytes[slot]) {
        void *p = NULL;
        if (cudaMallocHost(&p, bytes) != cudaSuccess)
            return NULL;
        if (C.stage[slot])
            cudaFreeHost(C.stage[slot]);
        C.stage[slot] = p;
        C.stage_bytes[slot] = bytes;
    }
    return C.stage[slot];
}

/* The emulation's kernels run on the host: its device memory is readable
 * only while they do (cuda_host_shim.h). */
#ifdef MP_CUDA_HOST_SHIM
#define DEVICE_OPEN() shim_device_open()
#define DEVICE_CLOSE() shim_device_close()
#else
#define DEVICE_OPEN() ((void)0)
#define DEVICE_CLOSE() ((void)0)
#endif

/* A kernel launch, its status kept for sync(). */
#define LAUNCH(name, call)                                                                  \
    do {                                                                                    \
        DEVICE_OPEN();                                                                      \
        int rc_ = (call);                                                                   \
        DEVICE_CLOSE();                                                                     \
        check_kernel(rc_, name);                                                            \
    } while (0)

/* ---- GEMM: row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T ---- */

/* Every GEMM call's FLOPs, and, for the first MAX_TIMED_GEMMS, events around
 * it on the compute stream (mp_cuda_gemm_stats); NULL: not timed. */
static cudaEvent_t *gemm_timer_begin(double flops, bool staged)
{
    C.gemm_calls++;
    C.gemm_staged += staged;
    cudaEvent_t *ev = NULL;
    if (!C.gemm_ev) { /* no room: count, do not time (and try again next call) */
        C.gemm_ev = calloc(2 * MAX_TIMED_GEMMS, sizeof *C.gemm_ev);
        C.gemm_was_staged = calloc(MAX_TIMED_GEMMS, sizeof *C.gemm_was_staged);
        if (!C.gemm_ev || !C.gemm_was_staged) {
            free(C.gemm_ev);
            free(C.gemm_was_staged);
            C.gemm_ev = NULL, C.gemm_was_staged = NULL;
        }
    }
    if (C.gemm_ev && C.n_timed < MAX_TIMED_GEMMS) {
        ev = &C.gemm_ev[2 * C.n_timed];
        if ((!ev[0] && cudaEventCreate(&ev[0]) != cudaSuccess) ||
            (!ev[1] && cudaEventCreate(&ev[1]) != cudaSuccess))
            ev = NULL;
    }
    if (ev) {
        C.gemm_flops += flops;
        C.staged_flops += staged ? flops : 0;
        C.gemm_was_staged[C.n_timed] = staged;
        cudaEventRecord(ev[0], C.compute);
    } else {
        C.untimed_flops += flops;
    }
    return ev;
}

static void gemm_timer_end(cudaEvent_t *ev)
{
    if (ev) {
        cudaEventRecord(ev[1], C.compute);
        C.n_timed++;
    }
}

/* bf16 plans. cuBLAS's FAST_16BF on fp32 operands ran at half its rate on
 * bf16 ones on an H200 (438 against 876 TFLOP/s at 8192^3, both on the same
 * low-entropy data: the executor's first GPU check, docs/gpu/2026-12-04-a),
 * so a GEMM whose operands are cheap to round first runs on bf16 copies.
 * Rounding costs 6 bytes per element (read 4, write 2): it pays where that
 * takes less time than the half rate loses, 2mnk / (6 (mk + nk)) above the
 * machine's balance (770-876 TFLOP/s over the 4.2 TB/s of a copy: 180-210
 * FLOP/B); i.e. mn / (m + n) >= 600. The linear layers' products pass;
 * attention's P V and its backward's dV, dQ and dK (one side the head's 128)
 * stay on FAST_16BF, which reads the fp32 probabilities once. Both round to
 * nearest even and accumulate in fp32. */
#define STAGE_BF16_MIN_MN_OVER_M_PLUS_N 600.0

/* Operand slot (0 or 1) rounded to bf16: column-major rows x cols, ld apart,
 * packed rows apart into a device buffer kept between calls (stream-ordered,
 * so one per operand suffices); NULL after a failure. */
static const uint16_t *bf16_operand(int slot, const void *x, int rows, int cols, int ld)
{
    size_t count = (size_t)rows * (size_t)cols;
    if (count > C.n_b16[slot]) {
        cuda_free(C.b16[slot]);
        C.b16[slot] = cuda_alloc(count * sizeof *C.b16[slot]);
        C.n_b16[slot] = C.b16[slot] ? count : 0;
        if (!C.b16[slot]) {
            fail("gemm", "out of device memory for the bf16 operands");
            return NULL;
        }
    }
    LAUNCH("gemm (bf16 operand)", mpk_f32_to_bf16_2d(C.b16[slot], x, (size_t)rows, (size_t)cols,
                                                     (size_t)ld, C.compute));
    return C.failed ? NULL : C.b16[slot];
}

static bool stage_bf16(int m, int n)
{
    return C.bf16 && (double)m * n / ((double)m + n) >= STAGE_BF16_MIN_MN_OVER_M_PLUS_N;
}

static void cuda_gemm(mp_real_kind kind, bool trans_a, bool trans_b, int m, int n, int k,
                      double alpha, const void *a, int lda, const void *b, int ldb, double beta,
                      void *c, int ldc)
{
    if (!is_f32(kind, "gemm") || !m || !n)
        return;
    float al = (float)alpha, be = (float)beta;
    bool staged = k > 0 && stage_bf16(m, n);
    cudaEvent_t *ev = gemm_timer_begin(2.0 * m * (double)n * k, staged); /* rounding included */
    /* cuBLAS's A is our B (n x k op'd), its B our A (k x m op'd) */
    cublasOperation_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t in = CUDA_R_32F;
    cublasComputeType_t compute =
        C.bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_PEDANTIC;
    if (staged) {
        int br = trans_b ? k : n, bc = trans_b ? n : k;
        int ar = trans_a ? m : k, ac = trans_a ? k : m;
        b = bf16_operand(0, b, br, bc, ldb);
        a = bf16_operand(1, a, ar, ac, lda);
        if (!a || !b)
            return;
        ldb = br, lda = ar, in = CUDA_R_16BF, compute = CUBLAS_COMPUTE_32F;
    }
    cublasStatus_t rc = cublasGemmEx(C.blas, op_a, op_b, n, m, k, &al, b, in, ldb, a, in, lda,
                                     &be, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT);
    if (rc != CUBLAS_STATUS_SUCCESS)
        fail("cublasGemmEx", cublasGetStatusString(rc));
    gemm_timer_end(ev);
}

/* One cublasGemmGroupedBatchedEx (cuBLAS >= 12.5) for count GEMMs, each its
 * own group of one, as cuda_gemm maps each: column-major C^T = op(B)^T
 * op(A)^T. The matrices' addresses go to the device (cuBLAS reads them
 * there) through a buffer kept between calls; the copy is from pageable
 * memory, which cudaMemcpyAsync has staged when it returns, so the host
 * arrays are free again at once. */
#if CUBLAS_VERSION >= 120500
static bool grouped_scratch(int count)
{
    if ((size_t)count <= C.n_grouped)
        return true;
    size_t n = (size_t)count;
    free(C.gh.ints);
    free(C.gh.scale);
    free(C.gh.ops);
    free(C.gh.ptrs);
    cuda_free(C.gptrs);
    C.gh.ints = malloc(7 * n * sizeof *C.gh.ints);
    C.gh.scale = malloc(2 * n * sizeof *C.gh.scale);
    C.gh.ops = malloc(2 * n * sizeof *C.gh.ops);
    C.gh.ptrs = malloc(3 * n * sizeof *C.gh.ptrs);
    C.gptrs = cuda_alloc(3 * n * sizeof *C.gptrs);
    bool ok = C.gh.ints && C.gh.scale && C.gh.ops && C.gh.ptrs && C.gptrs;
    C.n_grouped = ok ? n : 0;
    return ok;
}
#endif

static void cuda_gemm_grouped(mp_real_kind kind, bool trans_a, bool trans_b, int count,
                              const int *m, const int *n, const int *k, double alpha,
                              const void *const *a, int lda, const void *const *b, int ldb,
                              double beta, void *const *c, int ldc)
{
    if (!is_f32(kind, "gemm_grouped") || count <= 0)
        return;
#if CUBLAS_VERSION >= 120500
    if (!C.bf16) {
        if (!grouped_scratch(count)) {
            fail("gemm_grouped", "out of memory for the pointer arrays");
            return;
        }
        size_t N = (size_t)count;
        int *mm = C.gh.ints, *nn = mm + N, *kk = nn + N, *la = kk + N, *lb = la + N;
        int *lc = lb + N, *one = lc + N;
        float *al = C.gh.scale, *be = al + N;
        cublasOperation_t *opa = C.gh.ops, *opb = opa + N;
        const void **hp = C.gh.ptrs;
        double flops = 0;
        for (size_t i = 0; i < N; i++) {
            /* cuBLAS's A is our B, its B our A (cuda_gemm) */
            opa[i] = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
            opb[i] = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
            mm[i] = n[i], nn[i] = m[i], kk[i] = k[i];
            la[i] = ldb, lb[i] = lda, lc[i] = ldc, one[i] = 1;
            al[i] = (float)alpha, be[i] = (float)beta;
            hp[i] = b[i], hp[N + i] = a[i], hp[2 * N + i] = c[i];
            flops += 2.0 * m[i] * (double)n[i] * k[i];
        }
        check_cuda(cudaMemcpyAsync(C.gptrs, hp, 3 * N * sizeof *hp, cudaMemcpyHostToDevice,
                                   C.compute),
                   "cudaMemcpyAsync (grouped GEMM pointers)");
        cudaEvent_t *ev = gemm_timer_begin(flops, false);
        cublasStatus_t rc = cublasGemmGroupedBatchedEx(
            C.blas, opa, opb, mm, nn, kk, al, (const void *const *)C.gptrs, CUDA_R_32F, la,
            (const void *const *)C.gptrs + N, CUDA_R_32F, lb, be, C.gptrs + 2 * N, CUDA_R_32F,
            lc, count, one, CUBLAS_COMPUTE_32F_PEDANTIC);
        if (rc != CUBLAS_STATUS_SUCCESS)
            fail("cublasGemmGroupedBatchedEx", cublasGetStatusString(rc));
        gemm_timer_end(ev);
        return;
    }
#endif
    for (int i = 0; i < count; i++)
        cuda_gemm(kind, trans_a, trans_b, m[i], n[i], k[i], alpha, a[i], lda, b[i], ldb, beta,
                  c[i], ldc);
}

void mp_cuda_gemm_stats(mp_cuda_gemm_stat *out)
{
    cudaStreamSynchronize(C.compute);
    double t = 0, ts = 0;
    for (int i = 0; i < C.n_timed; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, C.gemm_ev[2 * i], C.gemm_ev[2 * i + 1]) == cudaSuccess) {
            t += ms * 1e-3;
            ts += C.gemm_was_staged[i] ? ms * 1e-3 : 0;
        }
    }
    *out = (mp_cuda_gemm_stat){.flops = C.gemm_flops, .seconds = t, .calls = C.gemm_calls,
                               .staged = C.gemm_staged, .staged_flops = C.staged_flops,
                               .staged_seconds = ts};
    C.gemm_flops = C.untimed_flops = C.staged_flops = 0;
    C.gemm_calls = C.gemm_staged = 0;
    C.n_timed = 0;
}

/* ---- layer ops: the kernels of kernels/ on the compute stream ---- */

#define KERNEL(kind, name, call)                                                            \
    do {                                                                                    \
        if (is_f32(kind, name))                                                             \
            LAUNCH(name, call);                                                             \
    } while (0)

static void cuda_quantize(mp_real_kind k, void *x, size_t rows, size_t cols, size_t ld, int grid,
                          int max_int)
{
    KERNEL(k, "quantize",
           rows == 1 ? mpk_quantize(x, cols, grid, max_int, C.compute)
                     : mpk_quantize_2d(x, (int)rows, (int)cols, ld, grid, max_int, C.compute));
}

static void cuda_layernorm_forward(mp_real_kind k, void *out, void *xhat, void *rstd,
                                   const void *x, const void *w, const void *b, int rows, int h,
                                   double eps, bool exact)
{
    KERNEL(k, "layernorm_forward",
           mpk_layernorm_forward(out, xhat, rstd, x, w, b, rows, h, (float)eps, exact,
                                 C.compute));
}

static void cuda_layernorm_backward(mp_real_kind k, void *dx, void *dw, void *db,
                                    const void *dout, const void *xhat, const void *rstd,
                                    const void *w, int rows, int h, bool exact)
{
    KERNEL(k, "layernorm_backward",
           mpk_layernorm_backward(dx, dw, db, dout, xhat, rstd, w, rows, h, exact, C.compute));
}

static void cuda_rmsnorm_forward(mp_real_kind k, void *out, void *xhat, void *rstd,
                                 const void *x, const void *w, int rows, int h, double eps,
                                 bool exact)
{
    KERNEL(k, "rmsnorm_forward",
           mpk_rmsnorm_forward(out, xhat, rstd, x, w, rows, h, (float)eps, exact, C.compute));
}

static void cuda_rmsnorm_backward(mp_real_kind k, void *dx, void *dw, const void *dout,
                                  const void *xhat, const void *rstd, const void *w, int rows,
                                  int h, bool exact)
{
    KERNEL(k, "rmsnorm_backward",
           mpk_rmsnorm_backward(dx, dw, dout, xhat, rstd, w, rows, h, exact, C.compute));
}

static void cuda_gelu_forward(mp_real_kind k, void *out, const void *in, size_t n)
{
    KERNEL(k, "gelu_forward", mpk_gelu_forward(out, in, n, C.compute));
}

static void cuda_gelu_backward(mp_real_kind k, void *din, const void *dout, const void *in,
                               size_t n)
{
    KERNEL(k, "gelu_backward", mpk_gelu_backward(din, dout, in, n, C.compute));
}

static void cuda_gelu_erf_forward(mp_real_kind k, void *out, const void *in, size_t n)
{
    KERNEL(k, "gelu_erf_forward", mpk_gelu_erf_forward(out, in, n, C.compute));
}

static void cuda_gelu_erf_backward(mp_real_kind k, void *din, const void *dout, const void *in,
                                   size_t n)
{
    KERNEL(k, "gelu_erf_backward", mpk_gelu_erf_backward(din, dout, in, n, C.compute));
}

static void cuda_geglu_forward(mp_real_kind k, void *out, const void *gu, int rows, int f,
                               bool erf)
{
    KERNEL(k, "geglu_forward", mpk_geglu_forward(out, gu, rows, f, erf, C.compute));
}

static void cuda_geglu_backward(mp_real_kind k, void *dgu, const void *dout, const void *gu,
                                int rows, int f, bool erf)
{
    KERNEL(k, "geglu_backward", mpk_geglu_backward(dgu, dout, gu, rows, f, erf, C.compute));
}

static void cuda_swiglu_forward(mp_real_kind k, void *out, const void *gu, int rows, int f)
{
    KERNEL(k, "swiglu_forward", mpk_swiglu_forward(out, gu, rows, f, C.compute));
}

static void cuda_swiglu_backward(mp_real_kind k, void *dgu, const void *dout, const void *gu,
                                 int rows, int f)
{
    KERNEL(k, "swiglu_backward", mpk_swiglu_backward(dgu, dout, gu, rows, f, C.compute));
}

static void cuda_tanh_forward(mp_real_kind k, void *out, const void *in, size_t n)
{
    KERNEL(k, "tanh_forward", mpk_tanh_forward(out, in, n, C.compute));
}

static void cuda_tanh_backward(mp_real_kind k, void *dx, const void *y, size_t n)
{
    KERNEL(k, "tanh_backward", mpk_tanh_backward(dx, y, n, C.compute));
}

/* The rotary kernel takes a (cos, sin) table of the positions: made on the
 * host (mpk_rope_table: in double, as the CPU) once per position array,
 * which a model keeps for its lifetime, and kept on the device. */
static const float *rope_table(const mp_rope_spec *spec, const int *pos, int s, int hd,
                              bool exact)
{
    mp_rope_spec sp = {0};
    if (spec)
        sp = *spec;
    for (int i = 0; i < C.n_rope; i++)
        if (C.rope[i].pos == pos && C.rope[i].s == s && C.rope[i].hd == hd &&
            C.rope[i].exact == exact && !memcmp(&C.rope[i].spec, &sp, sizeof sp))
            return C.rope[i].cs;
    if (C.n_rope == MAX_ROPE_TABLES) {
        fail("rope", "too many position arrays");
        return NULL;
    }
    size_t n = (size_t)s * (size_t)(hd / 2) * 2;
    int32_t *hpos = malloc((size_t)s * sizeof *hpos);
    float *hcs = malloc((n ? n : 1) * sizeof *hcs);
    double *inv_freq = malloc((size_t)(hd / 2 + 1) * sizeof *inv_freq);
    float *cs = cuda_alloc(n * sizeof *cs);
    if (!hpos || !hcs || !inv_freq || !cs) {
        free(inv_freq);
        free(hpos);
        free(hcs);
        cuda_free(cs);
        fail("rope", "out of memory");
        return NULL;
    }
    cuda_copy(hpos, pos, (size_t)s * sizeof *hpos, MP_COPY_D2H);
    for (int k = 0; k < hd / 2; k++) /* the CPU's angles (rope.h) */
        inv_freq[k] = mp_rope_inv_freq(&sp, k, hd);
    mpk_rope_table(hcs, hpos, s, hd, inv_freq, mp_rope_attention_factor(&sp), exact);
    cuda_copy(cs, hcs, n * sizeof *hcs, MP_COPY_H2D);
    free(inv_freq);
    free(hpos);
    free(hcs);
    C.rope[C.n_rope].pos = pos;
    C.rope[C.n_rope].s = s;
    C.rope[C.n_rope].hd = hd;
    C.rope[C.n_rope].exact = exact;
    C.rope[C.n_rope].spec = sp;
    C.rope[C.n_rope++].cs = cs;
    return cs;
}

static void cuda_rope(mp_real_kind k, void *x, size_t ld, int heads, int hd,
                      const mp_rope_spec *spec, const int *pos, int s, int b, bool inverse,
                      bool exact, int grid)
{
    const float *cs = is_f32(k, "rope") ? rope_table(spec, pos, s, hd, exact) : NULL;
    if (cs)
        LAUNCH("rope", mpk_rope(x, ld, heads, hd, cs, s, b, inverse, exact, grid, C.compute));
}

static void cuda_bias_add(mp_real_kind k, void *y, const void *b, int rows, int cols)
{
    KERNEL(k, "bias_add", mpk_bias_add(y, b, rows, cols, C.compute));
}

static void cuda_bias_grad(mp_real_kind k, void *db, const void *dy, int rows, int cols)
{
    KERNEL(k, "bias_grad", mpk_bias_grad(db, dy, rows, cols, C.compute));
}

static void cuda_add(mp_real_kind k, void *y, const void *x, size_t n)
{
    KERNEL(k, "add", mpk_add(y, x, n, C.compute));
}

static void cuda_relu_forward(mp_real_kind k, void *out, const void *in, size_t n)
{
    KERNEL(k, "relu_forward", mpk_relu_forward(out, in, n, C.compute));
}

static void cuda_relu_backward(mp_real_kind k, void *din, const void *dout, const void *in,
                               size_t n)
{
    KERNEL(k, "relu_backward", mpk_relu_backward(din, dout, in, n, C.compute));
}

static void cuda_rel_bias_add(mp_real_kind k, void *p, int s, int sk, bool causal, double scale,
                              const void *table, int table_ld, int head, const int32_t *bucket)
{
    KERNEL(k, "rel_bias_add",
           mpk_rel_bias_add(p, s, sk, causal, (float)scale, table, table_ld, head, bucket,
                            C.compute));
}

static void cuda_rel_bias_grad(mp_real_kind k, void *ds, void *dtable, int s, int sk,
                               bool causal, double scale, int buckets, int table_ld, int head,
                               const int32_t *bucket, bool exact)
{
    KERNEL(k, "rel_bias_grad",
           mpk_rel_bias_grad(ds, dtable, s, sk, causal, (float)scale, buckets, table_ld, head,
                             bucket, exact, C.compute));
}

static void cuda_attn_softmax(mp_real_kind k, void *p, int s, int sk, const int *qpos,
                              bool causal, double scale, bool exact)
{
    KERNEL(k, "attn_softmax",
           mpk_softmax_forward(p, 1, s, sk, (const int32_t *)qpos, causal, (float)scale, exact,
                               C.compute));
}

static void cuda_attn_softmax_backward(mp_real_kind k, void *ds, const void *p, int s, int sk,
                                       const int *qpos, bool causal, double scale, bool exact)
{
    KERNEL(k, "attn_softmax_backward",
           mpk_softmax_backward(ds, p, 1, s, sk, (const int32_t *)qpos, causal, (float)scale,
                                exact, C.compute));
}

/* GPT-OSS's (kernels/oss.cu). The sink gradient's per-row terms go through
 * a device scratch kept between calls (stream-ordered, so one suffices). */
static void cuda_attn_softmax_oss(mp_real_kind k, void *p, int s, int sk, const int *qpos,
                                  bool causal, int window, const void *sink, double scale,
                                  bool exact)
{
    KERNEL(k, "attn_softmax_oss",
           mpk_softmax_oss_forward(p, s, sk, (const int32_t *)qpos, causal, window, sink,
                                   (float)scale, exact, C.compute));
}

static float *sink_terms(int s)
{
    if ((size_t)s > C.n_terms) {
        cuda_free(C.terms);
        C.terms = cuda_alloc((size_t)s * sizeof *C.terms);
        C.n_terms = C.terms ? (size_t)s : 0;
        if (!C.terms)
            fail("attn_softmax_oss_backward", "out of device memory");
    }
    return C.terms;
}

static void cuda_attn_softmax_oss_backward(mp_real_kind k, void *ds, void *dsink, const void *p,
                                           int s, int sk, const int *qpos, bool causal,
                                           int window, double scale, bool exact)
{
    float *terms = dsink && s > 0 ? sink_terms(s) : NULL;
    if (dsink && s > 0 && !terms)
        return;
    KERNEL(k, "attn_softmax_oss_backward",
           mpk_softmax_oss_backward(ds, dsink, terms, p, s, sk, (const int32_t *)qpos, causal,
                                    window, (float)scale, exact, C.compute));
}

static void cuda_swiglu_clamped_forward(mp_real_kind k, void *out, const void *gu, int rows,
                                        int f, double limit)
{
    KERNEL(k, "swiglu_clamped_forward",
           mpk_swiglu_clamped_forward(out, gu, rows, f, (float)limit, C.compute));
}

static void cuda_swiglu_clamped_backward(mp_real_kind k, void *dgu, const void *dout,
                                         const void *gu, int rows, int f, double limit)
{
    KERNEL(k, "swiglu_clamped_backward",
           mpk_swiglu_clamped_backward(dgu, dout, gu, rows, f, (float)limit, C.compute));
}

static void cuda_ce_max(mp_real_kind k, void *mx, const void *logits, size_t S, size_t V)
{
    KERNEL(k, "ce_max", mpk_ce_max(mx, logits, (int)S, (int)V, C.compute));
}

static void cuda_ce_exp_sum(mp_real_kind k, void *logits, void *sum, void *tl, const void *mx,
                            const int32_t *targets, size_t lo, size_t S, size_t V, bool exact)
{
    KERNEL(k, "ce_exp_sum",
           mpk_ce_exp_sum(logits, sum, tl, mx, targets, (int)S, (int)V, (int64_t)lo, exact,
                          C.compute));
}

static void cuda_ce_loss(mp_real_kind k, void *loss, void *logits, const void *sum,
                         const void *mx, const void *tl, const int32_t *targets, size_t S,
                         size_t V, bool exact)
{
    KERNEL(k, "ce_loss",
           mpk_ce_loss(loss, logits, sum, mx, tl, targets, (int)S, (int)V, exact, C.compute));
}

static void cuda_ce_backward(mp_real_kind k, void *logits, const int32_t *targets, size_t lo,
                             size_t S, size_t V, double scale, bool masked)
{
    KERNEL(k, "ce_backward",
           mpk_ce_backward(logits, targets, (int)S, (int)V, (int64_t)lo, (float)scale, masked,
                           C.compute));
}

static void cuda_gather_rows(mp_real_kind k, void *out, const void *table, const int32_t *idx,
                             size_t lo, size_t n, size_t rows, size_t h, bool accumulate)
{
    KERNEL(k, "gather_rows",
           mpk_gather_rows(out, table, idx, (int)rows, (int)h, (int64_t)lo, (int64_t)n,
                           accumulate, C.compute));
}

static void cuda_scatter_add_rows(mp_real_kind k, void *table, const void *x,
                                  const int32_t *idx, size_t lo, size_t n, size_t rows, size_t h)
{
    KERNEL(k, "scatter_add_rows",
           mpk_scatter_add_rows(table, x, idx, (int)rows, (int)h, (int64_t)lo, (int64_t)n,
                                C.compute));
}

/* ---- mixture of experts: kernels/moe.cu ---- */

_Static_assert(MPK_MOE_MAX_EXPERTS == MP_MOE_MAX_EXPERTS &&
                   MPK_MOE_MAX_GROUPS == MP_MOE_MAX_GROUPS,
               "the kernels' top-k scratch must hold every model exec accepts (moe.h)");

static void cuda_moe_scores(mp_real_kind k, void *scores, const void *logits, size_t S, size_t E,
                            bool sigmoid)
{
    KERNEL(k, "moe_scores", mpk_moe_scores(scores, logits, S, E, sigmoid, C.compute));
}

static void cuda_moe_topk(mp_real_kind k, void *choice, void *wgt, const void *scores,
                          const void *bias, size_t S, size_t E, size_t kk, size_t groups,
                          size_t group_k, double scale)
{
    KERNEL(k, "moe_topk",
           mpk_moe_topk(choice, wgt, scores, bias, S, E, kk, groups, group_k, scale, C.compute));
}

static void cuda_moe_capacity(mp_real_kind k, void *kept, const void *all, size_t rows, size_t b,
                              size_t E, size_t kk, size_t cp, size_t me, size_t r0, size_t S,
                              size_t capacity)
{
    KERNEL(k, "moe_capacity",
           mpk_moe_capacity(kept, all, rows, b, E, kk, cp, me, r0, S, capacity, C.compute));
}

static void cuda_moe_send_order(mp_real_kind k, void *sorder, void *counts, void *tags,
                                size_t tag_ld, const void *choice, const void *kept, size_t Sk,
                                size_t El, size_t ep)
{
    KERNEL(k, "moe_send_order",
           mpk_moe_send_order(sorder, counts, tags, tag_ld, choice, kept, Sk, El, ep,
                              C.compute));
}

static void cuda_moe_expert_order(mp_real_kind k, void *rorder, void *ne, const void *tags,
                                  size_t tag_ld, size_t n, size_t El)
{
    KERNEL(k, "moe_expert_order",
           mpk_moe_expert_order(rorder, ne, tags, tag_ld, n, El, C.compute));
}

static void cuda_moe_gather(mp_real_kind k, void *dst, size_t dld, const void *src, size_t sld,
                            const void *idx, size_t div, const void *wgt, size_t n, size_t h)
{
    KERNEL(k, "moe_gather", mpk_moe_gather(dst, dld, src, sld, idx, div, wgt, n, h, C.compute));
}

static void cuda_moe_scatter(mp_real_kind k, void *dst, size_t dld, const void *src, size_t sld,
                             const void *idx, size_t div, size_t n, size_t h, bool accumulate)
{
    KERNEL(k, "moe_scatter",
           mpk_moe_scatter(dst, dld, src, sld, idx, div, n, h, accumulate, C.compute));
}

static void cuda_moe_combine(mp_real_kind k, void *out, const void *y, const void *wgt,
                             const void *kept, size_t r0, size_t Sl, size_t kk, size_t h)
{
    KERNEL(k, "moe_combine", mpk_moe_combine(out, y, wgt, kept, r0, Sl, kk, h, C.compute));
}

static void cuda_moe_combine_backward(mp_real_kind k, void *dwl, const void *dout,
                                      const void *y, const void *kept, size_t r0, size_t Sl,
                                      size_t kk, size_t h)
{
    KERNEL(k, "moe_combine_backward",
           mpk_moe_combine_backward(dwl, dout, y, kept, r0, Sl, kk, h, C.compute));
}

static void cuda_moe_count(mp_real_kind k, void *load, const void *choice, const void *kept,
                           size_t Sk, size_t E)
{
    KERNEL(k, "moe_count", mpk_moe_count(load, choice, kept, Sk, E, C.compute));
}

static void cuda_moe_weights_backward(mp_real_kind k, void *dl, const void *scores,
                                      const void *choice, const void *wgt, const void *dwf,
                                      size_t S, size_t E, size_t kk, double scale)
{
    KERNEL(k, "moe_weights_backward",
           mpk_moe_weights_backward(dl, scores, choice, wgt, dwf, S, E, kk, scale, C.compute));
}

static void cuda_moe_scores_backward(mp_real_kind k, void *dl, const void *scores, size_t S,
                                     size_t E, bool sigmoid)
{
    KERNEL(k, "moe_scores_backward",
           mpk_moe_scores_backward(dl, scores, S, E, sigmoid, C.compute));
}

static void cuda_moe_bias_update(mp_real_kind k, void *bias, const void *load, size_t E,
                                 double rate)
{
    KERNEL(k, "moe_bias_update", mpk_moe_bias_update(bias, load, E, rate, C.compute));
}

/* The loss: added on the host in row order, as the CPU does, so bit for bit. */
static double cuda_sum(mp_real_kind k, const void *x, size_t n)
{
    float *h = is_f32(k, "sum") ? stage(0, (n ? n : 1) * sizeof(float)) : NULL;
    if (!h) {
        fail("sum", "out of host memory");
        return 0;
    }
    cuda_copy(h, x, n * sizeof(float), MP_COPY_D2H);
    return mp_sum_in_order_f32(h, n);
}

/* AdamW tensor by tensor over [lo, hi): each tensor's decay and grid. */
static void cuda_adamw(mp_real_kind k, void *w, const void *grad, void *m, void *v,
                       const struct mp_param_layout *lay, size_t lo, size_t hi,
                       const struct mp_adam_cfg *cfg, int step, bool exact)
{
    if (!is_f32(k, "adamw"))
        return;
    float *W = w, *M = m, *V = v;
    const float *G = grad;
    for (int pid = 0; pid < lay->n; pid++) {
        const mp_param *p = &lay->p[pid];
        size_t a = p->offset, b = p->offset + (size_t)p->lrows * (size_t)p->lcols;
        a = a < lo ? lo : a;
        b = b > hi ? hi : b;
        if (b <= a)
            continue;
        bool decays = p->init == MP_INIT_WEIGHT || p->init == MP_INIT_EMBED;
        mpk_adam_args args =
            mpk_adam_args_make(cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay,
                               decays, step, exact ? mp_init_grid(p->init) : -1);
        LAUNCH("adamw", mpk_adamw(W + a, G + a, M + (a - lo), V + (a - lo), b - a, args,
                                  C.compute));
    }
}

/* ---- collectives ---- */

#if HAVE_NCCL
static ncclComm_t nccl_of(const mp_group *g)
{
    for (int i = 0; i < C.n_links; i++)
        if (C.links[i].comm == g->comm)
            return C.links[i].nccl;
    return NULL;
}

static ncclDataType_t nccl_type(mp_real_kind kind)
{
    return kind == MP_REAL32 ? ncclFloat : ncclDouble;
}

/* The communication stream starts after the compute stream's work so far;
 * the compute stream's next work waits for the collective. */
static void comm_begin(void)
{
    check_cuda(cudaEventRecord(C.compute_done, C.compute), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(C.comm, C.compute_done, 0), "cudaStreamWaitEvent");
}

static mp_status comm_end(ncclResult_t rc, const char *what, mp_error *err)
{
    if (rc != ncclSuccess)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "%s failed: %s", what,
                            ncclGetErrorString(rc));
    check_cuda(cudaEventRecord(C.comm_done, C.comm), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(C.compute, C.comm_done, 0), "cudaStreamWaitEvent");
    return MP_OK;
}
#endif

static mp_status staged_failed(mp_error *err)
{
    return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of host memory for MPI staging");
}

static mp_status cuda_allreduce(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                                mp_reduce_op op, mp_error *err)
{
    if (g->size == 1 || !count)
        return MP_OK;
    size_t bytes = count * mp_real_size(kind);
#if HAVE_NCCL
    ncclComm_t nc = C.nccl ? nccl_of(g) : NULL;
    if (nc) {
        comm_begin();
        return comm_end(ncclAllReduce(buf, buf, count, nccl_type(kind),
                                      op == MP_RED_SUM ? ncclSum : ncclMax, nc, C.comm),
                        "ncclAllReduce", err);
    }
#endif
    void *h = stage(0, bytes);
    if (!h)
        return staged_failed(err);
    cuda_copy(h, buf, bytes, MP_COPY_D2H);
    mp_status st = mp_backend_cpu()->allreduce(g, kind, h, count, op, err);
    cuda_copy(buf, h, bytes, MP_COPY_H2D);
    return st;
}

/* All-gather (gather: recv[size * count] = every rank's send[count]) or
 * reduce-scatter (recv[count] = this rank's slot of the sum of send[size * count]). */
static mp_status exchange(const mp_group *g, mp_real_kind kind, const void *send, void *recv,
                          size_t count, bool gather, mp_error *err)
{
    size_t bytes = count * mp_real_size(kind), whole = bytes * (size_t)g->size;
    if (g->size == 1) {
        cuda_copy(recv, send, bytes, MP_COPY_D2D);
        return MP_OK;
    }
#if HAVE_NCCL
    ncclComm_t nc = C.nccl ? nccl_of(g) : NULL;
    if (nc) {
        comm_begin();
        ncclResult_t rc =
            gather ? ncclAllGather(send, recv, count, nccl_type(kind), nc, C.comm)
                   : ncclReduceScatter(send, recv, count, nccl_type(kind), ncclSum, nc, C.comm);
        return comm_end(rc, gather ? "ncclAllGather" : "ncclReduceScatter", err);
    }
#endif
    size_t in = gather ? bytes : whole, out = gather ? whole : bytes;
    void *hs = stage(0, in), *hr = stage(1, out);
    if (!hs || !hr)
        return staged_failed(err);
    cuda_copy(hs, send, in, MP_COPY_D2H);
    const mp_backend *cpu = mp_backend_cpu();
    mp_status st = gather ? cpu->allgather(g, kind, hs, hr, count, err)
                          : cpu->reduce_scatter(g, kind, hs, hr, count, err);
    cuda_copy(recv, hr, out, MP_COPY_H2D);
    return st;
}

static mp_status cuda_allgather(const mp_group *g, mp_real_kind kind, const void *send,
                                void *recv, size_t count, mp_error *err)
{
    return exchange(g, kind, send, recv, count, true, err);
}

static mp_status cuda_reduce_scatter(const mp_group *g, mp_real_kind kind, const void *send,
                                     void *recv, size_t count, mp_error *err)
{
    return exchange(g, kind, send, recv, count, false, err);
}

/* MoE's dispatch and combine: NCCL point-to-point, one send and one receive
 * per EP rank in one group (its own block a device copy); without NCCL, MPI's
 * all-to-all through host buffers. */
static mp_status cuda_alltoallv(const mp_group *g, mp_real_kind kind, const void *send,
                                const size_t *send_counts, void *recv, const size_t *recv_counts,
                                mp_error *err)
{
    size_t es = mp_real_size(kind), sn = 0, rn = 0;
    if (g->size <= 1) {
        cuda_copy(recv, send, send_counts[0] * es, MP_COPY_D2D);
        return MP_OK;
    }
    for (int q = 0; q < g->size; q++)
        sn += send_counts[q], rn += recv_counts[q];
#if HAVE_NCCL
    ncclComm_t nc = C.nccl ? nccl_of(g) : NULL;
    if (nc) {
        comm_begin();
        ncclResult_t rc = ncclGroupStart();
        size_t so = 0, ro = 0;
        for (int q = 0; q < g->size && rc == ncclSuccess; q++) {
            if (send_counts[q])
                rc = ncclSend((const char *)send + so * es, send_counts[q], nccl_type(kind), q,
                              nc, C.comm);
            if (rc == ncclSuccess && recv_counts[q])
                rc = ncclRecv((char *)recv + ro * es, recv_counts[q], nccl_type(kind), q, nc,
                              C.comm);
            so += send_counts[q], ro += recv_counts[q];
        }
        ncclResult_t end = ncclGroupEnd();
        return comm_end(rc != ncclSuccess ? rc : end, "ncclSend/ncclRecv (all-to-all)", err);
    }
#endif
    void *hs = stage(0, sn * es + 1), *hr = stage(1, rn * es + 1);
    if (!hs || !hr)
        return staged_failed(err);
    cuda_copy(hs, send, sn * es, MP_COPY_D2H);
    mp_status st = mp_alltoallv_mpi(g, kind, hs, send_counts, hr, recv_counts, err);
    cuda_copy(recv, hr, rn * es, MP_COPY_H2D);
    return st;
}

/* Pipeline messages: MPI from host copies (see the header comment). */
static mp_status cuda_send(const mp_group *g, mp_real_kind kind, const void *buf, size_t count,
                           int peer, int tag, mp_error *err)
{
    size_t bytes = count * mp_real_size(kind);
    void *h = stage(0, bytes);
    if (!h)
        return staged_failed(err);
    cuda_copy(h, buf, bytes, MP_COPY_D2H);
    return mp_p2p_mpi_send(g, kind, h, count, peer, tag, err); /* copies h */
}

static mp_status cuda_recv(const mp_group *g, mp_real_kind kind, void *buf, size_t count,
                           int peer, int tag, mp_error *err)
{
    size_t bytes = count * mp_real_size(kind);
    void *h = stage(0, bytes);
    if (!h)
        return staged_failed(err);
    mp_status st = mp_p2p_mpi_recv(g, kind, h, count, peer, tag, err);
    if (!st)
        cuda_copy(buf, h, bytes, MP_COPY_H2D);
    return st;
}

static mp_status cuda_sendrecv(const mp_group *g, mp_real_kind kind, const void *send, int to,
                               void *recv, int from, size_t count, int tag, mp_error *err)
{
    size_t bytes = count * mp_real_size(kind);
#if HAVE_NCCL
    ncclComm_t nc = C.nccl ? nccl_of(g) : NULL;
    if (nc) {
        comm_begin();
        ncclResult_t rc = ncclGroupStart();
        if (rc == ncclSuccess)
            rc = ncclSend(send, count, nccl_type(kind), to, nc, C.comm);
        if (rc == ncclSuccess)
            rc = ncclRecv(recv, count, nccl_type(kind), from, nc, C.comm);
        ncclResult_t end = ncclGroupEnd();
        return comm_end(rc != ncclSuccess ? rc : end, "ncclSend/ncclRecv", err);
    }
#endif
    void *hs = stage(0, bytes), *hr = stage(1, bytes);
    if (!hs || !hr)
        return staged_failed(err);
    cuda_copy(hs, send, bytes, MP_COPY_D2H);
    mp_status st = mp_p2p_mpi_sendrecv(g, kind, hs, to, hr, from, count, tag, err);
    if (!st)
        cuda_copy(recv, hr, bytes, MP_COPY_H2D);
    return st;
}

/* The clock reads after the compute stream's work: per-op timings are then
 * the device's. */
static double cuda_now(void)
{
    if (C.open)
        cudaStreamSynchronize(C.compute);
    return mp_backend_cpu()->now();
}

/* ---- opening ---- */

mp_status mp_cuda_devices(int *count, mp_error *err)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess || n < 1) {
        *count = 0;
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--backend",
                            "no CUDA device (%s)",
                            rc != cudaSuccess ? cudaGetErrorString(rc) : "the driver sees none");
    }
    *count = n;
    return MP_OK;
}

/* This rank's place among the ranks of its node, and their number. */
static void node_place(MPI_Comm world, int *local_rank, int *local_size)
{
    MPI_Comm node;
    MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, local_rank);
    MPI_Comm_size(node, local_size);
    MPI_Comm_free(&node);
    const char *env = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!env)
        env = getenv("SLURM_LOCALID");
    if (env)
        *local_rank = atoi(env);
}

#if HAVE_NCCL
static mp_status link_group(const mp_group *g, mp_error *err)
{
    for (int i = 0; i < C.n_links; i++)
        if (C.links[i].comm == g->comm)
            return MP_OK;
    ncclUniqueId id;
    if (g->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        memset(&id, 0, sizeof id);
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, g->comm);
    ncclComm_t nc;
    ncclResult_t rc = ncclCommInitRank(&nc, g->size, id, g->rank);
    if (rc != ncclSuccess)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "ncclCommInitRank failed: %s",
                            ncclGetErrorString(rc));
    C.links[C.n_links].comm = g->comm;
    C.links[C.n_links++].nccl = nc;
    return MP_OK;
}
#endif

static void fill_table(mp_backend *t)
{
    /* The CPU's table first for its host-side entries (name, flags); every
     * op that touches tensors is then the CUDA one below or NULL, never a
     * host function handed device pointers. */
    *t = *mp_backend_cpu();
    t->name = "cuda";
    t->host_memory = false;
    t->alloc = cuda_alloc;
    t->free = cuda_free;
    t->copy = cuda_copy;
    t->copy2d = cuda_copy2d;
    t->zero = cuda_zero;
    t->sync = cuda_sync;
    t->gemm = cuda_gemm;
    t->gemm_grouped = cuda_gemm_grouped;
    t->quantize = cuda_quantize;
    t->layernorm_forward = cuda_layernorm_forward;
    t->layernorm_backward = cuda_layernorm_backward;
    t->rmsnorm_forward = cuda_rmsnorm_forward;
    t->rmsnorm_backward = cuda_rmsnorm_backward;
    t->gelu_forward = cuda_gelu_forward;
    t->gelu_backward = cuda_gelu_backward;
    t->gelu_erf_forward = cuda_gelu_erf_forward;
    t->gelu_erf_backward = cuda_gelu_erf_backward;
    t->geglu_forward = cuda_geglu_forward;
    t->geglu_backward = cuda_geglu_backward;
    t->swiglu_forward = cuda_swiglu_forward;
    t->swiglu_backward = cuda_swiglu_backward;
    t->tanh_forward = cuda_tanh_forward;
    t->tanh_backward = cuda_tanh_backward;
    t->rope = cuda_rope;
    t->bias_add = cuda_bias_add;
    t->bias_grad = cuda_bias_grad;
    t->add = cuda_add;
    t->relu_forward = cuda_relu_forward;
    t->relu_backward = cuda_relu_backward;
    t->rel_bias_add = cuda_rel_bias_add;
    t->rel_bias_grad = cuda_rel_bias_grad;
    t->attn_softmax = cuda_attn_softmax;
    t->attn_softmax_backward = cuda_attn_softmax_backward;
    t->ce_max = cuda_ce_max;
    t->ce_exp_sum = cuda_ce_exp_sum;
    t->ce_loss = cuda_ce_loss;
    t->ce_backward = cuda_ce_backward;
    t->gather_rows = cuda_gather_rows;
    t->scatter_add_rows = cuda_scatter_add_rows;
    t->sum = cuda_sum;
    t->moe_scores = cuda_moe_scores;
    t->moe_topk = cuda_moe_topk;
    t->moe_capacity = cuda_moe_capacity;
    t->moe_send_order = cuda_moe_send_order;
    t->moe_expert_order = cuda_moe_expert_order;
    t->moe_gather = cuda_moe_gather;
    t->moe_scatter = cuda_moe_scatter;
    t->moe_combine = cuda_moe_combine;
    t->moe_combine_backward = cuda_moe_combine_backward;
    t->moe_count = cuda_moe_count;
    t->moe_weights_backward = cuda_moe_weights_backward;
    t->moe_scores_backward = cuda_moe_scores_backward;
    t->moe_bias_update = cuda_moe_bias_update;
    t->alltoallv = cuda_alltoallv;
    t->adamw = cuda_adamw;
    t->allreduce = cuda_allreduce;
    t->allgather = cuda_allgather;
    t->reduce_scatter = cuda_reduce_scatter;
    t->send = cuda_send;
    t->recv = cuda_recv;
    t->send_wait = mp_p2p_mpi_send_wait;
    t->sendrecv = cuda_sendrecv;
    /* the driver's collectives are on host buffers: MPI's, as the CPU's */
    t->barrier = mp_coll_mpi_barrier;
    t->bcast = mp_coll_mpi_bcast;
    t->gather = mp_coll_mpi_gather;
    t->attn_softmax_oss = cuda_attn_softmax_oss;
    t->attn_softmax_oss_backward = cuda_attn_softmax_oss_backward;
    t->swiglu_clamped_forward = cuda_swiglu_clamped_forward;
    t->swiglu_clamped_backward = cuda_swiglu_clamped_backward;
    t->now = cuda_now;
    t->precision = C.bf16 ? "bf16" : "fp32";
    t->transport = C.nccl ? "nccl" : "mpi";
}

mp_status mp_backend_cuda_open(const mp_cuda_setup *setup, const mp_backend **out,
                               mp_error *err)
{
    if (C.open) { /* one device per process; a second open changes the precision only */
        C.bf16 = setup->bf16;
        fill_table(&cuda_backend);
        *out = &cuda_backend;
        return MP_OK;
    }
    int devices = 0;
    mp_status st = mp_cuda_devices(&devices, err);
    if (st)
        return st;
    int local_rank = 0, local_size = 1;
    node_place(setup->world, &local_rank, &local_size);
    C.device = local_rank % devices;
    cudaError_t rc = cudaSetDevice(C.device);
    if (rc == cudaSuccess)
        rc = cudaStreamCreateWithFlags(&C.compute, cudaStreamNonBlocking);
    if (rc == cudaSuccess)
        rc = cudaStreamCreateWithFlags(&C.comm, cudaStreamNonBlocking);
    if (rc == cudaSuccess)
        rc = cudaEventCreateWithFlags(&C.compute_done, cudaEventDisableTiming);
    if (rc == cudaSuccess)
        rc = cudaEventCreateWithFlags(&C.comm_done, cudaEventDisableTiming);
    if (rc != cudaSuccess)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "CUDA device %d: %s", C.device,
                            cudaGetErrorString(rc));
    if (cublasCreate(&C.blas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(C.blas, C.compute) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(C.blas, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "cuBLAS could not start");
    C.bf16 = setup->bf16;
    /* NCCL needs a GPU per rank; every rank must choose the same transport */
    int nccl_ok = 0;
#if HAVE_NCCL
    nccl_ok = !setup->solo && local_size <= devices;
#endif
    if (!setup->solo)
        MPI_Allreduce(MPI_IN_PLACE, &nccl_ok, 1, MPI_INT, MPI_MIN, setup->world);
    C.nccl = nccl_ok;
#if HAVE_NCCL
    for (int i = 0; C.nccl && i < setup->n_groups; i++)
        if (setup->groups[i]->size > 1 && (st = link_group(setup->groups[i], err)))
            return st;
#endif
    C.open = true;
    fill_table(&cuda_backend);
    *out = &cuda_backend;
    return MP_OK;
}

/* ---- the cuBLAS peak: bf16 inputs, fp32 accumulation, tensor cores ---- */

/* count random values in [-1, 1) (bf16 or fp32) at dev: the peak is
 * measured on data like a model's (random_unit.h says why). */
static bool fill_random(void *dev, size_t count, bool bf16)
{
    size_t el = bf16 ? 2 : 4, chunk = count < ((size_t)1 << 22) ? count : (size_t)1 << 22;
    unsigned char *h = malloc(chunk * el);
    if (!h)
        return false;
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < chunk; i++) {
        float v = mp_random_unit(&x);
        uint16_t b = mp_bf16_bits(v);
        memcpy(h + i * el, bf16 ? (const void *)&b : (const void *)&v, el);
    }
    bool ok = true;
    for (size_t at = 0; ok && at < count; at += chunk) {
        size_t n = count - at < chunk ? count - at : chunk;
        ok = cudaMemcpyAsync((char *)dev + at * el, h, n * el, cudaMemcpyHostToDevice,
                             C.compute) == cudaSuccess &&
             cudaStreamSynchronize(C.compute) == cudaSuccess;
    }
    free(h);
    return ok;
}

mp_status mp_cuda_gemm_peak(int n, bool bf16, double *flops, mp_error *err)
{
    if (!C.open)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL, "CUDA backend not open");
#ifdef MP_CUDA_HOST_SHIM
    /* a device's rate; sixty 8192^3 products on the host would take minutes */
    (void)n, (void)bf16, (void)flops;
    return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "no GEMM peak on the emulation");
#endif
    size_t el = bf16 ? 2 : 4, count = (size_t)n * (size_t)n;
    void *a = cuda_alloc(count * el), *b = cuda_alloc(count * el), *c = cuda_alloc(count * 4);
    cudaEvent_t t0 = NULL, t1 = NULL;
    mp_status st = MP_OK;
    if (!a || !b || !c || cudaEventCreate(&t0) != cudaSuccess ||
        cudaEventCreate(&t1) != cudaSuccess || cudaStreamSynchronize(C.compute) != cudaSuccess ||
        !fill_random(a, count, bf16) || !fill_random(b, count, bf16)) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "no device memory for the GEMM peak");
        goto done;
    }
    float one = 1, zero = 0;
    cudaDataType_t in = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasComputeType_t ct = bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
    double best = 0;
    for (int rep = 0; rep < 6; rep++) { /* the first is warm-up */
        int iters = 10;
        cudaEventRecord(t0, C.compute);
        for (int i = 0; i < iters; i++)
            if (cublasGemmEx(C.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, in, n, b, in, n,
                             &zero, c, CUDA_R_32F, n, ct,
                             CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
                st = mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "cublasGemmEx failed");
                goto done;
            }
        cudaEventRecord(t1, C.compute);
        cudaEventSynchronize(t1);
        float ms = 0;
        cudaEventElapsedTime(&ms, t0, t1);
        double rate = 2.0 * n * (double)n * n * iters / (ms * 1e-3);
        if (rep > 0 && rate > best)
            best = rate;
    }
    *flops = best;
done:
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    cuda_free(a);
    cuda_free(b);
    cuda_free(c);
    return st;
}

void mp_cuda_describe(char *name, size_t size, double *memory)
{
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, C.device) != cudaSuccess) {
        snprintf(name, size, "CUDA device %d", C.device);
        *memory = 0;
        return;
    }
    snprintf(name, size, "%s", prop.name);
    *memory = (double)prop.totalGlobalMem;
}
