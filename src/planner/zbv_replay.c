/* zbv_replay.c — ZB-V's makespan from its own order on per-stage times
 * (docs/cost-model.md §6, "ZB-V from its order").
 *
 * ZB-V's order is a list scheduling over the op times (sim/schedule_vorder.c:
 * five candidate orders, the fastest kept), so no closed form follows it on
 * uneven stages (Qwen3-235B pp 8 ran +7-9% over the rank-by-rank form, Llama
 * 3 70B pp 16 +3-6%), and its runs have no steady state to cut at as
 * DualPipe(V)'s fixed phases do (dualpipe_replay.c): at pp 16 no state of
 * GPT-3 175B's or Llama 3 70B's runs repeats within 1000 micro-batches. The
 * greedy is its own replay (each candidate is timed as it is built), so the
 * estimate asks the simulator's builder for the chosen order's times, which
 * are the simulated pipeline's. Building the orders costs about 60 ns an op
 * (6 p m ops a candidate, three to five candidates): within the budget
 * all m; beyond it, the orders of fewer micro-batches extended by their
 * pace (mp_schedule_zbv_times). */
#include "planner/zbv_replay.h"

mp_status mp_zbv_replay(int32_t p, int32_t m, const mp_op_times *t, mp_v_rank_times *rt,
                        double *makespan, bool *exact, mp_error *err)
{
    *makespan = 0.0;
    *exact = (int64_t)p * m <= MP_ZBV_REPLAY_PM;
    int32_t built = MP_ZBV_REPLAY_PM / (p > 0 ? p : 1);
    built = built > 4 * p ? built : 4 * p;
    if (*exact || built >= m) {
        built = m;
        *exact = true;
    }
    mp_status st = mp_schedule_zbv_times(p, m, built, t, rt, err);
    for (int32_t r = 0; st == MP_OK && r < p; r++)
        *makespan = rt[r].end > *makespan ? rt[r].end : *makespan;
    return st;
}
