/* test_megatron.c — `--format megatron` read back: the flags are parsed as
 * Megatron-LM reads them (the layout string expanded, recompute applied per
 * layer and stage as Megatron-Core's TransformerBlock does) and compared with
 * the model and the plan, for every example plan and plans on several presets
 * (uneven stages, uneven virtual stages, mixed per-layer recompute, GQA,
 * SwiGLU, RMSNorm, rope, untied, BERT, T5). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/io.h"
#include "core/plan.h"
#include "megaplan_config.h"
#include "planner/megatron.h"

#define MAX_FLAGS 128

typedef struct flags {
    char name[MAX_FLAGS][64];
    char value[MAX_FLAGS][256];
    int n;
    bool env_max_connections;
    long rc_differ; /* from the "# recompute differs on D of L" comment, -1 none */
} flags;

static void parse(const char *text, flags *f)
{
    memset(f, 0, sizeof *f);
    f->rc_differ = -1;
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char line[1024];
        assert_true(len < sizeof line);
        memcpy(line, p, len);
        line[len] = 0;
        p += len + (e ? 1 : 0);
        if (line[0] == '#') {
            long d, l;
            if (sscanf(line, "# recompute differs on %ld of %ld", &d, &l) == 2)
                f->rc_differ = d;
            continue;
        }
        if (!strcmp(line, "export CUDA_DEVICE_MAX_CONNECTIONS=1")) {
            f->env_max_connections = true;
            continue;
        }
        size_t n = strlen(line);
        if (n >= 2 && !strcmp(line + n - 2, " \\"))
            line[n - 2] = 0;
        assert_true(line[0] == '-' && line[1] == '-');
        assert_true(f->n < MAX_FLAGS);
        char *sp = strchr(line, ' ');
        if (sp)
            *sp = 0;
        snprintf(f->name[f->n], sizeof f->name[0], "%s", line);
        snprintf(f->value[f->n], sizeof f->value[0], "%s", sp ? sp + 1 : "");
        f->n++;
    }
}

static const char *get(const flags *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->name[i], name))
            return f->value[i];
    return NULL;
}

static long num(const flags *f, const char *name, long dflt)
{
    const char *v = get(f, name);
    return v ? strtol(v, NULL, 10) : dflt;
}

static int64_t blocks_in(const mp_stage_range *r, int64_t L)
{
    int64_t b = r->begin < 1 ? 1 : r->begin, e = r->end > L + 1 ? L + 1 : r->end;
    return e > b ? e - b : 0;
}

/* Megatron's parse of --pipeline-model-parallel-layout (its grammar:
 * x*n repeats, '|' splits): blocks per stage; E on the first, L on the last. */
static int layout_blocks(const char *v, long *blocks, int max)
{
    char s[256];
    snprintf(s, sizeof s, "%s", v);
    size_t n = strlen(s);
    assert_true(n >= 2 && s[0] == '"' && s[n - 1] == '"');
    s[n - 1] = 0;
    int k = 0;
    blocks[0] = 0;
    bool seen_e = false, seen_l = false;
    for (char *c = s + 1; *c; c++) {
        if (*c == '|') {
            assert_false(seen_l); /* the loss is on the last stage */
            assert_true(++k < max);
            blocks[k] = 0;
        } else if (*c == 'E') {
            assert_int_equal(k, 0);
            seen_e = true;
        } else if (*c == 'L') {
            seen_l = true;
        } else if (*c == 't') {
            long r = 1;
            if (c[1] == '*')
                r = strtol(c + 2, &c, 10), c--;
            blocks[k] += r;
        } else {
            fail_msg("unexpected layout character %c", *c);
        }
    }
    assert_true(seen_e && seen_l);
    return k + 1;
}

