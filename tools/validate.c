/* validate.c — megaplan-validate: runs every row of ../shared/data through the
 * cost model and prints docs/validation.md (predicted vs measured per row,
 * MAPE, median and max per data set, the hold-out split, the NCCL fit).
 *
 *   build/tests/validation/megaplan-validate ../shared/data > docs/validation.md
 *
 * Exit status 0 when every acceptance threshold holds, 1 when one is missed,
 * 2 when the data cannot be read. One hardware profile per hardware type, no
 * per-row factors: each row is only its published configuration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/hw.h"
#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

#define MAX_ROWS 2048
#define MAX_COLS 24

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
    const char *setting;  /* assumptions, one paragraph */
    double threshold;     /* MAPE bound (mape) or per-row bound (per_row) */
    int per_row;          /* 1: every row must be within threshold */
    row *rows;
    int n;
} dataset;

/* ---- CSV ---------------------------------------------------------------- */

typedef struct csv {
    int n;
    char text[MAX_ROWS][MAX_COLS][48];
    int cols[MAX_ROWS];
} csv;

static int csv_read(const char *dir, const char *file, csv *out)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *data = NULL;
    size_t len = 0;
    mp_error err;
    if (mp_read_file(path, 64u << 20, &data, &len, &err) != MP_OK) {
        fprintf(stderr, "megaplan-validate: %s: cannot read\n", path);
        return -1;
    }
    out->n = 0;
    char *line = data;
    int first = 1;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (!first && line[0] && out->n < MAX_ROWS) {
            int c = 0;
            char *p = line;
            while (c < MAX_COLS) {
                char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);
                if (n >= 48)
                    n = 47;
                memcpy(out->text[out->n][c], p, n);
                out->text[out->n][c][n] = '\0';
                char *cr = strchr(out->text[out->n][c], '\r');
                if (cr)
                    *cr = '\0';
                c++;
                if (!comma)
                    break;
                p = comma + 1;
            }
            out->cols[out->n] = c;
            out->n++;
        }
        first = 0;
        line = nl ? nl + 1 : NULL;
    }
    free(data);
    return 0;
}

static double num(const csv *c, int r, int col)
{
    return atof(c->text[r][col]);
}

/* ---- configurations ------------------------------------------------------ */

static int gpt_model(mp_model *m, const char *name, int64_t L, int64_t h, int64_t a, int64_t s,
                     int64_t V, bool tied)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->arch = MP_ARCH_GPT;
    m->layers = L;
    m->hidden = h;
    m->heads = a;
    m->kv_heads = a;
    m->head_dim = h / a;
    m->ffn_hidden = 4 * h;
    m->vocab = V;
    m->seq = s;
    m->activation = MP_ACT_GELU;
    m->norm = MP_NORM_LAYERNORM;
    m->position = MP_POS_LEARNED;
    m->tied_embeddings = tied;
    mp_error err;
    return mp_model_finish(m, &err) == MP_OK ? 0 : -1;
}

typedef struct par {
    int64_t gpus, gb, mb, t, p, v, d, cp;
    bool sp, dist_opt, dp_overlap, tp_overlap;
    mp_recompute rc;
    mp_dtype prec;
} par;

static int run(const mp_model *m, const mp_hw *hw, const par *q, mp_estimate *e, char *why,
               size_t why_n)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *m;
    c.hw = *hw;
    c.training.gpus = q->gpus;
    c.training.seq = m->seq;
    c.training.global_batch = q->gb;
    c.training.precision = q->prec;
    c.parallel.tp = q->t;
    c.parallel.pp = q->p;
    c.parallel.vpp = q->v > 0 ? q->v : 1;
    c.parallel.cp = q->cp > 0 ? q->cp : 1;
    c.parallel.dp = q->d;
    c.parallel.sp = q->sp;
    c.parallel.micro_batch = q->mb;
    c.parallel.recompute = q->rc;
    c.parallel.dist_opt = q->dist_opt;
    c.parallel.dp_overlap = q->dp_overlap;
    c.parallel.tp_overlap = q->tp_overlap;
    c.parallel.schedule = c.parallel.vpp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B;
    mp_error err;
    mp_error_clear(&err);
    if (mp_estimate_config(&c, NULL, e, &err) != MP_OK) {
        size_t n = strlen(err.field);
        if (n + 3 < why_n) {
            memcpy(why, err.field, n);
            memcpy(why + n, ": ", 3);
            strncat(why, err.msg, why_n - n - 3);
        }
        return -1;
    }
    return 0;
}

