/* ref_sync.h — checking a step from a common state. Before a checked step
 * the unpartitioned reference takes the partitioned run's weights and Adam
 * moments, so that the step's error is one step's rounding (fp32 against
 * fp64) and does not drift over hundreds of steps (docs/exec.md, "Long runs").
 * Each value comes from exactly one rank that holds it (DP and CP rank 0, or
 * the DP shard's owner under the distributed optimizer; TP rank 0 for
 * replicated tensors; the embedding's own stage for a tied head's copy) and
 * is combined by a bitwise OR over the world, so every bit arrives unchanged,
 * -0 included: in exact mode the copy is exact. */
#ifndef MP_EXEC_REF_SYNC_H
#define MP_EXEC_REF_SYNC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "exec/kernels.h"
#include "exec/params.h"
#include "exec/runtime.h"

/* Elements (8 bytes each) combined by one all-reduce. */
#define MP_REF_SYNC_PIECE ((size_t)1 << 20)

/* The reference's flat buffers in ref_lay's order (n = ref_lay->total each). */
typedef struct mp_ref_state {
    void *w, *m, *v;
    bool f64;        /* double (tolerance mode) or float (exact mode) */
} mp_ref_state;

/* Collective over the world. chunks[v]: this rank's trainers, lay[v] their
 * layouts; scratch: ref_lay->total elements. */
mp_status mp_ref_sync(const mp_runtime *rt, const mp_trainer_f32 *chunks,
                      const mp_param_layout *lay, int v, const mp_param_layout *ref_lay,
                      uint64_t *scratch, mp_ref_state *ref, mp_error *err);

#endif
