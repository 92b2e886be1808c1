/* layout.c — Megatron-Core's pipeline layout strings (layout.h).
 *
 * The expansion follows Megatron's parse_str_to_list (megatron/core/
 * transformer/pipeline_parallel_layer_layout.py at d98e8a6) step by step, so
 * that every string it accepts means the same here: commas are dropped; then
 * one left-to-right pass replaces every "(x)*n" (x: one or more characters,
 * none of them ')') by n copies of x; then one pass replaces every "c*n" (c
 * any one character) by n copies of c; what is left must be E, t, m, L or '|'.
 * Each expanded character remembers where it stood in the text, so errors
 * point into the string the user wrote. */
#include "core/layout.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* No valid layout is longer than the layers, the stages' bars, E, L and the
 * MTP layers; an expansion past this is an absurd repeat count. */
#define EXPAND_MAX (4 * (MP_MAX_LAYERS + MP_MAX_STAGES + 64))

#define FIELD "pipeline_layout"

typedef struct sym {
    char c;
    int32_t pos; /* 1-based, in the text as given */
} sym;

typedef struct seq {
    sym *s;
    size_t n, cap;
} seq;

static bool push(seq *q, sym x)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        sym *s = realloc(q->s, cap * sizeof *s);
        if (!s)
            return false;
        q->s = s;
        q->cap = cap;
    }
    q->s[q->n++] = x;
    return true;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The repeat count at q->s[*i] (a digit), advancing *i past the digits;
 * -1 when it exceeds EXPAND_MAX (so no overflow is possible). */
static int64_t count_at(const seq *q, size_t *i)
{
    int64_t v = 0;
    bool big = false;
    while (*i < q->n && is_digit(q->s[*i].c)) {
        if (!big) {
            v = 10 * v + (q->s[*i].c - '0');
            big = v > EXPAND_MAX;
        }
        (*i)++;
    }
    return big ? -1 : v;
}

static mp_status absurd(mp_error *err, int32_t pos)
{
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, FIELD,
                        "character %d: absurd repeat count (the layout would expand beyond %d "
                        "characters; no model has that many layers and stages)",
                        pos, EXPAND_MAX);
}

static mp_status oom(mp_error *err)
{
    return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, FIELD, "out of memory");
}

/* Appends n copies of in->s[from, to) to out. */
static mp_status repeat(seq *out, const seq *in, size_t from, size_t to, int64_t n,
                        int32_t pos, mp_error *err)
{
    if (n > 0 && (int64_t)(to - from) > (EXPAND_MAX - (int64_t)out->n) / n)
        return absurd(err, pos);
    for (int64_t r = 0; r < n; r++)
        for (size_t k = from; k < to; k++)
            if (!push(out, in->s[k]))
                return oom(err);
    return MP_OK;
}

/* "(x)*n" -> x n times, one pass (Megatron's first re.sub). */
static mp_status unroll_groups(const seq *in, seq *out, mp_error *err)
{
    size_t i = 0;
    while (i < in->n) {
        if (in->s[i].c == '(') {
            size_t j = i + 1;
            while (j < in->n && in->s[j].c != ')')
                j++;
            if (j < in->n && j > i + 1 && j + 2 < in->n && in->s[j + 1].c == '*' &&
                is_digit(in->s[j + 2].c)) {
                size_t d = j + 2;
                int32_t pos = in->s[d].pos;
                int64_t n = count_at(in, &d);
                if (n < 0)
                    return absurd(err, pos);
                mp_status st = repeat(out, in, i + 1, j, n, pos, err);
                if (st != MP_OK)
                    return st;
                i = d;
                continue;
            }
        }
        if (out->n >= EXPAND_MAX)
            return absurd(err, in->s[i].pos);
        if (!push(out, in->s[i]))
            return oom(err);
        i++;
    }
    return MP_OK;
}

/* "c*n" -> c n times, one pass (Megatron's second re.sub; '.' skips newlines). */
static mp_status unroll_chars(const seq *in, seq *out, mp_error *err)
{
    size_t i = 0;
    while (i < in->n) {
        if (in->s[i].c != '\n' && i + 2 < in->n && in->s[i + 1].c == '*' &&
            is_digit(in->s[i + 2].c)) {
            size_t d = i + 2;
            int32_t pos = in->s[d].pos;
            int64_t n = count_at(in, &d);
            if (n < 0)
                return absurd(err, pos);
            mp_status st = repeat(out, in, i, i + 1, n, pos, err);
            if (st != MP_OK)
                return st;
            i = d;
            continue;
        }
        if (out->n >= EXPAND_MAX)
            return absurd(err, in->s[i].pos);
        if (!push(out, in->s[i]))
            return oom(err);
        i++;
    }
    return MP_OK;
}

