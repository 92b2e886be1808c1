/* search_common.c — search's own options (search_common.h). */
#include "cli/search_common.h"

#include "cli/cli.h"

#include "core/fields.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --fix key -> the MP_SET_* bit and how to read the value */
typedef enum { V_INT, V_BOOL, V_RECOMPUTE, V_SCHEDULE, V_ZERO, V_PRECISION } vkind;
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
    {"zero", MP_SET_ZERO, V_ZERO}, {"hsdp", MP_SET_HSDP, V_BOOL},
    {"ep", MP_SET_EP, V_INT}, {"etp", MP_SET_ETP, V_INT},
    {"precision", MP_SET_PRECISION, V_PRECISION},
};

#define FIX_KEYS                                                                          \
    "tp sp pp vpp cp dp micro_batch recompute dist_opt zero hsdp schedule dp_overlap tp_overlap ep etp " \
    "precision"

/* One value of key i as an integer (the enum or bool as its number). */
static mp_status parse_value(size_t i, const char *v, int64_t *out, mp_error *err)
{
    int b = 0;
    if (fix_keys[i].kind == V_ZERO) {
        if (strlen(v) != 1 || v[0] < '0' || v[0] > '3')
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "zero=%.40s: expected 0, 1, 2 or 3 (the ZeRO stage)", v);
        *out = v[0] - '0';
        return MP_OK;
    }
    if (fix_keys[i].kind == V_PRECISION) {
        for (int d = 0; d < MP_DTYPE_COUNT; d++)
            if (d != MP_DTYPE_TF32 && !strcmp(v, mp_dtype_name((mp_dtype)d))) {
                *out = d;
                return MP_OK;
            }
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                            "precision=%.40s: expected bf16, fp16, fp32 or fp8", v);
    }
    if (fix_keys[i].kind == V_INT) {
        char *end;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (errno || *end || n < 1 || n > (1LL << 24))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "%s=%.40s: expected a positive integer (at most 16777216)",
                                fix_keys[i].key, v);
        *out = n;
        return MP_OK;
    }
    if (fix_keys[i].kind == V_BOOL) {
        bool yes;
        if (!mp_parse_bool_word(v, &yes))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "%s=%.40s: expected true/false (on/off)", fix_keys[i].key, v);
        b = yes;
    } else if (fix_keys[i].kind == V_RECOMPUTE) {
        if ((b = mp_recompute_parse(v)) < 0)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "recompute=%.40s: expected none, selective or full", v);
    } else if ((b = mp_schedule_parse(v)) < 0) {
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                            "schedule=%.40s: expected gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v, "
                            "dualpipev or dualpipe",
                            v);
    }
    *out = b;
    return MP_OK;
}

static void set_fixed(mp_parallel *p, uint32_t bit, int64_t n)
{
    switch (bit) {
    case MP_SET_TP: p->tp = n; break;
    case MP_SET_PP: p->pp = n; break;
    case MP_SET_VPP: p->vpp = n; break;
    case MP_SET_CP: p->cp = n; break;
    case MP_SET_DP: p->dp = n; break;
    case MP_SET_EP: p->ep = n; break;
    case MP_SET_ETP: p->etp = n; break;
    case MP_SET_MICRO_BATCH: p->micro_batch = n; break;
    case MP_SET_SP: p->sp = n; break;
    case MP_SET_DIST_OPT: p->dist_opt = n; break;
    case MP_SET_ZERO:
        p->zero = n;
        if (n >= 1) p->dist_opt = true; /* ZeRO-N shards the optimizer too */
        break;
    case MP_SET_HSDP:
        p->hsdp = n;
        if (n) { /* hybrid sharding is ZeRO-3's */
            p->zero = 3;
            p->dist_opt = true;
        }
        break;
    case MP_SET_DP_OVERLAP: p->dp_overlap = n; break;
    case MP_SET_TP_OVERLAP: p->tp_overlap = n; break;
    case MP_SET_RECOMPUTE: p->recompute = (mp_recompute)n; break;
    case MP_SET_SCHEDULE: p->schedule = (mp_schedule_kind)n; break;
    default: break;
    }
}

