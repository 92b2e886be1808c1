/* moe_fixture.h — the MoE planner tests' configuration (test_moe.c,
 * test_moe_dispatch.c). */
#ifndef MP_TEST_MOE_FIXTURE_H
#define MP_TEST_MOE_FIXTURE_H

/* A config of a preset on a hand-made network: 8-GPU domains of 100 GB/s,
 * 25 GB/s per GPU across, no latency, so transfer times are bytes / rate. */
static mp_config moe_config(const char *model, int64_t gpus, int64_t tp, int64_t ep, int64_t etp)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset(model);
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.hw.scale_up.gpus_per_domain = 8;
    c.hw.gpus_per_node = 8;
    c.hw.scale_up.bw_per_gpu = 100e9;
    c.hw.scale_up.efficiency = 1.0;
    c.hw.scale_up.latency = 0.0;
    c.hw.scale_out.bw_per_gpu = 25e9;
    c.hw.scale_out.efficiency = 1.0;
    c.hw.scale_out.latency = 0.0;
    c.training.gpus = gpus;
    c.training.seq = 4096;
    c.training.global_batch = gpus / tp * 2;
    c.training.precision = MP_DTYPE_BF16;
    mp_parallel_defaults(&c.parallel);
    c.parallel.tp = tp;
    c.parallel.sp = tp > 1;
    c.parallel.dp = gpus / tp;
    c.parallel.ep = ep;
    c.parallel.etp = etp;
    c.parallel.dist_opt = true;
    return c;
}

#endif
