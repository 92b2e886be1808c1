/* search.c — enumerate, bound, cost, split, re-rank (search.h, docs/design.md §5).
 *
 * 1. Enumerate the structurally valid candidates (cheap dimensions outermost)
 *    and give each two lower bounds from cached per-block numbers: memory
 *    (the first pipeline rank's weights, grads, optimizer states and stashed
 *    activations under the even split: exactly the estimate's rank 0 minus
 *    its buffers) and time (the slowest rank's compute and recompute over m
 *    micro-batches plus the fill it cannot avoid, without any communication).
 * 2. Drop those whose memory bound exceeds the capacity; cost the rest in
 *    full in order of their time bound, keeping the k best that fit, and stop
 *    at the first bound that cannot beat the k-th best: every later one is
 *    pruned by time.
 * 3. Give the k best the stage split and per-layer recompute (ilp.h), keep it
 *    where the estimate improves, and re-rank by the simulator.
 */
#include "planner/search.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/cost_internal.h"
#include "planner/ilp.h"
#include "planner/pipeline_internal.h"
#include "planner/search_internal.h"
#include "sim/simulate.h"

static const char *const reject_keys[MP_REJECT_COUNT] = {
    "tp_heads", "tp_domain", "cp_seq", "layers", "batch", "interleave", "sp", "other", "memory"};
static const char *const reject_phrases[MP_REJECT_COUNT] = {
    "tp does not divide the heads",
    "tp beyond the scale-up domain",
    "seq does not split into 2*cp chunks",
    "pp*vpp does not divide the layers",
    "global batch not a multiple of micro_batch*dp",
    "interleaving needs microbatches % pp == 0",
    "sp needs seq/cp divisible by tp",
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An MoE model as the bounds see it: its blocks without their MLPs (a
 * one-wide dense MLP), which the expert layers only add time and bytes to
 * whatever the expert split. */
static void search_moe_strip(mp_model *m)
{
    memset(&m->moe, 0, sizeof m->moe);
    m->ffn_hidden = 1;
}

static int64_t n_blocks(const mp_model *m)
{
    if (m->arch == MP_ARCH_T5 && m->encoder_layers + m->decoder_layers > 0)
        return m->encoder_layers + m->decoder_layers;
    return m->layers;
}

/* ---- candidates ---------------------------------------------------------- */

typedef struct cand {
    int32_t t, c, p, v, b;
    int64_t d;
    uint8_t sp, rc, dist_opt, sched, dp_overlap, tp_overlap; /* dist_opt: the ZeRO stage 0..3 */
    uint8_t disp;    /* MoE: the token dispatcher */
    int32_t ep, etp; /* MoE: expert degrees (0 for a dense model) */
    double lb_time, lb_mem;
} cand;

typedef struct cand_vec {
    cand *v;
    size_t n, cap;
    bool oom;
} cand_vec;

static void cand_push(cand_vec *cv, const cand *x)
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
    /* dist_opt holds the sharding: 0-3 the ZeRO stage, 4 ZeRO-3 as HSDP */
    p->dist_opt = x->dist_opt >= 1;
    p->zero = x->dist_opt >= 2 ? (x->dist_opt >= 3 ? 3 : 2) : 0;
    p->hsdp = x->dist_opt == 4;
    p->schedule = (mp_schedule_kind)x->sched;
    p->dp_overlap = x->dp_overlap;
    p->tp_overlap = x->tp_overlap;
    p->ep = x->ep;
    p->etp = x->etp;
    p->dispatcher = (mp_dispatcher)x->dispatcher;
}

static void apply(const mp_config *base, const cand *x, mp_config *out)
{
    mp_search_cand_view v = {x->t, x->c, x->p, x->v, x->b, x->d, x->sp, x->rc,
                             x->dist_opt, x->sched, x->dp_overlap, x->tp_overlap,
                             x->ep, x->etp, x->disp};
    mp_search_apply(base, &v, out);
}

/* ---- per-block numbers, cached by (t, c, b, sp) -------------------------- */

typedef struct block_info {
    uint64_t key;           /* 0 = empty slot */
    double compute;         /* fwd + bwd compute of the cheapest block kind, no comm */
    double recompute[MP_RECOMPUTE_COUNT]; /* extra compute of each recompute choice */
    double act[MP_RECOMPUTE_COUNT];       /* bytes stashed by the smallest block kind */
    double act_none_max;    /* the largest block's no-recompute bytes (re-materialised) */
} block_info;

typedef struct block_cache {
    block_info *slot;
    size_t cap, n;
    const mp_config *base;
    bool oom;
} block_cache;

static uint64_t block_key(int32_t t, int32_t c, int32_t b, bool sp)
{
    return ((uint64_t)t << 42) ^ ((uint64_t)c << 22) ^ ((uint64_t)b << 1) ^ (sp ? 1u : 0u) ^
           (1ull << 63);
}

static void block_compute(const mp_config *base, int32_t t, int32_t c, int32_t b, bool sp,
                          block_info *bi)
{
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
    if (mp_model_is_moe(&base->model))
        search_moe_strip(&cfg.model);
    const mp_model *m = &cfg.model;
    int64_t L = n_blocks(m);
    int64_t kinds[2] = {1, L};
    int nk = m->arch == MP_ARCH_T5 && m->encoder_layers > 0 && L > m->encoder_layers ? 2 : 1;
    if (nk == 2) kinds[1] = m->encoder_layers + 1;
    for (int k = 0; k < nk; k++) {
        mp_block_shape bs;
        mp_block_shape_of(m, base->training.seq, kinds[k], &bs);
        mp_block_time bt;
        mp_block_time_of(&cfg, &bs, &bt);
        double comp = bt.fwd_compute + bt.bwd_compute;
        double rec[MP_RECOMPUTE_COUNT] = {0, bt.attn_core_fwd, bt.fwd_compute};
        double act[MP_RECOMPUTE_COUNT];
        for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
            act[r] = mp_block_act_bytes(m, &bs, (double)b, (double)t, (double)c, sp && t > 1,
                                        (mp_recompute)r, base->hw.flash_attention);
        if (k == 0 || comp < bi->compute) bi->compute = comp;
        for (int r = 0; r < MP_RECOMPUTE_COUNT; r++) {
            if (k == 0 || rec[r] < bi->recompute[r]) bi->recompute[r] = rec[r];
            if (k == 0 || act[r] < bi->act[r]) bi->act[r] = act[r];
        }
        if (k == 0 || act[MP_RECOMPUTE_NONE] > bi->act_none_max) bi->act_none_max = act[MP_RECOMPUTE_NONE];
    }
}

