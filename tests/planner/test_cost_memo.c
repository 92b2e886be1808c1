/* test_cost_memo.c — the search's memo of per-item costs (planner/cost_memo.h)
 * changes no number: over many random configurations of dense, MoE, windowed
 * and encoder-decoder models, an estimate through a memo equals the uncached
 * one bit for bit, whether the memo is shared by all of them or warmed by a
 * configuration that differs only in the fields its key leaves out. The
 * second test is the key's account: should an item's cost come to read one
 * of those fields, it fails (and cost_memo.c's mp_cost_memo_key must keep the
 * field). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/hw.h"
#include "core/model.h"
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_memo.h"

typedef struct model_case {
    const char *model, *hw;
    int64_t gpus;
} model_case;

static const model_case cases[] = {
    {"deepseek-v3", "dgx-h100", 256},  /* MoE: dense first blocks, MLA, MTP */
    {"mixtral-8x7b", "dgx-h100", 64},  /* MoE in every block */
    {"gpt-oss-120b", "dgx-h100", 64},  /* windowed and full attention blocks */
    {"llama3-70b", "dgx-a100", 128},   /* dense, grouped-query attention */
    {"gpt3-13b", "dgx-a100", 32},      /* dense */
    {"t5-3b", "dgx-a100", 16},         /* encoder-decoder (estimated uncached) */
};

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static int64_t pick(const int64_t *v, int n) { return v[rnd() % (uint64_t)n]; }

/* A random divisor of n (at most max). */
static int64_t divisor(int64_t n, int64_t max)
{
    int64_t d[256];
    int k = 0;
    for (int64_t i = 1; i <= n && i <= max && k < 256; i++)
        if (n % i == 0) d[k++] = i;
    return pick(d, k);
}

static void base_of(const model_case *mc, mp_config *c)
{
    memset(c, 0, sizeof *c);
    const mp_model *m = mp_model_preset(mc->model);
    assert_non_null(m);
    c->model = *m;
    mp_error err;
    assert_int_equal(mp_hw_preset(mc->hw, &c->hw, &err), MP_OK);
    /* one global batch for every candidate, as in a search: the memo keys
     * details on the training as a whole; gpus * 8 is a multiple of every
     * dp * micro_batch below, and its micro-batches of every pp */
    c->training = (mp_training){.gpus = mc->gpus, .seq = m->seq, .global_batch = mc->gpus * 8,
                                .precision = MP_DTYPE_BF16};
}

/* The fields mp_cost_memo_key blanks, drawn at random for c's other settings. */
static void draw_blanked(mp_config *c)
{
    mp_parallel *p = &c->parallel;
    const mp_model *m = &c->model;
    int64_t L = m->layers;
    p->pp = divisor(c->training.gpus / (p->tp * p->cp), L);
    p->dp = c->training.gpus / (p->tp * p->cp * p->pp);
    int64_t vs[8];
    int nv = 0;
    for (int64_t v = 1; v <= 4; v++)
        if (v == 1 || (p->pp > 1 && L % (p->pp * v) == 0)) vs[nv++] = v;
    p->vpp = pick(vs, nv);
    p->pipeline_layout[0] = '\0';
    if (p->vpp > 1) {
        const int64_t s[] = {MP_SCHED_INTERLEAVED, MP_SCHED_INTERLEAVED, MP_SCHED_ZBV,
                             MP_SCHED_DUALPIPEV};
        p->schedule = (mp_schedule_kind)(p->vpp == 2 ? pick(s, 4) : MP_SCHED_INTERLEAVED);
    } else {
        const int64_t s[] = {MP_SCHED_1F1B, MP_SCHED_GPIPE, MP_SCHED_ZBH1, MP_SCHED_DUALPIPE};
        p->schedule = (mp_schedule_kind)(p->pp > 1 ? pick(s, 4) : MP_SCHED_1F1B);
    }
    p->recompute = (mp_recompute)(rnd() % MP_RECOMPUTE_COUNT);
    p->dist_opt = rnd() % 2;
    p->zero = p->dist_opt && p->pp == 1 ? (int64_t)(rnd() % 4) : 0;
    p->hsdp = p->zero == 3 && rnd() % 2;
    p->dp_overlap = rnd() % 2;
}

