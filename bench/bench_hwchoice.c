/* bench_hwchoice — the search over hardware's budget: Llama-3 70B over five
 * profiles and 64..8192 GPUs (40 points, each a search) in under 5 s on two
 * cores.
 *   bench_hwchoice [--check] [--repeat N]
 * prints the best wall time of N runs, the points searched in full and the
 * cheapest point; --check exits 1 when the budget is missed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hw.h"
#include "core/model.h"
#include "core/tables.h"
#include "search/hwchoice.h"

#define BUDGET_S 5.0

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
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) check = true;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
    }
    if (repeat < 1) repeat = 1;
    static mp_hwchoice_options o;
    memset(&o, 0, sizeof o);
    const mp_model *m = mp_model_preset("llama3-70b");
    if (!m) return 2;
    o.search.base.model = *m;
    o.search.base.training.seq = m->seq;
    int64_t gb = mp_model_preset_global_batch(m->name);
    o.search.base.training.global_batch = gb > 0 ? gb : 512;
    o.search.base.training.precision = MP_DTYPE_BF16;
    o.search.base.training.tokens = 15e12;
    const char *hws[] = {"dgx-a100", "dgx-h100", "h200", "b200", "gb200-nvl72"};
    mp_error err;
    for (int i = 0; i < 5; i++)
        if (mp_hw_preset(hws[i], &o.hws[o.n_hw++], &err) != MP_OK) return 2;
    o.gpus_min = 64;
    o.gpus_max = 8192;
    o.pue = 1.0;
    double best = 1e30;
    mp_hwchoice_result r = {0};
    for (int k = 0; k < repeat; k++) {
        mp_hwchoice_result_free(&r);
        double t0 = now_s();
        if (mp_hwchoice_run(&o, &r, &err) != MP_OK) {
            fprintf(stderr, "bench_hwchoice: %s\n", err.msg);
            return 2;
        }
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    const mp_hwchoice_point *c = r.cheapest >= 0 ? &r.points[r.cheapest] : NULL;
    printf("llama3-70b, 15T tokens, 5 profiles x 64..8192 GPUs: %d points, best of %d: %.2f s "
           "(budget %.1f s) %s\n",
           r.n, repeat, best, BUDGET_S, best <= BUDGET_S ? "ok" : "MISSED");
    if (c)
        printf("cheapest: %s x %lld, %.1f days, $%.0f\n", o.hws[c->hw].name, (long long)c->gpus,
               c->days, c->cost_usd);
    mp_hwchoice_result_free(&r);
    return check && best > BUDGET_S ? 1 : 0;
}
