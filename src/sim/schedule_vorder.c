/* schedule_vorder.c — ZB-V's compute order from the ops' own times.
 *
 * Qi et al. build their zero-bubble schedules from profiled F, B, W times
 * and a memory limit ("Zero Bubble Pipeline Parallelism", 2023, §3: a greedy
 * that runs each rank's next op as soon as it can; "Pipeline Parallelism
 * with Controllable Memory", 2024, for the V placement). This is that greedy
 * as a list scheduler over time, all ranks together: when a rank is free it
 * takes a ready F while it holds fewer than 2p chunk activations (p
 * micro-batches of whole-stage activations: 1F1B's first rank, "1x
 * memory"), chunk 1 first (the later stage drains the V); else a ready B,
 * chunk 0 first (it frees a micro-batch's W sooner); else its oldest
 * deferred W; else it waits for the next op to become ready. An op is ready
 * once the op it depends on has ended and its message has landed: F of
 * stage k after F of stage k-1 plus the link's transfer time, B after its
 * own F and B of stage k+1 plus the transfer. A rank that sends waits for
 * its message to land (Megatron's synchronous p2p, the simulator's
 * default). With unit times and free transfers this is exactly the order
 * the unit-time generator gave (F = B = W; tests/sim/test_engine.c holds it
 * to 6m + (p-1) F-times); with real times the order follows the slow
 * ranks (rank 0 holds both the embedding and the head) instead of idling
 * them on a unit-time plan. Given real times, five orders are built -- the
 * unit-time one, and the real-time one with F or with B preferred, each
 * also with ZB-V's warm-up lead (vorder.lead) -- each is timed by replaying
 * it under the same assumptions, and the fastest that keeps to the memory
 * cap is kept (the unit-time one on a tie), so the order is never slower
 * there than the unit-time order. (The four real-time
 * orders are their own replay: the greedy starts each op as soon as its
 * input has landed and the rank is free, what the replay does with the
 * order, and refuses a forward over the cap by the replay's own sum, so
 * they are timed as they are built; tests/sim/test_vorder.c holds the
 * times to the replay's bit for bit. The unit-time order, which no time
 * changes, is built once per (p, m) and thread.)
 *
 * Each op is placed only after every op it depends on has been placed, so
 * the placement order is a topological order of the whole step: the lists
 * cannot deadlock under any durations (the order only decides the speed). */
#include "sim/schedule_vorder.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/thread_block.h"

typedef struct vorder {
    int32_t p, m, S;          /* S = 2p virtual stages */
    const mp_op_times *t;
    double *tab;              /* per stage (5 x S): F, B, W, activations, link (fill_tab) */
    double *f_end, *b_end;    /* per (stage, micro-batch): end time, -1 = not placed */
    int32_t *next_f, *next_b; /* per stage: its next micro-batch */
    int32_t *wq;              /* per rank: FIFO of deferred W, (mb << 1) | chunk */
    int32_t *wq_head, *wq_tail, *live;
    double *held, *cap;       /* per rank: activations stashed, and the most it may */
    double *free_at;          /* per rank: when it can start its next op */
    double *key;              /* per rank: when it looks next, INFINITY = when woken
                                 (leaves p..w-1: INFINITY, padding) */
    int32_t *win, w;          /* tournament tree over key (w leaves, a power of two):
                                 win[i] the rank of node i's least key, win[1] the root */
    mp_op_list *out;
    bool b_first;             /* a ready B before a ready F (a second policy to try) */
    bool per_chunk;           /* the fallback: at most p micro-batches of each chunk */
    bool lead;                /* rank r runs chunk 0 at most 2(p - r) - 1 forwards
                                 ahead of chunk 1 (ZB-V's warm-up: try_f) */
    int32_t *live_c;          /* per rank and chunk (2r + c): F placed, W not yet */
    bool lead_binds;          /* without lead: some chunk-0 forward it would have refused
                                 was considered (else the run with lead is this one) */
    double makespan;          /* the latest op end so far */
    mp_v_rank_times *rt;      /* may be NULL: per rank, as replay() records them */
} vorder;

static int32_t stage_of(const vorder *z, int32_t r, int32_t c)
{
    return c ? z->S - 1 - r : r;
}

static int32_t rank_of(const vorder *z, int32_t k)
{
    return k < z->p ? k : z->S - 1 - k;
}

/* Stage k's activations per micro-batch: 1 without sizes (then the cap
 * is 2p chunks exactly as in the unit-time order). */
static double act(const vorder *z, int32_t k)
{
    return z->tab[3 * z->S + k];
}

static double dur(const vorder *z, mp_op_kind kind, int32_t k)
{
    return z->tab[(kind == MP_OP_F ? 0 : kind == MP_OP_B ? z->S : 2 * z->S) + k];
}

/* The transfer between stages k and k+1; nothing at the V's turn (one rank). */
static double link_time(const vorder *z, int32_t k)
{
    return z->tab[4 * z->S + k];
}

/* z->tab (5S doubles at tab) from z->t: without times every op takes 1 and
 * transfers nothing, without sizes every stage stashes 1. */
static void fill_tab(vorder *z, double *tab)
{
    const mp_op_times *t = z->t;
    int32_t S = z->S;
    for (int32_t k = 0; k < S; k++) {
        tab[k] = t ? t->f[k] : 1.0;
        tab[S + k] = t ? t->b[k] : 1.0;
        tab[2 * S + k] = t ? t->w[k] : 1.0;
        tab[3 * S + k] = t && t->act ? t->act[k] : 1.0;
        tab[4 * S + k] = !t || !t->link || k == z->p - 1 || k == S - 1 ? 0.0 : t->link[k];
    }
    z->tab = tab;
}

static double f_ready(const vorder *z, int32_t k, int32_t i)
{
    if (k == 0)
        return 0.0;
    double e = z->f_end[(size_t)(k - 1) * z->m + i];
    return e < 0 ? INFINITY : e + link_time(z, k - 1);
}

static double b_ready(const vorder *z, int32_t k, int32_t i)
{
    double own = z->f_end[(size_t)k * z->m + i];
    if (own < 0)
        return INFINITY;
    if (k == z->S - 1)
        return own;
    double e = z->b_end[(size_t)(k + 1) * z->m + i];
    if (e < 0)
        return INFINITY;
    e += link_time(z, k);
    return e > own ? e : own;
}

/* Rank r looks next at `time`: its key, and the tree's path above it (a
 * node keeps the rank of the lesser key, the lower rank, its left, on a tie:
 * the rank a min-heap of (time, rank) would give). */
static void set_key(vorder *z, int32_t r, double time)
{
    z->key[r] = time;
    for (int32_t i = (z->w + r) >> 1; i >= 1; i >>= 1) {
        int32_t a = z->win[2 * i], b = z->win[2 * i + 1], least = z->key[b] < z->key[a] ? b : a;
        /* the same winner, another rank: its key and so every node above
         * are as they were */
        if (least == z->win[i] && least != r)
            return;
        z->win[i] = least;
    }
}

/* Rank q can run an op from `at` on: bring its key forward. */
static bool wake(vorder *z, int32_t q, double at)
{
    if (at < z->free_at[q])
        at = z->free_at[q];
    if (at < z->key[q])
        set_key(z, q, at);
    return true;
}

static void emit(vorder *z, int32_t r, mp_op_kind kind, int32_t mb, int32_t chunk)
{
    mp_op_list *l = &z->out[r];
    l->ops[l->n++] = (mp_op){.kind = (uint8_t)kind, .microbatch = mb, .chunk = chunk};
}

