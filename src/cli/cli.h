/* cli.h — the verbs. One file per verb (src/cli/<verb>.c); src/megaplan.c
 * dispatches. Each returns the process exit status: 0 success, 1 failure or
 * nothing found, 2 bad input. Only the CLI prints or exits. */
#ifndef MP_CLI_H
#define MP_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/opt.h"
#include "core/error.h"

/* Each verb's description (its usage, text and option tables), defined
 * beside its code; src/cli/verbs.c lists them. */
extern const mp_verb_doc mp_doc_search, mp_doc_search_hw, mp_doc_estimate, mp_doc_explain,
    mp_doc_simulate, mp_doc_exec, mp_doc_calibrate, mp_doc_models, mp_doc_hw;

int cmd_models(int argc, char **argv);
int cmd_hw(int argc, char **argv);
int cmd_estimate(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);

/* Prints "megaplan <verb>: file:line:col: field: message" to stderr and
 * returns the exit status for err->code. */
int mp_cli_fail(const char *verb, const mp_error *err);
/* s as an error line may show it: control characters (a newline in an
 * argument would split the line) as spaces, cut to fit buf. Returns buf. */
const char *mp_cli_shown(const char *s, char *buf, size_t size);
/* True when the sep-separated list s has an empty item ("a,", ",a", "a,,b"),
 * which strtok would skip without a word. */
bool mp_cli_list_has_empty(const char *s, char sep);

#endif
