/* exec.c — `megaplan exec PLAN`: run a plan on MPI ranks and check its
 * numerics against the unpartitioned model (src/exec, docs/design.md §7).
 *
 *   mpirun -np N megaplan exec plan.yaml     MPI starts the ranks
 *   megaplan exec --np N plan.yaml           megaplan starts mpirun itself
 *
 * Only rank 0 prints the report; every rank exits with the same status. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/mpi_launch.h"
#include "cli/options.h"
#include "core/error.h"
#include "megaplan_config.h"

#if HAVE_EXEC_CPU
#include "core/decode.h"
#include "core/io.h"
#include "core/output.h"
#include "exec/compare.h"
#include "exec/exec.h"
#include "exec/fixture.h"
#include "exec/memory.h"
#include "exec/plan_share.h"
#include "exec/runtime.h"
#include "sim/timeline.h"
#endif
#if defined(MP_WITH_CUDA) || defined(MP_CUDA_HOST_SHIM)
#include "exec/backend_cuda.h"
#endif

enum {
    E_NP, E_STEPS, E_CHECK_EVERY, E_EXACT, E_SHRINK, E_NO_CHECK, E_SEED, E_TOL, E_LR, E_ADAM_EPS,
    E_MICRO_BATCHES, E_TIMEOUT, E_PROGRESS, E_TRACE, E_FORCE, E_FORMAT, E_COMPARE, E_SOLO,
    E_BACKEND, E_CHECKED_PLAN, E_TEST_DROP, E_TEST_KILL, E_TEST_STOP, E_TEST_MEMORY, E_TEST_FIXTURE
};

static const mp_opt exec_rows[] = {
    {"--np", NULL, "N", E_NP, 0, "start N ranks with mpirun (otherwise run under mpirun -np N)",
     NULL},
    {"--steps", NULL, "K", E_STEPS, 0, "training steps to run and check (default 3)", NULL},
    {"--check-every", NULL, "K", E_CHECK_EVERY, 0,
     "check steps 1, 1+K, 1+2K, ... and the last (default 1); each checked step starts from "
     "the partitioned run's state",
     NULL},
    {"--exact", NULL, NULL, E_EXACT, 0,
     "dyadic data: partitioned and reference must agree bit for bit (default: fp32 against an "
     "fp64 reference, relative error <= --tol)",
     NULL},
    {"--shrink", NULL, NULL, E_SHRINK, 0,
     "keep the degrees, scale hidden/heads/seq/layers/vocab down", NULL},
    {"--no-check", NULL, NULL, E_NO_CHECK, 0,
     "run and time only, without the unpartitioned reference", NULL},
    {"--seed", NULL, "S", E_SEED, 0, "the seed of the weights and data", NULL},
    {"--tol", NULL, "X", E_TOL, 0,
     "tolerance mode's largest relative error (default 1e-5; BERT and GPT-OSS's sink logits "
     "1e-4)",
     NULL},
    {"--lr", NULL, "X", E_LR, 0, "Adam's learning rate", NULL},
    {"--adam-eps", NULL, "X", E_ADAM_EPS, 0, "Adam's epsilon", NULL},
    {"--micro-batches", "--microbatches", "M", E_MICRO_BATCHES, 0,
     "micro-batches per step and DP rank (default: the plan's global_batch / (micro_batch x dp))", NULL},
    {"--timeout", NULL, "S", E_TIMEOUT, 0,
     "a rank that waits on its peers longer than S seconds ends the job (default: 60 s + 10 x "
     "the predicted step time)",
     NULL},
    {"--progress", NULL, "S", E_PROGRESS, 0,
     "a line on stderr (step k of n, elapsed, time left) every S seconds (default 10; 0: after "
     "every step)",
     NULL},
    {"--trace", NULL, "FILE", E_TRACE, 0, "measured timeline of the last step (Chrome trace JSON)",
     NULL},
    {"--force", NULL, NULL, E_FORCE, 0, "let --trace replace a read-only file", NULL},
    {"--format", NULL, "F", E_FORMAT, 0,
     "table (default) or json: stdout holds one JSON object; the report goes to stderr",
     "table json"},
    {"--compare", NULL, "HW", E_COMPARE, 0,
     "the last step's times against the simulator's prediction of this run on profile HW (from "
     "`megaplan calibrate`), per phase",
     NULL},
    {"--solo", NULL, "R", E_SOLO, 0,
     "one process runs global rank R's share at full size, collectives and messages left out, "
     "no check (--compare gives their modelled time)",
     NULL},
    {"--backend", NULL, "B", E_BACKEND, 0,
     "cpu (OpenBLAS, default) or cuda (cuBLAS and the kernels of kernels/, one GPU per rank by "
     "local rank; bf16 GEMMs for bf16 and fp16 plans unless --exact)",
     "cpu cuda"},
    /* given by `exec --np` to its ranks: the plan it checked */
    {"--checked-plan", NULL, "HASH", E_CHECKED_PLAN, MP_OPT_HIDDEN, "", NULL},
    /* the tests' fault injection and fixtures (tests/exec) */
    {"--test-drop-allreduce", NULL, "WHAT", E_TEST_DROP, MP_OPT_HIDDEN, "", NULL},
    {"--test-kill-rank", NULL, "R", E_TEST_KILL, MP_OPT_HIDDEN, "", NULL},
    {"--test-stop-rank", NULL, "R", E_TEST_STOP, MP_OPT_HIDDEN, "", NULL},
    {"--test-memory-available", NULL, "GIB", E_TEST_MEMORY, MP_OPT_HIDDEN, "", NULL},
    {"--test-fixture", NULL, "FILE", E_TEST_FIXTURE, MP_OPT_HIDDEN, "", NULL},
};

static const mp_opt_group exec_opts = MP_OPT_GROUP("options", exec_rows);

const mp_verb_doc mp_doc_exec = {
    .name = "exec",
    .summary = "run a plan on MPI ranks; check numerics and timing",
    .usage = "megaplan exec PLAN.yaml [--np N] [options]\n"
             "mpirun -np N megaplan exec PLAN.yaml [options]\n",
    .text = "Runs the plan's tensor, sequence, context, pipeline and data parallelism on MPI "
            "ranks (CPU backend) and compares loss, logits, every gradient and every updated "
            "weight with the same model unpartitioned on one rank.",
    .groups = (const mp_opt_group *const[]){&exec_opts, NULL},
    .operand = "file",
};

