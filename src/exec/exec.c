/* exec.c — the executor's driver: from a plan to the model each rank runs,
 * the training steps, and the check against the unpartitioned reference.
 *
 * The reference: every rank builds the whole model (tp = dp = 1, size-1
 * groups) from the same seed and runs the whole global batch itself, then
 * compares its own slices (its TP part of each tensor, its DP shard of the
 * gradients with the distributed optimizer, its micro-batch's logits). No
 * tensor is gathered, so the check's memory stays one model per rank; the
 * cost is that each rank repeats the reference's compute, fine at the sizes a
 * check runs (--shrink). Tolerance mode runs the reference in double. */
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
#include "exec/quant.h"
#include "exec/t5.h"
#include "exec/t5_plan.h"
#include "exec/ref_sync.h"
#include "exec/watchdog.h"
#include "sim/schedule.h"

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

/* Everything one run holds, freed in one place. */
typedef struct run {
    int v;                     /* model chunks on this rank (vpp; 1 without interleaving) */
    mp_param_layout *lay;      /* [v] */
    mp_gpt_f32 *model;         /* [v] */
    mp_trainer_f32 *trainer;   /* [v] */
    int head;                  /* the chunk holding the LM head and loss, or -1 */
    mp_param_layout ref_lay;
    mp_op_list ops, ref_ops;
    mp_probe probe;
    bool ref64;
    mp_gpt_f32 ref32;
    mp_gpt_f64 ref64m;
    mp_trainer_f32 rtr32;
    mp_trainer_f64 rtr64;
    int32_t *tok, *tgt, *rtok, *rtgt;
    int32_t *dtok, *dtgt;      /* this DP rank's whole sequences, before the CP selection */
    int *logit_rows;           /* [S] the reference's row of each local token row */
    uint64_t *sync_buf;        /* [ref total] the reference's re-sync (ref_sync.h) */
    mp_check chk;
    /* --test-fixture: PyTorch's step replaces the reference model */
    mp_fixture fx;
    float *fx_grad, *fx_after, *fx_logits; /* in the reference's layout */
    float *host_copy;          /* a device tensor's copy for the check (CUDA backend) */
    size_t host_copy_n;
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
    mp_trainer_free_f32(&r->rtr32);
    mp_trainer_free_f64(&r->rtr64);
    mp_gpt_free_f32(&r->ref32);
    mp_gpt_free_f64(&r->ref64m);
    mp_param_layout_free(&r->ref_lay);
    mp_op_list_free(&r->ops);
    free(r->ref_ops.ops);
    mp_probe_free(&r->probe);
    free(r->tok);
    free(r->tgt);
    free(r->rtok);
    free(r->rtgt);
    free(r->dtok);
    free(r->dtgt);
    free(r->logit_rows);
    free(r->host_copy);
    free(r->sync_buf);
    mp_check_free(&r->chk);
    mp_fixture_free(&r->fx);
    free(r->fx_grad);
    free(r->fx_after);
    free(r->fx_logits);
}

/* --test-fixture: the whole model's gradients, weights after the step and
 * logits of this DP rank's first micro-batch from the fixture, and this
 * rank's weights from it instead of the seed's. */
static mp_status fixture_setup(run *R, const mp_gpt_dims *d, int m, int dp_rank, int tp_rank,
                               mp_error *err)
{
    size_t n = R->ref_lay.total, Sfull = (size_t)d->seq * (size_t)d->micro_batch;
    R->fx_grad = malloc(n * sizeof(float));
    R->fx_after = malloc(n * sizeof(float));
    /* zeros past the rows the fixture has (T5: the decoder's, fewer than seq) */
    R->fx_logits = calloc(Sfull * (size_t)d->vocab, sizeof(float));
    if (!R->fx_grad || !R->fx_after || !R->fx_logits)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the fixture");
    mp_status st = mp_fixture_fill(&R->fx, "grad:", &R->ref_lay, &R->ref_lay, 0, R->fx_grad, err);
    if (!st)
        st = mp_fixture_fill(&R->fx, "after:", &R->ref_lay, &R->ref_lay, 0, R->fx_after, err);
    for (int c = 0; c < R->v && !st; c++)
        st = mp_fixture_fill(&R->fx, "param:", &R->lay[c], &R->ref_lay, tp_rank, R->model[c].w,
                             err);
    mp_fixture_logits(&R->fx, dp_rank * m, d->micro_batch, R->fx_logits);
    return st;
}

