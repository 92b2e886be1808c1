#include <stdio.h>

#include "cli/cli.h"

int cmd_exec(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "megaplan exec: PENDING\n");
    return 1;
}