static mp_status bad(mp_error *err, int32_t pos, const char *what)
{
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, FIELD, "character %d: %s", pos, what);
}

/* The rules, on the expanded string q. */
static mp_status check(const seq *q, int64_t pp, int64_t vpp, int64_t layers, int64_t mtp,
                       mp_layout *out, mp_error *err)
{
    for (size_t i = 0; i < q->n; i++) {
        char c = q->s[i].c;
        if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|')
            continue;
        unsigned char u = (unsigned char)c;
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, FIELD,
                            (u > 0x20 && u < 0x7f)
                                ? "character %d: '%c' is not a layer (E embedding, t transformer "
                                  "layer, m MTP layer, L loss; '|' ends a stage, (x)*n and x*n "
                                  "repeat)"
                                : "character %d: byte 0x%02x is not a layer (E embedding, t "
                                  "transformer layer, m MTP layer, L loss; '|' ends a stage)",
                            q->s[i].pos, (u > 0x20 && u < 0x7f) ? c : (int)u);
    }
    int64_t want = pp * vpp, n = 1;
    for (size_t i = 0; i < q->n; i++)
        n += q->s[i].c == '|';
    if (n != want)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, FIELD,
                            "%lld stages, but pp*vpp = %lld*%lld = %lld (the layout lists every "
                            "virtual stage, chunk by chunk: stage k is chunk k/pp of rank k%%pp)",
                            (long long)n, (long long)pp, (long long)vpp, (long long)want);
    if (n > MP_MAX_STAGES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, FIELD, "%lld stages: at most %d",
                            (long long)n, MP_MAX_STAGES);
    /* Megatron's order of the layers (flatten_layout): the string's, bars
     * left out; E must come first and L last in it, empty stages before
     * or after them allowed (it builds the embedding on the first virtual
     * stage and the loss on the last whatever the string says) */
    size_t first = 0, last = q->n;
    while (first < q->n && q->s[first].c == '|')
        first++;
    while (last > 0 && q->s[last - 1].c == '|')
        last--;
    if (first >= last || q->s[first].c != 'E')
        return bad(err, first < q->n ? q->s[first].pos : (q->n ? q->s[0].pos : 1),
                   "the first layer must be E (Megatron builds the embedding on the first "
                   "virtual stage)");
    if (q->s[last - 1].c != 'L')
        return bad(err, q->s[last - 1].pos,
                   "the last layer must be L (Megatron builds the loss on the last virtual "
                   "stage)");
    memset(out, 0, sizeof *out);
    out->n_stages = (int32_t)n;
    out->mtp_stage = -1;
    int64_t k = 0, t = 0, items = 0; /* items: layers of any kind in stage k */
    for (size_t i = 0; i < q->n; i++) {
        const sym *x = &q->s[i];
        switch (x->c) {
        case 'E':
            if (i != first)
                return bad(err, x->pos, "a second E (the embedding comes once, first)");
            items++;
            break;
        case 'L':
            if (i != last - 1)
                return bad(err, x->pos, "L (the loss) comes once, last");
            items++;
            break;
        case 't':
            if (out->mtp_stage >= 0)
                return bad(err, x->pos, "a transformer layer after an MTP layer (Megatron "
                                        "places every decoder layer before the MTP layers)");
            out->blocks[k]++;
            t++;
            items++;
            break;
        case 'm':
            if (mtp < 1)
                return bad(err, x->pos, "m, a multi-token-prediction layer, but the model has "
                                        "no MTP layers");
            if (out->mtp_stage >= 0 && out->mtp_stage != k)
                return bad(err, x->pos, "MTP layers in two stages (Megatron puts all of them "
                                        "in one virtual stage)");
            if (k / pp != vpp - 1)
                return bad(err, x->pos, "an MTP layer outside its rank's last virtual stage "
                                        "(Megatron's rule)");
            out->mtp_stage = (int32_t)k;
            out->mtp_layers++;
            break;
        case '|':
            k++;
            items = 0;
            break;
        }
    }
    if (t != layers)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, FIELD,
                            "%lld transformer layers (t), but the model has %lld",
                            (long long)t, (long long)layers);
    if (out->mtp_layers != mtp)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, FIELD,
                            "%d MTP layers (m), but the model has %lld", out->mtp_layers,
                            (long long)mtp);
    return MP_OK;
}

