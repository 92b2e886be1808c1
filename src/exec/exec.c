/* exec.c — the executor's driver: from a plan to the model each rank runs,
 * the training steps, and the check against the unpartitioned reference
 * (ref_run.h). */
#include "exec/exec.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/check.h"
#include "exec/fixture.h"
#include "exec/kernels.h"
#include "exec/memory.h"
#include "exec/moe.h"
#include "exec/quant.h"
#include "exec/ref_run.h"
#include "exec/t5.h"
#include "exec/t5_plan.h"
#include "exec/watchdog.h"
#include "planner/cost_internal.h"
#include "sim/schedule.h"
#include "sim/simulate.h" /* mp_sim_plan_schedule */
#ifdef MP_TEST_ZBV_MUTANT
#include "exec/test_mutant.h"
#include "sim/schedule_vorder.h"
#endif

void mp_exec_opts_default(mp_exec_opts *o)
{
    memset(o, 0, sizeof *o);
    o->steps = 3;
    o->check = true;
    o->seed = 1234;
    o->tol = 1e-5;
    o->test_kill_rank = -1;
    o->test_stop_rank = -1;
    o->solo_rank = -1;
    o->backend = "cpu";
}

void mp_exec_report_free(mp_exec_report *rep)
{
    free(rep->tensors);
    free(rep->loss);
    free(rep->ref_loss);
    free(rep->step_checked);
    free(rep->step_seconds);
    rep->tensors = NULL;
    rep->loss = rep->ref_loss = rep->step_seconds = NULL;
    rep->step_checked = NULL;
    if (rep->have_timeline)
        mp_timeline_free(&rep->timeline);
    rep->have_timeline = false;
}

/* Synthetic data: token and target of (step, sample, position) from the seed.
 * BERT (masked): about 15% of the positions have a target, the rest -1. */
static void make_batch(uint64_t seed, int step, int first_sample, int n_mb, int b, int s, int V,
                       bool masked, int32_t *tok, int32_t *tgt)
{
    for (int mb = 0; mb < n_mb; mb++)
        for (int si = 0; si < s; si++)
            for (int bi = 0; bi < b; bi++) {
                uint64_t smp = (uint64_t)(first_sample + mb * b + bi);
                uint64_t h = mp_mix64(seed ^ ((uint64_t)step << 56) ^ (smp << 24) ^ (uint64_t)si);
                size_t r = (size_t)mb * (size_t)s * (size_t)b + (size_t)si * (size_t)b + (size_t)bi;
                tok[r] = (int32_t)(h % (uint64_t)V);
                tgt[r] = (int32_t)((h >> 32) % (uint64_t)V);
                if (masked && mp_mix64(h) % 100 >= 15)
                    tgt[r] = -1;
            }
}

/* Context parallelism: a rank's token rows are its positions' rows (r =
 * local position * b + sample) of each micro-batch of full[m][seq*b]; rows[r]
 * is the full row of local row r (the reference's row for the logits). */
static void cp_rows(const mp_gpt_dims *d, int m, const int32_t *full_tok,
                    const int32_t *full_tgt, int32_t *tok, int32_t *tgt, int *rows)
{
    int b = d->micro_batch, s = mp_dims_positions(d);
    size_t S = (size_t)s * b, Sf = (size_t)d->seq * b;
    for (int i = 0; i < s; i++)
        for (int n = 0; n < b; n++)
            rows[(size_t)i * b + n] = mp_dims_global_pos(d, i) * b + n;
    for (int mb = 0; mb < m; mb++)
        for (size_t r = 0; r < S; r++) {
            tok[(size_t)mb * S + r] = full_tok[(size_t)mb * Sf + (size_t)rows[r]];
            tgt[(size_t)mb * S + r] = full_tgt[(size_t)mb * Sf + (size_t)rows[r]];
        }
}

/* Everything one run holds, freed in one place, and what its steps share. */
typedef struct run {
    const mp_exec_opts *o;
    mp_runtime *rt;
    const mp_backend *be;      /* runs the partitioned model */
    const mp_backend *host;    /* the host's scalars, the driver's collectives, the reference */
    mp_gpt_dims d;             /* the plan's model as this rank runs it */
    int m, dp;                 /* micro-batches per DP rank; DP degree */
    bool hsdp;                 /* ZeRO-3 in shard groups, replicated across (rt's shard/replica groups) */
    int S, Sfull;              /* this rank's token rows of a micro-batch; all of them */
    long tokens_total;         /* the loss's tokens in the global batch */
    mp_adam_cfg adam;
    double grad_scale;
    int v;                     /* model chunks on this rank (vpp; 1 without interleaving) */
    mp_gpt_dims *dc;           /* [v] chunk c runs virtual stage c*pp + pp_rank (V: pp_rank, 2pp-1-pp_rank) */
    mp_param_layout *lay;      /* [v] */
    mp_gpt_f32 *model;         /* [v] */
    mp_trainer_f32 *trainer;   /* [v] */
    int head;                  /* the chunk holding the LM head and loss, or -1 */
    mp_op_list ops;
    mp_probe probe;
    mp_ref_run ref;            /* the check's reference (ref_run.h) */
    int32_t *tok, *tgt;
    int32_t *dtok, *dtgt;      /* this DP rank's whole sequences, before the CP selection */
    int *logit_rows;           /* [S] the reference's row of each local token row */
    mp_check chk;
    mp_fixture fx;             /* --test-fixture: PyTorch's step, the reference */
    float *host_copy;          /* a device tensor's copy for the check (CUDA backend) */
    size_t host_copy_n;
    mp_group moe_ep, moe_edp;  /* MoE: the expert-parallel and expert-DP groups (moe.h) */
} run;

