/* disagree.c — the line `megaplan search` prints when its winner's
 * simulation and estimate disagree by more than the cost model's error;
 * apart from search.c so that a unit test holds its wording
 * (tests/cli/test_disagree.c) whatever real search shows it. */
#include "cli/disagree.h"

#include <math.h>
#include <stdbool.h>

/* The parts of the step in one order, with the names explain uses. */
int mp_cli_step_parts(const mp_times *t, const char **names, double *v)
{
    static const char *n[] = {"compute", "recompute", "TP", "CP", "PP", "bubble", "DP",
                              "optimizer"};
    double x[] = {t->compute, t->recompute, t->tp_comm, t->cp_comm, t->pp_comm, t->bubble,
                  t->dp_comm, t->optimizer};
    for (int i = 0; i < 8; i++) {
        names[i] = n[i];
        v[i] = x[i];
    }
    return 8;
}

/* When the estimate and the simulation of the winner are further apart than
 * the model's error: by how much, and which parts differ most. */
void mp_cli_disagreement(const mp_times *est, const mp_times *sim, mp_buf *b)
{
    double rel = est->step > 0 ? sim->step / est->step - 1 : 0;
    if (rel <= MP_CLI_MODEL_ERROR && rel >= -MP_CLI_MODEL_ERROR)
        return;
    const char *names[8];
    double e[8], m[8];
    static const char *long_names[] = {"compute", "recompute", "TP communication",
                                       "CP communication", "PP communication",
                                       "pipeline bubble", "DP communication", "optimizer step"};
    mp_cli_step_parts(est, names, e);
    int n = mp_cli_step_parts(sim, names, m);
    mp_buf_printf(b, "        the simulation is %+.0f%% off the estimate (%.3f s), more than the "
                     "cost model's %.0f%% error (docs/validation.md):",
                  100 * rel, est->step, 100 * MP_CLI_MODEL_ERROR);
    /* the two parts that differ most, as shares of the estimated step */
    bool used[8] = {false};
    for (int k = 0; k < 2; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!used[i] && (best < 0 || fabs(m[i] - e[i]) > fabs(m[best] - e[best])))
                best = i;
        if (best < 0 || fabs(m[best] - e[best]) < 0.01 * est->step)
            break;
        used[best] = true;
        mp_buf_printf(b, "%s %s %.3f s simulated against %.3f s estimated (%+.0f%%)", k ? ";" : "",
                      long_names[best], m[best], e[best], 100 * (m[best] - e[best]) / est->step);
    }
    mp_buf_puts(b, "\n");
}
