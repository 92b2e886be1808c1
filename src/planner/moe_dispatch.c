/* moe_dispatch.c — how many copies of a token the flex dispatcher sends
 * (docs/cost-model.md, "Mixture of experts", "The flex dispatcher").
 *
 * DeepEP's normal kernels (and HybridEP, their NVL72 form) send a token once
 * to every remote scale-up domain that holds any of its top-k experts, over
 * the network, and fan it out inside the domain over NVLink, once per GPU
 * that holds any of them (DeepEP's get_dispatch_layout returns
 * num_tokens_per_rdma_rank and is_token_in_rank: the dispatch moves tokens
 * per rank and per node, not per expert). The all-to-all dispatcher sends one
 * copy per (token, routed expert).
 *
 * Under uniform routing a token's k experts are k distinct experts drawn
 * from E, every set equally likely. A holder (a GPU, or a domain's GPUs)
 * with e of the experts is missed when all k fall among the other E - e:
 *
 *     P(hit) = 1 - C(E - e, k) / C(E, k) = 1 - prod_{i<k} (E - e - i) / (E - i)
 *
 * and the expected number of holders a token reaches is the sum of their
 * P(hit) (linearity of expectation). (1 - e/E)^k is the same with
 * replacement; top-k draws without.
 *
 * Group-limited routing (DeepSeek-V3 §2.1.2: experts in G equal groups of
 * consecutive ids, a token first picks M groups, then its k experts among
 * those groups' experts): uniform again at both levels, the M groups any
 * M-subset, the experts any k of the pool of M·E/G. A holder whose experts
 * overlap group g by o_g is then missed with probability
 *
 *     sum over the subsets T of the groups it touches:
 *         P(the chosen groups meet its groups in exactly T) · C(P - o_T, k) / C(P, k)
 *
 * with P = M·E/G, o_T = sum of o_g over T, and
 * P(exactly T) = C(G - n_t, M - |T|) / C(G, M) (n_t groups touched).
 * Experts sit on EP ranks in order (expert i on rank i / (E/ep), Megatron-
 * Core), so a holder's experts are one run of consecutive ids.
 *
 * NeMo AutoModel's FakeBalancedGate (moe.fake_balanced_gate; nemo_automodel/
 * components/moe/layers.py, FakeBalancedGate.forward, at the benchmark
 * recipes' commits 89e3a9fdd and 8d9bfb90e) routes by position instead:
 * indices = arange(T * k).view(T, k) % E, so token t gets the k consecutive
 * experts from (t k) mod E. The starts are the multiples of g = gcd(k, E)
 * below E, each as often over a micro-batch of a multiple of E/g tokens, and
 * a token reaches the holders its run of k ids (wrapping at E) meets: one
 * where a holder's E/n experts are a multiple of k (Qwen3-30B-A3B at ep 8:
 * 16 per rank, k 8), two ranks of one node for DeepSeek-V3 at ep 64 (4 per
 * rank, k 8, 32 per node), against 5.34 of 8 ranks, and 7.36 of 64 ranks on
 * 3.63 of 8 nodes under DeepSeek-V3's group limit, routed by their routers. */
#include <math.h>

#include "planner/cost_internal.h"

/* C(n - a, k) / C(n, k): k draws without replacement from n all miss a set of a. */
static double miss_ratio(double n, double a, double k)
{
    if (a <= 0.0)
        return 1.0;
    if (k > n - a)
        return 0.0;
    double r = 1.0;
    for (double i = 0.0; i < k; i += 1.0)
        r *= (n - a - i) / (n - i);
    return r;
}

/* log C(n, k) for real n >= k >= 0 */
static double log_choose(double n, double k)
{
    if (k < 0.0 || k > n)
        return -INFINITY;
    return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0);
}

#define MAX_TOUCHED 16 /* beyond: group limits ignored (2^16 subsets) */

double mp_moe_hit_probability(const mp_model *m, int64_t first, int64_t count)
{
    double E = (double)m->moe.experts, k = (double)m->moe.top_k;
    if (count <= 0 || E <= 0.0)
        return 0.0;
    int64_t G = m->moe.route_groups, M = m->moe.route_group_top_k;
    if (G <= 1 || M <= 0 || M >= G || m->moe.experts % G)
        return 1.0 - miss_ratio(E, (double)count, k);
    int64_t per = m->moe.experts / G;
    int64_t g0 = first / per, g1 = (first + count - 1) / per;
    int64_t nt = g1 - g0 + 1;
    if (nt > MAX_TOUCHED)
        return 1.0 - miss_ratio(E, (double)count, k);
    double overlap[MAX_TOUCHED];
    for (int64_t g = g0; g <= g1; g++) {
        int64_t lo = g * per > first ? g * per : first;
        int64_t hi = (g + 1) * per < first + count ? (g + 1) * per : first + count;
        overlap[g - g0] = (double)(hi - lo);
    }
    double pool = (double)(M * per), all = log_choose((double)G, (double)M);
    double miss = 0.0;
    for (uint32_t t = 0; t < (1u << nt); t++) {
        int size = 0;
        double o = 0.0;
        for (int64_t j = 0; j < nt; j++)
            if (t >> j & 1u) {
                size++;
                o += overlap[j];
            }
        double lp = log_choose((double)(G - nt), (double)(M - size)) - all;
        if (lp == -INFINITY)
            continue;
        miss += exp(lp) * miss_ratio(pool, o, k);
    }
    return 1.0 - miss;
}