/* Places F or B of micro-batch i on rank r's chunk c at `now`. */
static bool place(vorder *z, int32_t r, int32_t c, mp_op_kind kind, int32_t i, double now)
{
    int32_t k = stage_of(z, r, c), m = z->m;
    double end = now + dur(z, kind, k);
    emit(z, r, kind, i, c);
    z->makespan = end > z->makespan ? end : z->makespan;
    if (z->rt && kind == MP_OP_F && i == 0)
        z->rt[r].f0_end[c] = end;
    if (kind == MP_OP_F) {
        z->f_end[(size_t)k * m + i] = end;
        z->next_f[k]++;
        z->live[r]++;
        z->live_c[2 * r + c]++;
        z->held[r] += act(z, k);
        if (k == z->S - 1) {
            z->free_at[r] = end;
            return true;
        }
        /* a send waits until it has landed (synchronous p2p) */
        z->free_at[r] = end + link_time(z, k);
        int32_t q = rank_of(z, k + 1);
        return q == r || wake(z, q, end + link_time(z, k));
    }
    z->b_end[(size_t)k * m + i] = end;
    z->next_b[k]++;
    z->wq[(size_t)r * 2 * m + z->wq_tail[r]++] = (i << 1) | c;
    if (k == 0) {
        z->free_at[r] = end;
        return true;
    }
    z->free_at[r] = end + link_time(z, k - 1);
    int32_t q = rank_of(z, k - 1);
    return q == r || wake(z, q, end + link_time(z, k - 1));
}

/* Rank r's ready F (chunk 1 first) at `now`: 1 placed, 0 none (soonest
 * lowered to when one will be), -1 out of memory. */
static int try_f(vorder *z, int32_t r, double now, double *soonest)
{
    for (int32_t c = 1; c >= 0; c--) {
        int32_t k = stage_of(z, r, c), i = z->next_f[k];
        /* A rank whose stash is chunk-0 activations waiting for their
         * chunk-1 forward here, with no room left for that forward, is a
         * deadlock (issue: mixtral-8x7b pp 8 m 32 reached it, its last stage
         * holding more than the others). So a chunk-0 forward is taken only
         * while the waiting ones, itself included, leave room for one
         * chunk-1 forward. That makes the greedy complete under any times
         * and sizes: let i be the oldest micro-batch with an op left and k
         * the first stage whose forward of i is not placed. Every older
         * micro-batch is done, so stage k holds nothing; if k is a chunk-1
         * stage its rank holds only chunk-0 activations waiting there
         * (i's among them), which by this rule leave room for that forward;
         * if k is a chunk-0 stage the rank holds nothing at all. i's F, and
         * after it its B and W (which need no room), can always be placed,
         * so some op can. With unit sizes this refuses exactly what the
         * rule it replaced did (2p - 1 waiting at most), so the unit-time
         * order is unchanged. */
        int32_t waiting = z->next_f[stage_of(z, r, 0)] - z->next_f[stage_of(z, r, 1)];
        double a = act(z, k), a1 = act(z, stage_of(z, r, 1));
        bool full = z->per_chunk ? z->live_c[2 * r + c] >= z->p
                                 : z->held[r] + a > z->cap[r] ||
                                       (c == 0 && (waiting + 1) * a + a1 > z->cap[r]);
        /* With lead, also ZB-V's warm-up depth: rank r runs at most
         * 2(p - r) - 1 chunk-0 forwards ahead of its chunk-1 ones (Qi et
         * al. 2024's V; the forwards that fit before micro-batch 0 comes
         * back down the V). The byte cap alone let a rank whose chunk 0 is
         * light and fast (DeepSeek-V3's rank 0 on the V split) run dozens
         * ahead, and every later rank, always finding a chunk-0 forward
         * ready, filled its stash with chunk 0: chunk 1 crossed the V one
         * micro-batch at a time. The bound keeps the argument above: the
         * oldest micro-batch's chunk-0 forward has none waiting ahead of it
         * (0 < 2(p - r) - 1). */
        bool deep = c == 0 && waiting >= 2 * (z->p - r) - 1, ahead = deep && z->lead;
        if (i >= z->m || full || ahead)
            continue;
        z->lead_binds = z->lead_binds || deep;
        double rd = f_ready(z, k, i);
        if (rd <= now)
            return place(z, r, c, MP_OP_F, i, now) ? 1 : -1;
        *soonest = rd < *soonest ? rd : *soonest;
    }
    return 0;
}

/* The same for a ready B, chunk 0 first. */
static int try_b(vorder *z, int32_t r, double now, double *soonest)
{
    for (int32_t c = 0; c <= 1; c++) {
        int32_t k = stage_of(z, r, c), i = z->next_b[k];
        if (i >= z->m)
            continue;
        double rd = b_ready(z, k, i);
        if (rd <= now)
            return place(z, r, c, MP_OP_B, i, now) ? 1 : -1;
        *soonest = rd < *soonest ? rd : *soonest;
    }
    return 0;
}

/* Rank r's choice at `now`: runs one op and returns -1, or returns when it
 * should look again (INFINITY: not before a neighbour places an op). -2 when
 * out of memory. */
static double step(vorder *z, int32_t r, double now)
{
    double soonest = INFINITY;
    int got = z->b_first ? try_b(z, r, now, &soonest) : try_f(z, r, now, &soonest);
    if (got == 0)
        got = z->b_first ? try_f(z, r, now, &soonest) : try_b(z, r, now, &soonest);
    if (got != 0)
        return got > 0 ? -1 : -2;
    if (z->wq_head[r] < z->wq_tail[r]) {
        int32_t w = z->wq[(size_t)r * 2 * z->m + z->wq_head[r]++];
        z->live[r]--;
        z->live_c[2 * r + (w & 1)]--;
        z->held[r] -= act(z, stage_of(z, r, w & 1));
        emit(z, r, MP_OP_W, w >> 1, w & 1);
        double end = now + dur(z, MP_OP_W, stage_of(z, r, w & 1));
        z->free_at[r] = end;
        z->makespan = end > z->makespan ? end : z->makespan;
        if (z->rt)
            z->rt[r].w_end[w & 1] = end;
        return -1;
    }
    return soonest;
}

static mp_status run(vorder *z, mp_error *err)
{
    int64_t left = (int64_t)z->S * z->m * 3;
    for (int32_t r = 0; r < z->p; r++)
        set_key(z, r, 0.0);
    /* the rank with the earliest key, the lower rank on a tie, steps */
    while (left > 0 && z->key[z->win[1]] < INFINITY) {
        int32_t r = z->win[1];
        double next = step(z, r, z->key[r]);
        if (next == -2)
            return MP_ENOMEM;
        if (next == -1) {
            left--;
            next = z->free_at[r];
        }
        set_key(z, r, next); /* INFINITY: a neighbour's op wakes it */
    }
    if (left > 0)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "schedule",
                            "zb-v order stalled (p=%d m=%d)", (int)z->p, (int)z->m);
    return MP_OK;
}

/* Per thread, two work areas kept between calls (zbv_choose's, slot 0, and
 * greedy's, slot 1, which zbv_choose calls): the planner builds the orders
 * for every candidate it costs, and fresh allocations of these sizes (half a
 * megabyte at pp 16, m 64) came back as new pages each time. Areas over
 * SCRATCH_KEEP are not kept (the caller mallocs and frees them). */
enum { SCRATCH_KEEP = 4 << 20 };
typedef struct scratch_areas {
    void *p[2];
    size_t n[2];
} scratch_areas;

static void scratch_free(void *v)
{
    scratch_areas *a = v;
    for (int i = 0; a && i < 2; i++)
        free(a->p[i]);
    free(a);
}

static mp_thread_block scratch_block = MP_THREAD_BLOCK(scratch_free);

/* This thread's area `slot` of at least `bytes` (uninitialised), or NULL
 * (then the caller allocates its own). */
static void *scratch(int slot, size_t bytes)
{
    if (bytes > SCRATCH_KEEP)
        return NULL;
    scratch_areas *a = mp_thread_block_get(&scratch_block, sizeof *a);
    if (!a)
        return NULL;
    if (a->n[slot] < bytes) {
        free(a->p[slot]);
        a->p[slot] = malloc(bytes);
        a->n[slot] = a->p[slot] ? bytes : 0;
    }
    return a->p[slot];
}

/* The pace of a run's last half: when stage 0's forwards of micro-batches
 * m/2 and m-1 end (f_end), per micro-batch between them; 0 below m = 4. */
