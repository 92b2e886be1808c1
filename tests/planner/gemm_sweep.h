/* gemm_sweep.h — the rows of tests/data/hw/gemm_h200_cublas.csv (bench/
 * bench_gemm_cuda.c's output: what,model,t,tokens,gemm,m,n,k,out,us,rate),
 * one reader for the tests that set the profiles against it
 * (test_gemm_measured.c, test_ub_split.c). Include after <cmocka.h>. */
#ifndef MP_TEST_GEMM_SWEEP_H
#define MP_TEST_GEMM_SWEEP_H
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct sweep_row {
    char what[32], model[32], gemm[16], out[16]; /* what: gemm, floor, copy, split */
    int t, tokens, m, n, k;
    double us, rate;
} sweep_row;

/* The next data row of f (comments and the header skipped); false at the end. */
static inline bool sweep_row_next(FILE *f, sweep_row *r)
{
    char line[512];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%31[^,],%31[^,],%d,%d,%15[^,],%d,%d,%d,%15[^,],%lf,%lf", r->what,
                   r->model, &r->t, &r->tokens, r->gemm, &r->m, &r->n, &r->k, r->out, &r->us,
                   &r->rate) == 11)
            return true;
    return false;
}

/* The floor row's microseconds (a 128^3 product, back to back); 0 if none. */
static inline double sweep_floor_us(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    sweep_row r;
    double us = 0.0;
    while (sweep_row_next(f, &r))
        if (strcmp(r.what, "floor") == 0)
            us = r.us;
    fclose(f);
    return us;
}

#endif
