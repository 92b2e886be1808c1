#include "core/yaml_tree.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static mp_ynode *node_new(mp_ykind kind, const yaml_mark_t *mark)
{
    mp_ynode *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->kind = kind;
    n->line = (int)mark->line + 1;
    n->column = (int)mark->column + 1;
    return n;
}

void mp_yaml_free(mp_ynode *node)
{
    if (!node)
        return;
    size_t count = node->kind == MP_Y_MAP ? 2 * node->n : node->n;
    for (size_t i = 0; i < count; i++)
        mp_yaml_free(node->items[i]);
    free(node->items);
    free(node->text);
    free(node);
}

/* Appends child to a collection. The capacity is implied by the count
 * (doubling at 4, 8, 16, ...), so no extra field is needed. */
static bool node_push(mp_ynode *parent, mp_ynode *child, size_t *count)
{
    size_t c = *count;
    if (c == 0 || (c >= 4 && (c & (c - 1)) == 0)) { /* full at 0, 4, 8, 16, ...: grow */
        size_t cap = c ? 2 * c : 4;
        mp_ynode **p = realloc(parent->items, cap * sizeof *p);
        if (!p)
            return false;
        /* zeroed so a key still waiting for its value frees cleanly */
        memset(p + c, 0, (cap - c) * sizeof *p);
        parent->items = p;
    }
    parent->items[c] = child;
    *count = c + 1;
    return true;
}

typedef struct frame {
    mp_ynode *node;
    size_t count; /* entries pushed so far (map: keys and values) */
} frame;

/* The dotted path of the keys open at the point of a syntax error
 * ("scale_up.bw_per_gpu"), so even a broken file names the field. */
static void open_path(const frame *stack, int depth, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < depth; i++) {
        const mp_ynode *node = stack[i].node;
        if (node->kind != MP_Y_MAP || stack[i].count == 0)
            continue;
        /* outer maps: the key whose value is the open collection; the
         * innermost map: the key waiting for its value, if any */
        if (i == depth - 1 && stack[i].count % 2 == 0)
            continue;
        size_t key = (stack[i].count - 1) & ~(size_t)1;
        const char *text = node->items[key] ? node->items[key]->text : NULL;
        if (!text)
            continue;
        int w = snprintf(out + n, size - n, "%s%.60s", n ? "." : "", text);
        if (w < 0 || (size_t)w >= size - n)
            break;
        n += (size_t)w;
    }
}

