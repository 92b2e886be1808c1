/* validate.c — megaplan-validate: runs every row of tests/data through the
 * cost model and prints docs/validation.md (predicted vs measured per row,
 * MAPE, median and max per data set, the hold-out split, the NCCL fit).
 *
 *   build/tests/validation/megaplan-validate tests/data > docs/validation.md
 *
 * Exit status 0 when every acceptance threshold holds, 1 when one is missed,
 * 2 when the data cannot be read. One hardware profile per hardware type, no
 * per-row factors: each row is only its published configuration, as
 * tools/refdata.c maps it (shared with megaplan-rank-validate and
 * sim_validation, so the three agree on what a row is). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/hw.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "tools/refdata.h"

typedef struct row {
    char label[192];
    double measured, predicted; /* seconds (or what the set compares) */
    int holdout;                /* 1: in the hold-out half (the split in use) */
    int larger_model;           /* 1: the larger model of its vTrain file */
    int checked_fit;            /* 1: a real run, so it fitted in memory */
    int fits;                   /* the model's verdict */
    double peak_gib;
} row;

typedef struct dataset {
    const char *name;
    const char *what;     /* the compared quantity */
    const char *setting;  /* assumptions, one paragraph (refdata's note unless set here) */
    double threshold;     /* MAPE bound (mape) or per-row bound (per_row) */
    int per_row;          /* 1: every row must be within threshold */
    row *rows;
    int n;
} dataset;

/* Which rows are the hold-out: every other row (parity), or the larger model
 * of each vTrain file (model: 18.4B multi-node, h = 2048 single-node). */
static int split_by_model = 0;

/* The rows of one data set as tools/refdata.c maps them (the one mapping all
 * validation programs share); -1 when the data cannot be read. */
static int load(const char *dir, refdata_set_id id, const refdata_profiles *prof, refdata_set *rs,
                dataset *ds)
{
    mp_error err;
    mp_error_clear(&err);
    if (refdata_read(dir, id, prof, rs, &err) != MP_OK) {
        char msg[1024];
        fprintf(stderr, "megaplan-validate: %s\n", mp_error_format(&err, msg, sizeof msg));
        return -1;
    }
    if (!ds->setting)
        ds->setting = rs->note;
    ds->n = 0;
    ds->rows = calloc((size_t)rs->n + 1, sizeof *ds->rows);
    if (!ds->rows) {
        fprintf(stderr, "megaplan-validate: out of memory\n");
        return -1;
    }
    return 0;
}

/* Whole-iteration sets: each row's configuration through mp_estimate_config. */
static int iterations(const char *dir, refdata_set_id id, const refdata_profiles *prof, dataset *ds)
{
    refdata_set rs;
    if (load(dir, id, prof, &rs, ds) != 0)
        return -1;
    bool vtrain = id == REFDATA_VTRAIN_MULTI || id == REFDATA_VTRAIN_SINGLE;
    for (int i = 0; i < rs.n; i++) {
        const refdata_row *x = &rs.rows[i];
        mp_estimate e;
        mp_error err;
        mp_error_clear(&err);
        if (mp_estimate_config(&x->config, NULL, &e, &err) != MP_OK) {
            fprintf(stderr, "megaplan-validate: %s row %d refused: %s: %s\n", rs.file, x->line,
                    err.field, err.msg);
            continue;
        }
        row *w = &ds->rows[ds->n++];
        snprintf(w->label, sizeof w->label, "%s", x->label);
        w->measured = x->measured_s;
        w->predicted = e.time.step;
        w->checked_fit = 1;
        w->fits = e.fits;
        w->peak_gib = e.memory.peak / (1024.0 * 1024.0 * 1024.0);
        if (vtrain) {
            w->larger_model = x->larger_model;
            w->holdout = split_by_model ? w->larger_model : x->index % 2;
        }
    }
    refdata_set_free(&rs);
    return 0;
}

/* Table 4: one layer's forward and backward from the cost model's item costs
 * (item 1 = the first transformer block). */
