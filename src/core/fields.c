#include "core/fields.h"

#include <ctype.h>
#include <strings.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(mp_arch) == sizeof(int), "enum fields are stored as int");

bool mp_parse_bool_word(const char *s, bool *out)
{
    /* YAML 1.1's words (plan and profile files) and 1/0 (--fix sp=1): every
     * reader of a yes/no value accepts the same set */
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = true;
            return true;
        }
        if (!strcasecmp(s, no[i])) {
            *out = false;
            return true;
        }
    }
    return false;
}

bool mp_parse_int64(const char *s, int64_t *out)
{
    const char *p = s;
    while (*p == ' ' || *p == '\t')
        p++;
    const char *digits = p;
    if (*digits == '+' || *digits == '-')
        digits++;
    if (!isdigit((unsigned char)*digits))
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (errno == ERANGE)
        return false;
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end)
        return false;
    *out = (int64_t)v;
    return true;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    size_t prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

const char *mp_closest_name(const char *word, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t best_d = 3;
    size_t wl = strlen(word);
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, names[i]);
        /* a cut-off name ("hid" of a truncated file) is as good as a typo */
        if (wl >= 3 && !strncasecmp(names[i], word, wl))
            d = d < 1 ? d : 1;
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    return best;
}

const mp_field *mp_fields_find(const mp_field *tab, size_t n, const char *path)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(tab[i].path, path))
            return &tab[i];
    return NULL;
}

/* A short, printable excerpt of a user's value for messages. */
static const char *excerpt(const char *s, char *buf, size_t size)
{
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 4 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[j++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
        if (i >= 40) {
            memcpy(buf + j, "...", 3);
            j += 3;
            break;
        }
    }
    buf[j] = '\0';
    return buf;
}

static void join_path(char *out, size_t size, const char *prefix, const char *path)
{
    /* as snprintf("%s%s") would, without its cost: mp_fields_check runs in
     * search's inner loop (every candidate's config check) */
    size_t a = prefix ? strlen(prefix) : 0, b = strlen(path);
    if (a > size - 1)
        a = size - 1;
    if (b > size - 1 - a)
        b = size - 1 - a;
    memcpy(out, prefix ? prefix : "", a);
    memcpy(out + a, path, b);
    out[a + b] = '\0';
}

/* A number for a message: an integer field's values and limits in full
 * ("got 564490", not the shorter "5.6449e+05"), others in their shortest
 * exact form. */
static void format_for_message(const mp_field *f, double v, char *buf, size_t size)
{
    /* whole numbers below a million in full: the shortest form said
     * "too large: at most 1e+01 (got 1e+02)" of collective_local_pass 100 */
    char num[40];
    if (v == floor(v) && fabs(v) < (f->type == MP_FT_INT ? 1e19 : 1e6))
        snprintf(num, sizeof num, "%.0f", v);
    else
        mp_format_double(v, num, sizeof num);
    /* a value with a unit is in its base unit here, whatever unit it was
     * written in: say which ("at most 1e+15 (got 1.07e+39)" of memory=1e30GiB
     * did not say bytes) */
    static const char *const base[MP_UNIT_KIND_COUNT] = {
        [MP_UNIT_BYTES] = " bytes", [MP_UNIT_BANDWIDTH] = " bytes/s",
        [MP_UNIT_FLOPS] = " FLOP/s", [MP_UNIT_TIME] = " s"};
    const char *unit = f->type == MP_FT_DOUBLE && f->unit > MP_UNIT_NONE &&
                               f->unit < MP_UNIT_KIND_COUNT && base[f->unit]
                           ? base[f->unit]
                           : "";
    snprintf(buf, size, "%s%s", num, unit);
}

