/* moe.h — the executor's mixture-of-experts layer (docs/exec.md, "Mixture of
 * experts"): what a plan's MoE fields become in the model that runs, the
 * expert-parallel groups, and the size of one block's saved MoE state. The
 * layer itself (router, top-k, capacity, dispatch and combine by all-to-all,
 * the experts' FFNs under TP) is moe_layer.c, declared in kernels_decl.h
 * through the model's own files.
 *
 * Folding: a pipeline stage's tp x cp x dp ranks, numbered s = t + tp*(c +
 * cp*d), run attention as (t, c, d) and the experts as (etp, ep, edp) = (s mod etp,
 * (s / etp) mod ep, s / (etp*ep)). etp = tp: each expert's FFN split over TP as
 * the dense MLP's, the EP group ep consecutive (c, d) ranks of one (t, p);
 * etp = 1 (with SP): experts whole, the EP group ep consecutive ranks of the
 * stage across TP, CP and DP. The expert-DP group holds the same experts; the experts'
 * gradients are reduced over it, and with the distributed optimizer (ZeRO-2/3 too)
 * their shards are cut from it (shard.c). */
#ifndef MP_EXEC_MOE_H
#define MP_EXEC_MOE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "core/plan.h"
#include "exec/params.h"
#include "exec/runtime.h"

/* The most experts and routing groups a model may have in exec: the top-k
 * of a token row runs in fixed-size scratch (moe_ops.c, kernels/moe.cu);
 * mp_moe_exec_dims refuses more. */
#define MP_MOE_MAX_EXPERTS 1024
#define MP_MOE_MAX_GROUPS 64

/* Fills d's MoE fields from the plan (with shrink: a small model that keeps
 * the degrees) and refuses what the executor does not run, naming the field. */
mp_status mp_moe_exec_dims(const mp_plan *plan, bool shrink, mp_gpt_dims *d, mp_error *err);

/* This rank's place in its EP and expert-DP groups (d's cp_rank is its CP rank). */
void mp_moe_coords(const mp_gpt_dims *d, int tp_rank, int dp_rank, int *ep_rank, int *edp_rank);

/* The EP and expert-DP groups of this rank (sizes ep and tp*cp*dp / (etp*ep);
 * solo: emulated over MPI_COMM_SELF like the runtime's). */
mp_status mp_moe_groups(const mp_runtime *rt, const mp_gpt_dims *d, mp_group *ep_group,
                        mp_group *edp_group, mp_error *err);
void mp_moe_groups_free(mp_group *ep_group, mp_group *edp_group);

/* Sizes of one rank's MoE block for one micro-batch (S token rows, Sl of
 * them this rank's residual rows). */
typedef struct mp_moe_sizes {
    size_t S, Sl, h, E, k, El, ep, fl, f1l; /* S: the token rows this rank routes (all S of
                                               the TP group, or its own Sl with etp = 1);
                                               fl: one expert's FFN columns here; f1l: fc1's
                                               (2 fl for SwiGLU) */
    size_t Sfull;    /* the micro-batch's rows on the TP group */
    size_t cp;       /* CP ranks (the capacity walks their positions) */
    size_t sl, s1l;  /* the shared experts' FFN columns on this TP rank, fc1's (0: none) */
    size_t cap_rows; /* rows an expert rank may receive: every token's every slot */
    size_t capacity; /* tokens an expert keeps per sample (capacity factor), 0: no limit */
} mp_moe_sizes;

mp_moe_sizes mp_moe_sizes_of(const mp_gpt_dims *d, size_t S, size_t Sl);

/* Where each part of one MoE block's state lies, in reals. A part is either
 * in the block's own region (kept from its forward to its backward, one per
 * micro-batch in flight) or, marked MP_MOE_WORK, in the rank's one MoE
 * scratch (mp_moe_work_reals), which every block shares: the forward's and
 * the backward's transients always, and what selective recomputation drops
 * and rebuilds before the block's backward (`rebuilds`: MP_RCM_* bits of
 * core/config.h): moe_act the experts' activation, shared_experts the
 * shared experts' inside, moe all of the layer's state. Indices and counts
 * are held as reals (exact below 2^24). */
#define MP_MOE_WORK ((size_t)1 << (sizeof(size_t) * 8 - 1))
typedef struct mp_moe_layout {
    size_t logits, scores;    /* [S,E] router logits (backward: their gradient), scores */
    size_t choice, wgt, kept; /* [S,k] chosen experts (best first), their weights, 1 kept / 0
                                 dropped by capacity */
    size_t sorder;            /* [S*k] the slot (token*k + j) of each row sent, in send order */
    size_t counts;            /* [2*ep] rows sent to / received from each EP rank */
    size_t ne;                /* [El] rows each local expert got */
    size_t y;                 /* [Sl*k,h] this rank's tokens' expert outputs (after TP) */
    size_t x, pre, act;       /* [rows,h] [rows,f1l] [rows,fl] received rows by local expert */
    size_t rorder;            /* [rows] the received index of each row in expert order */
    size_t bufa, bufb;        /* [max(S*k, rows), h+1] all-to-all send and receive */
    size_t dact, dpre;        /* [rows,fl] [rows,f1l] backward */
    size_t dwl, dwf;          /* [Sl*k] [Sfull*k] gradient of the weights: this rank's, all
                                 (etp = 1: the TP group's choices, for the capacity) */
    size_t spre, sact, sdact, sdpre, sdx; /* shared experts: [Sfull,s1l] [Sfull,sl] and their
                                             gradients, the input's [Sfull,h] */
    size_t capc;              /* [cp*Sfull*k] CP: every CP rank's choices (capacity) */
    size_t total;             /* reals in the block's region */
    size_t work;              /* reals in the scratch */
} mp_moe_layout;

mp_moe_layout mp_moe_layout_of(const mp_moe_sizes *z, unsigned rebuilds);

/* A token's k experts, best first, from its selection scores q[E] (the
 * router's scores, plus the expert bias with the sigmoid router): the k best
 * (equal: the lower index), or with groups > 1 the k best of the experts of
 * its group_k best groups of E / groups consecutive experts, a group ranked
 * by the sum of its k / group_k best scores (equal: the lower group). f32:
 * those sums rounded to float as they add (the run's precision). scratch:
 * E + groups bytes; gscore: groups doubles. */
void mp_moe_pick(const double *q, size_t E, size_t k, size_t groups, size_t group_k, bool f32,
                 size_t *choice, unsigned char *scratch, double *gscore);

/* Reals one MoE block keeps for one micro-batch (0 for a dense model), and
 * the scratch it needs, when selective recomputation rebuilds `rebuilds`. */
size_t mp_moe_block_reals(const mp_gpt_dims *d, size_t S, size_t Sl, unsigned rebuilds);
size_t mp_moe_work_reals(const mp_gpt_dims *d, size_t S, size_t Sl, unsigned rebuilds);

/* The longest sum an MoE block adds in exact mode (quant.h): a token's input
 * gradient over its k experts' FFN columns, the router's logits and the
 * shared experts' columns. */
static inline long mp_moe_exact_terms(const mp_gpt_dims *d)
{
    if (d->experts <= 0)
        return 0;
    long f1 = (d->gated ? 2L : 1L) * d->expert_ffn; /* over the TP ranks or on one */
    return (long)d->top_k * f1 + d->experts + (d->gated ? 2L : 1L) * d->shared_ffn;
}

#endif
