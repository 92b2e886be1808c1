/* search_enumerate.c — the candidates of a search (search.h): every setting
 * Megatron-Core exposes, refused by its rules with a count by reason, each
 * given its bounds and kept unless over memory (docs/design.md §5). */
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

static const char *const reject_keys[MP_REJECT_COUNT] = {
    "tp_heads", "tp_domain", "cp_seq", "layers", "batch", "interleave", "sp", "cp_a2a_heads", "other", "memory"};
static const char *const reject_phrases[MP_REJECT_COUNT] = {
    "tp does not divide the heads",
    "tp beyond the scale-up domain",
    "seq does not split into 2*cp chunks",
    "pp*vpp does not divide the layers",
    "global batch not a multiple of micro_batch*dp",
    "interleaving needs microbatches % pp == 0",
    "sp needs seq/cp divisible by tp",
    "a2a CP: tp*cp does not divide the heads",
    "refused by the configuration check",
    "does not fit in memory"};

const char *mp_reject_key(mp_reject_reason r)
{
    return r < MP_REJECT_COUNT ? reject_keys[r] : "unknown";
}
const char *mp_reject_phrase(mp_reject_reason r)
{
    return r < MP_REJECT_COUNT ? reject_phrases[r] : "unknown";
}

void mp_search_cand_push(cand_vec *cv, const cand *x)
{
    if (cv->oom) return;
    if (cv->n == cv->cap) {
        size_t cap = cv->cap ? cv->cap * 2 : 4096;
        cand *p = realloc(cv->v, sizeof *p * cap);
        if (!p) {
            cv->oom = true;
            return;
        }
        cv->v = p;
        cv->cap = cap;
    }
    cv->v[cv->n++] = *x;
}

void mp_search_apply(const mp_config *base, const mp_search_cand_view *x, mp_config *out)
{
    *out = *base;
    mp_parallel *p = &out->parallel;
    p->tp = x->t;
    p->cp = x->c;
    p->pp = x->p;
    p->vpp = x->v;
    p->dp = x->d;
    p->micro_batch = x->b;
    p->sp = x->sp;
    p->recompute = (mp_recompute)x->rc;
    /* selective's modules: the candidate's set (0: base's own) */
    if (x->rc == MP_RECOMPUTE_SELECTIVE && x->rcm && x->rcm != MP_SEARCH_RCM_ANY)
        p->recompute_modules = x->rcm;
    /* dist_opt holds the sharding: 0-3 the ZeRO stage, 4 ZeRO-3 as HSDP */
    p->dist_opt = x->dist_opt >= 1;
    p->zero = x->dist_opt >= 2 ? (x->dist_opt >= 3 ? 3 : 2) : 0;
    p->hsdp = x->dist_opt == 4;
    p->schedule = (mp_schedule_kind)x->sched;
    p->dp_overlap = x->dp_overlap;
    p->tp_overlap = x->tp_overlap;
    /* Megatron-LM runs interleaving at pp 2 only with its p2p overlapped (it
     * refuses --no-overlap-p2p-communication below pp 3: two chunks' sends
     * between the same two ranks in one batch), so such a candidate is
     * costed as it would run whatever base says */
    if (p->schedule == MP_SCHED_INTERLEAVED && p->pp == 2 && p->vpp > 1)
        p->p2p_overlap = true;
    p->ep = x->ep;
    p->etp = x->etp;
    p->dispatcher = (mp_dispatcher)x->dispatcher;
    /* base's CP exchange (--cp-comm-type) is the one of every candidate
     * with cp > 1; without context parallelism there is none */
    if (p->cp < 2)
        p->cp_comm_type = MP_CP_P2P;
    /* stages Megatron's default split cannot make: the account-for flags or a
     * proposed explicit layout, which every part then splits by */
    mp_search_set_split(base, p->pp, p->vpp, p);
}

bool mp_search_needs_account(const mp_config *base, int64_t pp, int64_t vpp, bool *e, bool *l)
{
    int64_t L = base->model.layers, n = pp * vpp;
    *e = *l = false;
    if (mp_parallel_split_given(&base->parallel) || base->model.arch == MP_ARCH_T5 || vpp < 2 ||
        pp < 2 || n > L + 2 || (n <= L && mp_stage_split_ok(L, pp, vpp)))
        return false;
    if (n == L + 2) /* (L + 2) % n == 0 with n < L + 2 is the default split */
        *e = *l = true;
    else if ((L + 1) % n == 0)
        *l = true; /* the head outweighs the embedding's lookup */
    return *e || *l;
}

bool mp_search_needs_layout(const mp_config *base, int64_t pp, int64_t vpp)
{
    int64_t L = base->model.layers;
    bool e, l;
    return !mp_parallel_split_given(&base->parallel) && base->model.arch != MP_ARCH_T5 &&
           pp * vpp <= L && !mp_stage_split_ok(L, pp, vpp) &&
           !mp_search_needs_account(base, pp, vpp, &e, &l);
}

void mp_search_set_split(const mp_config *base, int64_t pp, int64_t vpp, mp_parallel *p)
{
    bool e, l;
    /* a V schedule's own default split (mp_v_stage_blocks): Megatron's
     * layouts and flags split in its interleaved order, which a V refuses */
    if (!mp_parallel_split_given(&base->parallel) &&
        mp_v_split_default(&base->model, p->schedule, pp, vpp))
        return;
    if (mp_search_needs_account(base, pp, vpp, &e, &l)) {
        p->account_for_embedding = e;
        p->account_for_loss = l;
    } else if (mp_search_needs_layout(base, pp, vpp))
        mp_layout_propose(base->model.layers, pp * vpp, p->pipeline_layout,
                          sizeof p->pipeline_layout);
}

