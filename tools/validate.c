/* validate.c — megaplan-validate: runs every row of tests/data through the
 * cost model and prints docs/validation.md (predicted vs measured per row,
 * MAPE, median and max per data set by role, the error bands, the constants).
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
#include "core/fields.h"
#include "core/hw.h"
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "tools/refdata.h"
#include "tools/refdata_moe.h"

typedef struct row {
    char label[192];
    char hw[64];                /* the profile it ran on (sets spanning several: the breakdown) */
    double measured, predicted; /* seconds (or what the set compares) */
    int checked_fit;            /* 1: a real run, so it fitted in memory */
    int fits;                   /* the model's verdict */
    double peak_gib;
    mp_times parts;             /* whole-step rows: the estimate's exposed parts (--parts-tsv) */
    int has_parts;
} row;

typedef struct dataset {
    const char *key;      /* short name (--rows-tsv, tools/fit_profile.py) */
    const char *name;
    const char *what;     /* the compared quantity */
    const char *setting;  /* assumptions, one paragraph (refdata's note unless set here) */
    double threshold;     /* MAPE bound (mape) or per-row bound (per_row) */
    int per_row;          /* 1: every row must be within threshold */
    int step;             /* 1: the compared quantity is a whole step (the error bands) */
    refdata_role role;    /* the file's role (tests/data/README.md) */
    const char *hw;       /* the profile its rows ran on */
    row *rows;
    int n;
    int not_run;          /* lines of the file megaplan cannot express (refdata's skipped) */
} dataset;

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
    ds->role = rs->role;
    ds->hw = rs->hw_preset;
    ds->not_run = rs->skipped;
    ds->n = 0;
    ds->rows = calloc((size_t)rs->n + 1, sizeof *ds->rows);
    if (!ds->rows) {
        fprintf(stderr, "megaplan-validate: out of memory\n");
        return -1;
    }
    return 0;
}

/* One whole-step row: the estimate's step and its memory verdict. */
static void add_step_row(dataset *ds, const char *label, const char *hw, double measured,
                         const mp_estimate *e)
{
    row *w = &ds->rows[ds->n++];
    snprintf(w->label, sizeof w->label, "%s", label);
    snprintf(w->hw, sizeof w->hw, "%s", hw);
    w->measured = measured;
    w->predicted = e->time.step;
    w->checked_fit = 1;
    w->fits = e->fits;
    w->peak_gib = e->memory.peak / (1024.0 * 1024.0 * 1024.0);
    w->parts = e->time;
    w->has_parts = 1;
}

/* Whole-iteration sets: each row's configuration through mp_estimate_config. */
static int iterations(const char *dir, refdata_set_id id, const refdata_profiles *prof, dataset *ds)
{
    refdata_set rs;
    if (load(dir, id, prof, &rs, ds) != 0)
        return -1;
    for (int i = 0; i < rs.n; i++) {
        const refdata_row *x = &rs.rows[i];
        mp_estimate e;
        mp_error err;
        mp_error_clear(&err);
        if (mp_estimate_config(&x->config, NULL, &e, &err) != MP_OK) {
            fprintf(stderr, "megaplan-validate: %s row %d refused: %s: %s\n",
                    x->file ? x->file : rs.file, x->line, err.field, err.msg);
            continue;
        }
        add_step_row(ds, x->label, x->config.hw.name, x->measured_s, &e);
    }
    refdata_set_free(&rs);
    return 0;
}

/* Megatron-LM CI's measured memory (tests/data/megatron_ci): each row's
 * logging rank (its last pipeline stage, refdata's mem_rank) as
 * mp_estimate_rank_memory counts it, in GiB. static: torch's allocated
 * bytes after the optimizer step against the rank's weights + gradients +
 * optimizer state + what it holds between steps (held_after_step: each
 * pipeline chunk's last received activation and its gradient); !static: torch's peak allocated bytes against the rank's
 * allocated_peak (peak without the runtime reserve and the allocator's
 * fragmentation, which torch's allocated counter does not see). */
static int megatron_ci_memory(const char *dir, const refdata_profiles *prof, dataset *ds,
                              bool static_part)
{
    refdata_set rs;
    if (load(dir, REFDATA_MEGATRON_CI, prof, &rs, ds) != 0)
        return -1;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    for (int i = 0; i < rs.n; i++) {
        const refdata_row *x = &rs.rows[i];
        mp_memory *ranks = calloc((size_t)x->config.parallel.pp, sizeof *ranks);
        mp_error err;
        mp_error_clear(&err);
        if (!ranks || mp_estimate_rank_memory(&x->config, NULL, ranks, &err) != MP_OK) {
            fprintf(stderr, "megaplan-validate: %s row %d refused: %s: %s\n", rs.file, x->line,
                    err.field, err.msg);
            free(ranks);
            continue;
        }
        const mp_memory *m = &ranks[x->mem_rank];
        row *w = &ds->rows[ds->n++];
        snprintf(w->label, sizeof w->label, "%s", x->label);
        snprintf(w->hw, sizeof w->hw, "%s", x->config.hw.name);
        w->measured = (static_part ? x->mem_allocated : x->mem_max_allocated) / gib;
        w->predicted = (static_part ? m->weights + m->grads + m->optimizer + m->held_after_step
                                     : m->allocated_peak) / gib;
        free(ranks);
    }
    refdata_set_free(&rs);
    return 0;
}

