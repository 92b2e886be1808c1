/* The shared options: parsing, refusals naming the option, and the
 * Megatron-LM defaults with their description. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "cli/options.h"

#define ARGS(...) ((char *[]){"estimate", __VA_ARGS__, NULL})
#define NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)

static void test_parse_and_defaults(void **state)
{
    (void)state;
    char *argv[] = {"estimate", "--model", "175B",   "--gpus=1024", "--tp", "8",
                    "--pp",     "8",       "--sp",   "--keep-me",   "pos",  "--hw-set",
                    "scale_out.bw_per_gpu=400 Gb/s", "--format", "json", NULL};
    int argc = 15;
    mp_cli_config cc;
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_cli_config_parse(&argc, argv, &cc, &err), MP_OK);
    /* the verb's own arguments stay, in order */
    assert_int_equal(argc, 3);
    assert_string_equal(argv[1], "--keep-me");
    assert_string_equal(argv[2], "pos");
    assert_null(argv[3]);
    assert_true(cc.have_model && cc.have_gpus);
    assert_int_equal(cc.format, MP_FORMAT_JSON);
    assert_true(cc.set & MP_SET_TP);
    assert_false(cc.set & MP_SET_DP);
    assert_int_equal(mp_cli_config_finish(&cc, &err), MP_OK);
    const mp_config *c = &cc.config;
    assert_string_equal(c->model.name, "gpt3-175b");
    assert_string_equal(c->hw.name, "dgx-a100");
    assert_true(c->hw.scale_out.bw_per_gpu == 50e9);
    assert_int_equal(c->parallel.dp, 16);
    assert_int_equal(c->parallel.vpp, 1);
    assert_int_equal(c->parallel.micro_batch, 1);
    assert_int_equal(c->parallel.schedule, MP_SCHED_1F1B);
    assert_int_equal(c->training.seq, 2048);
    assert_int_equal(c->training.global_batch, 1536); /* the published batch */
    assert_int_equal(c->training.precision, MP_DTYPE_BF16);
    assert_int_equal(cc.published_global_batch, 1536);
    assert_int_equal(mp_cli_config_check(&cc, &err), MP_OK);
    char buf[2048];
    mp_cli_config_describe_defaults(&cc, buf, sizeof buf);
    assert_non_null(strstr(buf, "dp=16"));
    assert_non_null(strstr(buf, "global_batch=1536 (gpt3-175b's published batch)"));
    assert_non_null(strstr(buf, "hw=dgx-a100"));
    assert_null(strstr(buf, "tp="));
    assert_null(strstr(buf, "sp="));
    /* a tiny buffer is cut, not overrun */
    char small[16];
    mp_cli_config_describe_defaults(&cc, small, sizeof small);
    assert_true(strlen(small) < sizeof small);
}

static void test_batch_rounding(void **state)
{
    (void)state;
    char **argv = ARGS("--model", "175B", "--gpus", "1024");
    int argc = NARGS(ARGS("--model", "175B", "--gpus", "1024"));
    mp_cli_config cc;
    mp_error err;
    assert_int_equal(mp_cli_config_parse(&argc, argv, &cc, &err), MP_OK);
    assert_int_equal(mp_cli_config_finish(&cc, &err), MP_OK);
    /* dp = 1024: 1536 rounds up to 2048 so the default split can run */
    assert_int_equal(cc.config.parallel.dp, 1024);
    assert_int_equal(cc.config.training.global_batch, 2048);
    assert_int_equal(cc.published_global_batch, 1536);
    char buf[2048];
    mp_cli_config_describe_defaults(&cc, buf, sizeof buf);
    assert_non_null(strstr(buf, "rounded up"));

    char **argv2 = ARGS("--model", "llama2-7b", "--gpus", "8", "--tp", "2", "--pp", "2", "--vpp",
                        "2", "--dist-opt");
    argc = NARGS(ARGS("--model", "llama2-7b", "--gpus", "8", "--tp", "2", "--pp", "2", "--vpp",
                      "2", "--dist-opt"));
    assert_int_equal(mp_cli_config_parse(&argc, argv2, &cc, &err), MP_OK);
    assert_int_equal(mp_cli_config_finish(&cc, &err), MP_OK);
    assert_int_equal(cc.config.parallel.schedule, MP_SCHED_INTERLEAVED);
    assert_true(cc.config.parallel.dp_overlap); /* on with dist-opt */
    assert_int_equal(cc.config.training.global_batch, 1024);
    assert_int_equal(mp_cli_config_check(&cc, &err), MP_OK);

    /* a model without a published batch: 512 sequences */
    char **argv3 = ARGS("--model", "t5-11b", "--gpus", "24");
    argc = NARGS(ARGS("--model", "t5-11b", "--gpus", "24"));
    assert_int_equal(mp_cli_config_parse(&argc, argv3, &cc, &err), MP_OK);
    assert_int_equal(mp_cli_config_finish(&cc, &err), MP_OK);
    assert_int_equal(cc.config.training.global_batch, 144); /* 128 rounded to 24*6 */
}