void mp_search_cand_apply(const mp_config *base, const cand *x, mp_config *out)
{
    mp_search_cand_view v = {x->t, x->c, x->p, x->v, x->b, x->d, x->sp, x->rc,
                             x->dist_opt, x->sched, x->dp_overlap, x->tp_overlap,
                             x->ep, x->etp, x->disp, x->rcm};
    mp_search_apply(base, &v, out);
}

/* ---- selective recompute's module sets ------------------------------------ */

/* The modules Megatron-Core's selective recompute accepts for c, as a mask
 * (transformer_config.py __post_init__ and its MoE checks; megaplan's own
 * mp_config_check_recompute refuses a module the model has nothing of):
 * core_attn always; layernorm where some norm is a module of its own
 * (below), and it and moe_act not under FP8's delayed scaling; mlp where
 * some block is dense; mla_up_proj with latent
 * attention; moe_act for MoE (with grouped GEMMs, which megaplan's experts
 * are); shared_experts with shared experts not overlapped
 * (--moe-shared-expert-overlap). None beyond core_attn where CUDA graphs
 * capture a scope (a graphed module may not be recomputed in several of
 * Megatron's cases). moe, which the search leaves out (below), is not
 * among them. */
static uint32_t selective_modules_allowed(const mp_config *c)
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    uint32_t ok = 1u << MP_RCM_CORE_ATTN;
    if (p->cuda_graph_scope) return ok;
    bool delayed = mp_fp8_on(c) && c->training.fp8_recipe == MP_FP8_DELAYED;
    int64_t L = mp_model_blocks(m), moe_blocks = 0;
    for (int64_t i = 0; i < L; i++) moe_blocks += mp_model_block_is_moe(m, i);
    bool moe = mp_model_is_moe(m) && moe_blocks > 0;
    /* layernorm only where some norm is a module of its own (memory.c,
     * mp_block_checkpointed_norms): latent attention's input norm, MoE
     * blocks' pre-MLP norm; elsewhere Megatron-Core runs it as a no-op */
    if (!delayed && (moe || mp_model_is_mla(m))) ok |= 1u << MP_RCM_LAYERNORM;
    if (!moe || moe_blocks < L) ok |= 1u << MP_RCM_MLP;
    if (mp_model_is_mla(m)) ok |= 1u << MP_RCM_MLA_UP_PROJ;
    if (moe) {
        if (!delayed) ok |= 1u << MP_RCM_MOE_ACT;
        if (m->moe.shared_experts > 0 && !p->shared_expert_overlap)
            ok |= 1u << MP_RCM_SHARED_EXPERTS;
    }
    return ok;
}

int mp_search_selective_sets(const mp_config *base, uint8_t out[MP_SEARCH_SEL_MAX])
{
    int n = 0;
    out[n++] = (uint8_t)base->parallel.recompute_modules; /* 0: Megatron's default */
    if (base->parallel.recompute_modules) return n; /* given: fixed */
    uint32_t ok = selective_modules_allowed(base);
    const uint32_t LN = 1u << MP_RCM_LAYERNORM, ACT = 1u << MP_RCM_MOE_ACT,
                   MLP = 1u << MP_RCM_MLP, UP = 1u << MP_RCM_MLA_UP_PROJ,
                   SHARED = 1u << MP_RCM_SHARED_EXPERTS, ATTN = 1u << MP_RCM_CORE_ATTN;
    /* a ladder of what each added module re-runs (docs/design.md §5): the
     * elementwise modules (the norms, the experts' activation: memory-bound
     * kernels only), the GEMMs outside the attention core and the routed
     * experts (the dense MLP, MLA's up-projections, the shared experts),
     * and both. The attention core joins only without a fused attention
     * kernel: under flash it frees its softmax statistics alone (4 bytes a
     * head and token) for its whole forward again, which Megatron-Core's
     * own check warns is not needed. The whole MoE layer (moe) is not
     * searched: it re-runs the dispatch and combine all-to-all and the
     * routed GEMMs, and what it frees beyond moe_act is the routed tokens'
     * other bytes, which the memory bound cannot see without the expert
     * split (search_bounds.c): it would let most of DeepSeek-V3's space
     * through to costing; --recompute-modules moe costs it, and full
     * recompute frees those bytes too. */
    uint32_t add = base->hw.flash_attention ? 0 : ATTN;
    uint32_t elem = (LN | ACT) & ok, gemm = (MLP | UP | SHARED) & ok;
    uint32_t ladder[3] = {elem, gemm, elem | gemm};
    for (int i = 0; i < 3; i++) {
        uint32_t mask = ladder[i] ? ladder[i] | add : 0;
        bool dup = !mask || mask == ATTN; /* (ATTN alone: the default, set 0) */
        for (int j = 1; j < n && !dup; j++) dup = out[j] == mask;
        if (!dup && n < MP_SEARCH_SEL_MAX) out[n++] = (uint8_t)mask;
    }
    /* Of those, the ones on the time-memory front of the model's blocks at
     * one GPU and a micro-batch of one: a set another frees at least as
     * many bytes as for no more recompute (the cost model's own numbers,
     * docs/cost-model.md) is left out. Under flash attention, layernorm
     * (where it checkpoints anything) drops the default so: a norm's output
     * (2 bytes a hidden unit and token) outweighs the softmax statistics (4
     * bytes a head and token), and a memory-bound norm costs less than the
     * attention core's forward. */
    mp_config c = *base;
    mp_parallel *p = &c.parallel;
    p->tp = p->cp = p->pp = p->vpp = p->micro_batch = 1;
    p->dp = base->training.gpus;
    p->sp = false;
    p->ep = p->etp = mp_model_is_moe(&c.model) ? 1 : 0;
    p->recompute = MP_RECOMPUTE_SELECTIVE;
    const mp_model *m = &c.model;
    int64_t L = mp_model_blocks(m), count[2] = {0, 0};
    mp_block_shape bs[2];
    mp_block_time bt[2];
    for (int64_t i = 1; i <= L; i++) {
        int k = mp_model_block_is_moe(m, i - 1) ? 1 : 0;
        if (!count[k]++) {
            mp_block_shape_of(m, c.training.seq, i, &bs[k]);
            mp_block_time_of(&c, &bs[k], &bt[k]);
        }
    }
    double rec[MP_SEARCH_SEL_MAX], freed[MP_SEARCH_SEL_MAX];
    for (int i = 0; i < n; i++) {
        uint32_t mask = out[i] ? out[i] : ATTN;
        rec[i] = freed[i] = 0.0;
        for (int k = 0; k < 2; k++)
            if (count[k]) {
                rec[i] += (double)count[k] * mp_block_modules_time(&bt[k], mask);
                freed[i] += (double)count[k] * mp_block_modules_act_bytes(&c, &bs[k], mask);
            }
    }
    int kept = 0;
    uint8_t front[MP_SEARCH_SEL_MAX];
    for (int i = 0; i < n; i++) {
        bool dominated = false;
        for (int j = 0; j < n && !dominated; j++)
            dominated = j != i && rec[j] <= rec[i] && freed[j] >= freed[i] &&
                        (rec[j] < rec[i] || freed[j] > freed[i] || j < i);
        if (!dominated) front[kept++] = out[i];
    }
    memcpy(out, front, (size_t)kept);
    return kept;
}

