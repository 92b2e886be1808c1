/* oss_cost.c — costs of GPT-OSS's clamped expert SwiGLU as Megatron-Core
 * runs it (docs/cost-model.md §12a, "The clamped SwiGLU").
 *
 * GPT-OSS clamps its expert activation's inputs (`glu_limit`, the model
 * card's clamp at 7: the gate half to at most 7, the linear half to
 * [-7, 7]). Megatron-Core runs the experts' quick-GEGLU through
 * weighted_bias_quick_geglu_impl (megatron/core/fusions/fused_bias_geglu.py,
 * core_v0.15.0 and core_v0.16.0, called from TEGroupedMLP.forward in
 * transformer/moe/experts.py with activation_func_clamp_value), and there
 * the clamp is not in the fused (torch.compile) kernel but eager PyTorch in
 * front of it:
 *
 *     x_glu, x_linear = input.chunk(2, -1)
 *     input = torch.cat((x_glu.clamp(min=None, max=v),
 *                        x_linear.clamp(min=-v, max=v)), -1)
 *     linear_offset = torch.tensor(linear_offset, dtype=..., device=input.device)
 *
 * Over the n = routed copies x 2f 16-bit elements of the grouped FC1's
 * output, forward: each clamp reads and writes its half (2 bytes an element
 * of the whole each), the cat reads and writes the whole (4): 8 bytes and 3
 * kernels. Backward (autograd): the cat's gradient is two slices (no
 * kernel); PyTorch's clamp_backward (torch/csrc/autograd/FunctionsManual.cpp)
 * is where(self <= max, grad, zero) on the gate half (the comparison r2 w1,
 * the where r1 r2 w2: 8 bytes a half element) and where((self >= min)
 * .logical_and_(self <= max), grad, zero) on the linear half (two
 * comparisons r2 w1, the and r1 r1 w1, the where r1 r2 w2: 14), each after
 * an at::scalar_tensor zero (a fill launch); the chunk's gradient is
 * split_backward's cat of the two halves (r2 w2 on the whole): 4 + 7 + 4 =
 * 15 bytes an element, 3 + 5 + 1 = 9 kernels.
 *
 * torch.tensor(python scalar, device=cuda) copies from pageable host memory
 * and synchronises the stream (PyTorch issues #120996 and #190217: "called a
 * synchronizing CUDA operation"), so each call drains the GPU's queue: the
 * GPU then waits for the host to issue the next kernel, one dispatch (the
 * profile's kernel_overhead) exposed per call, forward and again when
 * moe_act's recompute reruns the function in the backward (not under a
 * CUDA graph of the MoE layer, which replays without the host; Megatron
 * captures it for drop-and-pad routing only).
 *
 * Memory: without a checkpoint the clamps' autograd keeps their input (the
 * FC1 output) and the fused function its own input (the cat's clamped copy):
 * 2 x 2f bytes a routed copy beyond the one activation input the model
 * counts. Megatron's moe_act checkpoint (CheckpointWithoutOutput) keeps only
 * the function's inputs, so it frees that copy with FC2's input. */
#include "planner/cost_internal.h"

static bool glu_clamped(const mp_model *m)
{
    return m->glu_limit > 0.0 && m->activation == MP_ACT_SWIGLU && m->moe.experts > 0;
}

void mp_oss_glu_clamp(const mp_model *m, double routed, double f, mp_pass_cost *out,
                      double *syncs)
{
    out->bytes_f = out->bytes_b = out->kernels_f = out->kernels_b = 0.0;
    *syncs = 0.0;
    if (!glu_clamped(m) || !(routed > 0.0) || !(f > 0.0))
        return;
    double n = routed * 2.0 * f; /* the grouped FC1's output, 16-bit */
    out->bytes_f = 8.0 * n;
    out->bytes_b = 15.0 * n;
    out->kernels_f = 3.0;
    out->kernels_b = 9.0;
    *syncs = 1.0;
}

double mp_oss_glu_clamp_saved_bytes(const mp_model *m, double routed, double f)
{
    if (!glu_clamped(m) || !(routed > 0.0) || !(f > 0.0))
        return 0.0;
    return routed * 2.0 * (2.0 * f);
}