/* A random configuration of mc's model (valid or not: callers check). */
static void draw(const model_case *mc, mp_config *c)
{
    base_of(mc, c);
    mp_parallel *p = &c->parallel;
    const mp_model *m = &c->model;
    const int64_t tps[] = {1, 2, 4, 8};
    p->tp = pick(tps, 4);
    p->cp = c->model.arch == MP_ARCH_T5 ? 1 : (int64_t)(1 + rnd() % 2);
    const int64_t mbs[] = {1, 2, 4, 8};
    p->micro_batch = pick(mbs, 4);
    p->sp = p->tp > 1 && rnd() % 2;
    p->tp_overlap = p->sp && rnd() % 2;
    draw_blanked(c);
    if (mp_model_is_moe(m)) {
        p->etp = rnd() % 2 ? 1 : p->tp;
        p->ep = divisor(m->moe.experts, p->tp * p->cp * p->dp / p->etp);
        p->dispatcher = (mp_dispatcher)(rnd() % MP_DISPATCH_COUNT);
        p->moe_a2a_overlap = p->ep > 1 && rnd() % 2;
        p->shared_expert_overlap = rnd() % 2;
    }
    if (!strcmp(c->hw.name, "dgx-h100") && rnd() % 3 == 0)
        c->training.precision = MP_DTYPE_FP8;
}

static bool valid(const mp_config *c)
{
    mp_error err;
    return mp_config_check(c, &err) == MP_OK;
}

static void assert_same(const mp_config *c, const mp_estimate *plain, const mp_estimate *memo)
{
    if (!memcmp(plain, memo, sizeof *plain))
        return;
    print_error("%s tp=%lld pp=%lld vpp=%lld cp=%lld dp=%lld mb=%lld ep=%lld etp=%lld sched=%d: "
                "step %.17g uncached, %.17g through the memo; peak %.17g, %.17g\n",
                c->model.name, (long long)c->parallel.tp, (long long)c->parallel.pp,
                (long long)c->parallel.vpp, (long long)c->parallel.cp,
                (long long)c->parallel.dp, (long long)c->parallel.micro_batch,
                (long long)c->parallel.ep, (long long)c->parallel.etp, c->parallel.schedule,
                plain->time.step, memo->time.step, plain->memory.peak, memo->memory.peak);
    fail();
}

/* One memo for all the configurations of every model, interleaved (each
 * model change empties it): every estimate as the uncached one. */
static void test_shared_memo_agrees(void **state)
{
    (void)state;
    mp_cost_memo *memo = mp_cost_memo_new();
    assert_non_null(memo);
    int n = 0, reused = 0;
    for (int round = 0; round < 1200; round++) {
        const model_case *mc = &cases[(round / 100) % (sizeof cases / sizeof cases[0])];
        mp_config c;
        draw(mc, &c);
        if (!valid(&c)) continue;
        mp_estimate a, b;
        mp_error err;
        assert_int_equal(mp_estimate_config(&c, NULL, &a, &err), MP_OK);
        size_t before = mp_cost_memo_size(memo);
        assert_int_equal(mp_estimate_config_memo(&c, NULL, memo, &b, &err), MP_OK);
        assert_same(&c, &a, &b);
        /* again: now from the memo */
        assert_int_equal(mp_estimate_config_memo(&c, NULL, memo, &b, &err), MP_OK);
        assert_same(&c, &a, &b);
        reused += mp_cost_memo_size(memo) == before;
        n++;
    }
    assert_true(n > 300);
    assert_true(reused > 10); /* some configurations shared a slot */
    mp_cost_memo_free(memo);
}

/* c estimated through a memo warmed by w, which differs from c only in the
 * fields the key blanks: c's estimate as the uncached one. */
static void test_blanked_fields_unread(void **state)
{
    (void)state;
    int shared = 0;
    for (int round = 0; round < 3000; round++) {
        const model_case *mc = &cases[round % (sizeof cases / sizeof cases[0])];
        if (!strcmp(mc->model, "t5-3b")) continue; /* estimated uncached */
        mp_config c, w;
        draw(mc, &c);
        if (!valid(&c)) continue;
        w = c;
        draw_blanked(&w);
        if (!valid(&w)) continue;
        mp_cost_memo *memo = mp_cost_memo_new();
        assert_non_null(memo);
        mp_estimate a, b;
        mp_error err;
        assert_int_equal(mp_estimate_config_memo(&w, NULL, memo, &b, &err), MP_OK);
        assert_int_equal(mp_estimate_config(&c, NULL, &a, &err), MP_OK);
        assert_int_equal(mp_estimate_config_memo(&c, NULL, memo, &b, &err), MP_OK);
        assert_same(&c, &a, &b);
        shared += mp_cost_memo_size(memo) == 1; /* c used w's slot */
        mp_cost_memo_free(memo);
    }
    assert_true(shared > 200);
}

