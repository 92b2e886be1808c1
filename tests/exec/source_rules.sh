#!/bin/sh
# source_rules.sh SRC — two rules of the executor's source, by grep:
#  1. MPI is called only in the MPI-specific backend and runtime files below;
#     the driver and the check go through the backend table (backend.h).
#  2. No RN() macro and no file that includes itself: precision variants are
#     plain C names compiled twice by meson (src/exec/real.h, real_names.h).
set -u
src=$1
. "$(dirname "$0")/../lib.sh"
# --self-test SRC: the rules run on a copy of SRC with one MPI call, one RN()
# and one self-inclusion planted in exec.c, and must report all three
if [ "$src" = --self-test ]; then
    mkdir -p "$T/tree/src" && cp -r "$2/src/." "$T/tree/src/" || fail "cannot copy $2/src"
    printf '%s\n' 'static int planted(void) { return MPI_Barrier(0); }' \
        'static int RN(planted2)(void) { return 0; }' '#include "exec/exec.c"' \
        >>"$T/tree/src/exec/exec.c"
    sh "$0" "$T/tree" >"$T/out" 2>&1 && fail "the planted faults passed"
    for what in 'exec.c calls MPI directly' 'RN() is back' 'exec.c includes itself'; do
        contains "$T/out" "$what"
    done
    finish
fi

# The files that may call MPI: the backends' transports and the runtime's
# start-up and groups (T5's and MoE's groups too: t5_groups.c, moe_plan.c). Listed as "not yet" are callers still to move onto
# the table (each a setup or re-sync step outside exec.c and check.c).
allowed='src/exec/backend_cpu.c src/exec/backend_cuda.c src/exec/coll_mpi.c src/exec/alltoall_mpi.c
src/exec/p2p_mpi.c src/exec/runtime.c src/exec/watchdog.c src/exec/mpi_util.h
src/exec/t5_groups.c src/exec/moe_plan.c'
not_yet='src/exec/calibrate.c src/exec/ref_sync.c src/cli/exec.c
src/cli/calibrate.c'
# a call: MPI_Name( on a line that is not a comment's
calls() { grep -nE '\bMPI_[A-Za-z_]+[[:space:]]*\(' "$1" | grep -vE '^[0-9]+:[[:space:]]*(/?\*|//)'; }
for f in $(cd "$src" && ls src/*/*.c src/*/*.h); do
    case " $(echo $allowed $not_yet) " in *" $f "*) continue ;; esac
    found=$(calls "$src/$f" | head -3 | tr '\n' ' ')
    [ -z "$found" ] && ok || bad "$f calls MPI directly: $found"
done

hits=$(cd "$src" && grep -nE '\bRN\(' src/exec/*.c src/exec/*.h | head -3)
[ -z "$hits" ] && ok || bad "RN() is back (plain names and real_names.h instead): $hits"
for f in "$src"/src/exec/*.c; do
    b=$(basename "$f")
    if grep -q "^#include \"exec/$b\"" "$f"; then bad "src/exec/$b includes itself"; else ok; fi
done

finish
