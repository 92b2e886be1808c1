/* Every file in examples/ parses: *.yaml as a plan (megaplan_plan) or a
 * model, the .json files of hf/ as HuggingFace configs. What docs/formats.md shows is
 * what the readers take. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/io.h"

static const char *examples = "examples";

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int check_dir(const char *dir, bool hf)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        mp_error err;
        mp_error_clear(&err);
        if (hf && ends_with(e->d_name, ".json")) {
            mp_model m;
            if (mp_model_load(path, &m, &err) != MP_OK)
                fail_msg("%s:%d:%d: %s: %s", err.file, err.line, err.column, err.field, err.msg);
            count++;
            continue;
        }
        if (hf || !ends_with(e->d_name, ".yaml"))
            continue;
        char *text;
        size_t len;
        assert_int_equal(mp_read_file(path, MP_MAX_INPUT_BYTES, &text, &len, &err), MP_OK);
        mp_status st;
        if (strstr(text, "megaplan_plan:")) {
            mp_plan *p = malloc(sizeof *p);
            st = mp_plan_parse_yaml(text, len, path, p, &err);
            free(p);
        } else if (strstr(text, "arch:")) {
            mp_model m;
            st = mp_model_parse_yaml(text, len, path, &m, &err);
        } else {
            mp_hw hw;
            st = mp_hw_parse_yaml(text, len, path, &hw, &err);
        }
        free(text);
        if (st != MP_OK)
            fail_msg("%s:%d:%d: %s: %s", err.file, err.line, err.column, err.field, err.msg);
        count++;
    }
    closedir(d);
    return count;
}

/* The YAML blocks of docs/formats.md whose first line is "# megaplan: KIND". */
static void test_docs(void **state)
{
    (void)state;
    char path[2048];
    snprintf(path, sizeof path, "%s/../docs/formats.md", examples);
    char *text;
    size_t len;
    mp_error err;
    if (mp_read_file(path, 1 << 20, &text, &len, &err) != MP_OK)
        fail_msg("%s: %s", path, err.msg);
    int blocks = 0;
    for (char *p = strstr(text, "```yaml\n# megaplan: "); p; p = strstr(p, "```yaml\n# megaplan: ")) {
        char *body = p + 8;
        char *end = strstr(body, "```");
        assert_non_null(end);
        const char *kind = body + strlen("# megaplan: ");
        size_t n = (size_t)(end - body);
        mp_status st;
        mp_error_clear(&err);
        if (!strncmp(kind, "model", 5)) {
            mp_model m;
            st = mp_model_parse_yaml(body, n, "formats.md", &m, &err);
        } else if (!strncmp(kind, "hw", 2)) {
            mp_hw hw;
            st = mp_hw_parse_yaml(body, n, "formats.md", &hw, &err);
        } else {
            mp_plan *pl = malloc(sizeof *pl);
            st = mp_plan_parse_yaml(body, n, "formats.md", pl, &err);
            free(pl);
        }
        if (st != MP_OK)
            fail_msg("docs block %d: %d:%d %s: %s", blocks + 1, err.line, err.column, err.field,
                     err.msg);
        blocks++;
        p = end;
    }
    free(text);
    assert_true(blocks >= 5);
}

static void test_examples(void **state)
{
    (void)state;
    int n = check_dir(examples, false);
    assert_true(n >= 4);
    char hf[2048];
    snprintf(hf, sizeof hf, "%s/hf", examples);
    assert_true(check_dir(hf, true) >= 4);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        examples = argv[1];
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_examples), cmocka_unit_test(test_docs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
