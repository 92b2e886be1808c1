/* refdata.c — the rows of tests/data as megaplan configurations (see
 * refdata.h for why this is one module). Each data set's builder reads its
 * CSV columns and applies the assumptions its note states; nothing else
 * about a row is decided anywhere else. */
#include "tools/refdata.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/fields.h"
#include "core/model.h"
#include "planner/cost.h"

/* ---- CSV ------------------------------------------------------------------ */

/* The files are small (the largest 1,440 lines): read whole, cut in place
 * (refdata.h's refdata_table). */
typedef refdata_table csv;

static void csv_free(csv *c)
{
    free(c->text);
    free(c->header);
    free(c->cell);
    free(c->line);
    memset(c, 0, sizeof *c);
}

/* Splits one line at commas into at most cols cells (the rest stay NULL);
 * returns how many it found. A trailing '\r' (CRLF files) is not data. */
static int split_line(char *s, char **cells, int cols)
{
    size_t len = strlen(s);
    if (len && s[len - 1] == '\r')
        s[--len] = '\0';
    int n = 0;
    for (char *p = s; n < cols;) {
        cells[n++] = p;
        char *comma = strchr(p, ',');
        if (!comma)
            break;
        *comma = '\0';
        p = comma + 1;
    }
    return n;
}

/* "# word: text" before the column names: the file's source, licence, role
 * and notes. Column names may start with '#' too ("# GPUs,..."), but never
 * with a lower-case word and a colon. */
static bool is_meta_line(const char *s)
{
    if (s[0] != '#' || s[1] != ' ' || !islower((unsigned char)s[2]))
        return false;
    const char *p = s + 2;
    while (islower((unsigned char)*p))
        p++;
    return *p == ':';
}

static mp_status csv_read(const char *dir, const char *file, csv *c, mp_error *err)
{
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s/%s", dir, file);
    size_t len = 0;
    mp_status st = mp_read_file(c->path, 64u << 20, &c->text, &len, err);
    if (st != MP_OK)
        return st;
    if (c->text[0] == '\0') {
        st = mp_error_set(err, MP_EINPUT, c->path, 1, 0, NULL, "empty file, expected a header");
        csv_free(c);
        return st;
    }
    /* at most one row per newline, plus a last line without one */
    size_t lines = 1;
    for (const char *p = c->text; *p; p++)
        lines += *p == '\n';
    char *next = c->text;
    int lineno = 0;
    for (char *s = next; s; s = next) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        next = nl ? nl + 1 : NULL;
        lineno++;
        if (!c->header && is_meta_line(s)) {
            /* the header of tests/data: source, licence, role (tests/data/README.md) */
            const char *r = strstr(s, "role:");
            if (s == strstr(s, "# role:") && r) {
                r += 5;
                while (*r == ' ')
                    r++;
                size_t n = strcspn(r, " \r");
                if (n == 3 && !strncmp(r, "fit", 3))
                    c->role = REFDATA_FIT;
                else if (n == 8 && !strncmp(r, "held-out", 8))
                    c->role = REFDATA_HELD_OUT;
                else {
                    mp_status st = mp_error_set(err, MP_EINPUT, c->path, lineno, 0, "role",
                                                "expected fit or held-out");
                    csv_free(c);
                    return st;
                }
            }
            continue;
        }
        if (!c->header) {
            /* the header decides how many columns a row has */
            c->cols = 1;
            for (const char *p = s; *p; p++)
                c->cols += *p == ',';
            c->header = calloc((size_t)c->cols, sizeof *c->header);
            c->cell = calloc(lines * (size_t)c->cols, sizeof *c->cell);
            c->line = calloc(lines, sizeof *c->line);
            if (!c->header || !c->cell || !c->line) {
                csv_free(c);
                return mp_error_set(err, MP_ENOMEM, file, 0, 0, NULL, "out of memory");
            }
            split_line(s, c->header, c->cols);
            if (c->role == REFDATA_ROLE_NONE) {
                mp_status st = mp_error_set(err, MP_EINPUT, c->path, lineno, 0, "role",
                                            "no '# role: fit|held-out' line before the header "
                                            "(tests/data/README.md)");
                csv_free(c);
                return st;
            }
            continue;
        }
        if (s[0] == '\0' || (s[0] == '\r' && s[1] == '\0'))
            continue; /* blank lines (the last newline) are not rows */
        split_line(s, &c->cell[(size_t)c->rows * (size_t)c->cols], c->cols);
        c->line[c->rows++] = lineno;
    }
    return MP_OK;
}

static const char *cell(const csv *c, int r, int col)
{
    return col < c->cols ? c->cell[(size_t)r * (size_t)c->cols + (size_t)col] : NULL;
}

/* A number cell, strictly: a short line or "12x" is an error with its place,
 * not a silent 0 that would become a wrong configuration. */
static mp_status num(const csv *c, int r, int col, double *out, mp_error *err)
{
    const char *s = cell(c, r, col);
    const char *name = col < c->cols ? c->header[col] : "?";
    if (!s)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], 0, name,
                            "missing (the line has too few columns)");
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    while (end && isspace((unsigned char)*end))
        end++;
    if (end == s || !end || *end != '\0' || errno == ERANGE)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], col + 1, name,
                            "'%s' is not a number", s);
    *out = v;
    return MP_OK;
}

/* Reads the columns cols[0..n) of row r into v[0..n). */
static mp_status nums(const csv *c, int r, const int *cols, int n, double *v, mp_error *err)
{
    for (int i = 0; i < n; i++) {
        mp_status st = num(c, r, cols[i], &v[i], err);
        if (st != MP_OK)
            return st;
    }
    return MP_OK;
}

static mp_status text(const csv *c, int r, int col, const char **out, mp_error *err)
{
    *out = cell(c, r, col);
    if (!*out)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], 0,
                            col < c->cols ? c->header[col] : "?",
                            "missing (the line has too few columns)");
    return MP_OK;
}

/* The optional `stack` column of a line (after the file's own columns, from
 * first on, found by its header name so other appended columns may stand
 * before it): the software that ran it where it changes the cost (mp_stack).
 * Absent or empty: Megatron-LM. */
static mp_status stack_from(const csv *c, int r, int first, mp_stack *out, mp_error *err)
{
    *out = MP_STACK_MEGATRON_LM;
    for (int col = first; col < c->cols; col++) {
        if (strcmp(c->header[col], "stack") != 0)
            continue;
        const char *s = cell(c, r, col);
        if (!s || s[0] == '\0')
            return MP_OK;
        for (int k = 0; k < MP_STACK_COUNT; k++)
            if (strcmp(s, mp_stack_name((mp_stack)k)) == 0) {
                *out = (mp_stack)k;
                return MP_OK;
            }
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], col + 1, "stack",
                            "'%s' is not %s, %s, %s or %s", s, mp_stack_name(MP_STACK_MEGATRON_LM),
                            mp_stack_name(MP_STACK_BIGSCIENCE_MDS),
                            mp_stack_name(MP_STACK_MDS_2021),
                            mp_stack_name(MP_STACK_MEGATRON_LM_2021));
    }
    return MP_OK;
}

/* An optional 0/1 column of a runs file after its fixed ones (appended by
 * name, like stack): absent or empty is 0. */
static mp_status optional_flag(const csv *c, int r, int first, const char *name, bool *out,
                               mp_error *err)
{
    *out = false;
    for (int col = first; col < c->cols; col++) {
        if (strcmp(c->header[col], name) != 0)
            continue;
        const char *s = cell(c, r, col);
        if (!s || s[0] == '\0')
            return MP_OK;
        if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0)
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], col + 1, name,
                                "'%s' is not 0 or 1", s);
        *out = s[0] == '1';
        return MP_OK;
    }
    return MP_OK;
}

/* An optional text column named `name` among the appended ones: its cell,
 * or NULL where the file has no such column or leaves it empty. */
static const char *optional_text(const csv *c, int r, int first, const char *name, int *at)
{
    for (int col = first; col < c->cols; col++) {
        if (strcmp(c->header[col], name) != 0)
            continue;
        const char *s = cell(c, r, col);
        *at = col + 1;
        return s && s[0] ? s : NULL;
    }
    return NULL;
}

/* An optional whole-number column (ddp_bucket_size, in parameters): absent
 * or empty is 0 (Megatron's default), else a whole number from 1 to hi. */
static mp_status optional_count(const csv *c, int r, int first, const char *name, int64_t hi,
                                int64_t *out, mp_error *err)
{
    int at = 0;
    const char *s = optional_text(c, r, first, name, &at);
    *out = 0;
    if (!s)
        return MP_OK;
    if (!mp_parse_int64(s, out) || *out < 1 || *out > hi)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], at, name,
                            "'%s' is not a whole number from 1 to %lld", s, (long long)hi);
    return MP_OK;
}

/* The optional wgrad_deferral column of a runs file: Megatron-Core's
 * defer_embedding_wgrad_compute with its wgrad_deferral_limit, as the
 * recipe sets them: absent or empty, not deferred; "all", every
 * micro-batch's output-layer wgrad deferred (limit 0); N >= 1, the first N
 * micro-batches'. It needs a pipeline (pp > 1), as Megatron-Core does. */
static mp_status optional_deferral(const csv *c, int r, int first, int64_t pp, bool *on,
                                   int64_t *limit, mp_error *err)
{
    int at = 0;
    const char *s = optional_text(c, r, first, "wgrad_deferral", &at);
    *on = false;
    *limit = 0;
    if (!s)
        return MP_OK;
    if (strcmp(s, "all") != 0 && (!mp_parse_int64(s, limit) || *limit < 1 || *limit > 1 << 30))
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], at, "wgrad_deferral",
                            "'%s' is not all or a whole number of micro-batches from 1", s);
    if (pp < 2)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], at, "wgrad_deferral",
                            "'%s' without a pipeline (pp 1): Megatron-Core refuses "
                            "defer_embedding_wgrad_compute there", s);
    *on = true;
    return MP_OK;
}