static double last_half_pace(const double *f_end, int32_t m)
{
    int32_t h = m / 2;
    return m >= 4 ? (f_end[m - 1] - f_end[h]) / (double)(m - 1 - h) : 0.0;
}

/* One list scheduling run (t NULL: unit times) into out[0..p-1]; pace (may
 * be NULL): last_half_pace of the run; binds (may be NULL): without lead,
 * whether the lead would have refused a forward (vorder.lead_binds). */
static mp_status greedy(int32_t p, int32_t m, const mp_op_times *t, bool b_first,
                        bool per_chunk, bool lead, mp_op_list *out, double *makespan, mp_v_rank_times *rt,
                        double *pace, bool *binds, mp_error *err)
{
    size_t sm = (size_t)2 * p * m;
    vorder z = {.p = p, .m = m, .S = 2 * p, .t = t, .out = out, .b_first = b_first,
                .per_chunk = per_chunk, .lead = lead, .rt = rt, .w = 1};
    while (z.w < p)
        z.w *= 2;
    for (int32_t r = 0; rt && r < p; r++)
        rt[r] = (mp_v_rank_times){-1.0, {-1.0, -1.0}, {-1.0, -1.0}};
    size_t nd = 2 * sm + (size_t)13 * p + (size_t)z.w, nn = sm + (size_t)9 * p + (size_t)2 * z.w;
    double *area = scratch(1, nd * sizeof(double) + nn * sizeof(int32_t));
    double *d = area ? area : malloc(nd * sizeof *d);
    int32_t *n = area ? (int32_t *)(area + nd) : malloc(nn * sizeof *n);
    mp_status st = MP_ENOMEM;
    if (d && n) {
        memset(n, 0, nn * sizeof *n);
        z.f_end = d;
        z.b_end = d + sm;
        z.free_at = d + 2 * sm;
        z.held = z.free_at + p;
        z.cap = z.held + p;
        z.key = z.cap + p;
        fill_tab(&z, z.key + z.w);
        for (size_t i = 0; i < 2 * sm; i++)
            d[i] = -1;
        z.win = n + sm + (size_t)9 * p;
        for (int32_t i = 0; i < z.w; i++) { /* every key INFINITY: any winner */
            z.key[i] = INFINITY;
            z.win[z.w + i] = i;
        }
        for (int32_t i = z.w - 1; i >= 1; i--)
            z.win[i] = z.win[2 * i];
        for (int32_t r = 0; r < p; r++) {
            z.free_at[r] = z.held[r] = 0;
            /* the closed form's 2p chunks at the mean of the rank's two; a
             * hair over it, so that rounding cannot refuse the last one */
            z.cap[r] = p * (act(&z, r) + act(&z, 2 * p - 1 - r)) * (1 + 1e-12);
        }
        z.wq = n;
        z.next_f = n + sm;
        z.next_b = z.next_f + 2 * p;
        z.wq_head = z.next_b + 2 * p;
        z.wq_tail = z.wq_head + p;
        z.live = z.wq_tail + p;
        z.live_c = z.live + p;
        st = run(&z, err);
    }
    for (int32_t r = 0; rt && st == MP_OK && r < p; r++)
        rt[r].end = z.free_at[r];
    if (makespan)
        *makespan = z.makespan;
    if (pace)
        *pace = st == MP_OK ? last_half_pace(z.f_end, m) : 0.0;
    if (binds)
        *binds = z.lead_binds;
    if (!area) {
        free(d);
        free(n);
    }
    if (st == MP_ENOMEM)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    return st;
}

/* The replay's hints in a compute-only copy of lists whose transfers are
 * not each right at their own op (DualPipeV's, as dualpipev.py commits
 * them: both receives of an F&B unit before its F, both sends after its B
 * and W; phase 2's F0 sent after the F1 that follows it, and the next F0's
 * input received before that F1; phase 3's W waiting for the next F1's
 * input; the last rank's last phase-2 F1 sent in phase 4; build_order sets
 * them): */
enum {
    MP_XFER_DEFER = 1, /* this F's or B's send waits for the next flush */
    MP_XFER_FLUSH = 2, /* after this op (and its own send), the sends deferred
                          since the last flush, in order */
    /* this op also waits for the input of the next F (B) of chunk c after
     * it in the list: MP_XFER_JOIN << (2 * (B) + c) */
    MP_XFER_JOIN = 4,
};

/* The hint: also wait for the input of the next op of op's kind and chunk. */
static uint8_t join_bit(const mp_op *op)
{
    return (uint8_t)(MP_XFER_JOIN << (2 * (op->kind == MP_OP_B) + (op->chunk & 1)));
}

/* When op (F or B, on rank r) could start by its input (as b_ready, f_ready). */
static double op_ready(const vorder *z, int32_t r, const mp_op *op)
{
    int32_t k = stage_of(z, r, op->chunk);
    return op->kind == MP_OP_F ? f_ready(z, k, op->microbatch)
           : op->kind == MP_OP_B ? b_ready(z, k, op->microbatch)
                                 : 0.0;
}

/* Posts the output of op (F or B on rank r) at `at`: the receiver sees it
 * one transfer later, and the sender waits for it (Megatron's p2p is
 * synchronous; engine.c run_send); *free_at becomes `at` plus the transfer.
 * The rank the message wakes, or -1 (none: the last stage's F, stage 0's B). */
static int32_t post(vorder *z, int32_t r, const mp_op *op, double at, double *free_at)
{
    int32_t k = stage_of(z, r, op->chunk);
    if (op->kind == MP_OP_F) {
        z->f_end[(size_t)k * z->m + op->microbatch] = at;
        if (k + 1 >= z->S)
            return -1;
        *free_at = at + link_time(z, k);
        return rank_of(z, k + 1);
    }
    z->b_end[(size_t)k * z->m + op->microbatch] = at;
    if (k == 0)
        return -1;
    *free_at = at + link_time(z, k - 1);
    return rank_of(z, k - 1);
}

/* Posts op's output (F or B on rank r) in a commit posted at t0: DualPipe(V)
 * post a commit's sends together and wait for all of them (dualpipev.py
 * _commit_and_wait_comm; sim/engine.c end_commit), so each starts at t0 on
 * its link, behind the commit's earlier sends on that link (lq[0]: to rank
 * r+1, lq[1]: to r-1, each holding it for its link time less t->lat), and
 * lands one link time after it starts; *done becomes the later of itself
 * and that landing. The rank it wakes, or -1. */
static int32_t post_in_commit(vorder *z, int32_t r, const mp_op *op, double t0, double *lq,
                              double *done)
{
    int32_t k = stage_of(z, r, op->chunk), to = op->kind == MP_OP_F ? k + 1 : k - 1;
    double start = t0;
    if (to >= 0 && to < z->S && rank_of(z, to) != r) {
        double *l = &lq[rank_of(z, to) > r ? 0 : 1];
        double hold = link_time(z, to > k ? k : to) - (z->t ? z->t->lat : 0.0);
        start = *l > t0 ? *l : t0;
        *l = start + (hold > 0.0 ? hold : 0.0);
    }
    double landed = start;
    int32_t w = post(z, r, op, start, &landed);
    if (landed > *done)
        *done = landed;
    return w;
}

/* replay's doubles beyond the 2 x 2pm ends, per rank: free_at, held, the
 * 5 x 2 stage times, the open commit's post and end and its two links */
#define REPLAY_PER_RANK 16

/* The step time of given lists under the times the list scheduling assumes
 * (each rank runs its ops in order, each as soon as its input has landed),
 * or INFINITY when a rank would stash more than the cap (capped). Ranks are
 * run until they block; the op that unblocks one puts it back on the stack.
 * xfers: the lists carry their transfers (mp_schedule_build's), which run
 * as the engine runs DualPipe(V)'s: a run of transfers is one commit, whose
 * sends are posted together (post_in_commit) and whose receives wait for
 * their messages, the rank going on once all of it is done (for lists with
 * one send a commit, ZB-V's, the same as a send that the sender waits for
 * before its next op). Without them each F's or B's output is sent as it
 * ends, or where its MP_XFER_* hints say, in one commit with the sends
 * deferred to it.
 * end_at (may be NULL): per rank, each op's end (a transfer's: when the
 * rank is free after it). */