/* Progress on stderr: a line when at least `every` seconds have passed
 * since the last one (0: after every step), so short runs stay quiet. */
typedef struct progress {
    double every, last;
} progress;

__attribute__((unused)) static void print_progress(void *ctx, int step, int steps,
                                                   double elapsed, double remaining)
{
    progress *p = ctx;
    if (step == steps || elapsed - p->last < p->every)
        return;
    p->last = elapsed;
    fprintf(stderr, "megaplan exec: step %d of %d, %.1f s elapsed, about %.1f s left\n", step,
            steps, elapsed, remaining);
    fflush(stderr);
}

typedef struct exec_args {
    const char *plan;
    int np;
    bool json;
    const char *trace;
    bool force;          /* --trace may replace a read-only file */
    const char *compare; /* hardware profile to simulate the run on */
    progress progress;   /* --progress S */
    bool checked;        /* --checked-plan: the hash of the plan `exec --np` checked */
    uint64_t checked_hash;
#if HAVE_EXEC_CPU
    mp_exec_opts o;
#endif
} exec_args;

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

__attribute__((unused)) static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 1e6)
        return false;
    *out = v;
    return true;
}

/* What an option's value must be, for its refusal (the ranges parse_args checks). */
#if HAVE_EXEC_CPU
_Static_assert(MP_EXEC_MAX_STEPS == 1000000, "expected() quotes the limit of --steps");
#endif
static const char *expected(int id)
{
    switch (id) {
    case E_NP: return "a number of ranks from 1 to 4096";
    case E_STEPS:
    case E_CHECK_EVERY: return "a whole number of steps from 1 to 1000000";
    case E_SEED: return "a whole number from 0 to 2147483647";
    case E_TOL:
    case E_LR:
    case E_ADAM_EPS: return "a number above 0 and at most 1e6";
    case E_TIMEOUT: return "seconds above 0 and at most 1e6";
    case E_TEST_MEMORY: return "GiB above 0 and at most 1e6";
    case E_PROGRESS: return "seconds from 0 to 1e6";
    case E_MICRO_BATCHES: return "a whole number from 1 to 1048576";
    case E_SOLO:
    case E_TEST_KILL:
    case E_TEST_STOP: return "a rank number (0, 1, ...)";
    case E_FORMAT: return "table or json";
    case E_BACKEND: return "cpu or cuda";
    case E_CHECKED_PLAN: return "a hexadecimal hash";
    default: return "a valid value";
    }
}

/* Parses argv; returns 0 ok, 2 bad usage (message printed when loud). */
static int parse_args(int argc, char **argv, exec_args *a, bool loud)
{
    memset(a, 0, sizeof *a);
    a->progress.every = 10;
#if HAVE_EXEC_CPU
    mp_exec_opts_default(&a->o);
#endif
    mp_opt_seen seen = {0};
    char shown[256]; /* an argument as an error line shows it */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            mp_verb_doc_write(&mp_doc_exec, stdout);
            return 1;
        }
        const mp_opt *o = NULL;
        const char *val = NULL;
        mp_error err;
        int found = mp_opt_take(exec_rows, sizeof exec_rows / sizeof exec_rows[0], argc, argv, &i,
                                &o, &val, &err);
        if (found < 0) {
            if (loud)
                fprintf(stderr, "megaplan exec: %s: %s\n", err.field, err.msg);
            return 2;
        }
        if (!found) {
            if (arg[0] == '-' && arg[1]) {
                char msg[160];
                mp_opt_unknown(&mp_doc_exec, NULL, arg, msg, sizeof msg);
                if (loud)
                    fprintf(stderr, "megaplan exec: %.*s: %s\n", (int)strcspn(arg, "="),
                            mp_cli_shown(arg, shown, sizeof shown), msg);
                return 2;
            }
            if (a->plan) {
                if (loud)
                    fprintf(stderr, "megaplan exec: %s: only one plan file\n",
                            mp_cli_shown(arg, shown, sizeof shown));
                return 2;
            }
            /* "" was read as a file and refused with no name: "cannot read: No such file" */
            if (!arg[0]) {
                if (loud)
                    fprintf(stderr, "megaplan exec: PLAN.yaml: empty file name\n");
                return 2;
            }
            a->plan = arg;
            continue;
        }
        if (mp_opt_once(&seen, o, val, arg, &err) < 0) {
            if (loud)
                fprintf(stderr, "megaplan exec: %s: %s\n", err.field, err.msg);
            return 2;
        }
        if (o->arg && val && !*val) {
            /* an empty file name passed every check and failed only after the run */
            if (loud)
                fprintf(stderr, "megaplan exec: %s: needs a value\n", o->name);
            return 2;
        }
        const char *name = o->name;
        long n = 0;
        bool ok = true;
        switch (o->id) {
        case E_NP:
            ok = parse_int(val, 1, 4096, &n);
            a->np = (int)n;
            break;
        case E_FORMAT:
            ok = !strcmp(val, "json") || !strcmp(val, "table");
            a->json = !strcmp(val, "json");
            break;
        case E_TRACE: a->trace = val; break;
        case E_FORCE: a->force = true; break;
        case E_COMPARE: a->compare = val; break;
        case E_CHECKED_PLAN: {
            char *end;
            errno = 0;
            a->checked_hash = strtoull(val, &end, 16);
            ok = !errno && end != val && !*end;
            a->checked = true;
            break;
        }
#if HAVE_EXEC_CPU
        case E_STEPS:
            ok = parse_int(val, 1, MP_EXEC_MAX_STEPS, &n);
            a->o.steps = (int)n;
            break;
        case E_EXACT: a->o.exact = true; break;
        case E_SHRINK: a->o.shrink = true; break;
        case E_NO_CHECK: a->o.check = false; break;
        case E_SEED:
            ok = parse_int(val, 0, 0x7fffffffL, &n);
            a->o.seed = (uint64_t)n;
            break;
        case E_TOL:
            ok = parse_double(val, &a->o.tol);
            a->o.tol_set = true;
            break;
        case E_LR: ok = parse_double(val, &a->o.lr); break;
        case E_ADAM_EPS: ok = parse_double(val, &a->o.adam_eps); break;
        case E_MICRO_BATCHES:
            ok = parse_int(val, 1, 1 << 20, &n);
            a->o.microbatches = (int)n;
            break;
        case E_TEST_DROP: a->o.test_drop = val; break;
        case E_TEST_FIXTURE: a->o.fixture = val; break;
        case E_SOLO:
            ok = parse_int(val, 0, 1 << 24, &n);
            a->o.solo_rank = (int)n;
            a->o.check = false; /* one rank without its peers computes no checkable values */
            break;
        case E_BACKEND:
            ok = !strcmp(val, "cpu") || !strcmp(val, "cuda");
            a->o.backend = val;
            break;
        case E_TEST_KILL:
            ok = parse_int(val, 0, 1 << 20, &n);
            a->o.test_kill_rank = (int)n;
            break;
        case E_TEST_MEMORY: {
            double gib = 0;
            ok = parse_double(val, &gib);
            a->o.test_memory = gib * 1073741824.0;
            break;
        }
        case E_TEST_STOP:
            ok = parse_int(val, 0, 1 << 20, &n);
            a->o.test_stop_rank = (int)n;
            break;
        case E_PROGRESS: {
            char *end;
            errno = 0;
            a->progress.every = strtod(val, &end);
            ok = !errno && end != val && !*end && a->progress.every >= 0 &&
                 a->progress.every <= 1e6;
            break;
        }
        case E_CHECK_EVERY:
            ok = parse_int(val, 1, MP_EXEC_MAX_STEPS, &n);
            a->o.check_every = (int)n;
            break;
        case E_TIMEOUT: ok = parse_double(val, &a->o.timeout); break;
#endif
        default:
            /* an option of the executor, which this build does not have: said below */
            break;
        }
        if (!ok) {
            if (loud)
                fprintf(stderr, "megaplan exec: %s: '%s': expected %s\n", name,
                        mp_cli_shown(val, shown, sizeof shown), expected(o->id));
            return 2;
        }
    }
    if (!a->plan) {
        if (loud)
            fprintf(stderr, "megaplan exec: a plan file is needed (megaplan exec --help)\n");
        return 2;
    }
    if (a->force && !a->trace) {
        /* --force without --trace was taken and did nothing */
        if (loud)
            fprintf(stderr, "megaplan exec: --force: nothing to overwrite: it lets --trace "
                            "replace a read-only file\n");
        return 2;
    }
