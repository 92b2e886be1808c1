/* test_mutant.h — test-only planted errors. A mutant build of an exec source
 * (tests/exec/meson.build defines its MP_TEST_*_MUTANT) plants the error the
 * environment variable of that name names, so that a test can show the
 * PyTorch fixture catches it; the normal build plants nothing. */
#ifndef MEGAPLAN_EXEC_TEST_MUTANT_H
#define MEGAPLAN_EXEC_TEST_MUTANT_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Whether environment variable `env` names the error `what`. */
static inline bool mp_test_mutant_named(const char *env, const char *what)
{
    const char *m = getenv(env);
    return m && !strcmp(m, what);
}

#endif
