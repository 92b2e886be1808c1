/* yaml_tree.h — a YAML document loaded into a small tree (libyaml events)
 * that remembers the line and column of every node, so that validation done
 * long after parsing can still point the user at the right place. */
#ifndef MP_YAML_TREE_H
#define MP_YAML_TREE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef enum { MP_Y_SCALAR, MP_Y_SEQ, MP_Y_MAP } mp_ykind;

typedef struct mp_ynode {
    mp_ykind kind;
    int line, column;        /* 1-based position of the node's first character */
    char *text;              /* scalar: its value, NUL-terminated */
    size_t text_len;
    bool plain;              /* scalar written without quotes (may be a number/bool/null) */
    size_t n;                /* seq: items; map: key/value pairs */
    struct mp_ynode **items; /* seq: n items; map: 2n entries, key then value */
} mp_ynode;

#define MP_YAML_MAX_DEPTH 64
#define MP_YAML_MAX_NODES 1000000

/* Parses text (exactly one document; anchors are fine, aliases refused).
 * *root is NULL for an empty document. Errors carry origin:line:col. */
mp_status mp_yaml_load(const char *text, size_t len, const char *origin, mp_ynode **root,
                       mp_error *err);
void mp_yaml_free(mp_ynode *node);

/* Value of key in a map (NULL when absent or node is not a map). */
const mp_ynode *mp_ymap_get(const mp_ynode *map, const char *key);
/* Node at a dotted path ("scale_up.bw_per_gpu") below root, or NULL. */
const mp_ynode *mp_ynode_at(const mp_ynode *root, const char *path);

/* "null", "~" or an empty plain scalar. */
bool mp_yscalar_is_null(const mp_ynode *n);
/* A quoted scalar with white space at either end (" 2", "2 "): a plain one
 * never has any, libyaml trims it. */
bool mp_yscalar_spaced(const mp_ynode *n);

#endif