/* What the check reads of n floats of the backend's memory: the pointer
 * itself on a host backend, else a copy on the host. NULL when out of memory. */
static const float *host_view(run *r, const mp_backend *be, const float *p, size_t n)
{
    if (be->host_memory)
        return p;
    if (n > r->host_copy_n) {
        float *q = realloc(r->host_copy, n * sizeof *q);
        if (!q)
            return NULL;
        r->host_copy = q;
        r->host_copy_n = n;
    }
    be->copy(r->host_copy, p, n * sizeof *p, MP_COPY_D2H);
    return r->host_copy;
}

static void run_free(run *r)
{
    for (int c = 0; c < r->v; c++) {
        if (r->trainer)
            mp_trainer_free_f32(&r->trainer[c]);
        if (r->model)
            mp_gpt_free_f32(&r->model[c]);
        if (r->lay)
            mp_param_layout_free(&r->lay[c]);
    }
    free(r->trainer);
    free(r->model);
    free(r->lay);
    free(r->dc);
    mp_ref_run_free(&r->ref);
    mp_op_list_free(&r->ops);
    mp_probe_free(&r->probe);
    free(r->tok);
    free(r->tgt);
    free(r->dtok);
    free(r->dtgt);
    free(r->logit_rows);
    free(r->host_copy);
    mp_check_free(&r->chk);
    mp_moe_groups_free(&r->moe_ep, &r->moe_edp);
    mp_fixture_free(&r->fx);
}

/* Every rank's events, on rank 0: first how many bytes each has, then them. */
static mp_status gather_timeline(mp_runtime *rt, const mp_backend *host, const mp_probe *pr,
                                 mp_exec_report *rep, mp_error *err)
{
    size_t bytes = pr->n * sizeof(mp_event);
    int root = rt->world.rank == 0, n = rt->world.size;
    size_t *counts = root ? calloc((size_t)n, sizeof(size_t)) : NULL;
    size_t *sizes = root ? calloc((size_t)n, sizeof(size_t)) : NULL;
    if (root && (!counts || !sizes)) {
        free(counts);
        free(sizes);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the timeline");
    }
    for (int i = 0; root && i < n; i++)
        sizes[i] = sizeof(size_t);
    mp_status st = host->gather(&rt->world, &bytes, sizeof bytes, counts, sizes, 0, err);
    size_t total = 0;
    for (int i = 0; root && i < n; i++)
        total += counts[i];
    mp_event *all = root ? malloc(total + 1) : NULL;
    if (!st)
        st = host->gather(&rt->world, pr->events, bytes, all, counts, 0, err);
    if (root && !st) {
        mp_timeline_init(&rep->timeline, n, "measured");
        rep->have_timeline = true;
        for (size_t i = 0; all && i < total / sizeof(mp_event) && !st; i++)
            st = mp_timeline_add(&rep->timeline, &all[i], err);
    }
    free(all);
    free(counts);
    free(sizes);
    return st;
}

/* A pessimistic guess of one step's seconds on this machine, before any has
 * run: 6 FLOPs per parameter and token (forward and backward) plus the
 * attention's scores, the partitioned share and, when checked, the whole
 * reference (fp64: half the rate), at 1 GFLOP/s per core shared by the ranks
 * on it (the GEMMs reach ~90; the elementwise loops, sanitizers and a loaded
 * machine much less). The watchdog's timeout is a multiple of it. */
