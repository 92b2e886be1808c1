/* layout.h — an explicit pipeline layout, in Megatron-Core's grammar
 * (--pipeline-model-parallel-layout; docs/formats.md, "Pipeline layout").
 *
 * "Et*3|(tt|)*29tmL": E the embedding, t a transformer layer, m a
 * multi-token-prediction layer, L the loss (final norm + LM head), '|' ends a
 * stage ("Et|t||tL": an empty one, "E|t*4|L": E and L alone); "(x)*n" and
 * "c*n" repeat, commas are cosmetic. The string lists all pp*vpp virtual
 * stages in the order Megatron assigns them: stage k is chunk k / pp of
 * pipeline rank k % pp (megaplan's order, core/plan.h). */
#ifndef MP_LAYOUT_H
#define MP_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "core/plan.h"

typedef struct mp_layout {
    int32_t n_stages;
    int32_t blocks[MP_MAX_STAGES]; /* transformer layers (t) of each virtual stage */
    int32_t mtp_stage;             /* the stage holding the m's (the last, or Megatron's
                                      standalone MTP stage before it); -1 when none */
    int32_t mtp_layers;
} mp_layout;

/* Parses text and checks it as Megatron-Core does (its
 * PipelineParallelLayerLayout: E first and once, L last and once in the
 * layers' order with the bars left out, as many t as the model has layers,
 * mtp_layers m's after every t, all in the last chunk of one rank) for
 * pp*vpp stages. The m's may sit before the last stage (Megatron's
 * standalone MTP stage, its mtp_standalone: out->mtp_stage < n_stages - 1;
 * the planner costs the modules there, planner/cost.c
 * place_mtp_standalone). A stage may hold nothing, or E or L alone; E and L
 * belong to the first and the last stage whatever stage of the text names
 * them, as Megatron builds them (mp_layout_stage_items). Errors name the
 * field "pipeline_layout" and the character (1-based, in text as given) at
 * fault. */
mp_status mp_layout_parse(const char *text, int64_t pp, int64_t vpp, int64_t layers,
                          int64_t mtp_layers, mp_layout *out, mp_error *err);

/* The stages text lists ('|' count + 1 after expansion), or -1 when it does
 * not expand (mp_layout_parse says why). */
int64_t mp_layout_count_stages(const char *text);

/* A layout for L transformer layers over n stages when Megatron's default
 * split has none (search proposes it): the embedding and the loss count as a
 * layer each, the L + 2 spread as evenly as they go, the stages after the
 * first taking the extra ones (the first stage stashes the most micro-batches),
 * written with repeats ("Et*2|(t*4|)*14t*3L"). false when n < 1, n > L or the
 * text does not fit in size. */
bool mp_layout_propose(int64_t L, int64_t n, char *out, size_t size);

/* The model's multi-token-prediction layers as a layout counts them (the m's
 * it must hold): 0 while megaplan's model has no MTP module. */
int64_t mp_layout_model_mtp_layers(const mp_model *m);

/* Items [*begin, *end) of stage k of the layout (core/plan.h's items: the
 * embedding with stage 0, the head with the last). */
void mp_layout_stage_items(const mp_layout *l, int64_t layers, int64_t k, int64_t *begin,
                           int64_t *end);

#endif