/* KEY=VALUE fixes a dimension; KEY=A|B|... limits it to a set that search
 * chooses from (a set of one value fixes it). */
static mp_status fix_one(mp_cli_config *cc, mp_search_cli *sc, const char *item, mp_error *err)
{
    const char *eq = strchr(item, '=');
    if (!eq || eq == item || !eq[1])
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                            "'%.80s' is not KEY=VALUE or KEY=A|B (keys: " FIX_KEYS ")", item);
    size_t klen = (size_t)(eq - item);
    /* "tp= 2" and "tp=2| 4" were read as tp=2 and {2, 4} (strtoll skips
     * spaces), where "--tp ' 2'" is refused */
    if (mp_opt_spaced(item, klen) || mp_opt_spaced(eq + 1, strlen(eq + 1)))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                            "'%.80s' has spaces around its key or value: give them alone", item);
    for (size_t i = 0; i < sizeof fix_keys / sizeof fix_keys[0]; i++) {
        if (strlen(fix_keys[i].key) != klen || strncmp(fix_keys[i].key, item, klen)) continue;
        uint32_t bit = fix_keys[i].bit;
        int dim = __builtin_ctz(bit); /* MP_SET_* and MP_FIX_* share their low bits */
        bool settable = dim < MP_FIX_DIMS; /* zero and hsdp take one value, not a set */
        bool precision = bit == MP_SET_PRECISION; /* a set: one search each */
        /* "--fix tp=2,tp=4" or "--tp 4 --fix tp=2": which one was meant? */
        if ((cc->set & bit) || (settable && sc->allowed[dim].n) || (precision && sc->precisions.n))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "%s is fixed twice (by its own option or an earlier --fix): "
                                "say it once", fix_keys[i].key);
        mp_search_set set = {0};
        char alt[256];
        snprintf(alt, sizeof alt, "%s", eq + 1);
        /* "tp=2|" and "tp=|2" were read as tp=2 */
        if (mp_cli_list_has_empty(alt, '|'))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "%s=%.40s: an empty value in the set", fix_keys[i].key, alt);
        char *save = NULL;
        for (char *tok = strtok_r(alt, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
            int64_t v = 0;
            if (mp_opt_spaced(tok, strlen(tok)))
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                    "%s=%.40s: '%.40s' has spaces around it: give the value alone",
                                    fix_keys[i].key, eq + 1, tok);
            mp_status st = parse_value(i, tok, &v, err);
            if (st) return st;
            bool dup = false;
            for (int j = 0; j < set.n; j++) dup = dup || set.v[j] == v;
            if (dup) continue;
            if (set.n == MP_SEARCH_SET_MAX)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                    "%s: at most %d values in a set", fix_keys[i].key,
                                    MP_SEARCH_SET_MAX);
            set.v[set.n++] = v;
        }
        if (set.n == 0)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "%s=%.40s: expected a value or values A|B", fix_keys[i].key, eq + 1);
        if (precision && set.n > 1) {
            sc->precisions = set;
            for (int j = 0; j < set.n; j++)
                cc->fp8_in_set = cc->fp8_in_set || set.v[j] == MP_DTYPE_FP8;
        } else if (precision) {
            cc->config.training.precision = (mp_dtype)set.v[0];
            cc->set |= bit;
        } else if (set.n == 1) {
            /* zero and hsdp imply dist_opt (and hsdp zero 3): one given
             * before that says otherwise is a contradiction, not overridden */
            const mp_parallel *p = &cc->config.parallel;
            int64_t v = set.v[0];
            if (bit == MP_SET_ZERO && v >= 1 && (cc->set & MP_SET_DIST_OPT) && !p->dist_opt)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                    "zero=%lld shards the optimizer states, and dist_opt is fixed "
                                    "off: give one of them",
                                    (long long)v);
            if (bit == MP_SET_DIST_OPT && !v && (cc->set & MP_SET_ZERO) && p->zero >= 1)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                    "dist_opt=off, and zero is fixed %lld, which shards the "
                                    "optimizer states: give one of them",
                                    (long long)p->zero);
            if (bit == MP_SET_HSDP && v &&
                (((cc->set & MP_SET_ZERO) && p->zero != 3) ||
                 ((cc->set & MP_SET_DIST_OPT) && !p->dist_opt)))
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                    "hsdp=on is ZeRO-3 with the optimizer sharded, and %s is "
                                    "fixed otherwise: give one of them",
                                    (cc->set & MP_SET_ZERO) && p->zero != 3 ? "zero" : "dist_opt");
            set_fixed(&cc->config.parallel, bit, set.v[0]);
            cc->set |= bit;
            if (bit == MP_SET_HSDP && set.v[0]) cc->set |= MP_SET_ZERO;
            if (bit == MP_SET_HSDP) sc->hsdp_by_fix = true;
        } else if (!settable) {
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                                "%s takes one value, not a set", fix_keys[i].key);
        } else {
            sc->allowed[dim] = set;
        }
        return MP_OK;
    }
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                        "unknown key '%.*s' (keys: " FIX_KEYS ")", (int)(klen > 40 ? 40 : klen),
                        item);
}

