/* shard.c — the distributed optimizer's parts of a stage's flat buffer
 * (mp_shard_part, kernels.h), as Megatron-Core shards an MoE model: the dense
 * tensors over DP x CP, the experts (last in the buffer, from expert_lo) over
 * expert-DP, the ranks that hold the same experts. Each part's gradients are
 * reduce-scattered over its own group into this rank's shard of it, and its
 * updated weights all-gathered over the same group; a dense model has one
 * part. Without the distributed optimizer each part is all-reduced whole.
 *
 * Test switches (docs/exec.md, "Test-only switches"): `edp-grad` leaves the
 * experts' reduction out, `edp-grad-dp` runs their reduce-scatter over the
 * dense DP x CP group instead of expert-DP, `edp-gather` (in the callers)
 * skips their all-gather. Compiled for float and double (exec_real_sources). */
#include <stdbool.h>
#include <stddef.h>

#include "exec/kernels.h"
#include "exec/real.h"

mp_status mp_shard_parts_init(mp_trainer *t, bool dist_opt, mp_error *err)
{
    mp_gpt *g = t->model;
    const mp_param_layout *lay = g->lay;
    size_t n = g->n_alloc;
    size_t elo = lay->expert_lo < lay->total ? lay->expert_lo : n;
    mp_group edp = g->edp;
    if (edp.size < 1)
        edp = (mp_group){.comm = t->dp.comm, .size = 1, .rank = 0};
    t->n_parts = elo < n ? 2 : 1;
    t->part[0] = (mp_shard_part){.lo = 0, .hi = elo, .group = t->dp, .name = "dense"};
    t->part[1] = (mp_shard_part){.lo = elo, .hi = n, .group = edp, .name = "experts"};
    t->dist_opt = dist_opt && (t->dp.size > 1 || (t->n_parts == 2 && edp.size > 1));
    size_t moment = 0;
    for (int i = 0; i < t->n_parts; i++) {
        mp_shard_part *p = &t->part[i];
        size_t ranks = p->group.size > 1 ? (size_t)p->group.size : 1;
        if ((p->hi - p->lo) % ranks)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "the %s part of the parameter buffer is not padded to its "
                                "group's %zu ranks", p->name, ranks);
        size_t shard = t->dist_opt ? (p->hi - p->lo) / ranks : p->hi - p->lo;
        p->own_lo = p->lo + (t->dist_opt ? (size_t)p->group.rank * shard : 0);
        p->own_hi = p->own_lo + shard;
        p->moment = moment;
        moment += shard;
        /* the reduce-scatter's destination holds the largest shard, or the
         * experts' range cut over DP x CP for the wrong-group test */
        size_t need = shard, dense_ranks = t->dp.size > 1 ? (size_t)t->dp.size : 1;
        if (i == 1 && t->dist_opt && (p->hi - p->lo) / dense_ranks > need)
            need = (p->hi - p->lo) / dense_ranks;
        if (need > t->shard_n)
            t->shard_n = need;
    }
    t->shard_lo = t->part[0].own_lo;
    t->shard_hi = t->part[0].own_hi;
    t->moment_n = moment;
    return MP_OK;
}

/* The group a part's gradients are reduced over (the test's wrong one). */
static const mp_group *reduce_group(const mp_trainer *t, int i)
{
    if (i == 1 && mp_probe_drops(t->model->probe, "edp-grad-dp"))
        return &t->dp;
    return &t->part[i].group;
}

mp_status mp_shard_reduce(mp_trainer *t, bool sharded_rest, mp_error *err)
{
    mp_gpt *g = t->model;
    const mp_backend *be = t->be;
    for (int i = 0; i < t->n_parts; i++) {
        const mp_shard_part *p = &t->part[i];
        const mp_group *grp = reduce_group(t, i);
        if (grp->size <= 1 || (i == 1 && mp_probe_drops(g->probe, "edp-grad")))
            continue;
        mp_status st;
        if (!t->dist_opt) {
            st = be->allreduce(grp, MP_REAL_KIND, g->g + p->lo, p->hi - p->lo, MP_RED_SUM, err);
        } else {
            size_t n = (p->hi - p->lo) / (size_t)grp->size, own = p->own_hi - p->own_lo;
            st = be->reduce_scatter(grp, MP_REAL_KIND, g->g + p->lo, t->shard_buf, n, err);
            if (!st)
                be->copy(g->g + p->own_lo, t->shard_buf, (n < own ? n : own) * sizeof(real),
                         MP_COPY_D2D);
        }
        if (st)
            return st;
        if (sharded_rest) { /* ZeRO-2/3: only the shard is kept between micro-batches */
            be->zero(g->g + p->lo, (p->own_lo - p->lo) * sizeof(real));
            be->zero(g->g + p->own_hi, (p->hi - p->own_hi) * sizeof(real));
        }
    }
    return MP_OK;
}

mp_status mp_shard_gather(mp_trainer *t, bool skip_experts, mp_error *err)
{
    mp_gpt *g = t->model;
    const mp_backend *be = t->be;
    for (int i = 0; i < t->n_parts; i++) {
        const mp_shard_part *p = &t->part[i];
        if (p->group.size <= 1 || (i == 1 && skip_experts))
            continue;
        size_t n = p->own_hi - p->own_lo;
        be->copy(t->shard_buf, g->w + p->own_lo, n * sizeof(real), MP_COPY_D2D);
        mp_status st = be->allgather(&p->group, MP_REAL_KIND, t->shard_buf, g->w + p->lo, n,
                                     err);
        if (st)
            return st;
    }
    return MP_OK;
}

void mp_shard_update(mp_trainer *t, int step)
{
    mp_gpt *g = t->model;
    for (int i = 0; i < t->n_parts; i++) {
        const mp_shard_part *p = &t->part[i];
        /* the padding after the last tensor has no moments to update */
        size_t hi = p->own_hi < g->lay->total ? p->own_hi : g->lay->total;
        if (hi > p->own_lo)
            t->be->adamw(MP_REAL_KIND, g->w, g->g, t->m + p->moment, t->v + p->moment, g->lay,
                         p->own_lo, hi, &t->adam, step, g->exact);
    }
}
