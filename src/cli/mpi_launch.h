/* mpi_launch.h — the verbs that run on MPI ranks (exec, calibrate) either
 * run under a launcher (mpirun -np N megaplan VERB ...) or start mpirun
 * themselves (megaplan VERB --np N ...). */
#ifndef MP_CLI_MPI_LAUNCH_H
#define MP_CLI_MPI_LAUNCH_H

#include <stdbool.h>

/* Under mpirun (Open MPI, or a PMI launcher such as srun)? */
bool mp_cli_under_mpi_launcher(void);
/* Rank 0 of a launcher, or no launcher: the process that should speak. */
bool mp_cli_launcher_rank0(void);
/* Runs mpirun (or $MEGAPLAN_MPIRUN) with np copies of this program running
 * `verb` and the other arguments (--np dropped); the exit status to return:
 * the ranks' own 0, 1 or 2, else 1 with a line saying how the run ended. */
int mp_cli_mpirun(const char *verb, int argc, char **argv, int np);
/* The same with more arguments for the ranks (NULL-terminated; NULL: none). */
int mp_cli_mpirun_extra(const char *verb, int argc, char **argv, int np,
                        const char *const *extra);

#endif