/* An optional dropout probability column (hidden_dropout,
 * attention_dropout: the recipe's value, docs/formats.md): absent or empty
 * leaves *out (the model's own), else a number at least 0 and below 1. */
static mp_status optional_probability(const csv *c, int r, int first, const char *name,
                                      double *out, mp_error *err)
{
    int at = 0;
    const char *s = optional_text(c, r, first, name, &at);
    if (!s)
        return MP_OK;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v >= 0.0) || !(v < 1.0))
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], at, name,
                            "'%s' is not a probability (a number at least 0 and below 1)", s);
    *out = v;
    return MP_OK;
}

/* The optional account_for column of a runs file: which of the embedding and
 * the loss the recipe counts as a layer in the pipeline split (Megatron's
 * --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split).
 * Absent or empty is none. */
static mp_status optional_account_for(const csv *c, int r, int first, bool *embedding, bool *loss,
                                      int *at, mp_error *err)
{
    static const struct {
        const char *name;
        bool e, l;
    } names[] = {{"none", false, false},
                 {"embedding", true, false},
                 {"loss", false, true},
                 {"both", true, true}};
    *embedding = *loss = false;
    *at = 0;
    const char *s = optional_text(c, r, first, "account_for", at);
    if (!s)
        return MP_OK;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *embedding = names[i].e;
            *loss = names[i].l;
            return MP_OK;
        }
    return mp_error_set(err, MP_EINPUT, c->path, c->line[r], *at, "account_for",
                        "'%s' is not none, embedding, loss or both", s);
}

/* The optional cp_comm_type column of a runs file: how the recipe's context
 * parallelism exchanges K/V (Megatron-Core --cp-comm-type). Absent or empty
 * is p2p, Megatron-Core's default. */
static mp_status optional_cp_comm(const csv *c, int r, int first, mp_cp_comm *out, mp_error *err)
{
    int at = 0;
    *out = MP_CP_P2P;
    const char *s = optional_text(c, r, first, "cp_comm_type", &at);
    if (!s)
        return MP_OK;
    for (int k = 0; k < MP_CP_COMM_COUNT; k++)
        if (k != MP_CP_A2A_P2P && strcmp(s, mp_cp_comm_name((mp_cp_comm)k)) == 0) {
            *out = (mp_cp_comm)k;
            return MP_OK;
        }
    return mp_error_set(err, MP_EINPUT, c->path, c->line[r], at, "cp_comm_type",
                        "'%s' is not p2p, all_gather or a2a", s);
}

/* The optional attention_backend column of a runs file: the attention kernel
 * the recipe made Transformer Engine run (training.attention_backend): flash
 * where it sets NVTE_FUSED_ATTN=0 (NeMo-Framework-Launcher 24.07's
 * config.yaml), fused, or auto. Absent or empty is auto, TE's own choice. */
static mp_status optional_attn_backend(const csv *c, int r, int first, mp_attn_backend *out,
                                       mp_error *err)
{
    int at = 0;
    *out = MP_ATTN_AUTO;
    const char *s = optional_text(c, r, first, "attention_backend", &at);
    if (!s)
        return MP_OK;
    for (int k = 0; k < MP_ATTN_COUNT; k++)
        if (strcmp(s, mp_attn_backend_name((mp_attn_backend)k)) == 0) {
            *out = (mp_attn_backend)k;
            return MP_OK;
        }
    return mp_error_set(err, MP_EINPUT, c->path, c->line[r], at, "attention_backend",
                        "'%s' is not auto, flash or fused", s);
}

/* The optional cuda_graph_scope column of a runs file: the parts of each
 * layer the recipe runs as CUDA graphs, `+`-separated scope names of
 * parallel.cuda_graph_scope (a cell holds no comma). Absent or empty: none. */
static mp_status optional_cuda_graphs(const csv *c, int r, int first, uint32_t *out,
                                      mp_error *err)
{
    int at = 0;
    *out = 0;
    const char *s = optional_text(c, r, first, "cuda_graph_scope", &at);
    if (!s)
        return MP_OK;
    char list[128], bad[72];
    if (strlen(s) >= sizeof list)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], at, "cuda_graph_scope",
                            "too long: at most %zu characters", sizeof list - 1);
    snprintf(list, sizeof list, "%s", s);
    for (char *q = list; *q; q++)
        if (*q == '+')
            *q = ',';
    if (!mp_cuda_graph_scope_parse(list, out, bad, sizeof bad))
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], at, "cuda_graph_scope",
                            "unknown scope '%s'", bad);
    return MP_OK;
}

/* ---- configurations -------------------------------------------------------- */

/* GPT as Megatron builds it: MHA, 4h GeLU MLP, LayerNorm, learned positions
 * unless a set says otherwise. Returns 0, or -1 when the library refuses. */
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

/* The parallel settings a row gives or the set assumes. */
typedef struct par {
    int64_t gpus, gb, mb, t, p, v, d, cp;
    bool sp, dist_opt, dp_overlap, tp_overlap;
    mp_recompute rc;
    mp_dtype prec;
} par;

/* vpp 1 means 1F1B, more means interleaved 1F1B: the schedules of the runs. */
static void config_of(mp_config *c, const mp_model *m, const mp_hw *hw, const par *q)
{
    memset(c, 0, sizeof *c);
    c->model = *m;
    c->hw = *hw;
    c->training.gpus = q->gpus;
    c->training.seq = m->seq;
    c->training.global_batch = q->gb;
    c->training.precision = q->prec;
    c->parallel.tp = q->t;
    c->parallel.pp = q->p;
    c->parallel.vpp = q->v > 0 ? q->v : 1;
    c->parallel.cp = q->cp > 0 ? q->cp : 1;
    c->parallel.dp = q->d;
    c->parallel.sp = q->sp;
    c->parallel.micro_batch = q->mb;
    c->parallel.recompute = q->rc;
    c->parallel.dist_opt = q->dist_opt;
    c->parallel.dp_overlap = q->dp_overlap;
    c->parallel.tp_overlap = q->tp_overlap;
    c->parallel.schedule = c->parallel.vpp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B;
}

/* The published tables start alike: the model (name or billions of
 * parameters), heads, hidden, layers, tp, pp. Reads the number columns
 * 1..n-1 into v[1..n-1], the shape into a, h, L and the degrees into q. */
static mp_status published_cols(const csv *c, int r, int n, double *v, int64_t *a, int64_t *h,
                                int64_t *L, par *q, mp_error *err)
{
    for (int col = 1; col < n; col++) {
        mp_status st = num(c, r, col, &v[col], err);
        if (st != MP_OK)
            return st;
    }
    *a = (int64_t)v[1];
    *h = (int64_t)v[2];
    *L = (int64_t)v[3];
    memset(q, 0, sizeof *q);
    q->t = (int64_t)v[4];
    q->p = (int64_t)v[5];
    q->cp = 1;
    if (q->t < 1 || q->p < 1)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], 0, "tp/pp", "must be at least 1");
    return MP_OK;
}

/* published_cols of a table whose first column is the model's size in
 * billions of parameters (a number, into v[0]) rather than its name. */
static mp_status published_sized(const csv *c, int r, int n, double *v, int64_t *a, int64_t *h,
                                 int64_t *L, par *q, mp_error *err)
{
    mp_status st = published_cols(c, r, n, v, a, h, L, q, err);
    if (st == MP_OK)
        st = num(c, r, 0, &v[0], err);
    return st;
}

/* ---- data sets --------------------------------------------------------------- */

static const char note_vtrain_multi[] =
    "a100-4xhdr; Megatron-DeepSpeed GPT, vocab 50,257 (padded to 128t), fp16, full "
    "recompute, 1F1B, DP all-reduce of fp16 grads after the flush (no overlap), no "
    "distributed optimizer, no SP; the pipeline transfer partitioned over TP (DeepSpeed's "
    "pipeline engine).";
static const char note_vtrain_single[] = "as the multi-node set, inside one node.";
static const char note_narayanan[] =
    "dgx-a100; fp16, vocab 51,200, s 2048, full recompute, no SP, no distributed "
    "optimizer, DP not overlapped; stack megatron-lm-2021 (the paper's Megatron-LM "
    "predates the asynchronous backward TP all-reduce and gradient accumulation "
    "fusion). Not published, assumed: micro-batch 8 without pipelining (the fastest "
    "measured in both vTrain multi-node sweeps at p = 1) and 1 with it; interleaved "
    "1F1B with v = 2 where the layers per stage are even (else v = 1).";
static const char note_korthikanti[] =
    "dgx-a100; bf16, vocab 51,200, s 2048, no DP; 'this work' = SP + selective "
    "recompute, the other column full recompute; the pipeline transfer scattered over "
    "TP without SP (the Megatron-LM of 2022, --scatter-gather-tensors-in-pipeline).";
static const char note_korthikanti_layer[] =
    "dgx-a100; bf16; backward includes the recompute of that row.";
static const char note_megatron_core[] =
    "dgx-h100; bf16, s 4096, vocab 131,072, untied embeddings, RoPE. Not in the "
    "CSV, assumed after Megatron's published scripts: micro-batch 1, SP and TP "
    "comm overlap for t > 1, distributed optimizer with overlapped grad reduce and "
    "param gather, no recompute (selective if it would not fit), interleaving "
    "with the most chunks of at least 3 layers for p > 1.";
