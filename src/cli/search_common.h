/* search_common.h — the options search adds to the shared ones (--top, --fix,
 * -o, ...) and the search options built from them; used by search and explain. */
#ifndef MP_SEARCH_COMMON_H
#define MP_SEARCH_COMMON_H

#include <stdbool.h>

#include "cli/options.h"
#include "planner/search.h"


typedef struct mp_search_cli {
    int top;
    const char *output;   /* -o FILE */
    bool force;           /* --force: -o may replace a read-only file */
    bool no_split, no_simulate, tp_cross_node;
    const char *fix[32];  /* --fix lists, applied to the config by mp_search_cli_options */
    int n_fix;
    mp_search_set allowed[MP_FIX_DIMS]; /* --fix KEY=A|B sets (filled with the fixes) */
    mp_search_set precisions; /* --fix precision=A|B: the precisions compared (mp_dtype) */
    const char *runtime;  /* --runtime NAME: only what that runtime runs ("megatron") */
    bool gpus_range;      /* set by the search over hardware: --gpus is the smallest of a range */
    bool hsdp_by_fix;     /* hsdp was fixed by --fix (a refusal names --fix, not --hsdp) */
} mp_search_cli;

/* The rows of search's options, for --help: those explain takes too (--top,
 * --runtime, ...) and search's alone (--fix, -o, --force). */
extern const mp_opt_group mp_search_cli_opts, mp_search_plan_opts;

/* The shared options, then search's, then nothing left over: what search and
 * the search over hardware both parse. */
mp_status mp_search_cli_parse_all(int *argc, char **argv, mp_cli_config *cc, mp_search_cli *sc,
                                  mp_error *err);

/* Takes search's own options out of argv (like mp_cli_config_parse); the
 * --fix lists are kept in sc until mp_search_cli_options applies them. */
mp_status mp_search_cli_parse(int *argc, char **argv, const char *verb, mp_search_cli *sc,
                              mp_error *err);
mp_status mp_search_cli_fix(mp_cli_config *cc, mp_search_cli *sc, const char *list, mp_error *err);

/* Finishes cc (defaults; global batch = the preset's published batch or 512
 * when not given) and fills opt: explicit parallel settings are fixed. */
mp_status mp_search_cli_options(mp_cli_config *cc, mp_search_cli *sc,
                                mp_search_options *opt, mp_error *err);

/* search: hybrid sharding asked for on no more GPUs than one scale-up
 * domain, which no candidate runs, is refused naming --hsdp (or --fix), as
 * estimate, simulate and explain refuse it (mp_cli_check_hsdp_domain); not
 * over a range of GPU counts. After mp_search_cli_options. */
mp_status mp_search_cli_check_hsdp(const mp_cli_config *cc, const mp_search_cli *sc,
                                   mp_error *err);

#endif
