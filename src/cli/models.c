#include <stdio.h>

#include "cli/cli.h"

int cmd_models(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "megaplan models: PENDING\n");
    return 1;
}
