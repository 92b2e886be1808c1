/* nemo_fixture.h — the configuration the recipe-setting tests start from
 * (test_p2p_overlap.c, test_cross_entropy.c, test_nccl_ub.c,
 * test_nemo2407_memory.c) and their estimate: a LLaMA preset
 * at sequence 8192 on dgx-h100 in FP8 with current scaling, as NVIDIA's
 * NeMo / Megatron-Bridge performance recipes train it; the caller sets the
 * degrees. */
#ifndef MP_TEST_NEMO_FIXTURE_H
#define MP_TEST_NEMO_FIXTURE_H

static mp_config nemo_config(const char *model, int64_t gpus, int64_t global_batch)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset(model);
    c.model.seq = 8192;
    mp_error err;
    assert_int_equal(mp_model_finish(&c.model, &err), MP_OK);
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = gpus, .seq = 8192, .global_batch = global_batch,
                               .precision = MP_DTYPE_FP8, .fp8_recipe = MP_FP8_TENSORWISE};
    return c;
}

/* LLaMA 3 70B as Megatron-Bridge's H100 FP8 recipe runs it (t 4, SP, TP and
 * DP overlap, the distributed optimizer, d 2, micro-batch 1, 128 sequences)
 * on pp pipeline ranks of vpp chunks (test_p2p_overlap.c, test_defer_wgrad.c) */
static inline mp_config nemo_llama70b(int64_t pp, int64_t vpp, mp_schedule_kind sched)
{
    mp_config c = nemo_config("llama3-70b", 4 * pp * 2, 128);
    c.parallel = (mp_parallel){.tp = 4, .pp = pp, .vpp = vpp, .cp = 1, .dp = 2, .micro_batch = 1,
                               .sp = true, .tp_overlap = true, .dist_opt = true,
                               .dp_overlap = true, .schedule = sched};
    return c;
}

/* The estimate of a configuration the caller expects to be accepted. */
static inline mp_estimate nemo_estimate(const mp_config *c)
{
    mp_estimate e;
    mp_error err;
    assert_int_equal(mp_estimate_config(c, NULL, &e, &err), MP_OK);
    return e;
}

#endif
