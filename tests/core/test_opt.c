/* The option-table matcher every verb parses with (src/cli/opt.h): the
 * forms of a value, aliases, flags, and what is not the table's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "cli/opt.h"

enum { O_STEPS, O_MB, O_FORCE, O_OUT };
static const mp_opt rows[] = {
    {"--steps", NULL, "K", O_STEPS, 0, "steps", NULL},
    {"--micro-batches", "--microbatches", "M", O_MB, 0, "micro-batches", NULL},
    {"--force", NULL, NULL, O_FORCE, 0, "force", NULL},
    {"-o", "--output", "FILE", O_OUT, 0, "output", NULL},
};
#define N (sizeof rows / sizeof rows[0])

/* takes argv[i] of a NULL-terminated argv; returns mp_opt_take's answer */
static int take(char **argv, int *i, const mp_opt **o, const char **v, mp_error *err)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    mp_error_clear(err);
    return mp_opt_take(rows, N, argc, argv, i, o, v, err);
}

static void test_forms(void **state)
{
    (void)state;
    const mp_opt *o;
    const char *v;
    mp_error err;
    int i = 1;
    char *a1[] = {"x", "--steps", "3", NULL};
    assert_int_equal(take(a1, &i, &o, &v, &err), 1);
    assert_int_equal(o->id, O_STEPS);
    assert_string_equal(v, "3");
    assert_int_equal(i, 2); /* past the value */

    i = 1;
    char *a2[] = {"x", "--steps=4", NULL};
    assert_int_equal(take(a2, &i, &o, &v, &err), 1);
    assert_string_equal(v, "4");
    assert_int_equal(i, 1);

    /* the old spelling finds the same row, by either form */
    i = 1;
    char *a3[] = {"x", "--microbatches=8", NULL};
    assert_int_equal(take(a3, &i, &o, &v, &err), 1);
    assert_int_equal(o->id, O_MB);
    assert_string_equal(o->name, "--micro-batches");
    assert_string_equal(v, "8");

    i = 1;
    char *a4[] = {"x", "--output", "p.yaml", NULL};
    assert_int_equal(take(a4, &i, &o, &v, &err), 1);
    assert_int_equal(o->id, O_OUT);
    assert_string_equal(v, "p.yaml");

    /* a flag's value is its own name */
    i = 1;
    char *a5[] = {"x", "--force", "plan.yaml", NULL};
    assert_int_equal(take(a5, &i, &o, &v, &err), 1);
    assert_int_equal(o->id, O_FORCE);
    assert_string_equal(v, "--force");
    assert_int_equal(i, 1);
}

static void test_not_ours_and_errors(void **state)
{
    (void)state;
    const mp_opt *o = NULL;
    const char *v = NULL;
    mp_error err;
    int i = 1;
    /* operands, "-", "--", prefixes and other options are the verb's */
    char *names[] = {"plan.yaml", "-", "--", "--step", "--stepsx", "--micro-batch", "-x", NULL};
    for (int k = 0; names[k]; k++) {
        char *a[] = {"x", names[k], NULL};
        i = 1;
        assert_int_equal(take(a, &i, &o, &v, &err), 0);
        assert_int_equal(i, 1);
    }
    char *a1[] = {"x", "--steps", NULL};
    i = 1;
    assert_int_equal(take(a1, &i, &o, &v, &err), -1);
    assert_string_equal(err.field, "--steps");
    assert_string_equal(err.msg, "needs a value");
    char *a2[] = {"x", "--force=yes", NULL};
    i = 1;
    assert_int_equal(take(a2, &i, &o, &v, &err), -1);
    assert_string_equal(err.field, "--force");
    assert_string_equal(err.msg, "takes no value");
}

static void test_unknown_names_the_closest(void **state)
{
    (void)state;
    const mp_opt_group group = MP_OPT_GROUP("options", rows);
    const mp_verb_doc doc = {.name = "exec", .summary = "", .usage = "megaplan exec\n",
                             .groups = (const mp_opt_group *const[]){&group, NULL}};
    char msg[160];
    mp_opt_unknown(&doc, NULL, "--step=3", msg, sizeof msg);
    assert_string_equal(msg, "unknown option (did you mean --steps? see megaplan exec --help)");
    mp_opt_unknown(&doc, NULL, "--frobnicate", msg, sizeof msg);
    assert_string_equal(msg, "unknown option (see megaplan exec --help)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_not_ours_and_errors),
        cmocka_unit_test(test_unknown_names_the_closest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
