/* comm.c — where process groups lie and what a collective costs
 * (docs/cost-model.md §5).
 *
 * Rank order (Megatron's default): r = tp + t*(cp + c*(dp + d*pp)), so TP
 * groups are t consecutive ranks, CP groups stride t, the gradient-reduction
 * group (DP x CP) strides t, and pipeline neighbours are t*c*d apart.
 *
 * A collective costs a start-up latency, a latency per ring step and the ring's
 * bytes over the bus bandwidth: all-reduce 2(n-1)/n of the bytes, all-gather
 * and reduce-scatter (n-1)/n (Thakur et al. 2005; NCCL's "bus bandwidth").
 * A group inside one scale-up domain (NVLink) uses that tier. A group whose
 * members lie in several domains crosses the scale-out fabric once per node
 * per ring: all GPUs of a node communicate at the same time, each in its own
 * group, so a group with k members in a node gets k of the node's per-GPU
 * NIC shares, capped by the scale-up bandwidth.
 *
 * NCCL on NVSwitch (vTrain's sweeps, 2/4/8 A100s, 1 MiB-1 GiB) reaches a bus
 * bandwidth that grows with the group: 196, 221, 229 GB/s at 1 GiB. The ring
 * formula alone (bytes * 2(n-1)/n over one rate) cannot give that; adding a
 * per-byte term that does not depend on n - each byte of the buffer passes
 * once more through the GPU (the local reads of the first reduction step and
 * the copy-out of the result, done by NCCL's kernels) fits all three with
 * the NVLink rate itself: T = lat + bytes (2(n-1)/n + local) / (bw * eff),
 * local being the profile's collective_local_pass (fitted to the sweeps by
 * tools/fit_profile.py; figures in docs/validation.md). The all-reduce's
 * extra pass is split between its reduce-scatter and all-gather halves. */
#include <math.h>

#include "planner/cost_internal.h"

static double domain_size(const mp_hw *hw)
{
    if (hw->scale_up.gpus_per_domain > 0)
        return (double)hw->scale_up.gpus_per_domain;
    return (double)(hw->gpus_per_node > 0 ? hw->gpus_per_node : 1);
}

double mp_scale_up_gpus(const mp_hw *hw)
{
    return domain_size(hw);
}

static double node_size(const mp_hw *hw)
{
    return (double)(hw->gpus_per_node > 0 ? hw->gpus_per_node : 1);
}

int64_t mp_zero_shard_ranks(const mp_config *c)
{
    const mp_parallel *p = &c->parallel;
    int64_t all = (p->dp > 0 ? p->dp : 1) * (p->cp > 0 ? p->cp : 1);
    if (!p->hsdp)
        return all;
    int64_t fit = (int64_t)domain_size(&c->hw) / (p->tp > 0 ? p->tp : 1);
    int64_t best = 1;
    for (int64_t s = 1; s <= all && s <= fit; s++)
        if (all % s == 0)
            best = s;
    return best;
}

void mp_group_place_of(const mp_config *c, mp_group_kind g, mp_group_place *out)
{
    const mp_parallel *p = &c->parallel;
    double t = (double)p->tp, cp = (double)p->cp, d = (double)p->dp;
    double dom = domain_size(&c->hw), node = node_size(&c->hw);
    double stride = 1.0, n = 1.0;
    double shard = (double)mp_zero_shard_ranks(c);
    switch (g) {
    case MP_GROUP_TP: stride = 1.0; n = t; break;
    case MP_GROUP_CP: stride = t; n = cp; break;
    case MP_GROUP_DP: stride = t; n = cp * d; break;
    case MP_GROUP_PP: stride = t * cp * d; n = 2.0; break;
    case MP_GROUP_DP_SHARD: stride = t; n = shard; break;
    case MP_GROUP_DP_REPLICA: stride = t * shard; n = cp * d / shard; break;
    case MP_GROUP_ETP: stride = 1.0; n = (double)mp_parallel_etp(p); break;
    case MP_GROUP_EP: stride = (double)mp_parallel_etp(p); n = (double)mp_parallel_ep(p); break;
    case MP_GROUP_EDP:
        stride = (double)(mp_parallel_etp(p) * mp_parallel_ep(p));
        n = (double)mp_parallel_edp(p);
        break;
    }
    out->n = (int64_t)n;
    double span = stride * n; /* ranks from the group's first member to past its last */
    if (g == MP_GROUP_PP) {
        /* neighbours t*c*d apart: across domains when a stage fills a domain;
         * otherwise only the boundaries between domains cross */
        double pp = (double)p->pp;
        if (stride >= dom)
            out->cross_fraction = 1.0;
        else if (stride * pp > dom && pp > 1)
            out->cross_fraction = fmin(1.0, (stride * pp / dom - 1.0) / (pp - 1.0));
        else
            out->cross_fraction = 0.0;
        out->cross_domain = out->cross_fraction > 0.0;
        out->per_node = 1.0;
        return;
    }
    out->cross_domain = n > 1.0 && span > dom;
    out->cross_fraction = out->cross_domain ? 1.0 : 0.0;
    double per_node = stride >= node ? 1.0 : fmin(n, node / stride);
    out->per_node = per_node < 1.0 ? 1.0 : per_node;
}