/* Range check of one numeric value. */
static mp_status check_range(const mp_field *f, double v, const char *field, const char *origin,
                             int line, int col, mp_error *err)
{
    if (!isnan(v) && (f->min_open ? v > f->min : v >= f->min) &&
        (f->max_open ? v < f->max : v <= f->max))
        return MP_OK; /* in range: nothing to format (the common case, and a hot one) */
    char num[40], lim[40];
    format_for_message(f, v, num, sizeof num);
    if (isnan(v))
        return mp_error_set(err, MP_EINPUT, origin, line, col, field, "not a number");
    if (f->min_open ? !(v > f->min) : !(v >= f->min)) {
        format_for_message(f, f->min, lim, sizeof lim);
        if ((f->min == 0 && f->min_open) || (f->min > 0 && v <= 0 && f->type != MP_FT_INT))
            return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                "must be positive (got %s)", num);
        /* a positive floor: below it no real device exists */
        if (f->min > 0 && f->type != MP_FT_INT)
            return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                "absurdly small: at least %s (got %s)", lim, num);
        return mp_error_set(err, MP_EINPUT, origin, line, col, field, "must be %s %s (got %s)",
                            f->min_open ? "greater than" : "at least", lim, num);
    }
    if (f->max_open ? !(v < f->max) : v > f->max) {
        format_for_message(f, f->max, lim, sizeof lim);
        return mp_error_set(err, MP_EINPUT, origin, line, col, field, "too large: %s %s (got %s)",
                            f->max_open ? "must be less than" : "at most", lim, num);
    }
    return MP_OK;
}

static void *at(void *obj, const mp_field *f)
{
    return (char *)obj + f->offset;
}
static const void *at_c(const void *obj, const mp_field *f)
{
    return (const char *)obj + f->offset;
}

static mp_status check_curve(const mp_field *f, const mp_curve *c, const char *field,
                             const char *origin, int line, int col, mp_error *err)
{
    if (c->n < 1 || c->n > MP_CURVE_MAX)
        return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                            "needs 1 to %d [x, y] points (got %d)", MP_CURVE_MAX, c->n);
    for (int i = 0; i < c->n; i++) {
        if (!isfinite(c->x[i]) || c->x[i] <= 0)
            return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                "point %d: x must be positive", i + 1);
        if (i > 0 && !(c->x[i] > c->x[i - 1]))
            return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                "point %d: x values must increase", i + 1);
        mp_status st = check_range(f, c->y[i], field, origin, line, col, err);
        if (st != MP_OK) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return mp_error_set(err, MP_EINPUT, origin, line, col, field, "point %d: y %s",
                                i + 1, msg);
        }
    }
    return MP_OK;
}

static const char *type_word(const mp_field *f)
{
    switch (f->type) {
    case MP_FT_INT:
        return "an integer";
    case MP_FT_DOUBLE:
        return mp_unit_kind_describe(f->unit);
    case MP_FT_BOOL:
        return "true or false";
    case MP_FT_STRING:
        return "a string";
    case MP_FT_ENUM:
        return "a name";
    case MP_FT_CURVE:
        return "a list of [x, y] pairs";
    }
    return "a value";
}

static mp_status enum_error(const mp_field *f, const char *got, const char *field,
                            const char *origin, int line, int col, mp_error *err)
{
    char list[200] = "", ex[64];
    size_t len = 0;
    for (int i = 0; i < f->n_names; i++) {
        int w = snprintf(list + len, sizeof list - len, "%s%s", i ? "|" : "", f->name_of(i));
        if (w < 0 || (size_t)w >= sizeof list - len)
            break;
        len += (size_t)w;
    }
    return mp_error_set(err, MP_EINPUT, origin, line, col, field, "expected one of %s, got '%s'",
                        list, excerpt(got, ex, sizeof ex));
}

mp_status mp_yscalar_refuse_spaced(const mp_ynode *n, const char *origin, const char *field,
                                   mp_error *err)
{
    char ex[64];
    if (!mp_yscalar_spaced(n))
        return MP_OK;
    return mp_error_set(err, MP_EINPUT, origin, n->line, n->column, field,
                        "'%s' has spaces around it: give the value alone",
                        excerpt(n->text, ex, sizeof ex));
}