static void check_plan(const mp_plan *plan)
{
    const mp_config *c = &plan->config;
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    mp_buf b;
    mp_buf_init(&b);
    mp_megatron_args(c, plan, &b);
    assert_false(b.oom);
    flags f;
    parse(b.data, &f);
    bool t5 = m->arch == MP_ARCH_T5;
    int64_t L = m->layers;
    /* the model */
    if (t5) {
        assert_null(get(&f, "--num-layers"));
        assert_int_equal(num(&f, "--encoder-num-layers", 0), m->encoder_layers);
        assert_int_equal(num(&f, "--decoder-num-layers", 0), m->decoder_layers);
        assert_int_equal(num(&f, "--encoder-seq-length", 0), c->training.seq);
        assert_int_equal(num(&f, "--decoder-seq-length", 0), m->decoder_seq);
    } else {
        assert_int_equal(num(&f, "--num-layers", 0), L);
        assert_int_equal(num(&f, "--seq-length", 0), c->training.seq);
    }
    assert_int_equal(num(&f, "--hidden-size", 0), m->hidden);
    assert_int_equal(num(&f, "--num-attention-heads", 0), m->heads);
    assert_int_equal(num(&f, "--kv-channels", 0), m->head_dim);
    assert_int_equal(num(&f, "--ffn-hidden-size", 0), m->ffn_hidden);
    assert_int_equal(num(&f, "--vocab-size", 0), m->vocab);
    assert_true(num(&f, "--max-position-embeddings", 0) >= c->training.seq);
    assert_int_equal(get(&f, "--group-query-attention") != NULL, m->kv_heads < m->heads);
    assert_int_equal(num(&f, "--num-query-groups", m->heads), m->kv_heads);
    assert_int_equal(get(&f, "--swiglu") != NULL, m->activation == MP_ACT_SWIGLU);
    /* GELU's tanh form asks for OpenAI's GELU; the exact one is Megatron's default */
    assert_int_equal(get(&f, "--openai-gelu") != NULL, m->activation == MP_ACT_GELU);
    assert_int_equal(strstr(b.data, "# activation gelu (tanh form)") != NULL,
                     m->activation == MP_ACT_GELU);
    const char *norm = get(&f, "--normalization");
    assert_string_equal(norm ? norm : "LayerNorm",
                        m->norm == MP_NORM_RMSNORM ? "RMSNorm" : "LayerNorm");
    /* the model's epsilon, always given, read back exactly */
    const char *eps = get(&f, "--norm-epsilon");
    assert_non_null(eps);
    assert_true(strtod(eps, NULL) == m->norm_eps);
    /* the dropouts, always given (Megatron-Core's defaults are 0.1: a LLaMA
     * or a run without dropout must say 0), read back exactly */
    const char *hdrop = get(&f, "--hidden-dropout"), *adrop = get(&f, "--attention-dropout");
    assert_non_null(hdrop);
    assert_non_null(adrop);
    assert_true(strtod(hdrop, NULL) == mp_model_hidden_dropout(m));
    assert_true(strtod(adrop, NULL) == mp_model_attention_dropout(m));
    const char *pos = get(&f, "--position-embedding-type");
    assert_string_equal(pos ? pos : "learned_absolute",
                        m->position == MP_POS_ROPE       ? "rope"
                        : m->position == MP_POS_RELATIVE ? "relative"
                                                         : "learned_absolute");
    assert_int_equal(get(&f, "--untie-embeddings-and-output-weights") != NULL,
                     !m->tied_embeddings);
    assert_int_equal(get(&f, "--disable-bias-linear") != NULL,
                     m->arch == MP_ARCH_LLAMA || t5);
    /* parallelism and batches */
    assert_int_equal(num(&f, "--tensor-model-parallel-size", 0), p->tp);
    assert_int_equal(num(&f, "--pipeline-model-parallel-size", 0), p->pp);
    /* arguments.py: interleaving without the p2p overlap needs pp > 2 */
    if (p->vpp > 1 && p->pp <= 2)
        assert_null(get(&f, "--no-overlap-p2p-communication"));
    assert_int_equal(num(&f, "--context-parallel-size", 1), p->cp);
    /* the CP exchange, named only when not Megatron-Core's default ring */
    const char *cct = get(&f, "--cp-comm-type");
    assert_string_equal(cct ? cct : "p2p",
                        p->cp > 1 ? mp_cp_comm_name(p->cp_comm_type) : "p2p");
    assert_int_equal(get(&f, "--sequence-parallel") != NULL, p->sp);
    assert_int_equal(num(&f, "--micro-batch-size", 0), p->micro_batch);
    assert_int_equal(num(&f, "--global-batch-size", 0), c->training.global_batch);
    assert_int_equal(get(&f, "--bf16") != NULL, c->training.precision == MP_DTYPE_BF16);
    assert_int_equal(get(&f, "--fp16") != NULL, c->training.precision == MP_DTYPE_FP16);
    assert_int_equal(get(&f, "--use-distributed-optimizer") != NULL, p->dist_opt);
    assert_int_equal(f.env_max_connections, p->tp > 1 || p->cp > 1);
    /* the stages Megatron builds, against the plan's */
    int64_t v = p->vpp > 1 ? p->vpp : 1, K = p->pp * v;
    mp_plan even = *plan;
    mp_plan_default_stages(&even);
    const mp_stage_range *st = plan->n_stages == K ? plan->stages : even.stages;
    long mb[MP_MAX_STAGES];
    if (t5) {
        assert_null(get(&f, "--pipeline-model-parallel-layout"));
    } else if (get(&f, "--pipeline-model-parallel-layout")) {
        assert_int_equal(layout_blocks(get(&f, "--pipeline-model-parallel-layout"), mb,
                                       MP_MAX_STAGES), K);
        assert_null(get(&f, "--num-layers-per-virtual-pipeline-stage"));
    } else if (get(&f, "--decoder-first-pipeline-num-layers") ||
               get(&f, "--decoder-last-pipeline-num-layers")) {
        /* arguments.py: the flags with virtual stages take
         * --num-virtual-stages-per-pipeline-rank, never
         * --num-layers-per-virtual-pipeline-stage or a layout; then
         * transformer_config.py's checks and transformer_block.py's
         * get_num_layers_to_build, chunk by chunk */
        long F = num(&f, "--decoder-first-pipeline-num-layers", 0);
        long Lz = num(&f, "--decoder-last-pipeline-num-layers", 0);
        long vv = num(&f, "--num-virtual-stages-per-pipeline-rank", 1);
        assert_null(get(&f, "--num-layers-per-virtual-pipeline-stage"));
        assert_int_equal(vv, v);
        long mids = p->pp - (F > 0) - (Lz > 0), rest = L - F - Lz;
        assert_true(F >= 0 && Lz >= 0 && F % vv == 0 && Lz % vv == 0);
        assert_int_equal(rest != 0, mids != 0);
        if (mids) {
            assert_int_equal(rest % mids, 0);
            assert_int_equal(rest / mids % vv, 0);
        }
        for (int64_t k = 0; k < K; k++) {
            int64_t r = k % p->pp;
            mb[k] = (r == 0 && F ? F : r == p->pp - 1 && Lz ? Lz : rest / mids) / vv;
        }
    } else {
        long per = num(&f, "--num-layers-per-virtual-pipeline-stage", L / p->pp);
        assert_int_equal(L / p->pp / per, v);
        for (int64_t k = 0; k < K; k++)
            mb[k] = per;
    }
    for (int64_t k = 0; !t5 && k < K; k++)
        assert_int_equal(mb[k], blocks_in(&st[k], L));
    /* recompute as Megatron applies it, layer by layer */
    const char *gran = get(&f, "--recompute-granularity");
    const char *method = get(&f, "--recompute-method");
    long n = num(&f, "--recompute-num-layers", 0);
    if (gran && !strcmp(gran, "selective")) {
        assert_null(method);
        assert_string_equal(get(&f, "--recompute-modules"), "core_attn");
    }
    long differ = 0;
    for (int64_t k = 0; k < K; k++) {
        int64_t first = st[k].begin < 1 ? 1 : st[k].begin;
        for (int64_t i = first; i < first + blocks_in(&st[k], L); i++) {
            int got = !gran                          ? MP_RECOMPUTE_NONE
                      : !strcmp(gran, "selective")   ? MP_RECOMPUTE_SELECTIVE
                      : !strcmp(method, "uniform")   ? MP_RECOMPUTE_FULL
                      : i - first < n                ? MP_RECOMPUTE_FULL
                                                     : MP_RECOMPUTE_NONE;
            int want = plan->has_layer_recompute ? plan->layer_recompute[i] : (int)p->recompute;
            differ += got != want;
            assert_true(got >= want); /* never less recomputed than planned */
        }
    }
    assert_int_equal(differ, f.rc_differ < 0 ? 0 : f.rc_differ);
    mp_buf_free(&b);
}