/* The MoE runs of tests/data/moe: every row megaplan can express through
 * mp_estimate_config with its own profile, precision and degrees; the
 * others (and any the estimate refuses) go to *skipped with the reason, so
 * the page lists them instead of dropping them. */
static int moe(const char *dir, dataset *ds, refdata_moe_set *skipped,
               mp_status (*read)(const char *, refdata_moe_set *, mp_error *))
{
    mp_error err;
    mp_error_clear(&err);
    if (read(dir, skipped, &err) != MP_OK) {
        char msg[1024];
        fprintf(stderr, "megaplan-validate: %s\n", mp_error_format(&err, msg, sizeof msg));
        return -1;
    }
    ds->setting = skipped->note;
    ds->role = skipped->role;
    ds->hw = "each row's";
    ds->n = 0;
    ds->rows = calloc((size_t)skipped->n + 1, sizeof *ds->rows);
    if (!ds->rows) {
        fprintf(stderr, "megaplan-validate: out of memory\n");
        return -1;
    }
    int kept = 0;
    for (int i = 0; i < skipped->n; i++) {
        refdata_moe_row *x = &skipped->rows[i];
        mp_estimate e;
        mp_error_clear(&err);
        if (x->expressible && mp_estimate_config(&x->config, NULL, &e, &err) != MP_OK) {
            x->expressible = false;
            snprintf(x->reason, sizeof x->reason, "the estimate refuses it: %.40s: %.180s", err.field,
                     err.msg);
        }
        if (!x->expressible) {
            skipped->rows[kept++] = *x; /* what stays in the set: the rows not run */
            continue;
        }
        add_step_row(ds, x->label, x->config.hw.name, x->measured_s, &e);
    }
    skipped->n = kept;
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

static stats stats_of(const dataset *ds)
{
    stats s = {0};
    double *e = malloc(sizeof *e * (size_t)(ds->n > 0 ? ds->n : 1));
    for (int i = 0; i < ds->n; i++) {
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

/* The profile a row ran on: its own where the set spans several (NeMo's). */
static const char *row_hw(const dataset *ds, int k)
{
    return ds->rows[k].hw[0] ? ds->rows[k].hw : ds->hw;
}

/* Whether a profile is of a hardware class ("a100", "h100": H100, H200 and
 * H800, "b200": B200 and GB200), by the GPU its name carries. */
static int in_class(const char *hw, const char *cls)
{
    if (strcmp(cls, "h100") == 0)
        return strstr(hw, "h100") || strstr(hw, "h200") || strstr(hw, "h800");
    return strstr(hw, cls) != NULL;
}

/* The signed range of predicted/measured - 1 over the held-out whole-step rows
 * of one hardware class (dense models: the MoE set compares no whole step of
 * a dense plan, docs/validation.md). */
static int band_of(const dataset *sets, int nsets, const char *gpu, double *lo, double *hi)
{
    int n = 0;
    *lo = *hi = 0.0;
    for (int i = 0; i < nsets; i++) {
        if (sets[i].role != REFDATA_HELD_OUT || !sets[i].step)
            continue;
        for (int k = 0; k < sets[i].n; k++) {
            if (!in_class(row_hw(&sets[i], k), gpu))
                continue;
            double e = sets[i].rows[k].predicted / sets[i].rows[k].measured - 1.0;
            if (n == 0 || e < *lo)
                *lo = e;
            if (n == 0 || e > *hi)
                *hi = e;
            n++;
        }
    }
    return n;
}

/* One row of a band table (dense or mixture-of-experts): the class, its
 * held-out rows (note: " (pooled)" when it borrows every class's), the band
 * computed from them and the one the profile holds, marked stale unless the
 * two agree to the profile's rounding (0.1 %). Returns whether they agree. */
static int band_row(const char *label, int n, const char *note, double lo, double hi,
                    double held_lo, double held_hi)
{
    int same = fabs(held_lo - lo) < 0.0006 && fabs(held_hi - hi) < 0.0006;
    printf("| %s | %d%s | %+.1f%% | %+.1f%% | %+.1f%% / %+.1f%%%s |\n", label, n, note,
           100 * lo, 100 * hi, 100 * held_lo, 100 * held_hi,
           same ? "" : " (**stale**: run tools/fit_profile.py --write)");
    return same;
}

/* The same over the held-out MoE rows of one class (moe_band_of(..., NULL): of
 * every class, the band of a class without MoE rows; tools/fit_profile.py's
 * moe_bands). */
static int moe_band_of(const dataset *moe, const char *gpu, double *lo, double *hi)
{
    int n = 0;
    *lo = *hi = 0.0;
    for (int k = 0; moe->role == REFDATA_HELD_OUT && k < moe->n; k++) {
        if (gpu && !in_class(row_hw(moe, k), gpu))
            continue;
        double e = moe->rows[k].predicted / moe->rows[k].measured - 1.0;
        if (n == 0 || e < *lo)
            *lo = e;
        if (n == 0 || e > *hi)
            *hi = e;
        n++;
    }
    return n;
}

static int passes(const dataset *ds)
{
    if (ds->threshold <= 0)
        return 1;
    stats s = stats_of(ds);
    if (s.n == 0)
        return 0;
    return ds->per_row ? s.max <= ds->threshold : s.mape <= ds->threshold;
}

/* A set whose rows ran on several profiles (NeMo's tables): its figures per profile. */
static void print_by_profile(const dataset *ds)
{
    const char *seen[16];
    int n = 0;
    for (int i = 0; i < ds->n && n < 16; i++) {
        int k = 0;
        while (k < n && strcmp(seen[k], ds->rows[i].hw) != 0)
            k++;
        if (k == n)
            seen[n++] = ds->rows[i].hw;
    }
    if (n < 2)
        return;
    printf("| profile | rows | MAPE | max | within 10%% |\n|---|---:|---:|---:|---:|\n");
    for (int k = 0; k < n; k++) {
        int rows = 0, within = 0;
        double sum = 0, max = 0;
        for (int i = 0; i < ds->n; i++) {
            if (strcmp(ds->rows[i].hw, seen[k]) != 0)
                continue;
            double e = fabs(ds->rows[i].predicted / ds->rows[i].measured - 1.0);
            rows++;
            sum += e;
            within += e <= 0.10;
            if (e > max)
                max = e;
        }
        printf("| %s | %d | %.1f%% | %.1f%% | %d/%d |\n", seen[k], rows, 100 * sum / rows, 100 * max,
               within, rows);
    }
    printf("\n");
}

/* Every row, or every stride-th (the NCCL sweeps: 3,072 sizes). */
static void print_rows(const dataset *ds, int stride, bool memory)
{
    printf("| # | configuration | measured | predicted | error |%s\n|---:|---|---:|---:|---:|%s\n",
           memory ? " predicted peak (GiB), fits |" : "", memory ? "---:|" : "");
    for (int i = 0; i < ds->n; i += stride) {
        const row *w = &ds->rows[i];
        double err = w->predicted / w->measured - 1.0;
        printf("| %d | %s | %.4g | %.4g | %+.1f%% |", i + 1, w->label, w->measured, w->predicted,
               100.0 * err);
        if (memory)
            printf(" %.1f, %s |", w->peak_gib, w->fits ? "yes" : "**no**");
        printf("\n");
    }
    if (stride > 1)
        printf("\n(every %dth row; `--all-rows` prints them all)\n", stride);
    printf("\n");
}

/* The MoE rows the model cannot run, each with its reason. */
static void print_not_run(const refdata_moe_set *s)
{
    if (s->n == 0)
        return;
    printf("Not run (%d rows megaplan cannot express yet):\n\n| file:line | run | reason |\n"
           "|---|---|---|\n", s->n);
    for (int i = 0; i < s->n; i++)
        printf("| %s:%d | %s | %s |\n", s->rows[i].file, s->rows[i].line, s->rows[i].label,
               s->rows[i].reason);
    printf("\n");
}

/* --set PROFILE:KEY=VALUE (any built-in profile, or a100-opa), or
 * --set-a100 KEY=VALUE (both A100 profiles, and a100-opa through its base) /
 * --set-h100 KEY=VALUE (dgx-h100): how tools/fit_profile.py tries other
 * constants. Every data set loads its profiles with these applied
 * (refdata_hw). 0 on success. */
static int set_option(const char *opt, const char *arg)
{
    char kv[1200];
    if (strlen(arg) >= sizeof kv) {
        fprintf(stderr, "megaplan-validate: %s: too long\n", arg);
        return -1;
    }
    snprintf(kv, sizeof kv, "%s", arg);
    const char *targets[2] = {NULL, NULL};
    char *key = kv;
    if (strcmp(opt, "--set-a100") == 0) {
        targets[0] = "a100-4xhdr";
        targets[1] = "dgx-a100";
    } else if (strcmp(opt, "--set-h100") == 0) {
        targets[0] = "dgx-h100";
    } else {
        char *colon = strchr(kv, ':');
        if (!colon) {
            fprintf(stderr, "megaplan-validate: %s: expected PROFILE:KEY=VALUE\n", arg);
            return -1;
        }
        *colon = '\0';
        key = colon + 1;
        targets[0] = kv;
    }
    char *eq = strchr(key, '=');
    if (!eq) {
        fprintf(stderr, "megaplan-validate: %s: expected KEY=VALUE\n", arg);
        return -1;
    }
    *eq = '\0';
    for (int k = 0; k < 2 && targets[k]; k++) {
        mp_error err;
        if (refdata_override_add(targets[k], key, eq + 1, &err) != MP_OK) {
            fprintf(stderr, "megaplan-validate: --set %s:%s: %s\n", targets[k], key, err.msg);
            return -1;
        }
    }
    return 0;
}

/* Whether the comma-separated list holds key as a whole name (not as the
 * prefix "korthikanti" of "korthikanti-layer"). */
static bool in_list(const char *list, const char *key)
{
    size_t kl = strlen(key);
    for (const char *hit = strstr(list, key); hit; hit = strstr(hit + 1, key))
        if ((hit == list || hit[-1] == ',') && (hit[kl] == '\0' || hit[kl] == ','))
            return true;
    return false;
}

static const char *role_name(refdata_role r)
{
    return r == REFDATA_FIT ? "fit" : r == REFDATA_HELD_OUT ? "held-out" : "?";
}

/* The summary of the sets of one role. Returns 0 when a threshold is missed. */
static int print_summary(const dataset *sets, int nsets, refdata_role role)
{
    printf("| data set | profile | rows | MAPE | median | max | acceptance | pass |\n"
           "|---|---|---:|---:|---:|---:|---|---|\n");
    int all_pass = 1;
    for (int i = 0; i < nsets; i++) {
        if (sets[i].role != role)
            continue;
        stats s = stats_of(&sets[i]);
        int ok = passes(&sets[i]);
        char acc[64] = "(reported)";
        if (sets[i].threshold > 0)
            snprintf(acc, sizeof acc, "%s ≤ %.0f%%", sets[i].per_row ? "every row" : "MAPE",
                     100 * sets[i].threshold);
        printf("| %s | %s | %d | %.1f%% | %.1f%% | %.1f%% | %s | %s |\n", sets[i].name, sets[i].hw,
               s.n, 100 * s.mape, 100 * s.median, 100 * s.max, acc,
               sets[i].threshold > 0 ? (ok ? "yes" : "**no**") : "-");
        if (!ok)
            all_pass = 0;
    }
    printf("\n");
    return all_pass;
}

/* The constants the validated profiles hold (the cost model has no others;
 * docs/cost-model.md). Read from the profiles, so the page cannot drift. */
static void print_constants(const refdata_profiles *prof)
{
    const mp_hw *hw[3] = {&prof->a100_4xhdr, &prof->dgx_a100, &prof->dgx_h100};
    static const char *const keys[] = {
        "gemm_efficiency", "memory_efficiency", "attention_efficiency", "kernel_overhead",
        "scale_up.latency", "scale_up.efficiency", "collective_local_pass",
        "scale_out.latency", "scale_out.efficiency", "scale_out.partial_node_efficiency",
        "allocator_fragmentation", "attention_half_rate_keys", "p2p_host_kernels",
        "error_band.low", "error_band.high", "moe_error_band.low", "moe_error_band.high"};
    size_t n;
    const mp_field *tab = mp_hw_field_table(&n);
    printf("## Constants\n\nThe fitted and sourced constants of the three validated profiles, as "
           "the built-in profiles hold them (hwprofiles/*.yaml give each one's fit or source; "
           "docs/cost-model.md the equations that use them). The GEMM curve is printed as its "
           "efficiency at 1e9, 1e10, 1e11 and 1e12 FLOPs per GEMM.\n\n"
           "| constant | %s | %s | %s |\n|---|---:|---:|---:|\n",
           hw[0]->name, hw[1]->name, hw[2]->name);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        printf("| %s |", keys[k]);
        for (int j = 0; j < 3; j++) {
            if (k == 0) {
                printf(" %.3f, %.3f, %.3f, %.3f |", mp_curve_eval(&hw[j]->gemm_efficiency, 1e9),
                       mp_curve_eval(&hw[j]->gemm_efficiency, 1e10),
                       mp_curve_eval(&hw[j]->gemm_efficiency, 1e11),
                       mp_curve_eval(&hw[j]->gemm_efficiency, 1e12));
                continue;
            }
            for (size_t f = 0; f < n; f++)
                if (strcmp(tab[f].path, keys[k]) == 0) {
                    double v = *(const double *)((const char *)hw[j] + tab[f].offset);
                    if (tab[f].unit == MP_UNIT_TIME)
                        printf(" %.3g us |", v * 1e6);
                    else
                        printf(" %.3g |", v);
                }
        }
        printf("\n");
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    /* the data folder comes first: an option there (--help included) is a
     * request for the usage, not a folder to read */
    if (argc < 2 || argv[1][0] == '-') {
        bool help = argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
        fprintf(help ? stdout : stderr,
                "usage: megaplan-validate DATA_DIR [--summary | --rows | --rows-tsv | --parts-tsv] "
                "[--all-rows] [--only SETS] [--accept SETS] [--bound SET=FRACTION] [--must-fit SETS] "
                "[--known-oom LABEL-PART] [--set PROFILE:KEY=VALUE | --set-a100 KEY=VALUE | "
                "--set-h100 KEY=VALUE] ...\n");
        return help ? 0 : 2;
    }
    const char *dir = argv[1];
    int all_rows = 0, summary_only = 0, rows_only = 0, tsv = 0, parts_tsv = 0;
    const char *only = NULL;   /* --only KEY,KEY: the data sets to run (--rows-tsv) */
    const char *accept = NULL; /* --accept KEY,KEY: the sets whose thresholds decide the exit */
    const char *bound = NULL;  /* --bound KEY=FRACTION: that set's every row within FRACTION */
    const char *must_fit = NULL; /* --must-fit KEY,KEY: sets whose every run must be predicted to
                                    fit (without --accept, no set's error threshold decides the exit) */
    /* --known-oom TEXT (repeatable): must-fit rows whose label contains TEXT are
     * known misses, tested on their own by a should-fail test, not skipped silently */
    const char *known_oom[8];
    int n_known_oom = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--all-rows") == 0)
            all_rows = 1;
        else if (strcmp(argv[i], "--summary") == 0)
            summary_only = 1;
        else if (strcmp(argv[i], "--rows") == 0)
            rows_only = 1;
        else if (strcmp(argv[i], "--rows-tsv") == 0)
            tsv = 1;
        else if (strcmp(argv[i], "--parts-tsv") == 0)
            tsv = parts_tsv = 1;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--accept") == 0 && i + 1 < argc)
            accept = argv[++i];
        else if (strcmp(argv[i], "--bound") == 0 && i + 1 < argc)
            bound = argv[++i];
        else if (strcmp(argv[i], "--must-fit") == 0 && i + 1 < argc)
            must_fit = argv[++i];
        else if (strcmp(argv[i], "--known-oom") == 0 && i + 1 < argc && n_known_oom < 8)
            known_oom[n_known_oom++] = argv[++i];
        else if ((strcmp(argv[i], "--set") == 0 || strcmp(argv[i], "--set-a100") == 0 ||
                  strcmp(argv[i], "--set-h100") == 0) && i + 1 < argc) {
            if (set_option(argv[i], argv[i + 1]) != 0)
                return 2;
            i++;
        } else {
            fprintf(stderr, "megaplan-validate: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    /* after the options: the profiles carry the --set overrides */
    refdata_profiles prof;
    mp_error err;
    if (refdata_profiles_builtin(&prof, &err) != MP_OK) {
        fprintf(stderr, "megaplan-validate: built-in profiles: %s\n", err.msg);
        return 2;
    }
    /* the settings (assumptions) of the data sets come from tools/refdata.c;
     * the NCCL set describes the model's formula instead */
    enum { NSETS = 15, MOE_SET = REFDATA_SET_COUNT, MOE_AB_SET, MCI_STATIC_SET, MCI_PEAK_SET };
    dataset sets[NSETS] = {
        {.key = "vtrain-multi", .name = "vTrain multi-node (ground_truth_multi_dev.csv)",
         .what = "iteration time (s)", .threshold = 0.10, .step = 1},
        {.key = "vtrain-single", .name = "vTrain single-node (ground_truth_single.csv)",
         .what = "iteration time (s)", .threshold = 0.15, .step = 1},
        {.key = "narayanan", .name = "Narayanan 2021 Table 1",
         .what = "iteration time (s) = 96BslH²(…)/(TFLOP/s·GPUs)", .threshold = 0.10,
         .per_row = 1, .step = 1},
        {.key = "korthikanti", .name = "Korthikanti 2022 Tables 3/5", .what = "iteration time (s)",
         .threshold = 0.10, .per_row = 1, .step = 1},
        {.key = "korthikanti-layer", .name = "Korthikanti 2022 Table 4 (one 22B layer, t = 8, b = 4)",
         .what = "forward / backward time of one layer (s)", .threshold = 0},
        {.key = "megatron-core", .name = "Megatron-Core 2024, H100",
         .what = "iteration time (s) = 72BsLh²(…)/(TFLOP/s·GPUs)", .threshold = 0.10,
         .per_row = 1, .step = 1},
        {.key = "mtnlg", .name = "MT-NLG 530B (Smith et al. 2022)", .what = "iteration time (s)",
         .threshold = 0.10, .per_row = 1, .step = 1},
        {.key = "nccl", .name = "NCCL all-reduce in one A100 node (vTrain sweeps)", .what = "time (s)",
         .setting = "a100-4xhdr scale-up tier: latency·2(n−1) + "
                    "bytes·(2(n−1)/n + collective_local_pass) / (bw·efficiency).",
         .threshold = 0},
        {.key = "bloom", .name = "BLOOM-176B on Jean Zay (BigScience 2022)", .what = "iteration time (s)",
         .threshold = 0.10, .per_row = 1, .step = 1},
        {.key = "nemo", .name = "NeMo / Megatron-Bridge dense pre-training (FP8)",
         .what = "iteration time (s) = GBS·seq/(tokens/s/GPU·GPUs)", .threshold = 0.10,
         .per_row = 1, .step = 1},
        {.key = "moe", .name = "Mixture-of-experts pre-training (tests/data/moe)",
         .what = "step time (s) = global batch × seq / (tokens/s/GPU × GPUs)", .threshold = 0.10,
         .per_row = 1},
        {.key = "moe-ab", .name = "EP all-to-all overlap A/B pairs (Megatron-Bridge, tests/data/moe)",
         .what = "steady-state step time (s), as published", .threshold = 0},
        /* not in the error bands (.step 0): these runs use settings megaplan
         * cannot express (deterministic mode, per-step norm logging, no
         * gradient-accumulation fusion), and the bands are for runs it can */
        {.key = "megatron-ci", .name = "Megatron-LM CI functional tests (tests/data/megatron_ci)",
         .what = "steady-state iteration time (s)", .threshold = 0},
        {.key = "megatron-ci-static",
         .name = "Megatron-LM CI: allocated memory after the step (static part)",
         .what = "GiB on the logging rank (the last pipeline stage): torch's allocated bytes after "
                 "the optimizer step (mem-allocated-bytes) vs megaplan's weights + gradients + "
                 "optimizer state of that rank, plus what it holds between steps "
                 "(mp_memory.held_after_step: each pipeline chunk's last received activation "
                 "and its gradient)",
         .threshold = 0.05, .per_row = 1},
        {.key = "megatron-ci-peak", .name = "Megatron-LM CI: peak allocated memory",
         .what = "GiB on the logging rank: torch's peak allocated bytes (mem-max-allocated-bytes) "
                 "vs megaplan's peak of that rank without the runtime reserve and the allocator's "
                 "fragmentation (mp_memory.allocated_peak)",
         .threshold = 0.10, .per_row = 1},
    };
    /* MOE_SET: the MoE files, read by tools/refdata_moe.c */
    static const int ids[NSETS] = {
        REFDATA_VTRAIN_MULTI, REFDATA_VTRAIN_SINGLE, REFDATA_NARAYANAN, REFDATA_KORTHIKANTI,
        REFDATA_KORTHIKANTI_LAYER, REFDATA_MEGATRON_CORE, REFDATA_MTNLG, REFDATA_NCCL,
        REFDATA_BLOOM, REFDATA_NEMO, MOE_SET, MOE_AB_SET, REFDATA_MEGATRON_CI, MCI_STATIC_SET,
        MCI_PEAK_SET};
    refdata_moe_set moe_skipped = {0}, ab_skipped = {0};
    for (int i = 0; i < NSETS; i++) {
        size_t kl = strlen(sets[i].key);
        if (bound && strncmp(bound, sets[i].key, kl) == 0 && bound[kl] == '=') {
            char *end = NULL;
            double b = strtod(bound + kl + 1, &end);
            if (end == bound + kl + 1 || *end != '\0' || !(b > 0)) {
                fprintf(stderr, "megaplan-validate: --bound %s: expected KEY=FRACTION above 0\n",
                        bound);
                return 2;
            }
            sets[i].threshold = b;
            sets[i].per_row = 1;
        }
    }
    int bad = 0;
    for (int i = 0; i < NSETS; i++) {
        if (only && !in_list(only, sets[i].key))
            continue;
        /* the MoE rows are in no fit and no band: tools/fit_profile.py's
         * --rows-tsv runs leave them out unless --only names them */
        if ((ids[i] == MOE_SET || ids[i] == MOE_AB_SET || ids[i] == REFDATA_MEGATRON_CI ||
             ids[i] == MCI_STATIC_SET || ids[i] == MCI_PEAK_SET) && tsv && !only)
            continue;
        if (ids[i] == MCI_STATIC_SET || ids[i] == MCI_PEAK_SET)
            bad |= megatron_ci_memory(dir, &prof, &sets[i], ids[i] == MCI_STATIC_SET);
        else if (ids[i] == MOE_SET)
            bad |= moe(dir, &sets[i], &moe_skipped, refdata_moe_read);
        else if (ids[i] == MOE_AB_SET)
            bad |= moe(dir, &sets[i], &ab_skipped, refdata_moe_read_overlap_ab);
        else if (ids[i] == REFDATA_KORTHIKANTI_LAYER)
            bad |= layer(dir, &prof, &sets[i]);
        else if (ids[i] == REFDATA_NCCL)
            bad |= nccl(dir, &prof, &sets[i]);
        else
            bad |= iterations(dir, (refdata_set_id)ids[i], &prof, &sets[i]);
    }
    if (bad) {
        refdata_moe_free(&moe_skipped);
        refdata_moe_free(&ab_skipped);
        for (int i = 0; i < NSETS; i++)
            free(sets[i].rows);
        return 2;
    }
    int all_pass = 1;
    for (int i = 0; i < NSETS; i++)
        if ((!accept && !must_fit) || (accept && in_list(accept, sets[i].key)))
            all_pass &= passes(&sets[i]);
    /* every run of these sets ran, so a predicted overflow is the model's miss */
    for (int i = 0; must_fit && i < NSETS; i++)
        for (int k = 0; in_list(must_fit, sets[i].key) && k < sets[i].n; k++)
            if (sets[i].rows[k].checked_fit && !sets[i].rows[k].fits) {
                int known = 0;
                for (int j = 0; j < n_known_oom; j++)
                    known |= strstr(sets[i].rows[k].label, known_oom[j]) != NULL;
                if (known) {
                    fprintf(stderr, "megaplan-validate: %s: %s predicted not to fit (%.1f GiB), a known miss\n",
                            sets[i].key, sets[i].rows[k].label, sets[i].rows[k].peak_gib);
                    continue;
                }
                fprintf(stderr, "megaplan-validate: %s: %s predicted not to fit (%.1f GiB)\n",
                        sets[i].key, sets[i].rows[k].label, sets[i].rows[k].peak_gib);
                all_pass = 0;
            }

    if (parts_tsv) {
        /* one line per whole-step row with the estimate's exposed parts, which sum
         * to the prediction: where a row's time goes, to read against its error
         * (tp: with the MoE layers' dispatch and combine, as estimate prints it) */
        printf("set\trole\tprofile\tlabel\tmeasured\tpredicted\tcompute\trecompute\ttp\tcp\tpp"
               "\tbubble\tdp\toptimizer\n");
        for (int i = 0; i < NSETS; i++)
            for (int k = 0; k < sets[i].n; k++) {
                const row *w = &sets[i].rows[k];
                if (!w->has_parts)
                    continue;
                const mp_times *t = &w->parts;
                printf("%s\t%s\t%s\t%s\t%.9g\t%.9g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\n",
                       sets[i].key, role_name(sets[i].role), row_hw(&sets[i], k), w->label, w->measured,
                       w->predicted, t->compute, t->recompute, t->tp_comm, t->cp_comm, t->pp_comm,
                       t->bubble, t->dp_comm, t->optimizer);
            }
    } else if (tsv) {
        /* one line per row for tools/fit_profile.py: set, role, profile, measured, predicted */
        for (int i = 0; i < NSETS; i++)
            for (int k = 0; k < sets[i].n; k++)
                printf("%s\t%s\t%s\t%.9g\t%.9g\n", sets[i].key, role_name(sets[i].role), row_hw(&sets[i], k),
                       sets[i].rows[k].measured, sets[i].rows[k].predicted);
    } else if (!rows_only) {
        printf("# Validation\n\n");
        printf("Generated by `tools/validation-doc.sh build > docs/validation.md` (any build folder); "
               "every number on this page is computed by it. The protocol (tests/data/README.md): "
               "every data file is tagged `fit` or `held-out` before any fitting; "
               "`tools/fit_profile.py` fits the profiles' constants on `fit` rows only and writes "
               "them into hwprofiles/*.yaml; leave-one-source-out refits without each `fit` source "
               "and predicts it. Every row is one published or measured configuration run through "
               "`mp_estimate_config` with the built-in profile of its hardware: no per-row factors. "
               "Error = predicted / measured − 1. The `validation` test suite runs the same programs "
               "and fails when an acceptance threshold is missed. Where a row's predicted time goes: "
               "`megaplan-validate tests/data --parts-tsv` prints each whole-step row's exposed "
               "parts (compute, recompute, TP, CP, PP, bubble, DP, optimizer, as `megaplan "
               "estimate` breaks a step down, TP holding a mixture of experts' dispatch and "
               "combine as its TP/SP line does; they sum to the prediction) beside its measured "
               "time.\n\n");
        printf("## Held-out rows\n\nNever read by any fit: these figures are what the model does "
               "on runs it was not fitted to.\n\n");
        print_summary(sets, NSETS, REFDATA_HELD_OUT);
        printf("## Fitted rows (in-sample)\n\nThe rows the constants were fitted on, predicted with "
               "the fitted constants: how well the model fits, not how well it generalises (for "
               "that, the leave-one-source-out table).\n\n");
        print_summary(sets, NSETS, REFDATA_FIT);
        printf("## Error bands\n\nThe range of predicted / measured − 1 over the held-out rows of "
               "whole steps of each hardware class. The profiles hold it as `error_band` "
               "(written by `tools/fit_profile.py`), and estimate and search print every predicted "
               "time and throughput with it. A profile without held-out rows of its own GPU takes "
               "the band of the class it was transferred from (hwprofiles/*.yaml). Dense runs "
               "only: plans of a model with routed experts take the mixture-of-experts band "
               "below.\n\n"
               "| class | held-out step rows | low | high | profile holds |\n|---|---:|---:|---:|---|\n");
        static const struct {
            const char *gpu, *label, *profile;
        } classes[] = {{"a100", "A100 (dgx-a100, a100-4xhdr; BLOOM's a100-opa)", "dgx-a100"},
                       {"h100", "H100 (dgx-h100, h200; h800 takes its band)", "dgx-h100"},
                       {"b200", "B200 (b200, gb200-nvl72)", "b200"}};
        /* the profile that holds each class's bands */
        mp_hw holders[sizeof classes / sizeof classes[0]];
        for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
            mp_error herr;
            if (refdata_hw(classes[c].profile, &holders[c], &herr) != MP_OK) {
                fprintf(stderr, "megaplan-validate: %s: %s\n", classes[c].profile, herr.msg);
                return 2;
            }
        }
        for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
            double lo, hi;
            int n = band_of(sets, NSETS, classes[c].gpu, &lo, &hi);
            if (!band_row(classes[c].label, n, "", lo, hi, holders[c].error_band_low,
                          holders[c].error_band_high))
                all_pass = 0;
        }
        printf("\n");
        /* the MoE band of each class, where the MoE set ran */
        const dataset *moe_set = NULL;
        for (int i = 0; i < NSETS; i++)
            if (ids[i] == MOE_SET && sets[i].n > 0)
                moe_set = &sets[i];
        if (moe_set) {
            double plo, phi;
            int pn = moe_band_of(moe_set, NULL, &plo, &phi);
            printf("### Mixture-of-experts bands\n\nThe same range over the held-out "
                   "mixture-of-experts rows (tests/data/moe) of each class: the profiles hold it "
                   "as `moe_error_band`, and estimate, search and explain give it to every plan "
                   "of a model with routed experts (the dense band above does not hold for them). "
                   "A class without MoE rows takes the range of all %d MoE rows of every class "
                   "(%+.1f%% to %+.1f%%), never its dense band.\n\n"
                   "| class | held-out MoE rows | low | high | profile holds |\n"
                   "|---|---:|---:|---:|---|\n", pn, 100 * plo, 100 * phi);
            for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
                double lo, hi;
                int n = moe_band_of(moe_set, classes[c].gpu, &lo, &hi);
                if (n == 0)
                    lo = plo, hi = phi;
                if (!band_row(classes[c].label, n, n ? "" : " (pooled)", lo, hi,
                              holders[c].moe_error_band_low, holders[c].moe_error_band_high))
                    all_pass = 0;
            }
            printf("\n");
        }
        print_constants(&prof);
        printf("## Memory\n\nEvery measured or published run ran, so it fitted in its GPUs' memory; the "
               "model's verdict on each (peak = the most loaded GPU). Measured bytes are compared "
               "per row only where a source gives them: Megatron-LM CI's runs (the two "
               "\"Megatron-LM CI\" memory sets in the tables above and below: torch's allocated "
               "bytes on the rank that logs them):\n\n"
               "| data set | runs | predicted to fit | largest predicted peak (GiB) |\n|---|---:|---:|---:|\n");
        for (int i = 0; i < NSETS; i++) {
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
        for (int i = 0; i < NSETS; i++)
            for (int k = 0; k < sets[i].n; k++)
                if (sets[i].rows[k].checked_fit && !sets[i].rows[k].fits)
                    printf("- predicted not to fit: %s, %s (%.1f GiB on %s)\n", sets[i].name,
                           sets[i].rows[k].label, sets[i].rows[k].peak_gib, sets[i].rows[k].hw);
        printf("\n");
    }
    for (int i = 0; i < NSETS && !summary_only && !tsv; i++) {
        printf("## %s\n\nRole: %s. Compared: %s. Setting: %s\n\n", sets[i].name,
               role_name(sets[i].role), sets[i].what, sets[i].setting);
        if (sets[i].not_run)
            printf("%d published run%s of these files megaplan cannot compare (a model it refuses, "
                   "a setting it lacks, or a figure that is not a step time: the file's note column says which) %s not in the table.\n\n",
                   sets[i].not_run, sets[i].not_run == 1 ? "" : "s", sets[i].not_run == 1 ? "is" : "are");
        print_by_profile(&sets[i]);
        bool moe_rows = ids[i] == MOE_SET || ids[i] == MOE_AB_SET;
        print_rows(&sets[i], ids[i] == REFDATA_NCCL && !all_rows ? 16 : 1, moe_rows);
        if (moe_rows)
            print_not_run(ids[i] == MOE_SET ? &moe_skipped : &ab_skipped);
    }
    refdata_moe_free(&moe_skipped);
    refdata_moe_free(&ab_skipped);
    for (int i = 0; i < NSETS; i++)
        free(sets[i].rows);
    return all_pass ? 0 : 1;
}
