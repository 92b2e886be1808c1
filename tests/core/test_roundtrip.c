/* Round-trip property: random and edge inputs on every route into megaplan
 * (model YAML, HuggingFace config.json, hardware YAML and --hw-set, plans);
 * whatever is accepted, megaplan's writers put in a form that reads back to
 * the same model, hardware and plan (tests/fuzz/roundtrip.h). A derived
 * head_dim once escaped the range check: the model was accepted, the plan
 * written with it was refused.
 * Usage: test_core_roundtrip [SEED] [CASES] */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/roundtrip.h"
#include "core/tables.h"

static uint64_t rng_state;
static uint64_t next_u64(void)
{
    /* splitmix64: a fixed sequence for a seed, the same on every machine */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int64_t irand(int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1));
}
static double urand(void)
{
    return (double)(next_u64() >> 11) / 9007199254740992.0;
}

/* An integer near the interesting places: 0, 1, small, around limit, or anywhere up to 2^21. */
static int64_t edge_int(int64_t limit)
{
    switch (irand(0, 7)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return irand(2, 16);
    case 3: return limit - irand(0, 1);
    case 4: return limit + 1;
    case 5: return irand(1, limit);
    case 6: return 1LL << irand(0, 21);
    default: return irand(1, 4096);
    }
}

static long cases, accepted_n, failures;

static void check(rt_kind kind, const char *text, const char *what)
{
    bool accepted;
    char why[512];
    cases++;
    if (!rt_check(kind, text, strlen(text), what, &accepted, why, sizeof why)) {
        failures++;
        if (failures <= 10)
            fprintf(stderr, "FAIL %s: %s\n--- input ---\n%s\n---\n", what, why, text);
    }
    if (accepted)
        accepted_n++;
}

static const char *const archs[] = {"gpt", "bert", "t5", "llama"};

static void random_model_yaml(char *out, size_t size)
{
    int n = snprintf(out, size, "name: random\narch: %s\n", archs[irand(0, 3)]);
    struct { const char *key; int64_t limit; int keep; } keys[] = {
        {"layers", 2048, 90},   {"hidden", 1 << 20, 100}, {"heads", 1 << 16, 100},
        {"kv_heads", 1 << 16, 30}, {"head_dim", 1 << 16, 25}, {"ffn_hidden", 1 << 23, 40},
        {"vocab", 1 << 24, 100}, {"seq", 1 << 22, 90},   {"encoder_layers", 2048, 20},
        {"decoder_layers", 2048, 20}, {"encoder_seq", 1 << 22, 15}, {"decoder_seq", 1 << 22, 15},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (irand(1, 100) > keys[i].keep)
            continue;
        int64_t v = edge_int(keys[i].limit);
        /* realistic pairs too: a head count that divides hidden */
        if (!strcmp(keys[i].key, "heads") && irand(0, 1))
            v = 1LL << irand(0, 7);
        n += snprintf(out + n, size - (size_t)n, "%s: %" PRId64 "\n", keys[i].key, v);
    }
    if (irand(0, 3) == 0)
        snprintf(out + n, size - (size_t)n, "tied_embeddings: %s\n", irand(0, 1) ? "true" : "false");
}

static void random_hf_json(char *out, size_t size)
{
    static const char *const types[] = {"gpt2", "llama", "bert", "t5"};
    int t = (int)irand(0, 3);
    int64_t hidden = edge_int(1 << 20), heads = irand(0, 1) ? edge_int(1 << 16) : 1LL << irand(0, 6);
    switch (t) {
    case 0:
        snprintf(out, size, "{\"model_type\": \"gpt2\", \"n_layer\": %" PRId64 ", \"n_embd\": %" PRId64
                 ", \"n_head\": %" PRId64 ", \"vocab_size\": %" PRId64 ", \"n_positions\": %" PRId64 "}",
                 edge_int(2048), hidden, heads, edge_int(1 << 24), edge_int(1 << 22));
        break;
    case 1:
        snprintf(out, size, "{\"model_type\": \"llama\", \"num_hidden_layers\": %" PRId64
                 ", \"hidden_size\": %" PRId64 ", \"num_attention_heads\": %" PRId64
                 ", \"num_key_value_heads\": %" PRId64 ", \"intermediate_size\": %" PRId64
                 ", \"vocab_size\": %" PRId64 ", \"max_position_embeddings\": %" PRId64 "}",
                 edge_int(2048), hidden, heads, irand(0, 1) ? heads : edge_int(64),
                 edge_int(1 << 23), edge_int(1 << 24), edge_int(1 << 22));
        break;
    case 2:
        snprintf(out, size, "{\"model_type\": \"bert\", \"num_hidden_layers\": %" PRId64
                 ", \"hidden_size\": %" PRId64 ", \"num_attention_heads\": %" PRId64
                 ", \"vocab_size\": %" PRId64 ", \"max_position_embeddings\": %" PRId64 "}",
                 edge_int(2048), hidden, heads, edge_int(1 << 24), edge_int(1 << 22));
        break;
    default:
        snprintf(out, size, "{\"model_type\": \"t5\", \"num_layers\": %" PRId64 ", \"d_model\": %" PRId64
                 ", \"num_heads\": %" PRId64 ", \"d_kv\": %" PRId64 ", \"d_ff\": %" PRId64
                 ", \"vocab_size\": %" PRId64 ", \"n_positions\": %" PRId64 "}",
                 edge_int(1024), hidden, heads, edge_int(1 << 16), edge_int(1 << 23),
                 edge_int(1 << 24), edge_int(1 << 22));
        break;
    }
    (void)types;
}