size_t mp_text_char_len(const char *s, size_t n, long *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    *cp = -1;
    if (n == 0)
        return 0;
    if (u[0] < 0x80) {
        *cp = u[0];
        return u[0] >= 0x20 && u[0] != 0x7f;
    }
    size_t len = u[0] >= 0xf0 && u[0] <= 0xf4 ? 4 : u[0] >= 0xe0 ? 3 : u[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || u[0] > 0xf4 || len > n)
        return 0;
    long v = u[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (u[i] & 0x3f);
    }
    /* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
        (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    if (v <= 0x9f || v == 0x2028 || v == 0x2029)
        return 0;
    return len;
}

void mp_text_sanitize(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        long cp;
        size_t len = mp_text_char_len(s + i, n - i, &cp);
        if (len == 0) {
            s[i] = '_';
            len = 1;
        }
        i += len;
    }
}

/* Sets a scalar-typed field from text. line/col locate the text for errors. */
static mp_status set_scalar(const mp_field *f, void *obj, const char *text, size_t text_len,
                            const char *field, const char *origin, int line, int col,
                            mp_error *err)
{
    char ex[64];
    if (strlen(text) != text_len)
        return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                            "contains a NUL character");
    switch (f->type) {
    case MP_FT_INT: {
        int64_t v;
        /* in a file, "010" is 8 to a YAML 1.1 reader (PyYAML, which writes
         * most training configs) and 10 to a YAML 1.2 one: it was read as 10
         * (a command line's "--hw-set gpus_per_node=08" is no YAML: taken) */
        const char *digits = text + (text[0] == '-' || text[0] == '+');
        if (origin && digits[0] == '0' && digits[1] >= '0' && digits[1] <= '9')
            return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                "'%s' has a leading zero, which YAML 1.1 readers take as octal: "
                                "write the number without it",
                                excerpt(text, ex, sizeof ex));
        if (!mp_parse_int64(text, &v)) {
            /* distinguish "huge" from "not a number" for a useful message */
            const char *p = text + (text[0] == '-' || text[0] == '+');
            if (*p && strspn(p, "0123456789") == strlen(p))
                return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                    "too large: '%s' overflows a 64-bit integer",
                                    excerpt(text, ex, sizeof ex));
            return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                "expected an integer, got '%s'", excerpt(text, ex, sizeof ex));
        }
        mp_status st = check_range(f, (double)v, field, origin, line, col, err);
        if (st != MP_OK)
            return st;
        *(int64_t *)at(obj, f) = v;
        return MP_OK;
    }
    case MP_FT_DOUBLE: {
        double v;
        const char *why;
        if (!mp_units_parse(text, f->unit, &v, &why))
            return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                "expected %s, got '%s' (%s)", type_word(f),
                                excerpt(text, ex, sizeof ex), why);
        mp_status st = check_range(f, v, field, origin, line, col, err);
        if (st != MP_OK)
            return st;
        *(double *)at(obj, f) = v;
        return MP_OK;
    }
    case MP_FT_BOOL: {
        bool v;
        if (!mp_parse_bool_word(text, &v))
            return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                "expected true or false, got '%s'", excerpt(text, ex, sizeof ex));
        *(bool *)at(obj, f) = v;
        return MP_OK;
    }
    case MP_FT_STRING: {
        /* min 1: a value that must say something (pipeline_layout: '' was
         * taken as not given, where --pipeline-layout "" is refused) */
        if (text_len == 0 && f->min >= 1)
            return mp_error_set(err, MP_EINPUT, origin, line, col, field, "empty");
        if (text_len >= f->size)
            return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                "too long: at most %zu characters", f->size - 1);
        for (size_t i = 0; i < text_len;) {
            long cp;
            size_t len = mp_text_char_len(text + i, text_len - i, &cp);
            if (len == 0 && cp < 0)
                return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                    "is not UTF-8 text (byte %zu, 0x%02x)", i + 1,
                                    (unsigned char)text[i]);
            if (len == 0 && cp >= 0x80) /* was taken, and split the comment lines written */
                return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                    "contains a control character or line break (U+%04lX)", cp);
            if (len == 0)
                return mp_error_set(err, MP_EINPUT, origin, line, col, field,
                                    "contains a control character");
            i += len;
        }
        memcpy(at(obj, f), text, text_len + 1);
        return MP_OK;
    }
    case MP_FT_ENUM: {
        for (int i = 0; i < f->n_names; i++)
            if (!strcmp(text, f->name_of(i))) {
                int v = i;
                memcpy(at(obj, f), &v, sizeof v);
                return MP_OK;
            }
        return enum_error(f, text, field, origin, line, col, err);
    }
    case MP_FT_CURVE:
        break;
    }
    return mp_error_set(err, MP_EINTERNAL, origin, line, col, field, "field type mismatch");
}