/* text with commas dropped and both repeat passes done, into *c */
static mp_status expand(const char *text, seq *c, mp_error *err)
{
    seq a = {0}, b = {0};
    mp_status st = MP_OK;
    size_t len = strlen(text);
    if (len == 0)
        st = mp_error_set(err, MP_EINPUT, NULL, 0, 0, FIELD, "empty");
    else if (len > EXPAND_MAX)
        st = absurd(err, EXPAND_MAX);
    for (size_t i = 0; st == MP_OK && i < len; i++)
        if (text[i] != ',' && !push(&a, (sym){text[i], (int32_t)(i + 1)}))
            st = oom(err);
    if (st == MP_OK)
        st = unroll_groups(&a, &b, err);
    if (st == MP_OK)
        st = unroll_chars(&b, c, err);
    free(a.s);
    free(b.s);
    return st;
}

mp_status mp_layout_parse(const char *text, int64_t pp, int64_t vpp, int64_t layers,
                          int64_t mtp_layers, mp_layout *out, mp_error *err)
{
    if (pp < 1 || vpp < 1 || pp > MP_MAX_STAGES || vpp > MP_MAX_STAGES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, FIELD,
                            "pp=%lld, vpp=%lld: no layout has that many stages", (long long)pp,
                            (long long)vpp);
    seq c = {0};
    mp_status st = expand(text, &c, err);
    if (st == MP_OK)
        st = check(&c, pp, vpp, layers, mtp_layers, out, err);
    free(c.s);
    return st;
}

int64_t mp_layout_count_stages(const char *text)
{
    seq c = {0};
    mp_error err;
    int64_t n = -1;
    if (expand(text, &c, &err) == MP_OK) {
        n = 1;
        for (size_t i = 0; i < c.n; i++)
            n += c.s[i].c == '|';
    }
    free(c.s);
    return n;
}

int64_t mp_layout_model_mtp_layers(const mp_model *m)
{
    return m->mtp_layers > 0 ? m->mtp_layers : 0;
}

void mp_layout_stage_items(const mp_layout *l, int64_t layers, int64_t k, int64_t *begin,
                           int64_t *end)
{
    int64_t before = 0;
    for (int64_t j = 0; j < k && j < l->n_stages; j++)
        before += l->blocks[j];
    *begin = k == 0 ? 0 : 1 + before;
    *end = k == l->n_stages - 1 ? layers + 2 : 1 + before + l->blocks[k];
}

/* "t", "t*k" or "" for k blocks */
static int blocks_text(char *out, size_t size, int64_t k)
{
    if (k == 0)
        return snprintf(out, size, "%s", "");
    if (k == 1)
        return snprintf(out, size, "t");
    return snprintf(out, size, "t*%lld", (long long)k);
}

bool mp_layout_propose(int64_t L, int64_t n, char *out, size_t size)
{
    if (n < 1 || n > L || n > MP_MAX_STAGES || size < 8)
        return false;
    int64_t units = L + 2, q = units / n, r = units % n;
    /* stage k's blocks: q (+1 for stages 1..r) less the embedding or the loss */
#define STAGE_BLOCKS(k) (q + ((k) >= 1 && (k) <= r ? 1 : 0) - ((k) == 0) - ((k) == n - 1))
    size_t at = 0;
    char part[48];
    int w;
#define PUT(...)                                                                  \
    do {                                                                          \
        w = snprintf(out + at, size - at, __VA_ARGS__);                           \
        if (w < 0 || (size_t)w >= size - at)                                      \
            return false;                                                         \
        at += (size_t)w;                                                          \
    } while (0)
    blocks_text(part, sizeof part, STAGE_BLOCKS(0));
    PUT("E%s", part);
    if (n == 1) {
        PUT("L");
        return true;
    }
    PUT("|");
    /* the middle stages, runs of equal ones as (t*k|)*c */
    for (int64_t k = 1; k < n - 1;) {
        int64_t b = STAGE_BLOCKS(k), run = 1;
        while (k + run < n - 1 && STAGE_BLOCKS(k + run) == b)
            run++;
        blocks_text(part, sizeof part, b);
        if (run > 1)
            PUT("(%s|)*%lld", part, (long long)run);
        else
            PUT("%s|", part);
        k += run;
    }
    blocks_text(part, sizeof part, STAGE_BLOCKS(n - 1));
    PUT("%sL", part);
#undef PUT
#undef STAGE_BLOCKS
    return true;
}
