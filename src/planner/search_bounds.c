/* search_bounds.c — the lower bounds that prune the search (search.h), from
 * per-block numbers cached by (t, c, b, sp), and the check that they are
 * bounds (docs/design.md §5). */
#include "planner/search_parts.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/layout.h"
#include "planner/cost_internal.h"
#include "planner/split.h"
#include "planner/pipeline_internal.h"
#include "planner/search_internal.h"

/* An MoE model as the bounds see it: its blocks without their MLPs (a
 * one-wide dense MLP), which the expert layers only add time and bytes to
 * whatever the expert split. */
void mp_search_moe_strip(mp_model *m)
{
    memset(&m->moe, 0, sizeof m->moe);
    m->ffn_hidden = 1;
}

/* ---- per-block numbers, cached by (t, c, b, sp) -------------------------- */

static uint64_t block_key(int32_t t, int32_t c, int32_t b, bool sp)
{
    return ((uint64_t)t << 42) ^ ((uint64_t)c << 22) ^ ((uint64_t)b << 1) ^ (sp ? 1u : 0u) ^
           (1ull << 63);
}

static void block_compute(const block_cache *bc, int32_t t, int32_t c, int32_t b, bool sp,
                          block_info *bi)
{
    const mp_config *base = bc->base;
    mp_config cfg = *base;
    cfg.parallel.tp = t;
    cfg.parallel.cp = c;
    cfg.parallel.pp = 1;
    cfg.parallel.vpp = 1;
    cfg.parallel.dp = base->training.gpus / ((int64_t)t * c) > 0 ? base->training.gpus / ((int64_t)t * c) : 1;
    cfg.parallel.micro_batch = b;
    cfg.parallel.sp = sp;
    /* MoE: the expert degrees are not in the key, so the bounds take the
     * blocks without their MLP (moe.c's parts only add time and bytes) */
    if (mp_model_is_moe(&base->model)) {
        mp_search_moe_strip(&cfg.model);
        /* and on the GPU's time alone: the bound adds the experts' GEMMs to
         * it, and max(gpu, host) + experts can exceed the real block's
         * max(gpu + experts, host) when the stripped block is host-bound */
        cfg.hw.kernel_overhead = 0.0;
    }
    const mp_model *m = &cfg.model;
    int64_t L = mp_model_blocks(m);
    int64_t kinds[2] = {1, L};
    int nk = m->arch == MP_ARCH_T5 && m->encoder_layers > 0 && L > m->encoder_layers ? 2 : 1;
    if (nk == 2) kinds[1] = m->encoder_layers + 1;
    for (int k = 0; k < nk; k++) {
        mp_block_shape bs;
        mp_block_shape_of(m, base->training.seq, kinds[k], &bs);
        mp_block_time bt, bt0;
        mp_block_time_of(&cfg, &bs, &bt);
        bt0 = bt; /* (bt is the split backward's below) */
        double comp = bt.fwd_compute + bt.bwd_compute;
        uint32_t mask = mp_recompute_modules_of(&cfg.parallel, MP_RECOMPUTE_SELECTIVE);
        double rec[MP_RECOMPUTE_COUNT] = {0, mp_block_modules_time(&bt, mask), bt.fwd_compute};
        double act[MP_RECOMPUTE_COUNT];
        double fp8_saved = mp_fp8_act_saving(&cfg, &bs) + /* FP8 GEMM inputs (fp8.c) */
                           mp_act_cache_saving(&cfg, &bs); /* and SwiGLU inputs */
        for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
            act[r] = mp_block_act_bytes(m, &bs, (double)b, (double)t, (double)c, sp && t > 1,
                                        (mp_recompute)r, base->hw.flash_attention) -
                     (r == MP_RECOMPUTE_FULL ? 0.0 : fp8_saved);
        /* the stripped blocks are dense, whose pre-MLP norm layernorm
         * leaves alone (memory.c, mp_block_checkpointed_norms); an MoE
         * block's it frees: counted back, bf16 and the shared FC1's FP8
         * copy, so that the bound frees no less than any block */
        double moe_norm = 0.0;
        if (mp_model_is_moe(&base->model))
            moe_norm = (2.0 + (base->model.moe.shared_experts > 0
                                   ? mp_fp8_shared_fc1_copy_bytes(&cfg) : 0.0)) *
                       (double)b * bs.s / (double)c * (double)m->hidden / (sp && t > 1 ? t : 1.0);
        const uint32_t ln = 1u << MP_RCM_LAYERNORM;
        /* selective frees what its modules do (cost.c's detail_block) */
        act[MP_RECOMPUTE_SELECTIVE] =
            fmax(act[MP_RECOMPUTE_FULL],
                 act[MP_RECOMPUTE_NONE] - mp_block_modules_act_bytes(&cfg, &bs, mask) -
                     (mask & ln ? moe_norm : 0.0));
        if (k == 0 || comp < bi->compute) bi->compute = comp;
        if (k == 0 || bt.fwd_compute < bi->fwd) bi->fwd = bt.fwd_compute;
        /* the same block with B and W apart (compute.c bounds each pass by
         * the host on its own) */
        mp_config split = cfg;
        split.parallel.pp = 2;
        split.parallel.schedule = MP_SCHED_ZBH1;
        mp_block_time_of(&split, &bs, &bt);
        double b_in = bt.bwd_compute - bt.wgrad;
        double fbbw = bt.fwd_compute + 2.0 * b_in - bt.wgrad, fbw = bt.fwd_compute + b_in - bt.wgrad;
        if (k == 0 || fbbw < bi->split_fbbw) bi->split_fbbw = fbbw;
        if (k == 0 || fbw < bi->split_fbw) bi->split_fbw = fbw;
        for (int r = 0; r < MP_RECOMPUTE_COUNT; r++) {
            if (k == 0 || rec[r] < bi->recompute[r]) bi->recompute[r] = rec[r];
            if (k == 0 || act[r] < bi->act[r]) bi->act[r] = act[r];
        }
        if (k == 0 || act[MP_RECOMPUTE_NONE] > bi->act_none_max) bi->act_none_max = act[MP_RECOMPUTE_NONE];
        /* each of the search's selective module sets, as set 0's above */
        for (int j = 0; j < bc->n_sel; j++) {
            uint32_t mj = bc->sel_mask[j] ? bc->sel_mask[j] : mask;
            double rj = mp_block_modules_time(&bt0, mj);
            double aj = fmax(act[MP_RECOMPUTE_FULL],
                             act[MP_RECOMPUTE_NONE] - mp_block_modules_act_bytes(&cfg, &bs, mj) -
                                 (mj & ln ? moe_norm : 0.0));
            if (k == 0 || rj < bi->sel_rec[j]) bi->sel_rec[j] = rj;
            if (k == 0 || aj < bi->sel_act[j]) bi->sel_act[j] = aj;
        }
    }
    bi->n_sel = bc->n_sel;
    memcpy(bi->sel_mask, bc->sel_mask, sizeof bi->sel_mask);
    /* a candidate standing for every set: the least of theirs */
    for (int j = 0; j < bc->n_sel; j++) {
        bi->recompute[MP_RECOMPUTE_SELECTIVE] = fmin(bi->recompute[MP_RECOMPUTE_SELECTIVE], bi->sel_rec[j]);
        bi->act[MP_RECOMPUTE_SELECTIVE] = fmin(bi->act[MP_RECOMPUTE_SELECTIVE], bi->sel_act[j]);
    }
}