static const block_info *block_get(block_cache *bc, int32_t t, int32_t c, int32_t b, bool sp)
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
        block_compute(bc->base, t, c, b, sp, &bc->slot[j]);
        bc->slot[j].key = key;
        bc->n++;
    }
    return &bc->slot[j];
}

/* Bytes of weights + grads + optimizer per parameter (the estimate's rule). */
double mp_search_static_bytes_per_param(const mp_config *c)
{
    return mp_static_bytes_per_param(c);
}

/* In-flight micro-batch chunks of pipeline rank r at its peak (the estimate's rule). */
double mp_search_inflight_chunks(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, int64_t r)
{
    return mp_pipeline_inflight_chunks(s, p, v, m, r);
}

/* The bounds of section 1 above. */
static void bounds(const mp_config *base, const block_info *bi, double block_params_min,
                   double emb_params, cand *x)
{
    const mp_model *m = &base->model;
    int64_t L = n_blocks(m);
    int64_t mb = base->training.global_batch / ((int64_t)x->b * x->d);
    double per_rank = (double)L / (double)x->p; /* blocks on a rank, even split */
    mp_config tmp;
    tmp.training = base->training;
    tmp.parallel.dp = x->d;
    tmp.parallel.cp = x->c;
    tmp.parallel.dist_opt = x->dist_opt >= 1;
    tmp.parallel.zero = x->dist_opt >= 2 ? (x->dist_opt >= 3 ? 3 : 2) : 0;
    tmp.parallel.hsdp = x->dist_opt == 4;
    tmp.parallel.tp = x->t;
    tmp.hw = base->hw;
    double spb = mp_search_static_bytes_per_param(&tmp);
    double params0 = per_rank * block_params_min / x->t + emb_params / x->t;
    double expert_bytes = 0.0, moe_gemm = 0.0;
    if (mp_model_is_moe(m) && x->ep > 0) {
        /* the fewest MoE blocks a rank can hold, each with its local
         * experts, whose optimizer states shard over edp (which exceeds
         * d*c when etp < tp) */
        double moe_min = fmax(0.0, (double)mp_model_moe_blocks(m) - ((double)L - per_rank));
        mp_config ec = *base;
        ec.parallel = tmp.parallel;
        ec.parallel.ep = x->ep;
        ec.parallel.etp = x->etp;
        mp_config eb = tmp;
        eb.parallel.dp = mp_parallel_edp(&ec.parallel);
        eb.parallel.cp = 1;
        expert_bytes = moe_min * mp_moe_local_expert_params(&ec) *
                       mp_search_static_bytes_per_param(&eb);
        /* and the routed experts' GEMM FLOPs at the peak rate: each rank
         * runs b s/(c t) x top_k tokens through FC1 and FC2, forward and
         * backward (the efficiency curve and imbalance only add to it) */
        double peak = base->hw.peak_flops[base->training.precision];
        if (!(peak > 0.0)) peak = base->hw.peak_flops[MP_DTYPE_FP32];
        double gate = m->activation == MP_ACT_SWIGLU ? 2.0 : 1.0;
        double tokens = (double)x->b * (double)base->training.seq / ((double)x->c * x->t);
        moe_gemm = moe_min * 3.0 * 2.0 * tokens * (double)m->moe.top_k * (double)m->hidden *
                   (gate + 1.0) * (double)m->moe.expert_ffn / peak;
    }
    double chunks = mp_search_inflight_chunks((mp_schedule_kind)x->sched, x->p, x->v, mb, 0);
    double stash = per_rank * bi->act[x->rc] / (double)x->v * chunks;
    if (x->rc == MP_RECOMPUTE_FULL) stash += bi->act_none_max;
    x->lb_mem = params0 * spb + expert_bytes + stash + base->hw.runtime_reserve;

    double round = per_rank * (bi->compute + bi->recompute[x->rc]) + moe_gemm;
    /* the split-backward schedules fill most of it: no fill is a safe bound */
    double fill = mp_schedule_splits_backward((mp_schedule_kind)x->sched)
                      ? 0.0
                      : (double)(x->p - 1) * round / (double)x->v;
    x->lb_time = (double)mb * round + fill;
}

/* ---- top-k ------------------------------------------------------------- */

typedef struct top_entry {
    cand x;
    mp_estimate est;
} top_entry;

typedef struct top_k {
    top_entry *e;
    int n, k;
} top_k;

static double top_threshold(const top_k *t)
{
    return t->n < t->k ? INFINITY : t->e[t->n - 1].est.time.step;
}

/* Insertion into a sorted array: k is small. Ties keep the earlier (lower bound) one. */
static void top_insert(top_k *t, const cand *x, const mp_estimate *e)
{
    double s = e->time.step;
    if (t->n == t->k && s >= t->e[t->n - 1].est.time.step) return;
    int i = t->n < t->k ? t->n++ : t->n - 1;
    while (i > 0 && t->e[i - 1].est.time.step > s) {
        t->e[i] = t->e[i - 1];
        i--;
    }
    t->e[i].x = *x;
    t->e[i].est = *e;
}

static int cmp_lb_time(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->lb_time != y->lb_time) return x->lb_time < y->lb_time ? -1 : 1;
    return 0;
}

static int cmp_lb_mem(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->lb_mem != y->lb_mem) return x->lb_mem < y->lb_mem ? -1 : 1;
    return 0;
}

/* ---- enumeration --------------------------------------------------------- */

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

/* Candidates one search considers at most. Real spaces hold 10^4-10^5 (175B
 * on 1024 GPUs: ~10^4); a GPU count and global batch with thousands of
 * divisors each multiply into 10^8 and more (minutes, gigabytes). 2^21 keeps
 * the candidate list near 120 MB and the enumeration within a second or two. */
