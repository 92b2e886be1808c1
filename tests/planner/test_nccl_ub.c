/* test_nccl_ub.c — the DP collectives on NCCL user buffers
 * (parallel.nccl_ub; docs/cost-model.md §5, "SM contention"): Megatron-Core's
 * table of the SMs an all-gather / reduce-scatter then holds (4 / 5 inside an
 * NVLink domain, 16 / 16 across domains, 1 / 4 with one member per node), in
 * place of NCCL's CTAs (16 on dgx-h100), for the compute they overlap. */
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

#include "nemo_fixture.h"

/* LLaMA 3 8B under Megatron FSDP on one DGX H100 (Megatron-Bridge's recipe) */
static mp_config fsdp8(void)
{
    mp_config c = nemo_config("llama3-8b", 8, 32);
    c.training.fp8_param_gather = c.training.grad_reduce_bf16 = true;
    c.parallel = (mp_parallel){.tp = 1, .pp = 1, .vpp = 1, .cp = 1, .dp = 8, .micro_batch = 1,
                               .dist_opt = true, .zero = 3, .dp_overlap = true,
                               .schedule = MP_SCHED_1F1B};
    return c;
}

static double step(const mp_config *c)
{
    mp_estimate e;
    mp_error err;
    assert_int_equal(mp_estimate_config(c, NULL, &e, &err), MP_OK);
    return e.time.step;
}

static void test_table(void **state)
{
    (void)state;
    mp_config c = fsdp8();
    double S = c.hw.sm_count;
    mp_group_place nvl = {.n = 8, .cross_domain = false, .per_node = 8.0};
    mp_group_place mixed = {.n = 64, .cross_domain = true, .per_node = 8.0};
    mp_group_place ib = {.n = 16, .cross_domain = true, .per_node = 1.0};
    /* off: NCCL's CTAs whatever the group */
    assert_true(mp_dp_sm_share(&c, &nvl, false) == c.hw.nccl_ctas / S);
    assert_true(mp_dp_sm_share(&c, &ib, true) == c.hw.nccl_ctas / S);
    c.parallel.nccl_ub = true;
    assert_true(mp_dp_sm_share(&c, &nvl, false) == 4.0 / S);
    assert_true(mp_dp_sm_share(&c, &nvl, true) == 5.0 / S);
    assert_true(mp_dp_sm_share(&c, &mixed, false) == 16.0 / S);
    assert_true(mp_dp_sm_share(&c, &mixed, true) == 16.0 / S);
    assert_true(mp_dp_sm_share(&c, &ib, false) == 1.0 / S);
    assert_true(mp_dp_sm_share(&c, &ib, true) == 4.0 / S);
}

/* ZeRO-3 inside one node: its gathers hold 4 SMs and its reductions 5, so the
 * step lies between the steps of NCCL with 4 and with 5 CTAs, below 16's */
static void test_fsdp_step(void **state)
{
    (void)state;
    mp_config c = fsdp8();
    double off = step(&c);
    c.hw.nccl_ctas = 4.0;
    double four = step(&c);
    c.hw.nccl_ctas = 5.0;
    double five = step(&c);
    c.hw.nccl_ctas = 16.0;
    c.parallel.nccl_ub = true;
    double on = step(&c);
    assert_true(on < off);
    assert_true(four <= on && on <= five);
    assert_true(four < five);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_fsdp_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
