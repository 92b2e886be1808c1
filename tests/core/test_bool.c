/* The one yes/no reader (core/fields.h): the words plan, model and profile
 * files used to accept (YAML 1.1's) and the ones --fix used to accept (1/0),
 * and nothing else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/fields.h"
#include "core/io.h"

static void test_words(void **state)
{
    (void)state;
    static const char *const yes[] = {"true", "TRUE", "True", "yes", "Yes", "on", "ON", "1"};
    static const char *const no[] = {"false", "False", "no", "NO", "off", "Off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        bool v = false;
        assert_true(mp_parse_bool_word(yes[i], &v));
        assert_true(v);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        bool v = true;
        assert_true(mp_parse_bool_word(no[i], &v));
        assert_false(v);
    }
    static const char *const bad[] = {"", "2", "-1", "01", "y", "n", "tru", "onn", " on",
                                      "off ", "enabled", "none"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool v = true;
        assert_false(mp_parse_bool_word(bad[i], &v));
        assert_true(v); /* untouched */
    }
}

static mp_status load_model(const char *tied, mp_model *m, mp_error *err)
{
    char text[512];
    snprintf(text, sizeof text,
             "name: m\narch: gpt\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 32\n"
             "tied_embeddings: %s\n", tied);
    mp_error_clear(err);
    return mp_model_parse_yaml(text, strlen(text), "m.yaml", m, err);
}

/* a file reads every word, and refuses any other with one line naming
 * file, line and field */
static void test_in_a_file(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load_model("yes", &m, &err), MP_OK);
    assert_true(m.tied_embeddings);
    assert_int_equal(load_model("0", &m, &err), MP_OK);
    assert_false(m.tied_embeddings);
    assert_int_equal(load_model("On", &m, &err), MP_OK);
    assert_true(m.tied_embeddings);
    assert_int_equal(load_model("maybe", &m, &err), MP_EINPUT);
    assert_string_equal(err.file, "m.yaml");
    assert_int_equal(err.line, 8);
    assert_string_equal(err.field, "tied_embeddings");
    assert_non_null(strstr(err.msg, "expected true or false, got 'maybe'"));
    assert_null(strchr(err.msg, '\n'));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_in_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