static mp_status decode_curve(const mp_field *f, void *obj, const mp_ynode *v, const char *field,
                              const char *origin, mp_error *err)
{
    if (v->kind != MP_Y_SEQ)
        return mp_error_set(err, MP_EINPUT, origin, v->line, v->column, field,
                            "expected a list of [x, y] pairs, e.g. [[1e9, 0.4], [1e12, 0.8]]");
    if (v->n < 1 || v->n > MP_CURVE_MAX)
        return mp_error_set(err, MP_EINPUT, origin, v->line, v->column, field,
                            "needs 1 to %d [x, y] points (got %zu)", MP_CURVE_MAX, v->n);
    mp_curve c;
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < v->n; i++) {
        const mp_ynode *p = v->items[i];
        if (p->kind != MP_Y_SEQ || p->n != 2 || p->items[0]->kind != MP_Y_SCALAR ||
            p->items[1]->kind != MP_Y_SCALAR)
            return mp_error_set(err, MP_EINPUT, origin, p->line, p->column, field,
                                "point %zu: expected [x, y]", i + 1);
        for (int k = 0; k < 2; k++) {
            const mp_ynode *s = p->items[k];
            double d;
            const char *why;
            char ex[64];
            mp_status sp = mp_yscalar_refuse_spaced(s, origin, field, err);
            if (sp != MP_OK)
                return sp;
            if (!mp_units_parse(s->text, MP_UNIT_NONE, &d, &why))
                return mp_error_set(err, MP_EINPUT, origin, s->line, s->column, field,
                                    "point %zu: expected a number, got '%s'", i + 1,
                                    excerpt(s->text, ex, sizeof ex));
            if (k == 0)
                c.x[i] = d;
            else
                c.y[i] = d;
        }
        c.n = (int)i + 1;
        mp_status st = check_curve(f, &c, field, origin, p->line, p->column, err);
        if (st != MP_OK)
            return st;
    }
    *(mp_curve *)at(obj, f) = c;
    return MP_OK;
}

static mp_status decode_value(const mp_field *f, void *obj, const mp_ynode *v, const char *field,
                              const char *origin, mp_error *err)
{
    if (f->type == MP_FT_CURVE)
        return decode_curve(f, obj, v, field, origin, err);
    if (v->kind != MP_Y_SCALAR)
        return mp_error_set(err, MP_EINPUT, origin, v->line, v->column, field,
                            "expected %s, got a %s", type_word(f),
                            v->kind == MP_Y_MAP ? "mapping" : "list");
    if (mp_yscalar_is_null(v))
        return mp_error_set(err, MP_EINPUT, origin, v->line, v->column, field,
                            "expected %s, got nothing", type_word(f));
    /* a quoted number is still a number; a quoted bool is refused as the
     * user probably meant the string */
    if (f->type == MP_FT_BOOL && !v->plain)
        return mp_error_set(err, MP_EINPUT, origin, v->line, v->column, field,
                            "expected true or false, got a quoted string");
    /* a name may hold any text; a number, a yes/no or a word of a list is
     * the value alone, as on the command line */
    if (f->type != MP_FT_STRING) {
        mp_status st = mp_yscalar_refuse_spaced(v, origin, field, err);
        if (st != MP_OK)
            return st;
    }
    return set_scalar(f, obj, v->text, v->text_len, field, origin, v->line, v->column, err);
}

static bool has_child_prefix(const mp_field *tab, size_t n, const char *rel)
{
    size_t len = strlen(rel);
    for (size_t i = 0; i < n; i++)
        if (!strncmp(tab[i].path, rel, len) && tab[i].path[len] == '.')
            return true;
    return false;
}