static const char note_mtnlg[] =
    "dgx-a100; bf16, vocab 51,200 (GPT-2's 50,257 padded for t = 8), s 2048, tied embeddings, "
    "learned positions, full recompute, 1F1B (DeepSpeed's pipeline engine), no SP, no "
    "distributed optimizer, DP not overlapped; stack megatron-deepspeed-2021 (backward TP "
    "all-reduces synchronous; the pipeline engine's partitioned transfers rebuilt over TP and "
    "its send and receive one after the other; autograd's in-place accumulation of the bf16 "
    "gradients). Not published, assumed: micro-batch 1.";
static const char note_bloom[] =
    "a100-opa = a100-4xhdr with Jean Zay's 4 x 100 Gb/s Omni-Path per node (6.25 GB/s per "
    "GPU); BigScience's Megatron-DeepSpeed GPT (stack megatron-deepspeed-bigscience: backward "
    "TP all-reduces synchronous; the pipeline engine's partitioned transfers rebuilt over TP and "
    "its send and receive one after the other; in the fp16 prequel, autograd's in-place "
    "gradient accumulation; in production, bf16, DeepSpeed's BF16 optimizer with its fp32 "
    "accumulation pass and fp32 DP all-reduce), ALiBi, tied embeddings, s 2048, full recompute, "
    "1F1B, no SP, ZeRO-1 as the distributed optimizer, DP not overlapped; production splits 70 "
    "blocks + 2 embeddings over 12 stages. Every setting is the CSV's own "
    "(tests/data/published/bigscience_bloom176b.csv).";
static const char note_nemo[] =
    "NVIDIA's published NeMo / Megatron-Bridge pre-training rows of dense models, FP8; the "
    "degrees and batches as published, the FP8 recipe as published or, for NeMo 25.02, as its "
    "scripts fix it (delayed scaling); as each row's recipe sets them (each file's "
    "recipe-settings notes): SP and TP overlap for t > 1 (no TP overlap on NeMo 24.07's GPT-3 "
    "175B on 128 GPUs, whose launcher config leaves it off), distributed optimizer with "
    "overlapped grad reduce and param gather, no recompute, no CPU offloading; Megatron-Bridge "
    "25.09's LLaMA 3 8B rows on B200 and GB200 and NeMo 25.04's GPT-3 175B and LLaMA 3 8B on "
    "GB200 run each layer as a CUDA graph (cuda_graph_scope); interleaved rows overlap their "
    "pipeline transfers (the recipes' overlap_p2p_comm: the files' p2p_overlap column) and "
    "the Megatron-Bridge and NeMo 25.04 rows compute the loss with Transformer Engine's fused "
    "cross entropy (te_cross_entropy), the NeMo 25.02 rows and NeMo 24.07's LLaMA 3 rows with "
    "Megatron-Core's native fused one (native_cross_entropy), "
    "and the 25.11 H100 FSDP row registers the DP buffers "
    "with NCCL (nccl_ub); NeMo 25.02/25.04's GPT-3 175B, LLaMA 3 70B and 405B rows and "
    "Megatron-Bridge 25.09's 70B and 405B rows with pp > 1 defer the output layer's "
    "weight-gradient GEMMs of their first 50 or 22 micro-batches to the pipeline flush "
    "(the recipes' defer_embedding_wgrad_compute: the files' wgrad_deferral column); the 25.11 "
    "MXFP8 LLaMA 3.1 405B row gathers its parameters after the optimizer step, its recipe "
    "turning the gather's overlap off (param_gather_sync); the LLaMA 3.1 405B rows split the "
    "layers as their recipes do, the embedding and the loss each counted as a layer "
    "(account_for: Megatron's --account-for-embedding-in-pipeline-split and "
    "--account-for-loss-in-pipeline-split; at pp 16, vp 8 an embedding-only and a loss-only "
    "virtual stage, one layer in every other); the interleaved rows of NeMo 25.02/25.04 and of "
    "Megatron-Bridge 25.11 and 26.x (not MXFP8) launch the first chunk's parameter all-gather "
    "in the optimizer step (param_gather_with_optimizer: "
    "--overlap-param-gather-with-optimizer-step); "
    "the NeMo 25.02/25.04 and Megatron-Bridge rows that run Megatron-Core's DDP with dp > 1 "
    "reduce and gather in their recipes' buckets of 128 x 1024^2 parameters (ddp_bucket_size: "
    "--ddp-bucket-size); "
    "the rows with cp > 1 run Transformer Engine's p2p ring, as their recipes leave "
    "--cp-comm-type at Megatron-Core's default (cp_comm_type); "
    "the GPT-3 175B rows whose recipes turn dropout off (MLPerf's configuration of NeMo 24.07, "
    "NeMo 25.02/25.04's GPTConfig175B) run without it (hidden_dropout and attention_dropout 0: "
    "no dropout masks, no dropout traffic); "
    "measured time = GBS x seq / (tokens/s/GPU x GPUs).";
static const char note_nccl[] =
    "vTrain's NCCL all-reduce sweeps inside one A100 node (a100-4xhdr's scale-up tier), "
    "1 MiB to 1 GiB; the time is the mean of the out-of-place and in-place runs.";

/* Room for every row a file can yield; the caller's set owns it. */
static mp_status rows_alloc(refdata_set *s, size_t n, mp_error *err)
{
    s->rows = calloc(n ? n : 1, sizeof *s->rows);
    if (!s->rows)
        return mp_error_set(err, MP_ENOMEM, s->file, 0, 0, NULL, "out of memory");
    return MP_OK;
}

static refdata_row *row_new(refdata_set *s, const csv *c, int r, refdata_kind kind)
{
    refdata_row *w = &s->rows[s->n];
    memset(w, 0, sizeof *w);
    w->set = s->id;
    w->line = c->line[r];
    w->index = r;
    w->hw_preset = s->hw_preset;
    w->kind = kind;
    w->variant = REFDATA_ONLY;
    w->note = s->note;
    return w;
}

/* One file of a data set of several (refdata_table_read_more), with room
 * for its rows after the set's. */
static mp_status set_file_read(const char *dir, const char *file, const char *first,
                               refdata_set *s, csv *c, mp_error *err)
{
    mp_status st = refdata_table_read_more(dir, file, first, &s->role, c, err);
    if (st != MP_OK)
        return st;
    refdata_row *grown = realloc(s->rows, ((size_t)s->n + (size_t)c->rows + 1) * sizeof *s->rows);
    if (!grown) {
        csv_free(c);
        return mp_error_set(err, MP_ENOMEM, file, 0, 0, NULL, "out of memory");
    }
    s->rows = grown;
    return MP_OK;
}

/* vTrain: gpus, global batch, micro batch, hidden, heads, layers, seq, t, d, p,
 * iteration ms; the multi-node file starts with billions of parameters. */
static mp_status vtrain(const csv *c, bool multi, const mp_hw *hw, refdata_set *s, mp_error *err)
{
    int off = multi ? 1 : 0;
    for (int r = 0; r < c->rows; r++) {
        int cols[11];
        double v[11], pb = 0;
        for (int i = 0; i < 11; i++)
            cols[i] = off + i;
        mp_status st = nums(c, r, cols, 11, v, err);
        if (st == MP_OK && multi)
            st = num(c, r, 0, &pb, err);
        if (st != MP_OK)
            return st;
        par q = {0};
        q.gpus = (int64_t)v[0];
        q.gb = (int64_t)v[1];
        q.mb = (int64_t)v[2];
        int64_t h = (int64_t)v[3], a = (int64_t)v[4];
        int64_t L = (int64_t)v[5], sq = (int64_t)v[6];
        q.t = (int64_t)v[7];
        q.d = (int64_t)v[8];
        q.p = (int64_t)v[9];
        double ms = v[10];
        q.v = 1;
        q.cp = 1;
        q.rc = MP_RECOMPUTE_FULL;
        q.prec = MP_DTYPE_FP16;
        mp_model m;
        if (gpt_model(&m, "gpt", L, h, a, sq, 50257, true) != 0) {
            s->skipped++;
            continue;
        }
        refdata_row *w = row_new(s, c, r, REFDATA_ITER_S);
        config_of(&w->config, &m, hw, &q);
        w->config.training.p2p_scatter = true; /* DeepSpeed's partitioned pipeline engine */
        snprintf(w->label, sizeof w->label, "h=%lld L=%lld gpus=%lld B=%lld b=%lld t=%lld d=%lld p=%lld",
                 (long long)h, (long long)L, (long long)q.gpus, (long long)q.gb, (long long)q.mb,
                 (long long)q.t, (long long)q.d, (long long)q.p);
        w->value = w->measured_s = ms / 1000.0;
        w->params_billion = pb;
        w->larger_model = multi ? pb > 10.0 : h > 1024;
        s->n++;
    }
    return MP_OK;
}

/* Narayanan 2021 Table 1: throughput per GPU by the paper's own FLOPs formula
 * 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), so measured time = F / (tflops * gpus). */
