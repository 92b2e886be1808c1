/* moe_plan.c — a plan's mixture of experts as the executor runs it (moe.h),
 * and the expert-parallel groups. */
#include <math.h>
#include <string.h>

#include "exec/moe.h"

#define REFUSE(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

/* --shrink's routing groups: the model's count where it divides the shrunk
 * experts, else the most that does, keeping at least one group out (so the
 * limit still limits) and enough experts in the chosen ones for top_k. */
static void shrink_groups(const struct mp_moe *e, mp_gpt_dims *d)
{
    int E = d->experts, G = (int)(e->route_groups < E ? e->route_groups : E);
    while (G > 1 && E % G)
        G--;
    if (G < 2)
        return; /* one group: no limit */
    int Gk = (int)(e->route_group_top_k < G ? e->route_group_top_k : G - 1);
    if (Gk < 1)
        Gk = 1;
    if (d->top_k > Gk * (E / G))
        d->top_k = Gk * (E / G);
    if (d->top_k < Gk)
        Gk = d->top_k;
    d->route_groups = G;
    d->route_group_top_k = Gk;
}

mp_status mp_moe_exec_dims(const mp_plan *plan, bool shrink, mp_gpt_dims *d, mp_error *err)
{
    const mp_model *m = &plan->config.model;
    const mp_parallel *p = &plan->config.parallel;
    if (!mp_model_is_moe(m))
        return MP_OK;
    const struct mp_moe *e = &m->moe;
    /* AutoModel's benchmark gate has no scores to check a partition's
     * routing against: exec routes with the model's own top-k router only */
    if (e->fake_balanced_gate)
        return REFUSE("model.moe.fake_balanced_gate",
                      "exec routes each token with the model's top-k router; the benchmark's "
                      "fixed gate (top_k consecutive experts, no scores) is costed, not executed");
    int ep = (int)mp_parallel_ep(p), etp = (int)mp_parallel_etp(p);
    bool sp = p->sp && p->tp > 1;
    if (etp != p->tp && !(etp == 1 && (sp || p->tp == 1)))
        return REFUSE("parallel.etp", "exec runs the experts split over TP as the dense MLP "
                                      "(etp = tp = %lld) or whole with SP (etp = 1), not etp = %d",
                      (long long)p->tp, etp);
    int64_t stage = p->tp * p->cp * p->dp;
    if (ep < 1 || stage % ((int64_t)etp * ep))
        return REFUSE("parallel.ep", "exec folds the expert groups onto each stage's tp x cp x "
                                     "dp = %lld ranks: etp x ep (%d x %d) must divide them",
                      (long long)stage, etp, ep);
    d->ep = ep;
    d->ep_rank = 0;
    if (p->dist_opt) {
        /* the dense tensors' shards over DP x CP end where the experts'
         * shards over expert-DP begin (shard.c; the plan's check refuses
         * HSDP with experts, so DP x CP is the dense part's whole group) */
        int64_t a = p->dp * (p->cp > 1 ? p->cp : 1), b = stage / ((int64_t)etp * ep);
        int64_t x = a, y = b;
        while (y) {
            int64_t r = x % y;
            x = y;
            y = r;
        }
        d->flat_align = (int)(a / x * b);
    }
    d->etp = etp;
    d->router_sigmoid = e->router == MP_ROUTER_SIGMOID;
    d->capacity_factor = e->capacity_factor;
    d->route_scale = e->route_scale;
    /* Megatron's --moe-router-enable-expert-bias goes with the sigmoid router
     * (megatron_moe.c), updated at its default rate unless the model says */
    d->bias_rate = e->router != MP_ROUTER_SIGMOID ? 0.0
                   : e->bias_update_rate > 0  ? e->bias_update_rate
                                              : 1e-3;
    if (shrink) {
        /* a multiple of ep, at most 8 unless ep needs more */
        int experts = (int)(e->experts < 8 ? e->experts : 8);
        experts = (experts + ep - 1) / ep * ep;
        d->experts = experts;
        d->top_k = (int)(e->top_k < experts ? e->top_k : experts);
        d->expert_ffn = 2 * d->hidden;
        d->shared_ffn = e->shared_experts ? 2 * d->hidden : 0;
        /* one dense block first when the model has one and two blocks run */
        d->moe_first_dense = e->first_dense > 0 && d->layers > 1 ? 1 : 0;
        d->moe_layer_freq = 1;
        if (e->route_groups)
            shrink_groups(e, d);
    } else {
        d->experts = (int)e->experts;
        d->top_k = (int)e->top_k;
        d->expert_ffn = (int)e->expert_ffn;
        d->shared_ffn = (int)(e->shared_experts * e->shared_ffn);
        d->moe_first_dense = (int)e->first_dense;
        d->moe_layer_freq = (int)(e->layer_freq > 0 ? e->layer_freq : 1);
        d->route_groups = (int)e->route_groups;
        d->route_group_top_k = (int)e->route_group_top_k;
        if (d->experts % ep || d->expert_ffn % etp || d->shared_ffn % d->tp)
            return REFUSE("parallel.ep", "ep=%d must divide the experts (%d), etp=%d the expert "
                                         "ffn (%d) and tp=%d the shared experts' (%d)", ep,
                          d->experts, etp, d->expert_ffn, d->tp, d->shared_ffn);
        if (d->experts > MP_MOE_MAX_EXPERTS || d->route_groups > MP_MOE_MAX_GROUPS)
            return REFUSE("model.moe.experts", "exec routes at most %d experts in at most %d "
                                               "groups (got %d in %d)", MP_MOE_MAX_EXPERTS,
                          MP_MOE_MAX_GROUPS, d->experts, d->route_groups);
    }
    return MP_OK;
}