/* A group crossing nodes with more than one but not all of each node's GPUs
 * (e.g. the DP groups of t = 2 or 4 on 8-GPU nodes) reaches only a fraction of
 * its NIC shares. Hypothesis (vTrain's multi-node runs, docs/cost-model.md §5):
 * with fewer NICs than GPUs, NCCL's rings for such a communicator enter a node
 * through one member's NIC and leave through another's, so each NIC carries
 * that ring in one direction only and the node's rings cannot be balanced over
 * all NICs in both directions, as they are for a whole node (one communicator)
 * or one GPU per node (in and out through its own NIC). */
double mp_partial_node_factor(const mp_hw *hw, const mp_group_place *g)
{
    double f = hw->scale_out.partial_node_efficiency;
    if (!g->cross_domain || !(f > 0.0) || f >= 1.0)
        return 1.0; /* 0: a profile built in code without the field */
    if (g->per_node > 1.0 && g->per_node < node_size(hw))
        return f;
    return 1.0;
}


double mp_coll_time(const mp_hw *hw, const mp_group_place *g, mp_coll_kind k, double bytes)
{
    double n = (double)g->n;
    if (n <= 1.0 || bytes <= 0.0)
        return 0.0;
    double up_bw = hw->scale_up.bw_per_gpu * hw->scale_up.efficiency;
    double bw = up_bw, lat = hw->scale_up.latency;
    if (g->cross_domain) {
        double out_bw = g->per_node * hw->scale_out.bw_per_gpu * hw->scale_out.efficiency *
                        mp_partial_node_factor(hw, g);
        bw = fmin(up_bw, out_bw);
        lat = hw->scale_out.latency;
    }
    if (bw <= 0.0)
        return INFINITY;
    double steps, factor, local;
    switch (k) {
    case MP_COLL_ALLREDUCE:
        steps = 2.0 * (n - 1.0);
        factor = 2.0 * (n - 1.0) / n;
        /* passes of the buffer through the GPU beyond the ring's link traffic
         * (the profile's collective_local_pass, fitted to NCCL sweeps) */
        local = hw->collective_local_pass;
        break;
    case MP_COLL_ALLGATHER:
    case MP_COLL_REDUCESCATTER:
        steps = n - 1.0;
        factor = (n - 1.0) / n;
        local = 0.5 * hw->collective_local_pass;
        break;
    default: {
        /* point to point: the mix of intra- and inter-domain neighbour pairs */
        double intra = 2.0 * hw->scale_up.latency + bytes / up_bw;
        double out_bw = hw->scale_out.bw_per_gpu * hw->scale_out.efficiency;
        double inter = 2.0 * hw->scale_out.latency + (out_bw > 0 ? bytes / out_bw : INFINITY);
        double f = g->cross_fraction;
        return (f > 0.0 ? f * inter : 0.0) + (1.0 - f) * intra;
    }
    }
    /* one latency to start (launch, handshake) and one per ring step; the
     * local pass runs at the scale-up rate whichever tier the ring crosses */
    return (steps + 1.0) * lat + bytes * factor / bw + (up_bw > 0.0 ? bytes * local / up_bw : 0.0);
}