static double predicted_step_seconds(const mp_gpt_dims *d, double local_params,
                                     double full_params, long tokens_rank, long tokens_total,
                                     bool check, bool ref64, int world)
{
    double attn = 12.0 * d->seq * d->heads * mp_dims_head_dim(d) * d->layers;
    double flops = (6.0 * local_params + attn / d->tp) * (double)tokens_rank;
    if (check)
        flops += (6.0 * full_params + attn) * (double)tokens_total * (ref64 ? 2.0 : 1.0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double share = cores > 0 && world > cores ? (double)world / (double)cores : 1.0;
    return flops * share / 1e9;
}

/* The watchdog's timeout for the next waits: --timeout, else the floor plus
 * a multiple of the longer of the predicted step and the last one measured
 * (a wait can last as long as a peer's step: a pipeline stage waits for its
 * neighbour's micro-batches, every rank for the slowest at the barrier). */
static void arm_watchdog(const mp_exec_opts *o, double predicted, double measured)
{
    double base = predicted > measured ? predicted : measured;
    mp_watch_set_timeout(o->timeout > 0 ? o->timeout
                                        : MP_WATCH_FLOOR_S + MP_WATCH_MULTIPLE * base);
}

#define TRY(x)                                                                              \
    do {                                                                                    \
        st = (x);                                                                           \
        if (st != MP_OK)                                                                    \
            goto done;                                                                      \
    } while (0)

/* Everything this run will allocate, against what the machine has, before
 * anything is allocated; rank 0's figure, so that every rank decides alike. */
static mp_status gate_memory(run *R, const mp_plan *plan, mp_exec_report *rep, mp_error *err)
{
    mp_exec_memory mem;
    mp_status st = mp_exec_memory_estimate(plan, R->o, &R->d, R->m, &mem, err);
    if (st)
        return st;
    int rank = R->rt->world.rank;
    const char *source = "";
    double have = rank == 0 ? mp_exec_memory_available(&source) : 0;
    if (R->o->test_memory > 0)
        have = R->o->test_memory, source = "--test-memory-available";
    st = R->host->bcast(&R->rt->world, &have, sizeof have, 0, err);
    if (!st)
        st = mp_exec_memory_check(&mem, have, rank == 0 ? source : "rank 0's figure", err);
    if (st)
        return st;
    rep->memory_estimate = mem.rank_max;
    /* until the first step: allocating and filling that much, at a
     * pessimistic 100 MB/s, bounds the wait for the slowest rank */
    arm_watchdog(R->o, mem.rank_max / 1e8, 0);
    return MP_OK;
}

/* Each chunk's dims and layout, which chunk holds the head, and this
 * rank's schedule. */
static mp_status build_chunks(run *R, const mp_plan *plan, mp_error *err)
{
    const mp_gpt_dims *d = &R->d;
    mp_runtime *rt = R->rt;
    int v = R->v;
    R->head = -1;
    R->lay = calloc((size_t)v, sizeof *R->lay);
    R->model = calloc((size_t)v, sizeof *R->model);
    R->trainer = calloc((size_t)v, sizeof *R->trainer);
    R->dc = calloc((size_t)v, sizeof *R->dc);
    if (!R->lay || !R->model || !R->trainer || !R->dc) {
        R->v = 0;
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    }
    mp_status st = MP_OK;
    for (int c = 0; c < v && !st; c++) {
        mp_gpt_dims *dc = &R->dc[c];
        *dc = *d;
        int vs = (int)mp_schedule_stage(plan->config.parallel.schedule, rt->pp, rt->pp_rank, c);
        st = mp_exec_stage_items(plan, R->o->shrink, d, vs, &dc->item_begin, &dc->item_end,
                                 err);
        dc->mtp_split = mp_exec_mtp_role(plan, R->o->shrink, vs);
        if (!st)
            st = mp_param_layout_build(dc, &R->lay[c], err);
        if (!st) {
            int b, e;
            mp_dims_items(dc, &b, &e);
            /* dualpipe: the head of the direction that carries micro-batch 0
             * (the one whose logits the check keeps), not of the other */
            bool keeps = plan->config.parallel.schedule != MP_SCHED_DUALPIPE || c == 0;
            if (e == d->layers + 2 && keeps)
                R->head = c;
        }
    }
    /* T5: the first decoder stage's copy of the embedding joins the group */
    if (!st && d->t5)
        st = mp_exec_t5_embedding_group(
            rt, R->lay[0].wte >= 0 || (d->tied && R->lay[0].head >= 0), err);
    /* a standalone MTP stage: the ranks with any copy of the embedding (the
     * first stage's, the MTP stage's, a tied head's), as Megatron's group */
    if (!st && !d->t5 && v > 0 && R->dc[0].mtp_split) {
        bool member = false;
        for (int c = 0; c < v; c++)
            member |= R->lay[c].wte >= 0 || (d->tied && R->lay[c].head >= 0);
        st = mp_exec_t5_embedding_group(rt, member, err);
    }
    if (!st)
        /* the simulator's list for this plan (ZB-V: ordered by its stage costs) */
        st = mp_sim_plan_schedule(plan, R->m, rt->pp_rank, &R->ops, err);
    return st;
}

static void report_shape(const run *R, const mp_plan *plan, mp_exec_report *rep)
{
    const mp_parallel *par = &plan->config.parallel;
    const mp_exec_opts *o = R->o;
    rep->solo_rank = o->solo_rank;
    rep->solo_coords[0] = R->rt->tp_rank, rep->solo_coords[1] = R->rt->cp_rank;
    rep->solo_coords[2] = R->rt->dp_rank, rep->solo_coords[3] = R->rt->pp_rank;
    rep->dims = R->dc[0];
    /* (virtual) stages per rank: the chunks, but 1 for dualpipe's two copies */
    rep->vpp = (int)(mp_schedule_n_stages(par->schedule, R->rt->pp, par->vpp) / R->rt->pp);
    rep->ranks = R->rt->world.size;
    rep->tp = R->rt->tp;
    rep->cp = R->rt->cp;
    rep->dp = R->dp;
    rep->pp = R->rt->pp;
    rep->microbatches = R->m;
    rep->sp = R->d.sp;
    rep->dist_opt = par->dist_opt && R->dp > 1;
    rep->zero = par->dist_opt && R->rt->dpcp_group.size > 1 && par->zero >= 2 ? (int)par->zero : 0;
    rep->hsdp_shard = R->hsdp ? R->rt->shard_group.size : 0;
    rep->exact = o->exact;
    rep->checked = o->check;
    /* the lists run (mp_sim_plan_schedule): zb-h1 at pp 1 as 1f1b, each
     * backward whole (core/config.h mp_schedule_run_as) */
    rep->schedule = par->schedule == MP_SCHED_ZBH1 &&
                            mp_schedule_run_as(par->schedule, par->pp) == MP_SCHED_1F1B
                        ? "1f1b (zb-h1 without a pipeline)"
                        : mp_schedule_name(par->schedule);
    rep->plan_precision = mp_dtype_name(plan->config.training.precision);
    rep->recompute = mp_recompute_name(par->recompute);
    rep->layer_recompute = R->d.layer_recompute != NULL;
    /* zb-v: every rank's order comes from one generator run, so rank 0's
     * list says for all whether it is the fallback */
    rep->zbv_order_fallback = R->ops.fallback;
}

/* The partitioned model's chunks and their trainers. */
static mp_status init_chunks(run *R, const mp_parallel *par, mp_error *err)
{
    mp_runtime *rt = R->rt;
    mp_status st = MP_OK;
    for (int c = 0; c < R->v && !st; c++) {
        st = mp_gpt_init_f32(&R->model[c], &R->dc[c], &R->lay[c], R->be, rt->tp_group,
                             mp_exec_slots(&R->ops, c), (size_t)rt->dpcp_group.size,
                             R->o->exact, R->o->seed, &R->probe, err);
        if (st)
            break;
        R->model[c].cp = rt->cp_group;
        R->model[c].ep = R->moe_ep;
        R->model[c].edp = R->moe_edp;
        R->model[c].grad_scale = (float)R->grad_scale;
        if (R->d.t5) { /* each stack's stages sum their relative-bias copies */
            mp_group eg, dg;
            st = mp_exec_t5_stack_groups(rt, R->lay[c].enc_rel >= 0, R->lay[c].dec_rel >= 0,
                                         &eg, &dg, err);
            if (st)
                break;
            mp_t5_set_stack_groups_f32(&R->model[c], eg, dg);
        }
        st = mp_trainer_init_f32(&R->trainer[c], &R->model[c],
                                 R->hsdp ? rt->shard_group : rt->dpcp_group, par->dist_opt,
                                 &R->adam, R->m, &R->ops, err);
        if (!st) {
            /* V placement: both copies of a tied embedding are on rank 0, summed
             * there (step.c), so no embedding group */
            R->trainer[c].schedule = par->schedule;
            /* dualpipe: rank pp-1 holds them too (stage 0 in its chunk 1), and
             * each stage's two copies sum their gradients over the mirror group */
            bool local_tied = mp_schedule_is_v(par->schedule) ||
                              par->schedule == MP_SCHED_DUALPIPE;
            R->trainer[c].mirror = rt->mirror_group;
            st = mp_trainer_set_pipeline_f32(&R->trainer[c], rt->pp_group,
                                             local_tied ? rt->self : rt->emb_group, err);
        }
        if (!st)
            st = mp_trainer_set_zero_f32(&R->trainer[c], (int)par->zero,
                                         R->hsdp ? &rt->replica_group : NULL, err);
    }
    return st;
}

/* The check's reference (ref_run.h), the logits this rank keeps for it and
 * the comparison's tolerance. */
static mp_status check_setup(run *R, mp_exec_report *rep, mp_error *err)
{
    const mp_exec_opts *o = R->o;
    const mp_gpt_dims *d = &R->d;
    /* the logits exist on the last pipeline stage only */
    mp_gpt_f32 *hm = R->head >= 0 ? &R->model[R->head] : NULL;
    if (hm) {
        hm->kept_logits = malloc((size_t)R->S * (size_t)(d->vocab / d->tp) * sizeof(float));
        if (!hm->kept_logits)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the check");
        hm->keep_microbatch = 0;
    }
    if (o->fixture && !R->be->host_memory) /* the fixture loads straight into host weights */
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--test-fixture",
                            "runs on the cpu backend (got %s)", R->be->name);
    mp_gpt_dims rd = mp_exec_ref_dims(d);
    int first = R->rt->dp_rank * R->m; /* this DP rank's first micro-batch */
    mp_status st = mp_ref_run_init(&R->ref, &rd, R->m * R->dp, first, R->host, R->rt->self,
                                   &R->adam, R->grad_scale, (double)R->tokens_total, o->exact,
                                   o->seed, o->fixture ? &R->fx : NULL, first, err);
    /* a fixture: this rank's weights from it instead of the seed's */
    for (int c = 0; o->fixture && c < R->v && !st; c++)
    {
        st = mp_fixture_fill(&R->fx, "param:", &R->lay[c], &R->ref.lay, R->rt->tp_rank,
                             R->model[c].w, err);
        if (!st) /* the expert bias the fixture's choice started from */
            st = mp_fixture_route_bias(&R->fx, &R->model[c].d, R->model[c].route_bias, err);
    }
    if (st)
        return st;
    rep->tol = o->fixture ? o->tol
               : o->tol_set ? o->tol
               : !strcmp(R->be->precision, "bf16") ? (d->bert ? MP_EXEC_BERT_BF16_TOL
                                                               : MP_EXEC_BF16_TOL)
               : d->bert ? MP_EXEC_BERT_TOL : o->tol;
    return mp_check_init(&R->chk, &R->ref.lay, o->exact, rep->tol, err);
}

