/* plan_share.c — rank 0 reads the plan and broadcasts it (plan_share.h). */
#include "exec/plan_share.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/io.h"
#include "exec/backend.h"

uint64_t mp_exec_hash_bytes(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t mp_exec_hash_args(int argc, char **argv)
{
    uint64_t h = 0;
    for (int i = 1; i < argc; i++)
        h = mp_exec_hash_bytes(argv[i], strlen(argv[i]) + 1, h); /* the NUL separates */
    return h;
}

/* Rank 0's verdict, broadcast so that every rank returns the same status. */
typedef struct verdict {
    int status;   /* mp_status of reading the file on rank 0 */
    int len;      /* bytes that follow */
} verdict;

mp_status mp_exec_share_plan(const mp_runtime *rt, const char *path, bool checked,
                             uint64_t checked_hash, uint64_t args_hash, mp_plan *out,
                             mp_error *err)
{
    /* the same command line on every rank (mpirun's MPMD form can start
     * ranks with different files or options) */
    const mp_backend *host = mp_backend_cpu(); /* the host's collectives, over the world */
    const mp_group *world = &rt->world;
    uint64_t root_args = args_hash;
    mp_status cst = host->bcast(world, &root_args, sizeof root_args, 0, err);
    if (cst)
        return cst;
    double first = root_args != args_hash ? rt->world.rank : -1; /* a rank: exact in a double */
    if ((cst = host->allreduce(world, MP_REAL64, &first, 1, MP_RED_MAX, err)))
        return cst;
    if (first >= 0)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, NULL,
                            "rank %d was started with other arguments than rank 0 (a plan "
                            "file or option differs): every rank must run the same command",
                            (int)first);

    char *text = NULL;
    size_t len = 0;
    mp_status st = MP_OK;
    if (rt->world.rank == 0) {
        st = mp_read_file(path, MP_MAX_INPUT_BYTES, &text, &len, err);
        uint64_t h = st ? 0 : mp_exec_hash_bytes(text, len, 0);
        if (!st && checked && h != checked_hash)
            st = mp_error_set(err, MP_EINPUT, path, 0, 0, NULL,
                              "the plan changed after megaplan checked it (hash %016" PRIx64
                              ", checked %016" PRIx64 "): nothing ran; start it again",
                              h, checked_hash);
    }
    verdict v = {(int)st, (int)len};
    if ((cst = host->bcast(world, &v, sizeof v, 0, err))) {
        free(text);
        return cst;
    }
    if (v.status != MP_OK) {
        free(text);
        if (rt->world.rank != 0) /* rank 0 has the message; the others the same status */
            mp_error_set(err, (mp_status)v.status, path, 0, 0, NULL,
                         "rank 0 could not read the plan");
        return (mp_status)v.status;
    }
    if (rt->world.rank != 0) {
        text = malloc((size_t)v.len + 1);
        if (!text) /* one rank alone: the caller ends every rank */
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the plan");
        text[v.len] = 0;
    }
    if ((cst = host->bcast(world, text, (size_t)v.len, 0, err))) {
        free(text);
        return cst;
    }
    st = mp_plan_parse_yaml(text, (size_t)v.len, path, out, err);
    free(text);
    return st;
}
