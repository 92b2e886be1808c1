/* cuda_handoff.c — `exec` and `calibrate` with --backend cuda run in
 * megaplan-cuda, the same program with the CUDA backend linked in, installed
 * beside megaplan (meson.build says why it is apart). */
#include "cli/cuda_handoff.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if !defined(MP_WITH_CUDA) && !defined(MP_CUDA_HOST_SHIM)
static bool wants_cuda(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc && !strcmp(argv[i + 1], "cuda"))
            return true;
        if (!strcmp(argv[i], "--backend=cuda"))
            return true;
    }
    return false;
}
#endif

int mp_cli_cuda_handoff(int argc, char **argv, char **argv_from_main)
{
#if defined(MP_WITH_CUDA) || defined(MP_CUDA_HOST_SHIM)
    (void)argc, (void)argv, (void)argv_from_main;
    return -1; /* this is the CUDA build */
#else
    if (!wants_cuda(argc, argv))
        return -1;
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    char cuda[PATH_MAX];
    int w = snprintf(cuda, sizeof cuda, "%.*s/megaplan-cuda", (int)(slash - self), self);
    if (w < 0 || (size_t)w >= sizeof cuda || access(cuda, X_OK) != 0)
        return -1; /* not built: the verb says so itself */
    argv_from_main[0] = cuda;
    execv(cuda, argv_from_main);
    fprintf(stderr, "megaplan: cannot run %s: %s\n", cuda, strerror(errno));
    return 1;
#endif
}
