#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/fields.h"

/* Bytes that are not printable text (a non-UTF-8 argument or file name,
 * a sequence cut by truncation, a C1 control) as '?': the error line quoted
 * them raw, which a terminal or a log reader shows as garbage or takes for
 * a control sequence. */
static void printable(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        long cp;
        size_t len = mp_text_char_len(s + i, n - i, &cp);
        if (len == 0) {
            s[i++] = '?';
            continue;
        }
        i += len;
    }
}

int mp_cli_fail(const char *verb, const mp_error *err)
{
    char line[1024];
    mp_error_format(err, line, sizeof line);
    printable(line);
    fprintf(stderr, "megaplan %s: %s\n", verb, line);
    return mp_error_exit_status(err->code);
}

const char *mp_cli_shown(const char *s, char *buf, size_t size)
{
    snprintf(buf, size, "%s", s ? s : "");
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    printable(buf);
    return buf;
}

bool mp_cli_list_has_empty(const char *s, char sep)
{
    if (!s || !s[0])
        return false;
    char twice[3] = {sep, sep, '\0'};
    return s[0] == sep || s[strlen(s) - 1] == sep || strstr(s, twice) != NULL;
}
