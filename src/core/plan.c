#include "core/plan.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/layout.h"

int64_t mp_t5_split_rank(int64_t enc_layers, int64_t dec_layers, int64_t n)
{
    if (n < 2 || enc_layers < 1 || dec_layers < 1)
        return 0;
    int64_t all = enc_layers + dec_layers;
    int64_t r = (2 * n * enc_layers + all) / (2 * all);
    r = r > enc_layers ? enc_layers : r;
    r = r > n - 1 ? n - 1 : r < 1 ? 1 : r;
    return n - r > dec_layers ? n - dec_layers : r;
}

/* count blocks from item first over n stages: stage k's range */
static void spread(int64_t first, int64_t count, int64_t n, int64_t k, int64_t *begin,
                   int64_t *end)
{
    int64_t per = count / n, extra = count % n;
    *begin = first + k * per + (k < extra ? k : extra);
    *end = *begin + per + (k < extra ? 1 : 0);
}

void mp_even_stage_items(int64_t layers, int64_t enc_layers, int64_t n, int64_t vpp, int64_t mtp,
                         int64_t k, int64_t *begin, int64_t *end)
{
    int64_t split = enc_layers > 0 ? mp_t5_split_rank(enc_layers, layers - enc_layers, n) : 0;
    if (split > 0 && k < split)
        spread(1, enc_layers, split, k, begin, end);
    else if (split > 0)
        spread(enc_layers + 1, layers - enc_layers, n - split, k - split, begin, end);
    else {
        /* even, or the most even uneven split when n does not divide them */
        *begin = 1 + mp_blocks_before_stage(layers, n, vpp, mtp, k);
        *end = 1 + mp_blocks_before_stage(layers, n, vpp, mtp, k + 1);
    }
    /* the embedding joins the first stage and the head the last, as in Megatron-LM */
    if (k == 0)
        *begin = 0;
    if (k == n - 1)
        *end = layers + 2;
}

void mp_config_stages(const mp_config *c, int64_t n, mp_stage_range *out)
{
    const mp_model *m = &c->model;
    int64_t L = mp_model_blocks(m);
    mp_layout *l = c->parallel.pipeline_layout[0] ? malloc(sizeof *l) : NULL;
    mp_error err;
    bool given = l && mp_layout_parse(c->parallel.pipeline_layout, c->parallel.pp,
                                      n / (c->parallel.pp > 0 ? c->parallel.pp : 1), L,
                                      mp_layout_model_mtp_layers(m), l, &err) == MP_OK &&
                 l->n_stages == n;
    const mp_parallel *p = &c->parallel;
    bool flags = !given && m->arch != MP_ARCH_T5 && p->pp >= 2 && n == p->pp * p->vpp &&
                 (p->first_stage_layers > 0 || p->last_stage_layers > 0);
    /* Megatron's account-for split, as given (mp_account_split_check) */
    bool account = !given && !flags && m->arch != MP_ARCH_T5 && n > 1 &&
                   (p->account_for_embedding || p->account_for_loss) &&
                   mp_account_stage_blocks(L, n, p->account_for_embedding, p->account_for_loss,
                                           0) >= 0;
    /* Megatron's first/last-stage split with virtual stages where neither L
     * nor L + 2 divides (mp_blocks_before_stage's): chosen once, not per stage */
    int64_t v = p->pp > 0 && n % p->pp == 0 ? n / p->pp : 1;
    mp_uneven vu;
    bool vflags = !given && !flags && !account && m->arch != MP_ARCH_T5 && v > 1 && L % n &&
                  (L + 2) % n && mp_vpp_flag_split(L, p->pp, v, mp_layout_model_mtp_layers(m), &vu);
    /* a V schedule's own split where neither L nor L + 2 divides
     * (mp_v_stage_blocks: Megatron's flags split in its interleaved order) */
    bool vsplit = !given && !flags && !account && n == 2 * p->pp &&
                  mp_v_split_default(m, p->schedule, p->pp, v);
    vflags = vflags && !vsplit;
    int64_t before = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t b, e;
        if (vsplit) {
            b = k == 0 ? 0 : 1 + before;
            before += mp_v_stage_blocks(L, p->pp, mp_layout_model_mtp_layers(m), k);
            e = k == n - 1 ? L + 2 : 1 + before;
        } else if (vflags) {
            b = k == 0 ? 0 : 1 + mp_vpp_flag_blocks_before(&vu, p->pp, v, k);
            e = k == n - 1 ? L + 2 : 1 + mp_vpp_flag_blocks_before(&vu, p->pp, v, k + 1);
        } else if (given)
            mp_layout_stage_items(l, L, k, &b, &e);
        else if (flags || account) {
            /* Megatron's first/last-stage flags, as given (mp_flag_split_check) */
            int64_t here = flags ? mp_flag_stage_blocks(L, p->pp, p->vpp, p->first_stage_layers,
                                                        p->last_stage_layers, k)
                                 : mp_account_stage_blocks(L, n, p->account_for_embedding,
                                                           p->account_for_loss, k);
            b = k == 0 ? 0 : 1 + before;
            before += here;
            e = k == n - 1 ? L + 2 : 1 + before;
        } else
            mp_even_stage_items(L, m->arch == MP_ARCH_T5 ? m->encoder_layers : 0, n,
                                n / (c->parallel.pp > 0 ? c->parallel.pp : 1),
                                mp_layout_model_mtp_layers(m), k, &b, &e);
        out[k].begin = (int32_t)b;
        out[k].end = (int32_t)e;
    }
    free(l);
}