static int divisors(int64_t n, int64_t *out, int max)
{
    int k = 0;
    for (int64_t i = 1; i * i <= n && k < max; i++) {
        if (n % i) continue;
        out[k++] = i;
        if (i != n / i && k < max) out[k++] = n / i;
    }
    /* sort ascending (few) */
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int64_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return k;
}

#define MAX_DIV 4096

static bool fixed(const enum_ctx *e, uint32_t bit) { return (e->opt->fixed & bit) != 0; }

static void refuse(enum_ctx *e, mp_reject_reason r, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void refuse(enum_ctx *e, mp_reject_reason r, const char *field, const char *fmt, ...)
{
    e->counts->rejected[r]++;
    if (!e->have_refusal) {
        e->have_refusal = true;
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        mp_error_set(&e->first_refusal, MP_EINPUT, NULL, 0, 0, field, "%s", msg);
    }
}

/* Whether x's values are in the sets --fix KEY=A|B allowed (search.h). */
static bool allowed(const enum_ctx *e, const cand *x)
{
    const int64_t value[MP_FIX_DIMS] = {x->t, x->sp, x->p, x->v, x->c, x->d, x->b, x->rc,
                                        x->dist_opt, x->sched, x->dp_overlap, x->tp_overlap};
    for (int i = 0; i < MP_FIX_DIMS; i++) {
        const mp_search_set *s = &e->opt->allowed[i];
        bool in = s->n == 0;
        for (int j = 0; j < s->n && !in; j++) in = s->v[j] == value[i];
        if (!in) return false;
    }
    return true;
}

/* Keeps x among the CLOSEST_KEPT memory-pruned candidates with the smallest
 * bounds: once full, x replaces the first with the largest when below it. */
static void keep_closest(enum_ctx *e, const cand *x)
{
    cand_vec *cl = &e->closest;
    if (cl->n < CLOSEST_KEPT) {
        mp_search_cand_push(cl, x);
        if (cl->n < CLOSEST_KEPT) return;
    } else if (x->lb_mem < cl->v[e->closest_worst].lb_mem) {
        cl->v[e->closest_worst] = *x;
    } else {
        return;
    }
    /* the list changed: find its worst again (kept, not rescanned per
     * candidate: a million are pruned by memory in a large search) */
    size_t worst = 0;
    for (size_t i = 1; i < cl->n; i++)
        if (cl->v[i].lb_mem > cl->v[worst].lb_mem) worst = i;
    e->closest_worst = worst;
}

/* Whether the candidate limit is reached (and the enumeration stops). */
static bool over_limit(enum_ctx *e)
{
    if (e->counts->considered >= (e->base->model.moe.experts > 0 ? MAX_CANDIDATES_MOE
                                                                  : MAX_CANDIDATES))
        e->too_many = true;
    return e->too_many;
}

/* x with its bounds set: counted, and kept unless over memory. */
static void consider_bounded(enum_ctx *e, const cand *x)
{
    e->counts->considered++;
    if (x->lb_mem > e->base->hw.memory && !e->keep_all) {
        e->counts->pruned_memory++;
        keep_closest(e, x); /* a handful of the least-over ones for the "closest" answer */
        return;
    }
    mp_search_cand_push(&e->keep, x);
}

/* x's bound parts (search_parts.h); false when out of memory. */
static bool bound_parts_of(enum_ctx *e, const cand *x, bound_parts *bp)
{
    const block_info *bi = mp_search_block_get(&e->bc, x->t, x->c, x->b, x->sp);
    if (!bi) return false;
    mp_search_bound_parts(e->base, bi, e->block_params_min, e->emb_params, &e->scratch, x, bp);
    return true;
}

double mp_search_mem_bound(enum_ctx *e, const cand *x)
{
    bound_parts bp;
    if (!bound_parts_of(e, x, &bp))
        return 0.0; /* out of memory: no bound rather than a wrong one */
    double expert_bytes = mp_search_expert_bytes(e->base, &e->scratch, &bp, x);
    cand y = *x;
    mp_search_bounds_set(e->base, &bp, expert_bytes, &y);
    return y.lb_mem;
}

/* A dense model's candidate (ep = etp = 0). */
static void consider(enum_ctx *e, cand *x)
{
    bound_parts bp;
    if (!allowed(e, x) || over_limit(e) || !bound_parts_of(e, x, &bp))
        return;
    mp_search_bounds_set(e->base, &bp, 0.0, x);
    consider_bounded(e, x);
}

/* The innermost dimensions for fixed (t, c, p, v, d, b). */
/* MoE: every expert split of the candidate's stage ranks (t*c*d of them,
 * Megatron-Core's folding): ep a divisor of the experts, etp 1 or tp, and
 * each dispatcher; mp_config_check refuses what Megatron would. A dense
 * model's candidate passes through once (ep = etp = 0). The bounds' parts
 * are the same for all of them (computed once, when the first is counted),
 * and the expert weights' bytes for each (ep, etp). */
static void consider_experts(enum_ctx *e, cand *x)
{
    const mp_model *m = &e->base->model;
    const mp_parallel *fp = &e->base->parallel;
    if (!mp_model_is_moe(m)) {
        x->ep = x->etp = 0;
        x->disp = 0;
        consider(e, x);
        return;
    }
    if (!allowed(e, x)) /* the --fix sets do not name the expert settings */
        return;
    int64_t ranks = (int64_t)x->t * x->c * x->d;
    int32_t etps[2] = {1, x->t};
    int net = x->t > 1 ? 2 : 1;
    if (fixed(e, MP_FIX_ETP)) {
        etps[0] = (int32_t)mp_parallel_etp(fp);
        net = 1;
    }
    uint8_t disps[MP_DISPATCH_COUNT];
    int nd = 0;
    if (fixed(e, MP_FIX_DISPATCHER))
        disps[nd++] = (uint8_t)fp->dispatcher;
    else
        for (int d = 0; d < MP_DISPATCH_COUNT; d++) disps[nd++] = (uint8_t)d;
    bound_parts bp;
    bool have_parts = false;
    for (int ie = 0; ie < e->n_expert_degrees && !e->too_many; ie++) {
        int64_t ep = e->expert_degrees[ie];
        if (fixed(e, MP_FIX_EP) && ep != mp_parallel_ep(fp))
            continue;
        for (int i = 0; i < net; i++) {
            if (ranks % (ep * etps[i]) || m->moe.expert_ffn % etps[i])
                continue;
            double expert_bytes = -1.0; /* not yet computed */
            for (int k = 0; k < nd; k++) {
                /* one GPU per expert group: the dispatchers coincide */
                if (ep * etps[i] == 1 && disps[k] != MP_DISPATCH_ALLTOALL)
                    continue;
                /* flex is weighed where the expert group leaves the scale-up
                 * domain, where its one copy per remote node pays most, and
                 * there instead of alltoall, which it dominates (no more
                 * copies on either link, fewer peers: moe_dispatch.c), so
                 * the candidates stay as many; inside a domain its per-GPU
                 * dedupe is a smaller gain (--dispatcher flex costs it
                 * everywhere) */
                if (!fixed(e, MP_FIX_DISPATCHER) &&
                    (disps[k] == MP_DISPATCH_FLEX) !=
                        ((double)(ep * etps[i]) > mp_scale_up_gpus(&e->base->hw)) &&
                    disps[k] != MP_DISPATCH_ALLGATHER)
                    continue;
                if (over_limit(e)) return;
                if (!have_parts && !(have_parts = bound_parts_of(e, x, &bp))) return;
                x->ep = (int32_t)ep;
                x->etp = etps[i];
                x->disp = disps[k];
                if (expert_bytes < 0.0 && e->expert_bytes) {
                    /* the cache of (t, c, d), by sharding, degree and etp */
                    if (e->eb_t != x->t || e->eb_c != x->c || e->eb_d != x->d) {
                        for (int j = 0; j < 10 * e->n_expert_degrees; j++)
                            e->expert_bytes[j] = -1.0;
                        e->eb_t = x->t;
                        e->eb_c = x->c;
                        e->eb_d = x->d;
                    }
                    double *slot = &e->expert_bytes[(x->dist_opt * e->n_expert_degrees + ie) * 2 + i];
                    if (*slot < 0.0)
                        *slot = mp_search_expert_bytes(e->base, &e->scratch, &bp, x);
                    expert_bytes = *slot;
                }
                if (expert_bytes < 0.0)
                    expert_bytes = mp_search_expert_bytes(e->base, &e->scratch, &bp, x);
                mp_search_bounds_set(e->base, &bp, expert_bytes, x);
                consider_bounded(e, x);
            }
        }
    }
}

/* The sharding choices of candidate x into dos (0 none, 1 the optimizer:
 * Megatron's distributed optimizer, 2 and 3 ZeRO-2 / ZeRO-3-FSDP with no
 * pipeline, 4 ZeRO-3 as HSDP); 0 when the fixed sharding rules x out. */
static int sharding_choices(const enum_ctx *e, const cand *x, uint8_t dos[5])
{
    const mp_parallel *fp = &e->base->parallel;
    int ndo = 0;
    bool shard_ok = x->d * x->c > 1, no_pipe = x->p == 1;
    /* HSDP differs from ZeRO-3 only when the DP ranks span scale-up domains */
    int64_t dom = (int64_t)mp_scale_up_gpus(&e->base->hw);
    bool hsdp_ok = (int64_t)x->t * x->d * x->c > dom && (int64_t)x->t * 2 <= dom;
    if (fixed(e, MP_FIX_HSDP) && fp->hsdp) {
        if (!no_pipe || !shard_ok || !hsdp_ok) return 0;
        dos[ndo++] = 4;
    } else if (fixed(e, MP_FIX_ZERO) && fp->zero >= 2) {
        if (!no_pipe || !shard_ok) return 0;
        dos[ndo++] = (uint8_t)fp->zero;
        if (fp->zero == 3 && hsdp_ok && !fixed(e, MP_FIX_HSDP)) dos[ndo++] = 4;
    } else if (fixed(e, MP_FIX_ZERO) && fp->zero == 1) {
        dos[ndo++] = 1;
    } else if (fixed(e, MP_FIX_DIST_OPT)) {
        dos[ndo++] = fp->dist_opt;
        if (fp->dist_opt && !fixed(e, MP_FIX_ZERO) && e->opt->zero_sharding && no_pipe && shard_ok) {
            dos[ndo++] = 2;
            dos[ndo++] = 3;
            if (hsdp_ok && !fixed(e, MP_FIX_HSDP)) dos[ndo++] = 4;
        }
    } else {
        dos[ndo++] = 0;
        if (shard_ok) dos[ndo++] = 1;
        if (shard_ok && no_pipe && !fixed(e, MP_FIX_ZERO) && e->opt->zero_sharding) {
            dos[ndo++] = 2;
            dos[ndo++] = 3;
            if (hsdp_ok && !fixed(e, MP_FIX_HSDP)) dos[ndo++] = 4;
        }
    }
    if (e->base->training.optimizer_moments != MP_DTYPE_FP32) {
        /* 16-bit moments are Megatron-Core's precision-aware optimizer,
         * which runs with its distributed optimizer only (ZeRO-1) */
        int kept = 0;
        for (int i = 0; i < ndo; i++)
            if (dos[i] == 1) dos[kept++] = 1;
        ndo = kept;
    }
    return ndo;
}

/* DualPipe pairs rank r with pp-1-r and feeds half the micro-batches from
 * each end: an even pp, an even number of micro-batches, at least 2 pp. */
static bool dualpipe_fits(int64_t p, int64_t mbs)
{
    return p >= 2 && p % 2 == 0 && mbs % 2 == 0 && mbs >= 2 * p;
}

/* Whether vpp v on p ranks is searched for the V schedules alone: their
 * own default split (mp_v_split_default) where Megatron's flags have none
 * and no vpp was fixed (a fixed one is searched with a proposed layout),
 * and a V may run (not --runtime megatron; the fixed schedule a V). */
static bool v_only_split(const enum_ctx *e, int64_t p, int64_t v)
{
    const mp_config *b = e->base;
    int64_t L = b->model.layers;
    if (fixed(e, MP_FIX_VPP) || mp_parallel_split_given(&b->parallel) || v != 2 ||
        e->opt->megatron_runtime || L % v == 0 || (L + 1) % (p * v) == 0)
        return false;
    if (fixed(e, MP_FIX_SCHEDULE) && !mp_schedule_is_v(b->parallel.schedule))
        return false;
    return mp_v_split_default(&b->model, MP_SCHED_ZBV, p, v);
}

/* The schedules of candidate x into scheds; 0 when the fixed one rules x's v out. */
static int schedule_choices(const enum_ctx *e, const cand *x, uint8_t scheds[MP_SCHED_COUNT])
{
    const mp_parallel *fp = &e->base->parallel;
    int nsc = 0;
    int64_t mbs = e->base->training.global_batch / x->d / x->b;
    if (fixed(e, MP_FIX_SCHEDULE)) {
        bool chunked = fp->schedule == MP_SCHED_INTERLEAVED || mp_schedule_is_v(fp->schedule);
        if (chunked != (x->v > 1)) return 0; /* the fixed schedule rules this v out */
        if (mp_schedule_is_v(fp->schedule) && x->v != 2) return 0;
        if (fp->schedule == MP_SCHED_DUALPIPEV && mbs < 2 * x->p) return 0;
        if (fp->schedule == MP_SCHED_DUALPIPE && !dualpipe_fits(x->p, mbs)) return 0;
        scheds[nsc++] = (uint8_t)fp->schedule;
    } else if (x->v > 1) {
        if (!v_only_split(e, x->p, x->v)) scheds[nsc++] = MP_SCHED_INTERLEAVED;
        /* the V schedules (two chunks per rank) run outside Megatron-LM
         * only: every search but --runtime megatron weighs them, ranked
         * by the same estimate (ZB-V: no bubble at 1f1b's activation
         * memory, twice the p2p; DualPipeV: m >= 2p) */
        if (x->v == 2 && !e->opt->megatron_runtime) {
            /* (ZB-V also on the V's own split: with the orders that keep
             * ZB-V's warm-up lead its simulated pipeline is within 7% of
             * the closed form there, tests/sim/test_vorder.c; before, its
             * order ran up to 5.8x over and search weighed DualPipeV alone) */
            scheds[nsc++] = MP_SCHED_ZBV;
            if (mbs >= 2 * x->p) scheds[nsc++] = MP_SCHED_DUALPIPEV;
        }
    } else if (x->p == 1) {
        scheds[nsc++] = MP_SCHED_1F1B; /* no pipeline: the schedules coincide */
    } else {
        scheds[nsc++] = MP_SCHED_1F1B;
        scheds[nsc++] = MP_SCHED_GPIPE;
        scheds[nsc++] = MP_SCHED_ZBH1;
        /* DualPipe likewise: outside Megatron-LM (twice the parameters) */
        if (!e->opt->megatron_runtime && dualpipe_fits(x->p, mbs))
            scheds[nsc++] = MP_SCHED_DUALPIPE;
    }
    return nsc;
}

static void enumerate_inner(enum_ctx *e, cand *x)
{
    if (e->too_many)
        return;
    const mp_parallel *fp = &e->base->parallel;
    int64_t seq = e->base->training.seq;
    bool sps[2];
    int nsp = 0;
    if (fixed(e, MP_FIX_SP)) {
        sps[nsp++] = fp->sp;
    } else if (x->t > 1 && mp_model_is_moe(&e->base->model)) {
        /* Megatron-Core refuses MoE with tensor parallelism but without SP
         * (mp_config_check): the cost model would refuse every such
         * candidate (a third of what DeepSeek-V3 on 2048 GPUs costed) */
        refuse(e, MP_REJECT_OTHER, "sp",
               "mixture of experts with tp > 1 needs sequence parallelism (sp)");
        sps[nsp++] = true;
    } else {
        sps[nsp++] = false;
        if (x->t > 1) sps[nsp++] = true;
    }
    /* the recompute choices: none, full, and selective of each module set */
    uint8_t rcs[MP_RECOMPUTE_COUNT], rcms[MP_RECOMPUTE_COUNT];
    int nrc = 0;
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++) {
        if (fixed(e, MP_FIX_RECOMPUTE) && r != (int)fp->recompute) continue;
        /* selective: one candidate for all its module sets (the ranking
         * costs each), so the sets do not multiply the candidates */
        rcs[nrc] = (uint8_t)r;
        rcms[nrc++] = r != MP_RECOMPUTE_SELECTIVE ? 0
                      : e->bc.n_sel > 1           ? MP_SEARCH_RCM_ANY
                                                  : e->bc.sel_mask[0];
    }
    uint8_t dos[5], scheds[MP_SCHED_COUNT];
    int ndo = sharding_choices(e, x, dos), nsc = schedule_choices(e, x, scheds);
    if (ndo == 0 || nsc == 0)
        return;
    for (int i = 0; i < nsp; i++) {
        x->sp = sps[i];
        if (x->sp && x->t < 2) {
            /* it said "sp needs seq/cp (512) divisible by tp=1" */
            refuse(e, MP_REJECT_SP, "sp", "sequence parallelism needs tp > 1 (got tp=1)");
            continue;
        }
        if (x->sp && (seq / x->c) % x->t) {
            refuse(e, MP_REJECT_SP, "sp", "sp needs seq/cp (%lld) divisible by tp=%lld",
                   (long long)(seq / x->c), (long long)x->t);
            continue;
        }
        bool tpo = fixed(e, MP_FIX_TP_OVERLAP) ? fp->tp_overlap : false;
        if (tpo && !x->sp) continue;
        x->tp_overlap = tpo;
        for (int r = 0; r < nrc; r++) {
            x->rc = rcs[r];
            x->rcm = rcms[r];
            for (int k = 0; k < ndo; k++) {
                x->dist_opt = dos[k];
                x->dp_overlap = fixed(e, MP_FIX_DP_OVERLAP) ? fp->dp_overlap : true;
                for (int s = 0; s < nsc; s++) {
                    x->sched = scheds[s];
                    consider_experts(e, x);
                }
            }
        }
    }
}