mp_status mp_search_cli_fix(mp_cli_config *cc, mp_search_cli *sc, const char *list, mp_error *err)
{
    char buf[1024];
    if (strlen(list) >= sizeof buf)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix", "too long");
    strcpy(buf, list);
    /* "tp=2," and "tp=2,,pp=2" skipped the empty item */
    if (mp_cli_list_has_empty(buf, ','))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                            "'%.200s' has an empty KEY=VALUE item", buf);
    char *save = NULL;
    bool any = false;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        mp_status st = fix_one(cc, sc, tok, err);
        if (st) return st;
        any = true;
    }
    if (!any)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix",
                            "expected KEY=VALUE[,KEY=VALUE...] (a value may be a set A|B)");
    return MP_OK;
}

/* --runtime megatron: Megatron-LM's schedules only (no ZB-H1, no GPipe), and
 * splits and recompute its flags express (search.h). --runtime any: Megatron's
 * space and the ZeRO-2/3 / FSDP plans DeepSpeed and torchtitan run, ranked
 * together (docs/choosing.md). */
static mp_status apply_runtime(const mp_cli_config *cc, const mp_search_cli *sc,
                               mp_search_options *opt, mp_error *err)
{
    if (!sc->runtime) return MP_OK;
    if (!strcmp(sc->runtime, "any")) {
        opt->zero_sharding = true;
        return MP_OK;
    }
    if (strcmp(sc->runtime, "megatron"))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--runtime",
                            "'%.40s': expected megatron or any", sc->runtime);
    if ((opt->fixed & MP_FIX_ZERO) && cc->config.parallel.zero >= 2)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--runtime",
                            "megatron: Megatron-LM shards only the optimizer (ZeRO-1); zero=%lld "
                            "runs under DeepSpeed or torchtitan",
                            (long long)cc->config.parallel.zero);
    opt->megatron_runtime = true;
    const int dim = __builtin_ctz(MP_FIX_SCHEDULE);
    const mp_schedule_kind ok[] = {MP_SCHED_1F1B, MP_SCHED_INTERLEAVED};
    if (opt->fixed & MP_FIX_SCHEDULE) {
        mp_schedule_kind s = cc->config.parallel.schedule;
        if (s != MP_SCHED_1F1B && s != MP_SCHED_INTERLEAVED)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--runtime",
                                "megatron: Megatron-LM has no %s schedule (it runs 1f1b and "
                                "interleaved-1f1b)", mp_schedule_name(s));
        return MP_OK;
    }
    mp_search_set *set = &opt->allowed[dim];
    if (set->n == 0) {
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) set->v[set->n++] = ok[i];
        return MP_OK;
    }
    mp_search_set kept = {0};
    for (int j = 0; j < set->n; j++)
        if (set->v[j] == MP_SCHED_1F1B || set->v[j] == MP_SCHED_INTERLEAVED)
            kept.v[kept.n++] = set->v[j];
    if (kept.n == 0)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--runtime",
                            "megatron: none of the --fix schedules runs on Megatron-LM (it "
                            "runs 1f1b and interleaved-1f1b)");
    *set = kept;
    return MP_OK;
}

