/* runtime.c — MPI start-up and the TP/CP/DP/PP groups. */
#include "exec/runtime.h"

#include <string.h>

void mp_rank_coords(int r, int tp, int cp, int dp, int *t, int *c, int *d, int *p)
{
    *t = r % tp;
    r /= tp;
    *c = r % cp;
    r /= cp;
    *d = r % dp;
    *p = r / dp;
}

mp_status mp_runtime_start(int *argc, char ***argv, mp_runtime *rt, mp_error *err)
{
    memset(rt, 0, sizeof *rt);
    int up = 0;
    MPI_Initialized(&up);
    if (!up && MPI_Init(argc, argv) != MPI_SUCCESS)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "MPI_Init failed");
    rt->world.comm = MPI_COMM_WORLD;
    MPI_Comm_size(MPI_COMM_WORLD, &rt->world.size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rt->world.rank);
    rt->self = (mp_group){.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    return MP_OK;
}

static mp_status split(mp_group *out, const char *name, int color, int key, mp_error *err)
{
    if (MPI_Comm_split(MPI_COMM_WORLD, color, key, &out->comm) != MPI_SUCCESS)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "MPI_Comm_split failed");
    MPI_Comm_set_name(out->comm, name); /* the watchdog's messages name the group */
    MPI_Comm_size(out->comm, &out->size);
    MPI_Comm_rank(out->comm, &out->rank);
    return MP_OK;
}

mp_status mp_runtime_split(mp_runtime *rt, int tp, int cp, int dp, int pp, mp_error *err)
{
    if (tp * cp * dp * pp != rt->world.size)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "training.gpus",
                            "the plan needs %d ranks (tp %d x cp %d x dp %d x pp %d) but MPI "
                            "started %d: run `mpirun -np %d megaplan exec ...` or `megaplan "
                            "exec --np %d ...`",
                            tp * cp * dp * pp, tp, cp, dp, pp, rt->world.size,
                            tp * cp * dp * pp, tp * cp * dp * pp);
    rt->tp = tp;
    rt->cp = cp;
    rt->dp = dp;
    rt->pp = pp;
    int t, c, d, p;
    mp_rank_coords(rt->world.rank, tp, cp, dp, &t, &c, &d, &p);
    rt->tp_rank = t;
    rt->cp_rank = c;
    rt->dp_rank = d;
    rt->pp_rank = p;
    mp_status st;
    if ((st = split(&rt->tp_group, "tp", c + cp * (d + dp * p), t, err)) ||
        (st = split(&rt->cp_group, "cp", t + tp * (d + dp * p), c, err)) ||
        (st = split(&rt->dp_group, "dp", t + tp * (c + cp * p), d, err)) ||
        (st = split(&rt->pp_group, "pp", t + tp * (c + cp * d), p, err)))
        return st;
    if ((st = split(&rt->dpcp_group, "dp x cp", t + tp * p, c + cp * d, err)))
        return st;
    /* every rank takes part in the split; a middle stage gets a group of its own */
    bool end = pp > 1 && (p == 0 || p == pp - 1);
    int ends = tp * cp * dp;
    return split(&rt->emb_group, "embedding", end ? t + tp * (c + cp * d) : ends + rt->world.rank, p, err);
}

mp_status mp_runtime_split_solo(mp_runtime *rt, int tp, int cp, int dp, int pp, int rank,
                                mp_error *err)
{
    long world = (long)tp * cp * dp * pp;
    if (rank < 0 || rank >= world)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--solo",
                            "rank %d is not one of the plan's %ld ranks", rank, world);
    if (rt->world.size != 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--solo",
                            "--solo runs one process, not %d: start it without mpirun",
                            rt->world.size);
    rt->tp = tp, rt->cp = cp, rt->dp = dp, rt->pp = pp;
    int t, c, d, p;
    mp_rank_coords(rank, tp, cp, dp, &t, &c, &d, &p);
    rt->tp_rank = t, rt->cp_rank = c, rt->dp_rank = d, rt->pp_rank = p;
    rt->solo = true;
    rt->tp_group = (mp_group){MPI_COMM_SELF, tp, t};
    rt->cp_group = (mp_group){MPI_COMM_SELF, cp, c};
    rt->dp_group = (mp_group){MPI_COMM_SELF, dp, d};
    rt->pp_group = (mp_group){MPI_COMM_SELF, pp, p};
    rt->dpcp_group = (mp_group){MPI_COMM_SELF, dp * cp, c + cp * d};
    bool end = pp > 1 && (p == 0 || p == pp - 1);
    rt->emb_group = (mp_group){MPI_COMM_SELF, end ? 2 : 1, p == pp - 1 && end ? 1 : 0};
    return MP_OK;
}

mp_status mp_runtime_split_shards(mp_runtime *rt, int shard, mp_error *err)
{
    int n = rt->dpcp_group.size, r = rt->dpcp_group.rank;
    if (shard < 1 || n % shard)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                            "shard groups of %d ranks do not divide dp x cp = %d", shard, n);
    if (rt->solo) {
        rt->shard_group = (mp_group){MPI_COMM_SELF, shard, r % shard};
        rt->replica_group = (mp_group){MPI_COMM_SELF, n / shard, r / shard};
        return MP_OK;
    }
    /* (t, p) tells the DP x CP groups apart, as in mp_runtime_split */
    int outer = rt->tp_rank + rt->tp * rt->pp_rank;
    mp_status st = split(&rt->shard_group, "dp shard", outer * (n / shard) + r / shard,
                         r % shard, err);
    if (!st)
        st = split(&rt->replica_group, "dp replica", outer * shard + r % shard, r / shard, err);
    return st;
}

mp_status mp_runtime_split_mirror(mp_runtime *rt, mp_error *err)
{
    int low = rt->pp_rank < rt->pp - 1 - rt->pp_rank ? rt->pp_rank : rt->pp - 1 - rt->pp_rank;
    int place = rt->pp_rank == low ? 0 : 1;
    if (rt->solo) {
        rt->mirror_group = (mp_group){MPI_COMM_SELF, 2, place};
        return MP_OK;
    }
    /* colour: (t, c, d) and the pair's lower pipeline rank */
    int outer = rt->tp_rank + rt->tp * (rt->cp_rank + rt->cp * rt->dp_rank);
    return split(&rt->mirror_group, "dualpipe mirror", outer * rt->pp + low, place, err);
}

void mp_group_free(mp_group *g)
{
    if (g->comm != MPI_COMM_NULL && g->comm != 0 && g->comm != MPI_COMM_WORLD &&
        g->comm != MPI_COMM_SELF)
        MPI_Comm_free(&g->comm);
    g->comm = MPI_COMM_NULL;
}

void mp_runtime_stop(mp_runtime *rt)
{
    mp_group_free(&rt->tp_group);
    mp_group_free(&rt->cp_group);
    mp_group_free(&rt->dp_group);
    mp_group_free(&rt->pp_group);
    mp_group_free(&rt->emb_group);
    mp_group_free(&rt->dpcp_group);
    mp_group_free(&rt->shard_group);
    mp_group_free(&rt->replica_group);
    mp_group_free(&rt->mirror_group);
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down)
        MPI_Finalize();
}

void mp_runtime_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}