static double replay(int32_t p, int32_t m, const mp_op_times *t, const mp_op_list *lists,
                     bool xfers, double *d, int32_t *n, bool capped, double *const *end_at,
                     mp_v_rank_times *rt)
{
    size_t sm = (size_t)2 * p * m;
    vorder z = {.p = p, .m = m, .S = 2 * p, .t = t, .f_end = d, .b_end = d + sm};
    double *free_at = d + 2 * sm, *held = free_at + p, makespan = 0;
    fill_tab(&z, held + p);
    /* per rank, its open commit (xfers): when posted (-1: none), when its
     * sends have landed, its two links' queues */
    double *c_at = held + p + 5 * z.S, *c_done = c_at + p, *lq = c_done + p;
    int32_t *pos = n, *stack = n + p, *queued = n + 2 * p, top = 0;
    for (size_t i = 0; i < 2 * sm; i++)
        d[i] = -1;
    for (int32_t r = 0; r < p; r++) {
        if (rt)
            rt[r] = (mp_v_rank_times){-1.0, {-1.0, -1.0}, {-1.0, -1.0}};
        free_at[r] = held[r] = 0;
        c_at[r] = -1;
        pos[r] = 0;
        stack[top++] = r;
        queued[r] = 1;
    }
    while (top > 0) {
        int32_t r = stack[--top];
        queued[r] = 0;
        double cap = p * (act(&z, r) + act(&z, 2 * p - 1 - r)) * (1 + 1e-12);
        for (; pos[r] < lists[r].n; pos[r]++) {
            const mp_op *op = &lists[r].ops[pos[r]];
            int32_t k = stage_of(&z, r, op->chunk), i = op->microbatch, q = -1;
            mp_op_kind kind = (mp_op_kind)op->kind;
            if (kind > MP_OP_W && c_at[r] < 0) { /* a commit opens */
                c_at[r] = c_done[r] = lq[2 * r] = lq[2 * r + 1] = free_at[r];
            } else if (kind <= MP_OP_W && c_at[r] >= 0) { /* and is done */
                free_at[r] = c_done[r] > free_at[r] ? c_done[r] : free_at[r];
                c_at[r] = -1;
            }
            if (kind == MP_OP_RECV_FWD || kind == MP_OP_RECV_BWD) {
                double rd = kind == MP_OP_RECV_FWD ? f_ready(&z, k, i) : b_ready(&z, k, i);
                if (rd == INFINITY)
                    break; /* not sent yet */
                free_at[r] = rd > free_at[r] ? rd : free_at[r];
            } else if (kind == MP_OP_SEND_FWD || kind == MP_OP_SEND_BWD) {
                mp_op c = {.kind = kind == MP_OP_SEND_FWD ? MP_OP_F : MP_OP_B,
                           .microbatch = i, .chunk = op->chunk};
                q = post_in_commit(&z, r, &c, c_at[r], lq + 2 * r, &c_done[r]);
                if (q >= 0 && q != r && !queued[q]) {
                    stack[top++] = q;
                    queued[q] = 1;
                }
            }
            if (kind != MP_OP_F && kind != MP_OP_B && kind != MP_OP_W) {
                if (end_at)
                    end_at[r][pos[r]] = c_done[r] > free_at[r] ? c_done[r] : free_at[r];
                continue;
            }
            double rd = kind == MP_OP_F   ? f_ready(&z, k, i)
                        : kind == MP_OP_B ? b_ready(&z, k, i)
                                          : 0;
            for (int b = 0; b < 4 && op->xfer >= MP_XFER_JOIN && rd < INFINITY; b++) {
                if (!(op->xfer & (MP_XFER_JOIN << b)))
                    continue;
                /* the next op of that kind and chunk (strip_transfers
                 * checked that there is one) */
                const mp_op *x = op + 1;
                while (x->kind != (b >= 2 ? MP_OP_B : MP_OP_F) || x->chunk != (b & 1))
                    x++;
                double rn = op_ready(&z, r, x);
                rd = rn > rd ? rn : rd;
            }
            if (rd == INFINITY)
                break; /* its input is not computed (or not sent) yet */
            double start = rd > free_at[r] ? rd : free_at[r], end = start + dur(&z, kind, k);
            makespan = end > makespan ? end : makespan;
            free_at[r] = end;
            if (end_at)
                end_at[r][pos[r]] = end;
            if (rt && kind == MP_OP_W)
                rt[r].w_end[op->chunk & 1] = end; /* the rank's ops run in list order */
            else if (rt && kind == MP_OP_F && i == 0)
                rt[r].f0_end[op->chunk & 1] = end;
            if (kind == MP_OP_F && (held[r] += act(&z, k)) > cap && capped)
                return INFINITY;
            /* the commit after the op: its own send, then (FLUSH) those
             * deferred since the last flush, in list order, all posted at
             * its end (post_in_commit) */
            double done = end, links[2] = {end, end};
            if (kind == MP_OP_W)
                held[r] -= act(&z, k);
            else if (!(op->xfer & MP_XFER_DEFER) &&
                     !(xfers && (kind == MP_OP_F ? k + 1 < z.S : k > 0)))
                q = post_in_commit(&z, r, op, end, links, &done); /* else its send op posts it */
            if (op->xfer & MP_XFER_FLUSH) {
                int32_t j = pos[r];
                while (j > 0 && !(lists[r].ops[j - 1].xfer & MP_XFER_FLUSH))
                    j--;
                for (; j <= pos[r]; j++)
                    if (lists[r].ops[j].xfer & MP_XFER_DEFER) {
                        int32_t w = post_in_commit(&z, r, &lists[r].ops[j], end, links, &done);
                        if (w >= 0 && w != r && !queued[w]) {
                            stack[top++] = w;
                            queued[w] = 1;
                        }
                    }
            }
            free_at[r] = done;
            if (q >= 0 && q != r && !queued[q]) {
                stack[top++] = q;
                queued[q] = 1;
            }
        }
    }
    /* a rank's last op ends when it is free again: a send (the lists of
     * mp_schedule_build follow every transfer's F or B with one) ends as its
     * message lands. -1 for a rank whose list stalled. */
    for (int32_t r = 0; r < p; r++) /* a list's last commit */
        if (c_at[r] >= 0 && c_done[r] > free_at[r])
            free_at[r] = c_done[r];
    for (int32_t r = 0; rt && r < p; r++)
        rt[r].end = pos[r] == lists[r].n ? free_at[r] : -1.0;
    return makespan;
}

static atomic_bool test_stall; /* mp_schedule_zbv_test_stall */

void mp_schedule_zbv_test_stall(bool on)
{
    atomic_store(&test_stall, on);
}

/* Clears the lists a stalled run left half filled. */
static void clear_lists(mp_op_list *l, int32_t p)
{
    for (int32_t r = 0; r < p; r++)
        l[r].n = 0;
}

/* The orders that do not depend on the times -- ZB-V's unit-time order and
 * DualPipeV's phases -- for one (schedule, p, m), F, B and W only (rank r's
 * 6m ops at ops + 6m r): the planner times them for every candidate it
 * costs, and search costs many candidates of the same (p, m). Kept per
 * thread in a direct-mapped table (allocated by the first call on each
 * thread, freed at its exit: core/thread_block.h); an
 * entry is immutable once built, a colliding key replaces it. Orders of
 * more than ORDER_MAX_OPS ops are not kept (so the table holds at most
 * ORDER_SETS x 384 KiB). */
