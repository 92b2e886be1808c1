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
 * later chunks of an interleaved schedule are a lighter shade. */
static unsigned box_colour(const mp_event *e)
{
    bool light = e->chunk > 0 && (e->chunk % 2) == 1;
    switch ((mp_event_kind)e->kind) {
    case MP_EV_F: return light ? 0x9DB9E8u : 0x3566B8u;
    case MP_EV_B: return light ? 0xA9D18Eu : 0x4E9A2Fu;
    case MP_EV_W: return light ? 0x8FD6D3u : 0x1C8C8Au;
    case MP_EV_RECOMPUTE: return 0xE0A030u;
    case MP_EV_OPTIMIZER: return 0x9A9A9Au;
    default: return 0xC0C0C0u;
    }
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

/* Per rank: the boxes of its compute stream (with the micro-batch numbers)
 * and, in a thin strip under them, its DP gradient reductions. */
static void pipeline_data(const mp_timeline *t, double scale, bool labels, mp_buf *b)
{
    for (size_t i = 0; i < t->n; i++) {
        const mp_event *e = &t->events[i];
        bool dp = e->stream == MP_STREAM_DP;
        if (!shown_on_pipeline(e) && !dp)
            continue;
        char label[16];
        if (!labels || dp)
            snprintf(label, sizeof label, "\"\"");
        else if (e->microbatch >= 0)
            snprintf(label, sizeof label, "\"%d\"", (int)e->microbatch + 1);
        else
            snprintf(label, sizeof label, "\"%s\"", e->kind == MP_EV_OPTIMIZER ? "opt" : "");
        unsigned fill = dp ? 0xE07B39u : box_colour(e);
        /* white numbers on dark boxes, black on light ones */
        unsigned luma = ((fill >> 16) * 3 + ((fill >> 8) & 0xff) * 6 + (fill & 0xff)) / 10;
        double lo = dp ? e->rank + 0.34 : e->rank - 0.32, hi = dp ? e->rank + 0.46 : e->rank + 0.32;
        mp_buf_printf(b, "%.9g %.9g %.3f %.3f %u %s %u\n", e->start * scale, e->end * scale, lo,
                      hi, fill, label, luma > 150 ? 0x202020u : 0xFFFFFFu);
    }
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
    bool interleaved, zb, recompute, optimizer, dp;
} legend;

static void pipeline_script(mp_buf *b, const plot_files *pf, picture_format fmt,
                            const char *out, const char *title, int ranks, double span,
                            const char *unit, const legend *lg)
{
    int height = 110 + 46 * (ranks < 40 ? ranks : 40);
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
    mp_buf_puts(b, "plot ");
    put_quoted(b, pf->boxes);
    mp_buf_puts(b, " using (($1+$2)/2):(($3+$4)/2):1:2:3:4:5 with boxxyerror "
                   "lc rgb variable notitle, \\\n  '' using (($1+$2)/2):(($3+$4)/2):6:7 with labels "
                   "tc rgb variable font ',10' notitle");
    bool interleaved = lg->interleaved, zb = lg->zb;
    mp_buf_printf(b, ", \\\n  NaN with boxes lc rgb '#3566B8' title 'F%s'", interleaved ? " chunk 0" : "");
    if (interleaved)
        mp_buf_puts(b, ", \\\n  NaN with boxes lc rgb '#9DB9E8' title 'F chunk 1'");
    mp_buf_printf(b, ", \\\n  NaN with boxes lc rgb '#4E9A2F' title '%s%s'",
                  zb ? "B (input grad)" : "B", interleaved ? " chunk 0" : "");
    if (interleaved)
        mp_buf_puts(b, ", \\\n  NaN with boxes lc rgb '#A9D18E' title 'B chunk 1'");
    if (zb)
        mp_buf_puts(b, ", \\\n  NaN with boxes lc rgb '#1C8C8A' title 'W (weight grad)'");
    if (lg->recompute)
        mp_buf_puts(b, ", \\\n  NaN with boxes lc rgb '#E0A030' title 'R (recompute)'");
    if (lg->optimizer)
        mp_buf_puts(b, ", \\\n  NaN with boxes lc rgb '#9A9A9A' title 'optimizer'");
    if (lg->dp)
        mp_buf_puts(b, ", \\\n  NaN with boxes lc rgb '#E07B39' title 'DP reduce'");
    mp_buf_puts(b, "\n");
}

static void memory_script(mp_buf *b, const plot_files *pf, picture_format fmt, const char *out,
                          const char *title, int ranks, double span, const char *unit)
{
    set_terminal(b, fmt, 1400, 600);
    mp_buf_puts(b, "set output ");
    put_quoted(b, out);
    mp_buf_puts(b, "\nset title ");
    put_title(b, title);
    mp_buf_printf(b,
                  "\nset xlabel 'time (%s)'\nset ylabel 'memory per GPU (GiB)'\n"
                  "set xrange [0:%.9g]\nset yrange [0:*]\nset grid lc rgb '#dddddd'\n"
                  "set key outside right top\nset style fill empty\nplot ",
                  unit, span * 1.001);
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

/* A temporary file beside target (same folder, so rename is atomic). */
static mp_status temp_beside(const char *target, char *buf, size_t size, mp_error *err)
{
    int n = snprintf(buf, size, "%s.tmp.XXXXXX", target);
    if (n < 0 || (size_t)n >= size) {
        buf[0] = '\0';
        return mp_error_set(err, MP_EINPUT, target, 0, 0, NULL, "path too long");
    }
    int fd = mkstemp(buf);
    if (fd < 0) {
        int e = errno;
        buf[0] = '\0'; /* nothing made: nothing for the caller to remove */
        return mp_error_set(err, MP_EIO, target, 0, 0, NULL, "cannot write: %s", strerror(e));
    }
    /* mkstemp makes it private; a picture gets the usual permissions. */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    close(fd);
    return MP_OK;
}

/* Runs script, which draws into tmp; the caller renames tmp into place. */
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

static mp_status plot_in(const char *gnuplot, plot_files *pf, const mp_timeline *t,
                         const mp_sim_memory_point *mem, size_t n_mem, const char *title,
                         const char *units, const char *path, picture_format fmt, mp_error *err)
{
    double span = 0;
    int ranks = t->ranks > 0 ? t->ranks : 1;
    legend lg = {0};
    size_t per_rank = 0;
    for (size_t i = 0; i < t->n; i++) {
        const mp_event *e = &t->events[i];
        if (e->end > span)
            span = e->end;
        lg.interleaved |= e->chunk > 0 && e->stream == MP_STREAM_COMPUTE;
        lg.zb |= e->kind == MP_EV_W;
        lg.optimizer |= e->kind == MP_EV_OPTIMIZER;
        lg.recompute |= e->kind == MP_EV_RECOMPUTE;
        lg.dp |= e->stream == MP_STREAM_DP;
        per_rank += e->rank == 0 && shown_on_pipeline(e);
    }
    if (span <= 0)
        span = 1;
    double scale = 1;
    const char *unit = units;
    if (!units)
        time_unit(span, &scale, &unit);
    /* Numbers only where boxes are wide enough to hold them. */
    bool labels = per_rank <= 160;
    mp_buf data, script;
    mp_buf_init(&data);
    mp_buf_init(&script);
    pipeline_data(t, scale, labels, &data);
    mp_status st = write_text(pf->boxes, &data, err);
    /* Both pictures are drawn into temporary files first and renamed into
     * place only when both succeeded: a failure leaves neither behind. */
    char tmp[4096] = "", tmp_mem[4096] = "", mem_path[4096], mem_title[256];
    if (st == MP_OK)
        st = temp_beside(path, tmp, sizeof tmp, err);
    if (st == MP_OK) {
        pipeline_script(&script, pf, fmt, tmp, title, ranks, span * scale, unit, &lg);
        st = draw(gnuplot, pf, &script, tmp, err);
    }
    mp_plot_memory_path(path, mem_path, sizeof mem_path);
    if (st == MP_OK && n_mem > 0) {
        mp_buf_free(&data);
        mp_buf_free(&script);
        memory_data(mem, n_mem, scale, span, &data);
        st = write_text(pf->memory, &data, err);
        snprintf(mem_title, sizeof mem_title, "%s: memory per rank", title ? title : "");
        if (st == MP_OK)
            st = temp_beside(mem_path, tmp_mem, sizeof tmp_mem, err);
        if (st == MP_OK) {
            int mem_ranks = mem[n_mem - 1].rank + 1;
            memory_script(&script, pf, fmt, tmp_mem, mem_title, mem_ranks, span * scale, unit);
            st = draw(gnuplot, pf, &script, tmp_mem, err);
        }
    }
    if (st == MP_OK && rename(tmp, path) != 0)
        st = mp_error_set(err, MP_EIO, path, 0, 0, NULL, "cannot write: %s", strerror(errno));
    if (st == MP_OK && tmp_mem[0] && rename(tmp_mem, mem_path) != 0) {
        st = mp_error_set(err, MP_EIO, mem_path, 0, 0, NULL, "cannot write: %s",
                          strerror(errno));
        unlink(path); /* the pair or nothing */
    }
    if (st != MP_OK) {
        if (tmp[0])
            unlink(tmp);
        if (tmp_mem[0])
            unlink(tmp_mem);
    }
    mp_buf_free(&data);
    mp_buf_free(&script);
    return st;
}

mp_status mp_plot_write(const mp_timeline *t, const mp_sim_memory_point *mem, size_t n_mem,
                        const char *title, const char *units, const char *path, mp_error *err)
{
    picture_format fmt = format_of(path);
    if (fmt == FMT_BAD)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--plot",
                            "'%s': the plot file must end in .svg or .png", path);
    char gnuplot[4096];
    if (!mp_plot_find_gnuplot(gnuplot, sizeof gnuplot))
        return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, "gnuplot",
                            "gnuplot not found on PATH: plot skipped");
    plot_files pf;
    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || !*tmpdir || strlen(tmpdir) > 20)
        tmpdir = "/tmp";
    snprintf(pf.dir, sizeof pf.dir, "%s/megaplan-plot-XXXXXX", tmpdir);
    if (!mkdtemp(pf.dir))
        return mp_error_set(err, MP_EIO, pf.dir, 0, 0, NULL, "cannot make a temporary folder: %s",
                            strerror(errno));
    snprintf(pf.boxes, sizeof pf.boxes, "%s/boxes.dat", pf.dir);
    snprintf(pf.memory, sizeof pf.memory, "%s/memory.dat", pf.dir);
    snprintf(pf.script, sizeof pf.script, "%s/plot.gp", pf.dir);
    snprintf(pf.log, sizeof pf.log, "%s/gnuplot.log", pf.dir);
    mp_status st = plot_in(gnuplot, &pf, t, mem, n_mem, title, units, path, fmt, err);
    unlink(pf.boxes);
    unlink(pf.memory);
    unlink(pf.script);
    unlink(pf.log);
    rmdir(pf.dir);
    return st;
}