/* The mean number of holders the fixed routing's runs of k consecutive ids
 * meet, over the starts 0, g, 2g, ... below E (g = gcd(k, E)). */
static double fake_balanced_holders(const mp_model *m, int64_t holders)
{
    int64_t E = m->moe.experts, k = m->moe.top_k, per = E / holders;
    int64_t g = k, r = E;
    while (r) { /* gcd(k, E) */
        int64_t q = g % r;
        g = r;
        r = q;
    }
    double sum = 0.0;
    for (int64_t s = 0; s < E; s += g) {
        int64_t first = s / per, end = s + k - 1; /* the run's last id, unwrapped */
        int64_t met = end < E ? end / per - first + 1
                              : (holders - first) + (end - E) / per + 1; /* wraps to 0 */
        sum += (double)(met < holders ? met : holders);
    }
    return sum / (double)(E / g);
}

static double expected_holders(const mp_model *m, int64_t holders)
{
    if (m->moe.fake_balanced_gate)
        return fake_balanced_holders(m, holders);
    int64_t per = m->moe.experts / holders, G = m->moe.route_groups;
    int64_t gsize = G > 1 && m->moe.experts % G == 0 ? m->moe.experts / G : m->moe.experts;
    /* holders that meet the groups alike reach alike: one for all */
    if (G <= 1 || per % gsize == 0 || gsize % per == 0)
        return (double)holders * mp_moe_hit_probability(m, 0, per);
    double sum = 0.0;
    for (int64_t j = 0; j < holders; j++)
        sum += mp_moe_hit_probability(m, j * per, per);
    return sum;
}

double mp_moe_expected_holders(const mp_model *m, int64_t holders)
{
    if (holders <= 0 || m->moe.experts % holders)
        return 0.0;
    /* search costs many candidates of one model: keep the last answers
     * (per thread: hardware choice searches in threads) */
    enum { SLOTS = 8 };
    static _Thread_local struct {
        int64_t experts, top_k, groups, group_top_k, holders;
        bool fake;
        double value;
    } memo[SLOTS];
    static _Thread_local int next;
    for (int i = 0; i < SLOTS; i++)
        if (memo[i].holders == holders && memo[i].experts == m->moe.experts &&
            memo[i].top_k == m->moe.top_k && memo[i].groups == m->moe.route_groups &&
            memo[i].group_top_k == m->moe.route_group_top_k &&
            memo[i].fake == m->moe.fake_balanced_gate)
            return memo[i].value;
    double v = expected_holders(m, holders);
    memo[next].experts = m->moe.experts;
    memo[next].top_k = m->moe.top_k;
    memo[next].groups = m->moe.route_groups;
    memo[next].group_top_k = m->moe.route_group_top_k;
    memo[next].holders = holders;
    memo[next].fake = m->moe.fake_balanced_gate;
    memo[next].value = v;
    next = (next + 1) % SLOTS;
    return v;
}

/* One dispatch (or combine) of the flex dispatcher over the EP group: the
 * network leg and the NVLink leg run at once (DeepEP forwards what has
 * arrived while more arrives), the slower decides. */