static mp_status narayanan(const csv *c, const mp_hw *hw, refdata_set *s, mp_error *err)
{
    for (int r = 0; r < c->rows; r++) {
        double v[9];
        int64_t a, h, L;
        par q;
        mp_status st = published_sized(c, r, 9, v, &a, &h, &L, &q, err);
        if (st != MP_OK)
            return st;
        double pb = v[0];
        q.gpus = (int64_t)v[6];
        q.gb = (int64_t)v[7];
        double tflops = v[8];
        q.d = q.gpus / (q.t * q.p);
        q.prec = MP_DTYPE_FP16;
        q.rc = MP_RECOMPUTE_FULL;
        /* not published (the note): micro-batch 1 with pipelining, else 8,
         * the fastest micro-batch of both measured vTrain multi-node sweeps at
         * p = 1 (fit data: 3.6B at t 1 and 18.4B at t 8, the same GPT on A100;
         * docs/validation.md, Protocol, entry of 2026-12-02); two virtual
         * stages where the layers per stage are even */
        q.mb = q.p > 1 ? 1 : 8;
        q.v = 1;
        if (q.p > 1)
            q.v = (L / q.p) % 2 == 0 ? 2 : 1;
        int64_t sq = 2048, V = 51200;
        mp_model m;
        if (gpt_model(&m, "gpt", L, h, a, sq, V, true) != 0) {
            s->skipped++;
            continue;
        }
        double F = 96.0 * (double)q.gb * (double)sq * (double)L * (double)h * (double)h *
                   (1.0 + (double)sq / (6.0 * (double)h) + (double)V / (16.0 * (double)L * (double)h));
        refdata_row *w = row_new(s, c, r, REFDATA_TFLOPS_NARAYANAN);
        config_of(&w->config, &m, hw, &q);
        /* the code of the paper's runs (arXiv 2104.04473, April 2021): before
         * 16c90445 (2021-09-02, asynchronous backward TP all-reduce) and
         * 83b1e42f (2022-02-13, gradient accumulation fusion); docs/cost-model.md §5 */
        w->config.training.stack = MP_STACK_MEGATRON_LM_2021;
        snprintf(w->label, sizeof w->label, "%.1fB t=%lld p=%lld gpus=%lld B=%lld (b=%lld v=%lld)", pb,
                 (long long)q.t, (long long)q.p, (long long)q.gpus, (long long)q.gb, (long long)q.mb,
                 (long long)q.v);
        w->value = tflops;
        w->measured_s = F / (tflops * 1e12 * (double)q.gpus);
        w->params_billion = pb;
        w->open = REFDATA_OPEN_MICRO_BATCH | REFDATA_OPEN_VPP;
        s->n++;
    }
    return MP_OK;
}

/* Korthikanti 2022 Tables 3/5: each line is two measured runs, full
 * recompute (column 10) and SP + selective recompute (column 11). */
static mp_status korthikanti(const csv *c, const mp_hw *hw, refdata_set *s, mp_error *err)
{
    for (int r = 0; r < c->rows; r++) {
        double v[12];
        int64_t a, h, L;
        par q;
        const char *name = NULL;
        mp_status st = published_cols(c, r, 12, v, &a, &h, &L, &q, err);
        if (st == MP_OK)
            st = text(c, r, 0, &name, err);
        if (st != MP_OK)
            return st;
        q.gpus = (int64_t)v[6];
        q.gb = (int64_t)v[7];
        q.mb = (int64_t)v[8];
        q.v = (int64_t)v[9];
        q.d = q.gpus / (q.t * q.p);
        q.prec = MP_DTYPE_BF16;
        mp_model m;
        if (gpt_model(&m, name, L, h, a, 2048, 51200, true) != 0) {
            s->skipped++;
            continue;
        }
        for (int k = 0; k < 2; k++) {
            q.sp = k == 1;
            q.rc = k == 1 ? MP_RECOMPUTE_SELECTIVE : MP_RECOMPUTE_FULL;
            refdata_row *w = row_new(s, c, r, REFDATA_ITER_S);
            w->variant = k ? REFDATA_SP_SELECTIVE : REFDATA_FULL_RECOMPUTE;
            config_of(&w->config, &m, hw, &q);
            /* the Megatron-LM of 2022 scattered the pipeline transfer over TP */
            w->config.training.p2p_scatter = true;
            snprintf(w->label, sizeof w->label, "%s t=%lld p=%lld v=%lld B=%lld b=%lld, %s", name,
                     (long long)q.t, (long long)q.p, (long long)q.v, (long long)q.gb, (long long)q.mb,
                     k ? "SP + selective" : "full recompute");
            w->value = w->measured_s = v[k ? 11 : 10];
            s->n++;
        }
    }
    return MP_OK;
}

/* Table 4: one 22B layer (h 6144, a 64, s 2048, b 4, t 8): forward and
 * backward ms; the experiment's name says SP and which recompute. */
static mp_status korthikanti_layer(const csv *c, const mp_hw *hw, refdata_set *s, mp_error *err)
{
    mp_model m;
    if (gpt_model(&m, "22B", 48, 6144, 64, 2048, 51200, true) != 0)
        return mp_error_set(err, MP_EINTERNAL, c->path, 0, 0, "model",
                            "the 22B model of Table 4 was refused");
    for (int r = 0; r < c->rows; r++) {
        static const int cols[2] = {1, 2};
        double v[2];
        const char *x = NULL;
        mp_status st = nums(c, r, cols, 2, v, err);
        if (st == MP_OK)
            st = text(c, r, 0, &x, err);
        if (st != MP_OK)
            return st;
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
        for (int k = 0; k < 2; k++) {
            refdata_row *w = row_new(s, c, r, REFDATA_LAYER_S);
            w->variant = k ? REFDATA_BACKWARD : REFDATA_FORWARD;
            w->config = cf;
            snprintf(w->label, sizeof w->label, "%s %s", x, k ? "backward" : "forward");
            w->value = w->measured_s = v[k] / 1000.0;
            s->n++;
        }
    }
    return MP_OK;
}

/* Megatron-Core 2024 weak scaling on H100: MFU by Megatron's 72 B s L h^2 (...)
 * formula, so measured time = model FLOPs / (tflops * gpus). */
static mp_status megatron_core(const csv *c, const mp_hw *hw, refdata_set *s, mp_error *err)
{
    for (int r = 0; r < c->rows; r++) {
        double v[10];
        int64_t a, h, L;
        par q;
        mp_status st = published_sized(c, r, 10, v, &a, &h, &L, &q, err);
        if (st != MP_OK)
            return st;
        double pb = v[0];
        q.d = (int64_t)v[6];
        q.gpus = (int64_t)v[7];
        q.gb = (int64_t)v[8];
        double tflops = v[9];
        q.mb = 1;
        q.sp = q.t > 1;
        q.dist_opt = true;
        q.dp_overlap = true;
        q.tp_overlap = q.t > 1;
        q.prec = MP_DTYPE_BF16;
        q.rc = MP_RECOMPUTE_NONE;
        q.v = 1;
        if (q.p > 1 && q.d > 0) {
            /* interleaving with the most chunks of >= 3 layers, when the
             * micro-batches per replica divide into the stages */
            int64_t per = L / q.p;
            for (int64_t x = per; x >= 1; x--)
                if (per % x == 0 && per / x >= 3 && (q.gb / (q.mb * q.d)) % q.p == 0) {
                    q.v = x;
                    break;
                }
        }
        mp_model m;
        if (gpt_model(&m, "gpt", L, h, a, 4096, 131072, false) != 0) {
            s->skipped++;
            continue;
        }
        m.position = MP_POS_ROPE;
        refdata_row *w = row_new(s, c, r, REFDATA_TFLOPS_MODEL);
        config_of(&w->config, &m, hw, &q);
        /* Megatron-LM overlaps the interleaved schedule's p2p unless told
         * not to (core_r0.8.0 megatron/training/arguments.py line 1405,
         * --no-overlap-p2p-communication store_false, the default since
         * 4eeff55d1f of 2023-10-12), and refuses interleaving without the
         * overlap below pp 3 (line 262): the p 2 v 14 row cannot have run
         * synchronous transfers */
        w->config.parallel.p2p_overlap = w->config.parallel.vpp > 1;
        /* "selective if it would not fit": the one assumption that needs the
         * cost model. A refused configuration stays as it is; the programs
         * estimate it and report the refusal. */
        mp_estimate e;
        mp_error ignored;
        if (mp_estimate_config(&w->config, NULL, &e, &ignored) == MP_OK && !e.fits)
            w->config.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
        snprintf(w->label, sizeof w->label, "%.1fB t=%lld p=%lld d=%lld B=%lld (b=1 v=%lld %s)", pb,
                 (long long)q.t, (long long)q.p, (long long)q.d, (long long)q.gb,
                 (long long)w->config.parallel.vpp, mp_recompute_name(w->config.parallel.recompute));
        w->value = tflops;
        w->measured_s = mp_model_flops(&m, m.seq, q.gb) / (tflops * 1e12 * (double)q.gpus);
        w->params_billion = pb;
        s->n++;
    }
    return MP_OK;
}

/* MT-NLG 530B (Smith et al. 2022, Section 2.4): three iteration times of the
 * same model and degrees at three data-parallel sizes. */
static mp_status mtnlg(const csv *c, const mp_hw *hw, refdata_set *s, mp_error *err)
{
    for (int r = 0; r < c->rows; r++) {
        double v[9];
        int64_t a, h, L;
        par q;
        mp_status st = published_sized(c, r, 9, v, &a, &h, &L, &q, err);
        if (st != MP_OK)
            return st;
        q.gpus = (int64_t)v[6];
        q.gb = (int64_t)v[7];
        q.d = q.gpus / (q.t * q.p);
        q.mb = 1;
        q.v = 1;
        q.prec = MP_DTYPE_BF16;
        q.rc = MP_RECOMPUTE_FULL;
        mp_model m;
        if (gpt_model(&m, "mt-nlg", L, h, a, 2048, 51200, true) != 0) {
            s->skipped++;
            continue;
        }
        mp_stack stack;
        st = stack_from(c, r, 9, &stack, err);
        if (st != MP_OK)
            return st;
        refdata_row *w = row_new(s, c, r, REFDATA_ITER_S);
        config_of(&w->config, &m, hw, &q);
        w->config.training.stack = stack;
        snprintf(w->label, sizeof w->label, "%.0fB t=%lld p=%lld d=%lld gpus=%lld B=%lld (b=1)", v[0],
                 (long long)q.t, (long long)q.p, (long long)q.d, (long long)q.gpus, (long long)q.gb);
        w->value = w->measured_s = v[8];
        w->params_billion = v[0];
        w->open = REFDATA_OPEN_MICRO_BATCH;
        s->n++;
    }
    return MP_OK;
}

