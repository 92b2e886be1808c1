/* exec.h — run a plan on MPI ranks and check it against the unpartitioned
 * model (docs/design.md §7). The CLI (src/cli/exec.c) starts MPI through
 * mp_runtime_start, calls mp_exec_run on every rank and prints rank 0's report. */
#ifndef MP_EXEC_EXEC_H
#define MP_EXEC_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/plan.h"
#include "exec/params.h"
#include "exec/runtime.h"
#include "sim/timeline.h"

/* --steps: the report keeps a few numbers per step (docs/exec.md, "Long runs") */
#define MP_EXEC_MAX_STEPS 1000000
#define MP_EXEC_MAX_CHUNKS 64 /* model chunks (vpp) one rank runs */
/* BERT's default tolerance: the gradients of its two-way head's bias and the
 * pooler's bias are sums of p - y over samples that cancel, so fp32 rounding
 * alone reaches 2e-5 of them (docs/exec.md) */
#define MP_EXEC_BERT_TOL 1e-4
/* bf16 GEMMs (CUDA backend, bf16/fp16 plans) against the fp64 reference:
 * docs/exec.md ("Precision") derives it from bf16's 2^-9 rounding and measures it */
#define MP_EXEC_BF16_TOL 8e-2
/* BERT in bf16: the two-way head's and the pooler's bias gradients cancel to
 * ~1e-6, so bf16's rounding alone reaches 0.13 of them (docs/exec.md) */
#define MP_EXEC_BERT_BF16_TOL 0.5

typedef struct mp_exec_opts {
    int steps;             /* training steps to run and check (default 3) */
    int check_every;       /* check steps 1, 1+K, 1+2K, ... and the last (0 or 1: every one) */
    bool exact;            /* dyadic data, bitwise comparison */
    bool shrink;           /* scale the model down, keeping the degrees */
    bool check;            /* compare against the reference (default on) */
    uint64_t seed;
    double tol;            /* tolerance mode: max relative error per tensor (1e-5; BERT 1e-4) */
    bool tol_set;          /* tol was given (else the model's default) */
    double lr;             /* 0: the mode's default */
    double adam_eps;       /* 0: the mode's default (docs/exec.md: why 1e-4 in tolerance mode) */
    int microbatches;      /* 0: the plan's global_batch / (micro_batch * dp) */
    bool want_timeline;    /* gather the measured timeline of the last step on rank 0 */
    const char *test_drop; /* test-only: collective site to skip (probe.h) */
    int test_kill_rank;    /* test-only: rank that kills itself in step 1 (-1 none) */
    const char *fixture;   /* test-only: a PyTorch fixture (fixture.h) gives the weights, the
                              data and the reference of one step (fp32, tolerance mode) */
    int test_stop_rank;    /* test-only: rank that stops itself (SIGSTOP) in step 1 (-1 none) */
    double test_memory;    /* test-only: bytes available to the run instead of this
                              machine's (0: measure; memory.h) */
    double timeout;        /* seconds one wait on the peers may take (0: derived from the
                              predicted step time, watchdog.h) */
    /* Called on rank 0 after every step (the library prints nothing; the CLI
     * decides what to show): steps done, of how many, seconds since the
     * first began, and the seconds the rest should take at that pace. */
    void (*progress)(void *ctx, int step, int steps, double elapsed, double remaining);
    void *progress_ctx;
    int solo_rank;         /* --solo: this one process runs that global rank's share at
                              full size, collectives left out, no check (-1: off) */
    const char *backend;   /* "cpu" (default) or "cuda" */
} mp_exec_opts;

void mp_exec_opts_default(mp_exec_opts *o);

/* What the probe's events of one step add up to, per rank. */
typedef enum {
    MP_PHASE_F,         /* forward passes */
    MP_PHASE_B,         /* backward passes */
    MP_PHASE_TP,        /* TP/SP collectives (inside F and B) */
    MP_PHASE_DP,        /* DP (x CP) gradient reduction and the dist-opt all-gather */
    MP_PHASE_OPTIMIZER, /* AdamW */
    MP_PHASE_CP,        /* CP ring steps (inside F and B) */
    MP_PHASE_PP,        /* pipeline sends, receives (waiting included), tied-embedding sum */
    MP_PHASE_COUNT
} mp_phase;

typedef struct mp_exec_tensor {
    char name[64];
    double max_abs, max_rel;
    bool bad;
} mp_exec_tensor;