/* Keys allowed in the mapping at table prefix rel ("" or "scale_up."). */
static size_t names_at(const mp_field *tab, size_t n, const char *rel, const char **names,
                       char store[][64], size_t max)
{
    size_t len = strlen(rel), count = 0;
    for (size_t i = 0; i < n && count < max; i++) {
        if (strncmp(tab[i].path, rel, len))
            continue;
        const char *rest = tab[i].path + len;
        size_t k = strcspn(rest, ".");
        if (k >= 64)
            continue;
        bool dup = false;
        for (size_t j = 0; j < count; j++)
            if (strlen(names[j]) == k && !strncmp(names[j], rest, k))
                dup = true;
        if (dup)
            continue;
        memcpy(store[count], rest, k);
        store[count][k] = '\0';
        names[count] = store[count];
        count++;
    }
    return count;
}

typedef struct decode_ctx {
    const mp_field *tab;
    size_t n;
    const char *prefix;
    const char *origin;
    void *obj;
    bool *seen;
    const char *const *skip;
} decode_ctx;

static mp_status decode_map(const decode_ctx *cx, const mp_ynode *map, const char *rel,
                            int depth, mp_error *err)
{
    char field[256];
    if (map->kind != MP_Y_MAP) {
        join_path(field, sizeof field, cx->prefix, rel);
        size_t fl = strlen(field);
        if (fl && field[fl - 1] == '.')
            field[fl - 1] = '\0';
        return mp_error_set(err, MP_EINPUT, cx->origin, map->line, map->column,
                            field[0] ? field : NULL, "expected a mapping of key: value");
    }
    if (depth > 8)
        return mp_error_set(err, MP_EINPUT, cx->origin, map->line, map->column, NULL,
                            "nested too deep");
    for (size_t i = 0; i < map->n; i++) {
        const mp_ynode *k = map->items[2 * i], *v = map->items[2 * i + 1];
        char relkey[256];
        snprintf(relkey, sizeof relkey, "%s%s", rel, k->text);
        join_path(field, sizeof field, cx->prefix, relkey);
        if (!rel[0] && cx->skip) {
            bool skip = false;
            for (const char *const *s = cx->skip; *s; s++)
                if (!strcmp(*s, k->text))
                    skip = true;
            if (skip)
                continue;
        }
        if (strlen(k->text) != k->text_len || k->text_len > 100)
            return mp_error_set(err, MP_EINPUT, cx->origin, k->line, k->column, NULL,
                                "unknown key");
        const mp_field *f = mp_fields_find(cx->tab, cx->n, relkey);
        if (f) {
            size_t idx = (size_t)(f - cx->tab);
            if (cx->seen && cx->seen[idx])
                return mp_error_set(err, MP_EINPUT, cx->origin, k->line, k->column, field,
                                    "duplicate key");
            mp_status st = decode_value(f, cx->obj, v, field, cx->origin, err);
            if (st != MP_OK)
                return st;
            if (cx->seen)
                cx->seen[idx] = true;
            continue;
        }
        if (has_child_prefix(cx->tab, cx->n, relkey)) {
            char sub[260];
            snprintf(sub, sizeof sub, "%s.", relkey);
            mp_status st = decode_map(cx, v, sub, depth + 1, err);
            if (st != MP_OK)
                return st;
            continue;
        }
        const char *names[MP_FIELDS_MAX];
        char store[MP_FIELDS_MAX][64];
        size_t nn = names_at(cx->tab, cx->n, rel, names, store, MP_FIELDS_MAX);
        const char *close = mp_closest_name(k->text, names, nn);
        if (close)
            return mp_error_set(err, MP_EINPUT, cx->origin, k->line, k->column, field,
                                "unknown key (did you mean '%s'?)", close);
        return mp_error_set(err, MP_EINPUT, cx->origin, k->line, k->column, field,
                            "unknown key");
    }
    return MP_OK;
}

