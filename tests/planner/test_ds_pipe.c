/* test_ds_pipe.c — DeepSpeed's pipeline engine (ds_pipe.c) in the cost model:
 * the PartitionedTensor gathers each stage pays per micro-batch, the second
 * transfer its steps wait on, and autograd's gradient accumulation pass, each against a hand-computed value and
 * against Megatron-LM's stack, which pays neither (the old behaviour for the
 * Megatron-DeepSpeed stacks too, which every assertion below would fail). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/io.h"
#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

/* gpt3-1.3b (24 blocks, h 2048, s 2048), b 2, fp16 (no BF16 optimizer), t 8
 * in each DGX A100, pp 4 over four nodes */
static mp_config config(mp_stack stack, int64_t tp, int64_t pp)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset("gpt3-1.3b");
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-a100", &c.hw, &err), MP_OK);
    /* Megatron-LM as it ran beside these stacks (2021-2022): its pipeline
     * transfers scattered over TP (training.p2p_scatter), the bytes DeepSpeed's
     * engine partitions them to; the tests compare what else differs */
    c.training = (mp_training){.gpus = tp * pp, .seq = c.model.seq, .global_batch = 64,
                               .precision = MP_DTYPE_FP16, .stack = stack,
                               .p2p_scatter = stack == MP_STACK_MEGATRON_LM};
    c.parallel = (mp_parallel){.tp = tp, .pp = pp, .vpp = 1, .cp = 1, .dp = 1, .micro_batch = 2,
                               .recompute = MP_RECOMPUTE_FULL, .schedule = MP_SCHED_1F1B};
    return c;
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* One PartitionedTensor.full() of the b·s·h·2 = 2·2048·2048·2 = 16.8 MB
 * activation, by hand from the profile's fields: the all-gather in one node,
 * 8 latencies (7 ring steps and the start) + bytes·(7/8)/(bw·eff) + bytes·(local/2)/(bw·eff), and the
 * passes at HBM bandwidth: the zeroed buffer (1), the own slice copied in
 * (2/8), ProcessGroupNCCL's copy of the gathered flat tensor back into the
 * list's views (2) and the clone (2): 5.25 passes of the bytes. */
static double one_gather(const mp_config *c)
{
    const mp_hw *hw = &c->hw;
    double bytes = 2.0 * 2048.0 * 2048.0 * 2.0;
    double bw = hw->scale_up.bw_per_gpu * hw->scale_up.efficiency;
    return 8.0 * hw->scale_up.latency + bytes * (7.0 / 8.0) / bw +
           bytes * 0.5 * hw->collective_local_pass / bw + mp_membound_time(hw, 5.25 * bytes, 11.0);
}

static void test_gathers_by_hand(void **state)
{
    (void)state;
    mp_config c = config(MP_STACK_MDS_2021, 8, 4);
    double slice = 2.0 * 2048.0 * 2048.0 * 2.0 / 8.0, f, b;
    double one = one_gather(&c);
    assert_true(one > 0.0);
    mp_ds_partition_gathers(&c, slice, false, false, &f, &b); /* a middle stage */
    assert_true(near(f, one));
    assert_true(near(b, 2.0 * one));
    mp_ds_partition_gathers(&c, slice, true, false, &f, &b); /* the first: nothing arrives */
    assert_true(f == 0.0 && near(b, 2.0 * one));
    mp_ds_partition_gathers(&c, slice, false, true, &f, &b); /* the last: nothing leaves */
    assert_true(near(f, one) && b == 0.0);
    /* BigScience's engine partitions alike */
    mp_config bs = config(MP_STACK_BIGSCIENCE_MDS, 8, 4);
    mp_ds_partition_gathers(&bs, slice, false, false, &f, &b);
    assert_true(near(f, one) && near(b, 2.0 * one));
    /* Megatron-LM's pipeline, t = 1 (nothing partitioned) and pp = 1 (no
     * pipeline engine) gather nothing */
    mp_config mg = config(MP_STACK_MEGATRON_LM, 8, 4);
    mp_ds_partition_gathers(&mg, slice, false, false, &f, &b);
    assert_true(f == 0.0 && b == 0.0);
    mp_config t1 = config(MP_STACK_MDS_2021, 1, 4);
    mp_ds_partition_gathers(&t1, slice, false, false, &f, &b);
    assert_true(f == 0.0 && b == 0.0);
    mp_config p1 = config(MP_STACK_MDS_2021, 8, 1);
    mp_ds_partition_gathers(&p1, slice, false, false, &f, &b);
    assert_true(f == 0.0 && b == 0.0);
}

/* In the stage costs: the forward TP communication is the same under both
 * stacks but for the gather of the input, which the first stage does not
 * have; the backward's of the last stage has no gather (the synchronous
 * backward all-reduces aside, which the first and a middle stage share). */
