/* megaplan — plan, simulate and execute Megatron-style parallel training.
 * main() only dispatches to a verb (git style: one file per verb in src/cli/). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cuda_handoff.h"
#include "megaplan_config.h"

typedef struct verb {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} verb;

static const verb verbs[] = {
    {"search", cmd_search, "rank parallel plans for a model on a cluster"},
    {"estimate", cmd_estimate, "time and memory of one configuration, broken down"},
    {"explain", cmd_explain, "why a configuration is refused, does not fit, or loses"},
    {"simulate", cmd_simulate, "one iteration as a discrete-event timeline (trace, plot)"},
    {"exec", cmd_exec, "run a plan on MPI ranks; check numerics and timing"},
    {"calibrate", cmd_calibrate, "measure this machine's CPU backend as a hardware profile"},
    {"models", cmd_models, "list built-in model presets"},
    {"hw", cmd_hw, "list built-in hardware profiles"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: megaplan <verb> [options]   (megaplan <verb> --help for each)\n\n");
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        fprintf(out, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
}

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
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version")) {
        printf("megaplan %s\n", MEGAPLAN_VERSION);
        return 0;
    }
    /* --backend cuda runs in megaplan-cuda, the build with the CUDA libraries */
    if (!strcmp(name, "exec") || !strcmp(name, "calibrate")) {
        int rc = mp_cli_cuda_handoff(argc - 1, argv + 1, argv);
        if (rc >= 0)
            return rc;
    }
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (!strcmp(name, verbs[i].name))
            return finish_output(name, verbs[i].run(argc - 1, argv + 1));
    fprintf(stderr, "megaplan: '%.80s' is not a verb (megaplan --help lists them)\n", name);
    return 2;
}