/* A checked step's loss, logits and gradients against the reference's. */
static mp_status check_grads(run *R, int step, mp_exec_report *rep, mp_error *err)
{
    const mp_gpt_dims *d = &R->d;
    double rloss = 0;
    make_batch(R->o->seed, step, 0, R->m * R->dp, d->micro_batch, d->seq, d->vocab, d->bert,
               R->ref.tok, R->ref.tgt);
    mp_check_view ref;
    mp_status st = mp_ref_run_grads(&R->ref, &rloss, &ref, err);
    if (st)
        return st;
    rep->ref_loss[step - 1] = rloss / (double)R->tokens_total;
    mp_check_scalar(&R->chk, step, "loss", rep->loss[step - 1], rep->ref_loss[step - 1]);
    if (R->head >= 0)
        mp_check_logits(&R->chk, step, R->model[R->head].kept_logits, &ref, R->S,
                        R->logit_rows, d->vocab, d->tp, R->rt->tp_rank);
    for (int c = 0; c < R->v; c++) {
        const float *gv = host_view(R, R->be, R->model[c].g, R->model[c].n_alloc);
        if (!gv)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        /* with the distributed optimizer: this rank's shard of each part */
        const mp_trainer_f32 *t = &R->trainer[c];
        for (int i = 0; i < t->n_parts; i++)
            mp_check_params(&R->chk, step, "grad:", &R->lay[c], gv, &ref, &R->ref.lay,
                            R->rt->tp_rank, t->part[i].own_lo, t->part[i].own_hi);
    }
    return MP_OK;
}