enum { S_TOP, S_FIX, S_OUTPUT, S_FORCE, S_RUNTIME, S_NO_SPLIT, S_NO_SIMULATE, S_TP_CROSS_NODE };

/* what search and explain both take */
static const mp_opt search_rows[] = {
    {"--top", NULL, "K", S_TOP, 0, "how many plans to show, 1 to 100 (default 5)", NULL},
    {"--runtime", NULL, "R", S_RUNTIME, 0,
     "megatron: only what Megatron-LM runs (its schedules; stage splits and per-layer "
     "recompute its flags express); any: ZeRO-2/3 and FSDP plans (DeepSpeed, torchtitan) "
     "ranked with Megatron's",
     "megatron any"},
    {"--no-split", NULL, NULL, S_NO_SPLIT, 0, "only Megatron's even stage split", NULL},
    {"--no-simulate", NULL, NULL, S_NO_SIMULATE, 0,
     "rank by the closed-form estimate, without the simulator", NULL},
    {"--tp-cross-node", NULL, NULL, S_TP_CROSS_NODE, 0,
     "let tensor parallelism span more than one NVLink domain", NULL},
};

/* search's alone (explain refuses them) */
static const mp_opt plan_rows[] = {
    {"--fix", NULL, "KEY=VALUE[,...]", S_FIX, MP_OPT_REPEAT,
     "fix settings search would vary; a value A|B limits it to those (--fix "
     "'schedule=1f1b|interleaved-1f1b,tp=4|8'). Keys: " FIX_KEYS,
     NULL},
    {"-o", "--output", "FILE", S_OUTPUT, 0,
     "(or --output FILE) write the winner as a plan file (- for stdout, the report then goes "
     "to stderr)",
     NULL},
    {"--force", NULL, NULL, S_FORCE, 0, "let -o replace a read-only file", NULL},
};

const mp_opt_group mp_search_cli_opts = MP_OPT_GROUP("the search", search_rows);
const mp_opt_group mp_search_plan_opts = MP_OPT_GROUP("fixed settings and the plan file", plan_rows);

mp_status mp_search_cli_parse(int *argc, char **argv, const char *verb, mp_search_cli *sc,
                              mp_error *err)
{
    (void)verb;
    memset(sc, 0, sizeof *sc);
    sc->top = 5;
    mp_opt_seen seen = {0};
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const mp_opt *o = NULL;
        const char *val = NULL;
        const char *typed = argv[i]; /* "--output" or "-o": a refusal names what was typed */
        int found = mp_opt_take(search_rows, sizeof search_rows / sizeof search_rows[0], *argc,
                                argv, &i, &o, &val, err);
        if (!found)
            found = mp_opt_take(plan_rows, sizeof plan_rows / sizeof plan_rows[0], *argc, argv,
                                &i, &o, &val, err);
        if (found < 0)
            return MP_EINPUT;
        if (!found) {
            argv[out++] = argv[i];
            continue;
        }
        if (mp_opt_once(&seen, o, val, typed, err) < 0)
            return MP_EINPUT;
        switch (o->id) {
        case S_TOP: {
            char *end;
            errno = 0;
            long k = strtol(val, &end, 10);
            if (errno || *end || k < 1 || k > 100)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--top",
                                    "'%.40s': expected an integer from 1 to 100", val);
            sc->top = (int)k;
            break;
        }
        case S_FIX:
            if (sc->n_fix >= 32)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix", "given too often");
            sc->fix[sc->n_fix++] = val;
            break;
        case S_RUNTIME: sc->runtime = val; break;
        case S_OUTPUT:
            if (!*val) return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "-o", "empty file name");
            sc->output = val;
            break;
        case S_FORCE: sc->force = true; break;
        case S_NO_SPLIT: sc->no_split = true; break;
        case S_NO_SIMULATE: sc->no_simulate = true; break;
        case S_TP_CROSS_NODE: sc->tp_cross_node = true; break;
        }
    }
    *argc = out;
    argv[out] = NULL;
    return MP_OK;
}

