/* memory.c — the memory a run of exec takes, estimated before it starts
 * (memory.h); the sizes come from the same layout functions the allocations
 * use (mp_param_layout_build, mp_gpt_bytes), so the two cannot drift apart. */
#include "exec/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "exec/kernels.h"
#include "exec/ref_sync.h"
#include "planner/cost_internal.h"
#include "sim/simulate.h" /* mp_sim_plan_schedule */

int mp_exec_slots(const mp_op_list *ops, int chunk)
{
    int cur = 0, most = 1;
    for (int32_t i = 0; i < ops->n; i++) {
        if (ops->ops[i].chunk != chunk)
            continue;
        if (ops->ops[i].kind == MP_OP_F)
            cur++;
        else if (ops->ops[i].kind == MP_OP_B)
            cur--;
        most = cur > most ? cur : most;
    }
    return most;
}

mp_gpt_dims mp_exec_ref_dims(const mp_gpt_dims *d)
{
    mp_gpt_dims rd = *d;
    rd.tp = 1;
    rd.tp_rank = 0;
    rd.sp = false;
    rd.cp = 0;
    rd.cp_rank = 0;
    rd.recompute = 0; /* the reference keeps everything: recomputation must not show */
    rd.layer_recompute = NULL;
    rd.item_begin = rd.item_end = 0;
    rd.ep = 1; /* every expert on the one rank */
    rd.ep_rank = 0;
    rd.flat_align = 0;
    return rd;
}

/* The reference and the check's buffers: the same on every rank. */
static mp_status reference_bytes(const mp_exec_opts *o, const mp_gpt_dims *d, int m, int dp,
                                 double *out, double *elements, mp_error *err)
{
    mp_gpt_dims rd = mp_exec_ref_dims(d);
    mp_param_layout lay;
    mp_status st = mp_param_layout_build(&rd, &lay, err);
    if (st)
        return st;
    double T = (double)lay.total, r = o->exact ? 4.0 : 8.0;
    *elements = T;
    double sfull = (double)d->seq * d->micro_batch;
    double model = o->exact ? (double)mp_gpt_bytes_f32(&rd, &lay, 1, 1)
                            : (double)mp_gpt_bytes_f64(&rd, &lay, 1, 1);
    *out = model + 2 * T * r            /* Adam moments */
           + sfull * d->vocab * r       /* its logits of one micro-batch */
           + 8 * T                      /* the re-sync buffer (ref_sync.h) */
           + 2.0 * m * dp * sfull * 4   /* the global batch's tokens and targets */
           + (2.0 + 2 * lay.n) * 17;    /* the check's per-tensor maxima */
    mp_param_layout_free(&lay);
    return MP_OK;
}

/* One rank of pipeline stage pp_rank (every TP, CP and DP rank of a stage
 * holds as much). */
