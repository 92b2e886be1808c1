/* bench_search — search's budgets (docs/design.md §8): the full space of 175B on
 * 1024 GPUs in under 1 s, 1T on 4096 GPUs in under 3 s (2 cores), Mixtral
 * 8x7B on 64 GPUs and DeepSeek-V3 on 2048 in under 2 s each, with the
 * stage split and the simulator's re-ranking included, and the process's peak
 * memory under 200 MB.
 *   bench_search [--check] [--repeat N] [--only MODEL]
 * prints the best wall time of N runs per case (--only: that preset's cases
 * alone, for profiling one) and the peak resident memory;
 * --check exits 1 when a budget is missed. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/hw.h"
#include "core/model.h"
#include "core/tables.h"
#include "search/driver.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    bool check = false;
    int repeat = 3;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) check = true;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    }
    if (repeat < 1) repeat = 1;
    const struct {
        const char *model, *hw;
        int64_t gpus;
        double budget_s;
        int64_t gb; /* 0: the preset's (below) */
    } cases[] = {
        {"gpt3-175b", "dgx-a100", 1024, 1.0, 0},
        {"megatron-1t", "dgx-a100", 4096, 3.0, 0},
        {"llama3-70b", "dgx-h100", 1024, 1.0, 0},
        /* mixtures of experts, expert splits and dispatchers included
         * (issue 14's budget: 2 s each) */
        {"mixtral-8x7b", "dgx-h100", 64, 2.0, 0},
        {"deepseek-v3", "dgx-h100", 2048, 2.0, 0},
        /* and at DeepSeek-V3's own batch, what `megaplan search --model
         * deepseek-v3 --gpus 2048` searches: 15360 has many divisors
         * (micro-batch sizes), 2.7 times the candidates of 16384 */
        {"deepseek-v3", "dgx-h100", 2048, 2.0, 15360},
        {"deepseek-v3", "b200", 2048, 2.0, 15360},
        /* nothing fits (671B on 64 GPUs): the answer is the closest plan
         * (31 s until 2026-12-05, when a second pass under a looser memory
         * bound costed 327k candidates to find it) */
        {"deepseek-v3", "dgx-h100", 64, 2.0, 0},
    };
    int bad = 0;
    printf("%-14s %-10s %6s %6s %10s %8s %10s %8s  %s\n", "model", "hw", "gpus", "batch",
           "candidates", "costed", "best s", "budget", "winner");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (only && strcmp(only, cases[k].model)) continue;
        mp_search_options o;
        memset(&o, 0, sizeof o);
        const mp_model *m = mp_model_preset(cases[k].model);
        mp_error err;
        if (!m || mp_hw_preset(cases[k].hw, &o.base.hw, &err) != MP_OK) {
            fprintf(stderr, "bench_search: unknown preset %s / %s\n", cases[k].model, cases[k].hw);
            return 2;
        }
        o.base.model = *m;
        o.base.training.gpus = cases[k].gpus;
        o.base.training.seq = m->seq;
        int64_t gb = cases[k].gb ? cases[k].gb : mp_model_preset_global_batch(m->name);
        /* the preset's batch rounded up to a multiple of the GPUs where it
         * is not one and they are many (DeepSeek-V3's 15360 on 2048: 16384,
         * the case this bench always ran; the cases above with gb give the
         * preset's own) */
        if (!cases[k].gb && gb > 0 && gb % cases[k].gpus && cases[k].gpus > gb / 8)
            gb = (gb + cases[k].gpus - 1) / cases[k].gpus * cases[k].gpus;
        o.base.training.global_batch = gb > 0 ? gb : 512;
        o.base.training.precision = MP_DTYPE_BF16;
        o.top_k = 5;
        double best = 1e30;
        mp_search_result r;
        memset(&r, 0, sizeof r);
        for (int i = 0; i < repeat; i++) {
            mp_search_result_free(&r);
            double t0 = now_s();
            mp_status st = mp_search(&o, &r, &err);
            double dt = now_s() - t0;
            if (st != MP_OK && !(st == MP_ENOFIT && r.have_closest)) {
                fprintf(stderr, "bench_search: %s: %s\n", cases[k].model, err.msg);
                return 1;
            }
            if (dt < best) best = dt;
        }
        bool none = r.n == 0; /* nothing fits: the closest plan */
        const mp_parallel *p = none ? &r.closest.parallel : &r.plans[0].config.parallel;
        printf("%-14s %-10s %6lld %6lld %10lld %8lld %10.3f %8.1f  %stp=%lld pp=%lld vpp=%lld cp=%lld dp=%lld mb=%lld %s\n",
               cases[k].model, cases[k].hw, (long long)cases[k].gpus,
               (long long)o.base.training.global_batch,
               (long long)r.counts.considered, (long long)r.counts.estimated, best, cases[k].budget_s,
               none ? "none fits, closest " : "", (long long)p->tp, (long long)p->pp,
               (long long)p->vpp, (long long)p->cp, (long long)p->dp, (long long)p->micro_batch,
               best > cases[k].budget_s ? "OVER" : "ok");
        if (best > cases[k].budget_s) bad = 1;
        mp_search_result_free(&r);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double mb = (double)ru.ru_maxrss / 1024.0;
#ifdef __SANITIZE_ADDRESS__
    /* ASan's shadow memory says nothing about megaplan's own */
    printf("peak resident memory %.1f MB (not checked under AddressSanitizer)\n", mb);
#else
    printf("peak resident memory %.1f MB (budget 200 MB) %s\n", mb, mb > 200 ? "OVER" : "ok");
    if (mb > 200) bad = 1;
#endif
    return check && bad ? 1 : 0;
}