/* The divisor lists of the loops below, one per level (MAX_DIV each). */
typedef struct levels {
    int64_t *t, *c, *p, *v, *b;
} levels;

/* The micro-batch sizes b for fixed (t, c, p, v, d). */
static void enumerate_micro_batch(enum_ctx *e, const int64_t *bv, int nb, cand *x)
{
    int64_t gb = e->base->training.global_batch;
    for (int ib = 0; ib < nb && !e->too_many; ib++) {
        x->b = (int32_t)bv[ib];
        if ((gb / x->d) % x->b) {
            refuse(e, MP_REJECT_BATCH, "micro_batch",
                   "global batch %lld is not a multiple of micro_batch*dp = %lld",
                   (long long)gb, (long long)x->b * x->d);
            continue;
        }
        int64_t mbs = gb / x->d / x->b;
        if (x->v > 1 && mbs % x->p) {
            refuse(e, MP_REJECT_INTERLEAVE, "global_batch",
                   "interleaving needs microbatches (%lld) a multiple of pp=%lld",
                   (long long)mbs, (long long)x->p);
            continue;
        }
        /* Memory's lower bound grows with b for every inner
         * choice (activations scale with b; in-flight chunks
         * times b, min(p, m)*b, never shrink), so once every
         * candidate of one b is over memory no larger b fits:
         * stop (global batches like 15360 have dozens of
         * micro-batch sizes, each times the inner settings) */
        size_t kept = e->keep.n;
        int64_t over = e->counts->pruned_memory;
        enumerate_inner(e, x);
        if (!e->keep_all && e->keep.n == kept && e->counts->pruned_memory > over)
            return;
    }
}

