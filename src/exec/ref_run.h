/* ref_run.h — the check's reference. Every rank builds the whole model
 * (tp = dp = 1, size-1 groups) from the same seed and runs the whole global
 * batch itself, micro-batch after micro-batch; the driver (exec.c) compares
 * its own slices with it (check.h: its TP part of each tensor, its DP shard
 * of the gradients with the distributed optimizer, its micro-batch's
 * logits). No tensor is gathered, so the check's memory stays one model per
 * rank; the cost is that each rank repeats the reference's compute, fine at
 * the sizes a check runs (--shrink). Tolerance mode runs it in double, exact
 * mode the very float code of the partitioned run. With --test-fixture,
 * PyTorch's step (fixture.h) is the reference instead. */
#ifndef MP_EXEC_REF_RUN_H
#define MP_EXEC_REF_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "exec/check.h"
#include "exec/fixture.h"
#include "exec/kernels.h"
#include "exec/ref_sync.h"

typedef struct mp_ref_run {
    bool f64;                 /* double (tolerance mode), else the float code */
    const mp_fixture *fx;     /* non-NULL: PyTorch's step is the reference */
    double tokens;            /* the loss's tokens in the global batch */
    mp_param_layout lay;      /* the whole model's */
    mp_op_list ops;           /* F and B of each micro-batch in turn */
    mp_gpt_f32 m32;
    mp_gpt_f64 m64;
    mp_trainer_f32 t32;
    mp_trainer_f64 t64;
    int32_t *tok, *tgt;       /* [micro-batches][seq * b]: the global batch, the caller's to fill */
    uint64_t *sync_buf;       /* [lay.total] the re-sync's (ref_sync.h) */
    float *fx_grad, *fx_after, *fx_logits; /* the fixture's, in the whole model's layout */
} mp_ref_run;

/* The reference of whole-model dims rd over `batches` micro-batches (all DP
 * ranks'), keeping the logits of micro-batch keep; on host (the CPU backend,
 * or its solo variant) with size-1 group self. fx: the fixture's step
 * instead, its logits from micro-batch fx_mb on. */
mp_status mp_ref_run_init(mp_ref_run *r, const mp_gpt_dims *rd, int batches, int keep,
                          const mp_backend *host, mp_group self, const mp_adam_cfg *adam,
                          double grad_scale, double tokens, bool exact, uint64_t seed,
                          const mp_fixture *fx, int fx_mb, mp_error *err);
void mp_ref_run_free(mp_ref_run *r);
/* Forward and backward of r->tok / r->tgt: *loss_sum (over the loss's tokens)
 * and what the check reads, its gradients and kept logits. */
mp_status mp_ref_run_grads(mp_ref_run *r, double *loss_sum, mp_check_view *view,
                           mp_error *err);
/* AdamW's step; *view: the weights after it. */
mp_status mp_ref_run_update(mp_ref_run *r, int step, mp_check_view *view, mp_error *err);
/* Its weights and moments, for mp_ref_sync. */
mp_ref_state mp_ref_run_state(mp_ref_run *r);

#endif
