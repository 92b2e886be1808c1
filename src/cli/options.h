/* options.h — the options estimate, explain, search and simulate share:
 * they describe one configuration (model, hardware, training, parallel split).
 * Parsed in one place so every verb spells and checks them the same way. */
#ifndef MP_OPTIONS_H
#define MP_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

#include <cjson/cJSON.h>

#include "cli/opt.h"
#include "core/buf.h"
#include "core/config.h"
#include "core/error.h"

/* Which settings the user gave explicitly (the rest take Megatron-LM's
 * defaults, and the output says so; search never varies an explicit one). */
enum {
    MP_SET_TP = 1u << 0, MP_SET_SP = 1u << 1, MP_SET_PP = 1u << 2, MP_SET_VPP = 1u << 3,
    MP_SET_CP = 1u << 4, MP_SET_DP = 1u << 5, MP_SET_MICRO_BATCH = 1u << 6,
    MP_SET_RECOMPUTE = 1u << 7, MP_SET_DIST_OPT = 1u << 8, MP_SET_SCHEDULE = 1u << 9,
    MP_SET_DP_OVERLAP = 1u << 10, MP_SET_TP_OVERLAP = 1u << 11,
    MP_SET_SEQ = 1u << 12, MP_SET_GLOBAL_BATCH = 1u << 13, MP_SET_PRECISION = 1u << 14,
    MP_SET_HW = 1u << 15, MP_SET_TOKENS = 1u << 16, MP_SET_ZERO = 1u << 17,
    MP_SET_HSDP = 1u << 18, MP_SET_EP = 1u << 19, MP_SET_ETP = 1u << 20,
    MP_SET_DISPATCHER = 1u << 21, MP_SET_FP8_RECIPE = 1u << 22, MP_SET_MOE_IMBALANCE = 1u << 23,
    MP_SET_FP8_PARAM_GATHER = 1u << 24, MP_SET_GRAD_REDUCE_BF16 = 1u << 25,
    MP_SET_PIPELINE_LAYOUT = 1u << 26, MP_SET_MOE_A2A_OVERLAP = 1u << 27,
    MP_SET_SHARED_EXPERT_OVERLAP = 1u << 28, MP_SET_ZERO_RUNTIME = 1u << 29,
    MP_SET_STAGE_LAYERS = 1u << 30
};

typedef enum {
    MP_FORMAT_TABLE, MP_FORMAT_JSON, MP_FORMAT_YAML, MP_FORMAT_MEGATRON,
    MP_FORMAT_DEEPSPEED, MP_FORMAT_TORCHTITAN /* a ZeRO-2/3 or FSDP plan's framework config */
} mp_format;

typedef struct mp_cli_config {
    mp_config config;
    uint32_t set;         /* MP_SET_* bits */
    bool have_model, have_gpus;
    mp_format format;
    const char *model_spec; /* as given to --model */
    const char *hw_spec;    /* as given to --hw (default "dgx-a100") */
    /* --hw-set KEY=VALUE overrides, applied in order by mp_cli_config_finish */
#define MP_CLI_MAX_HW_SETS 32
    const char *hw_sets[MP_CLI_MAX_HW_SETS];
    int n_hw_sets;
    /* the preset's published global batch before mp_cli_config_finish
     * rounded it to the default split (0 when none); search, which varies the
     * split, starts from this when --global-batch is not given */
    int64_t published_global_batch;
    double moe_imbalance; /* --moe-imbalance: the model's moe.imbalance once it is loaded */
    bool fp8_in_set;      /* search compares fp8 (--fix precision=bf16|fp8): --fp8-recipe applies */
    /* the first option given other than --format (NULL: none): a plan file
     * takes none of them (set covers only some, and the rest were dropped) */
    const char *first_option;
    /* the first other than --format, --pp, --vpp and --schedule (NULL: none):
     * simulate --unit-ops reads those only (--tp, --hw-set, ... were dropped) */
    const char *first_model_option;
} mp_cli_config;

/* The shared options' rows, for the verbs' --help. */
extern const mp_opt_group mp_cli_config_opts;

/* Parses the shared options out of argv:
 *   --model M --gpus N --hw H --hw-set KEY=VALUE (repeatable) --seq S
 *   --global-batch B --precision bf16|fp16|fp32|fp8 --tokens T
 *   --fp8-recipe delayed|tensorwise|blockwise|mxfp8 --moe-imbalance X
 *   --tp t --sp/--no-sp --pp p --vpp v --cp c --dp d --micro-batch b
 *   --recompute none|selective|full --dist-opt/--no-dist-opt
 *   --dp-overlap on|off --tp-overlap on|off --schedule gpipe|1f1b|interleaved-1f1b|zb-h1
 *   --format table|json|yaml|megatron
 * Both "--opt value" and "--opt=value". Options it does not know are kept, in
 * order, in argv[1..*argc-1] for the verb to parse (argv[0] stays). Numbers are
 * checked (integer, positive, not absurd) with field = the option name.
 * Does not fill defaults: call mp_cli_config_finish for that. */
