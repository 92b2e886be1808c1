#include "core/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void mp_buf_init(mp_buf *b)
{
    memset(b, 0, sizeof *b);
}

void mp_buf_free(mp_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

static bool reserve(mp_buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void mp_buf_append(mp_buf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mp_buf_puts(mp_buf *b, const char *s)
{
    mp_buf_append(b, s, strlen(s));
}

void mp_buf_printf(mp_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

mp_status mp_read_file(const char *path, size_t max_bytes, char **out, size_t *len, mp_error *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    /* "" said "cannot read: No such file or directory" and named nothing */
    if (!path[0])
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, NULL, "empty file name");
    /* O_NONBLOCK: opening a FIFO nobody writes to would wait forever; this
     * way it reads as empty. Reads block again as usual (a <(...) pipe
     * still works). */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return mp_error_set(err, MP_EIO, path, 0, 0, NULL, "cannot read: %s", strerror(errno));
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int e = errno;
        close(fd);
        return mp_error_set(err, MP_EIO, path, 0, 0, NULL, "cannot read: %s", strerror(e));
    }
    mp_buf b;
    mp_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.len + n > max_bytes) {
            fclose(f);
            mp_buf_free(&b);
            return mp_error_set(err, MP_EINPUT, path, 0, 0, NULL,
                                "file larger than %zu bytes: refused", max_bytes);
        }
        mp_buf_append(&b, chunk, n);
    }
    bool bad = ferror(f);
    int read_errno = errno; /* e.g. EISDIR for a folder */
    fclose(f);
    if (bad || b.oom) {
        mp_buf_free(&b);
        if (bad)
            return mp_error_set(err, MP_EIO, path, 0, 0, NULL, "cannot read: %s",
                                strerror(read_errno));
        return mp_error_set(err, MP_ENOMEM, path, 0, 0, NULL, "out of memory");
    }
    if (!b.data)
        mp_buf_append(&b, "", 0);
    if (!b.data)
        return mp_error_set(err, MP_ENOMEM, path, 0, 0, NULL, "out of memory");
    *out = b.data;
    if (len)
        *len = b.len;
    return MP_OK;
}
