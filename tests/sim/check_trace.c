/* check_trace — validates what `megaplan simulate` writes, by parsing it with
 * cJSON (used by tests/sim/cli_simulate.sh):
 *   check_trace trace FILE RANKS F_EVENTS
 *       Chrome trace JSON: "traceEvents" of complete ("X") and metadata ("M")
 *       events, one process per rank named "rank N", threads named by stream,
 *       ts/dur non-negative, names like "F 3.1", exactly F_EVENTS forwards.
 *   check_trace json FILE RANKS [estimate] [events]
 *       --format json output: a "simulation" object with makespan_s,
 *       bubble_fraction and peak_memory_gib per rank; with "estimate", also
 *       the estimate object's keys (docs/formats.md); with "events", a non-empty
 *       simulation.events (--events), without, none.
 * Exits 0 when valid, 1 with a message otherwise. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "check_trace: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static const char *const streams[] = {"compute", "tp", "cp", "pp-send", "pp-recv", "dp", "ep"};
#define N_STREAMS ((int)(sizeof streams / sizeof streams[0]))

static int check_trace(const cJSON *root, int ranks, int f_events)
{
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    if (!cJSON_IsArray(events))
        return fail("no traceEvents array", NULL);
    bool named_rank[1024] = {false};
    bool named_thread[1024][N_STREAMS];
    bool used_thread[1024][N_STREAMS];
    memset(named_thread, 0, sizeof named_thread);
    memset(used_thread, 0, sizeof used_thread);
    int forwards = 0, complete = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(ph) || !cJSON_IsNumber(pid) || !cJSON_IsNumber(tid) ||
            !cJSON_IsString(name))
            return fail("event without ph/pid/tid/name", cJSON_PrintUnformatted(e));
        int p = pid->valueint, t = tid->valueint;
        if (p < 0 || p >= ranks || t < 0 || t >= N_STREAMS)
            return fail("pid or tid out of range", name->valuestring);
        if (!strcmp(ph->valuestring, "M")) {
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
            const cJSON *an = cJSON_GetObjectItemCaseSensitive(args, "name");
            if (!strcmp(name->valuestring, "process_name")) {
                char want[32];
                snprintf(want, sizeof want, "rank %d", p);
                if (!cJSON_IsString(an) || strcmp(an->valuestring, want))
                    return fail("process not named 'rank N'", NULL);
                named_rank[p] = true;
            } else if (!strcmp(name->valuestring, "thread_name")) {
                if (!cJSON_IsString(an) || strcmp(an->valuestring, streams[t]))
                    return fail("thread not named by its stream", NULL);
                named_thread[p][t] = true;
            }
            continue;
        }
        if (strcmp(ph->valuestring, "X"))
            return fail("event neither X nor M", ph->valuestring);
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        if (!cJSON_IsNumber(ts) || !cJSON_IsNumber(dur) || ts->valuedouble < 0 ||
            dur->valuedouble < 0)
            return fail("bad ts/dur", name->valuestring);
        used_thread[p][t] = true;
        complete++;
        int mb, chunk;
        char tail;
        if (!strncmp(name->valuestring, "F ", 2)) {
            if (sscanf(name->valuestring, "F %d.%d%c", &mb, &chunk, &tail) != 2 || mb < 0 ||
                chunk < 0)
                return fail("forward not named 'F mb.chunk'", name->valuestring);
            if (t != 0)
                return fail("forward off the compute stream", name->valuestring);
            forwards++;
        }
    }
    for (int p = 0; p < ranks; p++) {
        if (!named_rank[p])
            return fail("a rank has no process_name", NULL);
        for (int t = 0; t < N_STREAMS; t++)
            if (used_thread[p][t] && !named_thread[p][t])
                return fail("a stream with events has no thread_name", streams[t]);
    }
    if (forwards != f_events) {
        char d[64];
        snprintf(d, sizeof d, "%d, expected %d", forwards, f_events);
        return fail("wrong number of forward events", d);
    }
    if (complete == 0)
        return fail("no events", NULL);
    return 0;
}

static int check_json(const cJSON *root, int ranks, bool estimate, bool events)
{
    const cJSON *sim = cJSON_GetObjectItemCaseSensitive(root, "simulation");
    if (!cJSON_IsObject(sim))
        return fail("no simulation object", NULL);
    const cJSON *mk = cJSON_GetObjectItemCaseSensitive(sim, "makespan_s");
    if (!cJSON_IsNumber(mk) || !(mk->valuedouble > 0))
        return fail("makespan_s missing or not positive", NULL);
    const char *arrays[] = {"bubble_fraction", "peak_memory_gib"};
    for (int i = 0; i < 2; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(sim, arrays[i]);
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != ranks)
            return fail("per-rank array missing or of the wrong length", arrays[i]);
        const cJSON *x;
        cJSON_ArrayForEach(x, a) {
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || (i == 0 && x->valuedouble >= 1))
                return fail("per-rank value out of range", arrays[i]);
        }
    }
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(sim, "events");
    if (events && (!cJSON_IsArray(ev) || cJSON_GetArraySize(ev) == 0))
        return fail("events missing or empty", NULL);
    if (!events && ev)
        return fail("events without --events", NULL);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(sim, "exposed_s");
    if (!cJSON_IsObject(x))
        return fail("exposed_s missing", NULL);
    double sum = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, x) {
        if (strcmp(part->string, "step"))
            sum += part->valuedouble;
    }
    if (sum < mk->valuedouble * (1 - 1e-9) || sum > mk->valuedouble * (1 + 1e-9))
        return fail("exposed_s parts do not add up to makespan_s", NULL);
    if (estimate) {
        const char *keys[] = {"model", "hw", "gpus", "parallel", "memory_gib", "time_s",
                              "throughput", "fits"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (!cJSON_GetObjectItemCaseSensitive(root, keys[i]))
                return fail("estimate key missing", keys[i]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return fail("usage: check_trace trace FILE RANKS F_EVENTS | json FILE RANKS [estimate] [events]",
                    NULL);
    char *text = slurp(argv[2]);
    if (!text)
        return fail("cannot read", argv[2]);
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root)
        return fail("not valid JSON", argv[2]);
    int ranks = atoi(argv[3]), rc;
    if (ranks < 1 || ranks > 1024)
        rc = fail("bad RANKS", argv[3]);
    else if (!strcmp(argv[1], "trace") && argc == 5)
        rc = check_trace(root, ranks, atoi(argv[4]));
    else if (!strcmp(argv[1], "json"))
    {
        bool estimate = false, events = false;
        for (int i = 4; i < argc; i++) {
            estimate |= !strcmp(argv[i], "estimate");
            events |= !strcmp(argv[i], "events");
        }
        rc = check_json(root, ranks, estimate, events);
    }
    else
        rc = fail("unknown mode", argv[1]);
    cJSON_Delete(root);
    return rc;
}
