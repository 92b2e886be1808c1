/* calibrate.c — `megaplan calibrate`: measure this machine as the executor
 * uses it (src/exec/calibrate.c) and write a hardware profile that `estimate`,
 * `simulate` and `exec --compare` can use with --hw FILE.
 *
 *   megaplan calibrate --np 2 -o cpu.yaml     megaplan starts mpirun itself
 *   mpirun -np 2 megaplan calibrate > cpu.yaml
 *
 * The profile's comments record what was measured. Only rank 0 writes. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/mpi_launch.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/output.h"
#include "megaplan_config.h"

#if HAVE_EXEC_CPU
#include "core/io.h"
#include "exec/calibrate.h"
#include "exec/exec.h"
#include "exec/memory.h"
#include "exec/runtime.h"
#endif

typedef struct calib_args {
    int np;
    const char *out, *name, *backend;
    bool force; /* -o may replace a read-only file */
    double test_memory; /* bytes: tests say what the machine has; 0: ask it */
} calib_args;

enum { C_NP, C_OUT, C_FORCE, C_NAME, C_BACKEND, C_TEST_MEMORY };

static const mp_opt calib_rows[] = {
    {"--np", NULL, "N", C_NP, 0, "start N ranks with mpirun (otherwise run under mpirun -np N)",
     NULL},
    {"-o", NULL, "FILE", C_OUT, 0, "write the profile here (a regular file atomically; - is stdout)",
     NULL},
    {"--force", NULL, NULL, C_FORCE, 0, "let -o replace a read-only file", NULL},
    {"--name", NULL, "NAME", C_NAME, 0, "the profile's name (default cpu-local; cuda: cuda-local)",
     NULL},
    {"--backend", NULL, "B", C_BACKEND, 0,
     "cpu (default) or cuda: the rank's GPU, bf16 GEMM curve, fp32 peak with TF32 off, cuBLAS's "
     "bf16 rate alone in a comment",
     "cpu cuda"},
    {"--test-memory-available", NULL, "GIB", C_TEST_MEMORY, MP_OPT_HIDDEN, "", NULL},
};

static const mp_opt_group calib_opts = MP_OPT_GROUP("options", calib_rows);

const mp_verb_doc mp_doc_calibrate = {
    .name = "calibrate",
    .summary = "measure this machine's CPU backend as a hardware profile",
    .usage = "megaplan calibrate [--np N] [-o FILE [--force]] [--name NAME] [--backend cpu|cuda]\n",
    .text = "Measures a backend on N MPI ranks running at once (GEMM rate by size, memory "
            "bandwidth, the executor's LayerNorm, all-reduce latency and bandwidth) and writes "
            "them as a hardware profile (YAML; stdout without -o), for `megaplan exec --compare "
            "FILE` and any --hw FILE. Takes a few seconds.",
    .groups = (const mp_opt_group *const[]){&calib_opts, NULL},
    .operand = NULL,
};

