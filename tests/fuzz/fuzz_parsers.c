/* fuzz_parsers — every corpus file, every built-in profile, and deterministic
 * mutations of them (truncations, byte flips and YAML-significant bytes at
 * every position of small files, at a stride in larger ones) go through the
 * model, hardware, plan and config.json readers. Each call must return MP_OK
 * or MP_EINPUT with a message; what is accepted must survive write -> read
 * (roundtrip.h: a model also inside a plan).
 * Crashes and leaks are the sanitizers' to catch (suite 'fuzz'). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/embedded.h"
#include "core/io.h"
#include "roundtrip.h"

typedef rt_kind kind;
#define K_MODEL RT_MODEL_YAML
#define K_HW RT_HW_YAML
#define K_PLAN RT_PLAN_YAML
#define K_HF RT_HF_JSON

static long runs, accepted, failures;

static void run_one(kind k, const char *text, size_t len, const char *origin, size_t variant)
{
    bool ok_in;
    char why[512];
    runs++;
    if (!rt_check(k, text, len, origin, &ok_in, why, sizeof why)) {
        fprintf(stderr, "FAIL %s (%s, variant %zu)\n", why, origin, variant);
        failures++;
    }
    if (ok_in)
        accepted++;
}

/* YAML and JSON punctuation, control bytes and UTF-8 fragments. */
static const unsigned char specials[] = {':', '[', ']', '{', '}', '-', '"', '\'', '\n', '#',
                                         '&', '*', '!', '|', '>', '\t', '\0', 0xc3, 0xff, '9'};

/* stride: every how many positions a byte is replaced or the text cut
 * (1 = all); larger files get a larger stride so the run stays short. */
static void mutate(kind k, const char *text, size_t len, const char *origin, size_t stride)
{
    run_one(k, text, len, origin, 0);
    if (len > 1500)
        stride = stride > len / 1500 + 1 ? stride : len / 1500 + 1;
    char *buf = malloc(len + 1);
    if (!buf)
        return;
    size_t variant = 1;
    for (size_t cut = 0; cut < len; cut += stride) /* truncations */
        run_one(k, text, cut, origin, variant++);
    for (size_t i = 0; i < len; i += stride) {
        /* one special byte per position, cycling, plus a bit flip */
        memcpy(buf, text, len);
        buf[i] = (char)specials[i % sizeof specials];
        run_one(k, buf, len, origin, variant++);
        buf[i] = (char)(text[i] ^ 0x01);
        run_one(k, buf, len, origin, variant++);
    }
    /* digits grown into absurd numbers */
    for (size_t i = 0; i < len; i += stride) {
        if (text[i] < '0' || text[i] > '9')
            continue;
        char big[4096];
        int n = snprintf(big, sizeof big, "%.*s99999999999999999999%.*s", (int)i, text,
                         (int)(len - i), text + i);
        if (n > 0 && (size_t)n < sizeof big)
            run_one(k, big, (size_t)n, origin, variant++);
    }
    free(buf);
}

static bool starts_with(const char *s, const char *p)
{
    return !strncmp(s, p, strlen(p));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_parsers CORPUS_DIR\n");
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 2;
    }
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        kind k;
        if (starts_with(e->d_name, "model-"))
            k = K_MODEL;
        else if (starts_with(e->d_name, "hw-"))
            k = K_HW;
        else if (starts_with(e->d_name, "plan-"))
            k = K_PLAN;
        else if (starts_with(e->d_name, "hf-"))
            k = K_HF;
        else
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        char *text;
        size_t len;
        mp_error err;
        if (mp_read_file(path, MP_MAX_INPUT_BYTES, &text, &len, &err) != MP_OK) {
            fprintf(stderr, "cannot read %s\n", path);
            closedir(d);
            return 2;
        }
        /* every reader sees every file once, the matching one all mutations */
        for (int other = K_MODEL; other <= K_HF; other++)
            run_one((kind)other, text, len, e->d_name, 0);
        mutate(k, text, len, e->d_name, 1);
        free(text);
        files++;
    }
    closedir(d);
    for (int i = 0; i < mp_hwprofile_count; i++)
        mutate(K_HW, mp_hwprofile_files[i].text, mp_hwprofile_files[i].len,
               mp_hwprofile_files[i].name, 7);
    printf("%d corpus files, %d profiles: %ld parses, %ld accepted, %ld failures\n", files,
           mp_hwprofile_count, runs, accepted, failures);
    if (files < 10 || accepted < 10)
        return 1; /* the corpus went missing: the test would prove nothing */
    return failures ? 1 : 0;
}
