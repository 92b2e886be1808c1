#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* An error is one line (the CLI prints it as one, tests grep it): a key or
 * value copied from the input can hold a newline (a YAML plain scalar folds
 * over empty lines), so control characters become spaces. */
static void keep_on_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

void mp_error_clear(mp_error *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}

mp_status mp_error_set(mp_error *err, mp_status code, const char *file, int line,
                       int column, const char *field, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    err->line = line;
    err->column = column;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    keep_on_one_line(err->file);
    keep_on_one_line(err->field);
    keep_on_one_line(err->msg);
    return code;
}

void mp_error_locate(mp_error *err, const char *file, int line, int column)
{
    if (!err)
        return;
    if (!err->file[0] && file) {
        snprintf(err->file, sizeof err->file, "%s", file);
        keep_on_one_line(err->file);
    }
    if (!err->line) {
        err->line = line;
        err->column = column;
    }
}

char *mp_error_format(const mp_error *err, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
#define APPEND(...)                                                         \
    do {                                                                    \
        int w_ = snprintf(buf + n, n < size ? size - n : 0, __VA_ARGS__);   \
        if (w_ > 0)                                                         \
            n += (size_t)w_;                                                \
    } while (0)
    if (err->file[0]) {
        APPEND("%s", err->file);
        if (err->line > 0) {
            APPEND(":%d", err->line);
            if (err->column > 0)
                APPEND(":%d", err->column);
        }
        APPEND(": ");
    }
    if (err->field[0])
        APPEND("%s: ", err->field);
    APPEND("%s", err->msg[0] ? err->msg : "unknown error");
#undef APPEND
    return buf;
}

int mp_error_exit_status(mp_status code)
{
    switch (code) {
    case MP_OK:
        return 0;
    case MP_EINPUT:
    case MP_EIO:
        return 2;
    default:
        return 1;
    }
}