static void example_plans(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/examples", MEGAPLAN_SOURCE_DIR);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "plan-", 5) || len < 5 || strcmp(e->d_name + len - 5, ".yaml"))
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        mp_plan *plan = calloc(1, sizeof *plan);
        mp_error err = {0};
        assert_non_null(plan);
        if (mp_plan_read_file(path, plan, &err) != MP_OK)
            fail_msg("%s: %s", path, err.msg);
        check_plan(plan);
        free(plan);
        n++;
    }
    closedir(d);
    assert_true(n >= 6); /* every example plan, an uneven split and T5 among them */
}

/* A plan on a preset from YAML text; rc: layer_recompute items, or NULL. */
static void preset_plan(const char *model, const char *hw, const char *training,
                        const char *parallel, const char *stages, const char *rc)
{
    char text[16384];
    snprintf(text, sizeof text,
             "megaplan_plan: 1\nmodel: %s\nhw: %s\ntraining: %s\nparallel: %s\n%s%s%s%s%s",
             model, hw, training, parallel, stages ? "stages: " : "", stages ? stages : "",
             stages ? "\n" : "", rc ? "layer_recompute: " : "", rc ? rc : "");
    mp_plan *plan = calloc(1, sizeof *plan);
    mp_error err = {0};
    assert_non_null(plan);
    if (mp_plan_parse_yaml(text, strlen(text), "test", plan, &err) != MP_OK)
        fail_msg("%s: %s: %s", model, err.field, err.msg);
    check_plan(plan);
    free(plan);
}