double mp_moe_flex_time(const mp_config *c, const mp_group_place *g, double stride,
                        double tokens, double bytes_per_token)
{
    const mp_hw *hw = &c->hw;
    const mp_model *m = &c->model;
    int64_t n = g->n;
    if (n <= 1 || tokens <= 0.0 || bytes_per_token <= 0.0)
        return 0.0;
    double dom = mp_scale_up_gpus(hw);
    int64_t inside = (int64_t)fmin((double)n, fmax(1.0, floor(dom / stride)));
    while (n % inside) /* whole domains of the group */
        inside--;
    int64_t domains = n / inside;
    /* per source GPU, averaged over where it sits: remote domains reached,
     * and GPUs reached inside each domain (the forward from the receiving
     * GPU to the others in its domain included: see docs) */
    double reach_domains = mp_moe_expected_holders(m, domains);
    double reach_ranks = mp_moe_expected_holders(m, n);
    double remote = reach_domains * (double)(domains - 1) / (double)domains;
    double nvlink = reach_ranks * (double)(inside - 1) / (double)inside;
    double up = hw->scale_up.bw_per_gpu * hw->scale_up.efficiency;
    double out = hw->scale_out.bw_per_gpu * hw->scale_out.efficiency;
    double t_up = nvlink > 0.0 ? (up > 0.0 ? tokens * nvlink * bytes_per_token / up : INFINITY)
                               : 0.0;
    double t_out = remote > 0.0
                       ? (out > 0.0 ? tokens * remote * bytes_per_token / out : INFINITY)
                       : 0.0;
    /* DeepEP sends to every destination at once (each block's threads are
     * split by destination rank: csrc/kernels/legacy/intranode.cu,
     * responsible_rank = thread_id / num_threads_per_rank), so each leg
     * waits one latency, not one per peer; a remote copy's NVLink forward
     * follows its network hop */
    double lat = (inside > 1 ? hw->scale_up.latency : 0.0) +
                 (domains > 1 ? hw->scale_out.latency : 0.0);
    return lat + fmax(t_up, t_out);
}

/* Bytes per element of the dispatch's payload (and of the combine's backward
 * gradient, which moves the same way): the training type, or with
 * parallel.dispatch_fp8 one FP8 byte and its share of the scales, 1/32: an
 * fp32 scale per 1x128 tile (DeepSeek-V3 report §3.3.3) or an E8M0 byte per
 * 32 elements (MXFP8, Megatron-Core's --moe-dispatch-fwd-dtype mxfp8). The
 * combine stays in the training type. */
double mp_moe_dispatch_wire_bytes(const mp_config *c)
{
    return c->parallel.dispatch_fp8 ? 1.0 + 1.0 / 32.0 : mp_dtype_bytes(c->training.precision);
}

/* Host synchronisations of one MoE layer's forward in the token dispatcher
 * (docs/cost-model.md §12, "The dispatcher's host synchronisations"), as
 * Megatron-Core runs dropless routing with the fused permutation (the
 * validation rows' settings: no capacity factor, moe_permute_fusion,
 * moe_router_padding_for_quantization off), token_dispatcher.py and
 * fused_a2a.py at cba6b0ed (container 25.11) to d0b3b775 (26.06):
 *
 *  - all-to-all: the split sizes of the EP all-to-all must be on the host,
 *    so the counts are copied on a side stream (the copy point, before
 *    Permutation 1) and the host waits on that copy's event once, before
 *    the all-to-all (_maybe_dtoh_and_synchronize, d2h_event.synchronize():
 *    cba6b0ed line 907, core_v0.16 899, 0.17 904); none under drop-and-pad
 *    (line 876: the sizes are the capacity);
 *  - all-gather: the local counts' .cpu() and the probabilities'
 *    masked_select, each a stream synchronisation (dispatch_postprocess,
 *    cba6b0ed lines 302 and 311);
 *  - flex, DeepEP: the host spins until the notify kernel has written the
 *    received counts (buffer.dispatch; fused_a2a.py cba6b0ed lines 103-104,
 *    "the CPU will wait for GPU's signal to arrive"). Without Megatron-Core's
 *    experimental flag _indices_to_multihot adds three (a boolean index, a
 *    repeat_interleave, another boolean index: lines 1234-1240), which
 *    megaplan does not count (it has no such flag: a lower bound);
 *  - flex, HybridEP: dropless, the dispatch reads the dispatched and
 *    permuted sizes from the GPU, "which causes a D2H synchronization"
 *    (fused_a2a.py cba6b0ed lines 357-361 and 482-489), and keeps them on the
 *    host so that its combine and backward need none.
 *
 * Backward none: the sizes are on the host (all-to-all, all-gather), or
 * in the handle (DeepEP's cached dispatch, HybridEP's host metadata). A
 * MoE layer captured whole (MP_CGS_MOE, drop-and-pad only) replays without
 * the host; the partial scopes leave the dispatch outside the graph. */
double mp_moe_dispatch_syncs(const mp_config *c)
{
    const mp_parallel *p = &c->parallel;
    if (c->model.moe.experts <= 0 || (p->cuda_graph_scope & (1u << MP_CGS_MOE)))
        return 0.0;
    switch (p->dispatcher) {
    case MP_DISPATCH_ALLTOALL:
        return 1.0;
    case MP_DISPATCH_ALLGATHER:
        return 2.0;
    case MP_DISPATCH_FLEX:
        return 1.0; /* DeepEP's wait, or HybridEP's copy */
    default:
        return 0.0;
    }
}