const block_info *mp_search_block_get(block_cache *bc, int32_t t, int32_t c, int32_t b, bool sp)
{
    if (bc->n * 2 >= bc->cap) {
        size_t cap = bc->cap ? bc->cap * 2 : 1024;
        block_info *s = calloc(cap, sizeof *s);
        if (!s) {
            bc->oom = true;
            return NULL;
        }
        for (size_t i = 0; i < bc->cap; i++) {
            if (!bc->slot[i].key) continue;
            size_t j = (size_t)(bc->slot[i].key * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
            while (s[j].key) j = (j + 1) & (cap - 1);
            s[j] = bc->slot[i];
        }
        free(bc->slot);
        bc->slot = s;
        bc->cap = cap;
    }
    uint64_t key = block_key(t, c, b, sp);
    size_t j = (size_t)(key * 0x9E3779B97F4A7C15ull >> 20) & (bc->cap - 1);
    while (bc->slot[j].key && bc->slot[j].key != key) j = (j + 1) & (bc->cap - 1);
    if (!bc->slot[j].key) {
        block_compute(bc, t, c, b, sp, &bc->slot[j]);
        bc->slot[j].key = key;
        bc->n++;
    }
    return &bc->slot[j];
}

/* Blocks on pipeline rank 0: L/p (Megatron's even split); under an
 * explicit layout, given or proposed, or the uneven default split, those of
 * its stages k = 0, p, 2p, ...
 * (and *min_chunk the fewest in one of them), so that the memory bound stays
 * below the rank's real bytes however uneven the layout is (no V schedule,
 * no DualPipe: L/p there, each rank's own bound below counting its stages). */
static double rank0_blocks(const mp_config *base, const cand *x, int64_t L, double *min_chunk,
                           bool *exact)
{
    int64_t n = (int64_t)x->p * x->v;
    /* (a split given -- a layout, the first/last-stage or account-for
     * flags -- may be uneven where n divides L too, and T5's encoder and
     * decoder stages are: t5-3b on pp 3 holds 12 blocks on rank 0, not 16) */
    bool even = L % n == 0 && !mp_parallel_split_given(&base->parallel) &&
                base->model.arch != MP_ARCH_T5;
    *min_chunk = (double)L / (double)n;
    *exact = even; /* else an average: rank 0 may hold fewer */
    bool two = mp_schedule_is_v((mp_schedule_kind)x->sched) || x->sched == MP_SCHED_DUALPIPE;
    if (two && !even) {
        /* an uneven split of the V schedules or DualPipe: rank 0's first
         * and last stages can hold fewer than the average (Qwen3-235B's 94
         * blocks in 8 stages under ZB-V: the average put 114 bounds over
         * their estimates); none here, each rank's own bound counting them */
        *min_chunk = 0.0;
        return 0.0;
    }
    if (even || two || n > MP_MAX_STAGES)
        return (double)L / (double)x->p;
    mp_config *c = malloc(sizeof *c);
    mp_stage_range *st = malloc(sizeof *st * (size_t)n);
    double blocks = 0.0;
    if (!c || !st) {
        free(c);
        free(st);
        *min_chunk = 0.0;
        *exact = false;
        return 0.0; /* no bound rather than a wrong one */
    }
    *c = *base;
    c->parallel.pp = x->p;
    c->parallel.vpp = x->v;
    /* (the split is the schedule's: a V's own where Megatron's cannot be) */
    c->parallel.schedule = (mp_schedule_kind)x->sched;
    mp_search_set_split(base, x->p, x->v, &c->parallel);
    mp_config_stages(c, n, st);
    *exact = true;
    for (int64_t k = 0; k < n; k += x->p) {
        int64_t b = st[k].begin < 1 ? 1 : st[k].begin, e = st[k].end > L + 1 ? L + 1 : st[k].end;
        double here = (double)(e > b ? e - b : 0);
        blocks += here;
        *min_chunk = k == 0 || here < *min_chunk ? here : *min_chunk;
    }
    free(c);
    free(st);
    return blocks;
}

/* Each pipeline rank's blocks and MoE blocks (and which edges it holds)
 * from the stages the estimate takes (mp_config_stages of x's split), even
 * split or not: rank r's chunk ch runs stage mp_schedule_stage(s, p, r, ch)
 * -- r + ch p (interleaved, ch < v), r and 2p-1-r (the V schedules), r and
 * p-1-r (DualPipe, whose p stages each run on two ranks). kind: 1 for the V
 * schedules and DualPipe (counted by chunk too), 0 for the others; into bs,
 * cached by (p, v), on which alone they depend within a kind (v: 2 for the
 * V schedules, 1 for DualPipe). False where not counted (T5's encoder and
 * decoder stages, more stages than a plan holds, more ranks than bs holds). */
static bool rank_counts(const mp_config *base, const cand *x, int64_t L, int kind,
                        bound_scratch *bs)
{
    if (bs->rk_p[kind] == x->p && bs->rk_v[kind] == x->v)
        return bs->rk_ranks[kind] == x->p;
    bs->rk_p[kind] = x->p;
    bs->rk_v[kind] = x->v;
    bs->rk_ranks[kind] = 0;
    mp_schedule_kind sk = (mp_schedule_kind)x->sched;
    int64_t n = mp_schedule_n_stages(sk, x->p, x->v), nch = mp_schedule_chunks(sk, x->v);
    if (base->model.arch == MP_ARCH_T5 || n > MP_MAX_STAGES || x->p > MP_SEARCH_RANKS_MAX)
        return false;
    mp_config *c = malloc(sizeof *c);
    mp_stage_range *st = malloc(sizeof *st * (size_t)n);
    if (!c || !st) {
        free(c);
        free(st);
        return false; /* no rank terms rather than wrong ones */
    }
    *c = *base;
    c->parallel.pp = x->p;
    c->parallel.vpp = x->v;
    /* (the split is the schedule's: a V's own where Megatron's cannot be) */
    c->parallel.schedule = (mp_schedule_kind)x->sched;
    mp_search_set_split(base, x->p, x->v, &c->parallel);
    mp_config_stages(c, n, st);
    const mp_model *m = &base->model;
    bool moe = mp_model_is_moe(m);
    for (int64_t r = 0; r < x->p; r++) {
        uint8_t ed = 0;
        int32_t nb = 0, nm = 0;
        for (int64_t ch = 0; ch < nch; ch++) {
            int64_t k = mp_schedule_stage(sk, x->p, r, ch);
            const mp_stage_range *sr = &st[k];
            /* (item 0 the embedding, L + 1 the head) */
            if (sr->begin <= 0 && sr->end > 0) ed |= 1;
            if (sr->begin <= L + 1 && sr->end > L + 1) ed |= 2;
            if (k < n - 1 && sr->end > sr->begin) ed |= 4;
            int64_t b = sr->begin < 1 ? 1 : sr->begin, e = sr->end > L + 1 ? L + 1 : sr->end;
            int32_t cb = 0, cm = 0;
            for (int64_t i = b; i < e; i++) {
                cb++;
                /* (block i is layer i - 1) */
                if (moe && i - 1 < m->layers && mp_model_block_is_moe(m, i - 1)) cm++;
            }
            if (kind == 1 && ch < 2) {
                bs->rk2_blocks[r][ch] = cb;
                bs->rk2_moe[r][ch] = cm;
            }
            nb += cb;
            nm += cm;
        }
        bs->rk_blocks[kind][r] = nb;
        bs->rk_moe[kind][r] = nm;
        bs->rk_edges[kind][r] = ed;
    }
    bs->rk_ranks[kind] = x->p;
    free(c);
    free(st);
    return true;
}

/* The routed experts' GEMMs of one MoE block at the peak rate: each rank
 * runs b s/(c t) x top_k tokens through FC1 and FC2, forward and backward
 * (the efficiency curve and imbalance only add to it). */
static double expert_gemm_floor(const mp_config *base, const cand *x)
{
    const mp_model *m = &base->model;
    double peak = base->hw.peak_flops[base->training.precision];
    if (!(peak > 0.0)) peak = base->hw.peak_flops[MP_DTYPE_FP32];
    double gate = mp_activation_is_gated(m->activation) ? 2.0 : 1.0;
    double tokens = (double)x->b * (double)base->training.seq / ((double)x->c * x->t);
    return 3.0 * 2.0 * tokens * (double)m->moe.top_k * (double)m->hidden * (gate + 1.0) *
           (double)m->moe.expert_ffn / peak;
}

double mp_search_expert_comm(const mp_config *cfg)
{
    const mp_model *m = &cfg->model;
    const mp_parallel *q = &cfg->parallel;
    /* the dispatch and combine are exposed in full, but for the overlaps */
    if (!mp_model_is_moe(m) || q->ep <= 0 || q->moe_a2a_overlap || q->shared_expert_overlap)
        return 0.0;
    int64_t L = mp_model_blocks(m);
    mp_block_shape bs = {0};
    for (int64_t i = 1; i <= L && bs.kind != MP_BLOCK_MOE; i++)
        mp_block_shape_of(m, cfg->training.seq, i, &bs);
    if (bs.kind != MP_BLOCK_MOE)
        return 0.0;
    mp_moe_time mt;
    mp_moe_block_time(cfg, &bs, &mt);
    return mt.comm_f + mt.comm_b;
}

double mp_search_expert_time_bound(const mp_config *base, const block_info *bi, const cand *x,
                                   double comm)
{
    const mp_model *m = &base->model;
    if (!mp_model_is_moe(m) || x->ep <= 0)
        return 0.0;
    int64_t L = mp_model_blocks(m), M = mp_model_moe_blocks(m);
    /* every block is on one rank's chunks, so the busiest rank's round is
     * at least the average: L/p blocks' compute and recompute, M/p MoE
     * blocks' experts and exposed dispatch + combine (compute.c adds
     * mt.comm_f and comm_b to the block's TP time), m rounds (DualPipe: m/2
     * of two stages); no fill */
    double mb = (double)(base->training.global_batch / ((int64_t)x->b * x->d));
    double p = (double)x->p;
    return mb * ((double)L / p * (bi->compute + mp_search_bi_rec(bi, x)) +
                 (double)M / p * (expert_gemm_floor(base, x) + comm));
}

/* What one MoE block stashes beyond the stripped block the per-block
 * numbers hold (mp_search_moe_strip), under no recompute and no FP8, for
 * any expert split: a lower bound, so that the memory bound counts the
 * routed tokens' activations, the largest part of an MoE rank's bytes
 * (DeepSeek-V3 on 2048 H100s: ~37 GiB), and prunes candidates it let
 * through to be costed and found not to fit (~160000 of its 330000).
 *
 * Why it is below the estimate's: cost.c's MoE block stashes
 * mp_block_act_bytes of the dense block minus its dense MLP (per_f bytes a
 * token per ffn column over tp, mp_moe_item_adjust), plus the shared
 * experts' (>= 0), plus mp_moe_act_bytes; the stripped block is the dense
 * block with a one-column MLP, so the MoE block holds the stripped one's
 * bytes minus per_f * Tr, plus mp_moe_act_bytes. That is Tr*E*8 (none under
 * moe.fake_balanced_gate) + copies
 * * (2h + 4 + per_f * F/etp) (+ a clamp copy >= 0), copies = Tr * top_k *
 * etp * imbalance: at least its value at etp = 1, since (2h + 4) * etp +
 * per_f * F does not shrink as etp grows. Tr = b s / (c t), the tokens
 * mp_moe_act_bytes takes. No recompute keeps all of it (selective may free
 * the routed part, full keeps none of it: those get no term); FP8 saves
 * some of it in 8 bits (no term either). Rank 0's stash is the sum of its
 * chunks' bytes / v times the chunks in flight (cost.c), and it holds at
 * least moe_run MoE blocks. */
static double routed_act_floor(const mp_config *base, const cand *x, bool act_freed)
{
    const mp_model *m = &base->model;
    double Tr = (double)x->b * (double)base->training.seq / ((double)x->c * (double)x->t);
    double per_f = (mp_activation_is_gated(m->activation) ? 4.0 : 2.0) + 2.0;
    /* selective recompute of moe_act frees the grouped FC2's input, 2
     * bytes a column of each copy (mp_moe_act_output_bytes; what it frees
     * beyond, GPT-OSS's clamped copy, is not in this floor) */
    double copy = 2.0 * (double)m->hidden + 4.0 +
                  (per_f - (act_freed ? 2.0 : 0.0)) * (double)m->moe.expert_ffn;
    double scores = m->moe.fake_balanced_gate ? 0.0 : (double)m->moe.experts * 8.0; /* moe.c */
    double bytes = Tr * (scores + (double)m->moe.top_k * mp_moe_imbalance(m) * copy - per_f);
    return fmax(0.0, bytes);
}

/* Which routed activations x's recompute keeps of every MoE block: 2 all
 * (none, or selective of modules without moe and moe_act), 1 all but the
 * FC2 inputs (selective with moe_act), 0 none (full, or selective with moe);
 * for a candidate standing for every set, the least of theirs. */
static int routed_kept(const block_info *bi, const cand *x)
{
    if (x->rc == MP_RECOMPUTE_NONE) return 2;
    if (x->rc != MP_RECOMPUTE_SELECTIVE) return 0;
    const uint32_t moe = 1u << MP_RCM_MOE, act = 1u << MP_RCM_MOE_ACT;
    int kept = 2;
    for (int k = 0; k < bi->n_sel; k++) {
        /* (a mask of 0: Megatron's default, core_attn) */
        uint32_t mods = bi->sel_mask[k];
        if (x->rcm != MP_SEARCH_RCM_ANY && mods != x->rcm) continue;
        int here = mods & moe ? 0 : mods & act ? 1 : 2;
        if (here < kept) kept = here;
    }
    return kept;
}

/* The bounds of section 1 above, in the parts the expert settings leave
 * alone (search_parts.h): x's (t, c, p, v, d, b, sp, rc, sharding, schedule). */
void mp_search_bound_scratch_init(const mp_config *base, bound_scratch *bs)
{
    bs->sharded = *base;
    bs->experts = *base;
    bs->r0_p[0] = bs->r0_p[1] = bs->r0_v[0] = bs->r0_v[1] = 0;
    for (int k = 0; k < 2; k++) bs->rk_p[k] = bs->rk_v[k] = bs->rk_ranks[k] = 0;
    /* the tokens a stage hands on (cost.c's send_bytes, the last block's) */
    mp_block_shape sh;
    mp_block_shape_of(&base->model, base->training.seq, mp_model_blocks(&base->model), &sh);
    bs->send_tokens = sh.s;
}

/* Keeps the rank whose bytes are at least a + moe * (one MoE block's expert
 * bytes) among bp's terms unless a kept one is at least as large in both;
 * when they are full, in place of the one with the least a (any subset of
 * the ranks bounds the peak). */
static void keep_rank_term(bound_parts *bp, double a, double moe)
{
    int w = 0;
    for (int j = 0; j < bp->n_ranks; j++) {
        if (bp->rank_a[j] >= a && bp->rank_moe[j] >= moe) return;
        if (!(a >= bp->rank_a[j] && moe >= bp->rank_moe[j])) { /* not dominated by it */
            bp->rank_a[w] = bp->rank_a[j];
            bp->rank_moe[w++] = bp->rank_moe[j];
        }
    }
    bp->n_ranks = w;
    if (w == MP_SEARCH_RANK_TERMS) {
        int least = 0;
        for (int j = 1; j < w; j++)
            if (bp->rank_a[j] < bp->rank_a[least]) least = j;
        if (bp->rank_a[least] >= a) return;
        w = least;
    } else {
        bp->n_ranks++;
    }
    bp->rank_a[w] = a;
    bp->rank_moe[w] = moe;
}

void mp_search_bound_parts(const mp_config *base, const block_info *bi, double block_params_min,
                           double emb_params, bound_scratch *bs, const cand *x, bound_parts *bp)
{
    const mp_model *m = &base->model;
    int64_t L = mp_model_blocks(m);
    int64_t mb = base->training.global_batch / ((int64_t)x->b * x->d);
    double per_rank = (double)L / (double)x->p; /* blocks on a rank, even split */
    /* under a layout or Megatron's uneven default split (mp_uneven_split,
     * whose first stage may hold fewer than L/p blocks), the bounded rank's
     * blocks and the fewest of one of its chunks (each stashed chunk holds at
     * least as many) */
    bool layout_split = mp_parallel_split_given(&base->parallel) ||
                        mp_search_needs_layout(base, x->p, x->v) ||
                        (m->arch != MP_ARCH_T5 && L % ((int64_t)x->p * x->v) != 0);
    double min_chunk = 0.0;
    /* whether rank0 (and its chunks) are rank 0's own count: an even split,
     * or the stages of a layout or of the uneven default split */
    bool exact0 = L % ((int64_t)x->p * x->v) == 0 && m->arch != MP_ARCH_T5;
    double rank0 = per_rank;
    /* rank0_blocks depends on the schedule only by whether it is a V one
     * or DualPipe (its L/p there) */
    int r0k = mp_schedule_is_v((mp_schedule_kind)x->sched) || x->sched == MP_SCHED_DUALPIPE;
    if (layout_split && bs->r0_p[r0k] == x->p && bs->r0_v[r0k] == x->v) {
        rank0 = bs->r0_blocks[r0k]; /* the split depends on these alone */
        min_chunk = bs->r0_min_chunk[r0k];
        exact0 = bs->r0_exact[r0k];
    } else if (layout_split) {
        rank0 = rank0_blocks(base, x, L, &min_chunk, &exact0);
        bs->r0_p[r0k] = x->p;
        bs->r0_v[r0k] = x->v;
        bs->r0_blocks[r0k] = rank0;
        bs->r0_min_chunk[r0k] = min_chunk;
        bs->r0_exact[r0k] = exact0;
    }
    /* x's sharding (mp_static_bytes reads the parallel settings alone) */
    mp_config *tmp = &bs->sharded;
    memset(&tmp->parallel, 0, sizeof tmp->parallel);
    tmp->parallel.dp = x->d;
    tmp->parallel.cp = x->c;
    tmp->parallel.dist_opt = x->dist_opt >= 1;
    tmp->parallel.zero = x->dist_opt >= 2 ? (x->dist_opt >= 3 ? 3 : 2) : 0;
    tmp->parallel.hsdp = x->dist_opt == 4;
    tmp->parallel.tp = x->t;
    double spb = mp_static_bytes_per_param(tmp);
    /* DualPipe keeps two stages' weights on each rank (r and p-1-r, each
     * L/p blocks under the even split): twice the blocks' static bytes */
    double held = x->sched == MP_SCHED_DUALPIPE && !layout_split ? 2.0 * rank0 : rank0;
    double params0 = held * block_params_min / x->t + emb_params / x->t;
    bp->static_bytes = params0 * spb;
    bp->block_static = block_params_min / x->t * spb;
    /* (DualPipe: every MoE block on two ranks, 2M among the p) */
    bp->moe_avg = mp_model_is_moe(m) ? (double)mp_model_moe_blocks(m) / (double)x->p *
                                           (x->sched == MP_SCHED_DUALPIPE ? 2.0 : 1.0)
                                     : 0.0;
    double moe_gemm = 0.0, moe_gemm_fwd = 0.0, moe_run = 0.0;
    bp->moe_min = 0.0;
    if (mp_model_is_moe(m)) {
        /* the fewest MoE blocks a rank can hold, each with its local
         * experts (mp_search_expert_bytes) */
        moe_run = fmax(0.0, (double)mp_model_moe_blocks(m) - ((double)L - rank0));
        bp->moe_min = fmax(0.0, (double)mp_model_moe_blocks(m) - ((double)L - held));
        /* and the routed experts' GEMMs at the peak rate */
        moe_gemm = moe_run * expert_gemm_floor(base, x);
        moe_gemm_fwd = moe_gemm / 3.0; /* of the three passes, the forward */
    }
    double chunks = mp_pipeline_inflight_chunks((mp_schedule_kind)x->sched, x->p, x->v, mb, 0);
    double stash = layout_split ? min_chunk * mp_search_bi_act(bi, x) * chunks
                                : per_rank * mp_search_bi_act(bi, x) / (double)x->v * chunks;
    if (x->rc == MP_RECOMPUTE_FULL) stash += bi->act_none_max;
    bp->stash = stash;
    /* what the memory bound adds where rank 0's blocks are known
     * (mp_search_bounds_set): its routed tokens' activations, and the
     * allocator's fragmentation of its whole stash */
    double extra = 0.0;
    int kept = mp_model_is_moe(m) ? routed_kept(bi, x) : 0;
    if (exact0 && kept > 0 && !mp_fp8_on(base) && moe_run > 0.0)
        extra = moe_run * routed_act_floor(base, x, kept == 1) / (double)x->v * chunks;
    bp->stash_extra = exact0 ? extra + base->hw.allocator_fragmentation * (stash + extra) : 0.0;
    /* Each rank on its own, where its blocks are counted (rank_counts:
     * every split but T5's, deeper pipelines than MP_SEARCH_RANKS_MAX and
     * more stages than a plan holds). Rank r's stash is its chunks'
     * activations as the estimate counts them (cost.c), each block's at
     * least the stripped block's and each MoE block's at least that plus
     * the routed floor; its static bytes at least its blocks' fewest (both
     * of DualPipe's stages: each rank holds its own copy of two), its
     * experts' those of its MoE blocks; its "other" at least the reserve,
     * the fragmentation of its stash and its edges (below). In a deep
     * pipeline the ranks after the first hold the MoE blocks (DeepSeek-V3's
     * first three are dense) with nearly as many micro-batches in flight:
     * rank 0's bound, holding none, and the busiest rank's below, counting
     * no activations, missed the routed tokens' bytes that put most of what
     * was costed for DeepSeek-V3 on 2048 GPUs over memory; and DualPipe's
     * two stages on each rank with rank 0's bound alone put 3246 DualPipe
     * candidates it costed over memory. The stash (cost.c), of nch chunks:
     * - DualPipe without full recompute: the estimate walks the rank's op
     *   list (mp_pipeline_stash_peak, the simulator's), the largest over
     *   its states of n0 act0 + n1 act1 + g0 hold0 + g1 hold1, counts >= 0:
     *   not smaller for smaller bytes. For m >= 2p (search's DualPipe) the
     *   list holds p - r micro-batches of rank r's first chunk (stage r)
     *   and r + 1 of its second (stage p-1-r) at once, each the most it ever
     *   holds (test_search.c test_dualpipe_peak_closed_form): PP + 1 in
     *   all, but rank 0's mostly of stage 0, which a two-chunk average
     *   misses. The closed form, as walking each rank's list here took half
     *   the search's time (the table of walks thrashed);
     * - DualPipe under full recompute and DualPipeV: the chunks' bytes /
     *   nch times the chunks in flight, or the held output gradients
     *   (their Ws wait within the in-flight count: act/2 ch + ch max(0,
     *   g - act/2)) where larger;
     * - the others: the chunks' bytes / nch times the chunks in flight,
     *   and under ZB-H1 and ZB-V the held gradients times the Ws pending;
     * full recompute one block's full activations more. The held output
     * gradients are 9 boundary activations a block (cost.c w_hold_bytes;
     * the boundary at least b s h / (c t) in the activations' type, s the
     * last block's own tokens, its cross-attended ones >= 0). */
    bp->n_ranks = 0;
    if (rank_counts(base, x, L, r0k, bs)) {
        mp_schedule_kind sk = (mp_schedule_kind)x->sched;
        double nch = (double)mp_schedule_chunks(sk, x->v);
        double rout = kept > 0 && !mp_fp8_on(base) ? routed_act_floor(base, x, kept == 1) : 0.0;
        double a = mp_search_bi_act(bi, x);
        double grow = 1.0 + base->hw.allocator_fragmentation;
        bool full = x->rc == MP_RECOMPUTE_FULL;
        double sb = (double)x->b * bs->send_tokens / (double)x->c;
        double share = sb * (double)m->hidden * mp_dtype_bytes(base->training.precision) / x->t;
        double send = share * mp_p2p_whole_factor(&base->training, x->sp, x->t);
        double hold = mp_schedule_splits_backward(sk) && x->p > 1 ? 9.0 * share : 0.0;
        /* The edges (cost.c detail_edges): the embedding's weights (rank
         * 0's term's), the head's (at least its V x h / t output layer, or
         * the tied copy the head's rank keeps where p > 1; with p = 1 tied
         * weights are the embedding's), and the head's
         * logits of one micro-batch in the estimate's "other" (fp32, or
         * bf16 under TE's fused cross entropy) with its input (4 s b h / t
         * at least); and the p2p buffers of a rank holding a stage not the
         * last, four of its send (cost.c; a block's or the embedding's
         * output: b s h / (c t) in the activations' type, t times that without
         * SP on current Megatron-LM, more with MTP's)
         * and with SP the gather buffer, tp of them */
        double emb_w = emb_params / x->t * spb;
        double head_w = !m->tied_embeddings || x->p > 1
                            ? (double)m->vocab * (double)m->hidden / x->t * spb
                            : 0.0;
        double logits = (base->training.te_cross_entropy ? 2.0 : 4.0) * sb * (double)m->vocab /
                            x->t +
                        4.0 * sb * (double)m->hidden / x->t;
        double bufs = x->p > 1 ? send * (4.0 + (x->sp && x->t > 1 ? (double)x->t : 0.0)) : 0.0;
        for (int64_t r = 0; r < x->p; r++) {
            double nb = bs->rk_blocks[r0k][r], nm = bs->rk_moe[r0k][r];
            uint8_t ed = bs->rk_edges[r0k][r];
            double edges = (ed & 1 ? emb_w : 0.0) + (ed & 2 ? head_w + logits : 0.0) +
                           (ed & 4 ? bufs : 0.0);
            double ch = mp_pipeline_inflight_chunks(sk, x->p, x->v, mb, r), st;
            if (sk == MP_SCHED_DUALPIPE && !full) {
                const int32_t *b2 = bs->rk2_blocks[r], *m2 = bs->rk2_moe[r];
                double a2[2] = {b2[0] * a + m2[0] * rout, b2[1] * a + m2[1] * rout};
                double h2[2] = {b2[0] * hold, b2[1] * hold};
                /* (the walk's -1: no op list, where the estimate's own walk
                 * fails too or memory ran out: no stash rather than a wrong one) */
                st = mb >= 2 * (int64_t)x->p
                         ? (double)(x->p - r) * a2[0] + (double)(r + 1) * a2[1]
                         : fmax(0.0, mp_pipeline_stash_peak(sk, x->p, 2, mb, r, a2, h2, NULL));
            } else if (mp_pipeline_w_under_inflight(sk)) {
                st = ch * fmax(nb * a + nm * rout, nb * hold) / nch;
            } else {
                st = (nb * a + nm * rout) / nch * ch;
                if (hold > 0.0)
                    st += hold * nb / nch *
                          mp_pipeline_w_pending_chunks(sk, x->p, x->v, mb, r);
            }
            if (full && nb > 0) st += bi->act[MP_RECOMPUTE_NONE];
            keep_rank_term(bp, nb * bp->block_static + st * grow + edges +
                                   base->hw.runtime_reserve,
                           nm);
        }
    }
    /* Megatron's default uneven split (DeepSeek-V3's 61 blocks on pp 16):
     * the bound above counts rank 0's blocks as the average L/p; the tight
     * bound takes its own count from the split's stages instead, as under
     * a layout, and the terms above with it */
    bp->alt0 = false;
    double mc = 0.0;
    bool ex = false;
    double r0 = !layout_split && !exact0 ? rank0_blocks(base, x, L, &mc, &ex) : 0.0;
    if (ex) {
        double moe_e = mp_model_is_moe(m)
                           ? fmax(0.0, (double)mp_model_moe_blocks(m) - ((double)L - r0))
                           : 0.0;
        double st = mc * mp_search_bi_act(bi, x) * chunks;
        if (x->rc == MP_RECOMPUTE_FULL) st += bi->act_none_max;
        double ex_r = 0.0;
        if (kept > 0 && !mp_fp8_on(base) && moe_e > 0.0)
            ex_r = moe_e * routed_act_floor(base, x, kept == 1) / (double)x->v * chunks;
        bp->alt0 = true;
        bp->alt_static = (r0 * block_params_min / x->t + emb_params / x->t) * spb;
        bp->alt_moe_min = moe_e;
        bp->alt_stash = (st + ex_r) * (1.0 + base->hw.allocator_fragmentation);
    }

    double round = per_rank * (bi->compute + mp_search_bi_rec(bi, x)) + moe_gemm;
    /* the split-backward schedules fill most of it, what is left being
     * cost.c's ramps: per chunk, ZB-V f + p2p/2 + max(0, B - W) (at least
     * its forward), DualPipe(V) max(0, f + 2B - W) (one fill fewer), ZB-H1 max(0, f +
     * B - W + p2p), the other p - 1 ranks' sum over v, every rank holding
     * per_rank blocks under the even split (under a layout, no fill is a
     * safe bound). The blocks' sums bound the chunks': what a stage adds
     * (recompute and communication in B, the embedding and head, an MoE
     * block's experts) adds at least as much to f and B as to W. */
    double fill = (double)(x->p - 1) * round / (double)x->v;
    mp_schedule_kind sk = (mp_schedule_kind)x->sched;
    if (mp_schedule_splits_backward(sk) && layout_split)
        fill = 0.0;
    else if (sk == MP_SCHED_ZBV)
        fill = (double)(x->p - 1) * (per_rank * bi->fwd + moe_gemm_fwd) / (double)x->v;
    else if (sk == MP_SCHED_DUALPIPEV)
        /* f + max(f, B) + max(0, B - W) >= f + 2B - W per chunk, but with
         * B > f the fills overlap by up to a forward over the step (pipeline.c
         * mp_dualpipe_turn), which one fill (at least 2f) more than covers:
         * one fill fewer */
        fill = (double)(x->p > 2 ? x->p - 2 : 0) * per_rank * fmax(0.0, bi->split_fbbw) /
               (double)x->v;
    else if (sk == MP_SCHED_DUALPIPE) /* (p/2 - 1) of them, each chunk a stage; as above */
        fill = (double)(x->p > 4 ? x->p / 2 - 2 : 0) * per_rank * fmax(0.0, bi->split_fbbw);
    else if (sk == MP_SCHED_ZBH1) /* max(0, f + B - W + p2p) */
        fill = (double)(x->p - 1) * per_rank * fmax(0.0, bi->split_fbw);
    bp->lb_time = (double)mb * round + fill;
}

double mp_search_expert_bytes(const mp_config *base, bound_scratch *bs, const bound_parts *bp,
                              const cand *x)
{
    if (!mp_model_is_moe(&base->model) || x->ep <= 0)
        return 0.0;
    /* the local experts of the fewest MoE blocks, whose optimizer states
     * shard over edp (which exceeds d*c when etp < tp) */
    mp_config *ec = &bs->experts;
    ec->parallel = bs->sharded.parallel;
    ec->parallel.ep = x->ep;
    ec->parallel.etp = x->etp;
    mp_config *eb = &bs->sharded;
    mp_parallel d_c = eb->parallel;
    eb->parallel.dp = mp_parallel_edp(&ec->parallel);
    eb->parallel.cp = 1;
    (void)bp; /* the same for every block: the caller counts the blocks */
    double bytes = mp_moe_local_expert_params(ec) * mp_static_bytes_per_param(eb);
    eb->parallel = d_c;
    return bytes;
}

void mp_search_bounds_set(const mp_config *base, const bound_parts *bp, double expert_bytes,
                          cand *x)
{
    x->lb_time = bp->lb_time;
    /* The estimate's rank 0 holds at least these bytes: its static bytes
     * and stashed activations are bounded above (bp), and its "other" is
     * runtime_reserve plus the allocator's fragmentation of its stash plus
     * terms that are never negative (the edges' and p2p buffers, cost.c),
     * where allocator_fragmentation is at least 0 (hw.c) and grows with the
     * stash, so fragmentation times the bounded stash is below the rank's
     * own (stash_extra: only where rank 0's blocks are its own count, not
     * an average, with the routed tokens' activations, routed_act_floor).
     * The peak is the most loaded rank's: at least rank 0's, so a candidate
     * this exceeds the capacity for cannot fit. */
    double rank0 = bp->alt0 ? bp->alt_static + bp->alt_moe_min * expert_bytes + bp->alt_stash +
                                  base->hw.runtime_reserve
                            : bp->static_bytes + bp->moe_min * expert_bytes + bp->stash +
                                  bp->stash_extra + base->hw.runtime_reserve;
    /* The busiest rank in MoE blocks: the p ranks hold the M MoE blocks
     * (DualPipe: each twice), so one holds M/p or more, each with its
     * local experts' bytes and at least the fewest dense bytes of a block,
     * beside the runtime's reserve (its stash and the rest are >= 0). Under
     * a deep pipeline rank 0 may hold no MoE block at all (DeepSeek-V3's
     * first three are dense, its embedding on rank 0), and this bound is
     * then the tighter: it pruned ~40% of what was costed for DeepSeek-V3
     * on 2048 H100s and found not to fit (pp 32 with ep 4: 1.4 TB). */
    double busiest = bp->moe_avg * (expert_bytes + bp->block_static) + base->hw.runtime_reserve;
    /* and the other ranks whose blocks are counted, each its own
     * (bp->rank_a, mp_search_bound_parts) */
    for (int j = 0; j < bp->n_ranks; j++)
        rank0 = fmax(rank0, bp->rank_a[j] + bp->rank_moe[j] * expert_bytes);
    x->lb_mem = fmax(rank0, busiest);
}

mp_status mp_search_check_bounds(const mp_search_options *opt, int64_t *checked,
                                 int64_t *mem_violations, int64_t *time_violations,
                                 double *worst_mem_ratio, mp_error *err)
{
    mp_search_counts counts = {0};
    enum_ctx e;
    mp_search_init_ctx(&e, opt, &counts);
    e.keep_all = true;
    mp_search_enumerate(&e);
    *checked = *mem_violations = *time_violations = 0;
    *worst_mem_ratio = 0;
    mp_status st = MP_OK;
    if (e.keep.oom || e.bc.oom) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < e.keep.n; i++) {
        /* a selective candidate standing for every module set is bounded
         * for each (the least of their bounds): each is checked */
        const cand *xi = &e.keep.v[i];
        bool all = xi->rc == MP_RECOMPUTE_SELECTIVE && xi->rcm == MP_SEARCH_RCM_ANY;
        for (int k = 0; k < (all ? e.bc.n_sel : 1); k++) {
            cand x = *xi;
            if (all) x.rcm = e.bc.sel_mask[k];
            mp_config cfg;
            mp_search_cand_apply(&opt->base, &x, &cfg);
            mp_estimate est;
            mp_error e2;
            if (mp_estimate_config(&cfg, NULL, &est, &e2) != MP_OK) continue;
            (*checked)++;
            double r = xi->lb_mem / est.memory.peak;
            if (r > *worst_mem_ratio) *worst_mem_ratio = r;
            if (xi->lb_mem > est.memory.peak * (1 + 1e-12)) (*mem_violations)++;
            if (xi->lb_time > est.time.step * (1 + 1e-12)) (*time_violations)++;
            /* and each set's own memory bound, which the costing prunes
             * its sets by (search_rank.c cost_sets) */
            if (all && mp_search_mem_bound(&e, &x) > est.memory.peak * (1 + 1e-12))
                (*mem_violations)++;
            const block_info *bi = mp_search_block_get(&e.bc, x.t, x.c, x.b, x.sp);
            if (bi && mp_search_expert_time_bound(&opt->base, bi, xi,
                                                  mp_search_expert_comm(&cfg)) >
                          est.time.step * (1 + 1e-12))
                (*time_violations)++;
            /* and the blocks' floor the costing prunes by (mp_estimate_step_floor) */
            double floor;
            if (mp_estimate_step_floor(&cfg, NULL, &floor, &e2) == MP_OK &&
                floor > est.time.step * (1 + 1e-12))
                (*time_violations)++;
        }
    }
done:
    mp_search_free_ctx(&e);
    return st;
}
