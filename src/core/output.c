/* output.c — where a verb's output file goes (output.h). */
#include "core/output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"

static mp_status io_error(mp_error *err, const char *path, int e)
{
    return mp_error_set(err, MP_EIO, path, 0, 0, NULL, "cannot write: %s", strerror(e));
}

/* "/dev/fd/N", "/proc/self/fd/N": N, else -1. */
static int fd_name(const char *path)
{
    const char *n = NULL;
    if (!strncmp(path, "/dev/fd/", 8))
        n = path + 8;
    else if (!strncmp(path, "/proc/self/fd/", 14))
        n = path + 14;
    if (!n || !*n)
        return -1;
    char *end;
    long v = strtol(n, &end, 10);
    return *end || v < 0 || v > INT_MAX ? -1 : (int)v;
}

/* The path a chain of dangling symlinks ends at (the file writing creates). */
static mp_status follow_dangling(const char *path, char *out, size_t size, mp_error *err)
{
    if (snprintf(out, size, "%s", path) >= (int)size)
        return mp_error_set(err, MP_EINPUT, path, 0, 0, NULL, "path too long");
    for (int hops = 0; hops < 40; hops++) {
        struct stat ls;
        if (lstat(out, &ls) != 0 || !S_ISLNK(ls.st_mode))
            return MP_OK;
        char target[4096];
        ssize_t n = readlink(out, target, sizeof target - 1);
        if (n < 0)
            return io_error(err, path, errno);
        target[n] = '\0';
        char next[4096];
        const char *slash = strrchr(out, '/');
        int len = target[0] == '/' || !slash
                      ? snprintf(next, sizeof next, "%s", target)
                      : snprintf(next, sizeof next, "%.*s/%s", (int)(slash - out), out, target);
        if (len < 0 || (size_t)len >= sizeof next || (size_t)len >= size)
            return mp_error_set(err, MP_EINPUT, path, 0, 0, NULL, "path too long");
        memcpy(out, next, (size_t)len + 1);
    }
    return io_error(err, path, ELOOP);
}

/* A regular file is written beside itself and renamed into place: its
 * folder must exist and take a new file. Checked here, before the work
 * whose result it holds (exec's run, a search), not after it. */
void mp_output_folder(const char *file, char *dir, size_t size)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        snprintf(dir, size, ".");
    else if (slash == file)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - file), file);
}

static mp_status folder_writable(const char *path, const char *file, mp_error *err)
{
    char dir[4096];
    mp_output_folder(file, dir, sizeof dir);
    struct stat st;
    if (stat(dir, &st) != 0)
        return io_error(err, path, errno);
    if (!S_ISDIR(st.st_mode))
        return io_error(err, path, ENOTDIR);
    if (access(dir, W_OK | X_OK) != 0)
        return io_error(err, path, errno);
    /* access() lets root write anywhere, yet a file system may still refuse
     * (sysfs, a FUSE mount): make the temporary file the write will make,
     * so a long run (exec, calibrate) learns it before it starts */
    char probe[4200];
    if (snprintf(probe, sizeof probe, "%s/.megaplan-probe.XXXXXX", dir) < (int)sizeof probe) {
        int fd = mkstemp(probe);
        if (fd < 0)
            return io_error(err, path, errno);
        close(fd);
        unlink(probe);
    }
    return MP_OK;
}

mp_status mp_output_prepare(const char *path, bool force, mp_output *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    out->kind = MP_OUT_FD;
    if (!path[0])
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, NULL, "empty file name");
    if (!strcmp(path, "-") || !strcmp(path, "/dev/stdout")) {
        out->fd = 1;
        return MP_OK;
    }
    if (!strcmp(path, "/dev/stderr")) {
        out->fd = 2;
        return MP_OK;
    }
    if ((out->fd = fd_name(path)) >= 0)
        return MP_OK;
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return mp_error_set(err, MP_EINPUT, path, 0, 0, NULL, "is a folder, not a file");
        if (!S_ISREG(st.st_mode)) {
            out->kind = MP_OUT_STREAM;
            if (snprintf(out->path, sizeof out->path, "%s", path) >= (int)sizeof out->path)
                return mp_error_set(err, MP_EINPUT, path, 0, 0, NULL, "path too long");
            return MP_OK;
        }
        out->kind = MP_OUT_FILE;
        char real[PATH_MAX];
        if (!realpath(path, real))
            return io_error(err, path, errno);
        snprintf(out->path, sizeof out->path, "%s", real);
        out->exists = true;
        out->mode = st.st_mode & 07777;
        /* root may write anything: the permission bits still say "keep" */
        bool read_only = access(real, W_OK) != 0 || (st.st_mode & 0222) == 0;
        if (read_only && !force)
            return mp_error_set(err, MP_EINPUT, path, 0, 0, NULL,
                                "read-only file: not replaced (--force replaces it)");
        return folder_writable(path, out->path, err);
    }
    if (errno != ENOENT)
        return io_error(err, path, errno);
    out->kind = MP_OUT_FILE;
    mp_status fst = follow_dangling(path, out->path, sizeof out->path, err);
    return fst != MP_OK ? fst : folder_writable(path, out->path, err);
}

