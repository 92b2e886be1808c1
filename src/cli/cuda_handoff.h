/* cuda_handoff.h — handing --backend cuda to megaplan-cuda (cuda_handoff.c). */
#ifndef MP_CLI_CUDA_HANDOFF_H
#define MP_CLI_CUDA_HANDOFF_H

#include <stdbool.h>

/* When argv (a verb's arguments) asks for --backend cuda and this build
 * lacks the CUDA backend but megaplan-cuda sits beside it, replaces the
 * process with megaplan-cuda run on argv_from_main (the whole command line,
 * program name first): does not return then. Returns -1 when there is
 * nothing to hand off (the verb goes on), 1 when the handoff failed (said). */
int mp_cli_cuda_handoff(int argc, char **argv, char **argv_from_main);

#endif
