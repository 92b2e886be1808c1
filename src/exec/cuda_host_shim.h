/* cuda_host_shim.h — the few CUDA runtime and cuBLAS calls backend_cuda.c
 * makes, done on the host: memory by calloc and memcpy, GEMMs by
 * cblas_sgemm on the column-major operands cuBLAS would get, streams and
 * events as no-ops. Compiled in (-DMP_CUDA_HOST_SHIM) only for the test
 * executable megaplan-cuda-emu, which links the kernels' host-run build
 * (kernels/, loops over blocks and threads): so that machines without a GPU
 * run the CUDA backend's own code (its argument mapping to the kernels, the
 * GEMM transposition, the staging of collectives, the rotary tables, AdamW
 * tensor by tensor) against the CPU reference, bit for bit in exact mode.
 * What it cannot show is what a GPU does differently: tests/exec's
 * cuda-emu cases say so, and tools/gpu-check.sh runs the real thing.
 *
 * Device memory is kept apart as a GPU keeps it: cudaMalloc hands out pieces
 * of one reserved arena that is inaccessible (PROT_NONE) except while a shim
 * call, a cuBLAS stand-in or a kernel runs (shim_device_open/close), so host
 * code that reads or writes a device pointer itself crashes the emulation
 * instead of passing; and a copy whose direction does not match where its
 * pointers live (a host buffer handed to a device collective, which stages
 * it with a device-to-host copy) fails with cudaErrorInvalidValue. */
#ifndef MP_EXEC_CUDA_HOST_SHIM_H
#define MP_EXEC_CUDA_HOST_SHIM_H

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind {
    cudaMemcpyHostToHost,
    cudaMemcpyHostToDevice,
    cudaMemcpyDeviceToHost,
    cudaMemcpyDeviceToDevice
};
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
};

static inline const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaSuccess            ? "no error"
           : e == cudaErrorInvalidValue ? "host shim: a copy's direction does not match where "
                                          "its pointers live (device or host)"
                                        : "host shim: out of memory";
}
static inline cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d)
{
    (void)d;
    return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    (void)d;
    memset(p, 0, sizeof *p);
    strcpy(p->name, "host shim");
    p->totalGlobalMem = (size_t)1 << 30;
    return cudaSuccess;
}
/* ---- device memory: the arena (the header's comment) ---- */
#define SHIM_ARENA_BYTES ((size_t)8 << 30) /* reserved address space, not memory */
#define SHIM_ALIGN 256
#define SHIM_MAX_BLOCKS (1 << 16)
static struct shim_arena {
    char *base;
    size_t top;   /* bytes handed out so far (the end of the last block) */
    size_t shown; /* bytes now readable (a page multiple), while depth > 0 */
    int depth;    /* nested opens */
    struct {
        size_t at, bytes;
        bool used;
    } block[SHIM_MAX_BLOCKS];
    int n_blocks;
} shim_arena;

static inline size_t shim_page_up(size_t n)
{
    size_t page = 4096;
    return (n + page - 1) / page * page;
}

static inline bool shim_on_device(const void *p)
{
    const char *c = p;
    return shim_arena.base && c >= shim_arena.base && c < shim_arena.base + SHIM_ARENA_BYTES;
}

/* Device memory readable until the matching close (calls nest). */
static inline void shim_device_open(void)
{
    if (shim_arena.depth++ == 0 && shim_arena.top) {
        shim_arena.shown = shim_page_up(shim_arena.top);
        mprotect(shim_arena.base, shim_arena.shown, PROT_READ | PROT_WRITE);
    }
}

static inline void shim_device_close(void)
{
    if (--shim_arena.depth == 0 && shim_arena.shown) {
        mprotect(shim_arena.base, shim_arena.shown, PROT_NONE);
        shim_arena.shown = 0;
    }
}

