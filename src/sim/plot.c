/* plot.c — gnuplot pictures of a timeline. gnuplot is looked up on PATH at
 * run time; the data and a script go to a private temporary folder, gnuplot
 * writes into a temporary file beside the target, which is renamed into place
 * only when gnuplot succeeded (no half-written picture). Nothing is printed:
 * gnuplot's own output is captured and the failure comes back as an mp_error. */
#include "sim/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/output.h"

extern char **environ;

bool mp_plot_find_gnuplot(char *buf, size_t size)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        return false;
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        if (len > 0 && len + 9 < size) {
            snprintf(buf, size, "%.*s/gnuplot", (int)len, path);
            struct stat st;
            if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
                return true;
        }
        path += len;
        if (*path == ':')
            path++;
    }
    return false;
}

void mp_plot_memory_path(const char *path, char *buf, size_t size)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash))
        snprintf(buf, size, "%s-memory", path);
    else
        snprintf(buf, size, "%.*s-memory%s", (int)(dot - path), path, dot);
}

typedef enum { FMT_SVG, FMT_PNG, FMT_BAD } picture_format;

static picture_format format_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot && !strcasecmp(dot, ".svg"))
        return FMT_SVG;
    if (dot && !strcasecmp(dot, ".png"))
        return FMT_PNG;
    return FMT_BAD;
}

mp_status mp_plot_check_path(const char *path, mp_error *err)
{
    if (format_of(path) == FMT_BAD)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--plot",
                            "the plot file must end in .svg or .png (got '%.200s')", path);
    const char *slash = strrchr(path, '/');
    if (strrchr(path, '.') == (slash ? slash + 1 : path))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--plot",
                            "'%.200s' has no name before its extension: give one (name.svg)",
                            path);
    return MP_OK;
}

/* A path inside a gnuplot single-quoted string: ' doubles. */
static void put_quoted(mp_buf *b, const char *s)
{
    mp_buf_puts(b, "'");
    for (; *s; s++) {
        if (*s == '\'')
            mp_buf_puts(b, "''");
        else
            mp_buf_append(b, s, 1);
    }
    mp_buf_puts(b, "'");
}

/* Titles come from model names: keep plain characters only. */
static void put_title(mp_buf *b, const char *title)
{
    char clean[160];
    size_t n = 0;
    for (const char *s = title ? title : ""; *s && n + 1 < sizeof clean; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  strchr(" .,:=/()+-", c);
        clean[n++] = ok ? c : ' ';
    }
    clean[n] = '\0';
    mp_buf_printf(b, "'%s'", clean);
}

/* Seconds shown in the unit that fits the iteration. */
static void time_unit(double span, double *scale, const char **name)
{
    if (span < 1e-3) {
        *scale = 1e6;
        *name = "us";
    } else if (span < 1.0) {
        *scale = 1e3;
        *name = "ms";
    } else {
        *scale = 1.0;
        *name = "s";
    }
}

/* Colours per op kind (the Megatron papers: forward blue, backward green);
 * each later chunk of an interleaved schedule is a lighter shade of its
 * kind's colour, so every virtual chunk can be told apart (chunks = v). */
static unsigned lighten(unsigned rgb, int chunk, int chunks)
{
    if (chunk <= 0 || chunks <= 1)
        return rgb;
    double t = 0.7 * (double)chunk / (double)(chunks - 1);
    unsigned out = 0;
    for (int shift = 16; shift >= 0; shift -= 8) {
        unsigned c = (rgb >> shift) & 0xffu;
        out |= (unsigned)(c + (255.0 - c) * t + 0.5) << shift;
    }
    return out;
}

static unsigned kind_colour(mp_event_kind k)
{
    switch (k) {
    case MP_EV_F: return 0x3566B8u;
    case MP_EV_B: return 0x4E9A2Fu;
    case MP_EV_W: return 0x1C8C8Au;
    case MP_EV_RECOMPUTE: return 0xE0A030u;
    case MP_EV_OPTIMIZER: return 0x9A9A9Au;
    case MP_EV_DP_COMM: return 0xE07B39u;
    default: return 0xC0C0C0u;
    }
}