const char *mp_split_kind_name(mp_split_kind k)
{
    static const char *const names[] = {"even", "account-for", "first/last flags", "layout"};
    return (unsigned)k <= MP_SPLIT_LAYOUT ? names[k] : "?";
}

/* blocks of stage k (items [begin, end) less the embedding and the head) */
static int64_t stage_blocks(const mp_stage_range *r, int64_t L)
{
    int64_t b = r->begin < 1 ? 1 : r->begin, e = r->end > L + 1 ? L + 1 : r->end;
    return e > b ? e - b : 0;
}

mp_split_form mp_split_form_of(const mp_config *c, const mp_stage_range *st, int64_t K)
{
    const mp_parallel *p = &c->parallel;
    int64_t L = c->model.layers, pp = p->pp, v = p->vpp > 1 ? p->vpp : 1;
    mp_split_form f = {.kind = MP_SPLIT_LAYOUT};
    if (c->model.arch == MP_ARCH_T5 || K != pp * v || K < 1)
        return f;
    bool even = L % K == 0;
    for (int64_t k = 0; k < K && even; k++)
        even = stage_blocks(&st[k], L) == L / K;
    if (even || K == 1) {
        f.kind = MP_SPLIT_EVEN;
        return f;
    }
    /* the first/last-stage flags: rank 0's and the last rank's counts as
     * the stages give them, checked as Megatron checks them */
    mp_config *cc = malloc(sizeof *cc);
    if (cc && pp >= 2) {
        int64_t F = 0, Lz = 0;
        for (int64_t k = 0; k < K; k++) {
            if (k % pp == 0)
                F += stage_blocks(&st[k], L);
            if (k % pp == pp - 1)
                Lz += stage_blocks(&st[k], L);
        }
        *cc = *c;
        cc->parallel.pipeline_layout[0] = '\0';
        cc->parallel.account_for_embedding = cc->parallel.account_for_loss = false;
        cc->parallel.first_stage_layers = F;
        cc->parallel.last_stage_layers = Lz;
        cc->parallel.schedule = v > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B;
        mp_error err;
        bool ok = F > 0 && Lz > 0 && mp_flag_split_check(cc, &err) == MP_OK;
        for (int64_t k = 0; k < K && ok; k++)
            ok = stage_blocks(&st[k], L) == mp_flag_stage_blocks(L, pp, v, F, Lz, k);
        if (ok) {
            free(cc);
            f.kind = MP_SPLIT_FLAGS;
            f.first = F;
            f.last = Lz;
            return f;
        }
    }
    free(cc);
    /* the account-for flags: both, then the loss alone, then the embedding alone */
    static const bool el[3][2] = {{true, true}, {false, true}, {true, false}};
    for (int i = 0; i < 3; i++) {
        int64_t units = L + el[i][0] + el[i][1];
        bool ok = units % pp == 0 && (units / pp) % v == 0;
        for (int64_t k = 0; k < K && ok; k++)
            ok = stage_blocks(&st[k], L) == mp_account_stage_blocks(L, K, el[i][0], el[i][1], k);
        if (ok) {
            f.kind = MP_SPLIT_ACCOUNT;
            f.embedding = el[i][0];
            f.loss = el[i][1];
            return f;
        }
    }
    return f;
}

const char *mp_split_label(const mp_config *c, const mp_stage_range *st, int64_t K)
{
    const mp_parallel *p = &c->parallel;
    if (p->pipeline_layout[0])
        return mp_split_kind_name(MP_SPLIT_LAYOUT);
    if (p->first_stage_layers > 0 || p->last_stage_layers > 0)
        return mp_split_kind_name(MP_SPLIT_FLAGS);
    if (p->account_for_embedding || p->account_for_loss)
        return mp_split_kind_name(MP_SPLIT_ACCOUNT);
    if (K < 2 || !st)
        return mp_split_kind_name(MP_SPLIT_EVEN);
    mp_split_kind k = mp_split_form_of(c, st, K).kind;
    /* a V's stages are no Megatron layout (that lists the interleaved order) */
    if (k == MP_SPLIT_LAYOUT && mp_schedule_is_v(p->schedule))
        return "V split";
    return mp_split_kind_name(k);
}

