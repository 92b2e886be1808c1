/* io.h — files in and out: model, hardware profile and plan as YAML (libyaml),
 * HuggingFace config.json and results as JSON (cJSON). Every error names the
 * file, line, column and field. Writers build text in an mp_buf; the CLI
 * decides where it goes (files through core/output.h). */
#ifndef MP_IO_H
#define MP_IO_H

#include <cjson/cJSON.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/error.h"
#include "core/hw.h"
#include "core/model.h"
#include "core/plan.h"

/* Larger input files are refused. Model, profile and plan files are a few
 * KB, a HuggingFace config.json tens of KB; 4 MiB of JSON is at most ~2M cJSON
 * nodes (~130 MB), where 16 MiB of "[1,1,1,..." took 570 MB. */
#define MP_MAX_INPUT_BYTES (4u << 20)

/* --model: a preset name or alias, a YAML file, or a HuggingFace config.json. */
mp_status mp_model_load(const char *spec, mp_model *out, mp_error *err);
/* --hw: a built-in profile name or a YAML file. */
mp_status mp_hw_load(const char *spec, mp_hw *out, mp_error *err);

/* Parse from text already in memory; `origin` names it in errors. */
mp_status mp_model_parse_yaml(const char *text, size_t len, const char *origin, mp_model *out,
                              mp_error *err);
mp_status mp_model_parse_hf_json(const char *text, size_t len, const char *origin,
                                 mp_model *out, mp_error *err);
mp_status mp_hw_parse_yaml(const char *text, size_t len, const char *origin, mp_hw *out,
                           mp_error *err);

/* Plan files (docs/formats.md). */
mp_status mp_plan_read_file(const char *path, mp_plan *out, mp_error *err);
mp_status mp_plan_parse_yaml(const char *text, size_t len, const char *origin, mp_plan *out,
                             mp_error *err);
/* predicted may be NULL; it is the estimate object (planner's JSON) to embed. */
void mp_plan_write_yaml(const mp_plan *plan, const cJSON *predicted, mp_buf *out);

/* cJSON trees of the types (NULL on OOM); the JSON/YAML writers of every verb
 * build on these so names are spelled once. */
cJSON *mp_model_to_json(const mp_model *m);
cJSON *mp_hw_to_json(const mp_hw *hw);
/* The same with sizes, rates and times as strings with units ("80 GiB",
 * "300 GB/s") for people to read; mp_hw_parse_yaml reads them back. */
cJSON *mp_hw_to_json_units(const mp_hw *hw);
cJSON *mp_training_to_json(const mp_training *t);
cJSON *mp_parallel_to_json(const mp_parallel *p, int64_t global_batch, int64_t microbatches);

/* Generic writers: a cJSON tree as block-style YAML, or as JSON text. */
void mp_json_write_yaml(const cJSON *node, int indent, mp_buf *out);
void mp_json_write(const cJSON *node, bool pretty, mp_buf *out);

#endif
