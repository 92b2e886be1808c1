/* mpi_launch.c — starting mpirun for `megaplan VERB --np N` (mpi_launch.h). */
#include "cli/mpi_launch.h"

#include <errno.h>
#include <signal.h>
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

/* Copies fd to standard output until its writers are gone; the errno of the
 * first failed write (0: none). After one, the rest is read and dropped, so
 * mpirun never blocks on a full pipe. */
static int copy_output(int fd)
{
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN); /* a closed reader: EPIPE, said */
    int lost = 0;
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t done = 0; !lost && done < n;) {
            ssize_t w = write(1, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                lost = w < 0 ? errno : EIO;
            else
                done += w;
        }
    }
    signal(SIGPIPE, old_pipe);
    return lost;
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
    /* mpirun forwards the ranks' standard output and ignores a failed write
     * (a full disk: the report or the profile lost, exit 0): it writes into
     * a pipe, and this process copies that to its own output, where a
     * failure is seen and said */
    int out_pipe[2];
    if (pipe(out_pipe) != 0) {
        fprintf(stderr, "megaplan %s: cannot start %s: %s\n", verb, mpirun, strerror(errno));
        free(args);
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "megaplan %s: cannot start %s: %s\n", verb, mpirun, strerror(errno));
        close(out_pipe[0]);
        close(out_pipe[1]);
        free(args);
        return 1;
    }
    if (pid == 0) {
        close(out_pipe[0]);
        if (dup2(out_pipe[1], 1) < 0)
            _exit(127);
        close(out_pipe[1]);
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        execvp(mpirun, args);
        fprintf(stderr, "megaplan %s: cannot run %s: %s (install Open MPI: openmpi-bin)\n",
                verb, mpirun, strerror(errno));
        _exit(127);
    }
    free(args);
    close(out_pipe[1]);
    int lost = copy_output(out_pipe[0]);
    close(out_pipe[0]);
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
    if (lost == EPIPE) {
        /* the reader left (| head): end as a writer to a closed pipe does */
        signal(SIGPIPE, SIG_DFL);
        raise(SIGPIPE);
    }
    if (lost) {
        fprintf(stderr, "megaplan %s: cannot write the output: %s\n", verb, strerror(lost));
        return code ? code : 1;
    }
    if (code == 1 || code == 2 || code == 0)
        return code; /* the ranks have said why */
    fprintf(stderr,
            "megaplan %s: the run failed: mpirun exited with status %d (a rank died or "
            "was killed; see mpirun's message above)\n",
            verb, code);
    return 1;
}
