/* dualpipe_replay.c — DualPipe(V)'s makespan from its own order on per-stage
 * times (docs/cost-model.md §6, "DualPipe(V) on uneven stages").
 *
 * DualPipe's and DualPipeV's phases are fixed (deepseek-ai/DualPipe
 * dualpipe.py, dualpipev.py; sim/schedule.c build_dualpipev): the order of
 * each rank's ops does not depend on their times, so the step is the longest
 * path through one DAG of O(p m) ops, max-plus linear in the op times. The
 * closed form (pipeline.c mp_dualpipe_makespan) is that path on equal stages;
 * on a real plan's stages (the embedding and the head, both on DualPipeV's
 * rank 0; a plan's own split; MTP) the ranks differ, and no per-rank form
 * found so far is exact. So the estimate runs the order itself: the
 * simulator's lists, op by op, as sim/engine.c runs them, without anything
 * the engine records (events, memory, DP): about a hundred nanoseconds a
 * rank and micro-batch. It replays a few sizes up to the steady run and
 * extends it (mp_dualpipe_replay), not all m, and the lists of a
 * (schedule, p, m) are built once per thread and kept (a search costs many
 * candidates with the same pipeline shape). */
#include "planner/dualpipe_replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/thread_block.h"
#include "sim/schedule.h"

/* The lists kept per thread: a few (schedule, p, m) at once, direct-mapped
 * on a hash of the key, each immutable once built; a colliding key replaces
 * its slot. Lists
 * of more than LIST_MAX_OPS ops in all are built for their call alone (so
 * the table holds at most LIST_SETS x 1.5 MiB: the lists of DUAL_REPLAY_PM
 * micro-batch-ranks, about 12 ops each, fit). */
enum { LIST_SETS = 16, LIST_MAX_OPS = 1 << 17 };

/* The replay's budget: tries of at most this many micro-batches times p
 * (about 1 ms; docs/design.md §8) before an unproven pace is extended. */
#define DUAL_REPLAY_PM 8192
typedef struct list_entry {
    int32_t s, p, m; /* p == 0: empty */
    mp_op_list *lists;
} list_entry;
typedef struct list_cache {
    list_entry e[LIST_SETS];
} list_cache;

static void free_lists(mp_op_list *l, int32_t p)
{
    for (int32_t r = 0; l && r < p; r++)
        mp_op_list_free(&l[r]);
    free(l);
}

static void list_cache_free(void *v)
{
    list_cache *c = v;
    for (int i = 0; c && i < LIST_SETS; i++)
        free_lists(c->e[i].lists, c->e[i].p);
    free(c);
}

static mp_thread_block list_block = MP_THREAD_BLOCK(list_cache_free);

/* The lists of (s, p, m), kept (*owned false) or, without a cache, built for
 * this call alone (*owned true: the caller frees them). */
static mp_status lists_of(mp_schedule_kind s, int32_t p, int32_t m, const mp_op_list **out,
                          bool *owned, mp_error *err)
{
    list_cache *c = mp_thread_block_get(&list_block, sizeof(list_cache));
    uint32_t h = ((uint32_t)m * 2654435761u) ^ ((uint32_t)p * 40503u) ^ (uint32_t)s;
    list_entry *e = c ? &c->e[(h >> 7) % LIST_SETS] : NULL;
    if (e && e->p == p && e->m == m && e->s == (int32_t)s) {
        *out = e->lists;
        *owned = false;
        return MP_OK;
    }
    mp_op_list *l = calloc((size_t)p, sizeof *l);
    if (!l)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    mp_status st = mp_schedule_build_all(s, p, 2, m, l, err);
    if (st != MP_OK) {
        free(l);
        return st;
    }
    int64_t ops = 0;
    for (int32_t r = 0; r < p; r++)
        ops += l[r].n;
    if (e && ops <= LIST_MAX_OPS) {
        free_lists(e->lists, e->p);
        *e = (list_entry){.s = (int32_t)s, .p = p, .m = m, .lists = l};
        *owned = false;
    } else {
        *owned = true;
    }
    *out = l;
    return MP_OK;
}