static bool write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

static unsigned default_mode(void)
{
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~(unsigned)mask;
}

/* mkstemp on template (ends in XXXXXX) with the mode the output gets. */
static int make_temp(const mp_output *o, char *template, mp_error *err)
{
    int fd = mkstemp(template);
    if (fd < 0) {
        int e = errno;
        template[0] = '\0'; /* nothing made: nothing to remove */
        io_error(err, o->kind == MP_OUT_FILE ? o->path : template, e);
        return -1;
    }
    /* mkstemp makes it private; an output keeps the mode of the file it
     * replaces, or gets the usual one */
    if (fchmod(fd, o->exists ? (mode_t)o->mode : (mode_t)default_mode()) != 0) {
        int e = errno;
        close(fd);
        unlink(template);
        template[0] = '\0';
        io_error(err, o->path, e);
        return -1;
    }
    return fd;
}

mp_status mp_output_temp(const mp_output *o, char *tmp, size_t size, mp_error *err)
{
    int n;
    if (o->kind == MP_OUT_FILE) {
        /* beside the target: same file system, so rename is atomic; O_EXCL
         * by mkstemp, so a planted symlink cannot redirect the write */
        n = snprintf(tmp, size, "%s.tmp.XXXXXX", o->path);
    } else {
        const char *dir = getenv("TMPDIR");
        n = snprintf(tmp, size, "%s/megaplan-out-XXXXXX", dir && *dir ? dir : "/tmp");
    }
    if (n < 0 || (size_t)n >= size) {
        tmp[0] = '\0';
        return mp_error_set(err, MP_EINPUT, o->path, 0, 0, NULL, "path too long");
    }
    int fd = make_temp(o, tmp, err);
    if (fd < 0)
        return err ? err->code : MP_EIO;
    close(fd);
    return MP_OK;
}

static mp_status write_fd(const mp_output *o, const char *data, size_t len, mp_error *err)
{
    const char *name = o->kind == MP_OUT_FD && o->fd == 1 ? "standard output" : o->path;
    if (o->kind == MP_OUT_FD && o->fd == 1) {
        /* through stdio, so it keeps its place among what the CLI prints */
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
            mp_status st = io_error(err, name, errno);
            /* said here: main's check of stdout at exit would say it again */
            clearerr(stdout);
            return st;
        }
        return MP_OK;
    }
    int fd = o->fd;
    if (o->kind == MP_OUT_STREAM) {
        /* a FIFO waits here for its reader, as any writer would */
        fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
            return io_error(err, o->path, errno);
    }
    bool ok = write_all(fd, data, len);
    int e = errno;
    if (o->kind == MP_OUT_STREAM && close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    return ok ? MP_OK : io_error(err, name[0] ? name : "output", e);
}

mp_status mp_output_write(const mp_output *o, const char *data, size_t len, mp_error *err)
{
    if (o->kind != MP_OUT_FILE)
        return write_fd(o, data, len, err);
    char tmp[4096 + 16];
    mp_status st = mp_output_temp(o, tmp, sizeof tmp, err);
    if (st != MP_OK)
        return st;
    int fd = open(tmp, O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 && write_all(fd, data, len);
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        return io_error(err, o->path, e);
    }
    return mp_output_install(o, tmp, err);
}

mp_status mp_output_write_path(const char *path, bool force, const char *data, size_t len,
                               mp_error *err)
{
    mp_output o;
    mp_status st = mp_output_prepare(path, force, &o, err);
    return st != MP_OK ? st : mp_output_write(&o, data, len, err);
}

mp_status mp_output_install(const mp_output *o, const char *tmp, mp_error *err)
{
    if (o->kind == MP_OUT_FILE) {
        if (rename(tmp, o->path) != 0) {
            int e = errno;
            unlink(tmp);
            return io_error(err, o->path, e);
        }
        return MP_OK;
    }
    /* a device or pipe is written through: read the finished file back */
    char *data = NULL;
    size_t len = 0;
    mp_status st = mp_read_file(tmp, SIZE_MAX, &data, &len, err);
    unlink(tmp);
    if (st == MP_OK)
        st = write_fd(o, data, len, err);
    free(data);
    return st;
}