/* ---- data sets ------------------------------------------------------------ */

/* Which rows are the hold-out: every other row (parity), or the larger model
 * of each vTrain file (model: 18.4B multi-node, h = 2048 single-node). */
static int split_by_model = 0;

static int vtrain(const char *dir, const char *file, bool multi, const mp_hw *hw, dataset *ds)
{
    static csv c;
    if (csv_read(dir, file, &c) != 0)
        return -1;
    ds->rows = calloc((size_t)c.n, sizeof *ds->rows);
    ds->n = 0;
    int off = multi ? 1 : 0; /* the multi-node file starts with billions of parameters */
    for (int r = 0; r < c.n; r++) {
        par q = {0};
        q.gpus = (int64_t)num(&c, r, off + 0);
        q.gb = (int64_t)num(&c, r, off + 1);
        q.mb = (int64_t)num(&c, r, off + 2);
        int64_t h = (int64_t)num(&c, r, off + 3), a = (int64_t)num(&c, r, off + 4);
        int64_t L = (int64_t)num(&c, r, off + 5), s = (int64_t)num(&c, r, off + 6);
        q.t = (int64_t)num(&c, r, off + 7);
        q.d = (int64_t)num(&c, r, off + 8);
        q.p = (int64_t)num(&c, r, off + 9);
        double ms = num(&c, r, off + 10);
        q.v = 1;
        q.cp = 1;
        q.rc = MP_RECOMPUTE_FULL;
        q.prec = MP_DTYPE_FP16;
        mp_model m;
        if (gpt_model(&m, "gpt", L, h, a, s, 50257, true) != 0)
            continue;
        mp_estimate e;
        char why[512];
        row *w = &ds->rows[ds->n];
        snprintf(w->label, sizeof w->label, "h=%lld L=%lld gpus=%lld B=%lld b=%lld t=%lld d=%lld p=%lld",
                 (long long)h, (long long)L, (long long)q.gpus, (long long)q.gb, (long long)q.mb,
                 (long long)q.t, (long long)q.d, (long long)q.p);
        if (run(&m, hw, &q, &e, why, sizeof why) != 0) {
            fprintf(stderr, "megaplan-validate: %s row %d refused: %s\n", file, r + 2, why);
            continue;
        }
        w->measured = ms / 1000.0;
        w->predicted = e.time.step;
        w->checked_fit = 1;
        w->fits = e.fits;
        w->peak_gib = e.memory.peak / (1024.0 * 1024.0 * 1024.0);
        w->larger_model = multi ? num(&c, r, 0) > 10.0 : h > 1024;
        w->holdout = split_by_model ? w->larger_model : r % 2;
        ds->n++;
    }
    return 0;
}

/* Narayanan 2021 Table 1: throughput per GPU by the paper's own FLOPs formula
 * 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), so measured time = F / (tflops * gpus). */