/* The replay's working arrays, kept per thread and grown as needed: they
 * were allocated on every replay, several times an estimate, though their
 * sizes repeat with the cached lists. Each array has its slot; without a
 * thread block an array is allocated for its call alone. */
enum { SCRATCH_ARRIVAL, SCRATCH_CLOCKS, SCRATCH_STACK, SCRATCH_START, SCRATCH_VAL, SCRATCH_V,
       SCRATCH_SLOTS };
typedef struct scratch {
    void *buf[SCRATCH_SLOTS];
    size_t cap[SCRATCH_SLOTS];
} scratch;

static void scratch_free(void *v)
{
    scratch *sc = v;
    for (int i = 0; sc && i < SCRATCH_SLOTS; i++)
        free(sc->buf[i]);
    free(sc);
}

static mp_thread_block scratch_block = MP_THREAD_BLOCK(scratch_free);

/* At least bytes of this thread's slot (contents undefined), or, without a
 * thread block, a new allocation that *own holds for the caller to free;
 * NULL without memory. */
static void *scratch_get(int slot, size_t bytes, void **own)
{
    *own = NULL;
    scratch *sc = mp_thread_block_get(&scratch_block, sizeof(scratch));
    if (!sc)
        return *own = malloc(bytes ? bytes : 1);
    if (sc->cap[slot] < bytes || !sc->buf[slot]) {
        size_t cap = bytes > 2 * sc->cap[slot] ? bytes : 2 * sc->cap[slot];
        void *b = malloc(cap ? cap : 1);
        if (!b)
            return NULL;
        free(sc->buf[slot]);
        sc->buf[slot] = b;
        sc->cap[slot] = cap;
    }
    return sc->buf[slot];
}

/* One rank's place in the replay (sim/engine.c rank_state, the timing part). */
typedef struct rank_clock {
    double now;         /* when the rank is free */
    double commit_at;   /* its open commit's post time, -1: none */
    double commit_done; /* when all of the open commit is done */
    double link[2];     /* when its links to rank r+1 (0) and r-1 (1) are free */
    int64_t waiting;    /* the message a blocked receive waits for, -1: none */
    int32_t pc;         /* its next op */
} rank_clock;

static bool is_transfer(const mp_op *op)
{
    return op->kind >= MP_OP_SEND_FWD;
}

/* The lists of (s, p, m) run under t: *makespan, and (val, may be NULL:
 * per rank, room for each op of its list) what each op ends at: a compute
 * op its end (an F&B unit's three ops the unit's), a send its message's
 * landing, a receive when the rank has it. MP_ENOMEM, MP_EINTERNAL. */