mp_status mp_fields_decode(const mp_field *tab, size_t n, const mp_ynode *map,
                           const char *prefix, const char *origin, void *obj, bool *seen,
                           const char *const *skip_keys, mp_error *err)
{
    bool local_seen[MP_FIELDS_MAX] = {false};
    if (!seen) {
        if (n > MP_FIELDS_MAX)
            return mp_error_set(err, MP_EINTERNAL, origin, 0, 0, NULL, "field table too big");
        seen = local_seen;
    }
    if (!map) {
        char field[128];
        snprintf(field, sizeof field, "%s", prefix ? prefix : "");
        size_t fl = strlen(field);
        if (fl && field[fl - 1] == '.')
            field[fl - 1] = '\0';
        return mp_error_set(err, MP_EINPUT, origin, 1, 1, field[0] ? field : NULL,
                            "empty: expected a mapping of key: value");
    }
    decode_ctx cx = {tab, n, prefix ? prefix : "", origin, obj, seen, skip_keys};
    mp_status st = decode_map(&cx, map, "", 0, err);
    if (st != MP_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        if (!tab[i].required || seen[i])
            continue;
        /* report at the innermost mapping that exists on the way to the field */
        const mp_ynode *where = map;
        char path[128];
        snprintf(path, sizeof path, "%s", tab[i].path);
        for (char *dot = strrchr(path, '.'); dot; dot = strrchr(path, '.')) {
            *dot = '\0';
            const mp_ynode *p = mp_ynode_at(map, path);
            if (p && p->kind == MP_Y_MAP) {
                where = p;
                break;
            }
        }
        char field[256];
        join_path(field, sizeof field, cx.prefix, tab[i].path);
        return mp_error_set(err, MP_EINPUT, origin, where->line, where->column, field,
                            "missing (required)");
    }
    return MP_OK;
}

mp_status mp_fields_set_text(const mp_field *tab, size_t n, void *obj, const char *path,
                             const char *text, mp_error *err)
{
    const mp_field *f = mp_fields_find(tab, n, path);
    if (!f) {
        const char *names[MP_FIELDS_MAX];
        size_t nn = 0;
        for (size_t i = 0; i < n && nn < MP_FIELDS_MAX; i++)
            names[nn++] = tab[i].path;
        const char *close = mp_closest_name(path, names, nn);
        if (close)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, path,
                                "unknown field (did you mean '%s'?)", close);
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, path, "unknown field");
    }
    if (f->type != MP_FT_CURVE)
        return set_scalar(f, obj, text, strlen(text), path, NULL, 0, 0, err);
    mp_ynode *root = NULL;
    mp_error yerr;
    mp_error_clear(&yerr);
    if (mp_yaml_load(text, strlen(text), NULL, &root, &yerr) != MP_OK || !root) {
        mp_yaml_free(root);
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, path,
                            "expected a list of [x, y] pairs, e.g. [[1e9,0.4],[1e12,0.8]]");
    }
    mp_status st = decode_curve(f, obj, root, path, NULL, err);
    if (st != MP_OK) {
        err->line = err->column = 0;
        err->file[0] = '\0';
    }
    mp_yaml_free(root);
    return st;
}

