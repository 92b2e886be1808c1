/* megaplan — plan, simulate and execute Megatron-style parallel training.
 * main() only dispatches to a verb (git style: one file per verb in src/cli/). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cuda_handoff.h"
#include "cli/verbs.h"
#include "megaplan_config.h"

/* A listing cut short by a full disk must not exit 0 as if it were whole:
 * flush here, after every verb, and say so once. */
static int finish_output(const char *verb, int rc)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "megaplan %s: cannot write the output%s%s\n", verb, errno ? ": " : "",
                errno ? strerror(errno) : "");
        return rc ? rc : 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        mp_cli_usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
        mp_cli_usage(stdout);
        return finish_output("--help", 0);
    }
    if (!strcmp(name, "help"))
        return finish_output("help", mp_cli_help(argc - 1, argv + 1));
    /* the build writes the man page and the completions with this */
    if (!strcmp(name, "--generate") && argc == 3)
        return finish_output(name, mp_cli_generate(argv[2], stdout));
    if (!strcmp(name, "--version")) {
        printf("megaplan %s\n", MEGAPLAN_VERSION);
        return finish_output("--version", 0);
    }
    /* --backend cuda runs in megaplan-cuda, the build with the CUDA libraries */
    if (!strcmp(name, "exec") || !strcmp(name, "calibrate")) {
        int rc = mp_cli_cuda_handoff(argc - 1, argv + 1, argv);
        if (rc >= 0)
            return rc;
    }
    const mp_verb *v = mp_verb_find(name);
    if (v)
        return finish_output(name, v->run(argc - 1, argv + 1));
    char shown[81];
    fprintf(stderr, "megaplan: '%s' is not a verb (megaplan --help lists them)\n",
            mp_cli_shown(name, shown, sizeof shown));
    return 2;
}