enum { ORDER_SETS = 32, ORDER_MAX_OPS = 1 << 15 };
typedef struct order_entry {
    int32_t s, p, m; /* p == 0: empty */
    mp_op *ops;
    int32_t *n;      /* per rank: its ops (6m once complete) */
} order_entry;
/* And mp_schedule_v_times' answers, keyed on everything they depend on:
 * the schedule, p, m, the test stall flag and the op times bit for bit
 * (search costs many candidates whose stages cost the same: the DP and
 * optimizer settings, the micro-batch counts past the replayed ones).
 * Only for p <= TIMES_MAX_P (an entry is then at most 3.8 KiB). */
enum { TIMES_SETS = 512, TIMES_MAX_P = 32 };
typedef struct times_entry {
    int32_t s, p, m, stall; /* p == 0: empty; s past MP_SCHED_COUNT: windows */
    int32_t used;           /* mp_schedule_v_windows: the micro-batches replayed */
    double lat;             /* and t->lat */
    double *key;            /* f, b, w, link, act: 10p */
    mp_v_rank_times *rt;    /* p */
} times_entry;
typedef struct order_cache {
    order_entry e[ORDER_SETS];
    times_entry te[TIMES_SETS];
} order_cache;

static void order_cache_free(void *v)
{
    order_cache *c = v;
    for (int i = 0; c && i < ORDER_SETS; i++) {
        free(c->e[i].ops);
        free(c->e[i].n);
    }
    for (int i = 0; c && i < TIMES_SETS; i++) {
        free(c->te[i].key);
        free(c->te[i].rt);
    }
    free(c);
}

static mp_thread_block order_block = MP_THREAD_BLOCK(order_cache_free);

static order_cache *order_cache_of_thread(void)
{
    return mp_thread_block_get(&order_block, sizeof(order_cache));
}

/* Whether transfer op x (a receive or a send) is c's own. */
static bool xfer_of(const mp_op *x, const mp_op *c)
{
    mp_op_kind k = (mp_op_kind)x->kind;
    mp_op_kind want = k == MP_OP_RECV_FWD || k == MP_OP_SEND_FWD ? MP_OP_F : MP_OP_B;
    return c->kind == want && c->microbatch == x->microbatch && c->chunk == x->chunk;
}

/* Whether transfer op x of rank r is the V's turn at rank p-1 (a hand-over
 * between its own chunks: no time, and its consumer is later on the rank,
 * so the replay posts it as its F or B ends, wherever the list has it). */
static bool local_xfer(int32_t p, int32_t r, const mp_op *x)
{
    int32_t peer, peer_chunk;
    return mp_op_peer(MP_SCHED_DUALPIPEV, p, 2, r, x, &peer, &peer_chunk) && peer == r;
}

/* One rank's list l without its transfers into out (room for per ops,
 * *n of them), each compute op carrying the MP_XFER_* hints that tell the
 * replay where the list receives and sends: a receive before an op is that
 * op's own or, with a JOIN bit on it, the next op's of its kind and chunk;
 * the sends after an op are its own first (no hint) and, with FLUSH on it,
 * the deferred ones (DEFER) since the last flush, in their order. A list
 * laid out otherwise is refused. */
static mp_status strip_transfers(int32_t p, int32_t r, const mp_op_list *l, mp_op *out,
                                 size_t per, int32_t *n, mp_error *err)
{
    int32_t last = -1, flushed = -1; /* in out */
    const mp_op *recv[4], *send[4], *joined[4] = {NULL, NULL, NULL, NULL};
    int nr = 0, ns = 0;
    for (int32_t i = 0; i <= l->n; i++) {
        const mp_op *o = i < l->n ? &l->ops[i] : NULL;
        mp_op_kind k = o ? (mp_op_kind)o->kind : MP_OP_W;
        if (o && k > MP_OP_W && local_xfer(p, r, o))
            continue;
        if (o && (k == MP_OP_RECV_FWD || k == MP_OP_RECV_BWD)) {
            if (nr == 4)
                goto bad;
            recv[nr++] = o;
            continue;
        }
        if (o && (k == MP_OP_SEND_FWD || k == MP_OP_SEND_BWD)) {
            if (ns == 4 || last < 0 || nr > 0)
                goto bad;
            send[ns++] = o;
            continue;
        }
        /* a compute op or the end: first the sends after the last op, its
         * own first, then each to the first op since the last flush it
         * belongs to (a DEFER is always flushed here, so none is pending
         * before) */
        int own = ns > 0 && xfer_of(send[0], &out[last]);
        if (ns > own) {
            int32_t j = flushed + 1;
            for (int q = own; q < ns; q++, j++) {
                while (j <= last && !xfer_of(send[q], &out[j]))
                    j++;
                if (j > last || (own && j == last))
                    goto bad;
                out[j].xfer |= MP_XFER_DEFER;
            }
            out[last].xfer |= MP_XFER_FLUSH;
            flushed = last;
        }
        ns = 0;
        if (!o)
            break;
        if ((size_t)*n == per)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "schedule",
                                "more than 6m compute ops on a V rank");
        mp_op c = *o;
        c.xfer = 0;
        if (k != MP_OP_W) { /* an op received for ahead is this one */
            int b = 2 * (k == MP_OP_B) + (c.chunk & 1);
            if (joined[b] && !xfer_of(joined[b], &c))
                goto bad;
            joined[b] = NULL;
        }
        for (int q = 0; q < nr; q++)
            if (!xfer_of(recv[q], &c)) { /* a later op's, received first */
                mp_op want = {.kind = recv[q]->kind == MP_OP_RECV_FWD ? MP_OP_F : MP_OP_B,
                              .chunk = recv[q]->chunk};
                int b = 2 * (want.kind == MP_OP_B) + (want.chunk & 1);
                if (joined[b] || (want.kind == k && want.chunk == c.chunk))
                    goto bad;
                c.xfer |= join_bit(&want);
                joined[b] = recv[q];
            }
        nr = 0;
        out[(*n)++] = c;
        last = *n - 1;
    }
    for (int b = 0; b < 4; b++)
        if (joined[b])
            nr = 1;
    return nr == 0 ? MP_OK
                   : mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "schedule",
                                  "a V rank's last receive has no op");
bad:
    return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "schedule",
                        "a V rank's transfers are not where the replay can place them");
}

/* Builds the time-free order of (s, p, m) into e (ops and n allocated):
 * ZB-V's unit-time greedy, DualPipeV's lists without their transfers. */
static mp_status build_order(mp_schedule_kind s, int32_t p, int32_t m, order_entry *e,
                             mp_error *err)
{
    size_t per = (size_t)6 * m;
    e->ops = malloc((size_t)p * per * sizeof *e->ops);
    e->n = calloc((size_t)p, sizeof *e->n);
    mp_op_list *l = calloc((size_t)p, sizeof *l);
    mp_status st = MP_OK;
    if (!e->ops || !e->n || !l)
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    if (st == MP_OK && s == MP_SCHED_ZBV) {
        for (int32_t r = 0; r < p; r++)
            l[r] = (mp_op_list){.ops = e->ops + (size_t)r * per, .cap = (int32_t)per};
        st = greedy(p, m, NULL, false, false, false, l, NULL, NULL, NULL, NULL, err);
        for (int32_t r = 0; r < p && st == MP_OK; r++)
            e->n[r] = l[r].n;
    } else if (st == MP_OK) {
        st = mp_schedule_build_all(s, p, 2, m, l, err);
        for (int32_t r = 0; r < p && st == MP_OK; r++)
            st = strip_transfers(p, r, &l[r], e->ops + (size_t)r * per, per, &e->n[r], err);
        for (int32_t r = 0; r < p && l[r].ops; r++)
            mp_op_list_free(&l[r]);
    }
    free(l);
    if (st != MP_OK) {
        free(e->ops);
        free(e->n);
        e->ops = NULL;
        e->n = NULL;
    }
    return st;
}

/* The time-free order of (s, p, m): lists[0..p-1] point into the thread's
 * table, or (*owned set) into e, which the caller frees, where the table
 * cannot keep it. */