int64_t mp_config_mtp_stage(const mp_config *c, int64_t n)
{
    const mp_model *m = &c->model;
    int64_t mtp = mp_layout_model_mtp_layers(m);
    if (mtp < 1 || m->arch == MP_ARCH_T5 || n < 1)
        return -1;
    if (!c->parallel.pipeline_layout[0])
        return n - 1;
    mp_layout *l = malloc(sizeof *l);
    mp_error err;
    int64_t k = n - 1;
    if (l && mp_layout_parse(c->parallel.pipeline_layout, c->parallel.pp,
                             n / (c->parallel.pp > 0 ? c->parallel.pp : 1), mp_model_blocks(m),
                             mtp, l, &err) == MP_OK &&
        l->n_stages == n && l->mtp_stage >= 0)
        k = l->mtp_stage;
    free(l);
    return k;
}

void mp_plan_default_stages(mp_plan *plan)
{
    const mp_parallel *p = &plan->config.parallel;
    const mp_model *m = &plan->config.model;
    int64_t n = p->pp * p->vpp;
    int64_t blocks = m->layers;
    if (n < 1 || n > MP_MAX_STAGES || blocks < 1 || blocks > MP_MAX_LAYERS) {
        plan->n_stages = 0;
        return;
    }
    plan->n_stages = (int32_t)n;
    /* The explicit layout; else blocks spread evenly (or, when n does not
     * divide them, mp_blocks_before_stage's split); t5 splits at the split
     * rank. */
    mp_config_stages(&plan->config, n, plan->stages);
}

mp_status mp_plan_check(const mp_plan *plan, mp_error *err)
{
    mp_status st = mp_config_check_with_stages(&plan->config, plan->n_stages != 0, err);
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
            bool edge = k == 0 || k == plan->n_stages - 1;
            if (r->end < r->begin || (r->end == r->begin && edge))
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "stages",
                                    "stage %d is empty: [%d, %d) (the first stage holds the "
                                    "embedding, the last the head)",
                                    k, r->begin, r->end);
            next = r->end;
        }
        if (next != items)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "stages",
                                "ranges end at item %lld; expected %lld (layers + 2)",
                                (long long)next, (long long)items);
        if (mp_parallel_split_given(p)) {
            /* one split, said twice, must be said the same */
            mp_stage_range *want = malloc(sizeof *want * (size_t)plan->n_stages);
            if (!want)
                return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, "stages", "out of memory");
            mp_config_stages(&plan->config, plan->n_stages, want);
            int32_t k = 0;
            while (k < plan->n_stages && want[k].begin == plan->stages[k].begin &&
                   want[k].end == plan->stages[k].end)
                k++;
            int32_t wb = k < plan->n_stages ? want[k].begin : 0;
            int32_t we = k < plan->n_stages ? want[k].end : 0;
            free(want);
            if (k < plan->n_stages)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "stages",
                                    "stage %d holds items [%d, %d), but parallel.%s gives it "
                                    "[%d, %d)",
                                    k, plan->stages[k].begin, plan->stages[k].end,
                                    mp_parallel_split_field(p), wb, we);
        }
    }
    if (plan->has_layer_recompute)
        for (int64_t i = 0; i < items && i < MP_MAX_LAYERS + 2; i++) {
            if (plan->layer_recompute[i] >= MP_RECOMPUTE_COUNT)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "layer_recompute",
                                    "item %lld: invalid value %d", (long long)i,
                                    plan->layer_recompute[i]);
            else if (plan->layer_recompute[i] != MP_RECOMPUTE_NONE && (i == 0 || i == items - 1))
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "layer_recompute",
                                    "item %lld is the %s: only none (recomputation is of the "
                                    "blocks)",
                                    (long long)i, i == 0 ? "embedding" : "head");
            /* Megatron-Core refuses --overlap-moe-expert-parallel-comm with any
             * full recompute; a plan's per-layer full passed where
             * recompute: full was refused */
            else if (plan->layer_recompute[i] == MP_RECOMPUTE_FULL &&
                     plan->config.parallel.moe_a2a_overlap)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "layer_recompute",
                                    "item %lld is full, and parallel.moe_a2a_overlap (the EP "
                                    "all-to-all overlap) runs without full recompute",
                                    (long long)i);
        }
    return MP_OK;
}
