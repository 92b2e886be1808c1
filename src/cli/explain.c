#include <stdio.h>

#include "cli/cli.h"

int cmd_explain(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "megaplan explain: PENDING\n");
    return 1;
}