#if HAVE_EXEC_CPU
    if (a->o.solo_rank >= 0 && a->np > 0) {
        if (loud)
            fprintf(stderr, "megaplan exec: --solo: runs one process; drop --np\n");
        return 2;
    }
#endif
    return 0;
}

#if !HAVE_EXEC_CPU

int cmd_exec(int argc, char **argv)
{
    exec_args a;
    int rc = parse_args(argc, argv, &a, true);
    if (rc)
        return rc == 1 ? 0 : rc;
    fprintf(stderr, "megaplan exec: the executor was not built: it needs Open MPI and OpenBLAS "
                    "at build time (Debian: libopenmpi-dev libopenblas-dev)\n");
    return 1;
}

#else

/* --compare's profile; a name it does not know is --compare's error (it
 * said "hw:", and after the plan's name, as if the plan were wrong) */
static mp_status load_compare(const char *name, mp_hw *hw, mp_error *err)
{
    mp_status st = mp_hw_load(name, hw, err);
    if (st && !err->file[0])
        snprintf(err->field, sizeof err->field, "--compare");
    return st;
}

/* How the ranks were started, for precheck's count of them and its voice. */
typedef struct precheck_mode {
    int np;        /* ranks that run the plan: --np's, the launcher's world (-1:
                      not known), or 0 for the in-process path */
    bool launcher; /* under the user's mpirun: every rank checks */
    bool loud;     /* this process says why (rank 0 alone under a launcher) */
    bool local;    /* a rank but rank 0: a file it cannot read is rank 0's to read */
    const char *rank; /* with loud: the rank, named in its line (NULL: none) */
} precheck_mode;

/* A rank of another program than rank 0's in mpirun's MPMD form (A : B):
 * its plan may not be rank 0's, whose line would then not say why it stopped. */
static const char *mpmd_rank(void)
{
    const char *app = getenv("OMPI_MCA_orte_app_num");
    return app && strcmp(app, "0") ? getenv("OMPI_COMM_WORLD_RANK") : NULL;
}

/* The launcher's world size from its environment; -1 when it does not say. */
static int launcher_world_size(void)
{
    const char *s = getenv("OMPI_COMM_WORLD_SIZE");
    if (!s)
        s = getenv("PMI_SIZE");
    long n = 0;
    return s && parse_int(s, 1, 1 << 24, &n) ? (int)n : -1;
}

/* Before MPI starts: a plan that cannot run is refused once, here, rather
 * than by N ranks under mpirun's own messages, and without MPI's state
 * (an exit after MPI_Init leaves Open MPI's allocations, which
 * LeakSanitizer reports as leaks: exit 134 instead of 2). mode: how the
 * ranks start (--np's, the user's mpirun's, or the in-process path's one
 * process: the plan's whole world, or --solo's one rank of it). 0: checked;
 * -1: a rank but rank 0 that cannot read the file (rank 0's bytes decide);
 * else the exit status, said once. *hash: the plan's bytes, which the ranks
 * then run or refuse; *compare_hw: --compare's profile. */