/* The virtual stages v, then the micro-batch sizes, for fixed (t, c, p, d). */
static void enumerate_vpp(enum_ctx *e, const levels *lv, cand *x)
{
    const mp_parallel *fp = &e->base->parallel;
    int64_t L = e->base->model.layers, gb = e->base->training.global_batch;
    int64_t *vv = lv->v, *bv = lv->b;
    int nv = 0;
    if (fixed(e, MP_FIX_VPP)) {
        vv[nv++] = fp->vpp;
    } else {
        vv[nv++] = 1;
        /* the splits Megatron's flags make: even, counting the embedding
         * and/or the loss as layers (--account-for-*-in-pipeline-split,
         * up to L + 2 stages, the first and last chunk then holding those
         * alone), or its first/last-stage flags (mp_vpp_flag_split). A vpp
         * that needs a layout is searched when fixed (--fix vpp=N proposes
         * one): searching every such vpp would cost half again the
         * candidates. */
        if (x->p > 1)
            for (int64_t v = 2; v * x->p <= L + 2 && nv < MAX_DIV; v++) {
                int64_t n = x->p * v;
                /* the flags' split exists exactly when vpp divides L (mp_stage_split_ok);
                 * vpp 2 also for the V schedules' own split (v_only_split) */
                if (L % n == 0 || (L + 2) % n == 0 || (L + 1) % n == 0 ||
                    (n <= L && L % v == 0) || v_only_split(e, x->p, v))
                    vv[nv++] = v;
            }
    }
    int nb = fixed(e, MP_FIX_MICRO_BATCH) ? (bv[0] = fp->micro_batch, 1)
                                          : divisors(gb / x->d, bv, MAX_DIV);
    for (int iv = 0; iv < nv && !e->too_many; iv++) {
        x->v = (int32_t)vv[iv];
        if (x->v > 1 && x->p < 2) {
            refuse(e, MP_REJECT_OTHER, "vpp",
                   "virtual stages (vpp=%lld) need pipeline parallelism (pp >= 2)",
                   (long long)x->v);
            continue;
        }
        bool ae, al;
        if (x->v > 1 && !mp_parallel_split_given(fp) && !mp_stage_split_ok(L, x->p, x->v) &&
            !mp_search_needs_layout(e->base, x->p, x->v) &&
            !mp_search_needs_account(e->base, x->p, x->v, &ae, &al)) {
            refuse(e, MP_REJECT_LAYERS, "vpp",
                   "pp*vpp = %lld does not divide the %lld layers",
                   (long long)x->p * x->v, (long long)L);
            continue;
        }
        enumerate_micro_batch(e, bv, nb, x);
    }
}

