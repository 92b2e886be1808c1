/* search_hw.h — search over hardware profiles and GPU counts (search_hw.c). */
#ifndef MP_CLI_SEARCH_HW_H
#define MP_CLI_SEARCH_HW_H

#include <stdbool.h>

/* Whether the arguments ask for the hardware to be chosen: --hw with a
 * list or "all", --gpus MIN..MAX, --deadline, --budget, --price or --pue. */
bool mp_search_hw_wanted(int argc, char **argv);

/* `megaplan search` in that mode; returns the exit status. */
int mp_cmd_search_hw(int argc, char **argv);

#endif