mp_status mp_cli_config_parse(int *argc, char **argv, mp_cli_config *out, mp_error *err);

/* Loads model and hw (presets, files), applies --hw-set, and fills every
 * unset setting with the default a Megatron-LM user expects (tp=pp=vpp=cp=1,
 * dp = gpus/(tp*pp*cp), micro_batch 1, no sp, no recompute, no dist-opt,
 * dp_overlap on with dist-opt, schedule 1f1b for pp>1 or interleaved-1f1b for
 * vpp>1, seq = model's, bf16; global batch = the preset's published batch
 * (512 sequences for models without one), rounded up to a multiple of
 * micro_batch*dp (times pp with interleaving) so the default split runs).
 * Does not check that the configuration can run: mp_cli_config_check does. */
mp_status mp_cli_config_finish(mp_cli_config *cc, mp_error *err);

/* Applies the --hw-set overrides of cc to hw (a profile search reaches
 * besides cc's own) and checks the result; err names "--hw-set KEY". */
mp_status mp_cli_apply_hw_sets(const mp_cli_config *cc, mp_hw *hw, mp_error *err);
/* Whether two file names are one file (the second need not exist yet). */
bool mp_cli_same_file(const char *a, const char *b);
/* An output (opt out) that is a file this run reads -- the --model file (or
 * its folder's config.json), the --hw file, or extra (a plan; may be NULL) --
 * is refused: writing it would replace the input. "-" and devices pass. */
mp_status mp_cli_output_not_input(const char *opt, const char *out, const mp_cli_config *cc,
                                  const char *extra, mp_error *err);

/* An input error about a config field, not a file, renamed to the option
 * that sets it ("global_batch" -> "--global-batch"). */
void mp_cli_error_as_option(mp_error *err);

/* An input error blaming the global batch (field global_batch or
 * --global-batch) where the user gave none: the batch is the model's
 * published one or megaplan's default, and the line says so rather than
 * naming an option never given ("--global-batch: 256 is not a multiple of
 * ..." to search --fix micro_batch=3). Other errors are left alone. */
void mp_cli_error_default_batch(const mp_cli_config *cc, mp_error *err);

/* --hsdp on no more GPUs than one scale-up domain of the profile: hybrid
 * sharding replicates across domains, and there is none to replicate over,
 * so it is refused naming --hsdp (--fix with by_fix), as search refuses it;
 * --zero 3 is what it would run. Estimate, simulate (mp_cli_config_check),
 * explain and search share it. After mp_cli_config_finish. */
mp_status mp_cli_check_hsdp_domain(const mp_cli_config *cc, bool by_fix, mp_error *err);

/* mp_config_check with the fields named as the options ("--tp",
 * "--global-batch"), for verbs that cost one given configuration; and
 * mp_cli_check_hsdp_domain. */
mp_status mp_cli_config_check(const mp_cli_config *cc, mp_error *err);

/* The option that sets a config field: "global_batch" -> "--global-batch". */
void mp_cli_option_name(const char *field, char *buf, size_t size);

/* One line per setting that took its default, for the output ("defaults: ..."). */
void mp_cli_config_describe_defaults(const mp_cli_config *cc, char *buf, size_t size);

/* The arguments of the listing verbs (models, hw): [--format table|json|yaml]
 * [NAME]. what names the one thing shown ("model", "profile"). Returns -1
 * with *format and *spec set (NULL when not given), else the exit status
 * (0 after --help, which writes doc; 2 after one error line). */
extern const mp_opt_group mp_cli_listing_opts;
int mp_cli_listing_args(int argc, char **argv, const mp_verb_doc *doc, const char *what,
                        const char **format, const char **spec);

/* The refusal of an argument no table of the verb took: "unknown option
 * (did you mean ...? see megaplan VERB --help)" or "unexpected argument". */
mp_status mp_cli_leftover(const mp_verb_doc *doc, const mp_verb_doc *also, const char *arg,
                          mp_error *err);

/* A result as --format json (pretty, one trailing newline) or yaml. */
void mp_cli_write_data(const cJSON *data, mp_format format, mp_buf *out);

/* Whether --help or -h stands anywhere among the arguments: a verb answers
 * it before parsing anything else, so help works next to bad options too. */
bool mp_cli_wants_help(int argc, char **argv);

/* Prints b to stdout and frees it; "out of memory" and exit status 1 when
 * it could not be built. */
int mp_cli_emit(const char *verb, mp_buf *b);

#endif