static int layer(const char *dir, const refdata_profiles *prof, dataset *ds)
{
    refdata_set rs;
    if (load(dir, REFDATA_KORTHIKANTI_LAYER, prof, &rs, ds) != 0)
        return -1;
    for (int i = 0; i < rs.n; i++) {
        const refdata_row *x = &rs.rows[i];
        mp_item_cost items[50];
        mp_error err;
        if (x->config.model.layers + 2 > 50 || mp_item_costs(&x->config, items, &err) != MP_OK)
            continue;
        row *w = &ds->rows[ds->n++];
        snprintf(w->label, sizeof w->label, "%s", x->label);
        w->measured = x->measured_s;
        w->predicted = x->variant == REFDATA_FORWARD ? items[1].fwd
                                                     : items[1].bwd[x->config.parallel.recompute];
    }
    refdata_set_free(&rs);
    return 0;
}

/* ---- NCCL fit -------------------------------------------------------------- */

static int nccl(const char *dir, const refdata_profiles *prof, dataset *ds)
{
    refdata_set rs;
    if (load(dir, REFDATA_NCCL, prof, &rs, ds) != 0)
        return -1;
    for (int i = 0; i < rs.n; i++) {
        const refdata_row *x = &rs.rows[i];
        int64_t g = x->config.training.gpus;
        mp_group_place pl = {.n = g, .cross_domain = false, .per_node = g, .cross_fraction = 0};
        row *w = &ds->rows[ds->n++];
        snprintf(w->label, sizeof w->label, "%s", x->label);
        w->measured = x->measured_s;
        w->predicted = mp_coll_time(&x->config.hw, &pl, MP_COLL_ALLREDUCE, x->bytes);
        w->holdout = x->index % 2;
    }
    refdata_set_free(&rs);
    return 0;
}

/* ---- statistics and output -------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    double mape, median, max;
    int n;
} stats;

static stats stats_by(const dataset *ds, int which, int by_model);

static stats stats_of(const dataset *ds, int which) /* which: -1 all, 0 fit half, 1 hold-out */
{
    return stats_by(ds, which, split_by_model);
}

static stats stats_by(const dataset *ds, int which, int by_model)
{
    stats s = {0};
    double *e = malloc(sizeof *e * (size_t)(ds->n > 0 ? ds->n : 1));
    for (int i = 0; i < ds->n; i++) {
        int h = by_model ? ds->rows[i].larger_model : ds->rows[i].holdout;
        if (which >= 0 && h != which)
            continue;
        double err = fabs(ds->rows[i].predicted / ds->rows[i].measured - 1.0);
        e[s.n++] = err;
        s.mape += err;
        if (err > s.max)
            s.max = err;
    }
    if (s.n > 0) {
        s.mape /= s.n;
        qsort(e, (size_t)s.n, sizeof *e, cmp_double);
        s.median = s.n % 2 ? e[s.n / 2] : 0.5 * (e[s.n / 2 - 1] + e[s.n / 2]);
    }
    free(e);
    return s;
}

static int passes(const dataset *ds)
{
    if (ds->threshold <= 0)
        return 1;
    stats s = stats_of(ds, -1);
    if (s.n == 0)
        return 0;
    return ds->per_row ? s.max <= ds->threshold : s.mape <= ds->threshold;
}