/* NCCL all-reduce sweeps: size (B), count, type, time (ns), busbw, then the
 * in-place time (ns), busbw; one file per group size 2, 4, 8. */
static mp_status nccl(const char *dir, const mp_hw *hw, refdata_set *s, mp_error *err)
{
    for (int g = 2; g <= 8; g *= 2) {
        char f[64];
        snprintf(f, sizeof f, "vtrain/a100_nvlink_allreduce_%dgpu.csv", g);
        csv c;
        mp_status st = set_file_read(dir, f, g > 2 ? "the 2-GPU sweep" : NULL, s, &c, err);
        if (st != MP_OK)
            return st;
        for (int r = 0; r < c.rows; r++) {
            static const int cols[3] = {0, 3, 5};
            double v[3];
            st = nums(&c, r, cols, 3, v, err);
            if (st != MP_OK) {
                csv_free(&c);
                return st;
            }
            refdata_row *w = row_new(s, &c, r, REFDATA_ALLREDUCE_S);
            w->config.hw = *hw;
            w->config.training.gpus = g;
            w->bytes = v[0];
            snprintf(w->label, sizeof w->label, "%d GPUs, %.0f MiB", g, v[0] / 1048576.0);
            double ns = 0.5 * (v[1] + v[2]);
            w->value = w->measured_s = ns * 1e-9;
            s->n++;
        }
        csv_free(&c);
    }
    return MP_OK;
}


/* ---- the runs format (the BLOOM and NeMo files of tests/data/published) ------------------------ */

/* One line is one published run with every setting in its own column
 * (tests/data/README.md, "The runs format"): run label, system, model (a
 * megaplan preset, or "gpt" with the shape columns), seq, GPUs, the degrees,
 * micro and global batch, precision and FP8 recipe, recompute, SP,
 * distributed optimizer, ZeRO stage, DP and TP overlap, gradients reduced
 * in bf16 and FP8 parameters (the recipe's grad_reduce_in_fp32 = False and
 * fp8_param_gather), then what was measured (metric, value); metric "excluded" keeps a published run that
 * megaplan cannot express in the file, with the reason in its note, and
 * counts it in the set's skipped. */
enum {
    RUN_LABEL, RUN_SYSTEM, RUN_MODEL, RUN_LAYERS, RUN_HIDDEN, RUN_HEADS, RUN_VOCAB, RUN_SEQ,
    RUN_GPUS, RUN_TP, RUN_PP, RUN_CP, RUN_VP, RUN_DP, RUN_MB, RUN_GB, RUN_PRECISION,
    RUN_FP8_RECIPE, RUN_RECOMPUTE, RUN_SP, RUN_DIST_OPT, RUN_ZERO, RUN_DP_OVERLAP,
    RUN_TP_OVERLAP, RUN_GRAD_REDUCE_BF16, RUN_FP8_PARAM_GATHER, RUN_METRIC, RUN_VALUE, RUN_COLS
};

/* The profiles the data files derive from a built-in one by a published
 * hardware difference (never a fitted factor). Jean Zay's A100 partition has
 * 4 x 100 Gb/s Omni-Path per node of 8 GPUs (BLOOM paper, arXiv:2211.05100,
 * Section 3.4): a100-4xhdr with half its scale-out rate. */
static const struct {
    const char *name, *preset, *key, *value;
} derived_profiles[] = {{"a100-opa", "a100-4xhdr", "scale_out.bw_per_gpu", "6.25 GB/s"}};

enum { MAX_OVERRIDES = 64 };
static struct {
    char profile[64], key[96], value[1024];
} overrides[MAX_OVERRIDES];
static int n_overrides;

static mp_status apply_overrides(const char *name, mp_hw *hw, mp_error *err)
{
    for (int i = 0; i < n_overrides; i++)
        if (strcmp(overrides[i].profile, name) == 0) {
            mp_status st = mp_hw_set_field(hw, overrides[i].key, overrides[i].value, err);
            if (st != MP_OK)
                return st;
        }
    return MP_OK;
}

mp_status refdata_hw(const char *name, mp_hw *hw, mp_error *err)
{
    for (size_t i = 0; i < sizeof derived_profiles / sizeof derived_profiles[0]; i++)
        if (strcmp(name, derived_profiles[i].name) == 0) {
            mp_status st = refdata_hw(derived_profiles[i].preset, hw, err);
            if (st == MP_OK)
                st = mp_hw_set_field(hw, derived_profiles[i].key, derived_profiles[i].value, err);
            if (st == MP_OK)
                snprintf(hw->name, sizeof hw->name, "%s", derived_profiles[i].name);
            return st == MP_OK ? apply_overrides(name, hw, err) : st;
        }
    mp_status st = mp_hw_preset(name, hw, err);
    return st == MP_OK ? apply_overrides(name, hw, err) : st;
}

mp_status refdata_override_add(const char *profile, const char *key, const char *value,
                               mp_error *err)
{
    if (n_overrides == MAX_OVERRIDES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, key, "more than %d overrides",
                            MAX_OVERRIDES);
    if (strlen(profile) >= sizeof overrides[0].profile || strlen(key) >= sizeof overrides[0].key ||
        strlen(value) >= sizeof overrides[0].value)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, key, "'%s=%s' is too long", key, value);
    mp_hw scratch;
    mp_status st = refdata_hw(profile, &scratch, err); /* the profile exists */
    if (st == MP_OK)
        st = mp_hw_set_field(&scratch, key, value, err); /* the key and value parse */
    if (st != MP_OK)
        return st;
    snprintf(overrides[n_overrides].profile, sizeof overrides[0].profile, "%s", profile);
    snprintf(overrides[n_overrides].key, sizeof overrides[0].key, "%s", key);
    snprintf(overrides[n_overrides].value, sizeof overrides[0].value, "%s", value);
    n_overrides++;
    return MP_OK;
}

/* The system column of a runs file: a built-in or derived profile. */
static mp_status run_system(const csv *c, int r, const char *name, mp_hw *hw, mp_error *err)
{
    mp_error why;
    if (refdata_hw(name, hw, &why) != MP_OK)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], RUN_SYSTEM + 1, "system",
                            "'%s' is not a built-in profile or a100-opa (%s)", name, why.msg);
    return MP_OK;
}

static mp_status run_dtype(const csv *c, int r, const char *s, mp_dtype *out, mp_error *err)
{
    static const struct {
        const char *name;
        mp_dtype t;
    } names[] = {{"bf16", MP_DTYPE_BF16}, {"fp16", MP_DTYPE_FP16}, {"fp8", MP_DTYPE_FP8}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].t;
            return MP_OK;
        }
    return mp_error_set(err, MP_EINPUT, c->path, c->line[r], RUN_PRECISION + 1, "precision",
                        "'%s' is not bf16, fp16 or fp8", s);
}

/* An empty cell is "the preset's" (the shape columns) or 0. */
static mp_status num_or_zero(const csv *c, int r, int col, double *out, mp_error *err)
{
    const char *s = cell(c, r, col);
    if (s && s[0] == '\0') {
        *out = 0;
        return MP_OK;
    }
    return num(c, r, col, out, err);
}

/* The model of a runs line: a preset with the line's seq, or Megatron's GPT
 * with the line's shape (BLOOM: ALiBi, i.e. no position table; megaplan's
 * "relative" position is a bias on the scores, as ALiBi is). */
static mp_status run_model(const csv *c, int r, const char *name, const double *v, mp_model *m,
                           bool *refused, mp_error *err)
{
    *refused = false;
    if (strcmp(name, "gpt") == 0) {
        if (v[RUN_LAYERS] < 1 || v[RUN_HIDDEN] < 1 || v[RUN_HEADS] < 1 || v[RUN_VOCAB] < 1)
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], 0, "layers/hidden/heads/vocab",
                                "model gpt needs its shape");
        if (gpt_model(m, "gpt", (int64_t)v[RUN_LAYERS], (int64_t)v[RUN_HIDDEN], (int64_t)v[RUN_HEADS],
                      (int64_t)v[RUN_SEQ], (int64_t)v[RUN_VOCAB], true) != 0)
            *refused = true;
        m->position = MP_POS_RELATIVE;
        return MP_OK;
    }
    const mp_model *pre = mp_model_preset(name);
    if (!pre)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], RUN_MODEL + 1, "model",
                            "'%s' is not a model preset or gpt", name);
    *m = *pre;
    m->seq = (int64_t)v[RUN_SEQ];
    mp_error ignored;
    *refused = mp_model_finish(m, &ignored) != MP_OK;
    return MP_OK;
}

/* The preset table's own (static) spelling of a built-in profile's name, for
 * a row's hw_preset; fallback when system names none. */
static const char *preset_name(const char *system, const char *fallback)
{
    for (int k = 0; k < mp_hw_preset_count(); k++)
        if (strcmp(mp_hw_preset_name(k), system) == 0)
            return mp_hw_preset_name(k);
    return fallback;
}

/* The degrees and batch of a line (v: its numbers by column; col: the
 * columns of gpus, tp, pp, cp, vp, dp, micro_batch, global_batch, sp,
 * dist_opt, dp_overlap, tp_overlap, in that order), checked: every degree
 * at least 1 and tp x pp x cp x dp the GPUs. */