/* A checked step's weights after the optimizer against the reference's. */
static mp_status check_params(run *R, int step, mp_error *err)
{
    mp_check_view ref;
    mp_status st = mp_ref_run_update(&R->ref, step, &ref, err);
    for (int c = 0; c < R->v && !st; c++) {
        const float *wv = host_view(R, R->be, R->model[c].w, R->model[c].n_alloc);
        if (!wv)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        /* ZeRO-3: a rank holds its shard of each part's weights alone */
        const mp_trainer_f32 *t = &R->trainer[c];
        if (t->zero != 3)
            mp_check_params(&R->chk, step, "param:", &R->lay[c], wv, &ref, &R->ref.lay,
                            R->rt->tp_rank, 0, R->lay[c].total);
        for (int i = 0; t->zero == 3 && i < t->n_parts; i++)
            mp_check_params(&R->chk, step, "param:", &R->lay[c], wv, &ref, &R->ref.lay,
                            R->rt->tp_rank, t->part[i].own_lo, t->part[i].own_hi);
    }
    return st;
}

/* The last step's phases, every step's time, the memory peak and the
 * timeline, each as the ranks together saw it. */
static mp_status finish_report(run *R, mp_exec_report *rep, mp_error *err)
{
    mp_runtime *rt = R->rt;
    /* a TP collective inside an F or B counts in both */
    double mine[MP_PHASE_COUNT] = {0};
    for (size_t i = 0; i < R->probe.n; i++) {
        const mp_event *e = &R->probe.events[i];
        int k = -1;
        switch (e->kind) {
        case MP_EV_F: k = MP_PHASE_F; break;
        case MP_EV_B: k = MP_PHASE_B; break;
        case MP_EV_TP_COMM: k = MP_PHASE_TP; break;
        case MP_EV_DP_COMM: k = MP_PHASE_DP; break;
        case MP_EV_OPTIMIZER: k = MP_PHASE_OPTIMIZER; break;
        case MP_EV_CP_COMM: k = MP_PHASE_CP; break;
        case MP_EV_SEND_FWD: case MP_EV_RECV_FWD: case MP_EV_SEND_BWD: case MP_EV_RECV_BWD:
        case MP_EV_OTHER: k = MP_PHASE_PP; break;
        default: break;
        }
        if (k >= 0)
            mine[k] += e->end - e->start;
    }
    memcpy(rep->phase_seconds, mine, sizeof mine);
    mp_status st = R->host->allreduce(&rt->world, MP_REAL64, rep->phase_seconds,
                                      MP_PHASE_COUNT, MP_RED_MAX, err);
    /* every step's time as the slowest rank saw it */
    if (!st)
        st = R->host->allreduce(&rt->world, MP_REAL64, rep->step_seconds,
                                (size_t)R->o->steps, MP_RED_MAX, err);
    /* what the estimate is measured against (tests/exec/memory_case.py) */
    rep->memory_peak = mp_exec_peak_rss();
    if (!st)
        st = R->host->allreduce(&rt->world, MP_REAL64, &rep->memory_peak, 1, MP_RED_MAX, err);
    if (!st && R->o->want_timeline)
        st = gather_timeline(rt, R->host, &R->probe, rep, err);
    return st;
}