/* 0 ok, 1 --help printed, 2 bad usage (said when loud). */
static int parse_args(int argc, char **argv, calib_args *a, bool loud)
{
    memset(a, 0, sizeof *a);
    a->name = "cpu-local";
    mp_opt_seen seen = {0};
    char shown[256]; /* an argument as an error line shows it */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            mp_verb_doc_write(&mp_doc_calibrate, stdout);
            return 1;
        }
        const mp_opt *o = NULL;
        const char *val = NULL;
        mp_error err;
        int found = mp_opt_take(calib_rows, sizeof calib_rows / sizeof calib_rows[0], argc, argv,
                                &i, &o, &val, &err);
        if (!found) {
            char msg[160];
            if (arg[0] == '-')
                mp_opt_unknown(&mp_doc_calibrate, NULL, arg, msg, sizeof msg);
            else
                snprintf(msg, sizeof msg, "unknown argument (see megaplan calibrate --help)");
            if (loud)
                fprintf(stderr, "megaplan calibrate: %s: %s\n", mp_cli_shown(arg, shown, sizeof shown),
                        msg);
            return 2;
        }
        if (found < 0) {
            if (loud)
                fprintf(stderr, "megaplan calibrate: %s: %s\n", err.field, err.msg);
            return 2;
        }
        if (mp_opt_once(&seen, o, val, arg, &err) < 0) {
            if (loud)
                fprintf(stderr, "megaplan calibrate: %s: %s\n", err.field, err.msg);
            return 2;
        }
        if (o->arg && val && !*val) {
            /* an empty file name passed every check and failed only after the run */
            if (loud)
                fprintf(stderr, "megaplan calibrate: %s: needs a value\n", o->name);
            return 2;
        }
        if (o->id == C_FORCE) {
            a->force = true;
            continue;
        }
        if (o->id == C_NP) {
            char *end;
            errno = 0;
            long n = strtol(val, &end, 10);
            if (errno || end == val || *end || n < 1 || n > 4096) {
                if (loud)
                    fprintf(stderr, "megaplan calibrate: --np: bad value '%s' (1..4096)\n",
                            mp_cli_shown(val, shown, sizeof shown));
                return 2;
            }
            a->np = (int)n;
        } else if (o->id == C_TEST_MEMORY) {
            char *end;
            errno = 0;
            double gib = strtod(val, &end);
            if (errno || end == val || *end || !(gib > 0 && gib <= 1e6)) {
                if (loud)
                    fprintf(stderr, "megaplan calibrate: --test-memory-available: bad value "
                                    "'%s' (GiB above 0 and at most 1e6)\n",
                            mp_cli_shown(val, shown, sizeof shown));
                return 2;
            }
            a->test_memory = gib * 1073741824.0;
        } else if (o->id == C_OUT) {
            a->out = val;
        } else if (o->id == C_BACKEND) {
            if (strcmp(val, "cpu") && strcmp(val, "cuda")) {
                if (loud)
                    fprintf(stderr, "megaplan calibrate: --backend: bad value '%s' (cpu, cuda)\n",
                            mp_cli_shown(val, shown, sizeof shown));
                return 2;
            }
            a->backend = val;
            if (!strcmp(val, "cuda") && !strcmp(a->name, "cpu-local"))
                a->name = "cuda-local";
        } else {
            size_t len = strlen(val);
            bool good = len > 0 && len < 48;
            for (size_t k = 0; k < len && good; k++)
                good = (val[k] >= 'a' && val[k] <= 'z') || (val[k] >= '0' && val[k] <= '9') ||
                       val[k] == '-' || val[k] == '_' || val[k] == '.';
            if (!good) {
                if (loud)
                    fprintf(stderr, "megaplan calibrate: --name: '%s' must be 1-47 of a-z 0-9 "
                                    "- _ .\n", mp_cli_shown(val, shown, sizeof shown));
                return 2;
            }
            a->name = val;
        }
    }
    if (a->force && !a->out) {
        /* --force without -o was taken and did nothing */
        if (loud)
            fprintf(stderr, "megaplan calibrate: --force: nothing to overwrite: it lets -o "
                            "replace a read-only file\n");
        return 2;
    }
    return 0;
}

#if !HAVE_EXEC_CPU

int cmd_calibrate(int argc, char **argv)
{
    calib_args a;
    int rc = parse_args(argc, argv, &a, true);
    if (rc)
        return rc == 1 ? 0 : rc;
    fprintf(stderr, "megaplan calibrate: the executor was not built: it needs Open MPI and "
                    "OpenBLAS at build time (Debian: libopenmpi-dev libopenblas-dev)\n");
    return 1;
}

#else

/* The profile as YAML, after comment lines with what was measured. */
static void render(const mp_calibration *c, mp_buf *b)
{
    mp_buf_printf(b, "# %s\n", c->hw.description);
    mp_buf_puts(b, "# measured on every rank at once, the slowest rank kept:\n");
    mp_buf_printf(b, "#   %s GEMM, square side: GFLOP/s per rank:", c->gemm_kind);
    for (int i = 0; i < c->n_gemm; i++)
        mp_buf_printf(b, "%s %g: %.1f", i ? "," : "", c->gemm_n[i], c->gemm_rate[i] / 1e9);
    mp_buf_puts(b, "\n");
    mp_buf_printf(b, "#   %s GEMM of side %d, %d back to back: %.3g us a call\n", c->gemm_kind,
                  c->gemm_call_side, c->gemm_call_count, c->gemm_call * 1e6);
    if (c->cublas_bf16 > 0)
        mp_buf_printf(b, "#   cuBLAS alone, bf16 inputs, fp32 accumulation, 8192^3: %.1f "
                         "TFLOP/s\n", c->cublas_bf16 / 1e12);
    mp_buf_printf(b, "#   memcpy %.2f GB/s per rank (read + write); the executor's LayerNorm "
                     "%.2f GB/s\n", c->copy_bw / 1e9, c->layernorm_bw / 1e9);
    if (c->n_coll > 0) {
        mp_buf_printf(b, "#   all-reduce over %d ranks, KiB: us:", c->ranks);
        for (int i = 0; i < c->n_coll; i++)
            mp_buf_printf(b, "%s %.0f: %.1f", i ? "," : "", c->coll_bytes[i] / 1024,
                          c->coll_time[i] * 1e6);
        mp_buf_puts(b, "\n#   fitted as a ring: 2(n-1) latency + 2(n-1)/n bytes / bw_per_gpu\n");
    }
    cJSON *o = mp_hw_to_json_units(&c->hw);
    mp_json_write_yaml(o, 0, b);
    cJSON_Delete(o);
}