static int narayanan(const char *dir, const mp_hw *hw, dataset *ds)
{
    static csv c;
    if (csv_read(dir, "published/narayanan2021_table1.csv", &c) != 0)
        return -1;
    ds->rows = calloc((size_t)c.n, sizeof *ds->rows);
    ds->n = 0;
    for (int r = 0; r < c.n; r++) {
        double pb = num(&c, r, 0);
        int64_t a = (int64_t)num(&c, r, 1), h = (int64_t)num(&c, r, 2), L = (int64_t)num(&c, r, 3);
        par q = {0};
        q.t = (int64_t)num(&c, r, 4);
        q.p = (int64_t)num(&c, r, 5);
        q.gpus = (int64_t)num(&c, r, 6);
        q.gb = (int64_t)num(&c, r, 7);
        double tflops = num(&c, r, 8);
        q.d = q.gpus / (q.t * q.p);
        q.cp = 1;
        q.prec = MP_DTYPE_FP16;
        q.rc = MP_RECOMPUTE_FULL;
        /* assumptions (docs/validation.md): micro-batch 1 with pipelining, else
         * the largest that divides B/d up to 8... see the set's note */
        q.mb = q.p > 1 ? 1 : 2;
        q.v = 1;
        if (q.p > 1)
            q.v = (L / q.p) % 2 == 0 ? 2 : 1;
        int64_t s = 2048, V = 51200;
        mp_model m;
        if (gpt_model(&m, "gpt", L, h, a, s, V, true) != 0)
            continue;
        double F = 96.0 * (double)q.gb * (double)s * (double)L * (double)h * (double)h *
                   (1.0 + (double)s / (6.0 * (double)h) + (double)V / (16.0 * (double)L * (double)h));
        mp_estimate e;
        char why[512];
        row *w = &ds->rows[ds->n];
        snprintf(w->label, sizeof w->label, "%.1fB t=%lld p=%lld gpus=%lld B=%lld (b=%lld v=%lld)", pb,
                 (long long)q.t, (long long)q.p, (long long)q.gpus, (long long)q.gb, (long long)q.mb,
                 (long long)q.v);
        if (run(&m, hw, &q, &e, why, sizeof why) != 0) {
            fprintf(stderr, "megaplan-validate: narayanan row %d refused: %s\n", r + 2, why);
            continue;
        }
        w->measured = F / (tflops * 1e12 * (double)q.gpus);
        w->predicted = e.time.step;
        w->checked_fit = 1;
        w->fits = e.fits;
        w->peak_gib = e.memory.peak / (1024.0 * 1024.0 * 1024.0);
        ds->n++;
    }
    return 0;
}

static int korthikanti(const char *dir, const mp_hw *hw, dataset *ds)
{
    static csv c;
    if (csv_read(dir, "published/korthikanti2022.csv", &c) != 0)
        return -1;
    ds->rows = calloc((size_t)c.n * 2, sizeof *ds->rows);
    ds->n = 0;
    for (int r = 0; r < c.n; r++) {
        int64_t a = (int64_t)num(&c, r, 1), h = (int64_t)num(&c, r, 2), L = (int64_t)num(&c, r, 3);
        par q = {0};
        q.t = (int64_t)num(&c, r, 4);
        q.p = (int64_t)num(&c, r, 5);
        q.gpus = (int64_t)num(&c, r, 6);
        q.gb = (int64_t)num(&c, r, 7);
        q.mb = (int64_t)num(&c, r, 8);
        q.v = (int64_t)num(&c, r, 9);
        q.d = q.gpus / (q.t * q.p);
        q.cp = 1;
        q.prec = MP_DTYPE_BF16;
        mp_model m;
        if (gpt_model(&m, c.text[r][0], L, h, a, 2048, 51200, true) != 0)
            continue;
        for (int k = 0; k < 2; k++) {
            q.sp = k == 1;
            q.rc = k == 1 ? MP_RECOMPUTE_SELECTIVE : MP_RECOMPUTE_FULL;
            mp_estimate e;
            char why[512];
            row *w = &ds->rows[ds->n];
            snprintf(w->label, sizeof w->label, "%s t=%lld p=%lld v=%lld B=%lld b=%lld, %s", c.text[r][0],
                     (long long)q.t, (long long)q.p, (long long)q.v, (long long)q.gb, (long long)q.mb,
                     k ? "SP + selective" : "full recompute");
            if (run(&m, hw, &q, &e, why, sizeof why) != 0) {
                fprintf(stderr, "megaplan-validate: korthikanti row %d refused: %s\n", r + 2, why);
                continue;
            }
            w->measured = num(&c, r, k ? 11 : 10);
            w->predicted = e.time.step;
            w->checked_fit = 1;
            w->fits = e.fits;
            w->peak_gib = e.memory.peak / (1024.0 * 1024.0 * 1024.0);
        w->checked_fit = 1;
        w->fits = e.fits;
        w->peak_gib = e.memory.peak / (1024.0 * 1024.0 * 1024.0);
            ds->n++;
        }
    }
    return 0;
}

