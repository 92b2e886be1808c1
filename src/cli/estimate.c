#include <stdio.h>

#include "cli/cli.h"

int cmd_estimate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "megaplan estimate: PENDING\n");
    return 1;
}