static mp_status replay_lists(mp_schedule_kind s, int32_t p, int32_t m, const mp_dualpipe_times *t,
                              const mp_op_list *lists, double *const *val, double *makespan,
                              mp_error *err)
{
    int32_t n_st = (int32_t)mp_schedule_n_stages(s, p, s == MP_SCHED_DUALPIPEV ? 2 : 1);
    size_t keys = (size_t)2 * (size_t)n_st * (size_t)m;
    void *own[3];
    double *arrival = scratch_get(SCRATCH_ARRIVAL, sizeof *arrival * keys, &own[0]);
    rank_clock *rc = scratch_get(SCRATCH_CLOCKS, sizeof *rc * (size_t)p, &own[1]);
    /* the ranks to run (at most p at once) and the stage each (rank, chunk) runs */
    int32_t *stack = scratch_get(SCRATCH_STACK, sizeof *stack * 3 * (size_t)p, &own[2]);
    int32_t *stage = stack ? stack + p : NULL;
    mp_status st = MP_OK;
    if (!arrival || !rc || !stack) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < keys; i++)
        arrival[i] = -1.0;
    int32_t top = 0;
    for (int32_t r = p - 1; r >= 0; r--) {
        rc[r] = (rank_clock){.commit_at = -1.0, .waiting = -1};
        stack[top++] = r;
        for (int32_t c = 0; c < 2; c++)
            stage[2 * r + c] = (int32_t)mp_schedule_stage(s, p, r, c);
    }
    while (top > 0) {
        int32_t r = stack[--top];
        rank_clock *rs = &rc[r];
        const mp_op_list *l = &lists[r];
        /* run the rank until it blocks on a receive (engine.c run_pipeline) */
        while (rs->pc < l->n) {
            const mp_op *op = &l->ops[rs->pc];
            int32_t k = stage[2 * r + (op->chunk & 1)], took = 1;
            double v = 0.0;
            if (is_transfer(op) && rs->commit_at < 0)
                rs->commit_at = rs->commit_done = rs->now;
            switch ((mp_op_kind)op->kind) {
            case MP_OP_F:
                /* an F&B unit as one merged pass (engine.c run_fb) */
                if (t->unit && op->fb && rs->pc + 2 < l->n && op[1].kind == MP_OP_B &&
                    op[1].chunk != op->chunk && op[2].kind == MP_OP_W &&
                    op[2].chunk == op[1].chunk && op[2].microbatch == op[1].microbatch) {
                    rs->now += t->unit[2 * r + (op->chunk & 1)];
                    took = 3;
                } else {
                    rs->now += t->f[k];
                }
                v = rs->now;
                break;
            case MP_OP_B: v = rs->now += t->b[k]; break;
            case MP_OP_W: v = rs->now += t->w[k]; break;
            case MP_OP_SEND_FWD:
            case MP_OP_SEND_BWD: {
                int32_t peer, pch;
                if (!mp_op_peer(s, p, 2, r, op, &peer, &pch))
                    break;
                bool fwd = op->kind == MP_OP_SEND_FWD;
                int32_t dest = stage[2 * peer + (pch & 1)];
                /* a gradient is the size of the activation that came the other way */
                double wire = fwd ? t->wire[k] : t->wire[dest];
                double start = rs->commit_at, land = start;
                if (peer != r) { /* to itself (the V's turn) the data stays put */
                    double *lk = &rs->link[peer == (r + 1) % p ? 0 : 1];
                    start = start > *lk ? start : *lk;
                    land = start + wire + t->lat;
                    *lk = start + wire;
                }
                int64_t key = ((int64_t)(fwd ? 0 : 1) * n_st + dest) * m + op->microbatch;
                v = arrival[key] = land;
                if (land > rs->commit_done)
                    rs->commit_done = land;
                if (rc[peer].waiting == key) {
                    rc[peer].waiting = -1;
                    stack[top++] = peer;
                }
                break;
            }
            default: { /* a receive */
                bool fwd = op->kind == MP_OP_RECV_FWD;
                int64_t key = ((int64_t)(fwd ? 0 : 1) * n_st + k) * m + op->microbatch;
                if (arrival[key] < 0.0) {
                    rs->waiting = key;
                    goto blocked;
                }
                if (arrival[key] > rs->now)
                    rs->now = arrival[key];
                v = rs->now;
                break;
            }
            }
            for (int32_t j = 0; val && j < took; j++)
                val[r][rs->pc + j] = v;
            rs->pc += took;
            if (rs->commit_at >= 0.0 && (rs->pc == l->n || !is_transfer(&l->ops[rs->pc]))) {
                if (rs->commit_done > rs->now)
                    rs->now = rs->commit_done;
                rs->commit_at = -1.0;
            }
        }
    blocked:;
    }
    double end = 0.0;
    for (int32_t r = 0; r < p; r++) {
        if (rc[r].pc < lists[r].n)
            st = mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "schedule",
                              "%s's lists stall in the replay (p=%d m=%d, rank %d)",
                              mp_schedule_name(s), (int)p, (int)m, (int)r);
        end = rc[r].now > end ? rc[r].now : end;
    }
    *makespan = end;
out:
    for (int i = 0; i < 3; i++)
        free(own[i]);
    return st;
}