/* Table 4: one 22B layer (h 6144, a 64, s 2048, b 4, t 8): forward and backward ms. */
static int korthikanti_layer(const char *dir, const mp_hw *hw, dataset *ds)
{
    static csv c;
    if (csv_read(dir, "published/korthikanti2022_table4_layer22b.csv", &c) != 0)
        return -1;
    ds->rows = calloc((size_t)c.n * 2, sizeof *ds->rows);
    ds->n = 0;
    mp_model m;
    if (gpt_model(&m, "22B", 48, 6144, 64, 2048, 51200, true) != 0)
        return -1;
    for (int r = 0; r < c.n; r++) {
        const char *x = c.text[r][0];
        mp_config cf;
        memset(&cf, 0, sizeof cf);
        cf.model = m;
        cf.hw = *hw;
        cf.training.gpus = 8;
        cf.training.seq = 2048;
        cf.training.global_batch = 4;
        cf.training.precision = MP_DTYPE_BF16;
        cf.parallel = (mp_parallel){.tp = 8, .pp = 1, .vpp = 1, .cp = 1, .dp = 1, .micro_batch = 4,
                                    .schedule = MP_SCHED_1F1B};
        cf.parallel.sp = strstr(x, "sequence") != NULL;
        cf.parallel.recompute = strstr(x, "full")        ? MP_RECOMPUTE_FULL
                                : strstr(x, "selective") ? MP_RECOMPUTE_SELECTIVE
                                                         : MP_RECOMPUTE_NONE;
        mp_item_cost items[50];
        mp_error err;
        if (mp_item_costs(&cf, items, &err) != MP_OK)
            continue;
        double f = items[1].fwd, b = items[1].bwd[cf.parallel.recompute];
        row *w = &ds->rows[ds->n++];
        snprintf(w->label, sizeof w->label, "%s forward", x);
        w->measured = num(&c, r, 1) / 1000.0;
        w->predicted = f;
        w = &ds->rows[ds->n++];
        snprintf(w->label, sizeof w->label, "%s backward", x);
        w->measured = num(&c, r, 2) / 1000.0;
        w->predicted = b;
    }
    return 0;
}

/* Megatron-Core 2024 weak scaling on H100: MFU by Megatron's 72 B s L h^2 (...)
 * formula, so measured time = model FLOPs / (tflops * gpus). */