static mp_status time_free_order(mp_schedule_kind s, int32_t p, int32_t m, mp_op_list *lists,
                                 order_entry *own, bool *owned, mp_error *err)
{
    *owned = false;
    order_cache *c = (int64_t)p * 6 * m <= ORDER_MAX_OPS ? order_cache_of_thread() : NULL;
    order_entry *e = own;
    if (c) {
        uint32_t h = 2166136261u; /* FNV-1a over the key's values */
        int32_t key[3] = {(int32_t)s, p, m};
        for (int i = 0; i < 3; i++)
            h = (h ^ (uint32_t)key[i]) * 16777619u;
        /* the high bits, mixed down: the low five of h follow the key's
         * low five alone, so m and m + 32 (DualPipeV's tries at 6p, 18p,
         * 54p at pp 8) would share a set and evict each other every time */
        h ^= h >> 16;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        e = &c->e[h % ORDER_SETS];
        if (!(e->p == p && e->m == m && e->s == (int32_t)s)) {
            free(e->ops);
            free(e->n);
            *e = (order_entry){0};
            mp_status st = build_order(s, p, m, e, err);
            if (st != MP_OK)
                return st;
            e->s = (int32_t)s;
            e->p = p;
            e->m = m;
        }
    } else {
        *own = (order_entry){0};
        mp_status st = build_order(s, p, m, own, err);
        if (st != MP_OK)
            return st;
        *owned = true;
    }
    for (int32_t r = 0; r < p; r++)
        lists[r] = (mp_op_list){.ops = e->ops + (size_t)r * 6 * m, .n = e->n[r],
                                .cap = e->n[r]};
    return MP_OK;
}

static void free_entry(order_entry *e)
{
    free(e->ops);
    free(e->n);
}

/* zbv_choose's candidates: 0 the unit-time order; 1, 2 list scheduling over
 * the real times, F or B first; 3, 4 the same with ZB-V's warm-up lead
 * (vorder.lead); FALLBACK the per-chunk greedy, tried only if all stall. */
enum { FALLBACK = 5 };

/* The least any order's step can grow per micro-batch: the busiest rank's
 * f + b + w over its two stages with the transfers it waits for (each F's
 * and B's send but those at the V's turn and ends, link_time). */
static double busiest_round(int32_t p, const mp_op_times *t)
{
    int32_t S = 2 * p;
    double most = 0.0;
    for (int32_t r = 0; r < p; r++) {
        int32_t a = r, z = S - 1 - r;
        double busy = t->f[a] + t->b[a] + t->w[a] + t->f[z] + t->b[z] + t->w[z];
        if (t->link) /* F of a and of z, B of z and of a (as link_time) */
            busy += (a != p - 1 ? t->link[a] : 0.0) + (z != S - 1 ? t->link[z] : 0.0) +
                    (z - 1 != p - 1 ? t->link[z - 1] : 0.0) + (a > 0 ? t->link[a - 1] : 0.0);
        most = busy > most ? busy : most;
    }
    return most;
}

/* ZB-V's order under t (not NULL) into out (may be NULL) and the chosen
 * order's times into rt (may be NULL): mp_schedule_zbv_order's choice.
 * target > m (rt only, out NULL): the orders are built for m micro-batches
 * and each one's step extended to target by its pace (the larger of its
 * last half's, last_half_pace, and the busiest rank's round, which no order
 * beats), the fastest so extended kept and its rank times shifted by as
 * much (mp_schedule_zbv_times). */
static mp_status zbv_choose(int32_t p, int32_t m, const mp_op_times *t, mp_op_list *out,
                            mp_v_rank_times *rt, bool *fallback, int32_t target, mp_error *err)
{
    /* Qi et al. try several schedules and keep the fastest; here five
     * orders: the unit-time one, and list scheduling over the real times
     * with F or B first, with and without the warm-up lead (the list
     * scheduling's byte cap alone let a light rank 0 flood the V with
     * chunk-0 forwards on uneven splits: docs/simulator.md, "ZB-V on
     * uneven stages"), each timed by replay(); the first of the fastest
     * that keeps to the memory cap wins. A run that stalls (it cannot, see
     * try_f; a guard) is dropped; when none is left the fallback is the
     * greedy holding at most p micro-batches of each chunk, which completes
     * and keeps to the cap under any times and sizes, and *fallback says so.
     * The unit-time order is the thread's kept one (time_free_order). */
    mp_error e2;
    bool stall = atomic_load(&test_stall);
    size_t per = (size_t)6 * m, sm = (size_t)2 * p * m, nc = (size_t)(FALLBACK + 1) * p;
    /* one area: the doubles, the rank times, the lists, the ops, the ints */
    size_t bd = (2 * sm + (size_t)REPLAY_PER_RANK * p) * sizeof(double),
           bt = nc * sizeof(mp_v_rank_times), bl = nc * sizeof(mp_op_list),
           bo = nc * per * sizeof(mp_op), bn = (size_t)3 * p * sizeof(int32_t);
    char *area = scratch(0, bd + bt + bl + bo + bn);
    mp_op_list *cand = area ? (mp_op_list *)(area + bd + bt) : calloc(nc, sizeof *cand);
    mp_op *ops = area ? (mp_op *)(area + bd + bt + bl) : malloc(nc * per * sizeof *ops);
    double *d = area ? (double *)area : malloc(bd);
    int32_t *n = area ? (int32_t *)(area + bd + bt + bl + bo) : malloc(bn);
    mp_v_rank_times *crt = !rt ? NULL : area ? (mp_v_rank_times *)(area + bd) : malloc(bt);
    if (cand)
        memset(cand, 0, bl);
    order_entry own = {0};
    bool owned = false;
    mp_status st = MP_OK;
    if (!cand || !ops || !d || !n || (rt && !crt))
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    int best = -1;
    double best_time = INFINITY, own_time = INFINITY, best_shift = 0.0;
    double extra = target > m ? (double)(target - m) : 0.0, floor_pace = 0.0;
    if (extra > 0.0)
        floor_pace = busiest_round(p, t);
    /* A lower bound on any order's step: rank r (stages r and 2p-1-r) is
     * busy m (f + b + w) on each of its stages, and its first forward waits
     * for the stages before it. The warm-up-lead orders (3, 4) cost as much
     * as the others again, and they only help where the orders before stay
     * far from it (a light rank flooding the V, 15% to 5.8x over it): within
     * 2% of the bound none can gain more than 2%, and they are skipped (the
     * bound leaves out the drain: GPT-3 175B's even split at pp 8, m 128,
     * orders 1.6% over it). Each is also skipped where the lead never bound
     * in the run without it (1 for 3, 2 for 4): the same decisions, the
     * same order, which cannot be faster. Extended to target, the bound is
     * target's and the times compared the extended ones. */
    double lb = 0.0, fill = 0.0;
    for (int32_t r = 0; r < p; r++) {
        int32_t a = r, z = 2 * p - 1 - r;
        double busy = (double)(target > m ? target : m) *
                      (t->f[a] + t->b[a] + t->w[a] + t->f[z] + t->b[z] + t->w[z]);
        if (fill + busy > lb)
            lb = fill + busy;
        fill += t->f[a];
    }
    bool binds[FALLBACK] = {false};
    for (int c = 0; c <= FALLBACK && st == MP_OK; c++) {
        if (c == FALLBACK && best >= 0)
            break;
        if (c == 3 && best >= 0 && best_time <= 1.02 * lb)
            break;
        if ((c == 3 || c == 4) && best >= 0 && !binds[c - 2])
            continue;
        for (int32_t r = 0; r < p; r++)
            cand[c * p + r] = (mp_op_list){.ops = ops + ((size_t)c * p + r) * per,
                                           .cap = (int32_t)per};
        double pace = 0.0;
        if (stall && c < FALLBACK)
            st = MP_EINTERNAL;
        else if (c == 0)
            st = time_free_order(MP_SCHED_ZBV, p, m, cand, &own, &owned, &e2);
        else if (c < FALLBACK) /* its own times are its replay's, within the cap */
            st = greedy(p, m, t, c % 2 == 0, false, c >= 3, cand + c * p, &own_time,
                        crt ? crt + c * p : NULL, &pace, &binds[c], &e2);
        else
            st = greedy(p, m, t, false, true, false, cand + c * p, NULL, NULL, NULL, NULL, &e2);
        double time = INFINITY;
        if (st == MP_OK && (c == 0 || c == FALLBACK)) {
            time = replay(p, m, t, cand + c * p, false, d, n, true, NULL,
                          crt ? crt + c * p : NULL);
            pace = last_half_pace(d, m); /* stage 0's forward ends */
        } else if (st == MP_OK)
            time = own_time;
        else if (st == MP_EINTERNAL && c < FALLBACK)
            st = MP_OK; /* stalled: dropped */
        else
            *err = e2;
        /* a short run's last half is still its transient (p 16, m 4p:
         * 15-20% over the pace it settles to); from 8p on it is measured,
         * no more than the run's mean per micro-batch */
        if (m < 8 * p)
            pace = 0.0;
        else if (pace > time / m)
            pace = time / m;
        double shift = extra * (pace > floor_pace ? pace : floor_pace);
        time += shift;
        if (time < best_time || (c == FALLBACK && st == MP_OK && best < 0)) {
            best = c;
            best_time = time;
            best_shift = shift;
        }
    }
    if (st == MP_OK && fallback)
        *fallback = best == FALLBACK;
    for (int32_t r = 0; out && r < p && st == MP_OK; r++) {
        const mp_op_list *src = &cand[best * p + r];
        for (int32_t i = 0; i < src->n; i++)
            out[r].ops[out[r].n++] = src->ops[i];
    }
    if (rt && st == MP_OK) {
        /* the winner's capped replay ran it whole unless it is the
         * fallback over the cap: then run it again without the cap */
        if (best_time < INFINITY)
            for (int32_t r = 0; r < p; r++)
                rt[r] = crt[best * p + r];
        else
            replay(p, m, t, cand + best * p, false, d, n, false, NULL, rt);
        for (int32_t r = 0; r < p && best_shift > 0.0; r++) {
            rt[r].end += best_shift;
            for (int c = 0; c < 2; c++)
                rt[r].w_end[c] += rt[r].w_end[c] >= 0.0 ? best_shift : 0.0;
        }
    }
    if (owned)
        free_entry(&own);
    if (!area) {
        free(cand);
        free(ops);
        free(d);
        free(n);
        free(crt);
    }
    return st;
}

