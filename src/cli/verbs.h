/* verbs.h — the verbs megaplan dispatches to, each with the description its
 * --help, `megaplan help VERB`, the man page and the completions come from. */
#ifndef MP_CLI_VERBS_H
#define MP_CLI_VERBS_H

#include <stddef.h>
#include <stdio.h>

#include "cli/opt.h"

typedef struct mp_verb {
    const mp_verb_doc *doc;
    int (*run)(int argc, char **argv);
    const mp_verb_doc *mode; /* another way to call the same verb (search over hardware), or NULL */
} mp_verb;

extern const mp_verb mp_verbs[];
extern const size_t mp_n_verbs;

/* The verb of this name, or NULL. */
const mp_verb *mp_verb_find(const char *name);

/* `megaplan --help`: the verbs, one line each. */
void mp_cli_usage(FILE *out);

/* `megaplan help [VERB]`: a verb's --help, or the list of verbs; exit status. */
int mp_cli_help(int argc, char **argv);

/* `megaplan --generate man|bash|zsh` (hidden, the build runs it): the man
 * page or a completion script, from the same tables; exit status. */
int mp_cli_generate(const char *what, FILE *out);

#endif