static mp_status gather_timeline(mp_runtime *rt, const mp_probe *pr, mp_exec_report *rep,
                                 mp_error *err)
{
    int bytes = (int)(pr->n * sizeof(mp_event));
    int root = rt->world.rank == 0, n = rt->world.size;
    int *counts = root ? calloc((size_t)n, sizeof(int)) : NULL;
    int *displs = root ? calloc((size_t)n, sizeof(int)) : NULL;
    if (root && (!counts || !displs)) {
        free(counts);
        free(displs);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the timeline");
    }
    MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    long total = 0;
    if (root)
        for (int i = 0; i < n; i++) {
            displs[i] = (int)total;
            total += counts[i];
        }
    mp_event *all = root ? malloc((size_t)total + 1) : NULL;
    MPI_Gatherv(pr->events, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    mp_status st = MP_OK;
    if (root) {
        mp_timeline_init(&rep->timeline, n, "measured");
        rep->have_timeline = true;
        for (long i = 0; all && i < total / (long)sizeof(mp_event) && !st; i++)
            st = mp_timeline_add(&rep->timeline, &all[i], err);
    }
    free(all);
    free(counts);
    free(displs);
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
    double attn = 12.0 * d->seq * d->hidden * d->layers;
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

mp_status mp_exec_run(mp_runtime *rt, const mp_plan *plan, const mp_exec_opts *o,
                      mp_exec_report *rep, mp_error *err)
{
    memset(rep, 0, sizeof *rep);
    rep->collective_error = true;
    run R;
    memset(&R, 0, sizeof R);
    mp_status st = MP_OK;
    const mp_parallel *par = &plan->config.parallel;
    mp_gpt_dims d;
    int m = 0;
    mp_exec_opts fixture_opts;
    if (o->fixture) { /* a fixture holds one step, computed in fp32 */
        fixture_opts = *o;
        fixture_opts.steps = 1;
        if (!o->tol_set)
            fixture_opts.tol = MP_FIXTURE_TOL;
        o = &fixture_opts;
    }
    TRY(mp_exec_precheck(plan, o, &d, &m, err));
    if (o->fixture) {
        if (o->exact || !o->check) {
            st = mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--test-fixture",
                              "a fixture is checked in fp32 tolerance mode: drop %s",
                              o->exact ? "--exact" : "--no-check");
            goto done;
        }
        TRY(mp_fixture_load(o->fixture, &R.fx, err));
        TRY(mp_fixture_match(&R.fx, &d, m * (int)par->dp * d.micro_batch, err));
    }
    if (o->solo_rank >= 0) {
        if (o->check) {
            st = mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--solo",
                              "--solo runs without the check (--no-check): the values of one "
                              "rank without its peers are not the plan's");
            goto done;
        }
        TRY(mp_runtime_split_solo(rt, (int)par->tp, (int)par->cp, (int)par->dp, (int)par->pp,
                                  o->solo_rank, err));
    } else {
        TRY(mp_runtime_split(rt, (int)par->tp, (int)par->cp, (int)par->dp, (int)par->pp, err));
    }
    {
        /* everything this run will allocate, against what the machine has,
         * before anything is allocated; rank 0's figure, so that every rank
         * decides alike */
        mp_exec_memory mem;
        TRY(mp_exec_memory_estimate(plan, o, &d, m, &mem, err));
        const char *source = "";
        double have = rt->world.rank == 0 ? mp_exec_memory_available(&source) : 0;
        if (o->test_memory > 0)
            have = o->test_memory, source = "--test-memory-available";
        MPI_Bcast(&have, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        TRY(mp_exec_memory_check(&mem, have, rt->world.rank == 0 ? source : "rank 0's figure",
                                 err));
        rep->memory_estimate = mem.rank_max;
        /* until the first step: allocating and filling that much, at a
         * pessimistic 100 MB/s, bounds the wait for the slowest rank */
        arm_watchdog(o, mem.rank_max / 1e8, 0);
    }
    rep->solo_rank = o->solo_rank;
    rep->solo_coords[0] = rt->tp_rank, rep->solo_coords[1] = rt->cp_rank;
    rep->solo_coords[2] = rt->dp_rank, rep->solo_coords[3] = rt->pp_rank;
    d.tp_rank = rt->tp_rank;
    d.cp_rank = rt->cp_rank;
    /* S: this rank's token rows of one micro-batch (its positions with CP);
     * the gradients are reduced over DP x CP (dpcp_group, the DP group when cp = 1) */
    int dp = rt->dp, S = mp_dims_tokens(&d), Sfull = d.seq * d.micro_batch;
    /* T5's loss is over the decoder's tokens */
    long tokens_total = (long)m * dp * (d.t5 ? d.dec_seq * d.micro_batch : Sfull);
    int v = (int)mp_schedule_chunks(par->schedule, par->vpp);
    R.v = v;
    R.head = -1;
    R.lay = calloc((size_t)v, sizeof *R.lay);
    R.model = calloc((size_t)v, sizeof *R.model);
    R.trainer = calloc((size_t)v, sizeof *R.trainer);
    if (!R.lay || !R.model || !R.trainer) {
        R.v = 0;
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    /* chunk c runs virtual stage c*pp + pp_rank (V schedules: pp_rank, 2pp-1-pp_rank) */
    mp_gpt_dims *dc = calloc((size_t)v, sizeof *dc);
    if (!dc) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    for (int c = 0; c < v && !st; c++) {
        dc[c] = d;
        st = mp_exec_stage_items(plan, o->shrink, &d,
                                 (int)mp_schedule_stage(par->schedule, rt->pp, rt->pp_rank, c),
                                 &dc[c].item_begin, &dc[c].item_end, err);
        if (!st)
            st = mp_param_layout_build(&dc[c], &R.lay[c], err);
        if (!st) {
            int b, e;
            mp_dims_items(&dc[c], &b, &e);
            if (e == d.layers + 2)
                R.head = c;
        }
    }
    /* T5: the first decoder stage's copy of the embedding joins the group */
    if (!st && d.t5)
        st = mp_exec_t5_embedding_group(rt, R.lay[0].wte >= 0 || (d.tied && R.lay[0].head >= 0),
                                        err);
    if (st) {
        free(dc);
        goto done;
    }
    st = mp_schedule_build(par->schedule, rt->pp, v, m, rt->pp_rank, &R.ops, err);
    if (st) {
        free(dc);
        goto done;
    }
    rep->dims = dc[0];
    rep->vpp = v;
    rep->ranks = rt->world.size;
    rep->tp = rt->tp;
    rep->cp = rt->cp;
    rep->dp = dp;
    rep->pp = rt->pp;
    rep->microbatches = m;
    rep->sp = d.sp;
    rep->dist_opt = par->dist_opt && dp > 1;
    rep->exact = o->exact;
    rep->checked = o->check;
    rep->schedule = mp_schedule_name(par->schedule);
    rep->plan_precision = mp_dtype_name(plan->config.training.precision);

    /* be runs the partitioned model (no CUDA device: every rank alike); host
     * does the scalars on the host and the reference (always on the CPU) */
    const mp_backend *be = NULL, *host = rt->solo ? mp_backend_solo() : mp_backend_cpu();
    TRY(mp_exec_backend(rt, o, plan->config.training.precision != MP_DTYPE_FP32, &be, err));
    rep->backend = be->name;
    rep->transport = be->transport;
    rep->compute_precision = be->precision;
    /* T5's layers call the host functions directly, not the backend table */
    if (d.t5 && !be->host_memory)
        TRY(mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--backend",
                         "T5 runs on the cpu backend only for now (got %s)", be->name));

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
    mp_adam_cfg adam = {.lr = o->lr > 0 ? o->lr : (o->exact ? 0.0625 : 1e-3),
                        .beta1 = 0.9, .beta2 = 0.95,
                        .eps = o->adam_eps > 0 ? o->adam_eps : (o->exact ? 1e-8 : 1e-4),
                        .weight_decay = 0.1};
    if (o->fixture)
        adam = (mp_adam_cfg){.lr = R.fx.lr, .beta1 = R.fx.beta1, .beta2 = R.fx.beta2,
                             .eps = R.fx.eps, .weight_decay = R.fx.weight_decay};
    double grad_scale = o->exact ? MP_EXACT_GRAD_SCALE : 1.0 / (double)tokens_total;
    for (int c = 0; c < v && !st; c++) {
        st = mp_gpt_init_f32(&R.model[c], &dc[c], &R.lay[c], be, rt->tp_group,
                             mp_exec_slots(&R.ops, c), (size_t)rt->dpcp_group.size, o->exact,
                             o->seed, &R.probe, err);
        if (st)
            break;
        R.model[c].cp = rt->cp_group;
        R.model[c].grad_scale = (float)grad_scale;
        if (d.t5) { /* each stack's stages sum their relative-bias copies */
            mp_group eg, dg;
            st = mp_exec_t5_stack_groups(rt, R.lay[c].enc_rel >= 0, R.lay[c].dec_rel >= 0, &eg,
                                         &dg, err);
            if (st)
                break;
            mp_t5_set_stack_groups_f32(&R.model[c], eg, dg);
        }
        st = mp_trainer_init_f32(&R.trainer[c], &R.model[c], rt->dpcp_group, par->dist_opt,
                                 &adam, m, &R.ops, err);
        if (!st)
        {
            /* V placement: both copies of a tied embedding are on rank 0, summed
             * there (step.c), so no embedding group */
            R.trainer[c].schedule = par->schedule;
            st = mp_trainer_set_pipeline_f32(&R.trainer[c], rt->pp_group,
                                             mp_schedule_is_v(par->schedule) ? rt->self
                                                                             : rt->emb_group,
                                             err);
        }
    }
    free(dc);
    if (st)
        goto done;
    {
        /* activations this rank keeps: what recomputation saves is measured here */
        double mine = 0;
        for (int c = 0; c < v; c++)
            mine += (double)R.model[c].n_slots * (double)R.model[c].slot_reals * sizeof(float);
        /* every rank has its model: a rank stopped before (SIGSTOP) ends the job here */
        TRY(mp_watch_barrier(&rt->world, err));
        MPI_Allreduce(&mine, &rep->activation_bytes, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        rep->recompute = mp_recompute_name(par->recompute);
        rep->layer_recompute = d.layer_recompute != NULL;
    }
    size_t nmy = (size_t)m * (size_t)S, nref = (size_t)m * (size_t)Sfull * (size_t)dp;
    R.tok = malloc(nmy * sizeof(int32_t));
    R.tgt = malloc(nmy * sizeof(int32_t));
    R.dtok = malloc((size_t)m * (size_t)Sfull * sizeof(int32_t));
    R.dtgt = malloc((size_t)m * (size_t)Sfull * sizeof(int32_t));
    R.logit_rows = malloc((size_t)S * sizeof(int));
    if (!R.tok || !R.tgt || !R.dtok || !R.dtgt || !R.logit_rows) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the data");
        goto done;
    }

    /* the reference: the same GPT unpartitioned, micro-batches one after another */
    if (o->check) {
        mp_gpt_dims rd = mp_exec_ref_dims(&d);
        TRY(mp_param_layout_build(&rd, &R.ref_lay, err));
        R.ref_ops.ops = calloc(2 * (size_t)m * (size_t)dp, sizeof(mp_op));
        R.rtok = malloc(nref * sizeof(int32_t));
        R.rtgt = malloc(nref * sizeof(int32_t));
        /* the logits exist on the last pipeline stage only */
        mp_gpt_f32 *hm = R.head >= 0 ? &R.model[R.head] : NULL;
        if (hm)
            hm->kept_logits = malloc((size_t)S * (size_t)(d.vocab / d.tp) * sizeof(float));
        if (!R.ref_ops.ops || !R.rtok || !R.rtgt || (hm && !hm->kept_logits)) {
            st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the check");
            goto done;
        }
        for (int i = 0; i < m * dp; i++) {
            R.ref_ops.ops[R.ref_ops.n++] = (mp_op){.kind = MP_OP_F, .microbatch = i};
            R.ref_ops.ops[R.ref_ops.n++] = (mp_op){.kind = MP_OP_B, .microbatch = i};
        }
        if (hm)
            hm->keep_microbatch = 0;
        if (o->fixture) {
            if (!be->host_memory) /* the fixture loads straight into host weights */
                TRY(mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--test-fixture",
                                 "runs on the cpu backend (got %s)", be->name));
            TRY(fixture_setup(&R, &d, m, rt->dp_rank, rt->tp_rank, err));
            rep->tol = o->tol;
            TRY(mp_check_init(&R.chk, &R.ref_lay, false, rep->tol, err));
        }
        R.ref64 = !o->exact;
        size_t logits_bytes = (size_t)Sfull * (size_t)d.vocab;
        if (o->fixture) {
            /* PyTorch's step is the reference (fixture_setup) */
        } else if (R.ref64) {
            TRY(mp_gpt_init_f64(&R.ref64m, &rd, &R.ref_lay, host, rt->self, 1, 1, false, o->seed,
                                NULL, err));
            R.ref64m.grad_scale = grad_scale;
            R.ref64m.keep_microbatch = rt->dp_rank * m;
            R.ref64m.kept_logits = malloc(logits_bytes * sizeof(double));
            if (!R.ref64m.kept_logits) {
                st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
                goto done;
            }
            TRY(mp_trainer_init_f64(&R.rtr64, &R.ref64m, rt->self, false, &adam, m * dp,
                                    &R.ref_ops, err));
        } else {
            TRY(mp_gpt_init_f32(&R.ref32, &rd, &R.ref_lay, host, rt->self, 1, 1, o->exact,
                                o->seed, NULL, err));
            R.ref32.grad_scale = (float)grad_scale;
            R.ref32.keep_microbatch = rt->dp_rank * m;
            R.ref32.kept_logits = malloc(logits_bytes * sizeof(float));
            if (!R.ref32.kept_logits) {
                st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
                goto done;
            }
            TRY(mp_trainer_init_f32(&R.rtr32, &R.ref32, rt->self, false, &adam, m * dp,
                                    &R.ref_ops, err));
        }
        if (!o->fixture) {
            rep->tol = o->tol_set ? o->tol
                       : !strcmp(be->precision, "bf16") ? (d.bert ? MP_EXEC_BERT_BF16_TOL
                                                                   : MP_EXEC_BF16_TOL)
                       : d.bert ? MP_EXEC_BERT_TOL : o->tol;
            TRY(mp_check_init(&R.chk, &R.ref_lay, o->exact, rep->tol, err));
        }
    }

    rep->steps = o->steps;
    rep->check_every = o->check_every > 1 ? o->check_every : 1;
    rep->loss = calloc((size_t)o->steps, sizeof *rep->loss);
    rep->ref_loss = calloc((size_t)o->steps, sizeof *rep->ref_loss);
    rep->step_checked = calloc((size_t)o->steps, 1);
    rep->step_seconds = calloc((size_t)o->steps, sizeof *rep->step_seconds);
    if (o->check)
        R.sync_buf = malloc((R.ref_lay.total ? R.ref_lay.total : 1) * sizeof *R.sync_buf);
    if (!rep->loss || !rep->ref_loss || !rep->step_checked || !rep->step_seconds ||
        (o->check && !R.sync_buf)) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the report");
        goto done;
    }
    /* whether the reference holds the partitioned run's state bit for bit: in
     * exact mode at the start (same initial values) and after every checked
     * step that agreed; never in tolerance mode (fp64 against fp32) */
    bool ref_current = o->exact;
    double local_params = 0;
    for (int c = 0; c < v; c++)
        local_params += (double)R.lay[c].total;
    double predicted = predicted_step_seconds(
        &d, local_params, o->check ? (double)R.ref_lay.total : 0, (long)m * S, tokens_total,
        o->check, R.ref64, rt->world.size);
    arm_watchdog(o, predicted, 0);
    double run_start = be->now();
    for (int step = 1; step <= o->steps; step++) {
        double iteration_start = be->now();
        /* this DP rank's samples, then (CP) this rank's positions of them */
        if (o->fixture)
            mp_fixture_batch(&R.fx, rt->dp_rank * m, m, d.micro_batch, R.dtok, R.dtgt);
        else
            make_batch(o->seed, step, rt->dp_rank * m * d.micro_batch, m, d.micro_batch, d.seq,
                       d.vocab, d.bert, R.dtok, R.dtgt);
        cp_rows(&d, m, R.dtok, R.dtgt, R.tok, R.tgt, R.logit_rows);
        TRY(mp_watch_barrier(&rt->world, err));
        double t0 = be->now();
        TRY(mp_watch_bcast(&rt->world, &t0, 1, MPI_DOUBLE, 0, err));
        R.probe.t0 = t0;
        R.probe.step = step;
        R.probe.recording = step == o->steps;
        double loss = 0;
        double start = be->now();
        TRY(mp_trainer_grads_chunks_f32(R.trainer, v, R.tok, R.tgt, &loss, err));
        double grads_seconds = be->now() - start; /* the step's time leaves the check out */
        TRY(host->allreduce(&rt->dpcp_group, MP_REAL64, &loss, 1, MP_RED_SUM, err));
        /* only the last stage computes the loss; the others add nothing */
        TRY(host->allreduce(&rt->pp_group, MP_REAL64, &loss, 1, MP_RED_SUM, err));
        rep->loss[step - 1] = loss / (double)tokens_total;
        bool check_now = o->check && ((step - 1) % rep->check_every == 0 || step == o->steps);
        rep->step_checked[step - 1] = check_now;
        if (check_now && !ref_current && !o->fixture) { /* a fixture is one step from its own weights */
            /* each checked step from the partitioned run's state: one step's
             * rounding, not the drift of hundreds (ref_sync.h) */
            mp_ref_state rs = R.ref64 ? (mp_ref_state){R.ref64m.w, R.rtr64.m, R.rtr64.v, true}
                                      : (mp_ref_state){R.ref32.w, R.rtr32.m, R.rtr32.v, false};
            TRY(mp_ref_sync(rt, R.trainer, R.lay, v, &R.ref_lay, R.sync_buf, &rs, err));
        }
        if (check_now) {
            double rloss = 0;
            make_batch(o->seed, step, 0, m * dp, d.micro_batch, d.seq, d.vocab, d.bert, R.rtok,
                       R.rtgt);
            mp_check_view ref = R.ref64 ? mp_check_view_f64(R.ref64m.g, R.ref64m.kept_logits)
                                        : mp_check_view_f32(R.ref32.g, R.ref32.kept_logits);
            if (o->fixture) {
                ref = mp_check_view_f32(R.fx_grad, R.fx_logits);
                rloss = *(const float *)mp_fixture_find(&R.fx, "loss")->data * (double)tokens_total;
            } else if (R.ref64)
                TRY(mp_trainer_grads_f64(&R.rtr64, R.rtok, R.rtgt, &rloss, err));
            else
                TRY(mp_trainer_grads_f32(&R.rtr32, R.rtok, R.rtgt, &rloss, err));
            rep->ref_loss[step - 1] = rloss / (double)tokens_total;
            mp_check_scalar(&R.chk, step, "loss", rep->loss[step - 1], rep->ref_loss[step - 1]);
            if (R.head >= 0)
                mp_check_logits(&R.chk, step, R.model[R.head].kept_logits, &ref, S,
                                R.logit_rows, d.vocab, d.tp, rt->tp_rank);
            for (int c = 0; c < v; c++) {
                const float *gv = host_view(&R, be, R.model[c].g, R.model[c].n_alloc);
                if (!gv)
                    TRY(mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory"));
                mp_check_params(&R.chk, step, "grad:", &R.lay[c], gv, &ref, &R.ref_lay,
                                rt->tp_rank, R.trainer[c].shard_lo, R.trainer[c].shard_hi);
            }
        }
        double update_start = be->now();
        for (int c = 0; c < v; c++)
            TRY(mp_trainer_update_f32(&R.trainer[c], step, err));
        rep->step_seconds[step - 1] = grads_seconds + (be->now() - update_start);
        /* exact mode: a reference that ran this step from the same state
         * still agrees bit for bit, or the check has said where not */
        ref_current = o->exact && check_now;
        if (check_now) {
            if (o->fixture)
                ; /* the fixture's weights after PyTorch's AdamW step */
            else if (R.ref64)
                TRY(mp_trainer_update_f64(&R.rtr64, step, err));
            else
                TRY(mp_trainer_update_f32(&R.rtr32, step, err));
            mp_check_view ref = o->fixture ? mp_check_view_f32(R.fx_after, NULL)
                                : R.ref64  ? mp_check_view_f64(R.ref64m.w, NULL)
                                           : mp_check_view_f32(R.ref32.w, NULL);
            for (int c = 0; c < v; c++) {
                const float *wv = host_view(&R, be, R.model[c].w, R.model[c].n_alloc);
                if (!wv)
                    TRY(mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory"));
                mp_check_params(&R.chk, step, "param:", &R.lay[c], wv, &ref, &R.ref_lay,
                                rt->tp_rank, 0, R.lay[c].total);
            }
        }
        arm_watchdog(o, predicted, be->now() - iteration_start);
        if (o->progress && rt->world.rank == 0) {
            double elapsed = be->now() - run_start;
            o->progress(o->progress_ctx, step, o->steps, elapsed,
                        elapsed / step * (o->steps - step));
        }
    }
    /* the blocking reductions below start once every rank is here */
    TRY(mp_watch_barrier(&rt->world, err));
    if (o->check)
        TRY(mp_check_finish(&R.chk, rt, o->steps, rep, err));
    else
        rep->ok = true;
    {
        /* the last step's phases; a TP collective inside an F or B counts in both */
        double mine[MP_PHASE_COUNT] = {0};
        for (size_t i = 0; i < R.probe.n; i++) {
            const mp_event *e = &R.probe.events[i];
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
        MPI_Reduce(mine, rep->phase_seconds, MP_PHASE_COUNT, MPI_DOUBLE, MPI_MAX, 0,
                   MPI_COMM_WORLD);
        /* every step's time as the slowest rank saw it */
        MPI_Allreduce(MPI_IN_PLACE, rep->step_seconds, o->steps, MPI_DOUBLE, MPI_MAX,
                      MPI_COMM_WORLD);
    }
    {
        /* what the estimate is measured against (tests/exec/memory_case.py) */
        double peak = mp_exec_peak_rss();
        MPI_Allreduce(&peak, &rep->memory_peak, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    if (o->want_timeline)
        TRY(gather_timeline(rt, &R.probe, rep, err));
done:
    run_free(&R);
    return st;
}