static unsigned box_colour(const mp_event *e, int chunks)
{
    if (e->stream == MP_STREAM_DP)
        return kind_colour(MP_EV_DP_COMM);
    unsigned c = kind_colour((mp_event_kind)e->kind);
    bool per_chunk = e->kind == MP_EV_F || e->kind == MP_EV_B || e->kind == MP_EV_W;
    return per_chunk ? lighten(c, e->chunk, chunks) : c;
}

static bool shown_on_pipeline(const mp_event *e)
{
    return e->stream == MP_STREAM_COMPUTE;
}

typedef struct plot_files {
    char dir[64];
    char boxes[96], memory[96], script[96], log[96];
} plot_files;

static mp_status write_text(const char *path, const mp_buf *b, mp_error *err)
{
    if (b->oom)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a plot");
    FILE *f = fopen(path, "w");
    if (!f)
        return mp_error_set(err, MP_EIO, path, 0, 0, NULL, "cannot write: %s", strerror(errno));
    bool ok = fwrite(b->data ? b->data : "", 1, b->len, f) == b->len;
    ok = fclose(f) == 0 && ok;
    if (!ok)
        return mp_error_set(err, MP_EIO, path, 0, 0, NULL, "cannot write: %s", strerror(errno));
    return MP_OK;
}

/* The width of the plot area in pixels, about (the picture is 1400 wide,
 * less the axis labels and the key): an op narrower than span/PLOT_PIXELS
 * cannot be seen apart from its neighbours. */
#define PLOT_PIXELS 1100

static bool shown(const mp_event *e)
{
    return shown_on_pipeline(e) || e->stream == MP_STREAM_DP;
}

static int by_row_then_time(const void *pa, const void *pb)
{
    const mp_event *a = *(const mp_event *const *)pa, *b = *(const mp_event *const *)pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    bool da = a->stream == MP_STREAM_DP, db = b->stream == MP_STREAM_DP;
    if (da != db)
        return da ? 1 : -1;
    return a->start < b->start ? -1 : a->start > b->start ? 1 : 0;
}

/* One drawn box: an op with the ops narrower than a pixel that touch it, or
 * a run of such ops; drawn in the colour (and number) of its longest op. */
typedef struct box {
    const mp_event *first, *longest;
    double start, end;
    int ops;
} box;

typedef struct box_data {
    mp_buf wide, narrow, labels; /* boxes with a border, boxes without, numbers */
    size_t n_wide, n_narrow, n_labels, n_boxes;
} box_data;

static void put_box(const box *bx, double pixel, double scale, bool labels, int chunks,
                    box_data *d)
{
    const mp_event *e = bx->longest;
    bool dp = e->stream == MP_STREAM_DP;
    unsigned fill = box_colour(e, chunks);
    double lo = dp ? e->rank + 0.34 : e->rank - 0.32, hi = dp ? e->rank + 0.46 : e->rank + 0.32;
    /* a border on a box a few pixels wide would hide its colour */
    bool wide = bx->end - bx->start >= 4 * pixel && !dp;
    mp_buf *b = wide ? &d->wide : &d->narrow;
    mp_buf_printf(b, "%.9g %.9g %.3f %.3f %u\n", bx->start * scale, bx->end * scale, lo, hi, fill);
    *(wide ? &d->n_wide : &d->n_narrow) += 1;
    d->n_boxes++;
    if (!labels || dp || (e->microbatch < 0 && e->kind != MP_EV_OPTIMIZER))
        return;
    /* white numbers on dark boxes, black on light ones */
    unsigned luma = ((fill >> 16) * 3 + ((fill >> 8) & 0xff) * 6 + (fill & 0xff)) / 10;
    char label[16];
    if (e->microbatch >= 0)
        snprintf(label, sizeof label, "%d", (int)e->microbatch + 1);
    else
        snprintf(label, sizeof label, "opt");
    mp_buf_printf(&d->labels, "%.9g %.3f \"%s\" %u\n", 0.5 * (e->start + e->end) * scale,
                  0.5 * (lo + hi), label, luma > 150 ? 0x202020u : 0xFFFFFFu);
    d->n_labels++;
}