/* The steady run of the replay above (sim/schedule_vorder.c dpv_steady_run,
 * here over the lists with their transfers): DualPipeV's rank r runs its
 * phase-4 blocks F0 B1 W1 F1 B0 W0 from its compute op 5p - 3r - 3 on, block
 * i of every rank being level i (0 .. m - 2p), and the block of level i > 2p
 * - 1 is the same max-plus map of levels i - 2p .. i - 1 for every m (each
 * op waits for its rank's previous one and for its input from the same or
 * the previous level, or from its own forwards up to 2p - 1 levels back).
 * The transfers between a block's ops and the next block's are part of its
 * level (a send's landing, through the link it queues on, is a max-plus
 * function of the commit that posts it and the link's last send). So once
 * 2p consecutive levels each end exactly lambda after the level before --
 * every op, its kind, chunk and micro-batch one later than the level
 * before's, its value (val) lambda later -- every later level does too, and
 * the ops after the last level start from the same state shifted: m + 1
 * micro-batches take lambda longer than m. DualPipe: rank r runs DualPipeV
 * rank min(r, p-1-r)'s order on p/2 ranks with m/2 micro-batches a
 * direction (sim/schedule_dualpipe.c), the middle ranks' hand-over a message
 * within a level, so the same with p/2, m/2 and lambda per two micro-batches.
 * True with *lambda when the run shows; else *from is the level the run
 * that the replay ends in began at (-1: none). *pace: the most any op of
 * the last level ends after its op of the level before (0: none). */
static bool steady_run(mp_schedule_kind s, int32_t p, int32_t m, const mp_op_list *l,
                       double *const *val, double span, double *lambda, int32_t *from,
                       double *pace)
{
    bool dpipe = s == MP_SCHED_DUALPIPE;
    int32_t pv = dpipe ? p / 2 : p, mv = dpipe ? m / 2 : m;
    int32_t levels = mv - 2 * pv + 1; /* 0 .. mv - 2pv */
    *from = -1;
    *pace = 0.0;
    if (levels < 2 * pv + 1)
        return false;
    /* per rank, where each level's ops start in its list (its block's
     * first compute op), levels + 1 of them (the last: phase 5's first) */
    void *own;
    int32_t *start = scratch_get(SCRATCH_START, sizeof *start * (size_t)p * (size_t)(levels + 1),
                                 &own);
    if (!start)
        return false;
    bool ok = true;
    for (int32_t r = 0; r < p && ok; r++) {
        int32_t h = r < p - 1 - r ? r : p - 1 - r, at = 5 * pv - 3 * h - 3, c = 0, lv = 0;
        int32_t *st = start + (size_t)r * (size_t)(levels + 1);
        for (int32_t i = 0; i < l[r].n && lv <= levels; i++)
            if (l[r].ops[i].kind <= MP_OP_W) {
                if (c >= at && (c - at) % 6 == 0)
                    st[lv++] = i;
                c++;
            }
        ok = lv == levels + 1;
    }
    double tol = 1e-12 * span;
    int32_t run = 0; /* consecutive levels one lambda after the one before */
    for (int32_t i = 1; ok && i < levels; i++) {
        bool same = true;
        for (int32_t r = 0; r < p && same; r++) {
            const int32_t *st = start + (size_t)r * (size_t)(levels + 1);
            int32_t len = st[i + 1] - st[i];
            /* the same ops as the level before, each a micro-batch later */
            same = len == st[i] - st[i - 1];
            for (int32_t q = 0; q < len && same; q++) {
                const mp_op *a = &l[r].ops[st[i] + q], *b = &l[r].ops[st[i - 1] + q];
                double d = val[r][st[i] + q] - val[r][st[i - 1] + q];
                if (r == 0 && q == 0 && run == 0)
                    *lambda = d;
                same = a->kind == b->kind && a->chunk == b->chunk &&
                       a->microbatch == b->microbatch + 1 && fabs(d - *lambda) <= tol;
                if (i == levels - 1 && d > *pace)
                    *pace = d;
            }
        }
        run = same ? run + 1 : 0;
        /* 2p differences ending at level i >= 2p: level i+1 and on repeat */
        if (run >= 2 * pv && i >= 2 * pv)
            break;
    }
    free(own);
    *from = ok && run > 0 ? levels - run : -1;
    return ok && run >= 2 * pv;
}

/* One replay of (s, p, m); with cut (may be NULL) whether it shows the
 * steady run, and then its lambda, else where the run it ends in began and
 * its last level's pace (steady_run's *from, *pace). */
