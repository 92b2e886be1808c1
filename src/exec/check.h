/* check.h — the comparison with the unpartitioned reference, tensor by
 * tensor: max |a - b| and max |a - b| / max |b| (relative to the tensor's
 * scale), bitwise equality in exact mode; the first tensor (in step, then
 * check order) that differs, and on which rank. */
#ifndef MP_EXEC_CHECK_H
#define MP_EXEC_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "exec/exec.h"
#include "exec/params.h"
#include "exec/runtime.h"

/* Reference buffers, float or double. */
typedef struct mp_check_view {
    const void *buf;    /* flat parameters or gradients in the reference's layout */
    const void *logits; /* [S, V] */
    bool f64;
} mp_check_view;

static inline mp_check_view mp_check_view_f32(const float *buf, const float *logits)
{
    return (mp_check_view){buf, logits, false};
}
static inline mp_check_view mp_check_view_f64(const double *buf, const double *logits)
{
    return (mp_check_view){buf, logits, true};
}

/* tolerance mode's threshold for a tensor whose gradient nearly cancels
 * (mp_param.cancelling: GPT-OSS's sink logits; check.c). fp32 rounding
 * alone is 2e-5 to 2e-4 of it with the same data, by the CPU's BLAS kernels
 * (docs/exec.md, "Tolerance mode"); a partition error is of the order of
 * the values, 1e2 to 1e3 times this */
#define MP_CHECK_CANCELLING_TOL 1e-3

typedef struct mp_check {
    const mp_param_layout *ref_lay; /* the whole model's: the tensor indices every rank shares */
    bool exact;
    double tol;
    int n_tensors;          /* loss, logits, grad:<each>, param:<each> of the whole model */
    double *max_abs, *max_rel;
    double *tol_of;         /* each tensor's threshold: tol, or a cancelling one's (check.c) */
    unsigned char *bad;
    long first;             /* (step-1) * n_tensors + tensor index of the first mismatch */
    double first_abs, first_rel;
    long checked;
} mp_check;

mp_status mp_check_init(mp_check *c, const mp_param_layout *ref_lay, bool exact, double tol,
                        mp_error *err);
void mp_check_free(mp_check *c);
/* Name of tensor index i ("loss", "logits", "grad:layers.0.qkv.weight", ...). */
void mp_check_name(const mp_check *c, int i, char *buf, size_t size);
void mp_check_scalar(mp_check *c, int step, const char *name, double a, double b);
/* a[S, V/tp] against the reference's columns of this TP rank, row r of a
 * against the reference's row rows[r] (NULL: r; CP ranks hold some positions). */
void mp_check_logits(mp_check *c, int step, const float *a, const mp_check_view *ref, int S,
                     const int *rows, int V, int tp, int tp_rank);
/* prefix "grad:" or "param:": each parameter of lay (one model chunk of this
 * rank), its local elements within [lo, hi) of the chunk's flat buffer a,
 * against the reference at their full index. */
void mp_check_params(mp_check *c, int step, const char *prefix, const mp_param_layout *lay,
                     const float *a,
                     const mp_check_view *ref, const mp_param_layout *ref_lay, int tp_rank,
                     size_t lo, size_t hi);
/* Combines all ranks' results into rep (collective over the world, through
 * host's table: the host backend's, whatever runs the model). */
mp_status mp_check_finish(mp_check *c, mp_runtime *rt, const mp_backend *host,
                          mp_exec_report *rep, mp_error *err);

#endif