/* Every row, or every stride-th (the NCCL sweeps: 3,072 sizes). */
static void print_rows(const dataset *ds, int stride)
{
    printf("| # | configuration | measured | predicted | error |\n|---:|---|---:|---:|---:|\n");
    for (int i = 0; i < ds->n; i += stride) {
        const row *w = &ds->rows[i];
        double err = w->predicted / w->measured - 1.0;
        printf("| %d | %s | %.4g | %.4g | %+.1f%% |\n", i + 1, w->label, w->measured, w->predicted,
               100.0 * err);
    }
    if (stride > 1)
        printf("\n(every %dth row; `--all-rows` prints them all)\n", stride);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: megaplan-validate DATA_DIR [--all-rows]\n");
        return 2;
    }
    const char *dir = argv[1];
    int all_rows = 0, summary_only = 0;
    refdata_profiles prof;
    mp_error err;
    if (refdata_profiles_builtin(&prof, &err) != MP_OK) {
        fprintf(stderr, "megaplan-validate: built-in profiles: %s\n", err.msg);
        return 2;
    }
    /* --set-a100 KEY=VALUE / --set-h100 KEY=VALUE: try other global parameters
     * (how the profiles' efficiency fields were fitted; docs/cost-model.md) */
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--all-rows") == 0) {
            all_rows = 1;
            continue;
        }
        if (strcmp(argv[i], "--summary") == 0) {
            summary_only = 1;
            continue;
        }
        if (strcmp(argv[i], "--split-by-model") == 0) {
            split_by_model = 1;
            continue;
        }
        bool a100 = strcmp(argv[i], "--set-a100") == 0, h = strcmp(argv[i], "--set-h100") == 0;
        if ((a100 || h) && i + 1 < argc) {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", argv[++i]);
            char *eq = strchr(kv, '=');
            if (!eq) {
                fprintf(stderr, "megaplan-validate: %s: expected KEY=VALUE\n", kv);
                return 2;
            }
            *eq = '\0';
            mp_status st = a100 ? mp_hw_set_field(&prof.a100_4xhdr, kv, eq + 1, &err)
                                : mp_hw_set_field(&prof.dgx_h100, kv, eq + 1, &err);
            if (st == MP_OK && a100)
                st = mp_hw_set_field(&prof.dgx_a100, kv, eq + 1, &err);
            if (st != MP_OK) {
                fprintf(stderr, "megaplan-validate: %s: %s\n", kv, err.msg);
                return 2;
            }
            continue;
        }
        fprintf(stderr, "megaplan-validate: unknown option %s\n", argv[i]);
        return 2;
    }
    /* the settings (assumptions) of the data sets come from tools/refdata.c;
     * the NCCL set describes the model's formula instead */
    dataset sets[7] = {
        {.name = "vTrain multi-node (ground_truth_multi_dev.csv)", .what = "iteration time (s)",
         .threshold = 0.10},
        {.name = "vTrain single-node (ground_truth_single.csv)", .what = "iteration time (s)",
         .threshold = 0.15},
        {.name = "Narayanan 2021 Table 1", .what = "iteration time (s) = 96BslH²(…)/(TFLOP/s·GPUs)",
         .threshold = 0.10, .per_row = 1},
        {.name = "Korthikanti 2022 Tables 3/5", .what = "iteration time (s)",
         .threshold = 0.10, .per_row = 1},
        {.name = "Korthikanti 2022 Table 4 (one 22B layer, t = 8, b = 4)",
         .what = "forward / backward time of one layer (s)",
         .threshold = 0},
        {.name = "Megatron-Core 2024, H100", .what = "iteration time (s) = 72BsLh²(…)/(TFLOP/s·GPUs)",
         .threshold = 0.10, .per_row = 1},
        {.name = "NCCL all-reduce in one A100 node (vTrain sweeps)", .what = "time (s)",
         .setting = "a100-4xhdr scale-up tier: kernel_overhead + latency·2(n−1) + "
                    "bytes·2(n−1)/n / (bw·efficiency).",
         .threshold = 0},
    };
    int bad = 0;
    bad |= iterations(dir, REFDATA_VTRAIN_MULTI, &prof, &sets[0]);
    bad |= iterations(dir, REFDATA_VTRAIN_SINGLE, &prof, &sets[1]);
    bad |= iterations(dir, REFDATA_NARAYANAN, &prof, &sets[2]);
    bad |= iterations(dir, REFDATA_KORTHIKANTI, &prof, &sets[3]);
    bad |= layer(dir, &prof, &sets[4]);
    bad |= iterations(dir, REFDATA_MEGATRON_CORE, &prof, &sets[5]);
    bad |= nccl(dir, &prof, &sets[6]);
    if (bad) {
        for (int i = 0; i < 7; i++)
            free(sets[i].rows);
        return 2;
    }

    printf("# Validation\n\n");
    printf("Generated by `tools/validation-doc.sh build > docs/validation.md` (any build folder), which runs\n"
           "`megaplan-validate` (this page up to \"Search ranking\"), `megaplan-rank-validate` (\"Search ranking\")\n"
           "and `sim_validation` (\"Simulated step\"); the `validation` test suite runs the same programs and fails\n"
           "when a threshold is missed. Every row is one published or measured configuration run through\n"
"`mp_estimate_config` with the built-in profile of its hardware: no per-row factors.\n"
           "Error = predicted / measured − 1.\n\n");
    printf("## Summary\n\n| data set | rows | MAPE | median | max | acceptance | pass |\n"
           "|---|---:|---:|---:|---:|---|---|\n");
    int all_pass = 1;
    for (int i = 0; i < 7; i++) {
        stats s = stats_of(&sets[i], -1);
        int ok = passes(&sets[i]);
        char acc[64] = "(reported)";
        if (sets[i].threshold > 0)
            snprintf(acc, sizeof acc, "%s ≤ %.0f%%", sets[i].per_row ? "every row" : "MAPE",
                     100 * sets[i].threshold);
        printf("| %s | %d | %.1f%% | %.1f%% | %.1f%% | %s | %s |\n", sets[i].name, s.n,
               100 * s.mape, 100 * s.median, 100 * s.max, acc,
               sets[i].threshold > 0 ? (ok ? "yes" : "**no**") : "-");
        if (!ok)
            all_pass = 0;
    }
    printf("\n## Hold-out split\n\nThe global parameters of the A100 profiles (GEMM efficiency curve, "
           "memory efficiency, host overhead per kernel, scale-out latency and efficiency) were fitted "
           "by coordinate descent (`tools/fit_profile.py`) on the fit half of the vTrain files - the "
           "1st, 3rd, 5th, ... data row of each - together with the published rows; the 2nd, 4th, ... "
           "rows were not used. a100-4xhdr's scale-out partial-node efficiency (DP groups with 2 or 4 "
           "of a node's 8 GPUs; docs/cost-model.md §5) was scanned alone on the same fit half "
           "(`tools/fit_profile.py ... --partial-node`): 0.34, which took the multi-node fit half from "
           "6.0%% to 4.4%% and the hold-out from 8.4%% to 6.8%% MAPE. The scale-up latency and efficiency were fitted to the NCCL sweeps "
           "alone. With the shipped profiles:\n\n"
           "| data set | fit half MAPE | hold-out MAPE | hold-out max |\n|---|---:|---:|---:|\n");
    for (int i = 0; i < 7; i++) {
        if (i != 0 && i != 1 && i != 6)
            continue;
        stats f = stats_by(&sets[i], 0, 0), h = stats_by(&sets[i], 1, 0);
        printf("| %s | %.1f%% | %.1f%% | %.1f%% |\n", sets[i].name, 100 * f.mape, 100 * h.mape,
               100 * h.max);
    }
    printf("\nA harder split: refitting on the smaller model of each vTrain file only (3.6B "
           "multi-node, h = 1024 single-node) and the published rows (`tools/fit_profile.py ... "
           "--split-by-model`) gives "
           "similar parameters (GEMM curve ymax 0.74, x0 3.9e9, k 0.9 against the shipped 0.72, "
           "6.1e9, 1.0; memory efficiency 0.75 against 0.80; scale-out latency 4 us against 2; "
           "round 3, with the partial-node efficiency 0.34, which the 3.6B rows alone also put at "
           "0.30-0.34) and, held out, 5.1%% MAPE on the 18.4B multi-node rows (round 2, without "
           "it: 6.6%%) and 11.1%% on the h = 2048 single-node rows. The "
           "same split with the shipped profiles:\n\n"
           "| data set | smaller model MAPE | larger model MAPE | larger model max |\n|---|---:|---:|---:|\n");
    for (int i = 0; i < 2; i++) {
        stats f = stats_by(&sets[i], 0, 1), h = stats_by(&sets[i], 1, 1);
        printf("| %s | %.1f%% | %.1f%% | %.1f%% |\n", sets[i].name, 100 * f.mape, 100 * h.mape,
               100 * h.max);
    }
    printf("\n## Memory\n\nEvery measured or published run ran, so it fitted in its GPUs' memory; the "
           "model's verdict on each (peak = the most loaded GPU):\n\n"
           "| data set | runs | predicted to fit | largest predicted peak (GiB) |\n|---|---:|---:|---:|\n");
    for (int i = 0; i < 7; i++) {
        int runs = 0, fit = 0;
        double top = 0;
        for (int k = 0; k < sets[i].n; k++) {
            if (!sets[i].rows[k].checked_fit)
                continue;
            runs++;
            fit += sets[i].rows[k].fits;
            if (sets[i].rows[k].peak_gib > top)
                top = sets[i].rows[k].peak_gib;
        }
        if (runs)
            printf("| %s | %d | %d | %.1f |\n", sets[i].name, runs, fit, top);
    }
    printf("\n");
    for (int i = 0; i < 7 && !summary_only; i++) {
        printf("## %s\n\nCompared: %s. Setting: %s\n\n", sets[i].name, sets[i].what, sets[i].setting);
        print_rows(&sets[i], i == 6 && !all_rows ? 16 : 1);
    }
    for (int i = 0; i < 7; i++)
        free(sets[i].rows);
    return all_pass ? 0 : 1;
}