#define MAX_CANDIDATES (1 << 21)
/* A mixture of experts multiplies the space by its expert settings (ep, etp,
 * dispatcher: ~36x for DeepSeek-V3); its keep list stays small because most
 * of them fail the memory bound. */
#define MAX_CANDIDATES_MOE (1 << 23)

typedef struct enum_ctx {
    const mp_search_options *opt;
    const mp_config *base;
    mp_search_counts *counts;
    block_cache bc;
    cand_vec keep;        /* survivors of the memory bound */
    cand_vec closest;     /* memory-pruned with the smallest bounds (for "nothing fits") */
    double block_params_min, emb_params;
    mp_error first_refusal;
    bool have_refusal;
    bool keep_all;        /* the bounds check: keep memory-pruned candidates too */
    bool too_many;        /* MAX_CANDIDATES reached: the enumeration stopped */
} enum_ctx;

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

static void consider(enum_ctx *e, cand *x)
{
    if (!allowed(e, x))
        return;
    if (e->counts->considered >= (e->base->model.moe.experts > 0 ? MAX_CANDIDATES_MOE
                                                                  : MAX_CANDIDATES)) {
        e->too_many = true;
        return;
    }
    const block_info *bi = block_get(&e->bc, x->t, x->c, x->b, x->sp);
    if (!bi) return;
    bounds(e->base, bi, e->block_params_min, e->emb_params, x);
    e->counts->considered++;
    if (x->lb_mem > e->base->hw.memory && !e->keep_all) {
        e->counts->pruned_memory++;
        /* keep a handful of the least-over ones for the "closest" answer */
        if (e->closest.n < 64) {
            cand_push(&e->closest, x);
        } else {
            size_t worst = 0;
            for (size_t i = 1; i < e->closest.n; i++)
                if (e->closest.v[i].lb_mem > e->closest.v[worst].lb_mem) worst = i;
            if (x->lb_mem < e->closest.v[worst].lb_mem) e->closest.v[worst] = *x;
        }
        return;
    }
    cand_push(&e->keep, x);
}