/* An expert setting's refusal names what the user typed: the option
 * (--ep 3) or the --fix key (--fix ep=3). */
static mp_status refuse_expert(uint32_t by_fix, uint32_t bit, const char *field, const char *key,
                               int64_t value, mp_error *err)
{
    char msg[sizeof err->msg], k[32], opt[64];
    snprintf(msg, sizeof msg, "%s", err->msg);
    snprintf(k, sizeof k, "%s", key);
    mp_cli_option_name(field, opt, sizeof opt);
    char kv[64];
    snprintf(kv, sizeof kv, "%s=%lld", k, (long long)value);
    if (by_fix & bit) /* "ep=3: ...", unless the message starts with it */
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--fix", "%s%s%s",
                            strncmp(msg, kv, strlen(kv)) ? kv : "",
                            strncmp(msg, kv, strlen(kv)) ? ": " : "", msg);
    snprintf(err->field, sizeof err->field, "%s", opt);
    return MP_EINPUT;
}

/* The expert settings given (--ep, --etp, --dispatcher and the MoE overlaps,
 * or --fix ep=/etp=) are checked before the search, as estimate checks them:
 * on a dense model they are refused (search would otherwise ignore them), on
 * an MoE model an ep that does not divide the experts or an etp that does not
 * divide the expert FFN is named here (search would otherwise refuse every
 * candidate and report an unrelated reason), and so is an ep above the GPU
 * count (not over a range of counts: a larger one may hold it). by_fix: the
 * MP_SET_* bits --fix set. */
static mp_status check_expert_options(const mp_cli_config *cc, uint32_t by_fix,
                                      bool gpus_range, mp_error *err)
{
    const mp_model *m = &cc->config.model;
    const mp_parallel *p = &cc->config.parallel;
    if (!mp_model_is_moe(m)) {
        /* estimate's own rule (mp_config_check_moe), on the settings given */
        mp_config c = cc->config;
        if (!(cc->set & MP_SET_EP)) c.parallel.ep = 0;
        if (!(cc->set & MP_SET_ETP)) c.parallel.etp = 0;
        if (mp_config_check_moe(&c, err) == MP_OK) return MP_OK;
        bool ep = !strcmp(err->field, "ep"), etp = !strcmp(err->field, "etp");
        return refuse_expert(by_fix, ep ? MP_SET_EP : etp ? MP_SET_ETP : 0, err->field, err->field,
                             ep ? p->ep : p->etp, err);
    }
    if (cc->set & MP_SET_EP) {
        int64_t ep = mp_parallel_ep(p), gpus = cc->config.training.gpus;
        if (m->moe.experts % ep) {
            mp_error_set(err, MP_EINPUT, NULL, 0, 0, "ep", "ep=%lld does not divide the %lld "
                         "experts", (long long)ep, (long long)m->moe.experts);
            return refuse_expert(by_fix, MP_SET_EP, "ep", "ep", ep, err);
        }
        if (!gpus_range && gpus > 0 && ep > gpus) {
            mp_error_set(err, MP_EINPUT, NULL, 0, 0, "ep", "ep=%lld is more than the %lld GPUs",
                         (long long)ep, (long long)gpus);
            return refuse_expert(by_fix, MP_SET_EP, "ep", "ep", ep, err);
        }
    }
    if (cc->set & MP_SET_ETP) {
        int64_t etp = mp_parallel_etp(p);
        if (m->moe.expert_ffn % etp || (m->moe.shared_experts && m->moe.shared_ffn % etp)) {
            mp_error_set(err, MP_EINPUT, NULL, 0, 0, "etp", "etp=%lld does not divide the "
                         "expert FFN size %lld", (long long)etp,
                         (long long)(m->moe.expert_ffn % etp ? m->moe.expert_ffn
                                                            : m->moe.shared_ffn));
            return refuse_expert(by_fix, MP_SET_ETP, "etp", "etp", etp, err);
        }
    }
    return MP_OK;
}