int cmd_calibrate(int argc, char **argv)
{
    calib_args a;
    bool loud = mp_cli_launcher_rank0();
    int rc = parse_args(argc, argv, &a, loud);
    if (rc)
        return rc == 1 ? 0 : rc;
    {
        /* no CUDA device (or none built in): one line, before any rank starts */
        mp_error berr;
        mp_error_clear(&berr);
        if (mp_exec_backend_available(a.backend, &berr))
            return loud ? mp_cli_fail("calibrate", &berr) : 2;
    }
    if (a.out) {
        /* where -o goes is settled before seconds of measuring */
        mp_output o;
        mp_error oerr;
        if (mp_output_prepare(a.out, a.force, &o, &oerr) != MP_OK)
            return loud ? mp_cli_fail("calibrate", &oerr) : mp_error_exit_status(oerr.code);
    }
    if (a.np > 0 && !mp_cli_under_mpi_launcher()) {
        /* the N ranks run on this machine, each touching its probe buffers
         * in host memory (CPU backend; a device's are cudaMalloc'd, which
         * fails cleanly): refused before mpirun, as exec refuses a run */
        if (!a.backend || !strcmp(a.backend, "cpu")) {
            const char *source = "";
            double have = mp_exec_memory_available(&source);
            if (a.test_memory > 0)
                have = a.test_memory, source = "--test-memory-available";
            double each = (mp_calibrate_rank_bytes(false) + MP_EXEC_BASELINE_BYTES) *
                          (1 + MP_EXEC_OVERHEAD);
            const double G = 1073741824.0;
            if (have > 0 && each * a.np > have) {
                fprintf(stderr, "megaplan calibrate: --np: %d ranks need about %.3g GiB but "
                                "%.3g GiB is available (%s): %.3g GiB each for the probes' "
                                "buffers; use fewer ranks\n",
                        a.np, each * a.np / G, have / G, source, each / G);
                return 2;
            }
        }
        return mp_cli_mpirun("calibrate", argc, argv, a.np);
    }

    mp_runtime rt;
    mp_error err;
    mp_error_clear(&err);
    if (mp_runtime_start(&argc, &argv, &rt, &err))
        return mp_cli_fail("calibrate", &err);
    int root = rt.world.rank == 0;
    mp_calibration *cal = calloc(1, sizeof *cal);
    const mp_backend *be = NULL;
    mp_calib_device dev;
    bool device = false;
    mp_status st = cal ? mp_calibrate_backend(&rt, a.backend, &be, &dev, &device, &err)
                       : mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    if (!st)
        st = mp_calibrate(&rt, be, a.name, device ? &dev : NULL, cal, &err);
    int status = 0;
    if (root) {
        if (st) {
            status = mp_cli_fail("calibrate", &err);
        } else {
            mp_buf b;
            mp_buf_init(&b);
            render(cal, &b);
            mp_output o;
            if (a.out && (mp_output_prepare(a.out, a.force, &o, &err) != MP_OK ||
                          mp_output_write(&o, b.data, b.len, &err) != MP_OK)) {
                status = mp_cli_fail("calibrate", &err);
            } else if (a.out && !(o.kind == MP_OUT_FD && o.fd == 1)) {
                printf("megaplan calibrate: wrote %s (%d rank%s); use it as --hw %s\n",
                       a.out, cal->ranks, cal->ranks == 1 ? "" : "s", a.out);
            } else if (!a.out) {
                fwrite(b.data, 1, b.len, stdout);
            }
            mp_buf_free(&b);
        }
        fflush(stdout);
    }
    free(cal);
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    mp_runtime_stop(&rt);
    return status;
}

#endif
