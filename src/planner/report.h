/* report.h — the estimate as the machine-readable object of docs/formats.md, shared
 * by estimate, search (an array of them) and simulate (which adds "simulation"). */
#ifndef MP_REPORT_H
#define MP_REPORT_H

#include <cjson/cJSON.h>

#include "core/config.h"
#include "planner/cost.h"

#define MP_GIB (1024.0 * 1024.0 * 1024.0)

/* {"model","hw","gpus","parallel","memory_gib","time_s","throughput","fits"}
 * plus "band" (where the measured step, tokens/s and MFU likely lie, from the
 * profile's error_band; planner/band.h) when the profile has one, "over_gib"
 * when it does not fit; defaults (may be NULL or "") adds a
 * "defaults" array of the settings that took defaults (one per ';'-separated
 * item). NULL on allocation failure. */
cJSON *mp_estimate_to_json(const mp_config *c, const mp_estimate *e, const char *defaults);

#endif
