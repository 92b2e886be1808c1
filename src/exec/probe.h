/* probe.h — what a run records and the test-only switches it obeys: per-op
 * timings (kept here as plain events and turned into an mp_timeline by the
 * driver), the collective a test asks to drop, the rank a test asks to kill. */
#ifndef MP_EXEC_PROBE_H
#define MP_EXEC_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include "exec/backend.h"
#include "sim/timeline.h"

typedef struct mp_probe {
    const mp_backend *be;
    bool recording;    /* timings of this step are kept */
    double t0;         /* start of the iteration on the shared clock */
    int rank;          /* global rank, for the events */
    int microbatch, chunk;
    mp_event *events;
    size_t n, cap;
    bool oom;
    /* Test-only: the collective site to skip ("tp-attn", "tp-mlp", "tp-embed",
     * "tp-head", "tp-lngrad", "dp-grad", "pp-embgrad", "cp-dkv",
     * "tp-qknorm-grad" (the QK-norm scales' TP sum), "pp-relgrad" (T5's
     * relative-bias copies over a pipeline), "pp-mirror"
     * (dualpipe's sum of a stage's two copies), "pp-mirror-load" (theirs of the
     * expert bias's token counts), "zero-tied-sum" (ZeRO-2/3 with pp:
     * the tied embedding's shards summed whole before the stages' sum); and
     * planted errors: "dualpipe-mtp-tokens" (DualPipe's reverse head runs its MTP
     * modules on the other direction's micro-batch); NULL: none). */
    const char *drop_site;
    /* Test-only: this rank raises kill_signal (SIGKILL when 0; SIGSTOP stops
     * it, for the watchdog's test) at the first backward of step kill_step
     * (-1: never). */
    int kill_step, step, kill_signal;
} mp_probe;

void mp_probe_init(mp_probe *p, const mp_backend *be, int rank);
void mp_probe_free(mp_probe *p);
/* Records [start, now) on a stream; no-op unless recording. */
void mp_probe_record(mp_probe *p, double start, mp_stream stream, mp_event_kind kind,
                     bool per_microbatch);
/* Whether the collective at `site` must be skipped (test switch). */
bool mp_probe_drops(const mp_probe *p, const char *site);

#endif