typedef struct mp_exec_report {
    mp_gpt_dims dims;          /* the model that ran (after --shrink), TP rank 0's view */
    int ranks, tp, cp, dp, pp, vpp, microbatches, steps;
    int solo_rank;              /* -1, or the rank --solo played */
    int solo_coords[4];         /* its (t, c, d, p) */
    bool sp, dist_opt, exact, checked;
    int zero;                   /* 2 or 3: ZeRO-2/3 as run (zero.c); 0 otherwise */
    int hsdp_shard;             /* HSDP: ranks of one shard group; 0 without */
    double tol;                 /* tolerance mode's threshold, as used */
    const char *schedule;
    const char *backend;        /* the backend's name ("cpu", "cpu-solo", "cuda", "cuda-solo") */
    const char *transport;      /* what carried the collectives: "mpi", "nccl", "none" (solo) */
    const char *compute_precision; /* the GEMMs' inputs: "fp32", or "bf16" on CUDA */
    const char *plan_precision; /* the plan's; the CPU backend computes in fp32 */
    const char *recompute;      /* the plan's recomputation, as run */
    bool layer_recompute;       /* per layer, as the plan lists it */
    bool zbv_order_fallback;    /* zb-v: the generator's greedy orders stalled and its
                                   fallback order ran (simulate's order_fallback) */
    double activation_bytes;    /* activation slots of the most loaded rank */
    double memory_estimate;     /* bytes the most loaded rank was estimated to take (memory.h) */
    double memory_peak;         /* its measured peak resident bytes, max over ranks */
    int check_every;            /* as run (1: every step) */
    double *loss, *ref_loss;    /* [steps]; ref_loss of the checked steps only */
    unsigned char *step_checked; /* [steps] */
    double *step_seconds;       /* [steps] the partitioned step (no reference), slowest rank */
    /* measured seconds per phase in the last step, max over ranks (mp_phase;
     * TP and CP collectives run inside F and B and count there too) */
    double phase_seconds[MP_PHASE_COUNT];
    bool ok;
    double max_abs, max_rel;
    long tensors_checked;
    /* first mismatch (valid when !ok) */
    char bad_tensor[80];
    int bad_rank, bad_step;
    double bad_abs, bad_rel;
    /* per-tensor summary over ranks and steps (rank 0 only) */
    mp_exec_tensor *tensors;
    int n_tensors;
    mp_timeline timeline;      /* rank 0, when want_timeline */
    bool have_timeline;
    bool collective_error;     /* the error (if any) was found by every rank alike */
} mp_exec_report;

/* The model the executor runs for a plan: the plan's GPT, or with shrink one
 * scaled down so that every degree still divides what it splits (and with
 * pipelining one block per virtual stage). Checks that the plan is something
 * this executor can run (gpt/layernorm/gelu/learned positions, cp = 1). */
mp_status mp_exec_dims(const mp_plan *plan, bool shrink, mp_gpt_dims *out, int *microbatches,
                       mp_error *err);

/* Layer items [begin, end) of virtual stage vstage (chunk c of pipeline rank
 * r is c*pp + r; 0, 0 without pipelining: the whole model): the plan's stages
 * when it has them and the model runs unshrunk, else Megatron's even split
 * of d->layers into pp*vpp stages. */
mp_status mp_exec_stage_items(const mp_plan *plan, bool shrink, const mp_gpt_dims *d,
                              int vstage, int *begin, int *end, mp_error *err);
/* Virtual stage vstage's place against Megatron's standalone MTP stage
 * (mp_gpt_dims.mtp_split: MP_MTP_BEFORE / ON / AFTER; 0 when the modules run
 * beside the loss, or the model has none). */
int mp_exec_mtp_role(const mp_plan *plan, bool shrink, int vstage);

/* The checks of the plan and options that need no ranks (dims, --steps,
 * exact mode's reduction length); mp_exec_run repeats them. */
mp_status mp_exec_precheck(const mp_plan *plan, const mp_exec_opts *o, mp_gpt_dims *d, int *m,
                           mp_error *err);

/* The backend o->backend names for this rank (backend_pick.c): CPU, or CUDA
 * on the device of the rank's local rank (bf16 GEMMs when low_precision and
 * not exact), solo variants under --solo. Its collectives run over the
 * runtime's groups and extra[n_extra] (MoE's EP and expert-DP groups). No CUDA
 * device, or a build without the CUDA backend: MP_EINPUT naming --backend. */
mp_status mp_exec_backend(const mp_runtime *rt, const mp_exec_opts *o, bool low_precision,
                          const mp_group *const *extra, int n_extra, const mp_backend **be,
                          mp_error *err);

/* Whether the backend named can run here (a CUDA device, a build with the
 * CUDA backend), without starting it: MP_EINPUT naming --backend if not. */
mp_status mp_exec_backend_available(const char *name, mp_error *err);

/* Runs and checks; every rank calls it. */
mp_status mp_exec_run(mp_runtime *rt, const mp_plan *plan, const mp_exec_opts *o,
                      mp_exec_report *rep, mp_error *err);
void mp_exec_report_free(mp_exec_report *rep);

#endif
