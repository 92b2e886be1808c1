/* mpi_launch.c — starting mpirun for `megaplan VERB --np N` (mpi_launch.h). */
#include "cli/mpi_launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

bool mp_cli_under_mpi_launcher(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

bool mp_cli_launcher_rank0(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMI_RANK");
    return !r || !strcmp(r, "0");
}

int mp_cli_mpirun(const char *verb, int argc, char **argv, int np)
{
    return mp_cli_mpirun_extra(verb, argc, argv, np, NULL);
}

int mp_cli_mpirun_extra(const char *verb, int argc, char **argv, int np,
                        const char *const *extra)
{
    int n_extra = 0;
    while (extra && extra[n_extra])
        n_extra++;
    const char *mpirun = getenv("MEGAPLAN_MPIRUN");
    if (!mpirun || !*mpirun)
        mpirun = "mpirun";
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        fprintf(stderr, "megaplan %s: cannot find this program's path to start the ranks\n", verb);
        return 1;
    }
    self[len] = 0;
    char npbuf[16];
    snprintf(npbuf, sizeof npbuf, "%d", np);
    char **args = calloc((size_t)argc + (size_t)n_extra + 16, sizeof *args);
    if (!args) {
        fprintf(stderr, "megaplan %s: out of memory\n", verb);
        return 1;
    }
    int k = 0;
    args[k++] = (char *)mpirun;
    if (geteuid() == 0)
        args[k++] = "--allow-run-as-root";
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1 || np > cores)
        args[k++] = "--oversubscribe";
    args[k++] = "-np";
    args[k++] = npbuf;
    args[k++] = self;
    args[k++] = (char *)verb;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--np")) {
            i++;
            continue;
        }
        if (!strncmp(argv[i], "--np=", 5))
            continue;
        args[k++] = argv[i];
    }
    for (int i = 0; i < n_extra; i++)
        args[k++] = (char *)extra[i];
    args[k] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "megaplan %s: cannot start %s: %s\n", verb, mpirun, strerror(errno));
        free(args);
        return 1;
    }
    if (pid == 0) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        execvp(mpirun, args);
        fprintf(stderr, "megaplan %s: cannot run %s: %s (install Open MPI: openmpi-bin)\n",
                verb, mpirun, strerror(errno));
        _exit(127);
    }
    free(args);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "megaplan %s: lost track of mpirun: %s\n", verb, strerror(errno));
            return 1;
        }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "megaplan %s: mpirun was killed by signal %d\n", verb, WTERMSIG(status));
        return 1;
    }
    int code = WEXITSTATUS(status);
    if (code == 127)
        return 1;
    if (code == 1 || code == 2 || code == 0)
        return code; /* the ranks have said why */
    fprintf(stderr,
            "megaplan %s: the run failed: mpirun exited with status %d (a rank died or "
            "was killed; see mpirun's message above)\n",
            verb, code);
    return 1;
}
