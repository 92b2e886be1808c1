/* explain.c — `megaplan explain`: why one configuration (the options of
 * estimate) is refused, does not fit, or is slower than the best that search
 * finds, part by part. Exit 0 with the explanation, 2 on bad input. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/search_common.h"
#include "core/buf.h"
#include "planner/explain.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: megaplan explain --model M --gpus N [the options of megaplan estimate]\n"
            "Says why this configuration is refused, does not fit, or is slower than the best\n"
            "one `megaplan search` finds with the same model, GPUs and training settings.\n");
}

int cmd_explain(int argc, char **argv)
{
    mp_cli_config cc;
    mp_error err;
    mp_error_clear(&err);
    if (mp_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    if (mp_cli_config_parse(&argc, argv, &cc, &err) != MP_OK) return mp_cli_fail("explain", &err);
    if (argc > 1) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, argv[1],
                     argv[1][0] == '-' ? "unknown option (see megaplan explain --help)"
                                       : "unexpected argument (see megaplan explain --help)");
        return mp_cli_fail("explain", &err);
    }
    /* a split that does not divide the GPUs is for explain to explain, not
     * for the defaults to refuse: give dp a value so the check names the cause */
    mp_parallel *p = &cc.config.parallel;
    int64_t tpc; /* each degree is at most 2^24: the product of three may overflow */
    bool over = __builtin_mul_overflow(cc.set & MP_SET_TP ? p->tp : 1,
                                       cc.set & MP_SET_PP ? p->pp : 1, &tpc) ||
                __builtin_mul_overflow(tpc, cc.set & MP_SET_CP ? p->cp : 1, &tpc);
    if (!(cc.set & MP_SET_DP) && cc.have_gpus && (over || cc.config.training.gpus % tpc)) {
        tpc = over ? INT64_MAX : tpc;
        p->dp = cc.config.training.gpus / tpc > 0 ? cc.config.training.gpus / tpc : 1;
        cc.set |= MP_SET_DP;
    }
    if (mp_cli_config_finish(&cc, &err) != MP_OK) return mp_cli_fail("explain", &err);
    /* like search, start from the preset's published batch when none is given
     * and this split can run it, so both answers speak of the same batch */
    mp_config *c = &cc.config;
    if (!(cc.set & MP_SET_GLOBAL_BATCH) && cc.published_global_batch > 0 &&
        cc.published_global_batch % (p->micro_batch * p->dp) == 0)
        c->training.global_batch = cc.published_global_batch;
    /* the best over the whole space with the same model, hardware and training */
    mp_search_options opt;
    memset(&opt, 0, sizeof opt);
    opt.base = cc.config;
    opt.top_k = 1;
    mp_buf out;
    mp_buf_init(&out);
    int verdict = 0;
    if (mp_explain(&cc.config, &opt, &out, &verdict, &err) != MP_OK) {
        mp_buf_free(&out);
        return mp_cli_fail("explain", &err);
    }
    return mp_cli_emit("explain", &out);
}