/* Per rank: the boxes of its compute stream (with the micro-batch numbers)
 * and, in a thin strip under them, its DP gradient reductions. Ops narrower
 * than a pixel are drawn together as one box per run, so a long iteration
 * makes a picture of a few thousand boxes, not one per op. */
static bool pipeline_data(const mp_timeline *t, double span, double scale, bool labels,
                          int chunks, box_data *d)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += shown(&t->events[i]);
    const mp_event **ev = malloc((n ? n : 1) * sizeof *ev);
    if (!ev)
        return false;
    n = 0;
    for (size_t i = 0; i < t->n; i++)
        if (shown(&t->events[i]))
            ev[n++] = &t->events[i];
    qsort(ev, n, sizeof *ev, by_row_then_time);
    double pixel = span / PLOT_PIXELS;
    box cur = {0};
    bool cur_small = false; /* every op of cur is narrower than a pixel */
    for (size_t i = 0; i < n; i++) {
        const mp_event *e = ev[i];
        bool small = e->end - e->start < pixel;
        bool same_row = cur.ops > 0 && e->rank == cur.first->rank &&
                        (e->stream == MP_STREAM_DP) == (cur.first->stream == MP_STREAM_DP);
        /* an op narrower than a pixel joins the box it touches (and a run of
         * them the wider op after it): drawn alone it would be a hairline */
        if (same_row && (small || cur_small) && e->start - cur.end < pixel) {
            if (e->end > cur.end)
                cur.end = e->end;
            if (e->end - e->start > cur.longest->end - cur.longest->start)
                cur.longest = e;
            cur.ops++;
            cur_small = cur_small && small;
            continue;
        }
        if (cur.ops > 0)
            put_box(&cur, pixel, scale, labels, chunks, d);
        cur = (box){.first = e, .longest = e, .start = e->start, .end = e->end, .ops = 1};
        cur_small = small;
    }
    if (cur.ops > 0)
        put_box(&cur, pixel, scale, labels, chunks, d);
    free(ev);
    return true;
}

static void memory_data(const mp_sim_memory_point *mem, size_t n, double scale, double end,
                        mp_buf *b)
{
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && mem[i].rank != mem[i - 1].rank)
            mp_buf_printf(b, "%.9g %.9g\n\n\n", end * scale, mem[i - 1].bytes / 1073741824.0);
        mp_buf_printf(b, "%.9g %.9g\n", mem[i].time * scale, mem[i].bytes / 1073741824.0);
    }
    if (n > 0)
        mp_buf_printf(b, "%.9g %.9g\n", end * scale, mem[n - 1].bytes / 1073741824.0);
}

static void set_terminal(mp_buf *b, picture_format fmt, int width, int height)
{
    if (fmt == FMT_SVG) {
        mp_buf_printf(b, "set terminal svg size %d,%d font 'Helvetica,13' background rgb 'white'\n",
                      width, height);
        return;
    }
    mp_buf_printf(b,
                  "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                  "  set terminal pngcairo size %d,%d font 'Helvetica,11' background rgb 'white'\n"
                  "} else {\n"
                  "  set terminal png size %d,%d background rgb 'white'\n"
                  "}\n",
                  width, height, width, height);
}

typedef struct legend {
    int chunks; /* virtual chunks per rank drawn (1: not interleaved) */
    bool zb, recompute, optimizer, dp;
} legend;