static mp_status split_of(MPI_Comm parent, const char *name, int color, int key, mp_group *out,
                          mp_error *err)
{
    if (MPI_Comm_split(parent, color, key, &out->comm) != MPI_SUCCESS)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "MPI_Comm_split failed");
    MPI_Comm_set_name(out->comm, name); /* the watchdog's messages name the group */
    MPI_Comm_size(out->comm, &out->size);
    MPI_Comm_rank(out->comm, &out->rank);
    return MP_OK;
}

static int etp_of(const mp_gpt_dims *d)
{
    return d->etp == 1 ? 1 : d->tp;
}

void mp_moe_coords(const mp_gpt_dims *d, int tp_rank, int dp_rank, int *ep_rank, int *edp_rank)
{
    int s = tp_rank + d->tp * (d->cp_rank + mp_dims_cp(d) * dp_rank);
    int etp = etp_of(d), ep = mp_dims_ep(d);
    *ep_rank = s / etp % ep;
    *edp_rank = s / (etp * ep);
}

mp_status mp_moe_groups(const mp_runtime *rt, const mp_gpt_dims *d, mp_group *ep_group,
                        mp_group *edp_group, mp_error *err)
{
    memset(ep_group, 0, sizeof *ep_group);
    memset(edp_group, 0, sizeof *edp_group);
    ep_group->comm = edp_group->comm = MPI_COMM_NULL;
    int ep = mp_dims_ep(d), etp = etp_of(d), edp = rt->tp * rt->cp * rt->dp / (etp * ep);
    int er, dr, et = rt->tp_rank % etp; /* etp is 1 or tp */
    mp_moe_coords(d, rt->tp_rank, rt->dp_rank, &er, &dr);
    if (rt->solo) { /* the solo backend never communicates: sizes and places only */
        *ep_group = (mp_group){.comm = MPI_COMM_SELF, .size = ep, .rank = er};
        *edp_group = (mp_group){.comm = MPI_COMM_SELF, .size = edp, .rank = dr};
        return MP_OK;
    }
    /* over the world: one pipeline stage's tp x cp x dp ranks, by (etp, ep, edp) */
    int base = rt->pp_rank * etp + et;
    mp_status st = split_of(MPI_COMM_WORLD, "ep", base * edp + dr, er, ep_group, err);
    if (!st)
        st = split_of(MPI_COMM_WORLD, "expert-dp", base * ep + er, dr, edp_group, err);
    if (st)
        mp_moe_groups_free(ep_group, edp_group);
    return st;
}

void mp_moe_groups_free(mp_group *ep_group, mp_group *edp_group)
{
    mp_group *g[2] = {ep_group, edp_group};
    for (int i = 0; i < 2; i++) {
        if (g[i]->comm != MPI_COMM_NULL && g[i]->comm != MPI_COMM_SELF &&
            g[i]->comm != MPI_COMM_WORLD && g[i]->size > 0)
            MPI_Comm_free(&g[i]->comm);
        g[i]->comm = MPI_COMM_NULL;
        g[i]->size = 0;
    }
}

