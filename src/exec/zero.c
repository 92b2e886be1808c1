/* zero.c — ZeRO-2 and ZeRO-3 (plan field parallel.zero) on top of the
 * distributed optimizer's shards: each DP (x CP) rank owns the flat range
 * [shard_lo, shard_hi) of its stage's parameter buffer, as with ZeRO-1; an
 * MoE model's experts are a second part, sharded over expert-DP (shard.c).
 *
 * ZeRO-2: after every micro-batch's backward the gradients are
 * reduce-scattered, so that between micro-batches a rank keeps only its own
 * shard of the gradient (the rest is zero again before the next backward).
 *
 * ZeRO-3 adds the parameters: between uses a rank holds only its shard of
 * the weights; the whole stage's weights are all-gathered before each
 * micro-batch's forward and again before its backward, and after each use
 * every element the rank does not own is overwritten with NaN, so that a
 * missing gather shows in the check as NaN instead of silently reusing the
 * last gathered values. The optimizer updates the shard and nothing is
 * gathered after it. The unit of gathering is the stage (docs/exec.md, "ZeRO-2
 * and ZeRO-3", says why not per block as FSDP does).
 *
 * HSDP: the same inside each shard group (the trainer's DP group), and once
 * per step the gradient shards summed over the replicas of the shard.
 *
 * Every sum stays the one the reference computes: the gradient of an element
 * is the same terms added in another grouping, which exact mode makes
 * order-independent (quant.h). Compiled for float and double (exec_real_sources). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "exec/kernels.h"
#include "exec/memory.h"
#include "exec/real.h"

mp_status mp_trainer_set_zero(mp_trainer *t, int zero, const mp_group *replica,
                                  mp_error *err)
{
    t->zero = zero >= 2 && t->dist_opt ? zero : 0;
    if (replica)
        t->replica = *replica;
    if (t->zero < 3)
        return MP_OK;
    real *nan_host = malloc(MP_ZERO_POISON_N * sizeof(real));
    t->poison = t->be->alloc(MP_ZERO_POISON_N * sizeof(real));
    if (!nan_host || !t->poison) {
        free(nan_host);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for ZeRO-3");
    }
    for (size_t i = 0; i < MP_ZERO_POISON_N; i++)
        nan_host[i] = (real)NAN;
    t->be->copy(t->poison, nan_host, MP_ZERO_POISON_N * sizeof(real), MP_COPY_H2D);
    free(nan_host);
    mp_zero_release_params(t);
    return MP_OK;
}

/* NaN over [lo, hi) of the weights. */
static void poison_range(mp_trainer *t, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i += MP_ZERO_POISON_N) {
        size_t n = hi - i < MP_ZERO_POISON_N ? hi - i : MP_ZERO_POISON_N;
        t->be->copy(t->model->w + i, t->poison, n * sizeof(real), MP_COPY_D2D);
    }
}

void mp_zero_release_params(mp_trainer *t)
{
    if (t->zero < 3)
        return;
    for (int i = 0; i < t->n_parts; i++) {
        const mp_shard_part *p = &t->part[i];
        poison_range(t, p->lo, p->own_lo);
        poison_range(t, p->own_hi, p->hi);
    }
}

mp_status mp_zero_gather_params(mp_trainer *t, bool skip, bool skip_experts, mp_error *err)
{
    if (t->zero < 3 || skip)
        return MP_OK;
    double t0 = t->be->now();
    mp_status st = mp_shard_gather(t, skip_experts, err);
    if (st)
        return st;
    mp_probe_record(t->model->probe, t0, MP_STREAM_DP, MP_EV_DP_COMM, false);
    return MP_OK;
}

mp_status mp_zero_reduce_replicas(mp_trainer *t, mp_error *err)
{
    if (t->zero < 2 || t->replica.size <= 1 || mp_probe_drops(t->model->probe, "hsdp-replica"))
        return MP_OK;
    mp_gpt *g = t->model;
    double t0 = t->be->now();
    mp_status st = t->be->allreduce(&t->replica, MP_REAL_KIND, g->g + t->shard_lo,
                                    t->shard_hi - t->shard_lo, MP_RED_SUM, err);
    if (!st)
        mp_probe_record(g->probe, t0, MP_STREAM_DP, MP_EV_DP_COMM, false);
    return st;
}

mp_status mp_zero_reduce_microbatch(mp_trainer *t, mp_error *err)
{
    if (t->zero < 2)
        return MP_OK;
    double t0 = t->be->now();
    /* this rank's shard of g already holds the earlier micro-batches' sum
     * and every other rank's copy of it is zero, so the reduce-scatter adds
     * this micro-batch's gradients of every rank to it (each part over its
     * own group: the experts over expert-DP) */
    mp_status st = mp_shard_reduce(t, true, err);
    if (st)
        return st;
    mp_probe_record(t->model->probe, t0, MP_STREAM_DP, MP_EV_DP_COMM, false);
    return MP_OK;
}

mp_status mp_zero_unshard_grad(mp_trainer *t, size_t lo, size_t n, mp_error *err)
{
    const mp_shard_part *p = &t->part[0]; /* the embedding is no expert */
    if (t->zero < 2 || p->group.size <= 1)
        return MP_OK;
    return t->be->allreduce(&p->group, MP_REAL_KIND, t->model->g + lo, n, MP_RED_SUM, err);
}

void mp_zero_reshard_grad(mp_trainer *t, size_t lo, size_t n)
{
    const mp_shard_part *p = &t->part[0];
    if (t->zero < 2 || p->group.size <= 1)
        return;
    size_t hi = lo + n;
    if (lo < p->own_lo)
        t->be->zero(t->model->g + lo, ((hi < p->own_lo ? hi : p->own_lo) - lo) * sizeof(real));
    if (hi > p->own_hi) {
        size_t from = lo > p->own_hi ? lo : p->own_hi;
        t->be->zero(t->model->g + from, (hi - from) * sizeof(real));
    }
}