/* Key entries for one op kind: one per chunk when interleaved. */
static void legend_kind(mp_buf *b, mp_event_kind k, const char *name, int chunks)
{
    for (int c = 0; c < chunks; c++) {
        mp_buf_printf(b, ", \\\n  NaN with boxes lc rgb '#%06X' title '%s",
                      lighten(kind_colour(k), c, chunks), name);
        if (chunks > 1)
            mp_buf_printf(b, " chunk %d", c);
        mp_buf_puts(b, "'");
    }
}

static void pipeline_script(mp_buf *b, const plot_files *pf, const box_data *d,
                            picture_format fmt, const char *out, const char *title, int ranks,
                            double span, const char *unit, const legend *lg)
{
    /* the key lists every chunk of every kind: room for it */
    int entries = lg->chunks * (lg->zb ? 3 : 2) + lg->recompute + lg->optimizer + lg->dp;
    int height = 110 + 46 * (ranks < 40 ? ranks : 40);
    if (height < 60 + 20 * entries)
        height = 60 + 20 * entries;
    set_terminal(b, fmt, 1400, height);
    mp_buf_puts(b, "set output ");
    put_quoted(b, out);
    mp_buf_puts(b, "\nset title ");
    put_title(b, title);
    mp_buf_printf(b,
                  "\nset xlabel 'time (%s)'\n"
                  "set xrange [0:%.9g]\n"
                  "set yrange [%d.5:-0.5]\n"
                  "set ytics out nomirror\n"
                  "set xtics out nomirror\n"
                  "set grid xtics lc rgb '#dddddd'\n"
                  "set key outside right top\n"
                  "set style fill solid 1.0 border lc rgb '#303030'\n",
                  unit, span * 1.001, ranks - 1);
    if (ranks <= 32) {
        mp_buf_puts(b, "set ytics (");
        for (int r = 0; r < ranks; r++)
            mp_buf_printf(b, "%s'rank %d' %d", r ? ", " : "", r, r);
        mp_buf_puts(b, ")\n");
    } else {
        mp_buf_puts(b, "set ylabel 'pipeline rank'\n");
    }
    /* index 0: boxes with a border; 1: narrow or aggregated boxes, none;
     * 2: the numbers. An empty block is left out of the plot. */
    mp_buf_puts(b, "plot NaN notitle");
    const char *style[2] = {"fs solid 1.0 border lc rgb '#303030'", "fs solid 1.0 noborder"};
    size_t count[2] = {d->n_wide, d->n_narrow};
    for (int k = 0; k < 2; k++) {
        if (!count[k])
            continue;
        mp_buf_puts(b, ", \\\n  ");
        put_quoted(b, pf->boxes);
        mp_buf_printf(b, " index %d using (($1+$2)/2):(($3+$4)/2):1:2:3:4:5 with boxxyerror "
                         "%s lc rgb variable notitle", k, style[k]);
    }
    if (d->n_labels) {
        mp_buf_puts(b, ", \\\n  ");
        put_quoted(b, pf->boxes);
        mp_buf_puts(b, " index 2 using 1:2:3:4 with labels tc rgb variable font ',10' notitle");
    }
    legend_kind(b, MP_EV_F, "F", lg->chunks);
    legend_kind(b, MP_EV_B, lg->zb ? "B (input grad)" : "B", lg->chunks);
    if (lg->zb)
        legend_kind(b, MP_EV_W, "W (weight grad)", lg->chunks);
    if (lg->recompute)
        mp_buf_puts(b, ", \\\n  NaN with boxes lc rgb '#E0A030' title 'R (recompute)'");
    if (lg->optimizer)
        mp_buf_puts(b, ", \\\n  NaN with boxes lc rgb '#9A9A9A' title 'optimizer'");
    if (lg->dp)
        mp_buf_puts(b, ", \\\n  NaN with boxes lc rgb '#E07B39' title 'DP reduce'");
    mp_buf_puts(b, "\n");
}