static int precheck(const exec_args *a, precheck_mode mode, uint64_t *hash, mp_hw *compare_hw)
{
    int np = mode.np;
    mp_error err;
    mp_error_clear(&err);
    mp_plan *plan = calloc(1, sizeof *plan);
    if (!plan) {
        fprintf(stderr, "megaplan exec: out of memory\n");
        return 1;
    }
    mp_gpt_dims d;
    int m = 0;
    char *text = NULL;
    size_t len = 0;
    mp_status st = mp_read_file(a->plan, MP_MAX_INPUT_BYTES, &text, &len, &err);
    if (st == MP_EIO && mode.local) {
        /* a node without the file: rank 0 reads it and broadcasts it */
        free(plan);
        return -1;
    }
    if (!st) {
        /* the ranks run these bytes or nothing (mp_exec_share_plan) */
        *hash = mp_exec_hash_bytes(text, len, 0);
        st = mp_plan_parse_yaml(text, len, a->plan, plan, &err);
        free(text);
    }
    if (!st)
        st = mp_exec_precheck(plan, &a->o, &d, &m, &err);
    if (!st && a->compare)
        st = load_compare(a->compare, compare_hw, &err);
    if (!st && a->o.fixture) {
        /* the tests' fixture: its file, and its model the plan's */
        mp_fixture fx;
        memset(&fx, 0, sizeof fx);
        st = mp_fixture_load(a->o.fixture, &fx, &err);
        if (!st)
            st = mp_fixture_match(&fx, &d, m * (int)plan->config.parallel.dp * d.micro_batch,
                                  &err);
        mp_fixture_free(&fx);
    }
    if (!st) { /* the ranks: one process here, or --np's */
        const mp_parallel *p = &plan->config.parallel;
        int64_t need = p->tp * p->cp * p->dp * p->pp;
        if (np > 0 && need != np && mode.launcher)
            st = mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "training.gpus",
                              "the plan needs %lld ranks (tp %lld x cp %lld x dp %lld x pp "
                              "%lld) but MPI started %d: run `mpirun -np %lld megaplan exec "
                              "...` or `megaplan exec --np %lld ...`",
                              (long long)need, (long long)p->tp, (long long)p->cp,
                              (long long)p->dp, (long long)p->pp, np, (long long)need,
                              (long long)need);
        else if (np > 0 && need != np)
            st = mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--np",
                              "the plan needs %lld ranks (tp %lld x cp %lld x dp %lld x pp "
                              "%lld), not %d",
                              (long long)need, (long long)p->tp, (long long)p->cp,
                              (long long)p->dp, (long long)p->pp, np);
        else if (np == 0 && a->o.solo_rank >= need)
            st = mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--solo",
                              "rank %d is not one of the plan's %lld ranks", a->o.solo_rank,
                              (long long)need);
        else if (np == 0 && a->o.solo_rank < 0 && need != 1)
            st = mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "training.gpus",
                              "the plan needs %lld ranks (tp %lld x cp %lld x dp %lld x pp "
                              "%lld) and this is one process: run `megaplan exec --np %lld "
                              "...` or `mpirun -np %lld megaplan exec ...`",
                              (long long)need, (long long)p->tp, (long long)p->cp,
                              (long long)p->dp, (long long)p->pp, (long long)need,
                              (long long)need);
    }
    if (!st) {
        /* a run that would not fit is refused before any rank starts */
        mp_exec_memory mem;
        const char *source = "";
        st = mp_exec_memory_estimate(plan, &a->o, &d, m, &mem, &err);
        if (!st) {
            double have = mp_exec_memory_available(&source);
            if (a->o.test_memory > 0)
                have = a->o.test_memory, source = "--test-memory-available";
            st = mp_exec_memory_check(&mem, have, source, &err);
        }
    }
    free(plan);
    if (!st)
        return 0;
    mp_error_point_file(&err, a->plan);
    if (!mode.loud) /* rank 0 says it; every rank leaves with its status */
        return mp_error_exit_status(err.code);
    if (mode.rank) {
        char line[1024];
        fprintf(stderr, "megaplan exec: rank %s: %s\n", mode.rank,
                mp_error_format(&err, line, sizeof line));
        return mp_error_exit_status(err.code);
    }
    return mp_cli_fail("exec", &err);
}

static const char *cmp_key(mp_cmp_row r)
{
    static const char *const keys[MP_CMP_COUNT] = {"step", "compute", "tp", "cp", "pp", "dp",
                                                   "optimizer"};
    return keys[r];
}

/* Measured against simulated, per phase of the last step. */
static void print_comparison(const mp_hw *hw, const mp_exec_comparison *c, bool device)
{
    printf("compare: the last step against the simulator on %s (slowest rank; TP and CP "
           "collectives are left out of compute)\n", hw->name);
    printf("  %-24s %12s %12s %10s\n", "phase", "measured s", "simulated s", "ratio");
    for (int i = 0; i < MP_CMP_COUNT; i++) {
        double m = c->measured[i], s = c->simulated[i];
        if (m == 0 && s == 0)
            continue;
        char ratio[32];
        if (s > 0)
            snprintf(ratio, sizeof ratio, "%.2f", m / s);
        else
            snprintf(ratio, sizeof ratio, "-");
        printf("  %-24s %12.6f %12.6f %10s\n", mp_cmp_name((mp_cmp_row)i), m, s, ratio);
    }
    if (device)
        printf("  MFU: %.1f%% measured, %.1f%% simulated (model FLOPs per step over every GPU's "
               "peak on %s; Megatron-Core publishes 47%% end to end on H100)\n",
               100 * c->mfu_measured, 100 * c->mfu_simulated, hw->name);
}

/* The CUDA backend's GEMMs on this rank against cuBLAS alone (issue 10's
 * speed check: the GEMM-bound layers should reach 60% of it). */
static void print_gemm_rate(void)
{
#if defined(MP_WITH_CUDA) || defined(MP_CUDA_HOST_SHIM)
    double peak = 0;
    mp_cuda_gemm_stat g;
    mp_error e;
    mp_error_clear(&e);
    mp_cuda_gemm_stats(&g);
    if (g.seconds <= 0 || mp_cuda_gemm_peak(8192, true, &peak, &e) || peak <= 0)
        return;
    double other_s = g.seconds - g.staged_seconds;
    printf("gemm: %ld cuBLAS calls on rank 0 ran at %.1f TFLOP/s (%ld on bf16 copies of their "
           "operands at %.1f, the other %ld at %.1f); cuBLAS alone (bf16 inputs, 8192^3) %.1f "
           "TFLOP/s; ratio %.2f\n",
           g.calls, g.flops / g.seconds / 1e12, g.staged,
           g.staged_seconds > 0 ? g.staged_flops / g.staged_seconds / 1e12 : 0.0,
           g.calls - g.staged, other_s > 0 ? (g.flops - g.staged_flops) / other_s / 1e12 : 0.0,
           peak / 1e12, g.flops / g.seconds / peak);
#endif
}

/* Reports of longer runs print the first and last half of these steps. */
#define MP_EXEC_SHOWN_STEPS 20