/* Hybrid sharding asked for (--hsdp, --fix hsdp=on) on no more GPUs than
 * one scale-up domain: search shards within a domain and replicates across
 * domains (search_enumerate.c), so every candidate is refused, and the
 * search used to report whatever rule refused the last one ("--global-batch:
 * interleaving needs ..."). Named before the search, with the words estimate,
 * simulate and explain use (mp_cli_check_hsdp_domain). */
mp_status mp_search_cli_check_hsdp(const mp_cli_config *cc, const mp_search_cli *sc,
                                   mp_error *err)
{
    if (sc->gpus_range)
        return MP_OK;
    return mp_cli_check_hsdp_domain(cc, sc->hsdp_by_fix, err);
}

/* --cp-comm-type other than p2p, checked before the search as estimate
 * checks it: a2a+p2p, latent attention (MLA) and a cp fixed at 1 are
 * refused here (every candidate would be); a2a's heads/(tp*cp) when tp and
 * cp are both fixed, else candidate by candidate (search_enumerate.c). */
static mp_status check_cp_comm(const mp_cli_config *cc, mp_error *err)
{
    mp_config c = cc->config;
    if (c.parallel.cp_comm_type == MP_CP_P2P)
        return MP_OK;
    if (!(cc->set & MP_SET_CP))
        c.parallel.cp = 2; /* any cp > 1: the search varies it */
    bool heads = (cc->set & MP_SET_TP) && (cc->set & MP_SET_CP);
    mp_status st = mp_config_cp_comm_check(&c, heads, err);
    if (st != MP_OK)
        mp_cli_error_as_option(err);
    return st;
}

/* The least value --fix (or the option) allows for dimension bit, or the
 * base's value v when it is not fixed as a set. */
static int64_t least_fixed(const mp_search_options *opt, uint32_t bit, int64_t v)
{
    const mp_search_set *set = &opt->allowed[__builtin_ctz(bit)];
    for (int j = 0; j < set->n; j++)
        if (j == 0 || set->v[j] < v) v = set->v[j];
    return v;
}

/* the schedules that need pp >= 2 (interleaving needs vpp >= 2, the V
 * schedules two chunks a rank, DualPipe pairs of ranks) */
static bool needs_pipeline(mp_schedule_kind s)
{
    return s == MP_SCHED_INTERLEAVED || s == MP_SCHED_DUALPIPE || mp_schedule_is_v(s);
}

