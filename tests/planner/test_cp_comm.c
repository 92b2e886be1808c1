/* test_cp_comm.c — context parallelism's other exchanges, Megatron-Core's
 * --cp-comm-type all_gather and a2a (Transformer Engine 2.9,
 * AttnFuncWithCPAndKVAllGather and AttnFuncWithCPAndQKVOA2A;
 * docs/cost-model.md §5 CP): their exposed collectives, their copies and
 * all_gather's transient K/V, each against a count by hand, and the plan
 * rules that refuse what Transformer Engine refuses. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/hw.h"
#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "../config_fixture.h"

static bool near(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fabs(b);
}

/* A model on 64 DGX H100 GPUs at s 8192, t and c as given, dp the rest */
static mp_config config(const char *model, int64_t tp, int64_t cp, mp_cp_comm k)
{
    mp_config c = preset_on(model, "dgx-h100");
    c.training = (mp_training){.gpus = 64, .seq = 8192, .global_batch = 64,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = tp, .pp = 1, .vpp = 1, .cp = cp, .dp = 64 / tp / cp,
                               .micro_batch = 1, .sp = tp > 1, .dist_opt = true,
                               .cp_comm_type = k, .schedule = MP_SCHED_1F1B};
    return c;
}

/* LLaMA 3 8B at t 1, c 2, b 1, s 8192 on one DGX H100 (the pair inside
 * the node): a rank holds 4096 tokens; Q: 4096 x 32 x 128 x 2 bytes =
 * 33,554,432; K and V: 2 x 4096 x 8 x 128 x 2 = 16,777,216. A ring
 * all-gather of an X-byte result over 2 GPUs costs 2 latencies, X/2 over
 * the link and X x local/2 through the GPU (comm.c): with the profile's
 * 7.54 us, 450 GB/s x 1 and local pass 0.5526, X = 33,554,432 (both ranks'
 * K and V) gives 15.08 us + 37.28 us + 20.60 us = 72.96 us. all_gather:
 * that in the forward, and the backward's gather and a reduce-scatter of
 * the same size, 145.92 us. a2a: Q, K, V before (X = 50,331,648: 15.08 +
 * 55.92 + 30.90 = 101.90 us) and the output after (X = 33,554,432: 72.96
 * us), 174.86 us each way. */
static void test_exposed(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 1, 2, MP_CP_ALL_GATHER);
    mp_group_place g;
    mp_group_place_of(&c, MP_GROUP_CP, &g);
    assert_int_equal(g.n, 2);
    assert_false(g.cross_domain);
    double f, b;
    mp_cp_other_comm(&c.hw, &g, MP_CP_ALL_GATHER, 33554432.0, 16777216.0, &f, &b);
    assert_true(near(f, 72.96e-6, 2e-3));
    assert_true(near(b, 145.92e-6, 2e-3));
    mp_cp_other_comm(&c.hw, &g, MP_CP_A2A, 33554432.0, 16777216.0, &f, &b);
    assert_true(near(f, 174.86e-6, 2e-3));
    assert_true(near(b, 174.86e-6, 2e-3));
    mp_cp_other_comm(&c.hw, &g, MP_CP_P2P, 33554432.0, 16777216.0, &f, &b);
    assert_true(f == 0.0 && b == 0.0); /* the ring is timed apart */
}

/* LLaMA 3.1 405B at t 4, c 2 (32 of 128 query heads, 2 of 8 K/V heads,
 * 4096 tokens): n_q = 16,777,216, n_kv = 2,097,152 elements, 2 bytes each;
 * counts below are elements read plus written. all_gather: forward the
 * gathered K, V (2 n_kv) reordered, r1 w1: 4 n_kv, x 2 bytes = 16,777,216;
 * backward the reorder again (4 n_kv), the zero fill of the whole dK, dV
 * (w1: 2 n_kv), the two chunks' adds into the keys they saw (5/2 n_kv,
 * r2 w1: 7.5 n_kv) and the reorder back (4 n_kv): 17.5 n_kv x 2 bytes =
 * 73,400,320. a2a: Q, K/V and the output each made contiguous and
 * reordered (r1 w1 twice: 4 per element): 4 x (2 n_q + n_kv) x 2 bytes =
 * 285,212,672, forward and backward (dO; dQ, dK, dV). */
