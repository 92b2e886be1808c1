#include "core/plan.h"

#include <string.h>

void mp_plan_default_stages(mp_plan *plan)
{
    const mp_parallel *p = &plan->config.parallel;
    int64_t n = p->pp * p->vpp;
    int64_t blocks = plan->config.model.layers;
    if (n < 1 || n > MP_MAX_STAGES || blocks < 1 || blocks > MP_MAX_LAYERS) {
        plan->n_stages = 0;
        return;
    }
    plan->n_stages = (int32_t)n;
    /* Blocks spread evenly, or by Megatron's first/last-stage split when n
     * does not divide them (mp_blocks_before_stage); the embedding joins the
     * first stage and the head the last, as in Megatron-LM. */
    for (int64_t k = 0; k < n; k++) {
        plan->stages[k].begin = (int32_t)(k == 0 ? 0 : 1 + mp_blocks_before_stage(blocks, n, k));
        plan->stages[k].end =
            (int32_t)(k == n - 1 ? blocks + 2 : 1 + mp_blocks_before_stage(blocks, n, k + 1));
    }
}

mp_status mp_plan_check(const mp_plan *plan, mp_error *err)
{
    mp_status st = mp_config_check(&plan->config, err);
    if (st != MP_OK)
        return st;
    const mp_parallel *p = &plan->config.parallel;
    int64_t items = plan->config.model.layers + 2;
    if (plan->n_stages != 0) {
        if (plan->n_stages != p->pp * p->vpp)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "stages",
                                "%d ranges given, but pp*vpp = %lld", plan->n_stages,
                                (long long)(p->pp * p->vpp));
        int64_t next = 0;
        for (int32_t k = 0; k < plan->n_stages; k++) {
            const mp_stage_range *r = &plan->stages[k];
            if (r->begin != next)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "stages",
                                    "stage %d starts at item %d; expected %lld (ranges must "
                                    "be contiguous from 0)",
                                    k, r->begin, (long long)next);
            if (r->end <= r->begin)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "stages",
                                    "stage %d is empty: [%d, %d)", k, r->begin, r->end);
            next = r->end;
        }
        if (next != items)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "stages",
                                "ranges end at item %lld; expected %lld (layers + 2)",
                                (long long)next, (long long)items);
    }
    if (plan->has_layer_recompute)
        for (int64_t i = 0; i < items && i < MP_MAX_LAYERS + 2; i++)
            if (plan->layer_recompute[i] >= MP_RECOMPUTE_COUNT)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "layer_recompute",
                                    "item %lld: invalid value %d", (long long)i,
                                    plan->layer_recompute[i]);
    return MP_OK;
}
