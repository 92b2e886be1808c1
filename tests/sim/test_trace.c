/* The timeline and its trace writer: labels, growth, Chrome trace JSON read
 * back with cJSON, atomic write and its failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "core/buf.h"
#include "sim/timeline.h"

static void test_labels_and_names(void **state)
{
    (void)state;
    char buf[64];
    mp_event e = {.kind = MP_EV_F, .microbatch = 3, .chunk = 1};
    mp_event_label(&e, buf, sizeof buf);
    assert_string_equal(buf, "F 3.1");
    e = (mp_event){.kind = MP_EV_SEND_BWD, .microbatch = 12, .chunk = 0};
    mp_event_label(&e, buf, sizeof buf);
    assert_string_equal(buf, "send-bwd 12.0");
    e = (mp_event){.kind = MP_EV_DP_COMM, .microbatch = -1, .chunk = 2};
    mp_event_label(&e, buf, sizeof buf);
    assert_string_equal(buf, "dp chunk 2");
    e = (mp_event){.kind = MP_EV_OPTIMIZER, .microbatch = -1, .chunk = -1};
    mp_event_label(&e, buf, sizeof buf);
    assert_string_equal(buf, "optimizer");
    mp_event_label(&e, buf, 4); /* truncated, still terminated */
    assert_string_equal(buf, "opt");
    assert_string_equal(mp_stream_name(MP_STREAM_PP_RECV), "pp-recv");
    assert_string_equal(mp_stream_name(MP_STREAM_COUNT), "?");
    assert_string_equal(mp_event_kind_name(MP_EV_W), "W");
    assert_string_equal(mp_event_kind_name(MP_EV_KIND_COUNT), "?");
}

static void test_growth_and_ranks(void **state)
{
    (void)state;
    mp_timeline t;
    mp_timeline_init(&t, 2, "measured");
    assert_string_equal(t.source, "measured");
    for (int i = 0; i < 5000; i++) {
        mp_event e = {.start = i, .end = i + 0.5, .rank = i % 3, .kind = MP_EV_B,
                      .microbatch = i, .chunk = 0};
        assert_int_equal(mp_timeline_add(&t, &e, NULL), MP_OK);
    }
    assert_int_equal(t.n, 5000);
    assert_int_equal(t.ranks, 3); /* grows to cover the events' ranks */
    assert_true(t.events[4999].microbatch == 4999);
    mp_timeline_free(&t);
    assert_null(t.events);
}

static void test_trace_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/mp-trace-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/t.json", dir);
    mp_timeline t;
    mp_timeline_init(&t, 2, "simulated");
    mp_event evs[] = {
        {.start = 0, .end = 0.001, .rank = 0, .stream = MP_STREAM_COMPUTE, .kind = MP_EV_F,
         .microbatch = 0, .chunk = 0},
        {.start = 0.001, .end = 0.0015, .rank = 0, .stream = MP_STREAM_PP_SEND,
         .kind = MP_EV_SEND_FWD, .microbatch = 0, .chunk = 0},
        {.start = 0.0015, .end = 0.0025, .rank = 1, .stream = MP_STREAM_COMPUTE, .kind = MP_EV_F,
         .microbatch = 0, .chunk = 0},
        {.start = 0.003, .end = 0.004, .rank = 1, .stream = MP_STREAM_DP, .kind = MP_EV_DP_COMM,
         .microbatch = -1, .chunk = 0},
    };
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(mp_timeline_add(&t, &evs[i], NULL), MP_OK);
    mp_error err;
    assert_int_equal(mp_trace_write(&t, path, false, &err), MP_OK);
    char *text;
    size_t len;
    assert_int_equal(mp_read_file(path, 1 << 20, &text, &len, &err), MP_OK);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    const cJSON *src = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "otherData"), "source");
    assert_string_equal(src->valuestring, "simulated");
    const cJSON *events = cJSON_GetObjectItem(root, "traceEvents");
    assert_true(cJSON_IsArray(events));
    int x = 0, procs = 0, threads = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        if (!strcmp(ph, "X")) {
            const cJSON *ts = cJSON_GetObjectItem(e, "ts"), *dur = cJSON_GetObjectItem(e, "dur");
            if (x == 0) {
                assert_string_equal(name, "F 0.0");
                assert_true(ts->valuedouble == 0 && dur->valuedouble == 1000); /* us */
            }
            if (x == 3) {
                assert_string_equal(name, "dp chunk 0");
                assert_int_equal(cJSON_GetObjectItem(e, "pid")->valueint, 1);
                assert_int_equal(cJSON_GetObjectItem(e, "tid")->valueint, MP_STREAM_DP);
            }
            x++;
        } else if (!strcmp(name, "process_name")) {
            procs++;
        } else if (!strcmp(name, "thread_name")) {
            threads++;
        }
    }
    assert_int_equal(x, 4);
    assert_int_equal(procs, 2);
    assert_int_equal(threads, 2 * MP_STREAM_COUNT);
    cJSON_Delete(root);
    /* an unwritable path: MP_EIO, nothing left behind */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/missing/t.json", dir);
    assert_int_equal(mp_trace_write(&t, bad, false, &err), MP_EIO);
    mp_timeline_free(&t);
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* empty: no temporary file left */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_and_names),
        cmocka_unit_test(test_growth_and_ranks),
        cmocka_unit_test(test_trace_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