static void memory_script(mp_buf *b, const plot_files *pf, picture_format fmt, const char *out,
                          const char *title, int ranks, double span, const char *unit,
                          const mp_plot_options *o)
{
    set_terminal(b, fmt, 1400, 600);
    mp_buf_puts(b, "set output ");
    put_quoted(b, out);
    mp_buf_puts(b, "\nset title ");
    put_title(b, title);
    char ylabel[128];
    if (o->memory_unit)
        snprintf(ylabel, sizeof ylabel, "memory per rank (%s)", o->memory_unit);
    else
        snprintf(ylabel, sizeof ylabel, "memory per GPU (GiB)");
    mp_buf_printf(b, "\nset xlabel 'time (%s)'\nset ylabel ", unit);
    put_title(b, ylabel);
    mp_buf_printf(b,
                  "\nset xrange [0:%.9g]\nset yrange [0:*]\nset grid lc rgb '#dddddd'\n"
                  "set key outside right top\nset style fill empty\n"
                  "set offsets 0, 0, graph 0.06, 0\nplot ",
                  span * 1.001);
    for (int r = 0; r < ranks; r++) {
        if (r)
            mp_buf_puts(b, ", \\\n  ");
        put_quoted(b, pf->memory);
        mp_buf_printf(b, " index %d using 1:2 with steps lw 2 ", r);
        if (ranks <= 16)
            mp_buf_printf(b, "title 'rank %d'", r);
        else
            mp_buf_puts(b, "notitle");
    }
    /* what the GPU has: how close the peak comes to it */
    if (o->capacity_bytes > 0)
        mp_buf_printf(b, ", \\\n  %.9g with lines dt 2 lw 2 lc rgb '#C00000' title "
                         "'GPU memory (%.0f GiB)'",
                      o->capacity_bytes / 1073741824.0, o->capacity_bytes / 1073741824.0);
    mp_buf_puts(b, "\n");
}

/* The last line of gnuplot's output, for the error message. */
static void last_line(const char *path, char *buf, size_t size)
{
    char *text = NULL;
    size_t len = 0;
    buf[0] = '\0';
    if (mp_read_file(path, 1u << 20, &text, &len, NULL) != MP_OK)
        return;
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = '\0';
    char *start = strrchr(text, '\n');
    snprintf(buf, size, "%s", start ? start + 1 : text);
    free(text);
}

static mp_status run_gnuplot(const char *gnuplot, const plot_files *pf, mp_error *err)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, "gnuplot", "cannot start gnuplot");
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, pf->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char *argv[] = {(char *)gnuplot, (char *)pf->script, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, gnuplot, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, "gnuplot", "cannot run %s: %s",
                            gnuplot, strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, "gnuplot", "lost gnuplot: %s",
                                strerror(errno));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char line[256];
        last_line(pf->log, line, sizeof line);
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, "gnuplot", "gnuplot failed: %s",
                            line[0] ? line : "no message");
    }
    return MP_OK;
}

/* Runs script, which draws into tmp; the caller installs tmp. */
static mp_status draw(const char *gnuplot, plot_files *pf, const mp_buf *script,
                      const char *tmp, mp_error *err)
{
    mp_status st = write_text(pf->script, script, err);
    if (st == MP_OK)
        st = run_gnuplot(gnuplot, pf, err);
    if (st == MP_OK) {
        struct stat sb;
        if (stat(tmp, &sb) != 0 || sb.st_size == 0)
            st = mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, "gnuplot", "gnuplot wrote nothing");
    }
    return st;
}

static mp_status write_boxes(const char *path, const box_data *d, mp_error *err)
{
    mp_buf all;
    mp_buf_init(&all);
    const mp_buf *part[3] = {&d->wide, &d->narrow, &d->labels};
    for (int k = 0; k < 3; k++) {
        if (part[k]->data)
            mp_buf_append(&all, part[k]->data, part[k]->len);
        mp_buf_puts(&all, "\n\n"); /* gnuplot's index separator */
    }
    all.oom |= d->wide.oom || d->narrow.oom || d->labels.oom;
    mp_status st = write_text(path, &all, err);
    mp_buf_free(&all);
    return st;
}