/* First fit among freed blocks, else a new one at the top. */
static inline cudaError_t cudaMalloc(void **p, size_t bytes)
{
    struct shim_arena *A = &shim_arena;
    *p = NULL;
    if (!A->base) {
        void *m = mmap(NULL, SHIM_ARENA_BYTES, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            return cudaErrorMemoryAllocation;
        A->base = m;
    }
    bytes = (bytes + SHIM_ALIGN - 1) / SHIM_ALIGN * SHIM_ALIGN;
    for (int i = 0; i < A->n_blocks; i++)
        if (!A->block[i].used && A->block[i].bytes >= bytes) {
            A->block[i].used = true;
            *p = A->base + A->block[i].at;
            return cudaSuccess;
        }
    if (A->n_blocks == SHIM_MAX_BLOCKS || bytes > SHIM_ARENA_BYTES - A->top)
        return cudaErrorMemoryAllocation;
    A->block[A->n_blocks].at = A->top;
    A->block[A->n_blocks].bytes = bytes;
    A->block[A->n_blocks++].used = true;
    *p = A->base + A->top;
    A->top += bytes;
    if (A->depth > 0) { /* opened now: the new block too */
        A->shown = shim_page_up(A->top);
        mprotect(A->base, A->shown, PROT_READ | PROT_WRITE);
    }
    return cudaSuccess;
}
static inline cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = malloc(bytes);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void *p)
{
    for (int i = 0; p && i < shim_arena.n_blocks; i++)
        if (shim_arena.base + shim_arena.block[i].at == (char *)p)
            shim_arena.block[i].used = false;
    return p && !shim_on_device(p) ? cudaErrorInvalidValue : cudaSuccess;
}
static inline cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
    (void)s;
    if (bytes && !shim_on_device(p))
        return cudaErrorInvalidValue;
    shim_device_open();
    memset(p, v, bytes);
    shim_device_close();
    return cudaSuccess;
}
/* Whether dst and src live where the copy's kind says. */
static inline bool shim_kind_fits(void *d, const void *s, enum cudaMemcpyKind k)
{
    bool dd = shim_on_device(d), sd = shim_on_device(s);
    switch (k) {
    case cudaMemcpyHostToHost: return !dd && !sd;
    case cudaMemcpyHostToDevice: return dd && !sd;
    case cudaMemcpyDeviceToHost: return !dd && sd;
    case cudaMemcpyDeviceToDevice: break;
    }
    return dd && sd;
}
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t bytes,
                                          enum cudaMemcpyKind k, cudaStream_t st)
{
    (void)st;
    if (bytes && !shim_kind_fits(d, s, k))
        return cudaErrorInvalidValue;
    shim_device_open();
    memmove(d, s, bytes);
    shim_device_close();
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp,
                                            size_t w, size_t rows, enum cudaMemcpyKind k,
                                            cudaStream_t st)
{
    (void)st;
    if (w && rows && !shim_kind_fits(d, s, k))
        return cudaErrorInvalidValue;
    shim_device_open();
    for (size_t r = 0; r < rows; r++)
        memmove((char *)d + r * dp, (const char *)s + r * sp, w);
    shim_device_close();
    return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}
static inline cudaError_t cudaGetLastError(void)
{
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
    (void)f;
    *s = NULL;
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f)
{
    (void)f;
    *e = (void *)1;
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, 0);
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e, (void)s;
    return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
    (void)s, (void)e, (void)f;
    return cudaSuccess;
}
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    (void)a, (void)b;
    *ms = 1e-3f; /* no device clock: a microsecond per timed call */
    return cudaSuccess;
}

/* The grouped GEMM's first release (backend_cuda.c tests the version). */
#define CUBLAS_VERSION 120500
typedef void *cublasHandle_t;
typedef int cublasStatus_t;
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
typedef enum { CUDA_R_32F, CUDA_R_16BF } cudaDataType_t;
typedef enum {
    CUBLAS_COMPUTE_32F,
    CUBLAS_COMPUTE_32F_PEDANTIC,
    CUBLAS_COMPUTE_32F_FAST_16BF
} cublasComputeType_t;
enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_DEFAULT_MATH = 0 };

static inline cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = (void *)1;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    (void)h, (void)s;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, int mode)
{
    (void)h, (void)mode;
    return CUBLAS_STATUS_SUCCESS;
}
static inline const char *cublasGetStatusString(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS         ? "success"
           : s == CUBLAS_STATUS_INVALID_VALUE ? "host shim: an operand in host memory"
                                              : "not supported by the host shim";
}
/* x rounded to bf16's 8 significant bits (nearest, ties to even), as the
 * tensor cores take an fp32 input under CUBLAS_COMPUTE_32F_FAST_16BF. */
static inline float shim_bf16(float x)
{
    unsigned u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) /* inf and NaN stay */
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A column-major rows x cols operand (ld apart) rounded to bf16, packed; NULL
 * when out of memory. */
static inline float *shim_bf16_copy(const float *a, int rows, int cols, int ld)
{
    float *c = malloc((size_t)(rows ? rows : 1) * (size_t)(cols ? cols : 1) * sizeof *c);
    for (int j = 0; c && j < cols; j++)
        for (int i = 0; i < rows; i++)
            c[(size_t)j * rows + i] = shim_bf16(a[(size_t)j * ld + i]);
    return c;
}

/* A column-major rows x cols bf16 operand (ld apart) as packed floats; NULL
 * when out of memory. */
static inline float *shim_widen_bf16(const void *a, int rows, int cols, int ld)
{
    const unsigned short *h = a;
    float *c = malloc((size_t)(rows ? rows : 1) * (size_t)(cols ? cols : 1) * sizeof *c);
    for (int j = 0; c && j < cols; j++)
        for (int i = 0; i < rows; i++) {
            unsigned u = (unsigned)h[(size_t)j * ld + i] << 16;
            memcpy(&c[(size_t)j * rows + i], &u, sizeof u);
        }
    return c;
}

