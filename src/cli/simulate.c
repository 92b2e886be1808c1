#include <stdio.h>

#include "cli/cli.h"

int cmd_simulate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "megaplan simulate: PENDING\n");
    return 1;
}
