/* opt.c — matching arguments against an option table, and --help written
 * from one (opt.h). */
#include "cli/opt.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/fields.h"

static bool same_name(const char *name, const char *s, size_t len)
{
    return name && strlen(name) == len && !strncmp(name, s, len);
}

const mp_opt *mp_opt_find(const mp_opt *table, size_t n, const char *name, size_t len)
{
    for (size_t k = 0; k < n; k++)
        if (same_name(table[k].name, name, len) || same_name(table[k].alias, name, len))
            return &table[k];
    return NULL;
}

int mp_opt_take(const mp_opt *table, size_t n, int argc, char **argv, int *i,
                const mp_opt **row, const char **value, mp_error *err)
{
    const char *arg = argv[*i];
    if (arg[0] != '-' || !arg[1])
        return 0;
    /* "--name=value"; a short option ("-o") takes its value apart */
    const char *eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    const mp_opt *o = mp_opt_find(table, n, arg, len);
    if (!o)
        return 0;
    *row = o;
    if (!o->arg) {
        if (eq) {
            mp_error_set(err, MP_EINPUT, NULL, 0, 0, o->name, "takes no value");
            return -1;
        }
        *value = o->name;
    } else if (eq) {
        *value = eq + 1;
    } else if (*i + 1 < argc) {
        /* the next word is another option, so this one's value is missing:
         * "--trace --events" wrote a trace file named "--events", and
         * "--model --gpus 8" read 8 as a plan file (a value that does start
         * with -- is given as --name=value) */
        const char *next = argv[*i + 1];
        if (next[0] == '-' && next[1] == '-') {
            if (!next[2])
                mp_error_set(err, MP_EINPUT, NULL, 0, 0, o->name,
                             "needs a value, and '--' ends the options");
            else if (o->name[1] == '-')
                mp_error_set(err, MP_EINPUT, NULL, 0, 0, o->name,
                             "needs a value, and '%.40s' is an option (a value that starts "
                             "with -- goes as %s=%.40s)",
                             next, o->name, next);
            else /* -o FILE: a file of that name is ./--name */
                mp_error_set(err, MP_EINPUT, NULL, 0, 0, o->name,
                             "needs a value, and '%.40s' is an option (a file of that name "
                             "goes as %s ./%.40s)",
                             next, o->name, next);
            return -1;
        }
        *value = argv[++*i];
    } else {
        mp_error_set(err, MP_EINPUT, NULL, 0, 0, o->name, "needs a value");
        return -1;
    }
    /* A value with spaces around it ("3 ", " 1.1") is refused for every
     * option but a file's, whatever its own parser would have made of it
     * (strtol and strtod skip leading spaces and stop at trailing ones). */
    size_t vl = strlen(*value);
    if (o->arg && vl && !strstr(o->arg, "FILE") &&
        (isspace((unsigned char)(*value)[0]) || isspace((unsigned char)(*value)[vl - 1]))) {
        mp_error_set(err, MP_EINPUT, NULL, 0, 0, o->name,
                     "'%.40s' has spaces around it: give the value alone", *value);
        return -1;
    }
    return 1;
}

bool mp_opt_spaced(const char *s, size_t n)
{
    return n && (isspace((unsigned char)s[0]) || isspace((unsigned char)s[n - 1]));
}

int mp_opt_once(mp_opt_seen *seen, const mp_opt *row, const char *value, const char *typed,
                mp_error *err)
{
    if (row->flags & MP_OPT_REPEAT)
        return 0;
    for (int k = 0; k < seen->n; k++)
        if (seen->row[k] == row) {
            if (!row->arg)
                mp_error_set(err, MP_EINPUT, NULL, 0, 0, NULL, "given twice: say it once");
            else
                mp_error_set(err, MP_EINPUT, NULL, 0, 0, NULL,
                             "given twice ('%.40s', then '%.40s'): say it once",
                             seen->value[k] ? seen->value[k] : "", value ? value : "");
            snprintf(err->field, sizeof err->field, "%.*s", (int)strcspn(typed, "="), typed);
            return -1;
        }
    if (seen->n < (int)(sizeof seen->row / sizeof seen->row[0])) {
        seen->row[seen->n] = row;
        seen->value[seen->n++] = value;
    }
    return 0;
}

void mp_opt_unknown(const mp_verb_doc *doc, const mp_verb_doc *also, const char *arg, char *buf,
                    size_t size)
{
    const char *names[256];
    size_t n = 0;
    const mp_verb_doc *docs[] = {doc, also};
    for (size_t d = 0; d < 2; d++)
        for (const mp_opt_group *const *g = docs[d] ? docs[d]->groups : NULL; g && *g; g++)
            for (size_t k = 0; k < (*g)->n && n < sizeof names / sizeof names[0]; k++)
                if (!((*g)->opts[k].flags & MP_OPT_HIDDEN))
                    names[n++] = (*g)->opts[k].name;
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(arg, "="), arg);
    const char *close = mp_closest_name(word, names, n);
    if (close && !strcmp(close, word)) /* a known option past "--" ("did you mean --model?") */
        snprintf(buf, size, "comes after '--', which ends the options: give it before (see "
                 "megaplan %s --help)", doc->name);
    else if (close)
        snprintf(buf, size, "unknown option (did you mean %s? see megaplan %s --help)", close,
                 doc->name);
    else
        snprintf(buf, size, "unknown option (see megaplan %s --help)", doc->name);
}

/* ---- --help ---------------------------------------------------------------- */

#define HELP_COLUMN 24
#define HELP_WIDTH 79

/* Writes text wrapped to HELP_WIDTH, every line after the first indented
 * to column `indent` (the first continues where the cursor is, at `at`). */
static void write_wrapped(FILE *out, const char *text, int indent, int at)
{
    const char *p = text;
    while (*p) {
        if (*p == '\n') { /* an explicit break */
            fprintf(out, "\n%*s", indent, "");
            at = indent;
            p++;
            continue;
        }
        size_t word = strcspn(p, " \n");
        if (at > indent && at + 1 + (int)word > HELP_WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            at = indent;
        } else if (at > indent) {
            fputc(' ', out);
            at++;
        }
        fwrite(p, 1, word, out);
        at += (int)word;
        p += word;
        while (*p == ' ')
            p++;
    }
    fputc('\n', out);
}

void mp_verb_doc_write(const mp_verb_doc *doc, FILE *out)
{
    /* each synopsis line after the first lines up under the first's "megaplan" */
    const char *u = doc->usage;
    fputs("usage: ", out);
    while (*u) {
        size_t line = strcspn(u, "\n");
        fwrite(u, 1, line, out);
        fputc('\n', out);
        u += line;
        if (*u == '\n' && *++u)
            fputs("       ", out);
    }
    if (doc->text) {
        fputc('\n', out);
        write_wrapped(out, doc->text, 0, 0);
    }
    for (const mp_opt_group *const *g = doc->groups; g && *g; g++) {
        const mp_opt_group *grp = *g;
        fprintf(out, "\n%s:\n", grp->title);
        for (size_t k = 0; k < grp->n; k++) {
            const mp_opt *o = &grp->opts[k];
            if (o->flags & MP_OPT_HIDDEN)
                continue;
            int at = fprintf(out, "  %s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
            if (at + 2 > HELP_COLUMN) {
                fprintf(out, "\n%*s", HELP_COLUMN, "");
            } else {
                fprintf(out, "%*s", HELP_COLUMN - at, "");
            }
            write_wrapped(out, o->help, HELP_COLUMN, HELP_COLUMN);
        }
    }
}