/* Column-major, as cuBLAS: fp32 operands (the bf16 peak is a device's);
 * FAST_16BF rounds the inputs to bf16 and accumulates in fp32, as cuBLAS does. */
static inline cublasStatus_t shim_gemm(cublasOperation_t ta, cublasOperation_t tb, int m,
                                       int n, int k, const void *alpha, const void *a, int lda,
                                       const void *b, int ldb, const void *beta, void *c,
                                       int ldc, cublasComputeType_t comp)
{
    float *a16 = NULL, *b16 = NULL;
    if (comp == CUBLAS_COMPUTE_32F_FAST_16BF) {
        int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
        int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
        a16 = shim_bf16_copy(a, ar, ac, lda);
        b16 = shim_bf16_copy(b, br, bc, ldb);
        if (!a16 || !b16) {
            free(a16);
            free(b16);
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        a = a16, lda = ar ? ar : 1;
        b = b16, ldb = br ? br : 1;
    }
    cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_T ? CblasTrans : CblasNoTrans,
                tb == CUBLAS_OP_T ? CblasTrans : CblasNoTrans, m, n, k, *(const float *)alpha,
                a, lda, b, ldb, *(const float *)beta, c, ldc);
    free(a16);
    free(b16);
    return CUBLAS_STATUS_SUCCESS;
}

static inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *a, cudaDataType_t at,
                                          int lda, const void *b, cudaDataType_t bt, int ldb,
                                          const void *beta, void *c, cudaDataType_t ct, int ldc,
                                          cublasComputeType_t comp, int algo)
{
    (void)h, (void)algo;
    bool b16 = at == CUDA_R_16BF && bt == CUDA_R_16BF;
    if (!((at == CUDA_R_32F && bt == CUDA_R_32F) || b16) || ct != CUDA_R_32F ||
        (b16 && comp != CUBLAS_COMPUTE_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!shim_on_device(a) || !shim_on_device(b) || !shim_on_device(c))
        return CUBLAS_STATUS_INVALID_VALUE; /* a host operand */
    shim_device_open();
    float *a32 = NULL, *b32 = NULL;
    if (b16) { /* bf16 inputs widened, exactly, to floats */
        int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
        int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
        a32 = shim_widen_bf16(a, ar, ac, lda);
        b32 = shim_widen_bf16(b, br, bc, ldb);
        a = a32, lda = ar ? ar : 1;
        b = b32, ldb = br ? br : 1;
    }
    cublasStatus_t rc = b16 && (!a32 || !b32)
                            ? CUBLAS_STATUS_NOT_SUPPORTED
                            : shim_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, comp);
    free(a32);
    free(b32);
    shim_device_close();
    return rc;
}

/* As cuBLAS documents it: the matrices' address arrays in device memory,
 * everything else on the host; fp32 data with CUBLAS_COMPUTE_32F or
 * _PEDANTIC only (no bf16-rounding compute type). Problem after problem,
 * each as cublasGemmEx computes it. */
static inline cublasStatus_t
cublasGemmGroupedBatchedEx(cublasHandle_t h, const cublasOperation_t ta[],
                           const cublasOperation_t tb[], const int m[], const int n[],
                           const int k[], const void *alpha, const void *const A[],
                           cudaDataType_t at, const int lda[], const void *const B[],
                           cudaDataType_t bt, const int ldb[], const void *beta, void *const Cm[],
                           cudaDataType_t ct, const int ldc[], int groups, const int size[],
                           cublasComputeType_t comp)
{
    if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F ||
        (comp != CUBLAS_COMPUTE_32F && comp != CUBLAS_COMPUTE_32F_PEDANTIC))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!shim_on_device(A) || !shim_on_device(B) || !shim_on_device(Cm))
        return CUBLAS_STATUS_INVALID_VALUE; /* address arrays on the host */
    const float *al = alpha, *be = beta;
    cublasStatus_t rc = CUBLAS_STATUS_SUCCESS;
    shim_device_open();
    for (int g = 0, idx = 0; g < groups && rc == CUBLAS_STATUS_SUCCESS; g++)
        for (int j = 0; j < size[g] && rc == CUBLAS_STATUS_SUCCESS; j++, idx++) {
            const void *a = A[idx], *b = B[idx];
            void *c = Cm[idx];
            shim_device_close(); /* the operands' own check, as cublasGemmEx's */
            rc = cublasGemmEx(h, ta[g], tb[g], m[g], n[g], k[g], &al[g], a, at, lda[g], b, bt,
                              ldb[g], &be[g], c, ct, ldc[g], comp, CUBLAS_GEMM_DEFAULT);
            shim_device_open();
        }
    shim_device_close();
    return rc;
}

#endif
