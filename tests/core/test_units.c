/* Units parser: every unit family, bits vs bytes, blanks, and refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/units.h"

static double parse_ok(const char *s, mp_unit_kind k)
{
    double v = -1;
    const char *why = NULL;
    assert_true(mp_units_parse(s, k, &v, &why));
    assert_null(why);
    return v;
}

static void parse_bad(const char *s, mp_unit_kind k)
{
    double v = 12345;
    const char *why = NULL;
    assert_false(mp_units_parse(s, k, &v, &why));
    assert_non_null(why);
    assert_true(v == 12345); /* untouched on failure */
}

static void test_bytes(void **state)
{
    (void)state;
    assert_true(parse_ok("80 GiB", MP_UNIT_BYTES) == 80.0 * 1073741824.0);
    assert_true(parse_ok("80GiB", MP_UNIT_BYTES) == 80.0 * 1073741824.0);
    assert_true(parse_ok("  1.5 TB ", MP_UNIT_BYTES) == 1.5e12);
    assert_true(parse_ok("512 MiB", MP_UNIT_BYTES) == 512.0 * 1048576.0);
    assert_true(parse_ok("4 KiB", MP_UNIT_BYTES) == 4096.0);
    assert_true(parse_ok("4 KB", MP_UNIT_BYTES) == 4000.0);
    assert_true(parse_ok("3e9", MP_UNIT_BYTES) == 3e9); /* plain = bytes */
    assert_true(parse_ok("7 B", MP_UNIT_BYTES) == 7.0);
    parse_bad("80 Gib", MP_UNIT_BYTES);
    parse_bad("80 GB/s", MP_UNIT_BYTES);
    parse_bad("GiB", MP_UNIT_BYTES);
}

static void test_bandwidth(void **state)
{
    (void)state;
    assert_true(parse_ok("450 GB/s", MP_UNIT_BANDWIDTH) == 450e9);
    /* network links in bits: 200 Gb/s HDR = 25 GB/s, 400 Gb/s NDR = 50 GB/s */
    assert_true(parse_ok("200 Gb/s", MP_UNIT_BANDWIDTH) == 25e9);
    assert_true(parse_ok("400 Gb/s", MP_UNIT_BANDWIDTH) == 50e9);
    assert_true(parse_ok("2 TB/s", MP_UNIT_BANDWIDTH) == 2e12);
    assert_true(parse_ok("1 GiB/s", MP_UNIT_BANDWIDTH) == 1073741824.0);
    parse_bad("450 GB", MP_UNIT_BANDWIDTH);
    parse_bad("450 gb/s", MP_UNIT_BANDWIDTH);
}

static void test_flops_time(void **state)
{
    (void)state;
    assert_true(parse_ok("312 TFLOP/s", MP_UNIT_FLOPS) == 312e12);
    assert_true(parse_ok("19.5 TFLOP/s", MP_UNIT_FLOPS) == 19.5e12);
    assert_true(parse_ok("2 PFLOP/s", MP_UNIT_FLOPS) == 2e15);
    assert_true(parse_ok("989 TFLOPS", MP_UNIT_FLOPS) == 989e12);
    assert_true(parse_ok("0", MP_UNIT_FLOPS) == 0.0);
    assert_true(fabs(parse_ok("2 us", MP_UNIT_TIME) - 2e-6) < 1e-21);
    assert_true(fabs(parse_ok("1.5 ms", MP_UNIT_TIME) - 1.5e-3) < 1e-18);
    assert_true(fabs(parse_ok("700 ns", MP_UNIT_TIME) - 700e-9) < 1e-21);
    assert_true(parse_ok("3 s", MP_UNIT_TIME) == 3.0);
    parse_bad("2 min", MP_UNIT_TIME);
    parse_bad("312 TB/s", MP_UNIT_FLOPS);
}

