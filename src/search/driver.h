/* driver.h — the search as `search` and `explain` run it: the planner's pool
 * of best plans by the estimate (mp_search_estimated, planner/search.h; at
 * least 16 whatever k), simulated and re-ranked by the simulated step, the
 * first k kept. The only part of the
 * library that uses both the cost model and the simulator (docs/design.md §3).
 */
#ifndef MP_SEARCH_DRIVER_H
#define MP_SEARCH_DRIVER_H

#include "core/buf.h"
#include "core/config.h"
#include "core/error.h"
#include "planner/search.h"

/* mp_search_estimated, then (unless opt->no_simulate) each plan of its pool
 * simulated and its rank_step the simulated step; plans sorted by rank_step,
 * best first (ties in the estimate's order), the first opt->top_k kept (the
 * list for a smaller top_k is the start of a larger one's: the pool does not
 * depend on it up to 16), and counts.seconds the wall time of it all. MP_OK with result->n >=
 * 1; MP_ENOFIT when no candidate fits (closest filled when any could run at
 * all) or, with nothing fixed, when no split of the GPUs can run at all;
 * MP_EINPUT when the training or the fixed settings cannot run together
 * (checked before enumerating: err names the setting at fault, as
 * mp_config_check would), when the fixed settings leave no candidate that
 * can run (err names the cost model's refusal, else the first structural
 * one), or when the space is absurdly large (over 2^21, 2^23 for a mixture
 * of experts candidates). counts are filled either way. */
mp_status mp_search(const mp_search_options *opt, mp_search_result *result, mp_error *err);
/* mp_search over each of opt->precisions in turn, the plans merged by their
 * ranking step (the k best of all); counts summed. */
mp_status mp_search_precisions(const mp_search_options *opt, mp_search_result *result,
                               mp_error *err);

/* The whole explanation of config c (planner/explain.h): search_opt (base =
 * c's model, hw, training; fixed = 0 to compare against the whole space)
 * finds the best, mp_explain_against explains c against it. *verdict: 0
 * runs, fits and is (within 1%) the best; 1 slower than the best; 2 does not
 * fit; 3 refused. */
mp_status mp_explain(const mp_config *c, const mp_search_options *search_opt, mp_buf *out,
                     int *verdict, mp_error *err);

#endif
