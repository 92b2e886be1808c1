/* memory.h — what a run of exec allocates, before it allocates anything: per
 * rank its share of the model (weights, gradients, Adam moments, the
 * distributed optimizer's buffer), its activation slots (the micro-batches
 * its schedule keeps in flight) and workspace, the pipeline's messages, the
 * data and, when checked, the whole model again as the reference (fp64 in
 * tolerance mode, with one micro-batch's activations, its logits and the
 * re-sync buffer), plus what a process of MPI and OpenBLAS holds before any of
 * it. All ranks of a run are on this machine; the sum is set against the
 * memory available (docs/exec.md, "Memory"). */
#ifndef MP_EXEC_MEMORY_H
#define MP_EXEC_MEMORY_H

#include "core/error.h"
#include "core/plan.h"
#include "exec/exec.h"
#include "sim/schedule.h"

/* Resident memory of an exec rank before its model: the program, Open MPI
 * (shared-memory transport) and OpenBLAS's buffers, measured (docs/exec.md). */
#define MP_EXEC_BASELINE_BYTES (24.0 * 1048576.0)
/* ZeRO-3 (zero.c): reals of NaN copied over the weights a rank does not own,
 * piece by piece; the rest of its memory is ZeRO-1's (the whole stage's
 * weights are gathered into the one buffer that holds the shard). */
#define MP_ZERO_POISON_N 4096
/* The allocator's and MPI's share on top of the buffers (memory.c). */
#define MP_EXEC_OVERHEAD 0.10

typedef struct mp_exec_memory {
    int ranks;          /* processes on this machine */
    double total;       /* bytes, all of them */
    double rank_max;    /* bytes, the most loaded rank */
    /* the most loaded rank's parts */
    double model;       /* weights, gradients, Adam moments, dist-opt buffer */
    double activations; /* activation slots and workspace */
    double reference;   /* the unpartitioned reference and the check's buffers */
    double other;       /* pipeline messages, data, report, the process itself */
} mp_exec_memory;

/* Activation slots model chunk `chunk` needs: its micro-batches in flight. */
int mp_exec_slots(const mp_op_list *ops, int chunk);
/* The reference's sizes: the whole model on one rank (tp = cp = 1, no SP,
 * every layer, no recomputation: it keeps everything). */
mp_gpt_dims mp_exec_ref_dims(const mp_gpt_dims *d);

/* The estimate for plan as exec runs it (d, m from mp_exec_precheck). */
mp_status mp_exec_memory_estimate(const mp_plan *plan, const mp_exec_opts *o,
                                  const mp_gpt_dims *d, int m, mp_exec_memory *out,
                                  mp_error *err);

/* Bytes this machine can give a new run: MemAvailable (/proc/meminfo), less
 * if a cgroup limit leaves less, else sysconf's physical memory; *source
 * names where the figure came from. 0 when unknown. */
double mp_exec_memory_available(const char **source);

/* MP_EINPUT ("model: the run needs about X GiB ... available: use --shrink")
 * when est->total exceeds available (> 0). */
mp_status mp_exec_memory_check(const mp_exec_memory *est, double available, const char *source,
                               mp_error *err);

/* Peak resident bytes of this process so far (getrusage). */
double mp_exec_peak_rss(void);

#endif