static void test_gathers_in_stages(void **state)
{
    (void)state;
    mp_config ds = config(MP_STACK_MDS_2021, 8, 4);
    mp_config mg = config(MP_STACK_MEGATRON_LM, 8, 4);
    mp_pipeline_cost pds, pmg;
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(&ds, NULL, &pds, &err), MP_OK);
    assert_int_equal(mp_pipeline_cost_build(&mg, NULL, &pmg, &err), MP_OK);
    double one = one_gather(&ds);
    assert_true(near(pds.stages[0].tp_comm_fwd, pmg.stages[0].tp_comm_fwd));
    for (int k = 1; k < 4; k++) {
        assert_true(near(pds.stages[k].tp_comm_fwd - pmg.stages[k].tp_comm_fwd, one));
        assert_true(near(pds.stages[k].fwd - pmg.stages[k].fwd, one));
    }
    /* stages 1 and 2 hold the same six blocks: their backward differs from
     * the last stage's (six blocks and the head) by the head and the two
     * gathers; stage 1 and 2 are equal */
    assert_true(near(pds.stages[1].tp_comm_bwd, pds.stages[2].tp_comm_bwd));
    mp_block_shape bs;
    mp_block_shape_of(&ds.model, ds.training.seq, ds.parallel.micro_batch, &bs);
    mp_block_time bt;
    mp_block_time_of(&ds, &bs, &bt);
    /* six blocks' backward all-reduces and their recomputed forward ones */
    assert_true(near(pds.stages[1].tp_comm_bwd, 6.0 * (bt.tp_bwd + bt.tp_fwd) + 2.0 * one));
    mp_pipeline_cost_free(&pds);
    mp_pipeline_cost_free(&pmg);
}

/* A step's send and receive follow each other: twice Megatron's transfers
 * per pass on an interior rank, and the simulator is told. The slowest rank
 * here is the last (the head's), which talks to one neighbour: two transfers
 * a micro-batch, Megatron's count (TrainSchedule's closed form, ds_pipe.c;
 * tests/sim/check_ds_schedule.py holds it to a replay of DeepSpeed's lists). */
static void test_serial_transfers(void **state)
{
    (void)state;
    mp_config ds = config(MP_STACK_MDS_2021, 8, 4);
    mp_config mg = config(MP_STACK_MEGATRON_LM, 8, 4);
    assert_true(mp_ds_p2p_transfers_per_pass(&ds) == 2.0);
    assert_true(mp_ds_p2p_transfers_per_pass(&mg) == 1.0);
    mp_estimate eds, emg;
    mp_error err;
    assert_int_equal(mp_estimate_config(&ds, NULL, &eds, &err), MP_OK);
    assert_int_equal(mp_estimate_config(&mg, NULL, &emg, &err), MP_OK);
    assert_true(emg.time.pp_comm > 0.0);
    assert_true(near(eds.time.pp_comm, emg.time.pp_comm));
    /* what m rounds plus the ramps count beyond the closed form's
     * 4m + 2p - 8 transfers (2(p - 1) for m = 1, 2m for p = 2) */
    assert_true(mp_ds_pipe_makespan_ends(4, 32) == 6 && mp_ds_pipe_makespan_ends(35, 2) == 6);
    assert_true(mp_ds_pipe_makespan_ends(4, 1) == 4 && mp_ds_pipe_makespan_ends(2, 9) == 2);
    assert_true(mp_ds_pipe_makespan_ends(1, 9) == 0);
    mp_pipeline_cost pds, pmg;
    assert_int_equal(mp_pipeline_cost_build(&ds, NULL, &pds, &err), MP_OK);
    assert_int_equal(mp_pipeline_cost_build(&mg, NULL, &pmg, &err), MP_OK);
    assert_true(pds.p2p_serial == 1.0 && pmg.p2p_serial == 0.0);
    mp_pipeline_cost_free(&pds);
    mp_pipeline_cost_free(&pmg);
    /* no pipeline, no engine */
    mp_config p1 = config(MP_STACK_MDS_2021, 8, 1);
    assert_true(mp_ds_p2p_transfers_per_pass(&p1) == 1.0);
}

/* Autograd's in-place add of each later micro-batch's 16-bit weight gradient
 * into param.grad: 3 x 2 bytes per parameter at HBM bandwidth, in m - 1 of the
 * m micro-batches (here m = 64 / 2 = 32), on both DeepSpeed stacks without the
 * BF16 optimizer; none on Megatron-LM, none under the BF16 optimizer (which
 * has its own fp32 pass), and it lands in each block's backward. */