static void presets(void **state)
{
    (void)state;
    /* LLaMA 3 70B (80 layers, GQA, SwiGLU, RMSNorm, rope, untied), pp 4 split
     * 20 | 20 | 21 | 19; the first 2 blocks of each stage in full: exact */
    char rc[1024] = "[none";
    int bounds[5] = {0, 21, 41, 62, 82};
    for (int i = 1; i <= 80; i++) {
        bool full = false;
        for (int k = 0; k < 4; k++) {
            int first = bounds[k] < 1 ? 1 : bounds[k];
            full |= i >= first && i < first + 2;
        }
        strcat(rc, full ? ", full" : ", none");
    }
    strcat(rc, ", none]");
    const char *tr = "{gpus: 256, seq: 8192, global_batch: 512, precision: bf16}";
    preset_plan("llama3-70b", "dgx-h100", tr,
                "{tp: 8, sp: true, pp: 4, dp: 8, micro_batch: 1, recompute: none, "
                "dist_opt: true, schedule: 1f1b}",
                "[[0, 21], [21, 41], [41, 62], [62, 82]]", rc);
    /* the same with 12 of 80 blocks left out of a full recompute: not
     * expressible, flags recompute all 80 and say how many differ */
    char rc2[1024] = "[none";
    for (int i = 1; i <= 80; i++)
        strcat(rc2, i % 7 == 0 && i < 84 ? ", none" : ", full");
    strcat(rc2, ", none]");
    preset_plan("llama3-70b", "dgx-h100", tr,
                "{tp: 8, sp: true, pp: 4, dp: 8, micro_batch: 1, recompute: full, "
                "dist_opt: true, schedule: 1f1b}",
                "[[0, 21], [21, 41], [41, 62], [62, 82]]", rc2);
    /* uneven virtual stages (pp 2, vpp 2 over 32 blocks: 9 | 7 | 9 | 7) */
    preset_plan("gpt3-2.7b", "dgx-a100", "{gpus: 16, seq: 2048, global_batch: 64, precision: bf16}",
                "{tp: 2, pp: 2, vpp: 2, dp: 4, micro_batch: 1, recompute: selective, "
                "schedule: interleaved-1f1b}",
                "[[0, 10], [10, 17], [17, 26], [26, 34]]", NULL);
    /* context parallelism's exchange: all_gather and a2a named as
     * --cp-comm-type, the ring (p2p) left to Megatron-Core's default */
    preset_plan("llama3-8b", "dgx-h100", "{gpus: 8, seq: 8192, global_batch: 8, precision: bf16}",
                "{tp: 2, sp: true, cp: 2, dp: 2, cp_comm_type: all_gather}", NULL, NULL);
    preset_plan("llama3-8b", "dgx-h100", "{gpus: 8, seq: 8192, global_batch: 8, precision: bf16}",
                "{tp: 2, sp: true, cp: 2, dp: 2, cp_comm_type: a2a}", NULL, NULL);
    preset_plan("llama3-8b", "dgx-h100", "{gpus: 8, seq: 8192, global_batch: 8, precision: bf16}",
                "{tp: 2, sp: true, cp: 2, dp: 2, cp_comm_type: p2p}", NULL, NULL);
    /* 32 blocks on pp 3 x vpp 2: neither 32 nor 34 divides into 6 stages;
     * Megatron's first/last-stage flags do (10, 12, 10: 5 | 6 | 5 | 5 | 6 | 5) */
    preset_plan("llama3-8b", "dgx-h100", "{gpus: 24, seq: 8192, global_batch: 24, precision: bf16}",
                "{tp: 2, pp: 3, vpp: 2, dp: 4, micro_batch: 1, recompute: none, "
                "schedule: interleaved-1f1b}", NULL, NULL);
    preset_plan("llama3-8b", "dgx-h100", "{gpus: 24, seq: 8192, global_batch: 24, precision: bf16}",
                "{tp: 2, pp: 3, vpp: 2, dp: 4, micro_batch: 1, recompute: none, "
                "schedule: interleaved-1f1b}", "[[0, 6], [6, 12], [12, 17], [17, 22], [22, 28], "
                "[28, 34]]", NULL);
    /* the flags as the plan gives them: pp 2 x vpp 2, 12 and 20; pp 3 x vpp 2,
     * the first only (12; the last rank a middle one: 10 each) */
    preset_plan("llama3-8b", "dgx-h100", "{gpus: 16, seq: 8192, global_batch: 16, precision: bf16}",
                "{tp: 2, pp: 2, vpp: 2, dp: 4, micro_batch: 1, recompute: none, "
                "schedule: interleaved-1f1b, first_stage_layers: 12, last_stage_layers: 20}",
                NULL, NULL);
    preset_plan("llama3-8b", "dgx-h100", "{gpus: 24, seq: 8192, global_batch: 24, precision: bf16}",
                "{tp: 2, pp: 3, vpp: 2, dp: 4, micro_batch: 1, recompute: none, "
                "schedule: interleaved-1f1b, first_stage_layers: 12}", NULL, NULL);
    /* even splits without stages in the plan; BERT; T5 (encoder and decoder) */
    preset_plan("gpt3-175b", "dgx-a100",
                "{gpus: 1024, seq: 2048, global_batch: 1536, precision: bf16}",
                "{tp: 8, sp: true, pp: 8, vpp: 2, dp: 16, micro_batch: 1, recompute: full, "
                "dist_opt: true, schedule: interleaved-1f1b}", NULL, NULL);
    preset_plan("bert-large", "dgx-a100", "{gpus: 8, seq: 512, global_batch: 256, precision: fp16}",
                "{tp: 2, pp: 1, dp: 4, micro_batch: 8, recompute: none, schedule: 1f1b}", NULL,
                NULL);
    preset_plan("t5-11b", "dgx-a100", "{gpus: 64, seq: 512, global_batch: 128, precision: bf16}",
                "{tp: 8, pp: 1, dp: 8, micro_batch: 2, recompute: selective, dist_opt: true, "
                "schedule: 1f1b}", NULL, NULL);
    preset_plan("llama3-8b", "dgx-h100", "{gpus: 8, seq: 8192, global_batch: 16, precision: bf16}",
                "{tp: 2, sp: true, cp: 2, pp: 1, dp: 2, micro_batch: 1, recompute: none, "
                "schedule: 1f1b}", NULL, NULL);
    /* a GPT without hidden dropout (MLPerf's GPT-3 recipe) and a LLaMA-style
     * model with attention dropout: the flags carry the model's values */
    preset_plan("{name: g, arch: gpt, layers: 4, hidden: 256, heads: 4, vocab: 1000, seq: 512, "
                "hidden_dropout: 0, attention_dropout: 0.05}",
                "dgx-a100", "{gpus: 2, seq: 512, global_batch: 4, precision: bf16}",
                "{tp: 2, pp: 1, dp: 1, micro_batch: 1, recompute: none, schedule: 1f1b}", NULL,
                NULL);
    preset_plan("{name: l, arch: llama, layers: 4, hidden: 256, heads: 4, vocab: 1000, seq: 512, "
                "attention_dropout: 0.1}",
                "dgx-h100", "{gpus: 2, seq: 512, global_batch: 4, precision: bf16}",
                "{tp: 2, pp: 1, dp: 1, micro_batch: 1, recompute: none, schedule: 1f1b}", NULL,
                NULL);
}