mp_moe_sizes mp_moe_sizes_of(const mp_gpt_dims *d, size_t S, size_t Sl)
{
    mp_moe_sizes z;
    memset(&z, 0, sizeof z);
    if (d->experts <= 0)
        return z;
    bool local = mp_dims_moe_local(d);
    z.S = local ? Sl : S;
    z.Sl = Sl;
    z.Sfull = S;
    z.cp = (size_t)mp_dims_cp(d);
    z.h = (size_t)d->hidden;
    z.E = (size_t)d->experts;
    z.k = (size_t)d->top_k;
    z.ep = (size_t)mp_dims_ep(d);
    z.El = z.E / z.ep;
    z.fl = (size_t)d->expert_ffn / (size_t)(local ? 1 : d->tp);
    z.f1l = d->gated ? 2 * z.fl : z.fl;
    z.cap_rows = z.ep * z.S * z.k;
    z.sl = (size_t)d->shared_ffn / (size_t)d->tp;
    z.s1l = d->gated ? 2 * z.sl : z.sl;
    if (d->capacity_factor > 0) {
        /* per sample: its positions' share of the slots, times the factor */
        double fair = (double)d->seq * (double)z.k / (double)z.E;
        z.capacity = (size_t)ceil(d->capacity_factor * fair);
        if (z.capacity < 1)
            z.capacity = 1;
    }
    return z;
}

mp_moe_layout mp_moe_layout_of(const mp_moe_sizes *z, unsigned rebuilds)
{
    mp_moe_layout L;
    size_t u = 0, w = 0, rows = z->cap_rows, sk = z->S * z->k, big = sk > rows ? sk : rows;
    bool all = rebuilds & 1u << MP_RCM_MOE;
    bool act = all || (rebuilds & 1u << MP_RCM_MOE_ACT);
    bool shared = all || (rebuilds & 1u << MP_RCM_SHARED_EXPERTS);
    /* a kept part (unless `drop`) in the block's region, else in the scratch */
#define PART(field, n, drop) \
    ((drop) ? (L.field = w | MP_MOE_WORK, w += (n)) : (L.field = u, u += (n)))
    PART(logits, z->S * z->E, true);
    PART(scores, z->S * z->E, all);
    PART(choice, sk, all);
    PART(wgt, sk, all);
    PART(kept, sk, all);
    PART(sorder, sk, all);
    PART(counts, 2 * z->ep, all);
    PART(ne, z->El, all);
    PART(y, z->Sl * z->k * z->h, all);
    PART(x, rows * z->h, all);
    PART(pre, rows * z->f1l, all);
    PART(act, rows * z->fl, act);
    PART(rorder, rows, all);
    PART(bufa, big * (z->h + 1), true);
    PART(bufb, big * (z->h + 1), true);
    PART(dact, rows * z->fl, true);
    PART(dpre, rows * z->f1l, true);
    PART(dwl, z->Sl * z->k, true);
    PART(dwf, z->Sfull * z->k > 2 * z->ep ? z->Sfull * z->k : 2 * z->ep, true);
    PART(spre, z->Sfull * z->s1l, shared);
    PART(sact, z->Sfull * z->sl, shared);
    PART(sdact, z->Sfull * z->sl, true);
    PART(sdpre, z->Sfull * z->s1l, true);
    PART(sdx, z->sl ? z->Sfull * z->h : 0, true);
    PART(capc, z->cp > 1 && z->capacity ? z->cp * z->Sfull * z->k : 0, true);
#undef PART
    L.total = u;
    L.work = w;
    return L;
}

size_t mp_moe_block_reals(const mp_gpt_dims *d, size_t S, size_t Sl, unsigned rebuilds)
{
    mp_moe_sizes z = mp_moe_sizes_of(d, S, Sl);
    return z.E ? mp_moe_layout_of(&z, rebuilds).total : 0;
}

size_t mp_moe_work_reals(const mp_gpt_dims *d, size_t S, size_t Sl, unsigned rebuilds)
{
    mp_moe_sizes z = mp_moe_sizes_of(d, S, Sl);
    return z.E ? mp_moe_layout_of(&z, rebuilds).work : 0;
}