enum { PC_GPUS, PC_TP, PC_PP, PC_CP, PC_VP, PC_DP, PC_MB, PC_GB, PC_SP, PC_DIST_OPT,
       PC_DP_OVERLAP, PC_TP_OVERLAP, PC_COUNT };

static mp_status par_of_line(const csv *c, int r, const double *v, const int *col, par *q,
                             mp_error *err)
{
    memset(q, 0, sizeof *q);
    q->gpus = (int64_t)v[col[PC_GPUS]];
    q->t = (int64_t)v[col[PC_TP]];
    q->p = (int64_t)v[col[PC_PP]];
    q->cp = (int64_t)v[col[PC_CP]];
    q->v = (int64_t)v[col[PC_VP]];
    q->d = (int64_t)v[col[PC_DP]];
    q->mb = (int64_t)v[col[PC_MB]];
    q->gb = (int64_t)v[col[PC_GB]];
    q->sp = v[col[PC_SP]] != 0;
    q->dist_opt = v[col[PC_DIST_OPT]] != 0;
    q->dp_overlap = v[col[PC_DP_OVERLAP]] != 0;
    q->tp_overlap = v[col[PC_TP_OVERLAP]] != 0;
    if (q->t < 1 || q->p < 1 || q->cp < 1 || q->v < 1 || q->d < 1 || q->mb < 1 || q->gb < 1)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], 0,
                            "tp/pp/cp/vp/dp/micro_batch/global_batch", "must be at least 1");
    if (q->t * q->p * q->cp * q->d != q->gpus)
        return mp_error_set(err, MP_EINPUT, c->path, c->line[r], col[PC_DP] + 1, "dp",
                            "tp*pp*cp*dp = %lld, not the %lld GPUs",
                            (long long)(q->t * q->p * q->cp * q->d), (long long)q->gpus);
    return MP_OK;
}

static mp_status runs_file(const csv *c, refdata_set *s, mp_error *err)
{
    if (c->cols < RUN_COLS)
        return mp_error_set(err, MP_EINPUT, c->path, 0, 0, "header",
                            "%d columns, the runs format has %d (tests/data/README.md)", c->cols,
                            (int)RUN_COLS);
    for (int r = 0; r < c->rows; r++) {
        double v[RUN_COLS] = {0};
        static const int number_cols[] = {RUN_LAYERS, RUN_HIDDEN, RUN_HEADS, RUN_VOCAB};
        mp_status st = MP_OK;
        for (size_t i = 0; i < sizeof number_cols / sizeof number_cols[0] && st == MP_OK; i++)
            st = num_or_zero(c, r, number_cols[i], &v[number_cols[i]], err);
        for (int col = RUN_SEQ; col <= RUN_GB && st == MP_OK; col++)
            st = num(c, r, col, &v[col], err);
        for (int col = RUN_SP; col <= RUN_FP8_PARAM_GATHER && st == MP_OK; col++)
            st = num(c, r, col, &v[col], err);
        if (st == MP_OK)
            st = num(c, r, RUN_VALUE, &v[RUN_VALUE], err);
        const char *label = NULL, *system = NULL, *model = NULL, *prec = NULL, *recipe = NULL,
                   *rc = NULL, *metric = NULL;
        if (st == MP_OK) st = text(c, r, RUN_LABEL, &label, err);
        if (st == MP_OK) st = text(c, r, RUN_SYSTEM, &system, err);
        if (st == MP_OK) st = text(c, r, RUN_MODEL, &model, err);
        if (st == MP_OK) st = text(c, r, RUN_PRECISION, &prec, err);
        if (st == MP_OK) st = text(c, r, RUN_FP8_RECIPE, &recipe, err);
        if (st == MP_OK) st = text(c, r, RUN_RECOMPUTE, &rc, err);
        if (st == MP_OK) st = text(c, r, RUN_METRIC, &metric, err);
        if (st != MP_OK)
            return st;
        static const int pcols[PC_COUNT] = {RUN_GPUS, RUN_TP, RUN_PP, RUN_CP, RUN_VP, RUN_DP,
                                            RUN_MB, RUN_GB, RUN_SP, RUN_DIST_OPT,
                                            RUN_DP_OVERLAP, RUN_TP_OVERLAP};
        par q;
        st = par_of_line(c, r, v, pcols, &q, err);
        if (st != MP_OK)
            return st;
        int rcv = mp_recompute_parse(rc);
        if (rcv < 0)
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], RUN_RECOMPUTE + 1, "recompute",
                                "'%s' is not a recompute mode", rc);
        q.rc = (mp_recompute)rcv;
        st = run_dtype(c, r, prec, &q.prec, err);
        if (st != MP_OK)
            return st;
        int fp8 = MP_FP8_DELAYED;
        if (q.prec == MP_DTYPE_FP8) {
            for (fp8 = 0; fp8 < MP_FP8_RECIPE_COUNT; fp8++)
                if (strcmp(recipe, mp_fp8_recipe_name((mp_fp8_recipe)fp8)) == 0)
                    break;
            if (fp8 == MP_FP8_RECIPE_COUNT)
                return mp_error_set(err, MP_EINPUT, c->path, c->line[r], RUN_FP8_RECIPE + 1,
                                    "fp8_recipe", "'%s' is not an FP8 recipe", recipe);
        }
        refdata_kind kind;
        if (strcmp(metric, "excluded") == 0) {
            /* a published run megaplan cannot express (its note says why) */
            s->skipped++;
            continue;
        }
        if (strcmp(metric, "iter_s") == 0)
            kind = REFDATA_ITER_S;
        else if (strcmp(metric, "tokens_per_s_per_gpu") == 0)
            kind = REFDATA_TOKENS_PER_GPU;
        else
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], RUN_METRIC + 1, "metric",
                                "'%s' is not iter_s, tokens_per_s_per_gpu or excluded", metric);
        if (v[RUN_VALUE] <= 0)
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], RUN_VALUE + 1, "value",
                                "must be positive");
        mp_hw hw;
        st = run_system(c, r, system, &hw, err);
        mp_stack stack = MP_STACK_MEGATRON_LM;
        if (st == MP_OK)
            st = stack_from(c, r, RUN_COLS, &stack, err);
        bool p2p_overlap = false, te_ce = false, native_ce = false, nccl_ub = false, pg_sync = false,
             pg_opt = false, acct_e = false, acct_l = false;
        int acct_col = 0;
        if (st == MP_OK)
            st = optional_flag(c, r, RUN_COLS, "p2p_overlap", &p2p_overlap, err);
        if (st == MP_OK)
            st = optional_flag(c, r, RUN_COLS, "te_cross_entropy", &te_ce, err);
        if (st == MP_OK)
            st = optional_flag(c, r, RUN_COLS, "native_cross_entropy", &native_ce, err);
        if (st == MP_OK && te_ce && native_ce)
            st = mp_error_set(err, MP_EINPUT, c->path, c->line[r], 0, "native_cross_entropy",
                              "a row's loss is Megatron-Core's native fused cross entropy or "
                              "Transformer Engine's (te_cross_entropy), not both");
        if (st == MP_OK)
            st = optional_flag(c, r, RUN_COLS, "nccl_ub", &nccl_ub, err);
        if (st == MP_OK)
            st = optional_flag(c, r, RUN_COLS, "param_gather_sync", &pg_sync, err);
        if (st == MP_OK)
            st = optional_flag(c, r, RUN_COLS, "param_gather_with_optimizer", &pg_opt, err);
        if (st == MP_OK)
            st = optional_account_for(c, r, RUN_COLS, &acct_e, &acct_l, &acct_col, err);
        int64_t bucket = 0;
        if (st == MP_OK)
            st = optional_count(c, r, RUN_COLS, "ddp_bucket_size", MP_DDP_BUCKET_MAX, &bucket,
                                err);
        mp_cp_comm cp_comm = MP_CP_P2P;
        if (st == MP_OK)
            st = optional_cp_comm(c, r, RUN_COLS, &cp_comm, err);
        uint32_t graphs = 0;
        if (st == MP_OK)
            st = optional_cuda_graphs(c, r, RUN_COLS, &graphs, err);
        bool defer = false;
        int64_t defer_limit = 0;
        if (st == MP_OK)
            st = optional_deferral(c, r, RUN_COLS, (int64_t)v[RUN_PP], &defer, &defer_limit,
                                   err);
        if (st != MP_OK)
            return st;
        /* Megatron-Core refuses a layout with the account-for flags
         * (transformer_config.py __post_init__), and the optimizer-step gather
         * is the overlapped gather's (arguments.py): a row that says both
         * contradicts itself */
        int layout_col = 0;
        const char *layout = optional_text(c, r, RUN_COLS, "pipeline_layout", &layout_col);
        if (layout && (acct_e || acct_l))
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], acct_col, "account_for",
                                "'%s' with a pipeline_layout: Megatron-Core refuses "
                                "--pipeline-model-parallel-layout with the account-for flags; "
                                "give one of the two",
                                cell(c, r, acct_col - 1));
        if (pg_opt && pg_sync) {
            int col = 0;
            (void)optional_text(c, r, RUN_COLS, "param_gather_with_optimizer", &col);
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], col,
                                "param_gather_with_optimizer",
                                "1 with param_gather_sync 1: the gather under the optimizer "
                                "step is the overlapped gather's (--overlap-param-gather)");
        }
        mp_model m;
        bool refused;
        st = run_model(c, r, model, v, &m, &refused, err);
        if (st != MP_OK)
            return st;
        if (refused) {
            s->skipped++;
            continue;
        }
        /* the recipe's dropout where the file pins it (else the model's:
         * its family's default) */
        m.hidden_dropout = mp_model_hidden_dropout(&m);
        m.attention_dropout = mp_model_attention_dropout(&m);
        m.dropout_set = true;
        mp_attn_backend attn_backend = MP_ATTN_AUTO;
        st = optional_attn_backend(c, r, RUN_COLS, &attn_backend, err);
        if (st != MP_OK)
            return st;
        st = optional_probability(c, r, RUN_COLS, "hidden_dropout", &m.hidden_dropout, err);
        if (st == MP_OK)
            st = optional_probability(c, r, RUN_COLS, "attention_dropout", &m.attention_dropout,
                                      err);
        if (st != MP_OK)
            return st;
        refdata_row *w = row_new(s, c, r, kind);
        config_of(&w->config, &m, &hw, &q);
        w->config.training.fp8_recipe = (mp_fp8_recipe)fp8;
        w->config.training.grad_reduce_bf16 = v[RUN_GRAD_REDUCE_BF16] != 0;
        w->config.training.fp8_param_gather = v[RUN_FP8_PARAM_GATHER] != 0 && q.prec == MP_DTYPE_FP8;
        w->config.parallel.zero = (int64_t)v[RUN_ZERO];
        w->config.training.stack = stack;
        w->config.parallel.p2p_overlap = p2p_overlap;
        w->config.training.te_cross_entropy = te_ce;
        w->config.training.native_cross_entropy = native_ce;
        w->config.parallel.nccl_ub = nccl_ub;
        w->config.parallel.param_gather_sync = pg_sync;
        w->config.parallel.overlap_param_gather_with_optimizer_step = pg_opt;
        w->config.parallel.account_for_embedding = acct_e;
        w->config.parallel.account_for_loss = acct_l;
        w->config.parallel.ddp_bucket_size = bucket;
        w->config.parallel.cp_comm_type = cp_comm;
        w->config.training.attention_backend = attn_backend;
        w->config.parallel.cuda_graph_scope = graphs;
        w->config.parallel.defer_embedding_wgrad = defer;
        w->config.parallel.wgrad_deferral_limit = defer_limit;
        /* the recipe's split of the layers over the virtual stages, in
         * Megatron-Core's --pipeline-model-parallel-layout grammar */
        if (layout) {
            if (strlen(layout) >= sizeof w->config.parallel.pipeline_layout)
                return mp_error_set(err, MP_EINPUT, c->path, c->line[r], layout_col,
                                    "pipeline_layout",
                                    "too long: at most %zu characters",
                                    sizeof w->config.parallel.pipeline_layout - 1);
            snprintf(w->config.parallel.pipeline_layout, sizeof w->config.parallel.pipeline_layout,
                     "%s", layout);
        }
        /* the row's own profile (static names: the preset table's, or the set's) */
        w->hw_preset = preset_name(system, w->hw_preset);
        snprintf(w->label, sizeof w->label, "%s: %s t=%lld p=%lld cp=%lld v=%lld d=%lld b=%lld B=%lld %s%s",
                 label, system, (long long)q.t, (long long)q.p, (long long)q.cp, (long long)q.v,
                 (long long)q.d, (long long)q.mb, (long long)q.gb, prec,
                 w->config.parallel.zero >= 3 ? " FSDP" : "");
        w->value = v[RUN_VALUE];
        w->measured_s = kind == REFDATA_ITER_S
                            ? v[RUN_VALUE]
                            : (double)q.gb * (double)m.seq / (v[RUN_VALUE] * (double)q.gpus);
        s->n++;
    }
    return MP_OK;
}

