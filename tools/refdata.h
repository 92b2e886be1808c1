/* refdata.h — the one mapping from the rows of tests/data (CSV files,
 * see tests/data/README.md) to megaplan configurations.
 *
 * megaplan-validate (tools/validate.c), megaplan-rank-validate
 * (tools/rank_validate.c) and sim_validation (tests/sim/sim_validation.c)
 * all ask "what configuration is this published or measured row?". The
 * answer — the CSV columns, the hardware profile of each data set and the
 * settings a paper leaves out (vocab, precision, recompute, schedule,
 * micro-batch, interleaving, overlap ...) — lives here only, so the three
 * programs cannot drift apart. The programs keep their own estimating,
 * statistics and printing.
 *
 * Library rules: nothing here prints or exits; errors come back as mp_status
 * with an mp_error ("file:line:col: field: message"). */
#ifndef MP_TOOLS_REFDATA_H
#define MP_TOOLS_REFDATA_H
#include <stdbool.h>

#include "core/config.h"
#include "core/error.h"
#include "core/hw.h"

/* The data sets, in the order docs/validation.md reports them. */
typedef enum refdata_set_id {
    REFDATA_VTRAIN_MULTI,      /* vtrain/ground_truth_multi_dev.csv */
    REFDATA_VTRAIN_SINGLE,     /* vtrain/ground_truth_single.csv */
    REFDATA_NARAYANAN,         /* published/narayanan2021_table1.csv */
    REFDATA_KORTHIKANTI,       /* published/korthikanti2022.csv, two rows per line */
    REFDATA_KORTHIKANTI_LAYER, /* published/korthikanti2022_table4_layer22b.csv, two per line */
    REFDATA_MEGATRON_CORE,     /* published/megatron_core_h100_2024.csv */
    REFDATA_MTNLG,             /* published/smith2022_mtnlg.csv */
    REFDATA_NCCL,              /* vtrain/a100_nvlink_allreduce_{2,4,8}gpu.csv */
    REFDATA_BLOOM,             /* published/bigscience_bloom176b.csv (the runs format) */
    REFDATA_NEMO,              /* published/nemo_*.csv, megatron_bridge_dense.csv (the runs format) */
    REFDATA_MEGATRON_CI,       /* megatron_ci/golden_values.csv: NVIDIA CI's measured runs */
    REFDATA_SET_COUNT
} refdata_set_id;

/* What the CSV's number is. measured_s converts it to seconds of the
 * compared quantity, so every consumer compares the same thing. */
typedef enum refdata_kind {
    REFDATA_ITER_S,            /* iteration time, seconds (vTrain ms / 1000; Korthikanti) */
    REFDATA_TFLOPS_NARAYANAN,  /* TFLOP/s per GPU by Narayanan's 96BslH²(1 + s/6h + V/16lh),
                                  which counts the recomputed forward */
    REFDATA_TFLOPS_MODEL,      /* model TFLOP/s per GPU (Megatron's formula; = MFU × peak) */
    REFDATA_LAYER_S,           /* forward or backward time of one transformer layer, seconds */
    REFDATA_ALLREDUCE_S,       /* one NCCL all-reduce, seconds */
    REFDATA_TOKENS_PER_GPU     /* tokens per second per GPU (NeMo's tables) */
} refdata_kind;

/* Where one CSV line yields more than one row, which one this is. */
typedef enum refdata_variant {
    REFDATA_ONLY,              /* the line's one row */
    REFDATA_FULL_RECOMPUTE,    /* Korthikanti: the full-recompute column */
    REFDATA_SP_SELECTIVE,      /* Korthikanti: "this work" = SP + selective recompute */
    REFDATA_FORWARD,           /* Korthikanti Table 4: the forward time */
    REFDATA_BACKWARD           /* Korthikanti Table 4: the backward time (with its recompute) */
} refdata_variant;

/* Settings the source does not publish and the mapping had to assume; a
 * search may leave them free (Narayanan: "micro-batch not published").
 * Megatron-Core's micro-batch and interleaving are taken from Megatron's
 * published scripts, so they count as given. */
enum {
    REFDATA_OPEN_MICRO_BATCH = 1u << 0,
    REFDATA_OPEN_VPP = 1u << 1
};

/* Each file's role, decided before any fitting (tests/data/README.md). */
typedef enum refdata_role {
    REFDATA_ROLE_NONE,         /* no "# role:" line: refused */
    REFDATA_FIT,               /* the fit may read its rows */
    REFDATA_HELD_OUT           /* never fitted: its residuals are the error bands */
} refdata_role;

/* One CSV file of tests/data read whole: the "# " lines before the header
 * give its role (refused without one); cells by row and column, NULL where
 * a line is short. The data sets below and tools/refdata_moe.c read
 * through it. */
