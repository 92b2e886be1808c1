/* config_fixture.h — configurations several unit tests start from (tests/core
 * and tests/planner). Include after <cmocka.h>; the functions are static
 * inline, so a test may use one and not the other. */
#ifndef MP_TEST_CONFIG_FIXTURE_H
#define MP_TEST_CONFIG_FIXTURE_H
#include <string.h>

#include "core/config.h"
#include "core/hw.h"
#include "core/model.h"
#include "core/tables.h"

/* A model preset on a hardware preset, everything else 0: the caller sets the
 * training and the degrees. */
static inline mp_config preset_on(const char *model, const char *hw)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset(model);
    mp_error err;
    assert_int_equal(mp_hw_preset(hw, &c.hw, &err), MP_OK);
    return c;
}

/* GPT-3 175B on 1024 DGX A100 GPUs in bf16, as Narayanan et al. 2021 and
 * Korthikanti et al. 2022 train it: tp 8 with SP, pp stages of vpp chunks
 * each (interleaved 1F1B where vpp > 1), dp the rest, micro-batch 1, global
 * batch 1536, selective recompute, distributed optimizer (test_config.c,
 * test_layout.c, test_dp_aligned.c). */
static inline mp_config gpt3_175b_config(int64_t pp, int64_t vpp)
{
    mp_config c = preset_on("gpt3-175b", "dgx-a100"); /* 96 layers */
    c.training = (mp_training){.gpus = 1024, .seq = 2048, .global_batch = 1536,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = 8, .pp = pp, .vpp = vpp, .cp = 1, .dp = 1024 / (8 * pp),
                               .sp = true, .micro_batch = 1,
                               .recompute = MP_RECOMPUTE_SELECTIVE, .dist_opt = true,
                               .schedule = vpp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B};
    return c;
}

/* A model preset on a hardware preset at sequence 4096: gpus, the global
 * batch and the precision given, Megatron's parallel defaults
 * (mp_parallel_defaults); the caller sets the degrees. */
static inline mp_config preset_config(const char *model, const char *hw, int64_t gpus,
                                      int64_t global_batch, mp_dtype precision)
{
    mp_config c = preset_on(model, hw);
    c.training.gpus = gpus;
    c.training.seq = 4096;
    c.training.global_batch = global_batch;
    c.training.precision = precision;
    mp_parallel_defaults(&c.parallel);
    return c;
}

/* A GPU and scale-up fabric `factor` times faster than the profile's, with no
 * collective latency: a pass's GPU time vanishes beside its host dispatch, so
 * what is left of it is the host's (test_window.c, test_host_count.c). */
static inline void host_bound_hw(mp_hw *hw, double factor)
{
    for (int i = 0; i < MP_DTYPE_COUNT; i++)
        hw->peak_flops[i] *= factor;
    hw->matmul_achievable *= factor; /* the GEMM curve's transfer ratio (compute.c) */
    hw->hbm_bw *= factor;
    hw->scale_up.bw_per_gpu *= factor;
    hw->scale_up.latency = 0.0;
}

#endif
