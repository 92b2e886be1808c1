/* runtime.h — MPI start-up and the parallel groups. Global rank
 * r = t + tp*(c + cp*(d + dp*p)) (docs/design.md §4: TP fastest, then CP, DP, PP);
 * each group is an MPI_Comm_split of the world with the other coordinates
 * as colour and its own coordinate as key, so group ranks equal coordinates. */
#ifndef MP_EXEC_RUNTIME_H
#define MP_EXEC_RUNTIME_H

#include <stdbool.h>

#include "core/error.h"
#include "exec/backend.h"

typedef struct mp_runtime {
    mp_group world;
    int tp, cp, dp, pp;                 /* degrees */
    int tp_rank, cp_rank, dp_rank, pp_rank;
    mp_group tp_group, cp_group, dp_group, pp_group;
    /* The first and last pipeline stage of one (t, c, d): the two copies of
     * tied embeddings sum their gradients here (Megatron's embedding group).
     * Size 1 (this rank alone) when pp == 1 or the rank is a middle stage. */
    mp_group emb_group;
    /* DP x CP: every rank of one (t, p) holds the same weights, so their
     * gradients are reduced (and the distributed optimizer sharded) over it,
     * as Megatron does; rank in it = c + cp*d. Equal to the DP group when cp == 1. */
    mp_group dpcp_group;
    /* Hybrid sharding (mp_runtime_split_shards; size 0 otherwise): the DP x CP
     * group cut into shard groups of consecutive ranks (rank = dpcp rank mod
     * shard) and the replica groups across them (rank = dpcp rank / shard). */
    mp_group shard_group, replica_group;
    /* DualPipe (mp_runtime_split_mirror; size 0 otherwise): pipeline ranks p
     * and pp-1-p of one (t, c, d), which hold the two copies of stages p and
     * pp-1-p and sum their gradients; rank in it 0 for the lower p. */
    mp_group mirror_group;
    mp_group self;                      /* MPI_COMM_SELF: the reference's size-1 groups */
    bool solo;                          /* groups emulated for one rank (--solo) */
} mp_runtime;

/* MPI_Init (if not yet) and the world group. */
mp_status mp_runtime_start(int *argc, char ***argv, mp_runtime *rt, mp_error *err);
/* Splits the world into the groups; the world size must be tp*cp*dp*pp. */
mp_status mp_runtime_split(mp_runtime *rt, int tp, int cp, int dp, int pp, mp_error *err);
/* exec --solo: this single process plays global rank `rank` of a tp*cp*dp*pp
 * world. Each group has the degree as its size and the rank's coordinate as
 * its place, over MPI_COMM_SELF: only the solo backend, which never
 * communicates, may be used with them. */
mp_status mp_runtime_split_solo(mp_runtime *rt, int tp, int cp, int dp, int pp, int rank,
                                mp_error *err);
/* Frees a group's communicator unless it is the world's or MPI_COMM_SELF;
 * leaves MPI_COMM_NULL. */
void mp_group_free(mp_group *g);
/* HSDP: splits the DP x CP group into shard groups of `shard` ranks and the
 * replica groups across them (after mp_runtime_split or _split_solo). */
mp_status mp_runtime_split_shards(mp_runtime *rt, int shard, mp_error *err);
/* DualPipe: the mirror groups (after mp_runtime_split or _split_solo; every
 * rank calls it). */
mp_status mp_runtime_split_mirror(mp_runtime *rt, mp_error *err);
/* Frees the groups and calls MPI_Finalize. */
void mp_runtime_stop(mp_runtime *rt);
/* Ends every rank at once (a rank that failed alone must not leave the others
 * waiting in a collective). */
void mp_runtime_abort(int code);
/* (t, c, d, p) of global rank r. */
void mp_rank_coords(int r, int tp, int cp, int dp, int *t, int *c, int *d, int *p);

#endif
