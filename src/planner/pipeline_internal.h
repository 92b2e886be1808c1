/* pipeline_internal.h — the non-uniform pipeline makespan estimate uses. */
#ifndef MP_PIPELINE_INTERNAL_H
#define MP_PIPELINE_INTERNAL_H

#include <stdint.h>

#include "core/config.h"

/* round[k]: busy seconds of pipeline rank k per micro-batch (all its chunks,
 * with their p2p); ramp[k]: its contribution to fill and drain (round[k] for
 * GPipe/1F1B/interleaved; f + b - w + 2 p2p summed over chunks for ZB-H1).
 * Returns m * max(round) + (sum(ramp) - ramp[argmax]) / v. */
double mp_pipeline_makespan_ranks(int64_t m, int64_t v, int64_t p, const double *round,
                                  const double *ramp);

/* DualPipe(V) (pipeline.c, docs/cost-model.md §6), f the forward, b the
 * input-gradient half, w the weight-gradient half of a chunk, each transfer
 * lat plus wire seconds on its link: the fill per rank of the V and chunk;
 * the steady-state transfers of rank r's F&B units per round (both units'
 * sends, lat + 2 wire each, less those that stay on an end rank); and the
 * rest of the exact makespan on equal stages, once per step (may be
 * negative: with b > f the fills overlap by up to a forward). */
double mp_dualpipe_fill(double f, double b, double w, double lat, double wire);
double mp_dualpipe_unit_links(int64_t p, int64_t r, double lat, double wire);
double mp_dualpipe_turn(mp_schedule_kind s, int64_t p, double f, double b, double w, double lat,
                        double wire);

/* Micro-batch chunks stashed on pipeline rank r at its peak: the bound of
 * the schedule that the simulator and executor run (sim/schedule.h). */
#include "core/config.h"
double mp_pipeline_inflight_chunks(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, int64_t r);
/* Split backward: the Ws waiting on rank r with their output gradients
 * (sim/schedule.h, mp_schedule_w_pending_bound). */
double mp_pipeline_w_pending_chunks(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, int64_t r);
/* DualPipe(V): waiting Ws and chunks in flight within the in-flight bound
 * together (sim/schedule.h, mp_schedule_w_under_inflight). */
bool mp_pipeline_w_under_inflight(mp_schedule_kind s);
/* DualPipe: rank r's largest stash over its op list (the one the simulator
 * runs), act[ch] the bytes a micro-batch of chunk ch keeps from its F to its
 * W, hold[ch] its output gradients held from a B to a deferred W. Its two
 * chunks are different stages whose micro-batches are not in flight in equal
 * numbers at the peak (rank 0: p of its first stage, 1 of its last);
 * at_peak[ch] (may be NULL): the micro-batches of chunk ch kept then. At most
 * two chunks; -1 if more or no op list. */
double mp_pipeline_stash_peak(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, int64_t r,
                              const double *act, const double *hold, double *at_peak);

#endif
