/* bench_simulate — the simulator's budget (docs/design.md §8): one iteration of
 * p=64, v=2, m=1024 interleaved 1F1B in under 100 ms, in the mode search
 * uses for re-ranking (no timeline). Stage costs are hand-made (uniform
 * stages, latency and bandwidth on the links, DP and optimizer), so the
 * benchmark measures the engine, not the cost model.
 *   bench_simulate [--check] [--repeat N]
 * prints the best and median wall time per run; --check exits 1 when the
 * median is over budget. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/simulate.h"

#define P 64
#define V 2
#define M 1024
#define BUDGET_S 0.100

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double time_runs(const mp_pipeline_cost *pc, bool record, int repeat, double *best,
                        size_t *events)
{
    double *t = malloc((size_t)repeat * sizeof *t);
    if (!t)
        return -1;
    for (int i = 0; i < repeat; i++) {
        mp_sim_options opt = {.record_timeline = record};
        mp_sim_result r;
        mp_error err;
        double t0 = now_s();
        mp_status st = mp_simulate_cost(MP_SCHED_INTERLEAVED, P, V, M, pc, true, &opt, &r, &err);
        t[i] = now_s() - t0;
        if (st != MP_OK) {
            fprintf(stderr, "bench_simulate: %s\n", err.msg);
            free(t);
            return -1;
        }
        *events = r.timeline.n;
        mp_sim_result_free(&r);
    }
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    *best = t[0];
    double median = t[repeat / 2];
    free(t);
    return median;
}

int main(int argc, char **argv)
{
    bool check = false;
    int repeat = 11;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check"))
            check = true;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_simulate [--check] [--repeat N]\n");
            return 2;
        }
    }
    if (repeat < 1)
        repeat = 1;
    static mp_stage_cost stages[P * V];
    for (int k = 0; k < P * V; k++)
        stages[k] = (mp_stage_cost){.fwd = 0.010, .bwd = 0.020, .bwd_input = 0.010,
                                    .bwd_weight = 0.010, .tp_comm_fwd = 0.001,
                                    .tp_comm_bwd = 0.002, .send_bytes = 25e6,
                                    .act_bytes = 2e9, .static_bytes = 20e9, .grad_bytes = 1e9};
    mp_pipeline_cost pc = {.n_stages = P * V, .stages = stages, .p2p_latency = 10e-6,
                           .p2p_bw = 25e9, .dp_time = 0.3, .dp_exposed = 0.05,
                           .optimizer = 0.02, .other_bytes = 3e9};
    double best_fast, best_rec;
    size_t ev_fast = 0, ev_rec = 0;
    double fast = time_runs(&pc, false, repeat, &best_fast, &ev_fast);
    double rec = time_runs(&pc, true, repeat < 3 ? repeat : 3, &best_rec, &ev_rec);
    if (fast < 0 || rec < 0)
        return 1;
    printf("simulate p=%d v=%d m=%d interleaved-1f1b: median %.1f ms, best %.1f ms "
           "(no timeline; budget %.0f ms)\n",
           P, V, M, fast * 1e3, best_fast * 1e3, BUDGET_S * 1e3);
    printf("simulate p=%d v=%d m=%d with timeline (%zu events): median %.1f ms\n", P, V, M,
           ev_rec, rec * 1e3);
    if (check && fast > BUDGET_S) {
        fprintf(stderr, "bench_simulate: over budget\n");
        return 1;
    }
    return 0;
}