static mp_status check_sharded_pipeline(const mp_cli_config *cc, const mp_search_options *opt,
                                        uint32_t before_fix, mp_error *err)
{
    const mp_parallel *fp = &cc->config.parallel;
    bool sharded = ((opt->fixed & MP_FIX_ZERO) && fp->zero >= 2) ||
                   ((opt->fixed & MP_FIX_HSDP) && fp->hsdp);
    if (!sharded)
        return MP_OK;
    const char *what = fp->hsdp ? "HSDP" : fp->zero == 2 ? "ZeRO-2" : "ZeRO-3";
    char given[64] = "";
    uint32_t bit = 0;
    const mp_search_set *scheds = &opt->allowed[__builtin_ctz(MP_FIX_SCHEDULE)];
    bool all_piped = scheds->n > 0 || (opt->fixed & MP_FIX_SCHEDULE);
    for (int j = 0; j < scheds->n; j++)
        all_piped = all_piped && needs_pipeline((mp_schedule_kind)scheds->v[j]);
    if (scheds->n == 0 && (opt->fixed & MP_FIX_SCHEDULE))
        all_piped = needs_pipeline(fp->schedule);
    int64_t pp = least_fixed(opt, MP_FIX_PP, fp->pp), vpp = least_fixed(opt, MP_FIX_VPP, fp->vpp);
    if (((opt->fixed & MP_FIX_PP) || opt->allowed[__builtin_ctz(MP_FIX_PP)].n) && pp > 1) {
        bit = MP_SET_PP;
        snprintf(given, sizeof given, "pp=%lld", (long long)pp);
    } else if (((opt->fixed & MP_FIX_VPP) || opt->allowed[__builtin_ctz(MP_FIX_VPP)].n) &&
               vpp > 1) {
        bit = MP_SET_VPP;
        snprintf(given, sizeof given, "vpp=%lld", (long long)vpp);
    } else if (all_piped) {
        bit = MP_SET_SCHEDULE;
        snprintf(given, sizeof given, "schedule=%s",
                 mp_schedule_name(scheds->n ? (mp_schedule_kind)scheds->v[0] : fp->schedule));
    } else {
        return MP_OK;
    }
    const char *field = bit == MP_SET_PP ? "--pp" : bit == MP_SET_VPP ? "--vpp" : "--schedule";
    if (!(before_fix & bit) || opt->allowed[__builtin_ctz(bit)].n)
        field = "--fix";
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, field,
                        "%s: search ranks %s plans without pipeline parallelism only (estimate, "
                        "simulate and explain cost zero 3 with pp under --zero-runtime fsdp2)",
                        given, what);
}

mp_status mp_search_cli_options(mp_cli_config *cc, mp_search_cli *sc,
                                mp_search_options *opt, mp_error *err)
{
    uint32_t before_fix = cc->set;
    for (int i = 0; i < sc->n_fix; i++) {
        mp_status st = mp_search_cli_fix(cc, sc, sc->fix[i], err);
        if (st) return st;
    }
    mp_status st = mp_cli_config_finish(cc, err);
    if (st) return st;
    if ((st = check_expert_options(cc, cc->set & ~before_fix, sc->gpus_range, err)) != MP_OK) return st;
    if ((st = check_cp_comm(cc, err)) != MP_OK) return st;
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
    memcpy(opt->allowed, sc->allowed, sizeof opt->allowed);
    opt->precisions = sc->precisions;
    /* search's candidates shard weights and gradients (ZeRO-2/3, HSDP) with
     * pp = 1 only (search_enumerate.c, sharding_choices): fixed together with
     * a pipeline (pp, vpp or a pipeline schedule), every candidate was refused
     * and search named the last refusal it met ("--global-batch: interleaving
     * needs microbatches (1) a multiple of pp=2", exit 2), though estimate
     * runs zero 3 under fsdp2 with pp */
    if ((st = check_sharded_pipeline(cc, opt, before_fix, err)) != MP_OK) return st;
    return apply_runtime(cc, sc, opt, err);
}

mp_status mp_search_cli_parse_all(int *argc, char **argv, mp_cli_config *cc, mp_search_cli *sc,
                                  mp_error *err)
{
    mp_status st = mp_cli_config_parse(argc, argv, cc, err);
    if (st == MP_OK)
        st = mp_search_cli_parse(argc, argv, "search", sc, err);
    if (st == MP_OK && *argc > 1)
        st = mp_cli_leftover(&mp_doc_search, &mp_doc_search_hw, argv[1], err);
    return st;
}
