/* search_runtime.c — what a training runtime can run, for search's
 * --runtime restriction (search.h). Megatron-LM: the forms its flags
 * express (src/planner/megatron.c writes them). */
#include "planner/search.h"

static int64_t blocks_of(const mp_stage_range *s, int64_t L)
{
    int64_t b = s->begin < 1 ? 1 : s->begin, e = s->end > L + 1 ? L + 1 : s->end;
    return e > b ? e - b : 0;
}

static bool fail(const char **why, const char *what)
{
    if (why) *why = what;
    return false;
}

/* Recompute Megatron's flags express: one choice for every block, or
 * (granularity full, method block) full on the first N blocks of each
 * (virtual) stage and none on the rest. */
static bool recompute_expressible(const mp_plan *plan, int64_t L, const char **why)
{
    const uint8_t *rc = plan->layer_recompute;
    bool uniform = true;
    for (int64_t i = 2; i <= L; i++)
        if (rc[i] != rc[1]) uniform = false;
    if (uniform) return true;
    /* N: the full blocks of a stage that also has others; a stage of at
     * most N blocks recomputes them all */
    int64_t n = -1;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t k = 0; k < plan->n_stages; k++) {
            const mp_stage_range *s = &plan->stages[k];
            int64_t first = s->begin < 1 ? 1 : s->begin, len = blocks_of(s, L), full = 0;
            while (full < len && rc[first + full] == MP_RECOMPUTE_FULL) full++;
            for (int64_t i = first + full; i < first + len; i++)
                if (rc[i] != MP_RECOMPUTE_NONE)
                    return fail(why, "per-layer recompute other than full on the first N "
                                     "blocks of every stage");
            bool partial = full < len;
            if (pass == 0 && partial && n >= 0 && full != n)
                return fail(why, "a different number of recomputed blocks per stage");
            if (pass == 0 && partial) n = full;
            if (pass == 1 && !partial && n >= 0 && len > n)
                return fail(why, "a stage recomputes more blocks than the others' N");
        }
    return true;
}

bool mp_search_megatron_runs(const mp_plan *plan, const char **why)
{
    const mp_parallel *p = &plan->config.parallel;
    if (p->schedule == MP_SCHED_ZBH1) return fail(why, "Megatron-LM has no ZB-H1 schedule");
    if (p->schedule == MP_SCHED_ZBV) return fail(why, "Megatron-LM has no ZB-V schedule");
    if (p->schedule == MP_SCHED_DUALPIPEV)
        return fail(why, "Megatron-LM has no DualPipeV schedule");
    if (p->schedule == MP_SCHED_DUALPIPE) return fail(why, "Megatron-LM has no DualPipe schedule");
    if (p->schedule == MP_SCHED_GPIPE && p->pp > 1)
        return fail(why, "Megatron-LM has no GPipe schedule");
    if (!plan->n_stages) return true; /* Megatron's own even split */
    /* any split into non-empty contiguous stages, interleaved or not, is
     * Megatron's --pipeline-model-parallel-layout (megatron.c writes it) */
    int64_t L = plan->config.model.layers;
    return !plan->has_layer_recompute || recompute_expressible(plan, L, why);
}
