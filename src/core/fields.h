/* fields.h — field tables: one row per field of a struct (dotted YAML path,
 * type, offset, unit, allowed range). A table drives reading a YAML mapping
 * into the struct, setting one field from a string (--hw-set), range checks
 * and writing the struct out as a cJSON tree, so each key is spelled once. */
#ifndef MP_FIELDS_H
#define MP_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/hw.h"
#include "core/units.h"
#include "core/yaml_tree.h"

typedef enum {
    MP_FT_INT,    /* int64_t */
    MP_FT_DOUBLE, /* double, with an optional unit */
    MP_FT_BOOL,   /* bool */
    MP_FT_STRING, /* char[size] */
    MP_FT_ENUM,   /* an enum stored as int, named by name_of(0..n_names-1) */
    MP_FT_CURVE   /* mp_curve, written [[x, y], ...] */
} mp_field_type;

typedef struct mp_field {
    const char *path;     /* dotted YAML path: "scale_up.bw_per_gpu" */
    mp_field_type type;
    size_t offset;
    size_t size;          /* STRING: buffer size */
    mp_unit_kind unit;    /* DOUBLE */
    double min, max;      /* INT/DOUBLE inclusive range; CURVE: range of y; STRING: min 1
                             refuses an empty value */
    bool min_open;        /* the minimum itself is excluded (x > min) */
    bool max_open;        /* the maximum itself is excluded (x < max) */
    const char *(*name_of)(int); /* ENUM */
    int n_names;          /* ENUM */
    bool required;        /* must appear in a file */
} mp_field;

#define MP_FIELDS_MAX 64

/* Reads map (a YAML mapping) into obj. prefix ("" or "model.") goes in front of
 * every field named in errors. Unknown keys, wrong types, out-of-range values
 * and duplicates are errors at the node's line and column; a missing required
 * field is reported at the mapping. seen (n entries, may be NULL) says which
 * fields appeared. skip_keys (NULL-terminated, may be NULL) are top-level keys
 * the caller handles itself. */
mp_status mp_fields_decode(const mp_field *tab, size_t n, const mp_ynode *map,
                           const char *prefix, const char *origin, void *obj, bool *seen,
                           const char *const *skip_keys, mp_error *err);

/* Sets the field at path from text (units allowed), checking its range. */
mp_status mp_fields_set_text(const mp_field *tab, size_t n, void *obj, const char *path,
                             const char *text, mp_error *err);

/* Checks every field's range (for structs built in code or overridden).
 * field in err is prefix + path. */
mp_status mp_fields_check(const mp_field *tab, size_t n, const void *obj, const char *prefix,
                          mp_error *err);

/* Builds a cJSON object with nested objects for dotted paths (NULL on OOM). */
cJSON *mp_fields_to_json(const mp_field *tab, size_t n, const void *obj);

/* The row for path, or NULL. */
const mp_field *mp_fields_find(const mp_field *tab, size_t n, const char *path);

/* Parses a yes/no word: true/false, yes/no, on/off (any case) or 1/0. The
 * one boolean reader: files, options and --fix all accept these and no other. */
bool mp_parse_bool_word(const char *s, bool *out);

/* The length in bytes of the character at s (n bytes left) when a name or
 * other text field may hold it: printable ASCII, or well-formed UTF-8 other
 * than the C1 controls (U+0080-U+009F, of which U+0085 ends a YAML line)
 * and U+2028/U+2029 (which end a YAML line too); 0 for anything else, with
 * *cp the code point when the bytes were well-formed UTF-8 and -1 when not.
 * The written files carry names in comments and strings: such a character
 * split a line there, and megaplan could not read back what it wrote. */
size_t mp_text_char_len(const char *s, size_t n, long *cp);
/* What mp_text_char_len refuses, replaced by '_' in s (NUL-terminated): for
 * a name megaplan takes from a file or folder name. */
void mp_text_sanitize(char *s);
/* Parses a whole decimal integer; false when not one or out of int64 range. */
bool mp_parse_int64(const char *s, int64_t *out);

/* A quoted value with spaces around it (tp: " 2") is refused as an option's
 * is (" 2" is not a value written alone): MP_EINPUT at n, else MP_OK. */
mp_status mp_yscalar_refuse_spaced(const mp_ynode *n, const char *origin, const char *field,
                                   mp_error *err);

/* Closest known name within edit distance 2 (for "did you mean"), or NULL. */
const char *mp_closest_name(const char *word, const char *const *names, size_t n);

#endif