/* The flags themselves, as Megatron-LM spells them (tests/data/megatron/flag_names.txt):
 * gpt3-175b's 0.1 and 0.1, LLaMA's 0 and 0, and a plan's own 0. */
static void dropout_flags(void **state)
{
    (void)state;
    static const struct {
        const char *model, *want;
    } cases[] = {
        {"gpt3-1.3b", "--hidden-dropout 0.1 \\\n--attention-dropout 0.1 \\\n"},
        {"llama3-8b", "--hidden-dropout 0 \\\n--attention-dropout 0 \\\n"},
        {"{name: g, arch: gpt, layers: 4, hidden: 256, heads: 4, vocab: 1000, seq: 512, "
         "hidden_dropout: 0, attention_dropout: 0}",
         "--hidden-dropout 0 \\\n--attention-dropout 0 \\\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "megaplan_plan: 1\nmodel: %s\nhw: dgx-h100\ntraining: {gpus: 8, seq: 512, "
                 "global_batch: 8, precision: bf16}\nparallel: {tp: 1, pp: 1, dp: 8, "
                 "micro_batch: 1, recompute: none, schedule: 1f1b}\n",
                 cases[i].model);
        mp_plan *plan = calloc(1, sizeof *plan);
        assert_non_null(plan);
        mp_error err = {0};
        if (mp_plan_parse_yaml(text, strlen(text), "test", plan, &err) != MP_OK)
            fail_msg("%s: %s: %s", cases[i].model, err.field, err.msg);
        mp_buf b;
        mp_buf_init(&b);
        mp_megatron_args(&plan->config, plan, &b);
        assert_false(b.oom);
        if (!strstr(b.data, cases[i].want))
            fail_msg("%s: no '%s' in\n%s", cases[i].model, cases[i].want, b.data);
        mp_buf_free(&b);
        free(plan);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(example_plans),
        cmocka_unit_test(presets),
        cmocka_unit_test(dropout_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
