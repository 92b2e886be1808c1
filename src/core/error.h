/* error.h — the one error type every library part returns.
 *
 * Library code (core, planner, sim, exec) never prints or exits: it fills an
 * mp_error and returns a non-zero code. Only the CLI formats it for the user
 * (one line: "file:line:col: field: message") and chooses the exit status.
 */
#ifndef MP_ERROR_H
#define MP_ERROR_H

#include <stddef.h>

typedef enum mp_status {
    MP_OK = 0,
    MP_EINPUT = 2,    /* bad input: malformed file, unknown key, impossible config. CLI exit 2 */
    MP_ENOFIT = 3,    /* valid input, but nothing fits / no solution (search). CLI exit 1 */
    MP_EIO = 4,       /* cannot read or write a file. CLI exit 2 */
    MP_ENOMEM = 5,    /* allocation failed. CLI exit 1 */
    MP_EMISMATCH = 6, /* exec: numerics differ from the reference. CLI exit 1 */
    MP_ERUNTIME = 7,  /* exec/MPI failure, missing backend. CLI exit 1 */
    MP_EINTERNAL = 8  /* a bug. CLI exit 1 */
} mp_status;

typedef struct mp_error {
    mp_status code;
    char file[256];   /* "" when the error is not about a file (e.g. a CLI option) */
    int line;         /* 1-based; 0 = unknown */
    int column;       /* 1-based; 0 = unknown */
    char field[128];  /* dotted path of the offending field, e.g. "parallel.tp", or "--tp" */
    char msg[384];
} mp_error;

/* Clears err (code MP_OK, empty strings). */
void mp_error_clear(mp_error *err);

/* Fills err and returns code, so callers can write `return mp_error_set(...)`.
 * file/field may be NULL. err may be NULL (then only the code is returned). */
mp_status mp_error_set(mp_error *err, mp_status code, const char *file, int line,
                       int column, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* Adds a location to an error that does not have one yet (used when a parsed
 * value turns out invalid later, e.g. in validation). */
void mp_error_locate(mp_error *err, const char *file, int line, int column);

/* One line, no trailing newline: "file:line:col: field: msg" leaving out
 * the parts that are unknown. Returns buf. */
char *mp_error_format(const mp_error *err, char *buf, size_t size);

/* The exit status the CLI uses for this error code (2 for input errors, 1 otherwise). */
int mp_error_exit_status(mp_status code);

#endif