static int megatron_core(const char *dir, const mp_hw *hw, dataset *ds)
{
    static csv c;
    if (csv_read(dir, "published/megatron_core_h100_2024.csv", &c) != 0)
        return -1;
    ds->rows = calloc((size_t)c.n, sizeof *ds->rows);
    ds->n = 0;
    for (int r = 0; r < c.n; r++) {
        double pb = num(&c, r, 0);
        int64_t a = (int64_t)num(&c, r, 1), h = (int64_t)num(&c, r, 2), L = (int64_t)num(&c, r, 3);
        par q = {0};
        q.t = (int64_t)num(&c, r, 4);
        q.p = (int64_t)num(&c, r, 5);
        q.d = (int64_t)num(&c, r, 6);
        q.gpus = (int64_t)num(&c, r, 7);
        q.gb = (int64_t)num(&c, r, 8);
        double tflops = num(&c, r, 9);
        q.mb = 1;
        q.cp = 1;
        q.sp = q.t > 1;
        q.dist_opt = true;
        q.dp_overlap = true;
        q.tp_overlap = q.t > 1;
        q.prec = MP_DTYPE_BF16;
        q.rc = MP_RECOMPUTE_NONE;
        q.v = 1;
        if (q.p > 1) {
            /* interleaving with the most chunks of >= 3 layers... see the set's note */
            int64_t per = L / q.p;
            for (int64_t v = per; v >= 1; v--)
                if (per % v == 0 && per / v >= 3 && (q.gb / (q.mb * q.d)) % q.p == 0) {
                    q.v = v;
                    break;
                }
        }
        mp_model m;
        if (gpt_model(&m, "gpt", L, h, a, 4096, 131072, false) != 0)
            continue;
        m.position = MP_POS_ROPE;
        mp_estimate e;
        char why[512];
        row *w = &ds->rows[ds->n];
        if (run(&m, hw, &q, &e, why, sizeof why) != 0) {
            fprintf(stderr, "megaplan-validate: megatron-core row %d refused: %s\n", r + 2, why);
            continue;
        }
        if (!e.fits) {
            q.rc = MP_RECOMPUTE_SELECTIVE;
            run(&m, hw, &q, &e, why, sizeof why);
        }
        snprintf(w->label, sizeof w->label, "%.1fB t=%lld p=%lld d=%lld B=%lld (b=1 v=%lld %s)", pb,
                 (long long)q.t, (long long)q.p, (long long)q.d, (long long)q.gb, (long long)q.v,
                 mp_recompute_name(q.rc));
        w->measured = e.model_flops / (tflops * 1e12 * (double)q.gpus);
        w->predicted = e.time.step;
        w->checked_fit = 1;
        w->fits = e.fits;
        w->peak_gib = e.memory.peak / (1024.0 * 1024.0 * 1024.0);
        ds->n++;
    }
    return 0;
}

/* ---- NCCL fit -------------------------------------------------------------- */