static mp_status plot_in(const char *gnuplot, plot_files *pf, const mp_timeline *t,
                         const mp_sim_memory_point *mem, size_t n_mem, const char *path,
                         picture_format fmt, const mp_plot_options *o, mp_error *err)
{
    /* where both pictures go, settled before gnuplot runs */
    mp_output out, out_mem;
    char mem_path[4096];
    mp_plot_memory_path(path, mem_path, sizeof mem_path);
    mp_status st = mp_output_prepare(path, o->force, &out, err);
    if (st == MP_OK && n_mem > 0)
        st = mp_output_prepare(mem_path, o->force, &out_mem, err);
    if (st != MP_OK)
        return st;
    double span = 0;
    int ranks = t->ranks > 0 ? t->ranks : 1;
    legend lg = {.chunks = 1};
    size_t per_rank = 0;
    for (size_t i = 0; i < t->n; i++) {
        const mp_event *e = &t->events[i];
        if (e->end > span)
            span = e->end;
        if (e->stream == MP_STREAM_COMPUTE && e->chunk + 1 > lg.chunks)
            lg.chunks = e->chunk + 1;
        lg.zb |= e->kind == MP_EV_W;
        lg.optimizer |= e->kind == MP_EV_OPTIMIZER;
        lg.recompute |= e->kind == MP_EV_RECOMPUTE;
        lg.dp |= e->stream == MP_STREAM_DP;
        per_rank += e->rank == 0 && shown_on_pipeline(e);
    }
    if (span <= 0)
        span = 1;
    double scale = 1;
    const char *unit = o->time_unit;
    if (!unit)
        time_unit(span, &scale, &unit);
    /* Numbers only where boxes are wide enough to hold them. */
    bool labels = per_rank <= 160;
    box_data d;
    memset(&d, 0, sizeof d);
    mp_buf data, script;
    mp_buf_init(&data);
    mp_buf_init(&script);
    if (!pipeline_data(t, span, scale, labels, lg.chunks, &d))
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a plot");
    if (st == MP_OK)
        st = write_boxes(pf->boxes, &d, err);
    /* Both pictures are drawn into temporary files first and put in place
     * only when both succeeded: a failure leaves neither behind. */
    char tmp[4096 + 16] = "", tmp_mem[4096 + 16] = "", mem_title[256];
    if (st == MP_OK)
        st = mp_output_temp(&out, tmp, sizeof tmp, err);
    if (st == MP_OK) {
        pipeline_script(&script, pf, &d, fmt, tmp, o->title, ranks, span * scale, unit, &lg);
        st = draw(gnuplot, pf, &script, tmp, err);
    }
    if (st == MP_OK && n_mem > 0) {
        mp_buf_free(&script);
        memory_data(mem, n_mem, scale, span, &data);
        st = write_text(pf->memory, &data, err);
        snprintf(mem_title, sizeof mem_title, "%s: memory per rank", o->title ? o->title : "");
        if (st == MP_OK)
            st = mp_output_temp(&out_mem, tmp_mem, sizeof tmp_mem, err);
        if (st == MP_OK) {
            int mem_ranks = mem[n_mem - 1].rank + 1;
            memory_script(&script, pf, fmt, tmp_mem, mem_title, mem_ranks, span * scale, unit, o);
            st = draw(gnuplot, pf, &script, tmp_mem, err);
        }
    }
    if (st == MP_OK) {
        st = mp_output_install(&out, tmp, err);
        tmp[0] = '\0'; /* installed or removed */
    }
    if (st == MP_OK && tmp_mem[0]) {
        st = mp_output_install(&out_mem, tmp_mem, err);
        tmp_mem[0] = '\0';
        if (st != MP_OK && out.kind == MP_OUT_FILE)
            unlink(out.path); /* the pair or nothing */
    }
    if (tmp[0])
        unlink(tmp);
    if (tmp_mem[0])
        unlink(tmp_mem);
    mp_buf_free(&d.wide);
    mp_buf_free(&d.narrow);
    mp_buf_free(&d.labels);
    mp_buf_free(&data);
    mp_buf_free(&script);
    return st;
}

