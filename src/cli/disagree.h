/* disagree.h — search's account of a winner whose simulation and estimate
 * are further apart than the cost model's error (src/cli/search.c). */
#ifndef MP_CLI_DISAGREE_H
#define MP_CLI_DISAGREE_H

#include "core/buf.h"
#include "planner/cost.h"

/* The cost model's error on measured runs: its acceptance bound on the
 * multi-node measurements, MAPE <= 10% (docs/validation.md). An estimate and
 * a simulation further apart than this disagree by more than the model
 * knows, and search says where. */
#define MP_CLI_MODEL_ERROR 0.10

/* The parts of a step in one order, with the names explain uses: 8 of them
 * into names and v; returns 8. */
int mp_cli_step_parts(const mp_times *t, const char **names, double *v);

/* Appends to b, when the simulated step is more than MP_CLI_MODEL_ERROR off
 * the estimated one, the line that says by how much and names the (at most
 * two) parts that differ most, each by at least 1% of the estimated step;
 * nothing otherwise. */
void mp_cli_disagreement(const mp_times *est, const mp_times *sim, mp_buf *b);

#endif
