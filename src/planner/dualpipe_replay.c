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
 * the engine records (events, memory, DP), which makes it a few hundred
 * nanoseconds a rank and micro-batch. The lists of a (schedule, p, m) are
 * built once per thread and kept (a search costs many candidates with the
 * same pipeline shape). */
#include "planner/dualpipe_replay.h"

#include <stdlib.h>
#include <string.h>

#include "core/thread_block.h"
#include "sim/schedule.h"

/* The lists kept per thread: a few (schedule, p, m) at once, direct-mapped
 * on m, each immutable once built; a colliding key replaces its slot. */
enum { LIST_SETS = 8 };
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
    list_entry *e = c ? &c->e[(uint32_t)(m + 7 * p) % LIST_SETS] : NULL;
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
    if (e) {
        free_lists(e->lists, e->p);
        *e = (list_entry){.s = (int32_t)s, .p = p, .m = m, .lists = l};
        *owned = false;
    } else {
        *owned = true;
    }
    *out = l;
    return MP_OK;
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

mp_status mp_dualpipe_replay(mp_schedule_kind s, int32_t p, int32_t m, const mp_dualpipe_times *t,
                             double *makespan, mp_error *err)
{
    *makespan = 0.0;
    if (s != MP_SCHED_DUALPIPEV && s != MP_SCHED_DUALPIPE)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "schedule",
                            "the replay runs DualPipe and DualPipeV only");
    const mp_op_list *lists = NULL;
    bool owned = false;
    mp_status st = lists_of(s, p, m, &lists, &owned, err);
    if (st != MP_OK)
        return st;
    int32_t n_st = (int32_t)mp_schedule_n_stages(s, p, s == MP_SCHED_DUALPIPEV ? 2 : 1);
    size_t keys = (size_t)2 * (size_t)n_st * (size_t)m;
    double *arrival = malloc(sizeof *arrival * keys);
    rank_clock *rc = malloc(sizeof *rc * (size_t)p);
    int32_t *stack = malloc(sizeof *stack * (size_t)p);
    if (!arrival || !rc || !stack) {
        free(arrival);
        free(rc);
        free(stack);
        if (owned)
            free_lists((mp_op_list *)lists, p);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    }
    for (size_t i = 0; i < keys; i++)
        arrival[i] = -1.0;
    int32_t top = 0;
    for (int32_t r = p - 1; r >= 0; r--) {
        rc[r] = (rank_clock){.commit_at = -1.0, .waiting = -1};
        stack[top++] = r;
    }
    /* the stage each (rank, chunk) runs */
    int32_t stage_stack[128], *stage = p <= 64 ? stage_stack : malloc(sizeof *stage * 2 * (size_t)p);
    if (!stage) {
        free(arrival);
        free(rc);
        free(stack);
        if (owned)
            free_lists((mp_op_list *)lists, p);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    }
    for (int32_t r = 0; r < p; r++)
        for (int32_t c = 0; c < 2; c++)
            stage[2 * r + c] = (int32_t)mp_schedule_stage(s, p, r, c);
    while (top > 0) {
        int32_t r = stack[--top];
        rank_clock *rs = &rc[r];
        const mp_op_list *l = &lists[r];
        /* run the rank until it blocks on a receive (engine.c run_pipeline) */
        while (rs->pc < l->n) {
            const mp_op *op = &l->ops[rs->pc];
            int32_t k = stage[2 * r + (op->chunk & 1)];
            if (is_transfer(op) && rs->commit_at < 0)
                rs->commit_at = rs->commit_done = rs->now;
            switch ((mp_op_kind)op->kind) {
            case MP_OP_F:
                /* an F&B unit as one merged pass (engine.c run_fb) */
                if (t->unit && op->fb && rs->pc + 2 < l->n && op[1].kind == MP_OP_B &&
                    op[1].chunk != op->chunk && op[2].kind == MP_OP_W &&
                    op[2].chunk == op[1].chunk && op[2].microbatch == op[1].microbatch) {
                    rs->now += t->unit[2 * r + (op->chunk & 1)];
                    rs->pc += 2;
                } else {
                    rs->now += t->f[k];
                }
                break;
            case MP_OP_B: rs->now += t->b[k]; break;
            case MP_OP_W: rs->now += t->w[k]; break;
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
                arrival[key] = land;
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
                break;
            }
            }
            rs->pc++;
            if (rs->commit_at >= 0.0 && (rs->pc == l->n || !is_transfer(&l->ops[rs->pc]))) {
                if (rs->commit_done > rs->now)
                    rs->now = rs->commit_done;
                rs->commit_at = -1.0;
            }
        }
    blocked:;
    }
    double end = 0.0;
    st = MP_OK;
    for (int32_t r = 0; r < p; r++) {
        if (rc[r].pc < lists[r].n)
            st = mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "schedule",
                              "%s's lists stall in the replay (p=%d m=%d, rank %d)",
                              mp_schedule_name(s), (int)p, (int)m, (int)r);
        end = rc[r].now > end ? rc[r].now : end;
    }
    *makespan = end;
    if (stage != stage_stack)
        free(stage);
    free(arrival);
    free(rc);
    free(stack);
    if (owned)
        free_lists((mp_op_list *)lists, p);
    return st;
}
