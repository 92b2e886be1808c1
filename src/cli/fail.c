#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int mp_cli_fail(const char *verb, const mp_error *err)
{
    char line[1024];
    fprintf(stderr, "megaplan %s: %s\n", verb, mp_error_format(err, line, sizeof line));
    return mp_error_exit_status(err->code);
}

const char *mp_cli_shown(const char *s, char *buf, size_t size)
{
    snprintf(buf, size, "%s", s ? s : "");
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    return buf;
}

bool mp_cli_list_has_empty(const char *s, char sep)
{
    if (!s || !s[0])
        return false;
    char twice[3] = {sep, sep, '\0'};
    return s[0] == sep || s[strlen(s) - 1] == sep || strstr(s, twice) != NULL;
}