static void expect_refusal(char **argv, int argc, bool at_finish, const char *field,
                           const char *part)
{
    mp_cli_config cc;
    mp_error err;
    mp_error_clear(&err);
    mp_status st = mp_cli_config_parse(&argc, argv, &cc, &err);
    if (at_finish) {
        assert_int_equal(st, MP_OK);
        st = mp_cli_config_finish(&cc, &err);
        if (st == MP_OK)
            st = mp_cli_config_check(&cc, &err);
    }
    if (st != MP_EINPUT)
        fail_msg("accepted; expected %s", field);
    if (strcmp(err.field, field) || !strstr(err.msg, part))
        fail_msg("got '%s: %s', expected '%s: ...%s...'", err.field, err.msg, field, part);
}

#define REFUSE(at_finish, field, part, ...)                                                  \
    expect_refusal(ARGS(__VA_ARGS__), NARGS(ARGS(__VA_ARGS__)), at_finish, field, part)

static void test_refusals(void **state)
{
    (void)state;
    REFUSE(false, "--tp", "at least 1", "--tp", "0");
    REFUSE(false, "--tp", "at least 1", "--tp", "-2");
    REFUSE(false, "--tp", "whole number", "--tp", "two");
    REFUSE(false, "--tp", "whole number", "--tp", "2.5");
    REFUSE(false, "--gpus", "overflows", "--gpus", "99999999999999999999999");
    REFUSE(false, "--gpus", "absurdly large", "--gpus", "1000000000000");
    REFUSE(false, "--tp", "needs a value", "--tp");
    REFUSE(false, "--sp", "takes no value", "--sp=yes");
    REFUSE(false, "--recompute", "none, selective or full", "--recompute", "some");
    REFUSE(false, "--schedule", "interleaved-1f1b", "--schedule", "2f2b");
    REFUSE(false, "--precision", "bf16", "--precision", "fp4");
    REFUSE(false, "--precision", "fp8", "--precision", "tf32");
    REFUSE(false, "--fp8-recipe", "delayed, tensorwise", "--fp8-recipe", "e4m3");
    REFUSE(true, "--fp8-recipe", "--precision fp8 only", "--model", "gpt3-1.3b", "--gpus", "8",
           "--fp8-recipe", "blockwise");
    REFUSE(false, "--moe-imbalance", ">= 1", "--moe-imbalance", "0.9");
    REFUSE(false, "--moe-imbalance", ">= 1", "--moe-imbalance", "lots");
    REFUSE(true, "--moe-imbalance", "no experts", "--model", "gpt3-1.3b", "--gpus", "8",
           "--moe-imbalance", "1.2");
    REFUSE(false, "--format", "table", "--format", "xml");
    REFUSE(false, "--dp-overlap", "on or off", "--dp-overlap", "maybe");
    REFUSE(false, "--hw-set", "KEY=VALUE", "--hw-set", "memory");
    REFUSE(false, "--tokens", "token count", "--tokens", "lots");
    REFUSE(true, "--model", "required", "--gpus", "8");
    REFUSE(true, "--gpus", "required", "--model", "175B");
    REFUSE(true, "--model", "unknown model", "--model", "176B", "--gpus", "8");
    REFUSE(true, "--hw", "unknown hardware", "--model", "175B", "--gpus", "8", "--hw", "tpu");
    REFUSE(true, "--hw-set memory", "expected a size", "--model", "175B", "--gpus", "8",
           "--hw-set", "memory=lots");
    REFUSE(true, "--hw-set runtime_reserve", "less than memory", "--model", "175B", "--gpus",
           "8", "--hw-set", "runtime_reserve=100 GiB");
    REFUSE(true, "--hw-set nope", "unknown field", "--model", "175B", "--gpus", "8", "--hw-set",
           "nope=1");
    REFUSE(true, "--gpus", "not a multiple of tp*pp*cp", "--model", "175B", "--gpus", "100",
           "--tp", "8");
    REFUSE(true, "--tp", "does not divide the 96 attention heads", "--model", "175B", "--gpus",
           "70", "--tp", "7");
    REFUSE(true, "--global-batch", "multiple of micro_batch*dp", "--model", "175B", "--gpus",
           "64", "--global-batch", "100");
    REFUSE(true, "--dp", "but there are 64 GPUs", "--model", "175B", "--gpus", "64", "--dp",
           "4");
    REFUSE(true, "--pp", "cannot be split", "--model", "175B", "--gpus", "128", "--pp", "128");
    REFUSE(true, "--sp", "tp > 1", "--model", "175B", "--gpus", "8", "--sp");
}