/* A preset profile with some numeric fields set to random values, written with
 * all 17 digits or in units, through --hw-set's path; accepted ones round-trip. */
static void random_hw(void)
{
    mp_hw hw;
    mp_error err;
    int np = mp_hw_preset_count();
    if (mp_hw_preset(mp_hw_preset_name((int)irand(0, np - 1)), &hw, &err) != MP_OK) {
        failures++;
        return;
    }
    size_t n;
    const mp_field *tab = mp_hw_field_table(&n);
    static const char *const units[] = {"", " GiB", " GB/s", " Gb/s", " TFLOP/s", " us", " ms", " ns"};
    for (int k = 0; k < 4; k++) {
        const mp_field *f = &tab[irand(0, (int64_t)n - 1)];
        char value[64];
        if (f->type == MP_FT_INT)
            snprintf(value, sizeof value, "%" PRId64, edge_int((int64_t)f->max));
        else if (f->type == MP_FT_DOUBLE) {
            double lo = f->min > 0 ? f->min : 1e-9, hi = f->max;
            double v = lo * pow(hi / lo, urand());
            if (irand(0, 1))
                snprintf(value, sizeof value, "%.17g", v);
            else
                snprintf(value, sizeof value, "%.*g%s", (int)irand(1, 17), v * 1e-9,
                         units[irand(0, 7)]);
        } else
            continue;
        mp_hw_set_field(&hw, f->path, value, &err); /* a refused value leaves the field */
    }
    cases++;
    mp_error_clear(&err);
    if (mp_hw_finish(&hw, &err) != MP_OK)
        return;
    accepted_n++;
    char why[512];
    if (!rt_hw(&hw, why, sizeof why)) {
        failures++;
        if (failures <= 10)
            fprintf(stderr, "FAIL random hardware (%s): %s\n", hw.name, why);
    }
}

static int64_t random_divisor(int64_t n)
{
    int64_t d[64];
    int k = 0;
    for (int64_t i = 1; i <= n && k < 64; i++)
        if (n % i == 0)
            d[k++] = i;
    return d[irand(0, k - 1)];
}

/* A preset model or an accepted random one, split in a random valid way, uneven
 * stages and per-layer recompute included. */
static void random_plan(mp_plan *p)
{
    memset(p, 0, sizeof *p);
    mp_error err;
    const mp_model *preset = mp_model_preset_at((int)irand(0, 5));
    p->config.model = *(preset ? preset : mp_model_preset("gpt3-175b"));
    mp_hw_preset(mp_hw_preset_name((int)irand(0, mp_hw_preset_count() - 1)), &p->config.hw, &err);
    mp_parallel *q = &p->config.parallel;
    mp_parallel_defaults(q);
    const mp_model *m = &p->config.model;
    q->tp = random_divisor(m->kv_heads < m->heads ? m->kv_heads : m->heads);
    if (q->tp > 16)
        q->tp = 1;
    q->pp = random_divisor(m->layers < 64 ? m->layers : 64);
    q->vpp = irand(0, 2) == 0 ? random_divisor(m->layers / q->pp) : 1;
    q->cp = irand(0, 3) == 0 ? 2 : 1;
    q->dp = 1LL << irand(0, 6);
    q->micro_batch = irand(1, 4);
    q->sp = q->tp > 1 && irand(0, 1);
    q->recompute = (mp_recompute)irand(0, 2);
    q->dist_opt = irand(0, 1);
    q->dp_overlap = irand(0, 1);
    q->schedule = q->vpp > 1 ? MP_SCHED_INTERLEAVED : (mp_schedule_kind)irand(0, 2);
    if (q->schedule == MP_SCHED_INTERLEAVED && q->vpp == 1)
        q->schedule = MP_SCHED_1F1B;
    p->config.training = (mp_training){.gpus = q->tp * q->pp * q->cp * q->dp, .seq = m->seq,
                                       .global_batch = q->micro_batch * q->dp * q->pp * irand(1, 4),
                                       .precision = MP_DTYPE_BF16,
                                       .tokens = irand(0, 1) ? 0 : urand() * 1e12};
    mp_plan_default_stages(p);
    if (irand(0, 1) && p->n_stages > 1) {
        /* move one boundary: an uneven split */
        int32_t k = (int32_t)irand(1, p->n_stages - 1);
        if (p->stages[k].end - p->stages[k].begin > 1) {
            p->stages[k - 1].end++;
            p->stages[k].begin++;
        }
    }
    if (irand(0, 1)) {
        p->has_layer_recompute = true;
        for (int64_t i = 0; i < m->layers + 2; i++)
            p->layer_recompute[i] = (uint8_t)(i == 0 || i == m->layers + 1 ? 0 : irand(0, 2));
    }
}

