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
 * them on a unit-time plan. Given real times, three orders are built -- the
 * unit-time one, and the real-time one with F or with B preferred -- each
 * is timed by replaying it under the same assumptions, and the fastest
 * that keeps to the memory cap is kept (the unit-time one on a tie), so the
 * order is never slower there than the unit-time order.
 *
 * Each op is placed only after every op it depends on has been placed, so
 * the placement order is a topological order of the whole step: the lists
 * cannot deadlock under any durations (the order only decides the speed). */
#include "sim/schedule_vorder.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sim/heap.h"

typedef struct vorder {
    int32_t p, m, S;          /* S = 2p virtual stages */
    const mp_op_times *t;
    double *f_end, *b_end;    /* per (stage, micro-batch): end time, -1 = not placed */
    int32_t *next_f, *next_b; /* per stage: its next micro-batch */
    int32_t *wq;              /* per rank: FIFO of deferred W, (mb << 1) | chunk */
    int32_t *wq_head, *wq_tail, *live;
    double *held, *cap;       /* per rank: activations stashed, and the most it may */
    double *free_at;          /* per rank: when it can start its next op */
    double *key;              /* per rank: the time of its live heap entry, INFINITY = none */
    mp_heap heap;
    mp_op_list *out;
    bool b_first;             /* a ready B before a ready F (a second policy to try) */
    bool per_chunk;           /* the fallback: at most p micro-batches of each chunk */
    int32_t *live_c;          /* per rank and chunk (2r + c): F placed, W not yet */
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
    return z->t && z->t->act ? z->t->act[k] : 1.0;
}

static double dur(const vorder *z, mp_op_kind kind, int32_t k)
{
    if (!z->t)
        return 1.0;
    return kind == MP_OP_F ? z->t->f[k] : kind == MP_OP_B ? z->t->b[k] : z->t->w[k];
}

/* The transfer between stages k and k+1; nothing at the V's turn (one rank). */
static double link_time(const vorder *z, int32_t k)
{
    if (!z->t || !z->t->link || k == z->p - 1)
        return 0.0;
    return z->t->link[k];
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

static bool heap_push(vorder *z, double time, int32_t r)
{
    mp_heap *h = &z->heap;
    if (h->n == h->cap) { /* stale entries stay until popped: grow */
        mp_heap_item *items = realloc(h->items, (size_t)h->cap * 2 * sizeof *items);
        if (!items)
            return false;
        h->items = items;
        h->cap *= 2;
    }
    z->key[r] = time;
    return mp_heap_push(h, time, r);
}

/* Rank q can run an op from `at` on: bring its heap entry forward. */
static bool wake(vorder *z, int32_t q, double at)
{
    if (at < z->free_at[q])
        at = z->free_at[q];
    return at < z->key[q] ? heap_push(z, at, q) : true;
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
        if (i >= z->m || full)
            continue;
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
        z->free_at[r] = now + dur(z, MP_OP_W, stage_of(z, r, w & 1));
        return -1;
    }
    return soonest;
}

static mp_status run(vorder *z, mp_error *err)
{
    int64_t left = (int64_t)z->S * z->m * 3;
    for (int32_t r = 0; r < z->p; r++)
        if (!heap_push(z, 0.0, r))
            return MP_ENOMEM;
    mp_heap_item it;
    while (left > 0 && mp_heap_pop(&z->heap, &it)) {
        int32_t r = it.id;
        if (it.time != z->key[r])
            continue; /* superseded by an earlier wake */
        double next = step(z, r, it.time);
        if (next == -2)
            return MP_ENOMEM;
        if (next == -1) {
            left--;
            next = z->free_at[r];
        }
        if (next == INFINITY)
            z->key[r] = INFINITY; /* a neighbour's op wakes it */
        else if (!heap_push(z, next, r))
            return MP_ENOMEM;
    }
    if (left > 0)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "schedule",
                            "zb-v order stalled (p=%d m=%d)", (int)z->p, (int)z->m);
    return MP_OK;
}