typedef struct refdata_table {
    char path[1024];
    char *text;                /* the file; cells point into it */
    char **header;             /* cols names */
    char **cell;               /* rows x cols; NULL where a line is short */
    int *line;                 /* 1-based file line of each data row */
    int rows, cols;
    refdata_role role;         /* from the "# role:" header line */
} refdata_table;

mp_status refdata_table_read(const char *dir, const char *file, refdata_table *t, mp_error *err);
/* One file of a data set of several files, which share one role: reads it
 * as refdata_table_read, then, where first names the set's first file (NULL:
 * this is the first), refuses a role other than *role; sets *role. */
mp_status refdata_table_read_more(const char *dir, const char *file, const char *first,
                                  refdata_role *role, refdata_table *t, mp_error *err);
void refdata_table_free(refdata_table *t);
/* The cell of row r in the column named name; NULL when there is no such
 * column or the line is short. */
const char *refdata_table_get(const refdata_table *t, int r, const char *name);

typedef struct refdata_row {
    refdata_set_id set;
    int line;                  /* 1-based line of the CSV file */
    const char *file;          /* that file, relative to the data folder (NULL: the set's) */
    int index;                 /* 0-based data line of its file (the parity hold-out split) */
    char label[192];           /* short description, as docs/validation.md prints it */
    mp_config config;          /* model, hw, training, parallel with the assumptions applied;
                                  NCCL: hw and training.gpus (the group) only */
    const char *hw_preset;     /* the built-in profile config.hw started from */
    refdata_kind kind;
    refdata_variant variant;
    double value;              /* the CSV's number, in kind's unit (ms → s for vTrain) */
    double measured_s;         /* the same in seconds of the compared quantity */
    double params_billion;     /* the model-size column (0 where the file has none) */
    bool larger_model;         /* the larger model of its vTrain file: 18.4B multi-node,
                                  h > 1024 single-node (the by-model hold-out split) */
    unsigned open;             /* REFDATA_OPEN_* */
    double bytes;              /* NCCL: message size */
    /* Megatron-LM CI: torch's allocated bytes after the optimizer step and
     * their peak, on the pipeline rank mem_rank (its last stage: the rank
     * world_size - 1 that logs them); 0 where a set has none */
    double mem_allocated, mem_max_allocated;
    int64_t mem_rank;
    const char *note;          /* the data set's assumptions, one paragraph */
} refdata_row;

typedef struct refdata_set {
    refdata_set_id id;
    const char *file;          /* relative to the data folder (NCCL: the 2-GPU file) */
    const char *hw_preset;
    const char *note;          /* the assumptions, one paragraph */
    refdata_row *rows;         /* malloc'ed; refdata_set_free */
    int n;
    int skipped;               /* lines whose model mp_model_finish refused (not in rows) */
    refdata_role role;         /* the file's "# role:" header */
} refdata_set;

/* The hardware profiles the data sets ran on. The programs may change fields
 * (megaplan-validate --set-a100 KEY=VALUE) before reading the sets. */
typedef struct refdata_profiles {
    mp_hw a100_4xhdr;          /* vTrain's clusters */
    mp_hw dgx_a100;            /* Selene (Narayanan, Korthikanti) */
    mp_hw dgx_h100;            /* Megatron-Core 2024 */
} refdata_profiles;

/* The built-in presets a100-4xhdr, dgx-a100, dgx-h100 (with the overrides below). */
mp_status refdata_profiles_builtin(refdata_profiles *p, mp_error *err);

/* A constant set on a named profile for every row that runs on it
 * (megaplan-validate --set PROFILE:KEY=VALUE): how a candidate fit is tried
 * on every data set without rebuilding. The profile is any built-in one or a
 * profile the data files derive from one (a100-opa); a derived profile takes
 * its base's overrides first, then its own. Checked on add: an unknown
 * profile or key, or a value the field refuses, is an error. */
mp_status refdata_override_add(const char *profile, const char *key, const char *value,
                               mp_error *err);

/* The profile name as the data sets load it: the built-in preset, or the
 * derived profile, with the overrides applied. */
mp_status refdata_hw(const char *name, mp_hw *hw, mp_error *err);

/* Reads one data set from dir (tests/data) into out. A missing file, a
 * short line or a number that does not parse is an error (out is then empty);
 * a line whose model megaplan refuses is counted in out->skipped. Megatron-Core
 * runs the cost model once per row for its "selective if it would not fit". */
mp_status refdata_read(const char *dir, refdata_set_id id, const refdata_profiles *p,
                       refdata_set *out, mp_error *err);

void refdata_set_free(refdata_set *s);

#endif