static void print_report(const exec_args *a, const mp_plan *plan, const mp_exec_report *r,
                         double tol)
{
    const mp_gpt_dims *d = &r->dims;
    char zero[64] = "";
    if (r->hsdp_shard > 0)
        snprintf(zero, sizeof zero, " + HSDP: ZeRO-3 in shards of %d ranks", r->hsdp_shard);
    else if (r->zero >= 2)
        snprintf(zero, sizeof zero, " + ZeRO-%d", r->zero);
    printf("megaplan exec: %s on %d ranks (tp %d, sp %s, cp %d, dp %d, dist-opt %s%s, pp %d, "
           "vpp %d), %s backend, %s (plan: %s)\n",
           a->plan, r->ranks, r->tp, r->sp ? "on" : "off", r->cp, r->dp,
           r->dist_opt ? "on" : "off", zero, r->pp,
           r->vpp > 1 ? r->vpp : 1,
           r->backend ? r->backend : "cpu",
           r->compute_precision ? r->compute_precision : "fp32",
           r->plan_precision ? r->plan_precision : "?");
    if (r->backend && strncmp(r->backend, "cpu", 3)) {
        const char *t = r->transport ? r->transport : "?";
        if (!strcmp(t, "none"))
            printf("transport: none (--solo leaves the collectives out)\n");
        else
            printf("transport: collectives by %s%s\n", t,
                   !strcmp(t, "mpi")
                       ? " through host buffers (fewer GPUs than ranks on a node, or no NCCL)"
                       : "");
    }
    char kv[64] = "";
    if (d->head_dim > 0) /* heads of their own width: heads x head_dim != hidden */
        snprintf(kv, sizeof kv, " of %d", d->head_dim);
    if (mp_dims_kv_heads(d) != d->heads)
        snprintf(kv + strlen(kv), sizeof kv - strlen(kv), " (%d key/value)",
                 mp_dims_kv_heads(d));
    printf("model: hidden %d, heads %d%s, ffn %d, vocab %d, seq %d, layers %d, micro-batch %d, "
           "%d micro-batches per DP rank, schedule %s%s\n",
           d->hidden, d->heads, kv, d->ffn, d->vocab, d->seq, d->layers, d->micro_batch,
           r->microbatches, r->schedule, a->o.shrink ? " (shrunk)" : "");
    if (r->zbv_order_fallback)
        printf("note: zb-v's greedy orders stalled; the fallback order ran (at most pp "
               "micro-batches of each chunk in flight), as simulate reports for this plan\n");
    char modules[128] = ""; /* the plan's recompute_modules, when it names them */
    if (d->recompute_modules && r->recompute && !strcmp(r->recompute, "selective")) {
        modules[0] = ' ';
        mp_recompute_modules_format(d->recompute_modules, modules + 1, sizeof modules - 1);
    }
    printf("activations kept: %.3g MiB on the most loaded rank (recompute %s%s%s)\n",
           r->activation_bytes / 1048576.0, r->recompute ? r->recompute : "?", modules,
           r->layer_recompute ? ", per layer as the plan lists it" : "");
    printf("memory: estimated %.3g MiB on the most loaded rank, measured peak %.3g MiB\n",
           r->memory_estimate / 1048576.0, r->memory_peak / 1048576.0);
    if (d->bert)
        printf("blocks: BERT: bidirectional attention, token types, the masked-LM head on "
               "about 15%% of the tokens, the pooler and its two-way head\n");
    if (d->t5)
        printf("blocks: T5: %d encoder + %d decoder (cross-attention), decoder seq %d, "
               "relative position buckets\n",
               d->enc_layers, d->layers - d->enc_layers, d->dec_seq);
    if (mp_dims_is_mla(d)) {
        char q[48] = "queries straight from the hidden state";
        if (d->q_lora > 0)
            snprintf(q, sizeof q, "q latent %d", d->q_lora);
        printf("blocks: multi-head latent attention: %s, kv latent %d, head dims %d nope + %d "
               "rope (the rotary key shared), v %d\n",
               q, d->kv_lora, d->nope_dim, d->rope_dim, d->v_dim);
    }
    if (d->experts > 0) {
        char cap[48] = "dropless";
        int etp = d->etp == 1 ? 1 : r->tp;
        if (d->capacity_factor > 0)
            snprintf(cap, sizeof cap, "capacity factor %g", d->capacity_factor);
        char shared[48] = "";
        if (d->shared_ffn > 0)
            snprintf(shared, sizeof shared, ", shared experts' ffn %d", d->shared_ffn);
        char route[128] = "";
        int n = 0;
        if (d->bias_rate > 0)
            n += snprintf(route + n, sizeof route - (size_t)n, ", expert bias at rate %g",
                          d->bias_rate);
        if (d->route_groups > 1)
            n += snprintf(route + n, sizeof route - (size_t)n, ", in %d of %d groups",
                          d->route_group_top_k, d->route_groups);
        if (d->route_scale > 0 && d->route_scale != 1.0)
            snprintf(route + n, sizeof route - (size_t)n, ", weights x %g", d->route_scale);
        printf("blocks: mixture of experts from block %d: %d experts, top-%d (%s router%s), "
               "expert ffn %d%s, %s; ep %d, etp %d, expert-DP %d\n",
               d->moe_first_dense, d->experts, d->top_k, d->router_sigmoid ? "sigmoid" : "softmax",
               route, d->expert_ffn, shared, cap, mp_dims_ep(d), etp,
               r->tp * r->cp * r->dp / (etp * mp_dims_ep(d)));
        /* the dispatchers and overlaps change where bytes go and when, not
         * what is computed: exec runs every plan's dispatch as its
         * all-to-all, one micro-batch at a time */
        const mp_parallel *pp = &plan->config.parallel;
        if (pp->dispatcher != MP_DISPATCH_ALLTOALL || pp->moe_a2a_overlap ||
            pp->shared_expert_overlap)
            printf("blocks: the plan's %s dispatcher%s runs here as exec's all-to-all, without "
                   "overlap (the same results; the times are the cost model's)\n",
                   mp_dispatcher_name(pp->dispatcher),
                   pp->moe_a2a_overlap || pp->shared_expert_overlap ? " and MoE overlap" : "");
    }
    if (d->rmsnorm || d->gated || d->rope || d->no_bias || d->gelu_erf) {
        /* the rotary angles when they are not LLaMA-2's (base 10000) */
        char angles[200] = "", softmax[48] = "";
        const mp_rope_spec *rf = &d->rope_freq;
        if (d->rope && rf->yarn && mp_rope_softmax_scale(rf) != 1.0) /* DeepSeek's */
            snprintf(softmax, sizeof softmax, ", softmax scale x %.4g",
                     mp_rope_softmax_scale(rf));
        if (d->rope && rf->yarn)
            snprintf(angles, sizeof angles,
                     " (base %g, YaRN: factor %g over %d positions, betas %g and %g, %s ramp "
                     "bounds, cos and sin x %.4g%s)",
                     rf->theta > 0 ? rf->theta : 10000.0, rf->factor, rf->original_seq,
                     rf->beta_fast, rf->beta_slow, rf->unrounded ? "unrounded" : "rounded",
                     mp_rope_attention_factor(rf), softmax);
        else if (d->rope && rf->theta > 0 && rf->theta != 10000.0)
            snprintf(angles, sizeof angles, " (base %g)", rf->theta);
        printf("blocks: %s, %s, %s positions%s, %s%s\n", d->rmsnorm ? "RMSNorm" : "LayerNorm",
               d->gated && d->geglu ? (d->gelu_erf ? "GEGLU (exact erf GeLU)" : "GEGLU")
               : d->gated         ? "SwiGLU"
               : d->relu          ? "ReLU"
               : d->gelu_erf      ? "GeLU (exact erf)"
                                  : "GeLU",
               d->rope ? "rotary" : d->t5 ? "relative" : "learned", angles,
               d->no_bias ? "no biases" : "biases",
               d->qk_norm ? ", QK-norm (RMSNorm on each query and key head before RoPE)" : "");
    }
    /* the norms' epsilon when it is not Megatron's default (BERT's 1e-12,
     * T5's and Qwen's 1e-6, or the model's own) */
    if (mp_dims_norm_eps(d) != 1e-5)
        printf("norms: epsilon %g (the model's norm_eps)\n", mp_dims_norm_eps(d));
    if (d->window > 0 || d->sinks || d->glu_limit > 0) {
        char win[96] = "full attention";
        if (d->window > 0 && d->window_skip_freq > 0)
            snprintf(win, sizeof win, "sliding window %d (every %d%s block full)", d->window,
                     d->window_skip_freq, d->window_skip_freq == 2 ? "nd" : "th");
        else if (d->window > 0)
            snprintf(win, sizeof win, "sliding window %d", d->window);
        printf("blocks: GPT-OSS attention: %s%s", win, d->sinks ? ", a learned sink per head" : "");
        if (d->glu_limit > 0)
            printf("; clamped SwiGLU (limit %g, alpha 1.702)", d->glu_limit);
        printf("\n");
    }
    if (r->cp > 1) {
        /* which positions each CP rank held: chunks c and 2cp-1-c of 2cp */
        int chunk = d->seq / (2 * r->cp);
        printf("context parallel: seq %d in %d chunks of %d; positions of each CP rank:", d->seq,
               2 * r->cp, chunk);
        for (int c = 0; c < r->cp; c++) {
            mp_gpt_dims dc = *d;
            dc.cp_rank = c;
            int last = mp_dims_positions(&dc) - 1;
            printf(" %d: [%d, %d) [%d, %d)%s", c, mp_dims_global_pos(&dc, 0),
                   mp_dims_global_pos(&dc, chunk - 1) + 1, mp_dims_global_pos(&dc, chunk),
                   mp_dims_global_pos(&dc, last) + 1, c + 1 < r->cp ? ";" : "\n");
        }
        /* the exchange changes where K/V go and when, not what is computed */
        mp_cp_comm k = plan->config.parallel.cp_comm_type;
        if (k != MP_CP_P2P)
            printf("context parallel: the plan's %s exchange runs here as exec's ring (the same "
                   "results; the times are the cost model's)\n",
                   mp_cp_comm_name(k));
    }
    /* exec trains without dropout: the check compares every tensor with an
     * unpartitioned reference, which a random mask would not reproduce */
    double hd = mp_model_hidden_dropout(&plan->config.model);
    double ad = mp_model_attention_dropout(&plan->config.model);
    if (hd > 0 || ad > 0)
        printf("dropout: the plan's hidden_dropout %g and attention_dropout %g are not applied "
               "here (the check needs the unpartitioned reference's numbers); --compare costs "
               "the plan without them\n",
               hd, ad);
    if (r->solo_rank >= 0)
        printf("solo: rank %d of %d (tp %d, cp %d, dp %d, pp %d) at full size in one process; "
               "its collectives and messages are left out (--compare HW gives their modelled "
               "time)\n",
               r->solo_rank, r->tp * r->cp * r->dp * r->pp, r->solo_coords[0], r->solo_coords[1],
               r->solo_coords[2], r->solo_coords[3]);
    int K = r->pp * (r->vpp > 1 ? r->vpp : 1);
    if (K > 1) {
        /* the items each (virtual) stage ran: 0 embedding, 1..L blocks, L+1 head;
         * virtual stage k on pipeline rank k % pp */
        bool v_shape = mp_schedule_is_v(plan->config.parallel.schedule);
        bool dual = plan->config.parallel.schedule == MP_SCHED_DUALPIPE;
        printf("stages (layer items [begin, end); 0 embedding, %d head%s):", d->layers + 1,
               v_shape    ? "; V: stages k and 2pp-1-k on rank k"
               : dual     ? "; dualpipe: stage k on ranks k and pp-1-k"
               : K > r->pp ? "; virtual stage k on rank k mod pp"
                           : "");
        for (int k = 0; k < K; k++) {
            int b = 0, e = 0;
            mp_error ignored;
            if (mp_exec_stage_items(plan, a->o.shrink, d, k, &b, &e, &ignored) == MP_OK)
                printf(" [%d, %d)", b, e);
        }
        if (plan->n_stages == K && !a->o.shrink)
            printf(" (the plan's)\n");
        else if (plan->config.parallel.pipeline_layout[0] && !a->o.shrink)
            printf(" (the plan's layout %s)\n", plan->config.parallel.pipeline_layout);
        else if ((plan->config.parallel.account_for_embedding ||
                  plan->config.parallel.account_for_loss) && !a->o.shrink)
            printf(" (the plan's account-for split: %s counted as a layer)\n",
                   !plan->config.parallel.account_for_loss ? "the embedding"
                   : !plan->config.parallel.account_for_embedding ? "the loss"
                                                                  : "the embedding and the loss");
        else if (mp_parallel_split_given(&plan->config.parallel) && !a->o.shrink)
            printf(" (the plan's first/last-stage layers %lld, %lld)\n",
                   (long long)plan->config.parallel.first_stage_layers,
                   (long long)plan->config.parallel.last_stage_layers);
        else if (!a->o.shrink && mp_v_split_default(&plan->config.model,
                                                    plan->config.parallel.schedule,
                                                    plan->config.parallel.pp,
                                                    plan->config.parallel.vpp))
            printf(" (the V's own split: Megatron's splits its interleaved order)\n");
        else if (d->t5) /* Megatron's --pipeline-model-parallel-split-rank */
            printf(" (Megatron's: encoder on stages before split rank %lld, decoder from it)\n",
                   (long long)mp_t5_split_rank(d->enc_layers, d->layers - d->enc_layers, K));
        else
            printf(" (Megatron's even split)\n");
    }
    bool bf16 = r->compute_precision && !strcmp(r->compute_precision, "bf16");
    if (r->checked && a->o.fixture)
        printf("check: fp32 against PyTorch's fp32 step in %s, max relative error %g\n",
               a->o.fixture, tol);
    else if (r->checked)
        printf(r->exact ? "check: exact mode (dyadic data), bitwise against the fp32 reference\n"
               : bf16   ? "check: bf16 GEMMs against the fp64 reference, max relative error %g\n"
                        : "check: fp32 against the fp64 reference, max relative error %g\n",
               tol);
    if (r->checked && r->check_every > 1)
        printf("check: steps 1, %d, %d, ... and %d, each from the partitioned run's state\n",
               1 + r->check_every, 1 + 2 * r->check_every, r->steps);
    for (int s = 0; s < r->steps; s++) {
        /* a long run shows its first and last steps; the ones between are summed up */
        if (r->steps > MP_EXEC_SHOWN_STEPS && s == MP_EXEC_SHOWN_STEPS / 2) {
            int skip = r->steps - MP_EXEC_SHOWN_STEPS;
            double sum = 0, lo = 1e300, hi = 0;
            for (int k = s; k < s + skip; k++) {
                double t = r->step_seconds[k];
                sum += t;
                lo = t < lo ? t : lo;
                hi = t > hi ? t : hi;
            }
            printf("steps %d to %d: %.4f s on average (%.4f to %.4f s)\n", s + 1, s + skip,
                   sum / skip, lo, hi);
            s += skip - 1;
            continue;
        }
        if (r->step_checked[s])
            printf("step %d: loss %.9g (reference %.9g), %.4f s\n", s + 1, r->loss[s],
                   r->ref_loss[s], r->step_seconds[s]);
        else
            printf("step %d: loss %.9g, %.4f s\n", s + 1, r->loss[s], r->step_seconds[s]);
    }
    const double *ph = r->phase_seconds;
    printf("measured, last step, max over ranks: forward %.4f s, backward %.4f s, tp "
           "collectives %.4f s and cp ring %.4f s (within F and B), pipeline transfers %.4f s, "
           "dp collectives %.4f s, optimizer %.4f s\n",
           ph[MP_PHASE_F], ph[MP_PHASE_B], ph[MP_PHASE_TP], ph[MP_PHASE_CP], ph[MP_PHASE_PP],
           ph[MP_PHASE_DP], ph[MP_PHASE_OPTIMIZER]);
    if (!r->checked)
        return;
    printf("%-36s %12s %12s\n", "tensor", "max_abs", "max_rel");
    for (int i = 0; i < r->n_tensors; i++)
        printf("%-36s %12.4g %12.4g%s\n", r->tensors[i].name, r->tensors[i].max_abs,
               r->tensors[i].max_rel, r->tensors[i].bad ? "  MISMATCH" : "");
    printf("%s: %ld tensor checks over %d steps and %d ranks; max abs error %.4g, max rel "
           "error %.4g\n",
           r->ok ? "OK" : "MISMATCH", r->tensors_checked, r->steps, r->ranks, r->max_abs,
           r->max_rel);
}

