/* explain.h — why a configuration is refused, does not fit, or is slower
 * than the best one search finds, part by part (`megaplan explain`), and the
 * one-line comparisons search prints under its table. Builds text in an
 * mp_buf; the CLI prints it. */
#ifndef MP_EXPLAIN_H
#define MP_EXPLAIN_H

#include <stddef.h>

#include "core/buf.h"
#include "core/config.h"
#include "planner/cost.h"
#include "planner/search.h"

/* The settings of b that differ from a, "pp=16 vpp=1 mb=2" ("same settings" when none). */
void mp_explain_config_diff(const mp_config *a, const mp_config *b, char *buf, size_t size);

/* Why other is slower than winner, naming the part with the largest
 * difference as a share of the winner's step: "+6.1% step: pipeline bubble
 * +4.0%, DP communication +1.9%". */
void mp_explain_estimate_diff(const mp_estimate *winner, const mp_estimate *other, char *buf,
                              size_t size);

/* The whole explanation of config c against the best of a search already
 * run (r NULL, or r->n == 0, when it found nothing; why_none then says why),
 * so `explain` and `search` name the same best for the same job: the CLI runs
 * one search, as `search` does (mp_explain, search/driver.h, runs it too).
 * *verdict: 0 runs, fits and is (within 1%) the best; 1 slower than the
 * best; 2 does not fit; 3 refused. */
mp_status mp_explain_against(const mp_config *c, const mp_search_result *r, const char *why_none,
                             mp_buf *out, int *verdict, mp_error *err);

#endif
