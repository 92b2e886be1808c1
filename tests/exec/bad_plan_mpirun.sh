#!/bin/sh
# bad_plan_mpirun.sh MEGAPLAN TEMPLATE — a bad plan under the user's own
# `mpirun -np 2 megaplan exec PLAN` (no --np): one line from megaplan naming
# file, line and field, exit 2, no MPI_ABORT, no crash, no hang, and nothing
# left where --trace would have written. Every rank reads and checks the plan
# before MPI_Init; before, rank 0 read it after MPI_Init, and the checks that
# `exec --np` and the in-process path make first (the plan's ranks, the
# executor's shapes, memory) ran only inside the MPI job.
set -u
megaplan=$1 template=$2
. "$(dirname "$0")/../lib.sh"
megaplan=$(abs_path "$megaplan") template=$(abs_path "$template")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
cd "$T" || exit 99
sed -e "s/@TP@/1/; s/@SP@/false/; s/@DP@/2/; s/@PP@/1/; s/@DISTOPT@/false/" \
    -e "s/@GPUS@/2/; s/@GB@/4/; s/@MB@/1/; s/@TIED@/true/" \
    -e "s/@SCHED@/1f1b/; s/@LAYERS@/2/; s/@VPP@/1/; s/@CP@/1/; s/@HW@/dgx-a100/; s/@KV@/2/" \
    "$template" > good.yaml || exit 99
grep -q '^  layers: 2$' good.yaml && grep -q '^  activation: gelu$' good.yaml &&
    grep -q 'dp: 2, micro_batch' good.yaml || { echo "template changed"; exit 99; }

sed 's/^  layers: 2$/  layers: two/' good.yaml > type.yaml
sed 's/dp: 2, micro_batch/dp: 2, bogus: 1, micro_batch/' good.yaml > unknown.yaml
sed 's/^  activation: gelu$/  activation: relu/' good.yaml > shape.yaml
sed 's/^  layers: 2$/  layers: [/' good.yaml > syntax.yaml
head -c 300 good.yaml > truncated.yaml
sed 's/gpus: 2,/gpus: 4,/; s/dp: 2, micro_batch/dp: 4, micro_batch/; s/global_batch: 4/global_batch: 8/' \
    good.yaml > ranks.yaml
: > empty.yaml
mkdir folder.yaml

# case NAME FILE REGEX [NP]: exit 2, one line of megaplan's, matching REGEX
case_() {
    name=$1 file=$2 want=$3 np=${4:-2}
    rm -rf out && mkdir out
    timeout 60 mpirun --oversubscribe -np "$np" "$megaplan" exec "$file" --steps 1 \
        --trace out/trace.json >o.txt 2>&1
    rc=$?
    n=$(grep -c '^megaplan' o.txt)
    if [ $rc -ne 2 ]; then bad "$name: exit $rc, wanted 2: $(cat o.txt)"
    elif [ "$n" -ne 1 ]; then bad "$name: $n lines of megaplan's, wanted 1: $(cat o.txt)"
    elif ! grep -Eq -- "^megaplan exec: $want" o.txt; then
        bad "$name: wanted /$want/: $(grep '^megaplan' o.txt)"
    elif grep -Eq 'MPI_ABORT|AddressSanitizer|runtime error|Segmentation|core dumped' o.txt; then
        bad "$name: crash or abort: $(cat o.txt)"
    elif [ -n "$(ls -A out)" ]; then bad "$name: left in the output folder: $(ls -A out)"
    else ok; fi
}
case_ type type.yaml 'type\.yaml:6:11: model\.layers: expected an integer'
case_ unknown unknown.yaml 'unknown\.yaml:[0-9]+:[0-9]+: parallel\.bogus: unknown key'
case_ shape shape.yaml 'shape\.yaml:[0-9]+:[0-9]+: model\.activation: activation relu is not supported by this executor'
case_ syntax syntax.yaml 'syntax\.yaml:[0-9]+:[0-9]+: [a-z_.]+: YAML syntax error'
case_ truncated truncated.yaml 'truncated\.yaml:[0-9]+:[0-9]+: [a-z_.]+: YAML syntax error'
case_ empty empty.yaml 'empty\.yaml:1:1: [a-z_.]+: expected a plan'
case_ folder folder.yaml 'folder\.yaml: cannot read: Is a directory'
case_ missing missing.yaml 'missing\.yaml: cannot read: No such file'
# a plan of 4 ranks started on 2: refused before MPI_Init too, by the plan's field
case_ ranks ranks.yaml 'ranks\.yaml:[0-9]+:[0-9]+: training\.gpus: the plan needs 4 ranks .* but MPI started 2'
# a run that would not fit: refused by the memory gate before MPI_Init
rm -rf out && mkdir out
timeout 60 mpirun --oversubscribe -np 2 "$megaplan" exec good.yaml --steps 1 \
    --test-memory-available 0.001 >o.txt 2>&1
rc=$?
if [ $rc -eq 2 ] && [ "$(grep -c '^megaplan' o.txt)" -eq 1 ] &&
    grep -q '^megaplan exec: good\.yaml:[0-9]*:[0-9]*: model: the run needs about' o.txt &&
    ! grep -Eq 'MPI_ABORT|AddressSanitizer|runtime error' o.txt; then ok
else bad "memory: exit $rc: $(cat o.txt)"; fi
# mpirun's MPMD form, rank 1 given a bad plan: rank 1 says why (rank 0's plan is good)
rm -rf out && mkdir out
timeout 60 mpirun --oversubscribe -np 1 "$megaplan" exec good.yaml --steps 1 : \
    -np 1 "$megaplan" exec type.yaml --steps 1 >o.txt 2>&1
rc=$?
if [ $rc -eq 2 ] && [ "$(grep -c '^megaplan' o.txt)" -eq 1 ] &&
    grep -q '^megaplan exec: rank 1: type\.yaml:6:11: model\.layers' o.txt; then ok
else bad "mpmd: exit $rc: $(cat o.txt)"; fi
# a rank on a node without the file (here: another working folder) runs
# rank 0's bytes, as before every rank checked
mkdir elsewhere
timeout 60 mpirun --oversubscribe -np 1 --wdir "$T" "$megaplan" exec good.yaml --steps 1 : \
    -np 1 --wdir "$T/elsewhere" "$megaplan" exec good.yaml --steps 1 >o.txt 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^OK: ' o.txt; then ok; else bad "no file on rank 1: exit $rc: $(cat o.txt)"; fi
# the good plan still runs under mpirun, its trace written
rm -rf out && mkdir out
timeout 60 mpirun --oversubscribe -np 2 "$megaplan" exec good.yaml --steps 1 \
    --trace out/trace.json >o.txt 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^OK: ' o.txt && [ -s out/trace.json ]; then ok
else bad "good: exit $rc: $(cat o.txt)"; fi
finish
