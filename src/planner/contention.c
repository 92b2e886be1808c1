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

/* NCCL's grouped all-to-all (ncclSend/ncclRecv to every member, one kernel
 * whose grid is one CTA per p2p channel that carries a part of some peer's
 * transfer: src/enqueue.cc, plan->channelMask, countOneBits at launch).
 * Read at NCCL v2.29.2-1 (NVIDIA/nccl); large messages, so every transfer is
 * split over the most channels a peer may take (addP2pToPlan: parts grow
 * while over the 128 KiB net chunk, src/enqueue.cc:887, src/init.cc:736-752).
 * Inside one NVLink domain each round's channels start at the round
 * (src/include/channel.h, ncclP2pChannelBaseForRound, base = round), so the
 * peers spread over all p2p channels: nccl_ctas. Across domains the rounds
 * go in groups of P2P_SCHEDULE_GROUP_SIZE = 8 (src/init.cc:805-810, the gcd
 * with the members per node when that is under 8) and every round of a group
 * starts on the same channel (base = round / group); a channel runs up to 8
 * transfers at once (NCCL_MAX_DEV_WORK_P2P_PER_BATCH, src/include/device.h:384).
 * Each peer takes p2pnChannelsPerPeer channels: the least over its peers,
 * a network peer's max(NICs, ceil(NIC GB/s / P2P_PER_CHANNEL_NET_BW = 14))
 * (src/graph/paths.cc:843-855; NVLink peers take 2 per link, more), a power
 * of two, halved while it times ceil(n / 8) exceeds the p2p channels
 * (paths.cc:893-896). The CTAs are the groups' disjoint blocks of that many
 * channels (the bases are bit-reversed over the p2p channels), at most all
 * p2p channels. Two DGX-H100 nodes, ep 16: one 50 GB/s NIC per GPU, 4
 * channels a peer, 2 groups: 8 CTAs, not 16. */
static double pow2_up(double x)
{
    double p = 1.0;
    while (p < x)
        p *= 2.0;
    return p;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

double mp_nccl_alltoall_ctas(const mp_hw *hw, const mp_group_place *g)
{
    double p2p = hw->nccl_ctas;
    if (!(p2p > 0.0) || !g->cross_domain || g->n <= 1)
        return p2p;
    const mp_net_tier *net = &hw->scale_out;
    double nics = hw->gpus_per_node > 0 && net->nics_per_node > 0
                      ? fmax(1.0, (double)net->nics_per_node / (double)hw->gpus_per_node)
                      : 1.0;
    double per_peer = net->bw_per_gpu > 0.0 ? fmax(nics, ceil(net->bw_per_gpu / 1e9 / 14.0)) : 2.0;
    per_peer = pow2_up(per_peer);
    double batches = ceil((double)g->n / 8.0);
    while (per_peer * batches > p2p && per_peer > 1.0)
        per_peer /= 2.0;
    int64_t local = g->per_node >= 1.0 ? (int64_t)g->per_node : 1;
    int64_t group = gcd64(8, local);
    double groups = ceil((double)g->n / (double)group);
    return fmin(p2p, groups * per_peer);
}

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
        if (c->parallel.dispatcher != MP_DISPATCH_FLEX) {
            if (c->parallel.dispatcher != MP_DISPATCH_ALLTOALL)
                return share_of(hw, hw->nccl_ctas);
            mp_group_place g;
            mp_group_place_of(c, MP_GROUP_EP, &g);
            return share_of(hw, mp_nccl_alltoall_ctas(hw, &g));
        }
        /* the plan's SMs (Megatron-Core's moe_hybridep_num_sms or
         * moe_deepep_num_sms), else the default of the backend it runs: the
         * plan's flex_backend, or megaplan's guess (megatron_moe.c) */
        if (c->parallel.flex_sms > 0)
            return share_of(hw, (double)c->parallel.flex_sms);
        return share_of(hw, mp_flex_backend_of(c) == MP_FLEX_HYBRIDEP ? HYBRIDEP_SMS : DEEPEP_SMS);
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