mp_status mp_schedule_zbv_order(int32_t p, int32_t m, const mp_op_times *t, mp_op_list *out,
                                bool *fallback, mp_error *err)
{
    if (fallback)
        *fallback = false;
    if (t)
        return zbv_choose(p, m, t, out, NULL, fallback, m, err);
    mp_error e2;
    mp_op_list *unit = calloc((size_t)p, sizeof *unit);
    if (!unit)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    order_entry own = {0};
    bool owned = false;
    mp_status st = atomic_load(&test_stall)
                       ? MP_EINTERNAL
                       : time_free_order(MP_SCHED_ZBV, p, m, unit, &own, &owned, &e2);
    for (int32_t r = 0; r < p && st == MP_OK; r++)
        for (int32_t i = 0; i < unit[r].n; i++)
            out[r].ops[out[r].n++] = unit[r].ops[i];
    if (owned)
        free_entry(&own);
    free(unit);
    if (st != MP_EINTERNAL) {
        if (st != MP_OK)
            *err = e2;
        return st;
    }
    clear_lists(out, p); /* cannot happen (the proof at try_f); kept as a guard */
    if (fallback)
        *fallback = true;
    return greedy(p, m, NULL, false, true, false, out, NULL, NULL, NULL, NULL, err);
}

mp_status mp_schedule_zbv_fallback_order(int32_t p, int32_t m, const mp_op_times *t,
                                         mp_op_list *out, mp_error *err)
{
    return greedy(p, m, t, false, true, false, out, NULL, NULL, NULL, NULL, err);
}

mp_status mp_schedule_v_replay(int32_t p, int32_t m, const mp_op_times *t, const mp_op_list *lists,
                               double *const *end, mp_error *err)
{
    size_t sm = (size_t)2 * p * m;
    double *d = malloc((2 * sm + (size_t)REPLAY_PER_RANK * p) * sizeof *d);
    int32_t *n = malloc((size_t)3 * p * sizeof *n);
    if (!d || !n) {
        free(d);
        free(n);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    }
    for (int32_t r = 0; r < p; r++)
        for (int32_t i = 0; i < lists[r].n; i++)
            end[r][i] = -1;
    replay(p, m, t, lists, true, d, n, false, end, NULL);
    free(d);
    free(n);
    for (int32_t r = 0; r < p; r++)
        if (lists[r].n > 0 && end[r][lists[r].n - 1] < 0)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "the V schedule's lists stall on replay");
    return MP_OK;
}

/* DualPipeV's steady state (schedule_vorder.h). Rank r's compute order
 * (sim/schedule.c build_dualpipev) runs 2(p-r-1) + 2(r+1) forwards and
 * p-r-1 B1 W1 F1 triples (phases 1-3: 5p - 3r - 3 ops), then its phase-4
 * blocks F0 B1 W1 F1 B0 W0 (two F&B pairs), block i holding micro-batches
 * 2p-r-1+i (F0), p-r-1+i (B1), p+i (F1) and i (B0). So a block's inputs
 * are blocks of the same or the previous level on the neighbours (F0, B1
 * from rank r-1 one level back; F1, B0 from rank r+1, or the turn on rank
 * p-1, at the same level) and its own forwards up to 2p-1-r levels back:
 * levels 0 .. m-2p are every rank's, and level i > 2p-1 is the same
 * max-plus map of levels i-2p .. i-1 for every m. The layout is checked
 * op by op (kind, chunk, micro-batch one later than a level before); a
 * list laid out otherwise is never cut. */
static bool dpv_steady_run(int32_t p, int32_t m, const mp_op_list *l, double *const *end)
{
    int32_t levels = m - 2 * p + 1; /* 0 .. m-2p */
    if (levels < 2 * p + 1)
        return false;
    double span = 0.0;
    for (int32_t r = 0; r < p; r++) {
        if (l[r].n != 6 * m)
            return false;
        span = fmax(span, end[r][l[r].n - 1]);
    }
    double tol = 1e-12 * span, lambda = 0.0;
    int32_t run = 0; /* consecutive levels one lambda after the one before */
    for (int32_t i = 1; i < levels; i++) {
        bool same = true;
        for (int32_t r = 0; r < p && same; r++) {
            int32_t at = 5 * p - 3 * r - 3 + 6 * i;
            for (int32_t q = 0; q < 6 && same; q++) {
                const mp_op *a = &l[r].ops[at + q], *b = &l[r].ops[at + q - 6];
                if (a->kind != b->kind || a->chunk != b->chunk ||
                    a->microbatch != b->microbatch + 1)
                    return false;
                double d = end[r][at + q] - end[r][at + q - 6];
                if (r == 0 && q == 0 && run == 0)
                    lambda = d;
                same = fabs(d - lambda) <= tol;
            }
        }
        run = same ? run + 1 : 0;
        /* 2p differences ending at level i >= 2p: level i+1 and on repeat */
        if (run >= 2 * p && i >= 2 * p)
            return true;
    }
    return false;
}

/* A time-free order (zb-v's unit-time one, dualpipev's) of m micro-batches
 * replayed under t: rt (may be NULL) as mp_schedule_v_times gives them;
 * cut (may be NULL, dualpipev): whether the replay shows its steady run. */
