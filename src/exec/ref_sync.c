/* ref_sync.c — the reference takes the partitioned run's state (ref_sync.h). */
#include "exec/ref_sync.h"

#include <stdlib.h>
#include <string.h>

#include "exec/moe.h"
#include "exec/mpi_util.h"
#include "exec/watchdog.h"

enum { W, M, V };

/* Widens a float to the bits the reference keeps: a double's, or the float's own. */
static uint64_t bits_of(float x, bool f64)
{
    if (f64) {
        double d = x;
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        return u;
    }
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* The elements [lo, hi) of one buffer (src holds them from lo) into out. */
static bool fill_range(const mp_runtime *rt, const mp_trainer_f32 *t, const mp_param_layout *lay,
                       const mp_param_layout *ref_lay, size_t lo, size_t hi, const float *src,
                       bool sharded, bool expert_first, bool dpcp_first, bool f64,
                       uint64_t *out)
{
    float *copy = NULL;
    const mp_backend *be = t->model->be;
    if (be && !be->host_memory && hi > lo) {
        copy = malloc((hi - lo) * sizeof *copy);
        if (!copy)
            return false;
        be->copy(copy, src, (hi - lo) * sizeof *copy, MP_COPY_D2H);
        src = copy;
    }
    for (int pid = 0; pid < lay->n; pid++) {
        const mp_param *p = &lay->p[pid];
        const mp_param *rp = &ref_lay->p[p->ref_index];
        if (p->split == MP_SPLIT_NONE && !p->n_exp && rt->tp_rank != 0)
            continue; /* replicated over TP: rank 0's */
        if (!sharded && (p->n_exp ? !expert_first : !dpcp_first))
            continue;
        if (p->item != rp->item)
            continue; /* a tied head's copy of the embedding: the embedding's own */
        size_t n = (size_t)p->lrows * (size_t)p->lcols;
        size_t from = p->offset > lo ? p->offset : lo;
        size_t to = p->offset + n < hi ? p->offset + n : hi;
        for (size_t i = from; i < to; i++)
            out[rp->offset + mp_param_full_index(p, rt->tp_rank, i - p->offset)] =
                bits_of(src[i - lo], f64);
    }
    free(copy);
    return true;
}

/* This rank's share of buffer `which` into out (zeros where another rank owns it). */
/* false when out of memory (a device backend's state is read through a host copy) */
static bool fill(const mp_runtime *rt, const mp_trainer_f32 *chunks, const mp_param_layout *lay,
                 int v, const mp_param_layout *ref_lay, int which, bool f64, uint64_t *out)
{
    memset(out, 0, ref_lay->total * sizeof *out);
    bool dpcp_first = rt->dp_rank == 0 && rt->cp_rank == 0;
    for (int c = 0; c < v; c++) {
        const mp_trainer_f32 *t = &chunks[c];
        /* weights: the same on every DP x CP rank (ZeRO-3: sharded too);
         * moments: sharded under the distributed optimizer, each element on one rank */
        bool sharded = t->dist_opt && (which != W || t->zero == 3);
        /* MoE: each expert's copies are its expert-DP group's; the ranks of
         * expert-DP rank 0 hold one copy of every expert between them (moe.h) */
        int ep_rank, edp_rank;
        mp_moe_coords(&t->model->d, rt->tp_rank, rt->dp_rank, &ep_rank, &edp_rank);
        bool expert_first = edp_rank == 0;
        if (!sharded && !dpcp_first && !expert_first)
            continue;
        /* sharded: this rank's shard of each part (the dense tensors', the
         * experts'), its moments from the part's place in m and v */
        int n_ranges = sharded ? t->n_parts : 1;
        for (int k = 0; k < n_ranges; k++) {
            size_t lo = sharded ? t->part[k].own_lo : 0;
            size_t hi = sharded ? t->part[k].own_hi : lay[c].total;
            size_t moment = sharded ? t->part[k].moment : 0;
            const float *src = which == W ? t->model->w + lo : (which == M ? t->m : t->v) + moment;
            if (!fill_range(rt, t, &lay[c], ref_lay, lo, hi, src, sharded, expert_first,
                            dpcp_first, f64, out))
                return false;
        }
    }
    return true;
}

mp_status mp_ref_sync(const mp_runtime *rt, const mp_trainer_f32 *chunks,
                      const mp_param_layout *lay, int v, const mp_param_layout *ref_lay,
                      uint64_t *scratch, mp_ref_state *ref, mp_error *err)
{
    void *dst[3] = {ref->w, ref->m, ref->v};
    size_t n = ref_lay->total;
    for (int which = W; which <= V; which++) {
        if (!fill(rt, chunks, lay, v, ref_lay, which, ref->f64, scratch))
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the re-sync");
        for (size_t done = 0; done < n;) {
            /* in pieces of 8 MiB: MPI's non-blocking all-reduce takes a
             * temporary copy of its buffer (memory.c counts one piece) */
            size_t k = n - done < MP_REF_SYNC_PIECE ? n - done : MP_REF_SYNC_PIECE;
            MPI_Request req;
            int rc = MPI_Iallreduce(MPI_IN_PLACE, scratch + done, (int)k, MPI_UINT64_T, MPI_BOR,
                                    rt->world.comm, &req);
            if (rc != MPI_SUCCESS)
                return mp_mpi_failed(rc, "MPI_Iallreduce", err);
            mp_status st = mp_watch_mpi(&req, 1, MPI_STATUSES_IGNORE,
                                        "all-reduce (the reference's re-sync)", &rt->world, -1,
                                        err);
            if (st)
                return st;
            done += k;
        }
        if (ref->f64) {
            memcpy(dst[which], scratch, n * sizeof(double));
        } else {
            float *f = dst[which];
            for (size_t i = 0; i < n; i++) {
                uint32_t u = (uint32_t)scratch[i];
                memcpy(&f[i], &u, sizeof u);
            }
        }
    }
    return MP_OK;
}
