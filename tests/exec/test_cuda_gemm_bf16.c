/* test_cuda_gemm_bf16.c — the CUDA backend's GEMMs for bf16 plans, run on
 * the emulation (backend_cuda.c over cuda_host_shim.h and the kernels' host
 * build). A product with mn / (m + n) >= 600 runs on bf16 copies of its
 * operands (cuda_gemm's staging: on an H200 cuBLAS ran an 8192^3 product on
 * bf16 operands at twice FAST_16BF's rate on fp32 ones); a smaller one on
 * FAST_16BF. Both must give op(A) op(B) of the
 * operands rounded to bf16 (nearest, ties to even), accumulated in fp32, for
 * every transpose and with leading dimensions wider than the rows: checked
 * against a double-precision product of the rounded inputs, to a bound far
 * below what an unrounded operand, a transposed one or a wrong stride gives.
 * mp_cuda_gemm_stats counts which ran staged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "exec/backend_cuda.h"

static const mp_backend *be;

/* Deterministic values in [-1, 1) with all 24 bits used: rounding to bf16
 * moves nearly every one. */
static float value(unsigned i)
{
    unsigned h = i * 2654435761u ^ (i >> 7) * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return (float)((double)(h & 0xffffffu) / 8388608.0 - 1.0);
}

static double bf16_of(float x) /* nearest, ties to even; finite inputs */
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

/* Row-major op(A)[m,k] op(B)[k,n] with A's rows lda apart, B's ldb apart;
 * returns the largest error against the rounded inputs' exact product, over
 * the sum of |terms| (fp32 accumulation of k terms stays below k 2^-24). */
static double product_error(bool ta, bool tb, int m, int n, int k, int pad, long *staged)
{
    int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int lda = ac + pad, ldb = bc + pad, ldc = n;
    size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)m * ldc;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    assert_non_null(a), assert_non_null(b), assert_non_null(c);
    for (size_t i = 0; i < na; i++)
        a[i] = value((unsigned)i);
    for (size_t i = 0; i < nb; i++)
        b[i] = value((unsigned)(i + na));
    float *da = be->alloc(na * sizeof *a), *db = be->alloc(nb * sizeof *b),
          *dc = be->alloc(nc * sizeof *c);
    assert_non_null(da), assert_non_null(db), assert_non_null(dc);
    be->copy(da, a, na * sizeof *a, MP_COPY_H2D);
    be->copy(db, b, nb * sizeof *b, MP_COPY_H2D);
    be->gemm(MP_REAL32, ta, tb, m, n, k, 1.0, da, lda, db, ldb, 0.0, dc, ldc);
    be->copy(c, dc, nc * sizeof *c, MP_COPY_D2H);
    mp_error e;
    mp_error_clear(&e);
    assert_int_equal(be->sync(&e), MP_OK);
    mp_cuda_gemm_stat st;
    mp_cuda_gemm_stats(&st);
    assert_int_equal(st.calls, 1);
    *staged = st.staged;
    double worst = 0;
    for (int i = 0; i < m; i += 7) /* a sample of rows, every column */
        for (int j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (int p = 0; p < k; p++) {
                double x = bf16_of(ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]);
                double y = bf16_of(tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
                s += x * y;
                mag += fabs(x * y);
            }
            double err = fabs(c[(size_t)i * ldc + j] - s) / (mag > 0 ? mag : 1);
            if (err > worst)
                worst = err;
        }
    be->free(da), be->free(db), be->free(dc);
    free(a), free(b), free(c);
    return worst;
}

/* fp32 accumulation of 48 terms: under 48 * 2^-24 = 2.9e-6 of their
 * magnitude; one operand left unrounded moves a product by up to 2^-9. */
#define BOUND 3e-6

static void staged_products_are_bf16_products(void **state)
{
    (void)state;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        long staged = -1;
        double err = product_error(ta, tb, 1280, 1216, 48, 3, &staged);
        if (err > BOUND)
            fail_msg("staged, trans_a %d trans_b %d: error %.3g of the terms' size", ta, tb,
                     err);
        assert_int_equal(staged, 1);
    }
}

static void small_products_keep_fast_16bf(void **state)
{
    (void)state;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        long staged = -1;
        /* mn / (m + n) = 120: attention's P V shape, the head's 128 columns */
        double err = product_error(ta, tb, 1280, 128, 48, 5, &staged);
        if (err > BOUND)
            fail_msg("FAST_16BF, trans_a %d trans_b %d: error %.3g of the terms' size", ta, tb,
                     err);
        assert_int_equal(staged, 0);
    }
}

/* The bound is tight enough to see an unrounded operand: the same product
 * on fp32 inputs (an fp32 plan's backend would give it) misses it. */
static void the_bound_sees_unrounded_inputs(void **state)
{
    (void)state;
    enum { M = 64, N = 64, K = 48 };
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, r = 0, mag = 0;
            for (int p = 0; p < K; p++) {
                float x = value((unsigned)(i * K + p)), y = value((unsigned)(p * N + j + 99999));
                s += (double)x * y;
                r += bf16_of(x) * bf16_of(y);
                mag += fabs(bf16_of(x) * bf16_of(y));
            }
            if (fabs(s - r) / mag > worst)
                worst = fabs(s - r) / mag;
        }
    assert_true(worst > 100 * BOUND);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    mp_cuda_setup setup = {.bf16 = true, .solo = true, .world = MPI_COMM_WORLD};
    mp_error e;
    mp_error_clear(&e);
    if (mp_backend_cuda_open(&setup, &be, &e) != MP_OK) {
        fprintf(stderr, "test_cuda_gemm_bf16: %s\n", e.msg);
        MPI_Finalize();
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(staged_products_are_bf16_products),
        cmocka_unit_test(small_products_keep_fast_16bf),
        cmocka_unit_test(the_bound_sees_unrounded_inputs),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return failed;
}
