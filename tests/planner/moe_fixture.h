/* moe_fixture.h — the MoE planner tests' configuration (test_moe.c,
 * test_moe_dispatch.c). */
#ifndef MP_TEST_MOE_FIXTURE_H
#define MP_TEST_MOE_FIXTURE_H
#include "../config_fixture.h"

/* A config of a preset on a hand-made network: 8-GPU domains of 100 GB/s,
 * 25 GB/s per GPU across, no latency, so transfer times are bytes / rate. */
static mp_config moe_config(const char *model, int64_t gpus, int64_t tp, int64_t ep, int64_t etp)
{
    mp_config c = preset_config(model, "dgx-h100", gpus, gpus / tp * 2, MP_DTYPE_BF16);
    c.hw.scale_up.gpus_per_domain = 8;
    c.hw.gpus_per_node = 8;
    c.hw.scale_up.bw_per_gpu = 100e9;
    c.hw.scale_up.efficiency = 1.0;
    c.hw.scale_up.latency = 0.0;
    c.hw.scale_out.bw_per_gpu = 25e9;
    c.hw.scale_out.efficiency = 1.0;
    c.hw.scale_out.latency = 0.0;
    c.parallel.tp = tp;
    c.parallel.sp = tp > 1;
    c.parallel.dp = gpus / tp;
    c.parallel.ep = ep;
    c.parallel.etp = etp;
    c.parallel.dist_opt = true;
    return c;
}

#endif