/* A private folder for gnuplot's inputs and log. */
static mp_status plot_files_open(plot_files *pf, mp_error *err)
{
    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || !*tmpdir || strlen(tmpdir) > 20)
        tmpdir = "/tmp";
    snprintf(pf->dir, sizeof pf->dir, "%s/megaplan-plot-XXXXXX", tmpdir);
    if (!mkdtemp(pf->dir))
        return mp_error_set(err, MP_EIO, pf->dir, 0, 0, NULL,
                            "cannot make a temporary folder: %s", strerror(errno));
    snprintf(pf->boxes, sizeof pf->boxes, "%s/boxes.dat", pf->dir);
    snprintf(pf->memory, sizeof pf->memory, "%s/memory.dat", pf->dir);
    snprintf(pf->script, sizeof pf->script, "%s/plot.gp", pf->dir);
    snprintf(pf->log, sizeof pf->log, "%s/gnuplot.log", pf->dir);
    return MP_OK;
}

static void plot_files_close(const plot_files *pf)
{
    unlink(pf->boxes);
    unlink(pf->memory);
    unlink(pf->script);
    unlink(pf->log);
    rmdir(pf->dir);
}

/* The picture's format from path's extension and gnuplot's full path: what
 * every picture needs before it draws anything. */
static mp_status plot_ready(const char *path, picture_format *fmt, char *gnuplot, size_t size,
                            mp_error *err)
{
    *fmt = format_of(path);
    if (mp_plot_check_path(path, err) != MP_OK)
        return MP_EINPUT;
    if (!mp_plot_find_gnuplot(gnuplot, size))
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, "--plot", "%s", MP_PLOT_NO_GNUPLOT);
    return MP_OK;
}

mp_status mp_plot_custom(const char *path, bool force, int width, int height, const mp_buf *data,
                         mp_plot_script_fn script, void *user, mp_error *err)
{
    picture_format fmt;
    char gnuplot[4096];
    mp_status pre = plot_ready(path, &fmt, gnuplot, sizeof gnuplot, err);
    if (pre != MP_OK)
        return pre;
    mp_output out;
    mp_status st = mp_output_prepare(path, force, &out, err);
    if (st != MP_OK)
        return st;
    plot_files pf;
    if ((st = plot_files_open(&pf, err)) != MP_OK)
        return st;
    char tmp[4096 + 16] = "";
    mp_buf b;
    mp_buf_init(&b);
    st = write_text(pf.boxes, data, err);
    if (st == MP_OK)
        st = mp_output_temp(&out, tmp, sizeof tmp, err);
    if (st == MP_OK) {
        set_terminal(&b, fmt, width, height);
        mp_buf_puts(&b, "set output ");
        put_quoted(&b, tmp);
        mp_buf_puts(&b, "\n");
        script(&b, pf.boxes, user);
        st = draw(gnuplot, &pf, &b, tmp, err);
    }
    if (st == MP_OK) {
        st = mp_output_install(&out, tmp, err);
        tmp[0] = '\0';
    }
    if (tmp[0])
        unlink(tmp);
    mp_buf_free(&b);
    plot_files_close(&pf);
    return st;
}

mp_status mp_plot_write(const mp_timeline *t, const mp_sim_memory_point *mem, size_t n_mem,
                        const char *path, const mp_plot_options *o, mp_error *err)
{
    picture_format fmt;
    char gnuplot[4096];
    mp_status pre = plot_ready(path, &fmt, gnuplot, sizeof gnuplot, err);
    if (pre != MP_OK)
        return pre;
    plot_files pf;
    mp_status st = plot_files_open(&pf, err);
    if (st != MP_OK)
        return st;
    st = plot_in(gnuplot, &pf, t, mem, n_mem, path, fmt, o, err);
    plot_files_close(&pf);
    return st;
}