/* The pipeline degrees p (and so d) for fixed (t, c). */
static void enumerate_pp(enum_ctx *e, const levels *lv, cand *x)
{
    const mp_parallel *fp = &e->base->parallel;
    int64_t gpus = e->base->training.gpus, gb = e->base->training.global_batch;
    int64_t L = e->base->model.layers;
    int64_t *pv = lv->p;
    int np = fixed(e, MP_FIX_PP) ? (pv[0] = fp->pp, 1)
                                 : divisors(gpus / x->t / x->c, pv, MAX_DIV);
    for (int ip = 0; ip < np && !e->too_many; ip++) {
        x->p = (int32_t)pv[ip];
        if ((gpus / x->t / x->c) % x->p) {
            refuse(e, MP_REJECT_OTHER, "pp", "pp=%lld does not divide gpus/(tp*cp) = %lld",
                   (long long)x->p, (long long)(gpus / x->t / x->c));
            continue;
        }
        x->d = gpus / x->t / x->c / x->p;
        if (fixed(e, MP_FIX_DP) && x->d != fp->dp) continue;
        if (!mp_parallel_split_given(fp) && !mp_stage_split_ok(L, x->p, 1)) {
            refuse(e, MP_REJECT_LAYERS, "pp", "pp=%lld cannot split the %lld layers",
                   (long long)x->p, (long long)L);
            continue;
        }
        if (gb % x->d) {
            refuse(e, MP_REJECT_BATCH, "global_batch",
                   "global batch %lld is not a multiple of dp=%lld", (long long)gb,
                   (long long)x->d);
            continue;
        }
        enumerate_vpp(e, lv, x);
    }
}

