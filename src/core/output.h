/* output.h — where a verb's output file goes (-o, --trace, --plot), one rule
 * for every verb:
 *   - "-", /dev/stdout, /dev/stderr, /dev/fd/N: written to that descriptor;
 *   - an existing device, FIFO or socket: opened and written through, never
 *     replaced;
 *   - a symlink: followed; the target is written and the link stays;
 *   - a regular file (or a new name): written to a temporary file beside it
 *     and renamed into place, so a reader never sees half a file; an
 *     existing read-only file is replaced only when force is given.
 * Returns errors (never prints): MP_EINPUT for a read-only file without
 * force or a folder, MP_EIO when the write fails. */
#ifndef MP_OUTPUT_H
#define MP_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef enum {
    MP_OUT_FD,     /* an open descriptor of this process (fd) */
    MP_OUT_STREAM, /* an existing non-regular file, opened by its name */
    MP_OUT_FILE    /* a regular file: temporary file + rename */
} mp_output_kind;

typedef struct mp_output {
    mp_output_kind kind;
    int fd;             /* MP_OUT_FD */
    char path[4096];    /* MP_OUT_STREAM: as given; MP_OUT_FILE: symlinks followed */
    bool exists;        /* MP_OUT_FILE: replaces a file ... */
    unsigned mode;      /* ... whose permission bits the new one keeps */
} mp_output;

/* The folder file is in: its path up to the last '/', "." without one, "/"
 * for a file at the root. */
void mp_output_folder(const char *file, char *dir, size_t size);

/* Decides where path goes and refuses what must not be written (a folder, a
 * read-only file without force) before any work is done. */
mp_status mp_output_prepare(const char *path, bool force, mp_output *out, mp_error *err);

/* Writes data (len bytes) to a prepared output. */
mp_status mp_output_write(const mp_output *o, const char *data, size_t len, mp_error *err);

/* mp_output_prepare + mp_output_write. */
mp_status mp_output_write_path(const char *path, bool force, const char *data, size_t len,
                               mp_error *err);

/* A fresh empty file for a tool (gnuplot) to draw into, for o: beside the
 * target for a regular file (so the rename is atomic), else in $TMPDIR. */
mp_status mp_output_temp(const mp_output *o, char *tmp, size_t size, mp_error *err);

/* Moves a finished temporary file into place: renamed over a regular file,
 * copied through (then removed) for a descriptor or stream. */
mp_status mp_output_install(const mp_output *o, const char *tmp, mp_error *err);

#endif
