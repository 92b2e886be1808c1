/* decode.h — readers of the core types from a loaded YAML tree (used by the
 * model, hardware and plan files alike), and helpers shared by the io_*.c
 * files. Errors name origin:line:col and the dotted field. */
#ifndef MP_DECODE_H
#define MP_DECODE_H

#include <cjson/cJSON.h>

#include "core/hw.h"
#include "core/model.h"
#include "core/yaml_tree.h"

/* A model / hardware mapping at `node`; prefix ("" or "model.") names fields. */
mp_status mp_model_decode(const mp_ynode *node, const char *prefix, const char *origin,
                          mp_model *out, mp_error *err);
mp_status mp_hw_decode(const mp_ynode *node, const char *prefix, const char *origin,
                       mp_hw *out, mp_error *err);

/* After a validation error whose field is relative to the mapping `map`
 * (e.g. "kv_heads"), points err at that field's node (or the mapping when
 * the field was not written) and prefixes the field name. */
void mp_error_point(mp_error *err, const mp_ynode *map, const char *prefix, const char *origin);

/* An error about a field of the YAML file at path (a plan's model.head_dim,
 * a model file's moe.imbalance) that its check left without a place: the
 * file, and the line of that key (or of the nearest one written above it: a
 * preset's "model: t5-11b"). Nothing when err already names a file or an
 * option. */
void mp_error_point_file(mp_error *err, const char *path);

/* The kinds of file megaplan reads. */
typedef enum { MP_FILE_MODEL, MP_FILE_HW, MP_FILE_PLAN } mp_file_kind;

/* A file of another kind (a plan, a model, a hardware profile, a
 * HuggingFace config.json) given where `want` belongs: an error saying what
 * it is and where it goes, rather than "unknown key" for its first key.
 * MP_OK when root does not look like another kind. */
mp_status mp_check_file_kind(const mp_ynode *root, mp_file_kind want, const char *origin,
                             mp_error *err);

/* A YAML subtree as a cJSON tree (plain scalars become numbers, booleans or
 * null when they read as such). NULL on OOM. */
cJSON *mp_ynode_to_json(const mp_ynode *node);

/* True when path names an existing regular file. */
bool mp_is_file(const char *path);
/* The file name without folders and extension, into buf. */
void mp_basename_stem(const char *path, char *buf, size_t size);

#endif