/* Refuses what cannot run (a fixture's modes, --solo with the check) and
 * splits the world into the plan's groups. */
static mp_status start(run *R, const mp_config *cfg, mp_error *err)
{
    const mp_parallel *par = &cfg->parallel;
    const mp_exec_opts *o = R->o;
    mp_status st = MP_OK;
    if (o->fixture) {
        if (o->exact || !o->check)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--test-fixture",
                                "a fixture is checked in fp32 tolerance mode: drop %s",
                                o->exact ? "--exact" : "--no-check");
        st = mp_fixture_load(o->fixture, &R->fx, err);
        if (!st)
            st = mp_fixture_match(&R->fx, &R->d, R->m * (int)par->dp * R->d.micro_batch, err);
        if (st)
            return st;
    }
    if (o->solo_rank < 0) {
        st = mp_runtime_split(R->rt, (int)par->tp, (int)par->cp, (int)par->dp, (int)par->pp,
                              err);
    } else if (o->check) {
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--solo",
                            "--solo runs without the check (--no-check): the values of one "
                            "rank without its peers are not the plan's");
    } else {
        st = mp_runtime_split_solo(R->rt, (int)par->tp, (int)par->cp, (int)par->dp,
                                   (int)par->pp, o->solo_rank, err);
    }
    /* HSDP: ZeRO-3 inside shard groups of the planner's size, replicated across */
    R->hsdp = par->hsdp && par->zero == 3 && par->dist_opt;
    if (!st && R->hsdp)
        st = mp_runtime_split_shards(R->rt, (int)mp_zero_shard_ranks(cfg), err);
    if (!st && par->schedule == MP_SCHED_DUALPIPE)
        st = mp_runtime_split_mirror(R->rt, err);
    return st;
}

static mp_adam_cfg adam_of(const mp_exec_opts *o, const mp_fixture *fx)
{
    if (o->fixture)
        return (mp_adam_cfg){.lr = fx->lr, .beta1 = fx->beta1, .beta2 = fx->beta2,
                             .eps = fx->eps, .weight_decay = fx->weight_decay};
    /* tolerance mode: lr 1e-4, as large models train. Adam's first step moves
     * a weight by lr g / (|g| + eps), so a gradient's rounding error dg moves
     * it by up to lr dg / (4 eps) (at |g| = eps): at lr 1e-3 and eps 1e-4 a
     * gain of 2.5, which at full hidden sizes (1024, 2048) turned the tied
     * embedding's fp32 rounding into 1.4e-5 to 2.2e-5 of its largest weight, a
     * false mismatch against 1e-5; at 1e-4 it is 0.25 (docs/exec.md,
     * "Tolerance mode") */
    return (mp_adam_cfg){.lr = o->lr > 0 ? o->lr : (o->exact ? 0.0625 : 1e-4),
                         .beta1 = 0.9, .beta2 = 0.95,
                         .eps = o->adam_eps > 0 ? o->adam_eps : (o->exact ? 1e-8 : 1e-4),
                         .weight_decay = 0.1};
}

