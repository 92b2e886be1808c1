/* units.h — numbers with units in hardware profiles and on the command line:
 * "80 GiB", "450 GB/s", "200 Gb/s", "312 TFLOP/s", "2 us". Values come back in
 * SI base units (bytes, bytes/s, FLOP/s, seconds); a plain number is already
 * in base units. Also the reverse: a readable string that parses back. */
#ifndef MP_UNITS_H
#define MP_UNITS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    MP_UNIT_NONE,      /* a plain number (counts, fractions) */
    MP_UNIT_BYTES,     /* B, KB, MB, GB, TB (powers of 1000); KiB, MiB, GiB, TiB (1024) */
    MP_UNIT_BANDWIDTH, /* the byte units + "/s"; Kb/s, Mb/s, Gb/s, Tb/s are bits (/8) */
    MP_UNIT_FLOPS,     /* FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s (also ...FLOPS) */
    MP_UNIT_TIME,      /* s, ms, us, ns */
    MP_UNIT_KIND_COUNT
} mp_unit_kind;

/* Parses s (surrounding blanks allowed) as a finite number with an optional
 * unit of the given kind. On failure returns false and sets *why to a short
 * static reason ("not a number", "unknown unit 'GiB/h' for a bandwidth", ...). */
bool mp_units_parse(const char *s, mp_unit_kind kind, double *out, const char **why);

/* What the kind means, with an example, for error messages: "a size in bytes (e.g. 80 GiB)". */
const char *mp_unit_kind_describe(mp_unit_kind kind);

/* Writes v readably with a unit of the kind ("80 GiB", "450 GB/s"); falls
 * back to the plain SI number when no unit shows it exactly. */
void mp_units_format(double v, mp_unit_kind kind, char *buf, size_t size);

/* Shortest "%.*g" text of v that reads back as exactly v. */
void mp_format_double(double v, char *buf, size_t size);

#endif