static mp_status rank_bytes(const mp_plan *plan, const mp_exec_opts *o, const mp_gpt_dims *d,
                            int m, int pp_rank, mp_exec_memory *r, mp_error *err)
{
    const mp_parallel *par = &plan->config.parallel;
    int pp = (int)par->pp, v = (int)mp_schedule_chunks(par->schedule, par->vpp);
    int dpcp = (int)par->dp * (par->cp > 1 ? (int)par->cp : 1);
    /* an MoE model's experts are sharded over expert-DP (shard.c) */
    int edp = d->experts > 0 ? (int)mp_parallel_edp(par) : 1;
    bool dist = par->dist_opt && (dpcp > 1 || edp > 1);
    mp_op_list ops = {0};
    mp_status st = mp_sim_plan_schedule(plan, m, pp_rank, &ops, err);
    if (st)
        return st;
    memset(r, 0, sizeof *r);
    double boundary = (double)mp_dims_local_tokens(d) * d->hidden * sizeof(float);
    double S = (double)mp_dims_tokens(d), sfull = (double)d->seq * d->micro_batch;
    double largest_chunk = 0; /* elements of the largest chunk's flat buffer */
    for (int c = 0; c < v && !st; c++) {
        mp_gpt_dims dc = *d;
        mp_param_layout lay;
        int vs = (int)mp_schedule_stage(par->schedule, pp, pp_rank, c);
        st = mp_exec_stage_items(plan, o->shrink, d, vs, &dc.item_begin, &dc.item_end, err);
        dc.mtp_split = mp_exec_mtp_role(plan, o->shrink, vs);
        if (!st)
            st = mp_param_layout_build(&dc, &lay, err);
        if (st)
            break;
        size_t alloc = mp_dims_flat_alloc(&dc, lay.total, (size_t)dpcp);
        double n_alloc = (double)alloc;
        /* the dense part and the experts' (shard.c) */
        double experts = lay.expert_lo < lay.total ? (double)(alloc - lay.expert_lo) : 0;
        double dense = n_alloc - experts;
        /* HSDP: the shard of one shard group */
        double shard_ranks =
            par->hsdp && par->zero == 3 ? (double)mp_zero_shard_ranks(&plan->config) : dpcp;
        double dense_shard = dist ? dense / shard_ranks : dense;
        double expert_shard = dist ? experts / edp : experts;
        double shard = dense_shard + expert_shard;
        /* the reduce-scatter's buffer: the larger shard, or the experts cut
         * over DP x CP (shard.c) */
        double buf = dense_shard > expert_shard ? dense_shard : expert_shard;
        if (experts / dpcp > buf)
            buf = experts / dpcp;
        largest_chunk = n_alloc > largest_chunk ? n_alloc : largest_chunk;
        double whole = (double)mp_gpt_bytes_f32(&dc, &lay, mp_exec_slots(&ops, c), (size_t)dpcp);
        r->model += 2 * n_alloc * 4 + 2 * shard * 4 + (dist ? buf * 4 : 0)
                    + (dist && par->zero == 3 ? MP_ZERO_POISON_N * 4 : 0);
        r->activations += whole - 2 * n_alloc * 4;
        int b, e;
        mp_dims_items(&dc, &b, &e);
        if (o->check && e == d->layers + 2)
            r->reference += S * (d->vocab / d->tp) * sizeof(float); /* the logits it checks */
        if (pp > 1) /* the received activation and gradient; after a standalone MTP
                     * stage (and out of it) 1 + D of them */
            r->other += 2 * boundary * (dc.mtp_split >= MP_MTP_ON ? 1 + d->mtp_layers : 1);
        mp_param_layout_free(&lay);
    }
    double ref = 0, ref_elements = 0;
    if (o->check && !st)
        st = reference_bytes(o, d, m, (int)par->dp, &ref, &ref_elements, err);
    /* MPI's non-blocking collectives take a temporary copy of their buffer
     * (Open MPI's libnbc; a reduce-scatter two): the largest one is the
     * gradient reduction over DP (x CP), a piece of the reference's re-sync,
     * or a TP collective of [S, h] */
    double coll = d->tp > 1 ? 2.0 * mp_dims_tokens(d) * d->hidden * sizeof(float) : 0;
    if (dpcp > 1 && 2 * largest_chunk * 4 > coll)
        coll = 2 * largest_chunk * 4;
    double piece = ref_elements < MP_REF_SYNC_PIECE ? ref_elements : MP_REF_SYNC_PIECE;
    if (piece * 8 > coll)
        coll = piece * 8;
    r->other += coll;
    for (int32_t i = 0; i < ops.n; i++) { /* each send's copy lives until the step's end */
        const mp_op *op = &ops.ops[i];
        if (op->kind != MP_OP_SEND_FWD && op->kind != MP_OP_SEND_BWD)
            continue;
        /* 1 + D activations wide: the output from a standalone MTP stage on, the
         * input's gradient after it */
        int role = mp_exec_mtp_role(
            plan, o->shrink, (int)mp_schedule_stage(par->schedule, pp, pp_rank, op->chunk));
        bool wide = op->kind == MP_OP_SEND_FWD ? role >= MP_MTP_ON : role == MP_MTP_AFTER;
        r->other += boundary * (wide ? 1 + d->mtp_layers : 1);
    }
    mp_op_list_free(&ops);
    if (st)
        return st;
    r->other += 2.0 * m * (S + sfull) * 4 + S * 4     /* this rank's data */
                + (double)o->steps * 25               /* the report's per-step numbers */
                + MP_EXEC_BASELINE_BYTES;
    r->reference += ref;
    /* what the allocator and MPI add beyond the buffers asked for (page
     * rounding, arenas, transport buffers that grow with the messages): 10%,
     * from the runs of tests/exec/memory_case.py, where the rest came within 3% */
    r->other += MP_EXEC_OVERHEAD * (r->model + r->activations + r->reference + r->other -
                                    MP_EXEC_BASELINE_BYTES);
    r->rank_max = r->model + r->activations + r->reference + r->other;
    return st;
}

