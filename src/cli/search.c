#include <stdio.h>

#include "cli/cli.h"

int cmd_search(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "megaplan search: PENDING\n");
    return 1;
}