mp_status mp_exec_run(mp_runtime *rt, const mp_plan *plan, const mp_exec_opts *o,
                      mp_exec_report *rep, mp_error *err)
{
    memset(rep, 0, sizeof *rep);
    rep->collective_error = true;
    run R;
    memset(&R, 0, sizeof R);
    mp_status st = MP_OK;
    const mp_parallel *par = &plan->config.parallel;
    mp_exec_opts fixture_opts;
    if (o->fixture) { /* a fixture holds one step, computed in fp32 */
        fixture_opts = *o;
        fixture_opts.steps = 1;
        if (!o->tol_set)
            fixture_opts.tol = MP_FIXTURE_TOL;
        o = &fixture_opts;
    }
    R.o = o;
    R.rt = rt;
#ifdef MP_TEST_ZBV_MUTANT
    /* Test-only (the mutant build of tests/exec/meson.build): with
     * MP_TEST_ZBV_MUTANT=stall in the environment the zb-v generator acts
     * as if its greedy orders had stalled, so that the fallback order runs
     * and the report is shown to say so (the greedy itself cannot stall) */
    if (mp_test_mutant_named("MP_TEST_ZBV_MUTANT", "stall"))
        mp_schedule_zbv_test_stall(true);
#endif
    TRY(mp_exec_precheck(plan, o, &R.d, &R.m, err));
    TRY(start(&R, &plan->config, err));
    R.host = rt->solo ? mp_backend_solo() : mp_backend_cpu();
    TRY(gate_memory(&R, plan, rep, err));
    const mp_gpt_dims *d = &R.d;
    R.d.tp_rank = rt->tp_rank;
    R.d.cp_rank = rt->cp_rank;
    {
        int edp_rank;
        mp_moe_coords(&R.d, rt->tp_rank, rt->dp_rank, &R.d.ep_rank, &edp_rank); /* MoE's folding */
    }
    /* S: this rank's token rows of one micro-batch (its positions with CP);
     * the gradients are reduced over DP x CP (dpcp_group, the DP group when cp = 1) */
    int m = R.m, dp = R.dp = rt->dp, v = R.v = (int)mp_schedule_chunks(par->schedule, par->vpp);
    R.S = mp_dims_tokens(d);
    R.Sfull = d->seq * d->micro_batch;
    /* T5's loss is over the decoder's tokens */
    R.tokens_total = (long)m * dp * (d->t5 ? d->dec_seq * d->micro_batch : R.Sfull);
    TRY(build_chunks(&R, plan, err));
    report_shape(&R, plan, rep);

    /* MoE: the EP and expert-DP groups first (the CUDA backend links NCCL to them) */
    if (d->experts > 0)
        TRY(mp_moe_groups(rt, d, &R.moe_ep, &R.moe_edp, err));
    const mp_group *moe_groups[] = {&R.moe_ep, &R.moe_edp};
    TRY(mp_exec_backend(rt, o, plan->config.training.precision != MP_DTYPE_FP32, moe_groups,
                        d->experts > 0 ? 2 : 0, &R.be, err));
    const mp_backend *be = R.be, *host = R.host;
    rep->backend = be->name;
    rep->transport = be->transport;
    rep->compute_precision = be->precision;
    /* T5's own ops (ReLU, the relative position bias): a backend without them
     * leaves them NULL */
    if (d->t5 && (!be->relu_forward || !be->relu_backward || !be->rel_bias_add ||
                  !be->rel_bias_grad))
        TRY(mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--backend",
                         "T5's ReLU and relative position bias are missing from the %s backend",
                         be->name));

    /* GPT-OSS's ops: a backend without them leaves them NULL */
    if ((d->window > 0 || d->sinks || d->glu_limit > 0) &&
        (!be->attn_softmax_oss || !be->attn_softmax_oss_backward ||
         !be->swiglu_clamped_forward || !be->swiglu_clamped_backward))
        TRY(mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--backend",
                         "GPT-OSS's windowed / sink attention and clamped SwiGLU run on the "
                         "cpu backend only for now (got %s)", be->name));
    if (d->experts > 0) { /* MoE: routing and all-to-all are the backend's ops */
        if (par->dist_opt && R.moe_edp.size > 1) { /* the experts' shards (shard.c) */
            rep->dist_opt = true;
            rep->zero = par->zero >= 2 ? (int)par->zero : 0;
        }
    }

    /* From here on an error may be one rank's alone. */
    rep->collective_error = false;
    mp_probe_init(&R.probe, be, rt->world.rank);
    R.probe.drop_site = o->test_drop;
    if (o->test_kill_rank == rt->world.rank)
        R.probe.kill_step = 1;
    if (o->test_stop_rank == rt->world.rank) {
        R.probe.kill_step = 1;
        R.probe.kill_signal = SIGSTOP;
    }
    R.adam = adam_of(o, &R.fx);
    R.grad_scale = o->exact ? MP_EXACT_GRAD_SCALE : 1.0 / (double)R.tokens_total;
    TRY(init_chunks(&R, par, err));
    /* activations this rank keeps: what recomputation saves is measured here */
    rep->activation_bytes = 0;
    for (int c = 0; c < v; c++)
        rep->activation_bytes +=
            (double)R.model[c].n_slots * (double)R.model[c].slot_reals * sizeof(float);
    /* every rank has its model: a rank stopped before (SIGSTOP) ends the job here */
    TRY(host->barrier(&rt->world, err));
    TRY(host->allreduce(&rt->world, MP_REAL64, &rep->activation_bytes, 1, MP_RED_MAX, err));
    size_t nmy = (size_t)m * (size_t)R.S, nseq = (size_t)m * (size_t)R.Sfull;
    R.tok = malloc(nmy * sizeof(int32_t));
    R.tgt = malloc(nmy * sizeof(int32_t));
    R.dtok = malloc(nseq * sizeof(int32_t));
    R.dtgt = malloc(nseq * sizeof(int32_t));
    R.logit_rows = malloc((size_t)R.S * sizeof(int));
    if (!R.tok || !R.tgt || !R.dtok || !R.dtgt || !R.logit_rows)
        TRY(mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the data"));
    if (o->check)
        TRY(check_setup(&R, rep, err));

    rep->steps = o->steps;
    rep->check_every = o->check_every > 1 ? o->check_every : 1;
    rep->loss = calloc((size_t)o->steps, sizeof *rep->loss);
    rep->ref_loss = calloc((size_t)o->steps, sizeof *rep->ref_loss);
    rep->step_checked = calloc((size_t)o->steps, 1);
    rep->step_seconds = calloc((size_t)o->steps, sizeof *rep->step_seconds);
    if (!rep->loss || !rep->ref_loss || !rep->step_checked || !rep->step_seconds)
        TRY(mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the report"));
    /* whether the reference holds the partitioned run's state bit for bit: in
     * exact mode at the start (same initial values) and after every checked
     * step that agreed; never in tolerance mode (fp64 against fp32) */
    bool ref_current = o->exact;
    double local_params = 0;
    for (int c = 0; c < v; c++)
        local_params += (double)R.lay[c].total;
    double predicted = predicted_step_seconds(
        d, local_params, o->check ? (double)R.ref.lay.total : 0, (long)m * R.S, R.tokens_total,
        o->check, o->check && R.ref.f64, rt->world.size);
    arm_watchdog(o, predicted, 0);
    double run_start = be->now();
    for (int step = 1; step <= o->steps; step++) {
        double iteration_start = be->now();
        /* this DP rank's samples, then (CP) this rank's positions of them */
        if (o->fixture)
            mp_fixture_batch(&R.fx, rt->dp_rank * m, m, d->micro_batch, R.dtok, R.dtgt);
        else
            make_batch(o->seed, step, rt->dp_rank * m * d->micro_batch, m, d->micro_batch,
                       d->seq, d->vocab, d->bert, R.dtok, R.dtgt);
        cp_rows(d, m, R.dtok, R.dtgt, R.tok, R.tgt, R.logit_rows);
        TRY(host->barrier(&rt->world, err));
        double t0 = be->now();
        TRY(host->bcast(&rt->world, &t0, sizeof t0, 0, err));
        R.probe.t0 = t0;
        R.probe.step = step;
        R.probe.recording = step == o->steps;
        double loss = 0;
        double start_s = be->now();
        TRY(mp_trainer_grads_chunks_f32(R.trainer, v, R.tok, R.tgt, &loss, err));
        double grads_seconds = be->now() - start_s; /* the step's time leaves the check out */
        TRY(host->allreduce(&rt->dpcp_group, MP_REAL64, &loss, 1, MP_RED_SUM, err));
        /* only the last stage computes the loss; the others add nothing */
        TRY(host->allreduce(&rt->pp_group, MP_REAL64, &loss, 1, MP_RED_SUM, err));
        rep->loss[step - 1] = loss / (double)R.tokens_total;
        bool check_now = o->check && ((step - 1) % rep->check_every == 0 || step == o->steps);
        rep->step_checked[step - 1] = check_now;
        if (check_now && !ref_current && !o->fixture) { /* a fixture is one step from its own weights */
            /* each checked step from the partitioned run's state: one step's
             * rounding, not the drift of hundreds (ref_sync.h) */
            mp_ref_state rs = mp_ref_run_state(&R.ref);
            TRY(mp_ref_sync(rt, R.trainer, R.lay, v, &R.ref.lay, R.ref.sync_buf, &rs, err));
        }
        if (check_now)
            TRY(check_grads(&R, step, rep, err));
        double update_start = be->now();
        for (int c = 0; c < v; c++)
            TRY(mp_trainer_update_f32(&R.trainer[c], step, err));
        rep->step_seconds[step - 1] = grads_seconds + (be->now() - update_start);
        /* exact mode: a reference that ran this step from the same state
         * still agrees bit for bit, or the check has said where not */
        ref_current = o->exact && check_now;
        if (check_now)
            TRY(check_params(&R, step, err));
        arm_watchdog(o, predicted, be->now() - iteration_start);
        if (o->progress && rt->world.rank == 0) {
            double elapsed = be->now() - run_start;
            o->progress(o->progress_ctx, step, o->steps, elapsed,
                        elapsed / step * (o->steps - step));
        }
    }
    /* the blocking reductions below start once every rank is here */
    TRY(host->barrier(&rt->world, err));
    if (o->check)
        TRY(mp_check_finish(&R.chk, rt, host, rep, err));
    else
        rep->ok = true;
    TRY(finish_report(&R, rep, err));
done:
    run_free(&R);
    return st;
}