static void test_refusals(void **state)
{
    (void)state;
    parse_bad("", MP_UNIT_NONE);
    parse_bad("   ", MP_UNIT_NONE);
    parse_bad("abc", MP_UNIT_NONE);
    parse_bad("inf", MP_UNIT_NONE);
    parse_bad("nan", MP_UNIT_NONE);
    parse_bad("0x10", MP_UNIT_NONE);
    parse_bad("1e400", MP_UNIT_NONE);          /* overflows to inf */
    parse_bad("1e300 TB", MP_UNIT_BYTES);      /* overflows after scaling */
    parse_bad("0.5 GiB", MP_UNIT_NONE);        /* no unit where none belongs */
    parse_bad("1.2.3", MP_UNIT_NONE);
    parse_bad("--1", MP_UNIT_NONE);
    assert_false(mp_units_parse(NULL, MP_UNIT_NONE, &(double){0}, NULL));
    assert_true(parse_ok("-0.5", MP_UNIT_NONE) == -0.5);
    assert_true(parse_ok("1e-3", MP_UNIT_NONE) == 1e-3);
    assert_true(parse_ok(".5", MP_UNIT_NONE) == 0.5);
}

/* What the writers print reads back as exactly the same number. */
static void test_format_round_trip(void **state)
{
    (void)state;
    const struct {
        double v;
        mp_unit_kind k;
        const char *expect;
    } cases[] = {
        {80.0 * 1073741824.0, MP_UNIT_BYTES, "80 GiB"},
        {3.0 * 1073741824.0, MP_UNIT_BYTES, "3 GiB"},
        {2039e9, MP_UNIT_BANDWIDTH, "2039 GB/s"},
        {25e9, MP_UNIT_BANDWIDTH, "25 GB/s"},
        {312e12, MP_UNIT_FLOPS, "312 TFLOP/s"},
        {19.5e12, MP_UNIT_FLOPS, "19.5 TFLOP/s"},
        {0.0, MP_UNIT_BYTES, "0"},
        {1.0 / 3.0, MP_UNIT_NONE, NULL},
        {12345.678e9, MP_UNIT_BANDWIDTH, NULL},
        {5e-6, MP_UNIT_TIME, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        mp_units_format(cases[i].v, cases[i].k, buf, sizeof buf);
        if (cases[i].expect)
            assert_string_equal(buf, cases[i].expect);
        double back = -1;
        assert_true(mp_units_parse(buf, cases[i].k, &back, NULL));
        assert_true(back == cases[i].v);
    }
    char buf[64];
    /* a unit is one rounding: "60 us" is the double nearest 6e-05, which
     * writes back short (60 * 1e-6 is 5.9999999999999995e-05) */
    assert_true(parse_ok("60 us", MP_UNIT_TIME) == 6e-05);
    assert_true(parse_ok("5 us", MP_UNIT_TIME) == 5e-06);
    assert_true(parse_ok("7e-3 ms", MP_UNIT_TIME) == 7e-06);
    assert_true(parse_ok("0.3 TB/s", MP_UNIT_BANDWIDTH) == 3e11);
    assert_true(parse_ok("200 Gb/s", MP_UNIT_BANDWIDTH) == 25e9);
    mp_format_double(parse_ok("60 us", MP_UNIT_TIME), buf, sizeof buf);
    assert_string_equal(buf, "6e-05");
    mp_units_format(parse_ok("60 us", MP_UNIT_TIME), MP_UNIT_TIME, buf, sizeof buf);
    assert_true(parse_ok(buf, MP_UNIT_TIME) == 6e-05);
    assert_true(strlen(buf) <= 6);
    mp_format_double(0.1, buf, sizeof buf);
    assert_string_equal(buf, "0.1");
    mp_format_double(1.0 / 3.0, buf, sizeof buf);
    assert_true(strtod(buf, NULL) == 1.0 / 3.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),      cmocka_unit_test(test_bandwidth),
        cmocka_unit_test(test_flops_time), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_format_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
