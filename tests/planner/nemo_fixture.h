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

/* The estimate of a configuration the caller expects to be accepted. */
static inline mp_estimate nemo_estimate(const mp_config *c)
{
    mp_estimate e;
    mp_error err;
    assert_int_equal(mp_estimate_config(c, NULL, &e, &err), MP_OK);
    return e;
}

#endif
