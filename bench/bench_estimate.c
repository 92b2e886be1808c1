/* bench_estimate — the cost model's budget (docs/design.md §8): mp_estimate_config of
 * one configuration in under 1 ms (search calls it ~1e5 times). Configurations
 * span small and large models, every schedule and recompute choice.
 *   bench_estimate [--check] [--repeat N]
 * prints the mean time per estimate for each configuration; --check exits 1
 * when one is over budget. The V schedules' replay runs on every estimate
 * (its kept answers off). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hw.h"
#include "core/model.h"
#include "planner/cost.h"
#include "sim/schedule_vorder.h"

#define BUDGET_S 1e-3

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct bench_case {
    const char *model, *hw;
    int64_t gpus, gb, tp, pp, vpp, cp, mb;
    bool sp, dist_opt;
    mp_recompute rc;
    mp_schedule_kind sched;
} bench_case;

int main(int argc, char **argv)
{
    bool check = false;
    int repeat = 20000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check"))
            check = true;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
    }
    if (repeat < 1)
        repeat = 1;
    /* the same configuration over and over: the V schedules' replay would
     * answer from its kept answers (mp_schedule_v_times_keep); measure the
     * replay itself, what each new candidate of a search pays */
    mp_schedule_v_times_keep(false);
    const bench_case cases[] = {
        {"gpt3-175b", "dgx-a100", 1024, 1536, 8, 8, 1, 1, 1, true, true, MP_RECOMPUTE_SELECTIVE,
         MP_SCHED_1F1B},
        {"gpt3-175b", "dgx-a100", 1024, 1536, 8, 16, 3, 1, 1, true, true, MP_RECOMPUTE_FULL,
         MP_SCHED_INTERLEAVED},
        {"megatron-1t", "dgx-a100", 3072, 3072, 8, 64, 2, 1, 1, false, false, MP_RECOMPUTE_FULL,
         MP_SCHED_INTERLEAVED},
        {"llama3-405b", "dgx-h100", 16128, 2016, 8, 14, 1, 2, 1, true, true,
         MP_RECOMPUTE_SELECTIVE, MP_SCHED_ZBH1},
        {"t5-11b", "dgx-a100", 64, 128, 8, 1, 1, 1, 2, false, false, MP_RECOMPUTE_NONE,
         MP_SCHED_GPIPE},
        {"gpt3-125m", "a100-4xhdr", 8, 64, 1, 1, 1, 1, 8, false, false, MP_RECOMPUTE_FULL,
         MP_SCHED_1F1B},
        /* the V schedules with DP overlap: their DP windows come from
         * replaying the schedule's order (planner/cost.c v_replay_windows) */
        {"gpt3-175b", "dgx-h100", 64, 1536, 8, 2, 2, 1, 1, true, true, MP_RECOMPUTE_SELECTIVE,
         MP_SCHED_ZBV},
        {"gpt3-175b", "dgx-h100", 256, 1536, 8, 8, 2, 1, 1, true, true, MP_RECOMPUTE_SELECTIVE,
         MP_SCHED_ZBV},
        {"gpt3-175b", "dgx-h100", 512, 1536, 8, 16, 2, 1, 1, true, true, MP_RECOMPUTE_SELECTIVE,
         MP_SCHED_ZBV},
        {"gpt3-175b", "dgx-h100", 256, 1536, 8, 8, 2, 1, 1, true, true, MP_RECOMPUTE_SELECTIVE,
         MP_SCHED_DUALPIPEV},
        {"gpt3-175b", "dgx-h100", 512, 1536, 8, 16, 1, 1, 1, true, true, MP_RECOMPUTE_SELECTIVE,
         MP_SCHED_DUALPIPE},
    };
    int over = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const bench_case *b = &cases[k];
        mp_config c;
        memset(&c, 0, sizeof c);
        const mp_model *m = mp_model_preset(b->model);
        mp_error err;
        if (!m || mp_hw_preset(b->hw, &c.hw, &err) != MP_OK) {
            fprintf(stderr, "bench_estimate: no preset %s / %s\n", b->model, b->hw);
            return 2;
        }
        c.model = *m;
        c.training = (mp_training){.gpus = b->gpus, .seq = m->seq, .global_batch = b->gb,
                                   .precision = MP_DTYPE_BF16};
        c.parallel = (mp_parallel){.tp = b->tp, .pp = b->pp, .vpp = b->vpp, .cp = b->cp,
                                   .dp = b->gpus / (b->tp * b->pp * b->cp), .sp = b->sp,
                                   .micro_batch = b->mb, .recompute = b->rc,
                                   .dist_opt = b->dist_opt, .dp_overlap = b->dist_opt,
                                   .schedule = b->sched};
        mp_estimate e;
        if (mp_estimate_config(&c, NULL, &e, &err) != MP_OK) {
            fprintf(stderr, "bench_estimate: %s: %s: %s\n", b->model, err.field, err.msg);
            return 2;
        }
        double sink = 0.0, t0 = now_s();
        for (int i = 0; i < repeat; i++) {
            mp_estimate_config(&c, NULL, &e, &err);
            sink += e.time.step;
        }
        double per = (now_s() - t0) / repeat;
        printf("%-12s %-10s gpus=%-6lld tp=%lld pp=%lld vpp=%lld cp=%lld %-16s %8.2f us/estimate%s\n",
               b->model, b->hw, (long long)b->gpus, (long long)b->tp, (long long)b->pp,
               (long long)b->vpp, (long long)b->cp, mp_schedule_name(b->sched), per * 1e6,
               per > BUDGET_S ? "  OVER BUDGET" : "");
        if (per > BUDGET_S || sink <= 0.0)
            over++;
    }
    printf("budget: %.0f us per estimate\n", BUDGET_S * 1e6);
    return check && over ? 1 : 0;
}
