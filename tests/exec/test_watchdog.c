/* test_watchdog.c — the watchdog's deadline loop on its own (no MPI): a wait
 * that never ends returns an error naming what it waited for once the
 * timeout has passed, and not much later; one that ends returns at once; a
 * poll's own error passes through; no timeout means no deadline. This is the
 * part a CUDA backend reuses with its own poll function (watchdog.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "exec/watchdog.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct counter {
    long polls, done_after; /* done_after < 0: never */
} counter;

static int poll_counter(void *ctx, mp_error *err)
{
    counter *c = ctx;
    c->polls++;
    if (c->done_after == -2) {
        mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "the stream failed");
        return -1;
    }
    return c->done_after >= 0 && c->polls > c->done_after;
}

static void describe(void *ctx, char *buf, size_t size)
{
    (void)ctx;
    snprintf(buf, size, "a test wait on rank 7");
}

static void never_done_times_out(void **state)
{
    (void)state;
    counter c = {0, -1};
    mp_error err;
    mp_error_clear(&err);
    mp_watch_set_timeout(0.3);
    double t = now();
    mp_status st = mp_watch_poll(poll_counter, describe, &c, &err);
    double took = now() - t;
    assert_int_equal(st, MP_ERUNTIME);
    assert_true(took >= 0.3);
    assert_true(took < 1.5); /* the sleeps stay short: at most 1% of the wait, 1 ms */
    assert_non_null(strstr(err.msg, "a test wait on rank 7 waited"));
    assert_non_null(strstr(err.msg, "longer than the timeout of 0.3 s"));
    mp_watch_set_timeout(0);
}

static void done_returns_ok(void **state)
{
    (void)state;
    counter c = {0, 1000};
    mp_error err;
    mp_error_clear(&err);
    mp_watch_set_timeout(5);
    assert_int_equal(mp_watch_poll(poll_counter, describe, &c, &err), MP_OK);
    assert_int_equal(c.polls, 1001);
    mp_watch_set_timeout(0);
}

static void poll_error_passes_through(void **state)
{
    (void)state;
    counter c = {0, -2};
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_watch_poll(poll_counter, describe, &c, &err), MP_ERUNTIME);
    assert_string_equal(err.msg, "the stream failed");
}

static void no_timeout_waits_on(void **state)
{
    (void)state;
    counter c = {0, 1500}; /* past the spinning and yielding, into the sleeps */
    mp_error err;
    mp_error_clear(&err);
    mp_watch_set_timeout(0);
    assert_int_equal(mp_watch_timeout(), 0);
    assert_int_equal(mp_watch_poll(poll_counter, describe, &c, &err), MP_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(never_done_times_out),
        cmocka_unit_test(done_returns_ok),
        cmocka_unit_test(poll_error_passes_through),
        cmocka_unit_test(no_timeout_waits_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