static void test_tokens_and_flags(void **state)
{
    (void)state;
    char **argv = ARGS("--model", "gpt3-125m", "--gpus", "8", "--tokens", "300B", "--no-sp",
                       "--dp-overlap=on", "--tp-overlap", "off", "--", "--tp", "3");
    int argc = NARGS(ARGS("--model", "gpt3-125m", "--gpus", "8", "--tokens", "300B", "--no-sp",
                          "--dp-overlap=on", "--tp-overlap", "off", "--", "--tp", "3"));
    mp_cli_config cc;
    mp_error err;
    assert_int_equal(mp_cli_config_parse(&argc, argv, &cc, &err), MP_OK);
    assert_true(cc.config.training.tokens == 300e9);
    assert_true(cc.config.parallel.dp_overlap);
    assert_false(cc.config.parallel.tp_overlap);
    assert_true(cc.set & MP_SET_SP);
    /* after "--" nothing is parsed */
    assert_false(cc.set & MP_SET_TP);
    assert_int_equal(argc, 4);
    assert_string_equal(argv[1], "--");
    assert_string_equal(argv[2], "--tp");

    /* --precision fp8 with a recipe; --moe-imbalance lands in the model */
    char **a2 = ARGS("--model", "mixtral-8x7b", "--gpus", "64", "--hw", "dgx-h100",
                     "--precision", "fp8", "--fp8-recipe", "tensorwise", "--moe-imbalance", "1.3");
    int n2 = NARGS(ARGS("--model", "mixtral-8x7b", "--gpus", "64", "--hw", "dgx-h100",
                        "--precision", "fp8", "--fp8-recipe", "tensorwise", "--moe-imbalance",
                        "1.3"));
    assert_int_equal(mp_cli_config_parse(&n2, a2, &cc, &err), MP_OK);
    assert_int_equal(mp_cli_config_finish(&cc, &err), MP_OK);
    assert_int_equal(cc.config.training.precision, MP_DTYPE_FP8);
    assert_int_equal(cc.config.training.fp8_recipe, MP_FP8_TENSORWISE);
    assert_true(cc.config.model.moe.imbalance == 1.3);
}

/* Every option with every kind of value, both spellings, then finished and
 * checked: each step succeeds or refuses naming an option; nothing crashes
 * (this runs under the sanitizers too). */
static void test_every_option_value(void **state)
{
    (void)state;
    static const char *const opts[] = {
        "--model", "--gpus", "--hw", "--hw-set", "--seq", "--global-batch", "--precision",
        "--tokens", "--tp", "--sp", "--no-sp", "--pp", "--vpp", "--cp", "--dp", "--micro-batch",
        "--recompute", "--dist-opt", "--no-dist-opt", "--dp-overlap", "--tp-overlap",
        "--p2p-overlap", "--nccl-ub", "--schedule", "--format", "--fp8-recipe", "--fp8-param-gather", "--grad-reduce-bf16", "--te-cross-entropy", "--native-cross-entropy",
        "--moe-imbalance"};
    static const char *const values[] = {
        "", "0", "-1", "1", "2", "8", "abc", "1e3", "99999999999999999999", "on", "off", "x=y",
        "memory=1 GiB", "gemm_efficiency=[[1e9,0.5]]", "=", "bf16", "fp8", "full", "zb-h1",
        "interleaved-1f1b", "json", "175B", "t5-11b", "dgx-h100", "300B", "1.5T", "-", "--tp",
        "mxfp8", "blockwise", "1.25", "nan", "inf"};
    int ok = 0, refused = 0;
    for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            for (int form = 0; form < 2; form++) {
                char joined[128];
                snprintf(joined, sizeof joined, "%s=%s", opts[o], values[v]);
                char *argv[12];
                int argc = 0;
                argv[argc++] = "estimate";
                argv[argc++] = "--model";
                argv[argc++] = "gpt3-125m";
                argv[argc++] = "--gpus";
                argv[argc++] = "8";
                if (form == 0) {
                    argv[argc++] = joined;
                } else {
                    argv[argc++] = (char *)opts[o];
                    argv[argc++] = (char *)values[v];
                }
                argv[argc] = NULL;
                mp_cli_config cc;
                mp_error err;
                mp_error_clear(&err);
                mp_status st = mp_cli_config_parse(&argc, argv, &cc, &err);
                if (st == MP_OK)
                    st = mp_cli_config_finish(&cc, &err);
                if (st == MP_OK)
                    st = mp_cli_config_check(&cc, &err);
                if (st == MP_OK) {
                    ok++;
                    char buf[2048];
                    mp_cli_config_describe_defaults(&cc, buf, sizeof buf);
                    continue;
                }
                refused++;
                if (st != MP_EINPUT && st != MP_EIO)
                    fail_msg("%s %s: status %d", opts[o], values[v], st);
                if (!err.msg[0] || strchr(err.msg, '\n'))
                    fail_msg("%s %s: bad message '%s'", opts[o], values[v], err.msg);
                if (!err.file[0] && strncmp(err.field, "--", 2))
                    fail_msg("%s %s: field '%s' is not an option", opts[o], values[v], err.field);
            }
        }
    }
    assert_true(ok > 50);
    assert_true(refused > 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_defaults),
        cmocka_unit_test(test_batch_rounding),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_tokens_and_flags),
        cmocka_unit_test(test_every_option_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