/* The built-in profiles written into a plan show their numbers short:
 * "60 us" is 6.0e-05, not 5.9999999999999995e-05 (no run of 13+ digits). */
static void check_short_numbers(void)
{
    for (int i = 0; i < mp_hw_preset_count(); i++) {
        mp_hw hw;
        mp_error err;
        if (mp_hw_preset(mp_hw_preset_name(i), &hw, &err) != MP_OK) {
            failures++;
            continue;
        }
        mp_buf b;
        mp_buf_init(&b);
        cJSON *j = mp_hw_to_json(&hw);
        mp_json_write_yaml(j, 0, &b);
        cJSON_Delete(j);
        int run = 0;
        for (size_t k = 0; k < b.len; k++) {
            char ch = b.data[k];
            run = ch >= '0' && ch <= '9' ? run + 1 : ch == '.' ? run : 0;
            if (run >= 13) {
                failures++;
                fprintf(stderr, "FAIL %s written with a long number near: %.40s\n", hw.name,
                        b.data + (k > 20 ? k - 20 : 0));
                break;
            }
        }
        mp_buf_free(&b);
        cases++;
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 20261201;
    long n = argc > 2 ? strtol(argv[2], NULL, 10) : 3000;
    rng_state = seed;
    char text[2048];

    /* the edge the bug report found, by both routes */
    check(RT_MODEL_YAML, "name: wide\narch: gpt\nlayers: 2\nhidden: 99999\nheads: 1\nvocab: 1000\nseq: 128\n",
          "hidden 99999, heads 1");
    check(RT_HF_JSON, "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 66000, \"n_head\": 1, "
          "\"vocab_size\": 100, \"n_positions\": 128}", "HF n_embd 66000, n_head 1");
    check(RT_MODEL_YAML, "name: widest\narch: gpt\nlayers: 1\nhidden: 65536\nheads: 1\nvocab: 1\nseq: 1\n",
          "head_dim at its limit");

    check_short_numbers();
    mp_plan *plan = malloc(sizeof *plan);
    if (!plan)
        return 2;
    long plans_ok = 0;
    for (long i = 0; i < n; i++) {
        random_model_yaml(text, sizeof text);
        check(RT_MODEL_YAML, text, "random model YAML");
        random_hf_json(text, sizeof text);
        check(RT_HF_JSON, text, "random config.json");
        if (i % 4 == 0)
            random_hw();
        if (i % 4 == 1) {
            random_plan(plan);
            mp_error err;
            cases++;
            if (mp_plan_check(plan, &err) == MP_OK) {
                accepted_n++;
                plans_ok++;
                char why[512];
                if (!rt_plan(plan, why, sizeof why)) {
                    failures++;
                    if (failures <= 10)
                        fprintf(stderr, "FAIL random plan (%s tp%" PRId64 " pp%" PRId64 "): %s\n",
                                plan->config.model.name, plan->config.parallel.tp,
                                plan->config.parallel.pp, why);
                }
            }
        }
    }
    free(plan);
    printf("seed %" PRIu64 ": %ld cases, %ld accepted (%ld plans), %ld failures\n", seed, cases,
           accepted_n, plans_ok, failures);
    /* a generator that produces nothing valid would prove nothing */
    if (accepted_n < n / 4 || plans_ok < n / 40)
        return 1;
    return failures ? 1 : 0;
}