/* The key: blanked fields equal, every other field (a new one too) apart. */
static void test_key(void **state)
{
    (void)state;
    mp_config c;
    base_of(&cases[0], &c);
    mp_parallel_defaults(&c.parallel);
    mp_parallel a = c.parallel, b = c.parallel, ka, kb;
    b.pp = 4;
    b.dp = 7;
    b.vpp = 3;
    b.recompute = MP_RECOMPUTE_FULL;
    b.dist_opt = !a.dist_opt;
    b.dp_overlap = !a.dp_overlap;
    b.schedule = MP_SCHED_GPIPE;
    strcpy(b.pipeline_layout, "Et|tL");
    mp_cost_memo_key(&a, &ka);
    mp_cost_memo_key(&b, &kb);
    assert_memory_equal(&ka, &kb, sizeof ka);
    /* ZB-H1 with a pipeline times its weight gradients apart: a key of its own */
    b.schedule = MP_SCHED_ZBH1;
    mp_cost_memo_key(&b, &kb);
    assert_memory_not_equal(&ka, &kb, sizeof ka);
    b = a;
    b.micro_batch = a.micro_batch + 1;
    mp_cost_memo_key(&b, &kb);
    assert_memory_not_equal(&ka, &kb, sizeof ka);
}

/* mp_cost_memo_blob: a value found only under the very key bytes it was
 * stored with (a key one bit apart, or shorter, misses), and only at its size. */
static void test_blob(void **state)
{
    (void)state;
    mp_cost_memo *memo = mp_cost_memo_new();
    assert_non_null(memo);
    bool filled;
    for (int i = 0; i < 2000; i++) { /* past several growths of the table */
        double key[3] = {1.0, (double)i, 0.5};
        double *v = mp_cost_memo_blob(memo, key, sizeof key, sizeof *v, &filled);
        assert_non_null(v);
        assert_false(filled);
        *v = 3.0 * i;
    }
    for (int i = 0; i < 2000; i++) {
        double key[3] = {1.0, (double)i, 0.5};
        double *v = mp_cost_memo_blob(memo, key, sizeof key, sizeof *v, &filled);
        assert_true(filled);
        assert_true(*v == 3.0 * i);
        assert_null(mp_cost_memo_blob(memo, key, sizeof key, 2 * sizeof *v, &filled));
        assert_false(filled);
    }
    double key[3] = {1.0, 7.0, 0.5};
    unsigned char bytes[sizeof key];
    memcpy(bytes, key, sizeof key);
    bytes[sizeof key - 1] ^= 1;
    double *v = mp_cost_memo_blob(memo, bytes, sizeof bytes, sizeof *v, &filled);
    assert_non_null(v);
    assert_false(filled);
    *v = 0.0;
    v = mp_cost_memo_blob(memo, key, 2 * sizeof key[0], sizeof *v, &filled);
    assert_false(filled);
    if (v) *v = 0.0;
    assert_false(mp_cost_memo_blob(NULL, key, sizeof key, sizeof *v, &filled));
    /* keys of any byte length (the V replays' are 5n doubles plus an int32
     * and a double, 4 mod 8): the slot is aligned for doubles all the same,
     * stored and found again */
    for (size_t len = 1; len <= 3 * sizeof(double); len++) {
        unsigned char odd[3 * sizeof(double)] = {0};
        odd[0] = (unsigned char)(0xA0 + len);
        for (int pass = 0; pass < 2; pass++) {
            double *slot = mp_cost_memo_blob(memo, odd, len, 2 * sizeof *slot, &filled);
            assert_non_null(slot);
            assert_int_equal((uintptr_t)slot % _Alignof(max_align_t), 0);
            assert_int_equal(filled, pass == 1);
            if (pass == 0)
                slot[0] = slot[1] = (double)len;
            else
                assert_true(slot[0] == (double)len && slot[1] == (double)len);
        }
    }
    mp_cost_memo_free(memo);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_memo_agrees),
        cmocka_unit_test(test_blanked_fields_unread),
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_blob),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