static void test_autograd_accumulation(void **state)
{
    (void)state;
    mp_config ds = config(MP_STACK_MDS_2021, 8, 4);
    double want = mp_membound_time(&ds.hw, 6.0 * 1e9, 1.0) * 31.0 / 32.0;
    assert_true(want > 0.0);
    assert_true(near(mp_ds_grad_accumulate_time(&ds, 1e9), want));
    mp_config bs = config(MP_STACK_BIGSCIENCE_MDS, 8, 4); /* fp16: DeepSpeed's FP16 optimizer */
    assert_true(near(mp_ds_grad_accumulate_time(&bs, 1e9), want));
    mp_config mg = config(MP_STACK_MEGATRON_LM, 8, 4);
    assert_true(mp_ds_grad_accumulate_time(&mg, 1e9) == 0.0);
    mp_config bf = config(MP_STACK_BIGSCIENCE_MDS, 8, 4);
    bf.training.precision = MP_DTYPE_BF16;
    assert_true(mp_ds_grad_accumulate_time(&bf, 1e9) == 0.0);
    assert_true(mp_ds_bf16_accumulate_time(&bf, 1e9) > 0.0);
    /* one micro-batch: nothing to accumulate */
    mp_config one = config(MP_STACK_MDS_2021, 8, 4);
    one.training.global_batch = 2;
    assert_true(mp_ds_grad_accumulate_time(&one, 1e9) == 0.0);
    /* in the stage costs: a middle stage's backward (six blocks) is longer by
     * the pass over its parameters; its forward is not */
    mp_config mgf = config(MP_STACK_MEGATRON_LM, 8, 4);
    /* the GPU's time alone: at this size a stage's pass is close to its host
     * time (kernel launches, which the two stacks count differently), and a
     * pass that turns host-bound would hide the GPU work compared here */
    ds.hw.kernel_overhead = mgf.hw.kernel_overhead = 0.0;
    mp_pipeline_cost pds, pmg;
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(&ds, NULL, &pds, &err), MP_OK);
    assert_int_equal(mp_pipeline_cost_build(&mgf, NULL, &pmg, &err), MP_OK);
    double block = 12.0 * 2048.0 * 2048.0 / 8.0 + 13.0 * 2048.0 / 8.0 + 4.0 * 2048.0;
    double compute_ds = pds.stages[1].bwd - pds.stages[1].tp_comm_bwd;
    double compute_mg = pmg.stages[1].bwd - pmg.stages[1].tp_comm_bwd;
    double pass = compute_ds - compute_mg;
    assert_true(pass > 0.0);
    assert_true(fabs(pass - mp_ds_grad_accumulate_time(&ds, 6.0 * block)) <=
                0.02 * mp_ds_grad_accumulate_time(&ds, 6.0 * block));
    assert_true(near(pds.stages[1].fwd - pds.stages[1].tp_comm_fwd,
                     pmg.stages[1].fwd - pmg.stages[1].tp_comm_fwd));
    mp_pipeline_cost_free(&pds);
    mp_pipeline_cost_free(&pmg);
}

/* Megatron-LM before September 2021 (megatron-lm-2021): its backward TP
 * all-reduces synchronous (the asynchronous one came with 16c90445,
 * 2021-09-02) and autograd's gradient accumulation (the fused one with
 * 83b1e42f, 2022-02-13), as the 2021 Megatron-DeepSpeed's; but its own
 * pipeline: no PartitionedTensor gathers, one transfer per pass. */
static void test_megatron_lm_2021(void **state)
{
    (void)state;
    assert_string_equal(mp_stack_name(MP_STACK_MEGATRON_LM_2021), "megatron-lm-2021");
    mp_config old = config(MP_STACK_MEGATRON_LM_2021, 8, 4);
    mp_config ds = config(MP_STACK_MDS_2021, 8, 4);
    mp_config mg = config(MP_STACK_MEGATRON_LM, 8, 4);
    mp_block_shape bs;
    mp_block_shape_of(&old.model, old.training.seq, old.parallel.micro_batch, &bs);
    mp_block_time told, tds, tmg;
    mp_block_time_of(&old, &bs, &told);
    mp_block_time_of(&ds, &bs, &tds);
    mp_block_time_of(&mg, &bs, &tmg);
    assert_true(near(told.tp_bwd, tds.tp_bwd));
    assert_true(told.tp_bwd > tmg.tp_bwd * 1.01);
    assert_true(near(mp_ds_grad_accumulate_time(&old, 1e9), mp_ds_grad_accumulate_time(&ds, 1e9)));
    assert_true(mp_ds_grad_accumulate_time(&old, 1e9) > 0.0);
    assert_false(mp_ds_pipe_engine(&old));
    assert_true(mp_ds_p2p_transfers_per_pass(&old) == 1.0);
    double f, b;
    mp_ds_partition_gathers(&old, 1e6, false, false, &f, &b);
    assert_true(f == 0.0 && b == 0.0);
    mp_estimate eold, emg;
    mp_error err;
    assert_int_equal(mp_estimate_config(&old, NULL, &eold, &err), MP_OK);
    assert_int_equal(mp_estimate_config(&mg, NULL, &emg, &err), MP_OK);
    assert_true(near(eold.time.pp_comm, emg.time.pp_comm));
    assert_true(eold.time.step > emg.time.step);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gathers_by_hand),
        cmocka_unit_test(test_gathers_in_stages),
        cmocka_unit_test(test_serial_transfers),
        cmocka_unit_test(test_autograd_accumulation),
        cmocka_unit_test(test_megatron_lm_2021),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