static mp_status replay_once(mp_schedule_kind s, int32_t p, int32_t m, const mp_dualpipe_times *t,
                             double *makespan, bool *cut, double *lambda, int32_t *from,
                             double *pace, mp_error *err)
{
    const mp_op_list *lists = NULL;
    bool owned = false;
    mp_status st = lists_of(s, p, m, &lists, &owned, err);
    if (st != MP_OK)
        return st;
    double **val = NULL, *v = NULL;
    void *own[2] = {NULL, NULL};
    if (cut) {
        *cut = false;
        size_t ops = 0;
        for (int32_t r = 0; r < p; r++)
            ops += (size_t)lists[r].n;
        val = scratch_get(SCRATCH_VAL, sizeof *val * (size_t)p, &own[0]);
        v = scratch_get(SCRATCH_V, sizeof *v * (ops > 0 ? ops : 1), &own[1]);
        if (!val || !v)
            st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        for (int32_t r = 0, at = 0; st == MP_OK && r < p; at += lists[r].n, r++)
            val[r] = v + at;
    }
    if (st == MP_OK)
        st = replay_lists(s, p, m, t, lists, val, makespan, err);
    if (cut && st == MP_OK)
        *cut = steady_run(s, p, m, lists, val, *makespan, lambda, from, pace);
    free(own[0]);
    free(own[1]);
    if (owned)
        free_lists((mp_op_list *)lists, p);
    return st;
}

/* The tries' sizes: the smallest of 6, 9, 12, 18, 24, 36, ... times unit
 * (each 3/2 or 4/3 of the one before) that is at least want, so that the
 * candidates of a search, whose transients differ, replay the same few
 * sizes and share their lists. */
static int64_t rung(int64_t unit, int64_t want)
{
    int64_t a = 6, b = 9;
    while (a * unit < want) {
        int64_t c = 2 * a;
        a = b;
        b = c;
    }
    return a * unit;
}

mp_status mp_dualpipe_replay(mp_schedule_kind s, int32_t p, int32_t m, const mp_dualpipe_times *t,
                             double *makespan, mp_error *err)
{
    *makespan = 0.0;
    if (s != MP_SCHED_DUALPIPEV && s != MP_SCHED_DUALPIPE)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "schedule",
                            "the replay runs DualPipe and DualPipeV only");
    /* tries from 6p micro-batches (DualPipe: a direction's on p/2 ranks),
     * below m, each cut at the first that shows the steady run; after a try
     * whose last levels run steady, but not for 2p of them yet, the next
     * holds enough levels for that run (its start stays where it is: a
     * level does not depend on m), else three times as many, each rounded
     * up to a rung of a fixed ladder (rung). Tries stop at DUAL_REPLAY_PM
     * micro-batches times p (the budget); where none has
     * shown the run by then and m is beyond it, the step is the last try's
     * extended by its last level's pace (not proven: a transient that long
     * is a link's backlog draining, docs/cost-model.md §6). */
    int64_t step = s == MP_SCHED_DUALPIPE ? 2 : 1, pv = s == MP_SCHED_DUALPIPE ? p / 2 : p;
    int64_t last_m = 0;
    double last_t = 0.0, last_pace = 0.0;
    for (int64_t m1 = 6 * pv * step; pv > 0 && m1 < m;) {
        if (last_m > 0 && (int64_t)p * m1 > DUAL_REPLAY_PM)
            break;
        bool cut = false;
        double lambda = 0.0, t1 = 0.0, pace = 0.0;
        int32_t from = -1;
        mp_status st = replay_once(s, p, (int32_t)m1, t, &t1, &cut, &lambda, &from, &pace, err);
        if (st != MP_OK)
            return st;
        if (cut) {
            *makespan = t1 + (double)((m - m1) / step) * lambda;
            return MP_OK;
        }
        last_m = m1;
        last_t = t1;
        last_pace = pace;
        /* the run from level `from` shows at mv - 2pv >= from + 2pv - 1 */
        int64_t next = 3 * m1, need = ((int64_t)from + 4 * pv + 1) * step;
        m1 = rung(pv * step, from >= 0 && need > m1 && need < next ? need : next);
    }
    if (last_m > 0 && (int64_t)p * m > DUAL_REPLAY_PM && last_pace > 0.0) {
        *makespan = last_t + (double)((m - last_m) / step) * last_pace;
        return MP_OK;
    }
    return replay_once(s, p, m, t, makespan, NULL, NULL, NULL, NULL, err);
}