/* One list scheduling run (t NULL: unit times) into out[0..p-1]. */
static mp_status greedy(int32_t p, int32_t m, const mp_op_times *t, bool b_first,
                        bool per_chunk, mp_op_list *out, mp_error *err)
{
    size_t sm = (size_t)2 * p * m;
    vorder z = {.p = p, .m = m, .S = 2 * p, .t = t, .out = out, .b_first = b_first,
                .per_chunk = per_chunk};
    double *d = malloc((2 * sm + (size_t)4 * p) * sizeof *d);
    int32_t *n = calloc(sm + (size_t)9 * p, sizeof *n);
    mp_status st = MP_ENOMEM;
    if (d && n && mp_heap_init(&z.heap, 2 * p)) {
        z.f_end = d;
        z.b_end = d + sm;
        z.free_at = d + 2 * sm;
        z.key = z.free_at + p;
        for (size_t i = 0; i < 2 * sm; i++)
            d[i] = -1;
        z.held = z.key + p;
        z.cap = z.held + p;
        for (int32_t r = 0; r < p; r++) {
            z.free_at[r] = z.held[r] = 0;
            z.key[r] = INFINITY;
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
    mp_heap_free(&z.heap);
    free(d);
    free(n);
    if (st == MP_ENOMEM)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    return st;
}

/* The step time of given lists under the times the list scheduling assumes
 * (each rank runs its ops in order, each as soon as its input has landed),
 * or INFINITY when a rank would stash more than the cap (capped). Ranks are
 * run until they block; the op that unblocks one puts it back on the stack.
 * end_at (may be NULL): per rank, each op's end (a send or receive, which the
 * lists of mp_schedule_build carry, takes no time here: its transfer is
 * counted with the F or B that sends it). */
static double replay(int32_t p, int32_t m, const mp_op_times *t, const mp_op_list *lists,
                     double *d, int32_t *n, bool capped, double *const *end_at)
{
    size_t sm = (size_t)2 * p * m;
    vorder z = {.p = p, .m = m, .S = 2 * p, .t = t, .f_end = d, .b_end = d + sm};
    double *free_at = d + 2 * sm, *held = free_at + p, makespan = 0;
    int32_t *pos = n, *stack = n + p, *queued = n + 2 * p, top = 0;
    for (size_t i = 0; i < 2 * sm; i++)
        d[i] = -1;
    for (int32_t r = 0; r < p; r++) {
        free_at[r] = held[r] = 0;
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
            if (kind != MP_OP_F && kind != MP_OP_B && kind != MP_OP_W) {
                if (end_at)
                    end_at[r][pos[r]] = free_at[r];
                continue;
            }
            double rd = kind == MP_OP_F   ? f_ready(&z, k, i)
                        : kind == MP_OP_B ? b_ready(&z, k, i)
                                          : 0;
            if (rd == INFINITY)
                break; /* its input is not computed yet */
            double start = rd > free_at[r] ? rd : free_at[r], end = start + dur(&z, kind, k);
            makespan = end > makespan ? end : makespan;
            free_at[r] = end;
            if (end_at)
                end_at[r][pos[r]] = end;
            if (kind == MP_OP_F) {
                d[(size_t)k * m + i] = end;
                if ((held[r] += act(&z, k)) > cap && capped)
                    return INFINITY;
                q = k + 1 < z.S ? rank_of(&z, k + 1) : -1;
                free_at[r] += q >= 0 ? link_time(&z, k) : 0;
            } else if (kind == MP_OP_B) {
                d[sm + (size_t)k * m + i] = end;
                q = k > 0 ? rank_of(&z, k - 1) : -1;
                free_at[r] += q >= 0 ? link_time(&z, k - 1) : 0;
            } else {
                held[r] -= act(&z, k);
            }
            if (q >= 0 && q != r && !queued[q]) {
                stack[top++] = q;
                queued[q] = 1;
            }
        }
    }
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

mp_status mp_schedule_zbv_order(int32_t p, int32_t m, const mp_op_times *t, mp_op_list *out,
                                bool *fallback, mp_error *err)
{
    if (fallback)
        *fallback = false;
    mp_error e2;
    bool stall = atomic_load(&test_stall);
    if (!t) {
        mp_status st = stall ? MP_EINTERNAL : greedy(p, m, NULL, false, false, out, &e2);
        if (st != MP_EINTERNAL) {
            if (st != MP_OK)
                *err = e2;
            return st;
        }
        clear_lists(out, p); /* cannot happen (the proof at try_f); kept as a guard */
        if (fallback)
            *fallback = true;
        return greedy(p, m, NULL, false, true, out, err);
    }
    /* Qi et al. try several schedules and keep the fastest; here three
     * orders: the unit-time one, and list scheduling over the real times
     * with F or B first, each timed by replay(); the first of the fastest
     * that keeps to the memory cap wins. A run that stalls (it cannot, see
     * try_f; a guard) is dropped; when none is left the fallback is the
     * greedy holding at most p micro-batches of each chunk, which completes
     * and keeps to the cap under any times and sizes, and *fallback says so. */
    size_t per = (size_t)6 * m, sm = (size_t)2 * p * m;
    mp_op_list *cand = calloc((size_t)4 * p, sizeof *cand);
    mp_op *ops = malloc((size_t)4 * p * per * sizeof *ops);
    double *d = malloc((2 * sm + (size_t)2 * p) * sizeof *d);
    int32_t *n = malloc((size_t)3 * p * sizeof *n);
    mp_status st = MP_OK;
    if (!cand || !ops || !d || !n)
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    int best = -1;
    double best_time = INFINITY;
    for (int c = 0; c < 4 && st == MP_OK; c++) {
        if (c == 3 && best >= 0)
            break;
        for (int32_t r = 0; r < p; r++)
            cand[c * p + r] = (mp_op_list){.ops = ops + ((size_t)c * p + r) * per,
                                           .cap = (int32_t)per};
        st = stall && c < 3 ? MP_EINTERNAL
                            : greedy(p, m, c ? t : NULL, c == 2, c == 3, cand + c * p, &e2);
        double time = INFINITY;
        if (st == MP_OK)
            time = replay(p, m, t, cand + c * p, d, n, true, NULL);
        else if (st == MP_EINTERNAL && c < 3)
            st = MP_OK; /* stalled: dropped */
        else
            *err = e2;
        if (time < best_time || (c == 3 && st == MP_OK && best < 0)) {
            best = c;
            best_time = time;
        }
    }
    if (st == MP_OK && fallback)
        *fallback = best == 3;
    for (int32_t r = 0; r < p && st == MP_OK; r++) {
        const mp_op_list *src = &cand[best * p + r];
        for (int32_t i = 0; i < src->n; i++)
            out[r].ops[out[r].n++] = src->ops[i];
    }
    free(cand);
    free(ops);
    free(d);
    free(n);
    return st;
}

mp_status mp_schedule_zbv_fallback_order(int32_t p, int32_t m, const mp_op_times *t,
                                         mp_op_list *out, mp_error *err)
{
    return greedy(p, m, t, false, true, out, err);
}

mp_status mp_schedule_v_replay(int32_t p, int32_t m, const mp_op_times *t, const mp_op_list *lists,
                               double *const *end, mp_error *err)
{
    size_t sm = (size_t)2 * p * m;
    double *d = malloc((2 * sm + (size_t)2 * p) * sizeof *d);
    int32_t *n = malloc((size_t)3 * p * sizeof *n);
    if (!d || !n) {
        free(d);
        free(n);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    }
    for (int32_t r = 0; r < p; r++)
        for (int32_t i = 0; i < lists[r].n; i++)
            end[r][i] = -1;
    replay(p, m, t, lists, d, n, false, end);
    free(d);
    free(n);
    for (int32_t r = 0; r < p; r++)
        if (lists[r].n > 0 && end[r][lists[r].n - 1] < 0)
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL,
                                "the V schedule's lists stall on replay");
    return MP_OK;
}