/* The context-parallel degrees c for a fixed t. */
static void enumerate_cp(enum_ctx *e, const levels *lv, cand *x)
{
    const mp_config *base = e->base;
    const mp_model *m = &base->model;
    int64_t gpus = base->training.gpus, seq = base->training.seq;
    int64_t *cv = lv->c;
    int nc = fixed(e, MP_FIX_CP) ? (cv[0] = base->parallel.cp, 1)
                                 : divisors(gpus / x->t, cv, MAX_DIV);
    for (int ic = 0; ic < nc && !e->too_many; ic++) {
        x->c = (int32_t)cv[ic];
        if ((gpus / x->t) % x->c) {
            refuse(e, MP_REJECT_OTHER, "cp", "cp=%lld does not divide gpus/tp = %lld",
                   (long long)x->c, (long long)(gpus / x->t));
            continue;
        }
        if (x->c > 1 && (seq % (2 * x->c) || m->arch == MP_ARCH_T5 || m->arch == MP_ARCH_BERT)) {
            refuse(e, MP_REJECT_CP_SEQ, "cp", "cp=%lld: seq %lld does not split into 2*cp chunks",
                   (long long)x->c, (long long)seq);
            continue;
        }
        if (x->c > 1 && !base->hw.flash_attention) {
            /* mp_config_check's rule, mirrored for pruning: Megatron's CP
             * is TransformerEngine's fused ring attention */
            refuse(e, MP_REJECT_OTHER, "cp",
                   "context parallelism needs a fused (flash) attention kernel; %s has "
                   "flash_attention: false", base->hw.name);
            continue;
        }
        if (x->c > 1 && base->parallel.cp_comm_type == MP_CP_A2A &&
            (m->heads % ((int64_t)x->t * x->c) || m->kv_heads % ((int64_t)x->t * x->c))) {
            /* mp_config_cp_comm_check's rule: a2a gives each rank heads/(tp*cp) */
            refuse(e, MP_REJECT_CP_A2A_HEADS, "cp_comm_type",
                   "a2a gives each CP rank heads/(tp*cp) heads: %lld query and %lld key/value "
                   "heads do not split over tp*cp = %lld",
                   (long long)m->heads, (long long)m->kv_heads, (long long)x->t * x->c);
            continue;
        }
        enumerate_pp(e, lv, x);
    }
}