static void test_copies(void **state)
{
    (void)state;
    mp_pass_cost r;
    mp_cp_other_copies(MP_CP_ALL_GATHER, 2.0, 16777216.0, 2097152.0, 2.0, &r);
    assert_true(r.bytes_f == 16777216.0);
    assert_true(r.bytes_b == 73400320.0);
    mp_cp_other_copies(MP_CP_A2A, 2.0, 16777216.0, 2097152.0, 2.0, &r);
    assert_true(r.bytes_f == 285212672.0);
    assert_true(r.bytes_b == 285212672.0);
}

/* all_gather's transient: LLaMA 3 8B, t 1, c 2, b 1, s 8192, bf16: the
 * whole sequence's K and V (8192 x 2 x 8 x 128 x 2 bytes = 33,554,432)
 * and dK, dV of the same size: 67,108,864 bytes; none for p2p or a2a. */
static void test_gather_bytes(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 1, 2, MP_CP_ALL_GATHER);
    assert_true(mp_cp_gather_bytes(&c) == 67108864.0);
    c.parallel.cp_comm_type = MP_CP_A2A;
    assert_true(mp_cp_gather_bytes(&c) == 0.0);
    c.parallel.cp_comm_type = MP_CP_P2P;
    assert_true(mp_cp_gather_bytes(&c) == 0.0);
}

/* The estimate's memory holds all_gather's transient K/V and dK/dV in
 * "other" (docs/cost-model.md §3), as the simulator's stage costs do: the
 * same plan under the ring has exactly those bytes less, and nothing else
 * of the memory differs (the saved activations are the ring's). */
static void test_gather_bytes_in_estimate(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 1, 2, MP_CP_ALL_GATHER);
    mp_estimate ag, ring;
    mp_error err;
    assert_int_equal(mp_estimate_config(&c, NULL, &ag, &err), MP_OK);
    c.parallel.cp_comm_type = MP_CP_P2P;
    assert_int_equal(mp_estimate_config(&c, NULL, &ring, &err), MP_OK);
    assert_true(near(ag.memory.other - ring.memory.other, 67108864.0, 1e-12));
    assert_true(ag.memory.activations == ring.memory.activations);
    assert_true(ag.memory.weights == ring.memory.weights);
}

/* The block: a2a's attention is one causal call over the whole sequence
 * for heads/(t c) heads, the same FLOPs as the rank's share under the ring;
 * its exposed exchange is mp_cp_other_comm's with the block's bytes. */
static void test_block(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 1, 2, MP_CP_A2A);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, c.training.seq, 1, &bs);
    mp_block_time a2a, ag, ring;
    mp_block_time_of(&c, &bs, &a2a);
    mp_group_place g;
    mp_group_place_of(&c, MP_GROUP_CP, &g);
    double f, b;
    mp_cp_other_comm(&c.hw, &g, MP_CP_A2A, 33554432.0, 16777216.0, &f, &b);
    assert_true(near(a2a.cp_fwd, f, 1e-12));
    assert_true(near(a2a.cp_bwd, b, 1e-12));
    c.parallel.cp_comm_type = MP_CP_ALL_GATHER;
    mp_block_time_of(&c, &bs, &ag);
    mp_cp_other_comm(&c.hw, &g, MP_CP_ALL_GATHER, 33554432.0, 16777216.0, &f, &b);
    assert_true(near(ag.cp_fwd, f, 1e-12));
    c.parallel.cp_comm_type = MP_CP_P2P;
    mp_block_time_of(&c, &bs, &ring);
    /* inside one node the ring hides its exchange; the others expose theirs */
    assert_true(ag.cp_fwd > ring.cp_fwd && a2a.cp_fwd > ag.cp_fwd);
}

/* The rules: a2a needs the query and K/V heads to split over t x c
 * (Transformer Engine reshapes each to [cp, heads/cp]); a2a+p2p is refused
 * with its reason; another type than p2p needs cp > 1. */
static void test_check(void **state)
{
    (void)state;
    mp_error err;
    mp_config c = config("llama3-8b", 4, 2, MP_CP_A2A); /* 8 K/V heads over 8: fine */
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    c = config("llama3-8b", 8, 2, MP_CP_A2A); /* 8 K/V heads over 16 */
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "cp_comm_type");
    c = config("llama3-8b", 8, 2, MP_CP_ALL_GATHER);
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    c = config("llama3-8b", 1, 2, MP_CP_A2A_P2P);
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "a2a+p2p"));
    c = config("llama3-8b", 1, 1, MP_CP_ALL_GATHER);
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "cp_comm_type");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exposed),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_gather_bytes),
        cmocka_unit_test(test_gather_bytes_in_estimate),
        cmocka_unit_test(test_block),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
