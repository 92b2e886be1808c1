#include "core/units.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct unit_entry {
    const char *name;
    double scale;
} unit_entry;

static const unit_entry bytes_units[] = {
    {"B", 1.0},      {"KB", 1e3},           {"kB", 1e3},           {"MB", 1e6},
    {"GB", 1e9},     {"TB", 1e12},          {"PB", 1e15},          {"KiB", 1024.0},
    {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    {NULL, 0},
};

/* Bandwidth: bytes per second, or bits per second for the lower-case "b"
 * (network links are sold in Gb/s: 200 Gb/s HDR = 25 GB/s). */
static const unit_entry bandwidth_units[] = {
    {"B/s", 1.0},      {"KB/s", 1e3},  {"kB/s", 1e3}, {"MB/s", 1e6},
    {"GB/s", 1e9},     {"TB/s", 1e12}, {"PB/s", 1e15},
    {"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0},
    {"TiB/s", 1099511627776.0},
    {"b/s", 1.0 / 8},  {"Kb/s", 1e3 / 8}, {"kb/s", 1e3 / 8}, {"Mb/s", 1e6 / 8},
    {"Gb/s", 1e9 / 8}, {"Tb/s", 1e12 / 8},
    {NULL, 0},
};

static const unit_entry flops_units[] = {
    {"FLOP/s", 1.0},   {"KFLOP/s", 1e3}, {"MFLOP/s", 1e6}, {"GFLOP/s", 1e9},
    {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15},
    {"FLOPS", 1.0},    {"KFLOPS", 1e3},  {"MFLOPS", 1e6},  {"GFLOPS", 1e9},
    {"TFLOPS", 1e12},  {"PFLOPS", 1e15},
    {NULL, 0},
};

static const unit_entry time_units[] = {
    {"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"ns", 1e-9},
    {NULL, 0},
};

static const unit_entry *units_of(mp_unit_kind kind)
{
    switch (kind) {
    case MP_UNIT_BYTES:
        return bytes_units;
    case MP_UNIT_BANDWIDTH:
        return bandwidth_units;
    case MP_UNIT_FLOPS:
        return flops_units;
    case MP_UNIT_TIME:
        return time_units;
    default:
        return NULL;
    }
}

const char *mp_unit_kind_describe(mp_unit_kind kind)
{
    switch (kind) {
    case MP_UNIT_BYTES:
        return "a size in bytes (e.g. 80 GiB)";
    case MP_UNIT_BANDWIDTH:
        return "a bandwidth (e.g. 450 GB/s or 200 Gb/s)";
    case MP_UNIT_FLOPS:
        return "a rate of FLOP/s (e.g. 312 TFLOP/s)";
    case MP_UNIT_TIME:
        return "a time (e.g. 5 us)";
    default:
        return "a number";
    }
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Scans a decimal number: [+-] digits [. digits] [e [+-] digits]. Refuses
 * what strtod would also take (hex, "inf", "nan") so files stay plain. */
static size_t scan_number(const char *s)
{
    size_t i = 0, digits = 0;
    if (s[i] == '+' || s[i] == '-')
        i++;
    while (s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (s[i] == '.') {
        i++;
        while (s[i] >= '0' && s[i] <= '9')
            i++, digits++;
    }
    if (!digits)
        return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        size_t j = i + 1, exp_digits = 0;
        if (s[j] == '+' || s[j] == '-')
            j++;
        while (s[j] >= '0' && s[j] <= '9')
            j++, exp_digits++;
        if (exp_digits)
            i = j;
    }
    return i;
}

/* num (a scan_number string) times scale. A power-of-ten scale moves the
 * decimal exponent and lets strtod round once, so "60 us" is the double
 * nearest 6e-05 (60 * 1e-6 is not) and writes back as 6e-05. */
static double scale_number(const char *num, double scale)
{
    int k = (int)lround(log10(scale));
    char pow10[16];
    snprintf(pow10, sizeof pow10, "1e%d", k);
    if (scale <= 0 || strtod(pow10, NULL) != scale)
        return strtod(num, NULL) * scale; /* binary and bit units */
    char mant[72];
    snprintf(mant, sizeof mant, "%s", num);
    long exp = 0;
    char *e = strpbrk(mant, "eE");
    if (e) {
        exp = strtol(e + 1, NULL, 10); /* scan_number: at most 64 digits, saturates */
        *e = '\0';
    }
    if (exp > 100000 || exp < -100000)
        return strtod(num, NULL) * scale;
    char joined[96];
    snprintf(joined, sizeof joined, "%se%ld", mant, exp + k);
    return strtod(joined, NULL);
}

bool mp_units_parse(const char *s, mp_unit_kind kind, double *out, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = NULL;
    if (!s) {
        *why = "missing value";
        return false;
    }
    while (is_blank(*s))
        s++;
    size_t n = scan_number(s);
    if (n == 0 || n > 64) {
        *why = "not a number";
        return false;
    }
    char num[72];
    memcpy(num, s, n);
    num[n] = '\0';
    double v = strtod(num, NULL);
    const char *unit = s + n;
    while (is_blank(*unit))
        unit++;
    size_t ulen = strlen(unit);
    while (ulen && is_blank(unit[ulen - 1]))
        ulen--;
    if (ulen) {
        const unit_entry *tab = units_of(kind);
        if (!tab) {
            *why = "expected a plain number without a unit";
            return false;
        }
        const unit_entry *hit = NULL;
        for (const unit_entry *u = tab; u->name; u++)
            if (strlen(u->name) == ulen && !memcmp(u->name, unit, ulen))
                hit = u;
        if (!hit) {
            switch (kind) {
            case MP_UNIT_BYTES:
                *why = "unknown unit for a size (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)";
                break;
            case MP_UNIT_BANDWIDTH:
                *why = "unknown unit for a bandwidth (use GB/s, GiB/s or Gb/s for bits)";
                break;
            case MP_UNIT_FLOPS:
                *why = "unknown unit for a FLOP rate (use GFLOP/s, TFLOP/s, PFLOP/s)";
                break;
            default:
                *why = "unknown unit for a time (use s, ms, us, ns)";
                break;
            }
            return false;
        }
        v = scale_number(num, hit->scale);
    }
    if (!isfinite(v)) {
        *why = "number out of range";
        return false;
    }
    *out = v;
    return true;
}

void mp_format_double(double v, char *buf, size_t size)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
    snprintf(buf, size, "%.17g", v);
}

/* The units tried when writing, largest first; the first that shows v as a
 * short exact number wins. */
static const unit_entry write_bytes[] = {
    {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0},
    {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {NULL, 0}};
static const unit_entry write_bandwidth[] = {
    {"TB/s", 1e12}, {"GB/s", 1e9}, {"MB/s", 1e6}, {NULL, 0}};
static const unit_entry write_flops[] = {
    {"PFLOP/s", 1e15}, {"TFLOP/s", 1e12}, {"GFLOP/s", 1e9}, {NULL, 0}};
static const unit_entry write_time[] = {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {NULL, 0}};

void mp_units_format(double v, mp_unit_kind kind, char *buf, size_t size)
{
    const unit_entry *tab = NULL;
    switch (kind) {
    case MP_UNIT_BYTES:
        tab = write_bytes;
        break;
    case MP_UNIT_BANDWIDTH:
        tab = write_bandwidth;
        break;
    case MP_UNIT_FLOPS:
        tab = write_flops;
        break;
    case MP_UNIT_TIME:
        tab = write_time;
        break;
    default:
        break;
    }
    /* the shortest number that reads back exactly wins, the larger unit on a
     * tie: 2039 GB/s rather than 2.039 TB/s, 19.5 TFLOP/s rather than 19500 GFLOP/s */
    char best[64] = "";
    size_t best_digits = SIZE_MAX;
    if (tab && v != 0.0) {
        for (const unit_entry *u = tab; u->name; u++) {
            double scaled = v / u->scale;
            if (fabs(scaled) < 1.0)
                continue;
            char num[40];
            /* at most 6 significant digits keep the file readable */
            snprintf(num, sizeof num, "%.6g", scaled);
            if (strchr(num, 'e') || strlen(num) >= best_digits)
                continue;
            /* written only when it reads back as exactly v */
            char text[64];
            double back;
            snprintf(text, sizeof text, "%s %s", num, u->name);
            if (mp_units_parse(text, kind, &back, NULL) && back == v) {
                snprintf(best, sizeof best, "%s", text);
                best_digits = strlen(num);
            }
        }
    }
    if (best[0]) {
        snprintf(buf, size, "%s", best);
        return;
    }
    mp_format_double(v, buf, size);
}
