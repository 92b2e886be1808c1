/* plan_share.h — every rank runs the plan the launcher checked: rank 0 reads
 * the plan file once and broadcasts its bytes, and the ranks make sure they
 * were all started with the same arguments. (A file read by every rank can
 * change between the reads, and ranks that parse different plans disagree on
 * every message size: MPI_ERR_TRUNCATE, then memory corruption.) */
#ifndef MP_EXEC_PLAN_SHARE_H
#define MP_EXEC_PLAN_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/plan.h"
#include "exec/runtime.h"

/* 64-bit FNV-1a of bytes (an integrity check of a launch, not a defence). */
uint64_t mp_exec_hash_bytes(const void *data, size_t len, uint64_t seed);
/* The same over argv[1..argc) with a separator, so ("ab", "c") != ("a", "bc"). */
uint64_t mp_exec_hash_args(int argc, char **argv);

/* Collective over the world. Rank 0 reads `path`; when `checked` is set its
 * hash must equal `checked_hash` (what `exec --np` checked before starting
 * the ranks), else the file changed in between and every rank gets the same
 * refusal. Every rank then parses the broadcast bytes into *out, so all get
 * the same plan or the same error. args_hash: this rank's mp_exec_hash_args;
 * ranks started with arguments other than rank 0's are refused (exit 2). */
mp_status mp_exec_share_plan(const mp_runtime *rt, const char *path, bool checked,
                             uint64_t checked_hash, uint64_t args_hash, mp_plan *out,
                             mp_error *err);

#endif
