/* compare.h — a run of `megaplan exec` set against the simulator's
 * prediction of the same run (docs/design.md §7, `exec --compare`): the model as it
 * ran (shrunk or not), fp32, the plan's recomputation, no overlap, on a hardware
 * profile that describes the machine (`megaplan calibrate`). Pure: no MPI. */
#ifndef MP_EXEC_COMPARE_H
#define MP_EXEC_COMPARE_H

#include <stdbool.h>

#include "core/error.h"
#include "core/hw.h"
#include "core/plan.h"
#include "exec/exec.h"

typedef enum {
    MP_CMP_STEP,      /* the whole step */
    MP_CMP_COMPUTE,   /* F + B less the collectives inside them / compute (+ recompute) */
    MP_CMP_TP,        /* TP/SP collectives */
    MP_CMP_CP,        /* CP ring */
    MP_CMP_PP,        /* pipeline transfers and waiting / p2p + bubble */
    MP_CMP_DP,        /* DP gradient reduction */
    MP_CMP_OPTIMIZER, /* optimizer step */
    MP_CMP_COUNT
} mp_cmp_row;

typedef struct mp_exec_comparison {
    double measured[MP_CMP_COUNT];  /* seconds, last step, slowest rank */
    double simulated[MP_CMP_COUNT]; /* seconds, the simulator's critical rank */
    /* model FLOPs per step / (GPUs x peak x step), measured and simulated */
    double mfu_measured, mfu_simulated;
} mp_exec_comparison;

const char *mp_cmp_name(mp_cmp_row r);

/* The simulation of what ran: plan's degrees and schedule, rep's model sizes
 * and micro-batches, hw's speeds. MP_EINPUT when the configuration cannot be
 * simulated on that profile (e.g. context parallelism on a profile without
 * fused attention), naming the field. */
mp_status mp_exec_compare(const mp_plan *plan, bool shrink, const mp_exec_report *rep,
                          const mp_hw *hw, mp_exec_comparison *out, mp_error *err);

#endif