/* A runs-format data set: its files, each with the same role. */
static mp_status runs(const char *dir, const char *const *files, refdata_set *s, mp_error *err)
{
    for (int f = 0; files[f]; f++) {
        csv c;
        mp_status st = set_file_read(dir, files[f], f > 0 ? files[0] : NULL, s, &c, err);
        if (st != MP_OK)
            return st;
        int first = s->n;
        st = runs_file(&c, s, err);
        for (int r = first; r < s->n; r++)
            s->rows[r].file = files[f]; /* a set of several files: name the row's own */
        csv_free(&c);
        if (st != MP_OK)
            return st;
    }
    return MP_OK;
}

/* Megatron-LM's CI (megatron_ci/golden_values.csv): one row per measured
 * golden-values file; rows whose compare column is not "yes" are recorded,
 * not compared (counted in skipped). The model is Megatron's GPT with the
 * row's shape: grouped query attention, untied or tied, learned or rotary
 * positions, erf GeLU (Megatron's default activation, F.gelu). */
enum {
    MCI_CASE, MCI_PLATFORM, MCI_ENV, MCI_SYSTEM, MCI_GPUS = 6, MCI_LAYERS, MCI_HIDDEN, MCI_HEADS,
    MCI_KV, MCI_FFN, MCI_VOCAB, MCI_SEQ, MCI_POSITION, MCI_ACTIVATION, MCI_TIED, MCI_BIAS,
    MCI_HDROP, MCI_ADROP, MCI_TP, MCI_PP, MCI_VP, MCI_CP, MCI_DP, MCI_SP, MCI_MB, MCI_GB,
    MCI_PRECISION, MCI_DIST_OPT, MCI_DP_OVERLAP, MCI_PG_OVERLAP, MCI_TP_OVERLAP, MCI_RECOMPUTE,
    MCI_ITER_S = 42, MCI_MEM, MCI_MEM_MAX, MCI_COMPARE, MCI_COLS
};

static const char note_megatron_ci[] =
    "NVIDIA CI's runs of Megatron-LM's functional tests (d98e8a6), as their model_config.yaml "
    "gives them: Megatron-Core GPT with Transformer Engine, bf16, distributed optimizer with "
    "overlapped grad reduce and param gather, interleaved rows with Megatron's default p2p "
    "overlap; deterministic mode, NCCL_ALGO=Ring, --log-params-norm, --log-num-zeros-in-grad and "
    "--no-gradient-accumulation-fusion, which megaplan does not charge. Time: the median "
    "iteration time after iteration 10. Memory: the last pipeline stage's (the rank that logs).";

static mp_status megatron_ci(const csv *c, refdata_set *s, mp_error *err)
{
    static const struct {
        int col;
        const char *name;
    } named[] = {{MCI_SYSTEM, "system"}, {MCI_GPUS, "gpus"}, {MCI_COMPARE - 1, "mem_max_allocated_bytes"},
                 {MCI_RECOMPUTE, "recompute"}, {MCI_ITER_S, "iter_s"}, {MCI_COMPARE, "compare"}};
    if (c->cols < MCI_COLS)
        return mp_error_set(err, MP_EINPUT, c->path, 0, 0, "header", "%d columns, expected %d",
                            c->cols, (int)MCI_COLS);
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strcmp(c->header[named[i].col], named[i].name) != 0)
            return mp_error_set(err, MP_EINPUT, c->path, 0, named[i].col + 1, "header",
                                "column %d is '%s', expected '%s' (tools/megatron_ci_rows.py)",
                                named[i].col + 1, c->header[named[i].col], named[i].name);
    for (int r = 0; r < c->rows; r++) {
        const char *cmp = NULL, *system = NULL, *pos = NULL, *act = NULL, *prec = NULL, *rc = NULL,
                   *cas = NULL, *plat = NULL, *env = NULL;
        mp_status st = text(c, r, MCI_COMPARE, &cmp, err);
        if (st != MP_OK)
            return st;
        if (strcmp(cmp, "yes") != 0) { /* recorded, not compared: the note says why */
            s->skipped++;
            continue;
        }
        double v[MCI_COLS] = {0};
        static const int cols[] = {MCI_GPUS, MCI_LAYERS, MCI_HIDDEN, MCI_HEADS, MCI_KV, MCI_FFN,
                                   MCI_VOCAB, MCI_SEQ, MCI_TIED, MCI_HDROP, MCI_ADROP, MCI_TP,
                                   MCI_PP, MCI_VP, MCI_CP, MCI_DP, MCI_SP, MCI_MB, MCI_GB,
                                   MCI_DIST_OPT, MCI_DP_OVERLAP, MCI_PG_OVERLAP, MCI_TP_OVERLAP,
                                   MCI_ITER_S, MCI_MEM, MCI_MEM_MAX};
        for (size_t i = 0; i < sizeof cols / sizeof cols[0] && st == MP_OK; i++)
            st = num(c, r, cols[i], &v[cols[i]], err);
        if (st == MP_OK) st = text(c, r, MCI_CASE, &cas, err);
        if (st == MP_OK) st = text(c, r, MCI_PLATFORM, &plat, err);
        if (st == MP_OK) st = text(c, r, MCI_ENV, &env, err);
        if (st == MP_OK) st = text(c, r, MCI_SYSTEM, &system, err);
        if (st == MP_OK) st = text(c, r, MCI_POSITION, &pos, err);
        if (st == MP_OK) st = text(c, r, MCI_ACTIVATION, &act, err);
        if (st == MP_OK) st = text(c, r, MCI_PRECISION, &prec, err);
        if (st == MP_OK) st = text(c, r, MCI_RECOMPUTE, &rc, err);
        if (st != MP_OK)
            return st;
        if (strcmp(act, "gelu") != 0)
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], MCI_ACTIVATION + 1,
                                "activation", "'%s' compared: only gelu is", act);
        if (strcmp(pos, "learned") != 0 && strcmp(pos, "rope") != 0)
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], MCI_POSITION + 1, "position",
                                "'%s' is not learned or rope", pos);
        static const int pcols[PC_COUNT] = {MCI_GPUS, MCI_TP, MCI_PP, MCI_CP, MCI_VP, MCI_DP,
                                            MCI_MB, MCI_GB, MCI_SP, MCI_DIST_OPT,
                                            MCI_DP_OVERLAP, MCI_TP_OVERLAP};
        par q;
        st = par_of_line(c, r, v, pcols, &q, err);
        if (st != MP_OK)
            return st;
        if (v[MCI_ITER_S] <= 0 || v[MCI_MEM] <= 0 || v[MCI_MEM_MAX] < v[MCI_MEM])
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], MCI_ITER_S + 1,
                                "iter_s/mem_allocated_bytes/mem_max_allocated_bytes",
                                "must be positive, the peak at least the allocated bytes");
        int rcv = mp_recompute_parse(rc);
        if (rcv < 0)
            return mp_error_set(err, MP_EINPUT, c->path, c->line[r], MCI_RECOMPUTE + 1,
                                "recompute", "'%s' is not a recompute mode", rc);
        q.rc = (mp_recompute)rcv;
        st = run_dtype(c, r, prec, &q.prec, err);
        mp_hw hw;
        mp_error why;
        if (st == MP_OK && refdata_hw(system, &hw, &why) != MP_OK)
            st = mp_error_set(err, MP_EINPUT, c->path, c->line[r], MCI_SYSTEM + 1, "system",
                              "'%s' is not a built-in profile (%s)", system, why.msg);
        if (st != MP_OK)
            return st;
        /* Transformer Engine's attention (--transformer-impl
         * transformer_engine), flash or cuDNN fused: no s x s scores kept on
         * any GPU. The dgx-a100 profile's flash_attention false describes the
         * 2021-22 Selene runs' unfused attention, not these */
        hw.flash_attention = true;
        mp_model m;
        bool refused = gpt_model(&m, "gpt", (int64_t)v[MCI_LAYERS], (int64_t)v[MCI_HIDDEN],
                                 (int64_t)v[MCI_HEADS], (int64_t)v[MCI_SEQ],
                                 (int64_t)v[MCI_VOCAB], v[MCI_TIED] != 0) != 0;
        m.kv_heads = (int64_t)v[MCI_KV];
        m.ffn_hidden = (int64_t)v[MCI_FFN];
        m.activation = MP_ACT_GELU_ERF;
        m.position = strcmp(pos, "rope") == 0 ? MP_POS_ROPE : MP_POS_LEARNED;
        m.hidden_dropout = v[MCI_HDROP];
        m.attention_dropout = v[MCI_ADROP];
        m.dropout_set = true;
        if (refused || mp_model_finish(&m, &why) != MP_OK) {
            s->skipped++;
            continue;
        }
        refdata_row *w = row_new(s, c, r, REFDATA_ITER_S);
        config_of(&w->config, &m, &hw, &q);
        w->config.training.stack = MP_STACK_MEGATRON_LM;
        /* Megatron's default overlap_p2p_comm (arguments.py: store_false),
         * kept only for the interleaved schedule (arguments.py lines 1000-1012) */
        w->config.parallel.p2p_overlap = q.v > 1;
        w->config.parallel.param_gather_sync = q.dist_opt && v[MCI_PG_OVERLAP] == 0;
        w->hw_preset = preset_name(system, w->hw_preset);
        snprintf(w->label, sizeof w->label, "%s %s %s: t=%lld p=%lld v=%lld d=%lld b=%lld B=%lld",
                 cas, plat, env, (long long)q.t, (long long)q.p, (long long)q.v, (long long)q.d,
                 (long long)q.mb, (long long)q.gb);
        w->value = v[MCI_ITER_S];
        w->measured_s = v[MCI_ITER_S];
        w->mem_allocated = v[MCI_MEM];
        w->mem_max_allocated = v[MCI_MEM_MAX];
        w->mem_rank = q.p - 1;
        s->n++;
    }
    return MP_OK;
}