/* The innermost dimensions for fixed (t, c, p, v, d, b). */
/* MoE: every expert split of the candidate's stage ranks (t*c*d of them,
 * Megatron-Core's folding): ep a divisor of the experts, etp 1 or tp, and
 * each dispatcher; mp_config_check refuses what Megatron would. A dense
 * model's candidate passes through once (ep = etp = 0). */
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
    for (int64_t ep = 1; ep <= m->moe.experts && !e->too_many; ep++) {
        if (m->moe.experts % ep || (fixed(e, MP_FIX_EP) && ep != mp_parallel_ep(fp)))
            continue;
        for (int i = 0; i < net; i++) {
            if (ranks % (ep * etps[i]) || m->moe.expert_ffn % etps[i])
                continue;
            for (int k = 0; k < nd; k++) {
                /* one GPU per expert group: the dispatchers coincide */
                if (ep * etps[i] == 1 && disps[k] != MP_DISPATCH_ALLTOALL)
                    continue;
                x->ep = (int32_t)ep;
                x->etp = etps[i];
                x->disp = disps[k];
                consider(e, x);
            }
        }
    }
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
    } else {
        sps[nsp++] = false;
        if (x->t > 1) sps[nsp++] = true;
    }
    uint8_t rcs[MP_RECOMPUTE_COUNT];
    int nrc = 0;
    if (fixed(e, MP_FIX_RECOMPUTE)) rcs[nrc++] = (uint8_t)fp->recompute;
    else
        for (int r = 0; r < MP_RECOMPUTE_COUNT; r++) rcs[nrc++] = (uint8_t)r;
    /* the sharding: 0 none, 1 the optimizer (Megatron's distributed
     * optimizer), 2 and 3 ZeRO-2 / ZeRO-3-FSDP (no pipeline) */
    uint8_t dos[5];
    int ndo = 0;
    bool shard_ok = x->d * x->c > 1, no_pipe = x->p == 1;
    /* HSDP differs from ZeRO-3 only when the DP ranks span scale-up domains */
    int64_t dom = e->base->hw.scale_up.gpus_per_domain > 0 ? e->base->hw.scale_up.gpus_per_domain
                                                          : e->base->hw.gpus_per_node;
    bool hsdp_ok = (int64_t)x->t * x->d * x->c > dom && (int64_t)x->t * 2 <= dom;
    if (fixed(e, MP_FIX_HSDP) && fp->hsdp) {
        if (!no_pipe || !shard_ok || !hsdp_ok) return;
        dos[ndo++] = 4;
    } else if (fixed(e, MP_FIX_ZERO) && fp->zero >= 2) {
        if (!no_pipe || !shard_ok) return;
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
    uint8_t scheds[MP_SCHED_COUNT];
    int nsc = 0;
    int64_t mbs = e->base->training.global_batch / x->d / x->b;
    if (fixed(e, MP_FIX_SCHEDULE)) {
        bool chunked = fp->schedule == MP_SCHED_INTERLEAVED || mp_schedule_is_v(fp->schedule);
        if (chunked != (x->v > 1)) return; /* the fixed schedule rules this v out */
        if (mp_schedule_is_v(fp->schedule) && x->v != 2) return;
        if (fp->schedule == MP_SCHED_DUALPIPEV && mbs < 2 * x->p) return;
        scheds[nsc++] = (uint8_t)fp->schedule;
    } else if (x->v > 1) {
        scheds[nsc++] = MP_SCHED_INTERLEAVED;
        /* the V schedules (two chunks per rank) run outside Megatron-LM only */
        if (x->v == 2 && !e->opt->megatron_runtime) {
            scheds[nsc++] = MP_SCHED_ZBV;
            if (mbs >= 2 * x->p) scheds[nsc++] = MP_SCHED_DUALPIPEV;
        }
    } else if (x->p == 1) {
        scheds[nsc++] = MP_SCHED_1F1B; /* no pipeline: the schedules coincide */
    } else {
        scheds[nsc++] = MP_SCHED_1F1B;
        scheds[nsc++] = MP_SCHED_GPIPE;
        scheds[nsc++] = MP_SCHED_ZBH1;
    }
    for (int i = 0; i < nsp; i++) {
        x->sp = sps[i];
        if (x->sp && (x->t < 2 || (seq / x->c) % x->t)) {
            refuse(e, MP_REJECT_SP, "sp", "sp needs seq/cp (%lld) divisible by tp=%lld",
                   (long long)(seq / x->c), (long long)x->t);
            continue;
        }
        bool tpo = fixed(e, MP_FIX_TP_OVERLAP) ? fp->tp_overlap : false;
        if (tpo && !x->sp) continue;
        x->tp_overlap = tpo;
        for (int r = 0; r < nrc; r++) {
            x->rc = rcs[r];
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

static void enumerate(enum_ctx *e)
{
    const mp_config *base = e->base;
    const mp_model *m = &base->model;
    const mp_parallel *fp = &base->parallel;
    int64_t gpus = base->training.gpus, seq = base->training.seq, gb = base->training.global_batch;
    int64_t L = m->layers;
    int64_t domain = base->hw.scale_up.gpus_per_domain > 0 ? base->hw.scale_up.gpus_per_domain
                                                           : base->hw.gpus_per_node;
    int64_t *tv = malloc(sizeof *tv * MAX_DIV * 5);
    if (!tv) {
        e->keep.oom = true;
        return;
    }
    int64_t *cv = tv + MAX_DIV, *pv = cv + MAX_DIV, *vv = pv + MAX_DIV, *bv = vv + MAX_DIV;
    int nt = fixed(e, MP_FIX_TP) ? (tv[0] = fp->tp, 1) : divisors(gpus, tv, MAX_DIV);
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
        int nc = fixed(e, MP_FIX_CP) ? (cv[0] = fp->cp, 1) : divisors(gpus / x.t, cv, MAX_DIV);
        for (int ic = 0; ic < nc && !e->too_many; ic++) {
            x.c = (int32_t)cv[ic];
            if ((gpus / x.t) % x.c) {
                refuse(e, MP_REJECT_OTHER, "cp", "cp=%lld does not divide gpus/tp = %lld",
                       (long long)x.c, (long long)(gpus / x.t));
                continue;
            }
            if (x.c > 1 && (seq % (2 * x.c) || m->arch == MP_ARCH_T5 || m->arch == MP_ARCH_BERT)) {
                refuse(e, MP_REJECT_CP_SEQ, "cp", "cp=%lld: seq %lld does not split into 2*cp chunks",
                       (long long)x.c, (long long)seq);
                continue;
            }
            if (x.c > 1 && !base->hw.flash_attention) {
                /* mp_config_check's rule, mirrored for pruning: Megatron's CP
                 * is TransformerEngine's fused ring attention */
                refuse(e, MP_REJECT_OTHER, "cp",
                       "context parallelism needs a fused (flash) attention kernel; %s has "
                       "flash_attention: false", base->hw.name);
                continue;
            }
            int np = fixed(e, MP_FIX_PP) ? (pv[0] = fp->pp, 1)
                                         : divisors(gpus / x.t / x.c, pv, MAX_DIV);
            for (int ip = 0; ip < np && !e->too_many; ip++) {
                x.p = (int32_t)pv[ip];
                if ((gpus / x.t / x.c) % x.p) {
                    refuse(e, MP_REJECT_OTHER, "pp", "pp=%lld does not divide gpus/(tp*cp) = %lld",
                           (long long)x.p, (long long)(gpus / x.t / x.c));
                    continue;
                }
                x.d = gpus / x.t / x.c / x.p;
                if (fixed(e, MP_FIX_DP) && x.d != fp->dp) continue;
                if (!mp_stage_split_ok(L, x.p, 1)) {
                    refuse(e, MP_REJECT_LAYERS, "pp", "pp=%lld cannot split the %lld layers",
                           (long long)x.p, (long long)L);
                    continue;
                }
                if (gb % x.d) {
                    refuse(e, MP_REJECT_BATCH, "global_batch",
                           "global batch %lld is not a multiple of dp=%lld", (long long)gb,
                           (long long)x.d);
                    continue;
                }
                int nv = 0;
                if (fixed(e, MP_FIX_VPP)) {
                    vv[nv++] = fp->vpp;
                } else {
                    vv[nv++] = 1;
                    if (x.p > 1)
                        for (int64_t v = 2; v * x.p <= L && nv < MAX_DIV; v++)
                            if (mp_stage_split_ok(L, x.p, v)) vv[nv++] = v;
                }
                int nb = fixed(e, MP_FIX_MICRO_BATCH) ? (bv[0] = fp->micro_batch, 1)
                                                      : divisors(gb / x.d, bv, MAX_DIV);
                for (int iv = 0; iv < nv && !e->too_many; iv++) {
                    x.v = (int32_t)vv[iv];
                    if (x.v > 1 && x.p < 2) {
                        refuse(e, MP_REJECT_OTHER, "vpp",
                               "virtual stages (vpp=%lld) need pipeline parallelism (pp >= 2)",
                               (long long)x.v);
                        continue;
                    }
                    if (x.v > 1 && !mp_stage_split_ok(L, x.p, x.v)) {
                        refuse(e, MP_REJECT_LAYERS, "vpp",
                               "pp*vpp = %lld does not divide the %lld layers",
                               (long long)x.p * x.v, (long long)L);
                        continue;
                    }
                    for (int ib = 0; ib < nb && !e->too_many; ib++) {
                        x.b = (int32_t)bv[ib];
                        if ((gb / x.d) % x.b) {
                            refuse(e, MP_REJECT_BATCH, "micro_batch",
                                   "global batch %lld is not a multiple of micro_batch*dp = %lld",
                                   (long long)gb, (long long)x.b * x.d);
                            continue;
                        }
                        int64_t mbs = gb / x.d / x.b;
                        if (x.v > 1 && mbs % x.p) {
                            refuse(e, MP_REJECT_INTERLEAVE, "global_batch",
                                   "interleaving needs microbatches (%lld) a multiple of pp=%lld",
                                   (long long)mbs, (long long)x.p);
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
                        enumerate_inner(e, &x);
                        if (!e->keep_all && e->keep.n == kept && e->counts->pruned_memory > over)
                            break;
                    }
                }
            }
        }
        if (e->opt->progress) e->opt->progress(e->opt->progress_user, 0.1 * (it + 1) / nt);
    }
    free(tv);
}

/* ---- the split of one configuration -------------------------------------- */

mp_status mp_search_split(const mp_config *c, bool free_recompute, int64_t work_limit,
                          mp_plan *plan, mp_estimate *est, mp_search_plan *info, mp_error *err)
{
    const mp_parallel *pp = &c->parallel;
    int64_t L = n_blocks(&c->model), N = L + 2;
    int64_t v = mp_schedule_chunks(pp->schedule, pp->vpp);
    int64_t K = pp->pp * v;
    memset(plan, 0, sizeof *plan);
    plan->config = *c;
    info->split_method = "even";
    info->split_gap = 0;
    info->split_max_stage = 0;
    info->split_work = 0;
    info->uneven = info->mixed_recompute = false;
    /* T5 keeps Megatron's split of encoder and decoder stages (the split
     * rank, mp_even_stage_items): Megatron cannot run a free one */
    if (K > MP_MAX_STAGES || N > MP_MAX_LAYERS + 2 || (c->model.arch == MP_ARCH_T5 && K > 1))
        return mp_estimate_config(c, NULL, est, err);
    /* the split solver places stage k on rank k % pp: the V schedules keep
     * the even split */
    if (mp_schedule_is_v(pp->schedule))
        return mp_estimate_config(c, NULL, est, err);

    mp_item_cost *items = malloc(sizeof *items * (size_t)N);
    mp_split_item *si = malloc(sizeof *si * (size_t)N);
    double *inflight = malloc(sizeof *inflight * (size_t)K);
    mp_stage_range *stages = malloc(sizeof *stages * (size_t)K);
    uint8_t *rc = malloc((size_t)N);
    mp_status st = MP_OK;
    if (!items || !si || !inflight || !stages || !rc) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the stage split");
        goto done;
    }
    if ((st = mp_item_costs(c, items, err)) != MP_OK) goto done;

    double spb = mp_search_static_bytes_per_param(c);
    double tied = c->model.tied_embeddings && pp->pp > 1
                      ? (double)c->model.vocab * (double)c->model.hidden / (double)pp->tp * spb
                      : 0.0;
    double none_max = 0;
    for (int64_t i = 0; i < N; i++) {
        bool block = i > 0 && i < N - 1;
        mp_split_item *s = &si[i];
        memset(s, 0, sizeof *s);
        s->static_bytes = items[i].static_bytes;
        for (int r = 0; r < MP_RECOMPUTE_COUNT; r++) {
            s->time[r] = items[i].fwd + items[i].bwd[block ? r : MP_RECOMPUTE_NONE];
            /* the estimate keeps the embedding's and head's activations once, not per micro-batch */
            s->act[r] = block ? items[i].act_bytes[r] : 0.0;
            s->allowed[r] = block ? (free_recompute || r == (int)pp->recompute) : r == MP_RECOMPUTE_NONE;
        }
        if (!block) s->static_bytes += items[i].act_bytes[MP_RECOMPUTE_NONE];
        if (i == N - 1) s->static_bytes += tied;
        if (block && items[i].act_bytes[MP_RECOMPUTE_NONE] > none_max)
            none_max = items[i].act_bytes[MP_RECOMPUTE_NONE];
    }
    int64_t m = mp_config_microbatches(c);
    for (int64_t k = 0; k < K; k++)
        inflight[k] = mp_search_inflight_chunks(pp->schedule, pp->pp, v, m, k % pp->pp) / (double)v;
    /* the estimate's "other" (reserve, p2p buffers both ways, the SP gather
     * buffer, sized by a block's output: no smaller than any stage's); with
     * per-layer recompute it also holds one block's full activations while
     * that block is re-materialised */
    double send = items[L > 0 ? L : 0].send_bytes;
    double other = c->hw.runtime_reserve + 4.0 * send + (pp->sp && pp->tp > 1 ? send * (double)pp->tp : 0.0);
    mp_split_problem pr = {.n_items = (int32_t)N, .items = si, .pp = (int32_t)pp->pp,
                           .vpp = (int32_t)v, .inflight = inflight,
                           .budget = c->hw.memory - other - none_max,
                           .work_limit = work_limit};
    mp_split_solution sol = {.stages = stages, .recompute = rc};
    if ((st = mp_split_solve(&pr, &sol, err)) != MP_OK) goto done;
    if (!sol.feasible) {
        st = mp_estimate_config(c, NULL, est, err);
        goto done;
    }
    plan->n_stages = (int32_t)K;
    memcpy(plan->stages, stages, sizeof *stages * (size_t)K);
    plan->has_layer_recompute = true;
    int count[MP_RECOMPUTE_COUNT] = {0};
    for (int64_t i = 0; i < N; i++) {
        plan->layer_recompute[i] = rc[i];
        if (i > 0 && i < N - 1) count[rc[i]]++;
    }
    int most = 0;
    for (int r = 1; r < MP_RECOMPUTE_COUNT; r++)
        if (count[r] > count[most]) most = r;
    plan->config.parallel.recompute = (mp_recompute)most;
    info->mixed_recompute = count[most] != L;
    mp_stage_range even[MP_MAX_STAGES];
    bool same = mp_split_even((int32_t)N, (int32_t)K, even) &&
                !memcmp(even, stages, sizeof *stages * (size_t)K);
    info->uneven = !same || info->mixed_recompute || most != (int)pp->recompute;
    info->split_method = sol.method;
    info->split_gap = sol.gap;
    info->split_max_stage = sol.max_stage_time;
    info->split_work = sol.work;
    st = mp_estimate_config(&plan->config, plan, est, err);
done:
    free(items);
    free(si);
    free(inflight);
    free(stages);
    free(rc);
    return st;
}

/* ---- the search ------------------------------------------------------------ */

static void init_ctx(enum_ctx *e, const mp_search_options *opt, mp_search_counts *counts)
{
    const mp_config *base = &opt->base;
    memset(e, 0, sizeof *e);
    e->opt = opt;
    e->base = base;
    e->counts = counts;
    e->bc.base = base;
    mp_error_clear(&e->first_refusal);
    mp_model stripped = base->model;
    if (mp_model_is_moe(&stripped))
        search_moe_strip(&stripped);
    const mp_model *m = &stripped;
    int64_t L = n_blocks(m);
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
}

mp_status mp_search_check_bounds(const mp_search_options *opt, int64_t *checked,
                                 int64_t *mem_violations, int64_t *time_violations,
                                 double *worst_mem_ratio, mp_error *err)
{
    mp_search_counts counts = {0};
    enum_ctx e;
    init_ctx(&e, opt, &counts);
    e.keep_all = true;
    enumerate(&e);
    *checked = *mem_violations = *time_violations = 0;
    *worst_mem_ratio = 0;
    mp_status st = MP_OK;
    if (e.keep.oom || e.bc.oom) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < e.keep.n; i++) {
        mp_config cfg;
        apply(&opt->base, &e.keep.v[i], &cfg);
        mp_estimate est;
        mp_error e2;
        if (mp_estimate_config(&cfg, NULL, &est, &e2) != MP_OK) continue;
        (*checked)++;
        double r = e.keep.v[i].lb_mem / est.memory.peak;
        if (r > *worst_mem_ratio) *worst_mem_ratio = r;
        if (e.keep.v[i].lb_mem > est.memory.peak * (1 + 1e-12)) (*mem_violations)++;
        if (e.keep.v[i].lb_time > est.time.step * (1 + 1e-12)) (*time_violations)++;
    }
done:
    free(e.keep.v);
    free(e.closest.v);
    free(e.bc.slot);
    return st;
}

static void even_plan(const mp_config *c, mp_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->config = *c;
    mp_plan_default_stages(plan);
}

static int cmp_plan(const void *a, const void *b)
{
    const mp_search_plan *x = a, *y = b;
    if (x->rank_step != y->rank_step) return x->rank_step < y->rank_step ? -1 : 1;
    return 0;
}

#define REFUSE(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

/* The settings every candidate shares (the training and the fixed
 * dimensions), checked before enumerating: when they cannot run, the answer
 * is about them, not about whichever candidate happened to be refused first
 * ("--fix dp=3" on 8 GPUs is about dp, not about some tp). Wording as
 * mp_config_check's. */
static mp_status check_shared(const mp_search_options *opt, mp_error *err)
{
    const mp_config *c = &opt->base;
    const mp_model *m = &c->model;
    const mp_training *t = &c->training;
    const mp_parallel *p = &c->parallel;
    uint32_t f = opt->fixed;
    int64_t seq = t->seq, gpus = t->gpus, gb = t->global_batch, L = m->layers;
    if (m->position == MP_POS_LEARNED && seq > m->seq)
        return REFUSE("seq", "%lld is longer than the model's %lld learned positions",
                      (long long)seq, (long long)m->seq);
    if ((unsigned)t->precision >= MP_DTYPE_COUNT || !(c->hw.peak_flops[t->precision] > 0))
        return REFUSE("precision", "hardware %s has no %s peak rate", c->hw.name,
                      mp_dtype_name(t->precision));
    int64_t tp = f & MP_FIX_TP ? p->tp : 1, pp = f & MP_FIX_PP ? p->pp : 1;
    int64_t cp = f & MP_FIX_CP ? p->cp : 1, dp = f & MP_FIX_DP ? p->dp : 1;
    int64_t vpp = f & MP_FIX_VPP ? p->vpp : 1;
    if (tp < 1 || pp < 1 || cp < 1 || dp < 1 || vpp < 1 ||
        (f & MP_FIX_MICRO_BATCH && p->micro_batch < 1))
        return REFUSE("gpus", "fixed degrees must be at least 1");
    if (m->heads % tp || m->kv_heads % tp)
        return REFUSE("tp", "tp=%lld does not divide the %lld attention heads and %lld "
                            "key/value heads", (long long)tp, (long long)m->heads,
                      (long long)m->kv_heads);
    int64_t prod;
    bool over = __builtin_mul_overflow(tp, pp, &prod) || __builtin_mul_overflow(prod, cp, &prod) ||
                __builtin_mul_overflow(prod, dp, &prod);
    if (over || gpus % prod)
        return REFUSE((f & MP_FIX_DP) ? "dp" : "gpus",
                      "%lld GPUs is not a multiple of the fixed tp*pp*cp*dp = "
                      "%lld*%lld*%lld*%lld", (long long)gpus, (long long)tp, (long long)pp,
                      (long long)cp, (long long)dp);
    if ((f & (MP_FIX_TP | MP_FIX_PP | MP_FIX_CP | MP_FIX_DP)) ==
            (MP_FIX_TP | MP_FIX_PP | MP_FIX_CP | MP_FIX_DP) && prod != gpus)
        return REFUSE("dp", "tp*pp*cp*dp = %lld*%lld*%lld*%lld = %lld, but there are %lld GPUs",
                      (long long)tp, (long long)pp, (long long)cp, (long long)dp,
                      (long long)prod, (long long)gpus);
    if (!mp_stage_split_ok(L, pp, vpp))
        return REFUSE(vpp > 1 ? "vpp" : "pp",
                      "the %lld layers cannot be split over pp*vpp = %lld*%lld stages as "
                      "Megatron-LM splits them",
                      (long long)L, (long long)pp, (long long)vpp);
    if (vpp > 1 && (f & MP_FIX_PP) && pp < 2)
        return REFUSE("vpp", "virtual stages (vpp=%lld) need pipeline parallelism (pp >= 2)",
                      (long long)vpp);
    if (f & MP_FIX_SCHEDULE) {
        bool inter = p->schedule == MP_SCHED_INTERLEAVED;
        if (mp_schedule_is_v(p->schedule) && (f & MP_FIX_VPP) && vpp != 2)
            return REFUSE("schedule", "%s runs two chunks per rank: vpp 2 (got vpp=%lld)",
                          mp_schedule_name(p->schedule), (long long)vpp);
        if (mp_schedule_is_v(p->schedule) && (f & MP_FIX_PP) && pp < 2)
            return REFUSE("schedule", "%s needs pipeline parallelism (pp >= 2)",
                          mp_schedule_name(p->schedule));
        if (mp_schedule_is_v(p->schedule))
            inter = true; /* chunked like interleaving */
        if (inter && (f & MP_FIX_VPP) && vpp < 2)
            return REFUSE("schedule", "interleaved-1f1b needs vpp >= 2 (got vpp=%lld)",
                          (long long)vpp);
        if (inter && (f & MP_FIX_PP) && pp < 2)
            return REFUSE("schedule", "interleaved-1f1b needs pipeline parallelism (pp >= 2)");
        if (!inter && vpp > 1)
            return REFUSE("schedule", "vpp=%lld needs schedule interleaved-1f1b (got %s)",
                          (long long)vpp, mp_schedule_name(p->schedule));
    }
    bool sp_on = (f & MP_FIX_SP) && p->sp, sp_off = (f & MP_FIX_SP) && !p->sp;
    if (sp_on && (f & MP_FIX_TP) && tp < 2)
        return REFUSE("sp", "sequence parallelism needs tp > 1");
    if ((f & MP_FIX_TP_OVERLAP) && p->tp_overlap && (sp_off || ((f & MP_FIX_TP) && tp < 2)))
        return REFUSE("tp_overlap", "TP communication overlap needs tp > 1 and sp on "
                                    "(Megatron --tp-comm-overlap)");
    if (cp > 1 && (m->arch == MP_ARCH_T5 || m->arch == MP_ARCH_BERT))
        return REFUSE("cp", "context parallelism is for GPT/LLaMA decoders (Megatron-LM); "
                            "this model is %s", mp_arch_name(m->arch));
    if (cp > 1 && seq % (2 * cp))
        return REFUSE("cp", "seq %lld does not split into 2*cp = %lld equal chunks",
                      (long long)seq, (long long)(2 * cp));
    if (cp > 1 && !c->hw.flash_attention)
        return REFUSE("cp", "context parallelism needs a fused (flash) attention kernel "
                            "(Megatron-LM runs it in TransformerEngine); %s has "
                            "flash_attention: false", c->hw.name);
    int64_t b = f & MP_FIX_MICRO_BATCH ? p->micro_batch : 1;
    if (gb % dp || (gb / dp) % b)
        return REFUSE("global_batch", "%lld is not a multiple of micro_batch*dp = %lld*%lld",
                      (long long)gb, (long long)b, (long long)dp);
    return MP_OK;
}

#undef REFUSE

mp_status mp_search(const mp_search_options *opt, mp_search_result *res, mp_error *err)
{
    double t0 = now_s();
    memset(res, 0, sizeof *res);
    const mp_config *base = &opt->base;
    int k = opt->top_k > 0 ? opt->top_k : 5;
    if (k > 100) k = 100;
    if (base->training.gpus < 1 || base->training.global_batch < 1 || base->training.seq < 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                            "search needs gpus, seq and global batch to be positive");
    mp_status st = check_shared(opt, err);
    if (st != MP_OK)
        return st;

    enum_ctx e;
    init_ctx(&e, opt, &res->counts);
    e.keep_all = opt->no_prune;
    enumerate(&e);
    top_k top = {0};
    if (e.keep.oom || e.closest.oom || e.bc.oom) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory in the search");
        goto done;
    }
    if (e.too_many) {
        st = mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                          "absurdly large search: more than %d candidates (%lld GPUs and a "
                          "global batch of %lld have too many divisors); fix some settings "
                          "(--micro-batch, --pp, --tp) or search a smaller case",
                          base->model.moe.experts > 0 ? MAX_CANDIDATES_MOE : MAX_CANDIDATES,
                          (long long)base->training.gpus,
                          (long long)base->training.global_batch);
        res->counts.seconds = now_s() - t0;
        goto done;
    }
    if (e.keep.n == 0 && e.closest.n == 0) {
        /* Nothing can run. With settings fixed by the user, that is their
         * input's fault (MP_EINPUT, naming the first refusal); otherwise the
         * model, GPUs and batch simply admit no split (MP_ENOFIT). */
        bool user = opt->fixed != 0;
        if (e.have_refusal && err) {
            *err = e.first_refusal;
            if (!user) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "no split of %lld GPUs can run; e.g. %.300s",
                         (long long)base->training.gpus, e.first_refusal.msg);
                snprintf(err->msg, sizeof err->msg, "%s", msg);
            }
        } else {
            mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                         "no configuration of %lld GPUs can run this model with these settings",
                         (long long)base->training.gpus);
        }
        st = user ? MP_EINPUT : MP_ENOFIT;
        if (err) err->code = st;
        res->counts.seconds = now_s() - t0;
        goto done;
    }

    /* cost in order of the time bound */
    if (e.keep.n > 1) qsort(e.keep.v, e.keep.n, sizeof *e.keep.v, cmp_lb_time);
    top.k = k;
    top.e = calloc((size_t)k, sizeof *top.e);
    if (!top.e) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    /* the least-over estimate seen, for "nothing fits" */
    bool have_closest = false;
    /* why the cost model refused a candidate that passed the structural rules:
     * when nothing runs at all, that is the answer (not a structural refusal
     * of some other candidate) */
    mp_error est_refusal;
    bool have_est_refusal = false;
    for (size_t i = 0; i < e.keep.n; i++) {
        const cand *x = &e.keep.v[i];
        if (!opt->no_prune && x->lb_time >= top_threshold(&top)) {
            res->counts.pruned_time += (int64_t)(e.keep.n - i);
            break;
        }
        mp_config cfg;
        apply(base, x, &cfg);
        mp_estimate est;
        mp_error e2;
        mp_error_clear(&e2);
        res->counts.estimated++;
        if (mp_estimate_config(&cfg, NULL, &est, &e2) != MP_OK) {
            res->counts.rejected[MP_REJECT_OTHER]++;
            if (!have_est_refusal) {
                have_est_refusal = true;
                est_refusal = e2;
            }
            continue;
        }
        if (!est.fits) {
            res->counts.rejected[MP_REJECT_MEMORY]++;
            if (!have_closest || est.over_bytes < res->closest_est.over_bytes) {
                have_closest = true;
                res->closest = cfg;
                res->closest_est = est;
            }
            continue;
        }
        res->counts.fitting++;
        top_insert(&top, x, &est);
        if (opt->progress && (i & 1023) == 1023)
            opt->progress(opt->progress_user, 0.1 + 0.7 * (double)i / (double)e.keep.n);
    }

    if (top.n == 0) {
        /* nothing fits: cost the memory-pruned ones nearest to fitting too */
        if (e.closest.n > 1) qsort(e.closest.v, e.closest.n, sizeof *e.closest.v, cmp_lb_mem);
        for (size_t i = 0; i < e.closest.n; i++) {
            mp_config cfg;
            apply(base, &e.closest.v[i], &cfg);
            mp_estimate est;
            mp_error e2;
            if (mp_estimate_config(&cfg, NULL, &est, &e2) != MP_OK) {
                if (!have_est_refusal) {
                    have_est_refusal = true;
                    est_refusal = e2;
                }
                continue;
            }
            if (!have_closest || est.over_bytes < res->closest_est.over_bytes) {
                have_closest = true;
                res->closest = cfg;
                res->closest_est = est;
            }
        }
        res->have_closest = have_closest;
        res->counts.seconds = now_s() - t0;
        if (have_closest) {
            char a[64];
            snprintf(a, sizeof a, "%.1f", res->closest_est.memory.peak / (1024.0 * 1024 * 1024));
            st = mp_error_set(err, MP_ENOFIT, NULL, 0, 0, "memory",
                              "no configuration fits in %.0f GiB per GPU; the closest needs %s GiB",
                              base->hw.memory / (1024.0 * 1024 * 1024), a);
        } else {
            if (err && have_est_refusal) *err = est_refusal;
            else if (err && e.have_refusal) *err = e.first_refusal;
            else mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                              "no configuration of %lld GPUs can run this model with these "
                              "settings", (long long)base->training.gpus);
            /* as above: the input's fault only when the user fixed settings */
            st = opt->fixed ? MP_EINPUT : MP_ENOFIT;
            if (err) err->code = st;
        }
        goto done;
    }

    /* the split and per-layer recompute of the best ones, then the simulator */
    res->plans = calloc((size_t)top.n, sizeof *res->plans);
    if (!res->plans) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    /* GLPK gets one work budget for the whole search, shared by the plans still
     * to split, so that --top 5 stays within the search's one-second budget; a
     * plan whose ILP runs out of work keeps the DP's bounds and reports its gap.
     * Work is counted, not timed, so a loaded machine names the same winner. */
    const int64_t split_budget = opt->split_work_limit > 0 ? opt->split_work_limit * top.n
                                                           : MP_SEARCH_SPLIT_WORK;
    int64_t split_used = 0;
    for (int i = 0; i < top.n; i++) {
        mp_search_plan *sp = &res->plans[i];
        res->n = i + 1;
        int64_t split_limit = (split_budget - split_used) / (top.n - i);
        if (split_limit < MP_SEARCH_SPLIT_MIN_WORK)
            split_limit = MP_SEARCH_SPLIT_MIN_WORK;
        apply(base, &top.e[i].x, &sp->config);
        sp->est = sp->est_even = top.e[i].est;
        sp->split_method = "even";
        sp->plan = malloc(sizeof *sp->plan);
        if (!sp->plan) {
            st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            goto done;
        }
        even_plan(&sp->config, sp->plan);
        if (!opt->no_split) {
            mp_plan *tmp = malloc(sizeof *tmp);
            if (!tmp) {
                st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
                goto done;
            }
            mp_estimate est;
            mp_search_plan info = *sp;
            mp_error e2;
            mp_error_clear(&e2);
            bool free_rc = !(opt->fixed & MP_FIX_RECOMPUTE);
            if (mp_search_split(&sp->config, free_rc, split_limit, tmp, &est, &info,
                                &e2) == MP_OK) {
                res->counts.split++;
                sp->split_method = info.split_method;
                sp->split_gap = info.split_gap;
                sp->split_max_stage = info.split_max_stage;
                split_used += info.split_work;
                /* --runtime megatron: a split its flags cannot express keeps the even one */
                bool runs = !opt->megatron_runtime || mp_search_megatron_runs(tmp, NULL);
                if (runs && est.fits && info.uneven &&
                    est.time.step < sp->est_even.time.step * (1 - 1e-9)) {
                    res->counts.split_uneven++;
                    sp->est = est;
                    sp->uneven = true;
                    sp->mixed_recompute = info.mixed_recompute;
                    sp->config = tmp->config;
                    *sp->plan = *tmp;
                }
            }
            free(tmp);
        }
        sp->rank_step = sp->est.time.step;
        if (!opt->no_simulate) {
            mp_sim_options so = {.record_timeline = false};
            mp_sim_result sr;
            memset(&sr, 0, sizeof sr);
            mp_error e2;
            mp_error_clear(&e2);
            const mp_plan *pl = sp->plan->n_stages ? sp->plan : NULL;
            if (mp_simulate(&sp->config, pl, &so, &sr, &e2) == MP_OK && sr.makespan > 0) {
                sp->simulated = true;
                sp->sim_step = sr.makespan;
                sp->rank_step = sr.makespan;
                res->counts.simulated++;
            }
            mp_sim_result_free(&sr);
        }
        if (opt->progress) opt->progress(opt->progress_user, 0.8 + 0.2 * (i + 1) / top.n);
    }
    if (res->n > 1) qsort(res->plans, (size_t)res->n, sizeof *res->plans, cmp_plan);
    res->counts.seconds = now_s() - t0;

done:
    free(top.e);
    free(e.keep.v);
    free(e.closest.v);
    free(e.bc.slot);
    if (st != MP_OK && st != MP_ENOFIT) {
        mp_search_result_free(res);
        memset(res, 0, sizeof *res);
    }
    return st;
}

void mp_search_result_free(mp_search_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->plans[i].plan);
    free(r->plans);
    r->plans = NULL;
    r->n = 0;
}
