/* ds_pipe.c — what DeepSpeed's pipeline engine costs beyond Megatron's
 * pipeline, for the two Megatron-DeepSpeed stacks (training.stack), which run
 * their pipelines on it (docs/cost-model.md §5, "Megatron-DeepSpeed").
 *
 * Read in the engine that ran them: deepspeed/runtime/pipe/engine.py,
 * schedule.py and runtime/utils.py (PartitionedTensor) of microsoft/DeepSpeed,
 * as of e2fdd254e (2021-09-29, "Big science related changes", which
 * partitions the gradients as well as the activations) through 56c52238
 * (2022-04, BLOOM's). */
#include "planner/cost.h"
#include "planner/cost_internal.h"

bool mp_ds_pipe_engine(const mp_config *c)
{
    mp_stack s = c->training.stack;
    return (s == MP_STACK_BIGSCIENCE_MDS || s == MP_STACK_MDS_2021) && c->parallel.pp > 1;
}

/* Transfers a rank waits on per pass of a micro-batch. Megatron posts a
 * step's send and receive to the same neighbour as one batched operation
 * (send_forward_recv_backward, send_backward_recv_forward), so they move
 * together. DeepSpeed's TrainSchedule gives every step its own instructions
 * run one after the other, each a blocking p2p.send or p2p.recv: a forward
 * step receives its activation and then sends the previous backward's
 * gradient, a backward step sends the previous forward's output and then
 * receives its gradient. The two transfers of a step follow each other on the
 * critical path. */
double mp_ds_p2p_transfers_per_pass(const mp_config *c)
{
    return mp_ds_pipe_engine(c) ? 2.0 : 1.0;
}

/* TrainSchedule (pipe/schedule.py 189-241) on p equal stages, every
 * transfer c and c <= min(F, B), replayed with blocking rendezvous: the
 * makespan is (m + p - 1)(F + B) + n c with n = 4m + 2p - 8 (p >= 3, m >= 2),
 * 2(p - 1) (m = 1), 2m (p = 2) (tests/sim/check_ds_schedule.py). A neighbour
 * pair meets only where one turns from forward to backward and the other the
 * other way, on the data dependency itself, so the steps are not held in
 * lock-step: an interior rank waits 4 transfers a micro-batch, an end rank 2,
 * a hop of the fill or drain 2 (4m + 2(p - 1) on the estimate's m rounds of
 * the slowest rank plus the others' ramps). What that sum counts beyond n, in
 * transfers: returned here, subtracted by the estimate. */
int64_t mp_ds_pipe_makespan_ends(int64_t p, int64_t m)
{
    if (p < 2)
        return 0;
    if (p == 2)
        return 2;
    return m == 1 ? 4 : 6;
}

/* One PartitionedTensor.full() over the tensor-parallel group
 * (runtime/utils.py 693-721 at e2fdd254e): a zeroed buffer of the whole
 * tensor (one write), the rank's own slice copied into it (a read and a write
 * of 1/t), the all-gather of the t slices into it, and the clone full()
 * returns (a read and a write), all before the pass that needs it can start.
 * full() hands dist.all_gather a list of t views of its buffer; PyTorch's
 * ProcessGroupNCCL::allgather gathers a list into a flat tensor of its own
 * (flatten_for_scatter_gather) and copies each piece back into the list's
 * tensors on the NCCL stream before the work completes (pytorch 00f5dfd5,
 * torch/lib/c10d/ProcessGroupNCCL.cpp, allgather's post-processing
 * `outputTensors[i][j].copy_(outputFlattened[i][j], true)`): another read
 * and write of the whole tensor, t copies. (5 + 2/t) passes in all. */
static double gather_time(const mp_config *c, double whole_bytes)
{
    mp_group_place g;
    mp_group_place_of(c, MP_GROUP_TP, &g);
    double t = (double)c->parallel.tp;
    return mp_coll_time(&c->hw, &g, MP_COLL_ALLGATHER, whole_bytes) +
           mp_membound_time(&c->hw, (5.0 + 2.0 / t) * whole_bytes, 3.0 + t);
}

/* With t > 1 the engine sends each tensor-parallel rank's 1/t slice of the
 * activation and of its gradient (is_pipe_partitioned, is_grad_partitioned)
 * and rebuilds the whole tensor on arrival: a stage's forward gathers its
 * input (not on the first stage); its backward gathers the output it had
 * partitioned before sending, to restore the autograd graph, and the gradient
 * it received (not on the last stage). slice_bytes: one rank's slice. */
void mp_ds_partition_gathers(const mp_config *c, double slice_bytes, bool first, bool last,
                             double *fwd, double *bwd)
{
    *fwd = *bwd = 0.0;
    if (!mp_ds_pipe_engine(c) || c->parallel.tp <= 1 || !(slice_bytes > 0.0))
        return;
    double one = gather_time(c, slice_bytes * (double)c->parallel.tp);
    if (!first)
        *fwd = one;
    if (!last)
        *bwd = 2.0 * one;
}

/* DeepSpeed's engine without its BF16 optimizer (its FP16 optimizer, ZeRO-1,
 * and the 2021 engine MT-NLG's bf16 ran on) leaves the gradients of the 16-bit
 * parameters in param.grad, where autograd accumulates them across the
 * micro-batches: PyTorch's AccumulateGrad steals the first micro-batch's
 * weight gradient and runs `variable_grad += new_grad` in place for every
 * later one (torch/csrc/autograd/functions/accumulate_grad.h), a read of both
 * and a write, 3 x 2 bytes per parameter at HBM bandwidth in m - 1 of the m
 * backward passes. Megatron-LM accumulates into its fp32 main_grad inside the
 * weight-gradient GEMM (gradient accumulation fusion); the BF16 optimizer's
 * own fp32 pass is mp_ds_bf16_accumulate_time (it clears the 16-bit grads
 * after each micro-batch, so autograd adds nothing there). Per micro-batch,
 * averaged over the m. */
double mp_ds_grad_accumulate_time(const mp_config *c, double params)
{
    if (c->training.stack == MP_STACK_MEGATRON_LM || mp_ds_bf16_optimizer(c) || !(params > 0.0))
        return 0.0;
    int64_t m = mp_config_microbatches(c);
    if (m <= 1)
        return 0.0;
    double dt = c->training.precision == MP_DTYPE_FP32 ? 4.0 : 2.0;
    return mp_membound_time(&c->hw, 3.0 * dt * params, 1.0) * (double)(m - 1) / (double)m;
}
