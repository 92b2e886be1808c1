/* search_common.c — search's own options (search_common.h). */
#include "cli/search_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* --fix key -> the MP_SET_* bit and how to read the value */
typedef enum { V_INT, V_BOOL, V_RECOMPUTE, V_SCHEDULE } vkind;
static const struct {
    const char *key;
    uint32_t bit;
    vkind kind;
} fix_keys[] = {
    {"tp", MP_SET_TP, V_INT},           {"sp", MP_SET_SP, V_BOOL},
    {"pp", MP_SET_PP, V_INT},           {"vpp", MP_SET_VPP, V_INT},
    {"cp", MP_SET_CP, V_INT},           {"dp", MP_SET_DP, V_INT},
    {"micro_batch", MP_SET_MICRO_BATCH, V_INT},
    {"recompute", MP_SET_RECOMPUTE, V_RECOMPUTE},
    {"dist_opt", MP_SET_DIST_OPT, V_BOOL}, {"schedule", MP_SET_SCHEDULE, V_SCHEDULE},
    {"dp_overlap", MP_SET_DP_OVERLAP, V_BOOL}, {"tp_overlap", MP_SET_TP_OVERLAP, V_BOOL},
    {"zero", MP_SET_ZERO, V_INT}, {"hsdp", MP_SET_HSDP, V_BOOL},
    {"ep", MP_SET_EP, V_INT}, {"etp", MP_SET_ETP, V_INT},
};

static int parse_bool(const char *v)
{
    if (!strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcmp(v, "1"))
        return 1;
    if (!strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcmp(v, "0"))
        return 0;
    return -1;
}

static mp_status fix_one(mp_cli_config *cc, const char *item, mp_error *err)
{
    const char *eq = strchr(item, '=');
    if (!eq || eq == item || !eq[1])
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                            "'%.80s' is not KEY=VALUE (keys: tp sp pp vpp cp dp micro_batch "
                            "recompute dist_opt zero hsdp schedule dp_overlap tp_overlap)", item);
    size_t klen = (size_t)(eq - item);
    const char *v = eq + 1;
    for (size_t i = 0; i < sizeof fix_keys / sizeof fix_keys[0]; i++) {
        if (strlen(fix_keys[i].key) != klen || strncmp(fix_keys[i].key, item, klen)) continue;
        /* "--fix tp=2,tp=4" or "--tp 4 --fix tp=2": which one was meant? */
        if (cc->set & fix_keys[i].bit)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "%s is fixed twice (by its own option or an earlier --fix): "
                                "say it once", fix_keys[i].key);
        mp_parallel *p = &cc->config.parallel;
        long long n = 0;
        int b = 0;
        if (fix_keys[i].kind == V_INT) {
            char *end;
            errno = 0;
            n = strtoll(v, &end, 10);
            if (errno || *end || n < 1 || n > (1LL << 24))
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                    "%s=%.40s: expected a positive integer (at most 16777216)",
                                    fix_keys[i].key, v);
        } else if (fix_keys[i].kind == V_BOOL) {
            if ((b = parse_bool(v)) < 0)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                    "%s=%.40s: expected true/false (on/off)", fix_keys[i].key, v);
        } else if (fix_keys[i].kind == V_RECOMPUTE) {
            if ((b = mp_recompute_parse(v)) < 0)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                    "recompute=%.40s: expected none, selective or full", v);
        } else if ((b = mp_schedule_parse(v)) < 0) {
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "schedule=%.40s: expected gpipe, 1f1b, interleaved-1f1b or zb-h1", v);
        }
        switch (fix_keys[i].bit) {
        case MP_SET_TP: p->tp = n; break;
        case MP_SET_PP: p->pp = n; break;
        case MP_SET_VPP: p->vpp = n; break;
        case MP_SET_CP: p->cp = n; break;
        case MP_SET_DP: p->dp = n; break;
        case MP_SET_EP: p->ep = n; break;
        case MP_SET_ETP: p->etp = n; break;
        case MP_SET_MICRO_BATCH: p->micro_batch = n; break;
        case MP_SET_SP: p->sp = b; break;
        case MP_SET_DIST_OPT: p->dist_opt = b; break;
        case MP_SET_HSDP:
            p->hsdp = b;
            if (b) {
                p->zero = 3; /* hybrid sharding is ZeRO-3's */
                p->dist_opt = true;
                cc->set |= MP_SET_ZERO;
            }
            break;
        case MP_SET_ZERO:
            if (n > 3)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                    "zero=%lld: expected 0, 1, 2 or 3", n);
            p->zero = n;
            if (n >= 1) p->dist_opt = true; /* ZeRO-N shards the optimizer too */
            break;
        case MP_SET_DP_OVERLAP: p->dp_overlap = b; break;
        case MP_SET_TP_OVERLAP: p->tp_overlap = b; break;
        case MP_SET_RECOMPUTE: p->recompute = (mp_recompute)b; break;
        case MP_SET_SCHEDULE: p->schedule = (mp_schedule_kind)b; break;
        default: break;
        }
        cc->set |= fix_keys[i].bit;
        return MP_OK;
    }
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                        "unknown key '%.*s' (keys: tp sp pp vpp cp dp micro_batch recompute "
                        "dist_opt zero hsdp schedule dp_overlap tp_overlap)", (int)(klen > 40 ? 40 : klen), item);
}