mp_status mp_exec_memory_estimate(const mp_plan *plan, const mp_exec_opts *o,
                                  const mp_gpt_dims *d, int m, mp_exec_memory *out,
                                  mp_error *err)
{
    const mp_parallel *par = &plan->config.parallel;
    int pp = (int)par->pp;
    int per_stage = (int)(par->tp * (par->cp > 1 ? par->cp : 1) * par->dp);
    memset(out, 0, sizeof *out);
    for (int p = 0; p < pp; p++) {
        if (o->solo_rank >= 0 && p != o->solo_rank / per_stage)
            continue; /* --solo: one process plays one rank */
        mp_exec_memory r;
        mp_status st = rank_bytes(plan, o, d, m, p, &r, err);
        if (st)
            return st;
        int n = o->solo_rank >= 0 ? 1 : per_stage;
        out->ranks += n;
        out->total += n * r.rank_max;
        if (r.rank_max > out->rank_max) {
            int ranks = out->ranks;
            double total = out->total;
            *out = r;
            out->ranks = ranks;
            out->total = total;
        }
    }
    return MP_OK;
}

/* A number of bytes from the first line of a file ("max" or unreadable: 0). */
static double file_bytes(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[64] = "";
    double v = 0;
    if (fgets(line, sizeof line, f) && strncmp(line, "max", 3))
        v = strtod(line, NULL);
    fclose(f);
    return v;
}

double mp_exec_memory_available(const char **source)
{
    double have = 0;
    *source = "sysconf";
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[128];
        double kib;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) {
                have = kib * 1024;
                *source = "MemAvailable in /proc/meminfo";
                break;
            }
        fclose(f);
    }
    if (have <= 0)
        have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    /* a container's limit (cgroup v2, else v1) may leave less than the machine */
    double limit = file_bytes("/sys/fs/cgroup/memory.max");
    double used = file_bytes("/sys/fs/cgroup/memory.current");
    if (limit <= 0) {
        limit = file_bytes("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        used = file_bytes("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    }
    if (limit > 0 && limit < 1e18 && limit - used < have) {
        have = limit > used ? limit - used : 0;
        *source = "the cgroup's memory limit";
    }
    return have > 0 ? have : 0;
}

mp_status mp_exec_memory_check(const mp_exec_memory *est, double available, const char *source,
                               mp_error *err)
{
    if (available <= 0 || est->total <= available)
        return MP_OK;
    const double G = 1073741824.0;
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model",
                        "the run needs about %.3g GiB but %.3g GiB is available (%s): %d "
                        "ranks, the most loaded %.3g GiB (model and optimizer %.3g, "
                        "activations %.3g, reference model and check %.3g, other %.3g); use "
                        "--shrink%s",
                        est->total / G, available / G, source, est->ranks, est->rank_max / G,
                        est->model / G, est->activations / G, est->reference / G,
                        est->other / G, est->reference > 0 ? " or --no-check" : "");
}

double mp_exec_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru))
        return 0;
    return (double)ru.ru_maxrss * 1024.0; /* Linux: KiB */
}
