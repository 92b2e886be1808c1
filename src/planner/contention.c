/* contention.c — communication kernels that run beside compute take SMs from
 * it (docs/cost-model.md, "SM contention").
 *
 * A collective or all-to-all kernel occupies a fixed number of SMs for as
 * long as it runs (NCCL: one CTA per channel; DeepEP and HybridEP: the SMs
 * they are given; Transformer Engine's userbuffers overlap: its configured
 * num_sm). Compute that overlaps it runs on the other SMs, at (S - s)/S of
 * its rate. Over a phase where comm seconds of communication overlap
 * compute seconds of work, the work done while the kernel runs is
 * comm (1 - s/S); so the phase lasts
 *
 *     max(comm, compute + comm s/S)
 *
 * and the communication's exposed part, beyond the compute, is
 * max(comm - compute, comm s/S): never less than the SMs' share of it. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "planner/cost_internal.h"
#include "planner/megatron.h"

/* Megatron-Core's defaults for the flex dispatcher's SMs
 * (megatron/core/transformer/transformer_config.py, moe_deepep_num_sms = 20
 * and moe_hybridep_num_sms = 16, at NVIDIA/Megatron-LM 3df200905e, the
 * 25.11/26.02 containers' releases). DeepSeek-V3 §3.2.1 gives DeepEP's
 * 20 of an H800's 132 SMs. */
#define DEEPEP_SMS 20.0
#define HYBRIDEP_SMS 16.0

/* Transformer Engine's userbuffers overlap (--tp-comm-overlap), per GEMM:
 * ring_exchange moves its chunks with copy engines and holds 1 SM; pipeline
 * and bulk hold their num_sm. With SP a block's forward all-gathers before
 * QKV and FC1 and reduce-scatters after the output projection and FC2; its
 * backward all-gathers for the output projection's and FC2's input
 * gradients and, for QKV and FC1, all-gathers the input for the weight
 * gradient and reduce-scatters the input gradient: 4 and 6 collectives of
 * equal volume, so a pass holds the mean of their SMs.
 * BF16 (no per-model configuration: Megatron-LM's --tp-comm-overlap): TE's
 * defaults (transformer_engine/pytorch/module/base.py, initialize_ub,
 * get_default_config): ring_exchange for qkv_fprop, fc1_fprop, proj_dgrad,
 * fc2_dgrad (1 SM); pipeline for proj_fprop, fc2_fprop and bulk for the
 * dgrad/wgrad overlaps (16 SMs): forward (2 x 1 + 2 x 16) / 4 = 8.5,
 * backward (2 x 1 + 4 x 16) / 6 = 11.
 * FP8: NVIDIA's FP8 recipes run every forward collective as ring_exchange
 * (Megatron-Bridge src/megatron/bridge/training/comm_overlap.py, every
 * userbuffers_fp8_* configuration): 1 SM; backward, its H100 hidden-8192
 * TP-4 configuration (userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192):
 * qkv_dgrad 4, qkv_wgrad 24, fc1_dgrad 2, fc1_wgrad 4, two ring exchanges
 * at 1: 36 / 6 = 6 SMs (its other FP8 configurations: 5.3 to 8.7). */
#define TE_UB_FWD_SMS_BF16 ((2.0 * 1.0 + 2.0 * 16.0) / 4.0)
#define TE_UB_BWD_SMS_BF16 ((2.0 * 1.0 + 4.0 * 16.0) / 6.0)
#define TE_UB_FWD_SMS_FP8 1.0
#define TE_UB_BWD_SMS_FP8 ((2.0 * 1.0 + 4.0 + 24.0 + 2.0 + 4.0) / 6.0)

static double share_of(const mp_hw *hw, double sms)
{
    if (!(hw->sm_count > 0.0) || !(sms > 0.0))
        return 0.0;
    return sms >= hw->sm_count ? 1.0 : sms / hw->sm_count;
}

double mp_comm_sm_share(const mp_config *c, mp_comm_kernel k)
{
    const mp_hw *hw = &c->hw;
    bool fp8 = c->training.precision == MP_DTYPE_FP8;
    switch (k) {
    case MP_COMM_NCCL:
        return share_of(hw, hw->nccl_ctas);
    case MP_COMM_EP:
        if (c->parallel.dispatcher != MP_DISPATCH_FLEX)
            return share_of(hw, hw->nccl_ctas);
        /* the backend Megatron-Core picks (megatron_moe.c) */
        return share_of(hw, strcmp(mp_flex_backend_name(hw), "hybridep") == 0 ? HYBRIDEP_SMS
                                                                                : DEEPEP_SMS);
    case MP_COMM_TP_UB_FWD:
        return share_of(hw, fp8 ? TE_UB_FWD_SMS_FP8 : TE_UB_FWD_SMS_BF16);
    case MP_COMM_TP_UB_BWD:
        return share_of(hw, fp8 ? TE_UB_BWD_SMS_FP8 : TE_UB_BWD_SMS_BF16);
    }
    return 0.0;
}

/* Megatron-Core's table of the SMs NCCL's all-gather / reduce-scatter hold
 * on user buffers (DistributedDataParallelConfig.nccl_ub, megatron/core/
 * distributed/distributed_data_parallel_config.py, without SHARP): 4 / 5
 * inside one NVLink domain, 16 / 16 across domains with several members per
 * node, 1 / 4 with one member per node (IB only). */
double mp_dp_sm_share(const mp_config *c, const mp_group_place *g, bool reduce)
{
    if (!c->parallel.nccl_ub)
        return mp_comm_sm_share(c, MP_COMM_NCCL);
    double sms = !g->cross_domain ? (reduce ? 5.0 : 4.0)
                 : g->per_node <= 1.0 ? (reduce ? 4.0 : 1.0)
                                      : 16.0;
    return share_of(&c->hw, sms);
}

double mp_overlap_excess(double comm, double compute, double share)
{
    if (!(comm > 0.0))
        return 0.0;
    return fmax(comm - compute, comm * share);
}