static int exec_verb(int argc, char **argv, bool loud)
{
    exec_args a;
    int rc = parse_args(argc, argv, &a, loud);
    if (rc)
        return rc == 1 ? 0 : rc;
    {
        /* no CUDA device (or none built in): one line, before any rank starts */
        mp_error berr;
        mp_error_clear(&berr);
        if (mp_exec_backend_available(a.o.backend, &berr)) {
            if (!loud)
                return 2;
            return mp_cli_fail("exec", &berr);
        }
    }
    if (a.trace) {
        /* where --trace goes is settled before any rank starts work */
        mp_output o;
        mp_error oerr;
        mp_error_clear(&oerr);
        if (mp_cli_output_not_input("--trace", a.trace, NULL, a.plan, &oerr) != MP_OK ||
            mp_cli_output_not_input("--trace", a.trace, NULL, a.compare, &oerr) != MP_OK ||
            mp_output_prepare(a.trace, a.force, &o, &oerr) != MP_OK)
            return loud ? mp_cli_fail("exec", &oerr) : mp_error_exit_status(oerr.code);
    }
    mp_hw compare_hw;
    if (a.np > 0 && !mp_cli_under_mpi_launcher()) {
        uint64_t hash = 0;
        int bad = precheck(&a, (precheck_mode){.np = a.np, .loud = true}, &hash, &compare_hw);
        if (bad)
            return bad;
        char hex[24];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
        const char *extra[] = {"--checked-plan", hex, NULL};
        return mp_cli_mpirun_extra("exec", argc, argv, a.np, extra);
    }
    a.o.want_timeline = a.trace != NULL;
    a.o.progress = print_progress;
    a.o.progress_ctx = &a.progress;

    mp_runtime rt;
    mp_error err;
    mp_error_clear(&err);
    if (!mp_cli_under_mpi_launcher()) {
        /* the in-process path: one process, checked as `--np` checks its
         * ranks' plan, before MPI starts; it then runs these bytes */
        int bad = precheck(&a, (precheck_mode){.np = 0, .loud = true}, &a.checked_hash,
                           &compare_hw);
        if (bad)
            return bad;
        a.checked = true;
    } else if (!a.checked) {
        /* under the user's mpirun: every rank reads and checks the plan before
         * MPI starts, as `--np` does once, so that a bad plan is one line from
         * rank 0 and exit 2 on every rank, without MPI's state (an exit after
         * MPI_Init: mpirun's abort notice, and Open MPI's allocations, which
         * LeakSanitizer reports). Rank 0 then runs the bytes it checked. */
        precheck_mode mode = {.np = a.o.solo_rank >= 0 ? -1 : launcher_world_size(),
                              .launcher = true, .loud = loud || mpmd_rank(),
                              .local = !loud, .rank = loud ? NULL : mpmd_rank()};
        uint64_t hash = 0;
        int bad = precheck(&a, mode, &hash, &compare_hw);
        if (bad > 0)
            return bad;
        a.checked = bad == 0;
        a.checked_hash = hash;
    } else if (a.compare && load_compare(a.compare, &compare_hw, &err)) {
        /* --compare's profile: read before any rank starts (every rank reads the
         * same file and gets the same answer), so that a bad one is refused
         * without starting MPI, whose state an exit after MPI_Init leaves behind */
        return loud ? mp_cli_fail("exec", &err) : mp_error_exit_status(err.code);
    }
    uint64_t args_hash = mp_exec_hash_args(argc, argv); /* before MPI_Init sees argv */
    if (mp_runtime_start(&argc, &argv, &rt, &err))
        return mp_cli_fail("exec", &err);
    int root = rt.world.rank == 0;
    mp_plan *plan = calloc(1, sizeof *plan);
    if (!plan) {
        fprintf(stderr, "megaplan exec: out of memory\n");
        mp_runtime_abort(1);
    }
    /* rank 0 reads the plan, every rank runs those bytes */
    mp_status st = mp_exec_share_plan(&rt, a.plan, a.checked, a.checked_hash,
                                      args_hash, plan, &err);
    if (st == MP_ENOMEM) {
        fprintf(stderr, "megaplan exec: rank %d: out of memory for the plan\n", rt.world.rank);
        mp_runtime_abort(1);
    }
    if (st) {
        if (root)
            mp_cli_fail("exec", &err);
        free(plan);
        mp_runtime_stop(&rt);
        return mp_error_exit_status(st);
    }
    mp_exec_report rep;
    st = mp_exec_run(&rt, plan, &a.o, &rep, &err);
    if (st) {
        free(plan);
        if (!rep.collective_error) {
            /* one rank's failure: say so and take every rank down, no hang */
            char line[1024];
            fprintf(stderr, "megaplan exec: rank %d: %s\n", rt.world.rank,
                    mp_error_format(&err, line, sizeof line));
            fflush(stderr);
            mp_runtime_abort(1);
        }
        if (root) {
            mp_error_point_file(&err, a.plan);
            mp_cli_fail("exec", &err);
        }
        mp_exec_report_free(&rep);
        mp_runtime_stop(&rt);
        return mp_error_exit_status(st);
    }
    int status = rep.ok ? 0 : 1;
    if (root) {
        /* with --format json stdout holds the JSON object alone: the human
         * report goes to stderr (stdout is pointed there until the JSON) */
        int saved_stdout = -1;
        if (a.json) {
            fflush(stdout);
            saved_stdout = dup(1);
            if (saved_stdout >= 0)
                dup2(2, 1);
        }
        print_report(&a, plan, &rep, rep.tol);
        if (strncmp(rep.backend, "cpu", 3))
            print_gemm_rate();
        mp_exec_comparison cmp;
        bool compared = false;
        if (a.compare) {
            mp_error cerr;
            mp_error_clear(&cerr);
            if (mp_exec_compare(plan, a.o.shrink, &rep, &compare_hw, &cmp, &cerr) == MP_OK) {
                compared = true;
                print_comparison(&compare_hw, &cmp, strncmp(rep.backend, "cpu", 3) != 0);
                /* ranks that share cores wait for each other: the times are the
                 * oversubscription's, not the hardware's (a 54.8x DP ratio once);
                 * said under the table it qualifies */
                long cores = sysconf(_SC_NPROCESSORS_ONLN);
                if (cores > 0 && rt.world.size > cores)
                    printf("warning: %d ranks on %ld cores: ranks share cores, so the measured "
                           "times are not a measurement of the plan; compare with at most %ld "
                           "ranks\n", rt.world.size, cores, cores);
            } else {
                char line[1024];
                printf("compare: the simulator cannot run this on %s: %s\n", compare_hw.name,
                       mp_error_format(&cerr, line, sizeof line));
            }
        }
        if (!rep.ok)
            fprintf(stderr,
                    "megaplan exec: mismatch: tensor %s differs on rank %d at step %d "
                    "(max abs %.4g, max rel %.4g)\n",
                    rep.bad_tensor, rep.bad_rank, rep.bad_step, rep.bad_abs, rep.bad_rel);
        if (a.trace && rep.have_timeline) {
            st = mp_trace_write(&rep.timeline, a.trace, a.force, &err);
            if (st) {
                mp_cli_fail("exec", &err);
                status = mp_error_exit_status(st);
            } else {
                printf("trace: %s (measured, last step)\n", a.trace);
            }
        }
        if (saved_stdout >= 0) {
            fflush(stdout);
            dup2(saved_stdout, 1);
            close(saved_stdout);
        }
        if (a.json) {
            printf("{\"ok\": %s, \"max_abs_error\": %.9g, \"max_rel_error\": %.9g, "
                   "\"tensors_checked\": %ld, \"steps\": %d",
                   rep.ok ? "true" : "false", rep.max_abs, rep.max_rel, rep.tensors_checked,
                   rep.steps);
            printf(", \"memory_estimated_bytes\": %.0f, \"memory_peak_bytes\": %.0f",
                   rep.memory_estimate, rep.memory_peak);
            if (rep.zbv_order_fallback) /* as simulate's JSON: present only when true */
                printf(", \"zbv_order_fallback\": true");
            if (compared) {
                /* per phase: [measured, simulated] seconds */
                printf(", \"compare\": {");
                for (int i = 0; i < MP_CMP_COUNT; i++)
                    printf("%s\"%s\": [%.6g, %.6g]", i ? ", " : "", cmp_key((mp_cmp_row)i),
                           cmp.measured[i], cmp.simulated[i]);
                printf("}");
            }
            printf("}\n");
        }
        fflush(stdout);
    }
    mp_exec_report_free(&rep);
    free(plan);
    /* every rank leaves with the same status */
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    mp_runtime_stop(&rt);
    return status;
}

int cmd_exec(int argc, char **argv)
{
    bool loud = mp_cli_launcher_rank0();
    int rc = exec_verb(argc, argv, loud);
    /* Under the user's mpirun every rank refuses bad input, rank 0 alone
     * saying why. mpirun tears the job down at the first rank to exit
     * non-zero, and a silent rank that got there first could take rank 0
     * down before its line was out (exec-refuse-cp-seq lost it 3 runs in
     * 12): the silent ranks give it that moment. */
    if (rc == 2 && !loud && mp_cli_under_mpi_launcher()) {
        struct timespec wait = {.tv_sec = 0, .tv_nsec = 500000000L};
        nanosleep(&wait, NULL);
    }
    return rc;
}

#endif
