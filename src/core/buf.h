/* buf.h — a growable byte string (in the spirit of sds) for writers that
 * build text (YAML, JSON, tables) that the CLI then prints or a file gets. */
#ifndef MP_BUF_H
#define MP_BUF_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef struct mp_buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
    bool oom;   /* set once an allocation failed; later appends are no-ops */
} mp_buf;

void mp_buf_init(mp_buf *b);
void mp_buf_free(mp_buf *b);
void mp_buf_append(mp_buf *b, const char *s, size_t n);
void mp_buf_puts(mp_buf *b, const char *s);
void mp_buf_printf(mp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads a whole file (at most max_bytes; larger is refused as absurd). *out is
 * malloc'ed and NUL-terminated. */
mp_status mp_read_file(const char *path, size_t max_bytes, char **out, size_t *len, mp_error *err);

#endif
