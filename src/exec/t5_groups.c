/* t5_groups.c — T5's embedding group over a pipeline. Megatron's T5 keeps a
 * copy of the word embeddings on the first encoder stage, on the first
 * decoder stage (the split rank: it embeds the decoder's input) and, tied,
 * on the last stage for the head; the copies sum their gradients over this
 * group so that they stay equal. */
#include "exec/t5_plan.h"

#include <mpi.h>

#include "exec/mpi_util.h"

/* The pipeline stages of one (t, c, d) that are members: one colour for
 * them, every other rank alone. */
static mp_status stages_group(const mp_runtime *rt, bool member, mp_group *out, mp_error *err)
{
    int colour = member ? rt->tp_rank + rt->tp * (rt->cp_rank + rt->cp * rt->dp_rank)
                        : rt->tp * rt->cp * rt->dp + rt->world.rank;
    int rc = MPI_Comm_split(MPI_COMM_WORLD, colour, rt->pp_rank, &out->comm);
    if (rc != MPI_SUCCESS)
        return mp_mpi_failed(rc, "MPI_Comm_split (t5 pipeline groups)", err);
    MPI_Comm_size(out->comm, &out->size);
    MPI_Comm_rank(out->comm, &out->rank);
    return MP_OK;
}

mp_status mp_exec_t5_embedding_group(mp_runtime *rt, bool member, mp_error *err)
{
    if (rt->solo || rt->pp <= 1)
        return MP_OK;
    mp_group g;
    mp_status st = stages_group(rt, member, &g, err);
    if (st)
        return st;
    mp_group_free(&rt->emb_group);
    rt->emb_group = g;
    return MP_OK;
}

mp_status mp_exec_t5_stack_groups(const mp_runtime *rt, bool enc, bool dec, mp_group *enc_group,
                                  mp_group *dec_group, mp_error *err)
{
    *enc_group = *dec_group = (mp_group){.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
    if (rt->solo || rt->pp <= 1)
        return MP_OK;
    mp_status st = stages_group(rt, enc, enc_group, err);
    if (!st)
        st = stages_group(rt, dec, dec_group, err);
    return st;
}