/* Every candidate, tensor-parallel degree outermost (cheap dimensions first). */
void mp_search_enumerate(enum_ctx *e)
{
    const mp_config *base = e->base;
    const mp_model *m = &base->model;
    int64_t gpus = base->training.gpus;
    int64_t domain = (int64_t)mp_scale_up_gpus(&base->hw);
    int64_t *tv = malloc(sizeof *tv * MAX_DIV * 5);
    if (!tv) {
        e->keep.oom = true;
        return;
    }
    levels lv = {tv, tv + MAX_DIV, tv + 2 * MAX_DIV, tv + 3 * MAX_DIV, tv + 4 * MAX_DIV};
    int nt = fixed(e, MP_FIX_TP) ? (tv[0] = base->parallel.tp, 1) : divisors(gpus, tv, MAX_DIV);
    for (int it = 0; it < nt && !e->too_many; it++) {
        cand x = {0};
        x.t = (int32_t)tv[it];
        if (gpus % x.t) {
            refuse(e, MP_REJECT_OTHER, "tp", "tp=%lld does not divide the %lld GPUs",
                   (long long)x.t, (long long)gpus);
            continue;
        }
        if (m->heads % x.t || m->kv_heads % x.t) {
            refuse(e, MP_REJECT_TP_HEADS, "tp", "tp=%lld does not divide the %lld heads",
                   (long long)x.t, (long long)m->heads);
            continue;
        }
        if (!fixed(e, MP_FIX_TP) && !e->opt->tp_cross_domain && x.t > domain) {
            refuse(e, MP_REJECT_TP_DOMAIN, "tp", "tp=%lld is larger than the %lld-GPU scale-up domain",
                   (long long)x.t, (long long)domain);
            continue;
        }
        enumerate_cp(e, &lv, &x);
        if (e->opt->progress) e->opt->progress(e->opt->progress_user, 0.1 * (it + 1) / nt);
    }
    free(tv);
}

void mp_search_init_ctx(enum_ctx *e, const mp_search_options *opt, mp_search_counts *counts)
{
    const mp_config *base = &opt->base;
    memset(e, 0, sizeof *e);
    e->opt = opt;
    e->base = base;
    e->counts = counts;
    e->bc.base = base;
    e->bc.n_sel = mp_search_selective_sets(base, e->bc.sel_mask);
    mp_error_clear(&e->first_refusal);
    mp_model stripped = base->model;
    if (mp_model_is_moe(&stripped))
        mp_search_moe_strip(&stripped);
    const mp_model *m = &stripped;
    int64_t L = mp_model_blocks(m);
    double pmin = mp_block_params(m, MP_BLOCK_SELF);
    if (m->arch == MP_ARCH_T5 && m->encoder_layers > 0) {
        pmin = mp_block_params(m, MP_BLOCK_T5_ENC);
        if (L > m->encoder_layers) {
            double pd = mp_block_params(m, MP_BLOCK_T5_DEC);
            if (pd < pmin) pmin = pd;
        }
    }
    e->block_params_min = pmin;
    e->emb_params = mp_embedding_params(m, base->training.seq);
    mp_search_bound_scratch_init(base, &e->scratch);
    if (mp_model_is_moe(&base->model)) {
        e->expert_degrees = malloc(sizeof *e->expert_degrees * MAX_DIV);
        if (e->expert_degrees)
            e->n_expert_degrees = divisors(base->model.moe.experts, e->expert_degrees, MAX_DIV);
        else
            e->keep.oom = true;
        /* (none: each computed, still right) */
        e->expert_bytes = malloc(sizeof *e->expert_bytes * 10 * (size_t)(e->n_expert_degrees + 1));
        e->eb_t = 0; /* no (t, c, d) yet */
    }
}

void mp_search_free_ctx(enum_ctx *e)
{
    free(e->keep.v);
    free(e->closest.v);
    free(e->bc.slot);
    free(e->expert_degrees);
    free(e->expert_bytes);
    e->expert_bytes = NULL;
    e->keep.v = e->closest.v = NULL;
    e->bc.slot = NULL;
    e->expert_degrees = NULL;
}
