/* verbs.c — the list of verbs, the top-level help and `megaplan help VERB`. */
#include "cli/verbs.h"

#include <string.h>

#include "cli/cli.h"

const mp_verb mp_verbs[] = {
    {&mp_doc_search, cmd_search, &mp_doc_search_hw},
    {&mp_doc_estimate, cmd_estimate, NULL},
    {&mp_doc_explain, cmd_explain, NULL},
    {&mp_doc_simulate, cmd_simulate, NULL},
    {&mp_doc_exec, cmd_exec, NULL},
    {&mp_doc_calibrate, cmd_calibrate, NULL},
    {&mp_doc_models, cmd_models, NULL},
    {&mp_doc_hw, cmd_hw, NULL},
};
const size_t mp_n_verbs = sizeof mp_verbs / sizeof mp_verbs[0];

const mp_verb *mp_verb_find(const char *name)
{
    for (size_t i = 0; i < mp_n_verbs; i++)
        if (!strcmp(name, mp_verbs[i].doc->name))
            return &mp_verbs[i];
    return NULL;
}

void mp_cli_usage(FILE *out)
{
    fprintf(out, "usage: megaplan <verb> [options]   (megaplan <verb> --help for each)\n\n");
    for (size_t i = 0; i < mp_n_verbs; i++)
        fprintf(out, "  %-10s %s\n", mp_verbs[i].doc->name, mp_verbs[i].doc->summary);
}

int mp_cli_help(int argc, char **argv)
{
    if (argc < 2) {
        mp_cli_usage(stdout);
        return 0;
    }
    const mp_verb *v = mp_verb_find(argv[1]);
    if (!v) {
        char shown[81];
        fprintf(stderr, "megaplan help: '%s' is not a verb (megaplan --help lists them)\n",
                mp_cli_shown(argv[1], shown, sizeof shown));
        return 2;
    }
    if (argc > 2) {
        fprintf(stderr, "megaplan help: %.80s: one verb at a time\n", argv[2]);
        return 2;
    }
    mp_verb_doc_write(v->doc, stdout);
    return 0;
}
