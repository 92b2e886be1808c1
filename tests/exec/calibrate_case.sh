#!/bin/sh
# calibrate_case.sh MEGAPLAN TEMPLATE — `megaplan calibrate --np 2` writes a
# profile that the planner reads back (hw, estimate --hw), and `exec --compare`
# on it sets every phase of a run against the simulator (table and JSON); a
# profile that does not exist is refused before any rank starts.
set -u
megaplan=$1 template=$2
. "$(dirname "$0")/../lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

timeout 60 "$megaplan" calibrate --np 2 -o "$T/cpu.yaml" --name test-cpu || fail "calibrate"
cat "$T/cpu.yaml"
grep -q '^name: test-cpu$' "$T/cpu.yaml" || fail "profile name"
grep -Eq '^# +fp32 GEMM, square side: GFLOP/s per rank: 16: ' "$T/cpu.yaml" || fail "GEMM record"
grep -Eq '^# +all-reduce over 2 ranks' "$T/cpu.yaml" || fail "all-reduce record"
grep -Eq '^# +fp32 GEMM of side 8, 64 back to back: [0-9.e+-]+ us a call$' "$T/cpu.yaml" ||
    fail "per-call floor record"
grep -Eq '^gemm_call_overhead: [0-9.]+ (ns|us)$' "$T/cpu.yaml" || fail "gemm_call_overhead"
"$megaplan" hw "$T/cpu.yaml" >/dev/null || fail "the profile does not load"
"$megaplan" estimate --model gpt3-125m --gpus 2 --hw "$T/cpu.yaml" --precision fp32 \
    --global-batch 4 --tp 2 >/dev/null || fail "estimate on the profile"

sed -e "s/@TP@/2/; s/@SP@/false/; s/@DP@/1/; s/@PP@/1/; s/@DISTOPT@/false/; s/@GPUS@/2/" \
    -e "s/@GB@/4/; s/@MB@/2/; s/@TIED@/true/; s/@SCHED@/1f1b/; s/@LAYERS@/2/; s/@VPP@/1/" \
    -e "s/@CP@/1/; s/@HW@/dgx-a100/" "$template" > "$T/plan.yaml"
timeout 60 mpirun --oversubscribe -np 2 "$megaplan" exec "$T/plan.yaml" --exact \
    --compare "$T/cpu.yaml" --format json > "$T/json" 2>"$T/out"
rc=$?
cat "$T/out" "$T/json"
[ $rc -eq 0 ] || fail "exec --compare exited $rc"
grep -q '^compare: the last step against the simulator on test-cpu' "$T/out" || fail "no table"
for row in 'step' 'compute \(F \+ B\)' 'TP/SP collectives' 'optimizer'; do
    grep -Eq "^  $row +[0-9.]+ +[0-9.]+ +[0-9.-]+$" "$T/out" || fail "no row $row"
done
# --format json: the table on stderr, the JSON line alone on stdout
grep -Eq '^\{"ok": true, .*"compare": \{"step": \[[0-9.e-]+, [0-9.e-]+\], "compute": ' \
    "$T/json" || fail "no compare object in the JSON line"
[ "$(wc -l <"$T/json")" -eq 1 ] || fail "stdout holds more than the JSON line"

# ranks that outnumber the cores share them: the comparison says its times are not a measurement
sed -e "s/@TP@/2/; s/@SP@/false/; s/@DP@/2/; s/@PP@/1/; s/@DISTOPT@/false/; s/@GPUS@/4/" \
    -e "s/@GB@/4/; s/@MB@/1/; s/@TIED@/true/; s/@SCHED@/1f1b/; s/@LAYERS@/2/; s/@VPP@/1/" \
    -e "s/@CP@/1/; s/@HW@/dgx-a100/" "$template" > "$T/plan4.yaml"
timeout 60 mpirun --oversubscribe -np 4 "$megaplan" exec "$T/plan4.yaml" --exact \
    --compare "$T/cpu.yaml" > "$T/out4" 2>&1 || fail "exec --compare on 4 ranks exited $?"
grep -v "^param:" "$T/out4" | tail -4
cores=$(getconf _NPROCESSORS_ONLN)
if [ "$cores" -lt 4 ]; then
  grep -q "^warning: 4 ranks on $cores cores: ranks share cores" "$T/out4" || fail "no warning: 4 ranks on $cores cores"
else
  ! grep -q "warning: .* ranks on" "$T/out4" || fail "a warning with 4 ranks on $cores cores"
fi

"$megaplan" exec --np 2 "$T/plan.yaml" --compare "$T/missing.yaml" > "$T/out2" 2>&1
rc=$?
cat "$T/out2"
[ $rc -eq 2 ] || fail "a missing profile exited $rc, not 2"
grep -q 'missing\.yaml' "$T/out2" || fail "the refusal does not name the file"
echo "calibrate_case.sh: PASS"