static mp_status fixed_replay(mp_schedule_kind s, int32_t p, int32_t m, const mp_op_times *t,
                              mp_v_rank_times *rt, bool *cut, mp_error *err)
{
    size_t sm = (size_t)2 * p * m;
    mp_op_list *l = calloc((size_t)p, sizeof *l);
    double **end = cut ? calloc((size_t)p, sizeof *end) : NULL;
    double *e = cut ? malloc(sizeof *e * (size_t)6 * m * p) : NULL;
    double *d = malloc((2 * sm + (size_t)REPLAY_PER_RANK * p) * sizeof *d);
    int32_t *n = malloc((size_t)3 * p * sizeof *n);
    order_entry own = {0};
    bool owned = false;
    mp_status st = l && d && n && (!cut || (end && e))
                       ? time_free_order(s, p, m, l, &own, &owned, err)
                       : mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL,
                                      "out of memory for a schedule");
    for (int32_t r = 0; cut && st == MP_OK && r < p; r++) {
        end[r] = e + (size_t)6 * m * r;
        for (int32_t i = 0; i < l[r].n; i++)
            end[r][i] = -1;
    }
    if (st == MP_OK)
        replay(p, m, t, l, false, d, n, false, end, rt);
    for (int32_t r = 0; rt && r < p && st == MP_OK; r++)
        if (rt[r].end < 0)
            st = mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                              "the V schedule's lists stall on replay");
    if (cut && st == MP_OK) {
        bool done = true;
        for (int32_t r = 0; r < p; r++)
            done = done && l[r].n > 0 && end[r][l[r].n - 1] >= 0;
        *cut = done && dpv_steady_run(p, m, l, end);
    }
    if (owned)
        free_entry(&own);
    free(l);
    free(end);
    free(e);
    free(d);
    free(n);
    return st;
}

static mp_status v_times(mp_schedule_kind s, int32_t p, int32_t m, const mp_op_times *t,
                         mp_v_rank_times *rt, mp_error *err)
{
    if (s == MP_SCHED_ZBV)
        return zbv_choose(p, m, t, NULL, rt, NULL, m, err);
    return fixed_replay(s, p, m, t, rt, NULL, err);
}

static atomic_bool times_kept = true; /* mp_schedule_v_times_keep */

void mp_schedule_v_times_keep(bool on)
{
    atomic_store(&times_kept, on);
}

/* The thread's kept answer for this key (its set's entry), *hit telling
 * whether it holds it; NULL when nothing can be kept. */
static times_entry *times_slot(int32_t s, int32_t p, int32_t m, const mp_op_times *t,
                               bool *hit)
{
    *hit = false;
    if (p > TIMES_MAX_P || !t->f || !t->b || !t->w || !t->link || !t->act)
        return NULL;
    order_cache *c = order_cache_of_thread();
    if (!c)
        return NULL;
    int32_t stall = atomic_load(&test_stall), n = 2 * p;
    const double *arr[5] = {t->f, t->b, t->w, t->link, t->act};
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the key's bytes */
    int32_t head[4] = {(int32_t)s, p, m, stall};
    const unsigned char *b = (const unsigned char *)head;
    for (size_t i = 0; i < sizeof head; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    for (int a = 0; a < 5; a++) {
        b = (const unsigned char *)arr[a];
        for (size_t i = 0; i < sizeof *arr[a] * (size_t)n; i++)
            h = (h ^ b[i]) * 1099511628211ull;
    }
    b = (const unsigned char *)&t->lat;
    for (size_t i = 0; i < sizeof t->lat; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    times_entry *e = &c->te[h % TIMES_SETS];
    if (e->p == p && e->m == m && e->s == (int32_t)s && e->stall == stall &&
        !memcmp(&e->lat, &t->lat, sizeof t->lat)) {
        bool same = true;
        for (int a = 0; a < 5 && same; a++)
            same = !memcmp(e->key + (size_t)a * n, arr[a], sizeof *arr[a] * (size_t)n);
        if (same) {
            *hit = true;
            return e;
        }
    }
    if (e->p != p) { /* resized */
        free(e->key);
        free(e->rt);
        e->key = malloc(sizeof *e->key * (size_t)(5 * n));
        e->rt = malloc(sizeof *e->rt * (size_t)p);
    }
    e->p = 0;
    if (!e->key || !e->rt)
        return NULL;
    for (int a = 0; a < 5; a++)
        memcpy(e->key + (size_t)a * n, arr[a], sizeof *arr[a] * (size_t)n);
    e->s = (int32_t)s;
    e->m = m;
    e->stall = stall;
    e->lat = t->lat;
    return e;
}

mp_status mp_schedule_v_times(mp_schedule_kind s, int32_t p, int32_t m, const mp_op_times *t,
                              mp_v_rank_times *rt, mp_error *err)
{
    if (p < 1 || m < 1 || !t || (s != MP_SCHED_ZBV && s != MP_SCHED_DUALPIPEV))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "schedule",
                            "V times need zb-v or dualpipev, p, m >= 1 and op times");
    bool hit = false;
    times_entry *e = atomic_load(&times_kept) ? times_slot(s, p, m, t, &hit) : NULL;
    if (hit) {
        memcpy(rt, e->rt, sizeof *rt * (size_t)p);
        return MP_OK;
    }
    mp_status st = v_times(s, p, m, t, rt, err);
    if (e && st == MP_OK) { /* kept only once answered */
        memcpy(e->rt, rt, sizeof *rt * (size_t)p);
        e->p = p;
    }
    return st;
}

mp_status mp_schedule_zbv_times(int32_t p, int32_t m, int32_t built, const mp_op_times *t,
                                mp_v_rank_times *rt, mp_error *err)
{
    if (built >= m || built < 1)
        return mp_schedule_v_times(MP_SCHED_ZBV, p, m, t, rt, err);
    if (p < 1 || !t)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "schedule",
                            "zb-v times need p, m >= 1 and op times");
    /* kept as mp_schedule_v_times' answers, under a key of their own */
    bool hit = false;
    times_entry *e = atomic_load(&times_kept)
                         ? times_slot((int32_t)MP_SCHED_ZBV + 2 * MP_SCHED_COUNT, p, m, t, &hit)
                         : NULL;
    if (hit && e->used == built) {
        memcpy(rt, e->rt, sizeof *rt * (size_t)p);
        return MP_OK;
    }
    mp_status st = zbv_choose(p, built, t, NULL, rt, NULL, m, err);
    if (e && st == MP_OK) {
        memcpy(e->rt, rt, sizeof *rt * (size_t)p);
        e->used = built;
        e->p = p;
    }
    return st;
}

/* DualPipeV's windows: tries at 6p, 18p, 54p, ... micro-batches below m,
 * cut at the first whose replay shows the steady run (dpv_steady_run),
 * else the whole replay. The tries cost less than 1.5 times the replay of
 * the last one: with a cut, that one's; without, the whole replay's. */
static mp_status dpv_windows(int32_t p, int32_t m, const mp_op_times *t, mp_v_rank_times *rt,
                             int32_t *used, mp_error *err)
{
    for (int64_t m1 = 6 * (int64_t)p; m1 < m; m1 *= 3) {
        bool cut = false;
        mp_status st = fixed_replay(MP_SCHED_DUALPIPEV, p, (int32_t)m1, t, rt, &cut, err);
        if (st != MP_OK || cut) {
            *used = (int32_t)m1;
            return st;
        }
    }
    *used = m;
    return fixed_replay(MP_SCHED_DUALPIPEV, p, m, t, rt, NULL, err);
}

mp_status mp_schedule_v_windows(mp_schedule_kind s, int32_t p, int32_t m, const mp_op_times *t,
                                mp_v_rank_times *rt, int32_t *used, mp_error *err)
{
    *used = m;
    if (s != MP_SCHED_DUALPIPEV || p < 1 || m < 1 || !t)
        return mp_schedule_v_times(s, p, m, t, rt, err);
    bool hit = false;
    times_entry *e = atomic_load(&times_kept)
                         ? times_slot((int32_t)s + MP_SCHED_COUNT, p, m, t, &hit)
                         : NULL;
    if (hit) {
        memcpy(rt, e->rt, sizeof *rt * (size_t)p);
        *used = e->used;
        return MP_OK;
    }
    mp_status st = dpv_windows(p, m, t, rt, used, err);
    if (e && st == MP_OK) {
        memcpy(e->rt, rt, sizeof *rt * (size_t)p);
        e->used = *used;
        e->p = p;
    }
    return st;
}