mp_status mp_fields_check(const mp_field *tab, size_t n, const void *obj, const char *prefix,
                          mp_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const mp_field *f = &tab[i];
        /* a number in range, a known enum value or a terminated string
         * needs no path for a message (search checks every candidate's
         * config: the common case, and a hot one) */
        if (f->type == MP_FT_INT || f->type == MP_FT_DOUBLE) {
            double v = f->type == MP_FT_INT ? (double)*(const int64_t *)at_c(obj, f)
                                            : *(const double *)at_c(obj, f);
            if (!isnan(v) && (f->min_open ? v > f->min : v >= f->min) &&
                (f->max_open ? v < f->max : v <= f->max))
                continue;
        } else if (f->type == MP_FT_ENUM) {
            int v;
            memcpy(&v, at_c(obj, f), sizeof v);
            if (v >= 0 && v < f->n_names)
                continue;
        } else if (f->type == MP_FT_STRING) {
            if (memchr(at_c(obj, f), '\0', f->size))
                continue;
        } else if (f->type == MP_FT_BOOL) {
            continue;
        }
        char field[256];
        join_path(field, sizeof field, prefix, f->path);
        mp_status st = MP_OK;
        switch (f->type) {
        case MP_FT_INT:
            st = check_range(f, (double)*(const int64_t *)at_c(obj, f), field, NULL, 0, 0, err);
            break;
        case MP_FT_DOUBLE:
            st = check_range(f, *(const double *)at_c(obj, f), field, NULL, 0, 0, err);
            break;
        case MP_FT_ENUM: {
            int v;
            memcpy(&v, at_c(obj, f), sizeof v);
            if (v < 0 || v >= f->n_names)
                st = mp_error_set(err, MP_EINPUT, NULL, 0, 0, field, "invalid value %d", v);
            break;
        }
        case MP_FT_CURVE:
            st = check_curve(f, (const mp_curve *)at_c(obj, f), field, NULL, 0, 0, err);
            break;
        case MP_FT_STRING: {
            const char *s = (const char *)at_c(obj, f);
            if (!memchr(s, '\0', f->size))
                st = mp_error_set(err, MP_EINPUT, NULL, 0, 0, field, "not terminated");
            break;
        }
        case MP_FT_BOOL:
            break;
        }
        if (st != MP_OK)
            return st;
    }
    return MP_OK;
}

/* The object that holds the last component of path, creating parents. */
static cJSON *parent_for(cJSON *root, const char *path, const char **leaf)
{
    cJSON *cur = root;
    const char *p = path;
    for (const char *dot = strchr(p, '.'); dot; dot = strchr(p, '.')) {
        char part[64];
        size_t len = (size_t)(dot - p);
        if (len >= sizeof part)
            return NULL;
        memcpy(part, p, len);
        part[len] = '\0';
        cJSON *next = cJSON_GetObjectItemCaseSensitive(cur, part);
        if (!next) {
            next = cJSON_AddObjectToObject(cur, part);
            if (!next)
                return NULL;
        }
        cur = next;
        p = dot + 1;
    }
    *leaf = p;
    return cur;
}

cJSON *mp_fields_to_json(const mp_field *tab, size_t n, const void *obj)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const mp_field *f = &tab[i];
        const char *leaf;
        cJSON *parent = parent_for(root, f->path, &leaf);
        cJSON *item = NULL;
        if (!parent)
            goto oom;
        switch (f->type) {
        case MP_FT_INT:
            item = cJSON_CreateNumber((double)*(const int64_t *)at_c(obj, f));
            break;
        case MP_FT_DOUBLE:
            item = cJSON_CreateNumber(*(const double *)at_c(obj, f));
            break;
        case MP_FT_BOOL:
            item = cJSON_CreateBool(*(const bool *)at_c(obj, f));
            break;
        case MP_FT_STRING:
            item = cJSON_CreateString((const char *)at_c(obj, f));
            break;
        case MP_FT_ENUM: {
            int v;
            memcpy(&v, at_c(obj, f), sizeof v);
            item = cJSON_CreateString(v >= 0 && v < f->n_names ? f->name_of(v) : "?");
            break;
        }
        case MP_FT_CURVE: {
            const mp_curve *c = (const mp_curve *)at_c(obj, f);
            item = cJSON_CreateArray();
            for (int k = 0; item && k < c->n && k < MP_CURVE_MAX; k++) {
                cJSON *pt = cJSON_CreateArray();
                if (!pt || !cJSON_AddItemToArray(item, pt)) {
                    cJSON_Delete(pt);
                    goto oom_item;
                }
                cJSON *x = cJSON_CreateNumber(c->x[k]), *y = cJSON_CreateNumber(c->y[k]);
                if (!x || !y) {
                    cJSON_Delete(x);
                    cJSON_Delete(y);
                    goto oom_item;
                }
                cJSON_AddItemToArray(pt, x);
                cJSON_AddItemToArray(pt, y);
            }
            break;
        oom_item:
            cJSON_Delete(item);
            goto oom;
        }
        }
        if (!item || !cJSON_AddItemToObject(parent, leaf, item)) {
            cJSON_Delete(item);
            goto oom;
        }
    }
    return root;
oom:
    cJSON_Delete(root);
    return NULL;
}