static mp_status syntax_error(mp_error *err, const char *origin, const yaml_parser_t *p,
                              const frame *stack, int depth, const char *text, size_t len)
{
    int line = (int)p->problem_mark.line + 1;
    int col = (int)p->problem_mark.column + 1;
    if (p->error == YAML_READER_ERROR) {
        /* the reader (bad bytes, bad UTF-8) gives a byte offset, not a mark */
        line = col = 1;
        for (size_t i = 0; i < p->problem_offset && i < len; i++) {
            if (text[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        depth = 0; /* the reader runs ahead of the parser: no field */
    }
    const char *problem = p->problem ? p->problem : "malformed YAML";
    char field[128];
    open_path(stack, depth, field, sizeof field);
    if (p->context)
        return mp_error_set(err, MP_EINPUT, origin, line, col, field[0] ? field : NULL,
                            "YAML syntax error: %s %s", problem, p->context);
    return mp_error_set(err, MP_EINPUT, origin, line, col, field[0] ? field : NULL,
                        "YAML syntax error: %s", problem);
}

/* A tag (!!str 5, !!binary Z3B0, !foo x) asks for a reading megaplan does not
 * do: it was dropped, so "seq: !!str 1024" read as the number and "arch:
 * !!binary Z3B0" as the text. Refused, as aliases are. */
static mp_status tag_error(mp_error *err, const char *origin, const yaml_event_t *ev,
                           const frame *stack, int depth)
{
    char field[128];
    open_path(stack, depth, field, sizeof field);
    return mp_error_set(err, MP_EINPUT, origin, (int)ev->start_mark.line + 1,
                        (int)ev->start_mark.column + 1, field[0] ? field : NULL,
                        "YAML tags (!!str, !name) are not supported");
}

mp_status mp_yaml_load(const char *text, size_t len, const char *origin, mp_ynode **root,
                       mp_error *err)
{
    *root = NULL;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return mp_error_set(err, MP_ENOMEM, origin, 0, 0, NULL, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);

    frame stack[MP_YAML_MAX_DEPTH + 1];
    int depth = 0; /* frames in use */
    mp_ynode *doc_root = NULL;
    int documents = 0;
    size_t nodes = 0;
    mp_status st = MP_OK;
    bool done = false;

    while (!done && st == MP_OK) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            st = syntax_error(err, origin, &parser, stack, depth, text, len);
            break;
        }
        mp_ynode *made = NULL;
        bool opens = false;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1)
                st = mp_error_set(err, MP_EINPUT, origin, (int)ev.start_mark.line + 1,
                                  (int)ev.start_mark.column + 1, NULL,
                                  "more than one YAML document in the file");
            break;
        case YAML_ALIAS_EVENT: {
            char field[128];
            open_path(stack, depth, field, sizeof field);
            st = mp_error_set(err, MP_EINPUT, origin, (int)ev.start_mark.line + 1,
                              (int)ev.start_mark.column + 1, field[0] ? field : NULL,
                              "YAML aliases (*name) are not supported");
            break;
        }
        case YAML_SCALAR_EVENT:
            if (ev.data.scalar.tag) {
                st = tag_error(err, origin, &ev, stack, depth);
                break;
            }
            made = node_new(MP_Y_SCALAR, &ev.start_mark);
            if (made) {
                made->text = malloc(ev.data.scalar.length + 1);
                if (!made->text) {
                    free(made);
                    made = NULL;
                } else {
                    memcpy(made->text, ev.data.scalar.value, ev.data.scalar.length);
                    made->text[ev.data.scalar.length] = '\0';
                    made->text_len = ev.data.scalar.length;
                    made->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                }
            }
            if (!made)
                st = mp_error_set(err, MP_ENOMEM, origin, 0, 0, NULL, "out of memory");
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.tag != NULL
                                                     : ev.data.mapping_start.tag != NULL) {
                st = tag_error(err, origin, &ev, stack, depth);
                break;
            }
            made = node_new(ev.type == YAML_SEQUENCE_START_EVENT ? MP_Y_SEQ : MP_Y_MAP,
                            &ev.start_mark);
            opens = true;
            if (!made)
                st = mp_error_set(err, MP_ENOMEM, origin, 0, 0, NULL, "out of memory");
            else if (depth >= MP_YAML_MAX_DEPTH) {
                st = mp_error_set(err, MP_EINPUT, origin, made->line, made->column, NULL,
                                  "nested deeper than %d levels: refused", MP_YAML_MAX_DEPTH);
                free(made);
                made = NULL;
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            if (depth > 0) {
                frame *f = &stack[--depth];
                if (f->node->kind == MP_Y_MAP)
                    f->node->n = f->count / 2;
                else
                    f->node->n = f->count;
            }
            break;
        default:
            break;
        }
        if (made) {
            if (++nodes > MP_YAML_MAX_NODES) {
                st = mp_error_set(err, MP_EINPUT, origin, made->line, made->column, NULL,
                                  "more than %d YAML nodes: refused", MP_YAML_MAX_NODES);
                mp_yaml_free(made);
                made = NULL;
            } else if (depth == 0) {
                doc_root = made;
            } else {
                frame *f = &stack[depth - 1];
                if (f->node->kind == MP_Y_MAP && f->count % 2 == 0 && made->kind != MP_Y_SCALAR) {
                    st = mp_error_set(err, MP_EINPUT, origin, made->line, made->column, NULL,
                                      "a mapping key must be a plain name");
                    mp_yaml_free(made);
                    made = NULL;
                } else if (!node_push(f->node, made, &f->count)) {
                    mp_yaml_free(made);
                    made = NULL;
                    st = mp_error_set(err, MP_ENOMEM, origin, 0, 0, NULL, "out of memory");
                } else if (f->node->kind == MP_Y_MAP) {
                    /* keep n current so a partial tree frees cleanly */
                    f->node->n = (f->count + 1) / 2;
                } else {
                    f->node->n = f->count;
                }
            }
            if (made && opens) {
                stack[depth].node = made;
                stack[depth].count = 0;
                depth++;
            }
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    if (st != MP_OK) {
        mp_yaml_free(doc_root);
        return st;
    }
    *root = doc_root;
    return MP_OK;
}

const mp_ynode *mp_ymap_get(const mp_ynode *map, const char *key)
{
    if (!map || map->kind != MP_Y_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (!strcmp(map->items[2 * i]->text, key))
            return map->items[2 * i + 1];
    return NULL;
}

const mp_ynode *mp_ynode_at(const mp_ynode *root, const char *path)
{
    const mp_ynode *n = root;
    char part[128];
    while (n && *path) {
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        if (len >= sizeof part)
            return NULL;
        memcpy(part, path, len);
        part[len] = '\0';
        n = mp_ymap_get(n, part);
        path += len + (dot ? 1 : 0);
    }
    return n;
}

bool mp_yscalar_is_null(const mp_ynode *n)
{
    if (!n || n->kind != MP_Y_SCALAR || !n->plain)
        return false;
    return n->text_len == 0 || !strcmp(n->text, "~") || !strcmp(n->text, "null") ||
           !strcmp(n->text, "Null") || !strcmp(n->text, "NULL");
}

bool mp_yscalar_spaced(const mp_ynode *n)
{
    if (!n || n->kind != MP_Y_SCALAR || n->text_len == 0)
        return false;
    unsigned char a = (unsigned char)n->text[0], z = (unsigned char)n->text[n->text_len - 1];
    return isspace(a) || isspace(z);
}
