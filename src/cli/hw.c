#include <stdio.h>

#include "cli/cli.h"

int cmd_hw(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "megaplan hw: PENDING\n");
    return 1;
}
