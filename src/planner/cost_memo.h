/* cost_memo.h — per-item costs remembered across the estimates of one search.
 *
 * A search estimates 10^5 configurations of one model on one machine that
 * differ only in their parallel settings (DeepSeek-V3 on 2048 GPUs: ~260000),
 * and what one block of each kind, the embedding and the head cost (cost.c's
 * item details: GEMM curves, collectives, activation bytes) depends on few
 * of those settings, so most estimates would recompute details already
 * computed (~12x over for DeepSeek-V3). A memo keeps them, keyed on the exact
 * inputs: the model, hardware and training compared byte for byte (a
 * different one empties the memo), and the parallel settings with the fields
 * that item details do not read blanked (mp_cost_memo_key). A field added to
 * mp_parallel is part of the key until it is listed there, so a new setting
 * can make the memo miss more often but never answer wrong; the list itself is
 * held to account by tests/planner/test_cost_memo.c (estimates through a memo
 * warmed by configurations that differ in the blanked fields alone equal the
 * uncached ones bit for bit). Not shared between threads. */
#ifndef MP_COST_MEMO_H
#define MP_COST_MEMO_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"
#include "core/plan.h"
#include "planner/cost.h"

typedef struct mp_cost_memo mp_cost_memo;

/* An empty memo (NULL when out of memory: callers then estimate uncached). */
mp_cost_memo *mp_cost_memo_new(void);
void mp_cost_memo_free(mp_cost_memo *memo);

/* key = p with the fields item details do not read blanked: the pipeline's
 * shape and split (pp, vpp, the layout, the schedule, but whether the
 * backward's weight gradients run as a pass of their own: ZB-H1 with pp > 1,
 * compute.c), the data-parallel degree and sharding (dp, dist_opt, zero,
 * hsdp, dp_overlap) and the recompute choice (details hold every choice's
 * numbers). */
void mp_cost_memo_key(const mp_parallel *p, mp_parallel *key);

/* The memo's slot of size bytes for c's key: *filled tells whether it holds
 * what an earlier call stored (the caller fills it otherwise). NULL when the
 * memo is NULL, full or out of memory, or was used with another size: the
 * caller computes without it. */
void *mp_cost_memo_slot(mp_cost_memo *memo, const mp_config *c, size_t size, bool *filled);

/* The memo's one slot of size bytes for c's model, hardware and training,
 * whatever the parallel settings (what the estimate computes from the model
 * alone); as mp_cost_memo_slot otherwise. */
void *mp_cost_memo_base_slot(mp_cost_memo *memo, const mp_config *c, size_t size, bool *filled);

/* The memo's slot of val_size bytes for a pure function's result, keyed on
 * key_size bytes of its whole input compared exactly (not a hash), aligned
 * for any type whatever key_size is: *filled
 * tells whether an earlier call stored it (the caller fills it otherwise,
 * and must, or the slot holds garbage). NULL when the memo is NULL, full or
 * out of memory, or the key was stored with another size. Independent of
 * the model, hardware and training (the key carries all that matters). */
void *mp_cost_memo_blob(mp_cost_memo *memo, const void *key, size_t key_size, size_t val_size,
                        bool *filled);

/* How many slots the memo holds (for tests). */
size_t mp_cost_memo_size(const mp_cost_memo *memo);

/* mp_estimate_config with the item details taken from (and stored in) memo:
 * the same numbers bit for bit. memo NULL: mp_estimate_config. (cost.c) */
mp_status mp_estimate_config_memo(const mp_config *c, const mp_plan *plan, mp_cost_memo *memo,
                                  mp_estimate *out, mp_error *err);

/* A lower bound on the step mp_estimate_config(c, NULL) gives, from the
 * blocks' item details alone (through memo, which may be NULL): the search
 * prunes by it before costing a candidate in full (cost.c argues the bound).
 * *floor is 0 where it does not apply; a refusal of the configuration check
 * is returned as the estimate would. */
mp_status mp_estimate_step_floor(const mp_config *c, mp_cost_memo *memo, double *floor,
                                 mp_error *err);
/* Its two parts: the blocks' fwd + bwd per micro-batch on one GPU under each
 * recompute choice, summed over the blocks (false where the floor does not
 * apply), which depend on the parallel settings the memo's key keeps alone
 * (mp_cost_memo_key) and on the recompute choice by index; and the floor of
 * c from them (no configuration check). mp_estimate_step_floor is the second
 * of the first after the check. */
bool mp_estimate_block_sums(const mp_config *c, mp_cost_memo *memo,
                            double sums[MP_RECOMPUTE_COUNT]);
double mp_estimate_floor_of_sums(const mp_config *c, const double sums[MP_RECOMPUTE_COUNT]);

#endif
