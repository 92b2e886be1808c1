/* cp_ring.c — context parallelism's ring: every rank's keys and values for
 * this rank's queries, and their gradients back to their owners (model.c's
 * header says how positions are split). Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"
#include "exec/model_internal.h"

/* ---- context parallelism: every key and value for this rank's queries ---- */

/* Row of (rank c's local position i, sample n) in the position-major
 * [sk*b] order of the whole sequence. */
static size_t cp_full_row(const mp_gpt *g, const sizes *z, int c, size_t i,
                          size_t n)
{
    mp_gpt_dims other = g->d;
    other.cp_rank = c;
    return (size_t)mp_dims_global_pos(&other, (int)i) * z->b + n;
}

/* kv_full[sk*b,kvw] = every rank's K|V columns of qkv, by position: a ring
 * of cp - 1 steps, each rank passing on the block it last received (the K/V
 * traffic of ring attention). */
mp_status mp_model_cp_gather_kv(mp_gpt *g, const real *qkv, real *kv_full, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    size_t w = z.kvw, blk = z.S * w;
    int cp = (int)z.cp, me = g->cp.rank, next = (me + 1) % cp, prev = (me + cp - 1) % cp;
    real *mine = W.kv_ranks + (size_t)me * blk;
    g->be->copy2d(mine, w * sizeof(real), qkv + z.kvo, z.row * sizeof(real), w * sizeof(real), z.S,
                  MP_COPY_D2D);
    for (int k = 1; k < cp; k++) {
        /* step k: pass on rank (me - k + 1)'s block, receive rank (me - k)'s */
        int out = (me - k + 1 + cp) % cp, in = (me - k + cp) % cp;
        double t = g->be->now();
        CHECK(g->be->sendrecv(&g->cp, MP_REAL_KIND, W.kv_ranks + (size_t)out * blk, next,
                              W.kv_ranks + (size_t)in * blk, prev, blk, k, err));
        mp_probe_record(g->probe, t, MP_STREAM_CP, MP_EV_CP_COMM, true);
    }
    /* the b rows of one position are adjacent in both orders */
    for (int c = 0; c < cp; c++)
        for (size_t i = 0; i < z.s; i++)
            be_copy(g, kv_full + cp_full_row(g, &z, c, i, 0) * w,
                  W.kv_ranks + ((size_t)c * z.S + i * z.b) * w, z.b * w);
    return MP_OK;
}

/* dkv_full[sk*b,kvw] (these queries' share) summed over the CP group; this
 * rank's rows go to the K|V columns of dqkv[S,row]. A ring of cp - 1 steps:
 * each block's partial sum travels from rank owner + 1 around to its owner,
 * every rank adding its share on the way. */
mp_status mp_model_cp_reduce_dkv(mp_gpt *g, const real *dkv_full, real *dqkv,
                                 mp_error *err)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    size_t w = z.kvw, blk = z.S * w;
    int cp = (int)z.cp, me = g->cp.rank, next = (me + 1) % cp, prev = (me + cp - 1) % cp;
    for (int c = 0; c < cp; c++)
        for (size_t i = 0; i < z.s; i++)
            be_copy(g, W.kv_ranks + ((size_t)c * z.S + i * z.b) * w,
                  dkv_full + cp_full_row(g, &z, c, i, 0) * w, z.b * w);
    bool drop = mp_probe_drops(g->probe, "cp-dkv");
    for (int k = 1; k < cp && !drop; k++) {
        /* step k: pass on the sum for rank (me - k)'s block, receive the sum
         * for rank (me - k - 1)'s and add this rank's share to it */
        int out = (me - k + cp) % cp, in = (me - k - 1 + 2 * cp) % cp;
        double t = g->be->now();
        CHECK(g->be->sendrecv(&g->cp, MP_REAL_KIND, W.kv_ranks + (size_t)out * blk, next,
                              W.kv_loc, prev, blk, cp + k, err));
        g->be->add(MP_REAL_KIND, W.kv_ranks + (size_t)in * blk, W.kv_loc, blk);
        mp_probe_record(g->probe, t, MP_STREAM_CP, MP_EV_CP_COMM, true);
    }
    const real *sum = W.kv_ranks + (size_t)me * blk;
    g->be->copy2d(dqkv + z.kvo, z.row * sizeof(real), sum, w * sizeof(real), w * sizeof(real), z.S,
                  MP_COPY_D2D);
    return MP_OK;
}