mp_status mp_search_cli_fix(mp_cli_config *cc, const char *list, mp_error *err)
{
    char buf[1024];
    if (strlen(list) >= sizeof buf)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix", "too long");
    strcpy(buf, list);
    char *save = NULL;
    bool any = false;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        mp_status st = fix_one(cc, tok, err);
        if (st) return st;
        any = true;
    }
    if (!any) return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix", "expected KEY=VALUE[,KEY=VALUE...]");
    return MP_OK;
}

mp_status mp_search_cli_parse(int *argc, char **argv, const char *verb, mp_search_cli *sc,
                              mp_error *err)
{
    (void)verb;
    memset(sc, 0, sizeof *sc);
    sc->top = 5;
    bool seen_top = false;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        const char *name = a;
        char key[32];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof key) {
            memcpy(key, a, (size_t)(eq - a));
            key[eq - a] = '\0';
            name = key;
            val = eq + 1;
        }
        bool takes = !strcmp(name, "--top") || !strcmp(name, "--fix") || !strcmp(name, "-o") ||
                     !strcmp(name, "--output");
        if (takes && !val) {
            if (i + 1 >= *argc)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, name, "needs a value");
            val = argv[++i];
        }
        if ((!strcmp(name, "--top") && seen_top) ||
            ((!strcmp(name, "-o") || !strcmp(name, "--output")) && sc->output))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, name, "given twice: say it once");
        if (!strcmp(name, "--top")) {
            seen_top = true;
            char *end;
            errno = 0;
            long k = strtol(val, &end, 10);
            if (errno || *end || k < 1 || k > 100)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--top",
                                    "'%.40s': expected an integer from 1 to 100", val);
            sc->top = (int)k;
        } else if (!strcmp(name, "--fix")) {
            if (sc->n_fix >= 32)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix", "given too often");
            sc->fix[sc->n_fix++] = val;
        } else if (!strcmp(name, "-o") || !strcmp(name, "--output")) {
            if (!*val) return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "-o", "empty file name");
            sc->output = val;
        } else if (!strcmp(a, "--force")) {
            sc->force = true;
        } else if (!strcmp(a, "--no-split")) {
            sc->no_split = true;
        } else if (!strcmp(a, "--no-simulate")) {
            sc->no_simulate = true;
        } else if (!strcmp(a, "--tp-cross-node")) {
            sc->tp_cross_node = true;
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    argv[out] = NULL;
    return MP_OK;
}

mp_status mp_search_cli_options(mp_cli_config *cc, const mp_search_cli *sc,
                                mp_search_options *opt, mp_error *err)
{
    for (int i = 0; i < sc->n_fix; i++) {
        mp_status st = mp_search_cli_fix(cc, sc->fix[i], err);
        if (st) return st;
    }
    mp_status st = mp_cli_config_finish(cc, err);
    if (st) return st;
    if (!(cc->set & MP_SET_GLOBAL_BATCH))
        cc->config.training.global_batch =
            cc->published_global_batch > 0 ? cc->published_global_batch : 512;
    memset(opt, 0, sizeof *opt);
    opt->base = cc->config;
    /* MP_SET_* and MP_FIX_* share their low twelve bits, and zero's */
    opt->fixed = cc->set & (0xFFFu | MP_SET_ZERO | MP_SET_HSDP | MP_SET_EP | MP_SET_ETP |
                            MP_SET_DISPATCHER);
    /* at least the default five are costed in full and re-ranked by the
     * simulator, so --top 1, --top 5 and explain name the same winner; the
     * CLI shows the first sc->top */
    opt->top_k = sc->top > MP_SEARCH_RERANK_MIN ? sc->top : MP_SEARCH_RERANK_MIN;
    opt->tp_cross_domain = sc->tp_cross_node;
    opt->no_split = sc->no_split;
    opt->no_simulate = sc->no_simulate;
    return MP_OK;
}