static int nccl(const char *dir, const mp_hw *hw, dataset *ds)
{
    static csv c;
    ds->rows = calloc(3 * MAX_ROWS, sizeof *ds->rows);
    ds->n = 0;
    for (int g = 2; g <= 8; g *= 2) {
        char f[64];
        snprintf(f, sizeof f, "vtrain/a100_nvlink_allreduce_%dgpu.csv", g);
        if (csv_read(dir, f, &c) != 0)
            return -1;
        mp_group_place pl = {.n = g, .cross_domain = false, .per_node = g, .cross_fraction = 0};
        for (int r = 0; r < c.n; r++) {
            double bytes = num(&c, r, 0);
            double ns = 0.5 * (num(&c, r, 3) + num(&c, r, 5));
            row *w = &ds->rows[ds->n++];
            snprintf(w->label, sizeof w->label, "%d GPUs, %.0f MiB", g, bytes / 1048576.0);
            w->measured = ns * 1e-9;
            w->predicted = mp_coll_time(hw, &pl, MP_COLL_ALLREDUCE, bytes);
            w->holdout = r % 2;
        }
    }
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
    mp_hw a100v, a100s, h100;
    mp_error err;
    if (mp_hw_preset("a100-4xhdr", &a100v, &err) != MP_OK ||
        mp_hw_preset("dgx-a100", &a100s, &err) != MP_OK ||
        mp_hw_preset("dgx-h100", &h100, &err) != MP_OK) {
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
            mp_status st = a100 ? mp_hw_set_field(&a100v, kv, eq + 1, &err) : mp_hw_set_field(&h100, kv, eq + 1, &err);
            if (st == MP_OK && a100)
                st = mp_hw_set_field(&a100s, kv, eq + 1, &err);
            if (st != MP_OK) {
                fprintf(stderr, "megaplan-validate: %s: %s\n", kv, err.msg);
                return 2;
            }
            continue;
        }
        fprintf(stderr, "megaplan-validate: unknown option %s\n", argv[i]);
        return 2;
    }
    dataset sets[7] = {
        {.name = "vTrain multi-node (ground_truth_multi_dev.csv)", .what = "iteration time (s)",
         .setting = "a100-4xhdr; Megatron-DeepSpeed GPT, vocab 50,257 (padded to 128t), fp16, full "
                    "recompute, 1F1B, DP all-reduce of fp16 grads after the flush (no overlap), no "
                    "distributed optimizer, no SP.",
         .threshold = 0.10},
        {.name = "vTrain single-node (ground_truth_single.csv)", .what = "iteration time (s)",
         .setting = "as the multi-node set, inside one node.", .threshold = 0.15},
        {.name = "Narayanan 2021 Table 1", .what = "iteration time (s) = 96BslH²(…)/(TFLOP/s·GPUs)",
         .setting = "dgx-a100; fp16, vocab 51,200, s 2048, full recompute, no SP, no distributed "
                    "optimizer, DP not overlapped. Not published, assumed: micro-batch 2 without "
                    "pipelining and 1 with it; interleaved 1F1B with v = 2 where the layers per "
                    "stage are even (else v = 1).",
         .threshold = 0.10, .per_row = 1},
        {.name = "Korthikanti 2022 Tables 3/5", .what = "iteration time (s)",
         .setting = "dgx-a100; bf16, vocab 51,200, s 2048, no DP; 'this work' = SP + selective "
                    "recompute, the other column full recompute.",
         .threshold = 0.10, .per_row = 1},
        {.name = "Korthikanti 2022 Table 4 (one 22B layer, t = 8, b = 4)",
         .what = "forward / backward time of one layer (s)",
         .setting = "dgx-a100; bf16; backward includes the recompute of that row.",
         .threshold = 0},
        {.name = "Megatron-Core 2024, H100", .what = "iteration time (s) = 72BsLh²(…)/(TFLOP/s·GPUs)",
         .setting = "dgx-h100; bf16, s 4096, vocab 131,072, untied embeddings, RoPE. Not in the "
                    "CSV, assumed after Megatron's published scripts: micro-batch 1, SP and TP "
                    "comm overlap for t > 1, distributed optimizer with overlapped grad reduce and "
                    "param gather, no recompute (selective if it would not fit), interleaving "
                    "with the most chunks of at least 3 layers for p > 1.",
         .threshold = 0.10, .per_row = 1},
        {.name = "NCCL all-reduce in one A100 node (vTrain sweeps)", .what = "time (s)",
         .setting = "a100-4xhdr scale-up tier: kernel_overhead + latency·2(n−1) + "
                    "bytes·2(n−1)/n / (bw·efficiency).",
         .threshold = 0},
    };
    int bad = 0;
    bad |= vtrain(dir, "vtrain/ground_truth_multi_dev.csv", true, &a100v, &sets[0]);
    bad |= vtrain(dir, "vtrain/ground_truth_single.csv", false, &a100v, &sets[1]);
    bad |= narayanan(dir, &a100s, &sets[2]);
    bad |= korthikanti(dir, &a100s, &sets[3]);
    bad |= korthikanti_layer(dir, &a100s, &sets[4]);
    bad |= megatron_core(dir, &h100, &sets[5]);
    bad |= nccl(dir, &a100v, &sets[6]);
    if (bad)
        return 2;

    printf("# Validation\n\n");
    printf("Generated by\n\n"
           "    build/tests/validation/megaplan-validate ../shared/data > docs/validation.md && "
           "build/tests/search/megaplan-rank-validate ../shared/data >> docs/validation.md\n\n"
           "(the second program writes the section \"Search ranking\" at the end; any build folder; the `validation` test suite\n"
           "runs the same programs and fails when a threshold is missed). Every row is one published or measured configuration run through\n"
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
