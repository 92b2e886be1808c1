/* opt.h — the option tables every verb parses its arguments with, and the
 * verb descriptions --help, `megaplan help VERB`, the man page and the shell
 * completions are generated from (src/cli/verbs.c lists the verbs).
 *
 * Adding an option is adding a row: its name, the placeholder of its value
 * (NULL for a flag), the verb's id for it and one help text. */
#ifndef MP_CLI_OPT_H
#define MP_CLI_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/buf.h"
#include "core/error.h"

enum {
    MP_OPT_HIDDEN = 1u << 0, /* parsed, never shown: test hooks, what a verb passes itself */
    MP_OPT_REPEAT = 1u << 1, /* may be given more than once (--fix, --price): mp_opt_once lets it */
};

typedef struct mp_opt {
    const char *name;  /* "--micro-batches", "-o" */
    const char *alias; /* an older spelling still accepted, never shown ("--microbatches") */
    const char *arg;   /* the value's placeholder ("N", "FILE"); NULL: a flag, no value */
    int id;            /* the verb's own number for it */
    unsigned flags;    /* MP_OPT_* */
    const char *help;  /* what it does; lines are wrapped by the writer, '\n' breaks one */
    const char *values; /* the words the value may be, space-separated, for completion */
} mp_opt;

typedef struct mp_opt_group {
    const char *title; /* "options", "model and cluster", ... */
    const mp_opt *opts;
    size_t n;
} mp_opt_group;

/* a group of a whole table: MP_OPT_GROUP("options", rows) */
#define MP_OPT_GROUP(title, table) {title, table, sizeof table / sizeof table[0]}

typedef struct mp_verb_doc {
    const char *name;    /* the verb; "search" for the search over hardware too */
    const char *summary; /* one line, for `megaplan --help` and the man page */
    const char *usage;   /* synopsis lines, each starting "megaplan VERB" */
    const char *text;    /* what it does, before the options; may be NULL */
    const mp_opt_group *const *groups; /* NULL-terminated */
    const char *operand; /* what a bare argument is, for completion: "file", "model", "profile" or NULL */
} mp_verb_doc;

/* Whether argv[*i] is one of table's options ("--name VALUE", "--name=VALUE",
 * a flag, or an alias of one). Returns 1 with *row and *value set (the
 * flag's own name for a flag) and *i past the value; 0 when it is not the
 * table's (nothing changed); -1 with err set ("needs a value", "takes no
 * value") when it is but cannot be read. */
int mp_opt_take(const mp_opt *table, size_t n, int argc, char **argv, int *i,
                const mp_opt **row, const char **value, mp_error *err);

/* Whether the n characters at s have white space at either end: a part of
 * an option's value (the VALUE of --hw-set KEY=VALUE, one of --fix's A|B) is
 * refused with it, as a whole value is by mp_opt_take. */
bool mp_opt_spaced(const char *s, size_t n);

/* The options a verb's parser has taken so far (rows of any of its tables),
 * so that one given twice is refused rather than the last one silently
 * winning. Zero it before the loop. */
typedef struct mp_opt_seen {
    const mp_opt *row[64];
    const char *value[64];
    int n;
} mp_opt_seen;

/* Notes row (taken by mp_opt_take with value) as given. Returns 0, or -1
 * with err set when row was given before and is not MP_OPT_REPEAT: field
 * the name as typed (typed: the argument as it was on the command line,
 * "--output=a.yaml" or "-o"), "given twice ('A', then 'B'): say it once". */
int mp_opt_once(mp_opt_seen *seen, const mp_opt *row, const char *value, const char *typed,
                mp_error *err);

/* The option of table with this name (an alias finds its row), or NULL. */
const mp_opt *mp_opt_find(const mp_opt *table, size_t n, const char *name, size_t len);

/* "unknown option (did you mean --tp? see megaplan search --help)": the
 * refusal of arg, naming the closest option of doc (or of also, another
 * mode of the verb; may be NULL) when one is within two edits. */
void mp_opt_unknown(const mp_verb_doc *doc, const mp_verb_doc *also, const char *arg, char *buf,
                    size_t size);

/* The verb's --help: usage, text, then each group's options, one per row
 * with its help wrapped beside it. */
void mp_verb_doc_write(const mp_verb_doc *doc, FILE *out);

#endif