/* ---- public ------------------------------------------------------------------- */

mp_status refdata_table_read(const char *dir, const char *file, refdata_table *t, mp_error *err)
{
    return csv_read(dir, file, t, err);
}

mp_status refdata_table_read_more(const char *dir, const char *file, const char *first,
                                  refdata_role *role, refdata_table *t, mp_error *err)
{
    mp_status st = csv_read(dir, file, t, err);
    if (st != MP_OK)
        return st;
    if (first && t->role != *role) {
        csv_free(t);
        return mp_error_set(err, MP_EINPUT, file, 0, 0, "role",
                            "differs from %s's: one data set, one role", first);
    }
    *role = t->role;
    return MP_OK;
}

void refdata_table_free(refdata_table *t)
{
    csv_free(t);
}

const char *refdata_table_get(const refdata_table *t, int r, const char *name)
{
    for (int col = 0; col < t->cols; col++)
        if (strcmp(t->header[col], name) == 0)
            return cell(t, r, col);
    return NULL;
}

mp_status refdata_profiles_builtin(refdata_profiles *p, mp_error *err)
{
    mp_status st = refdata_hw("a100-4xhdr", &p->a100_4xhdr, err);
    if (st == MP_OK)
        st = refdata_hw("dgx-a100", &p->dgx_a100, err);
    if (st == MP_OK)
        st = refdata_hw("dgx-h100", &p->dgx_h100, err);
    return st;
}

void refdata_set_free(refdata_set *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n = 0;
}

mp_status refdata_read(const char *dir, refdata_set_id id, const refdata_profiles *p,
                       refdata_set *out, mp_error *err)
{
    static const struct {
        const char *file, *hw_preset, *note;
        int rows_per_line;
    } sets[REFDATA_SET_COUNT] = {
        [REFDATA_VTRAIN_MULTI] = {"vtrain/ground_truth_multi_dev.csv", "a100-4xhdr", note_vtrain_multi, 1},
        [REFDATA_VTRAIN_SINGLE] = {"vtrain/ground_truth_single.csv", "a100-4xhdr", note_vtrain_single, 1},
        [REFDATA_NARAYANAN] = {"published/narayanan2021_table1.csv", "dgx-a100", note_narayanan, 1},
        [REFDATA_KORTHIKANTI] = {"published/korthikanti2022.csv", "dgx-a100", note_korthikanti, 2},
        [REFDATA_KORTHIKANTI_LAYER] = {"published/korthikanti2022_table4_layer22b.csv", "dgx-a100",
                                       note_korthikanti_layer, 2},
        [REFDATA_MEGATRON_CORE] = {"published/megatron_core_h100_2024.csv", "dgx-h100",
                                   note_megatron_core, 1},
        [REFDATA_MTNLG] = {"published/smith2022_mtnlg.csv", "dgx-a100", note_mtnlg, 1},
        [REFDATA_NCCL] = {"vtrain/a100_nvlink_allreduce_2gpu.csv", "a100-4xhdr", note_nccl, 1},
        [REFDATA_BLOOM] = {"published/bigscience_bloom176b.csv", "a100-opa", note_bloom, 1},
        [REFDATA_NEMO] = {"published/nemo_24.07_h100.csv", "dgx-h100, b200, gb200-nvl72", note_nemo, 1},
        [REFDATA_MEGATRON_CI] = {"megatron_ci/golden_values.csv", "dgx-a100, dgx-h100, gb200-nvl72",
                                 note_megatron_ci, 1},
    };
    static const char *const bloom_files[] = {"published/bigscience_bloom176b.csv", NULL};
    static const char *const nemo_files[] = {"published/nemo_24.07_h100.csv",
                                             "published/nemo_25.02_25.04.csv",
                                             "published/megatron_bridge_dense.csv",
                                             "published/mlperf_training_v3.1_gpt3.csv", NULL};
    memset(out, 0, sizeof *out);
    if ((int)id < 0 || id >= REFDATA_SET_COUNT)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "set", "unknown data set %d", (int)id);
    out->id = id;
    out->file = sets[id].file;
    out->hw_preset = sets[id].hw_preset;
    out->note = sets[id].note;
    const mp_hw *hw = id == REFDATA_MEGATRON_CORE ? &p->dgx_h100
                      : (id == REFDATA_NARAYANAN || id == REFDATA_KORTHIKANTI ||
                         id == REFDATA_KORTHIKANTI_LAYER || id == REFDATA_MTNLG)
                          ? &p->dgx_a100
                          : &p->a100_4xhdr;
    mp_status st;
    if (id == REFDATA_NCCL) {
        st = nccl(dir, hw, out, err);
    } else if (id == REFDATA_BLOOM || id == REFDATA_NEMO) {
        st = runs(dir, id == REFDATA_BLOOM ? bloom_files : nemo_files, out, err);
    } else {
        csv c;
        st = csv_read(dir, out->file, &c, err);
        if (st != MP_OK)
            return st;
        out->role = c.role;
        st = rows_alloc(out, (size_t)c.rows * (size_t)sets[id].rows_per_line, err);
        if (st == MP_OK) {
            switch (id) {
            case REFDATA_VTRAIN_MULTI:
            case REFDATA_VTRAIN_SINGLE:
                st = vtrain(&c, id == REFDATA_VTRAIN_MULTI, hw, out, err);
                break;
            case REFDATA_NARAYANAN:
                st = narayanan(&c, hw, out, err);
                break;
            case REFDATA_KORTHIKANTI:
                st = korthikanti(&c, hw, out, err);
                break;
            case REFDATA_KORTHIKANTI_LAYER:
                st = korthikanti_layer(&c, hw, out, err);
                break;
            case REFDATA_MEGATRON_CORE:
                st = megatron_core(&c, hw, out, err);
                break;
            case REFDATA_MTNLG:
                st = mtnlg(&c, hw, out, err);
                break;
            case REFDATA_MEGATRON_CI:
                st = megatron_ci(&c, out, err);
                break;
            default:
                break;
            }
        }
        csv_free(&c);
    }
    if (st != MP_OK) {
        refdata_set_free(out);
        out->skipped = 0;
    }
    return st;
}
