#!/bin/sh
# check_sustain.sh BENCH_GEMM_SUSTAIN — what bench_gemm_sustain does where no
# GPU runs it: a bad argument is refused with its usage line and exit 2
# before any device is touched; without a CUDA device it exits 77 with one
# line; with one, a 2-second run writes its header, a window row per quarter
# second and the summary line (tools/gpu-check.sh, step h, runs 45 s).
b=$1
out=$(mktemp) || exit 99
trap 'rm -f "$out"' EXIT
fail() { echo "check_sustain: $*"; exit 1; }
for bad in 1 700 "x" "10 0 8 8"; do
    # shellcheck disable=SC2086 # each case is several arguments
    "$b" $bad >"$out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "'$bad': exit $rc, not 2"
    grep -q '^usage: bench_gemm_sustain' "$out" || fail "'$bad': no usage line"
done
"$b" 2 256 256 256 >"$out" 2>&1
rc=$?
if [ "$rc" -eq 77 ]; then
    if [ "$(wc -l <"$out")" -ne 1 ] || ! grep -q 'no CUDA device' "$out"; then
        fail "without a device: $(cat "$out")"
    fi
    echo "no CUDA device: exit 77 with one line, as meant"
    exit 0
fi
[ "$rc" -eq 0 ] || fail "2-second run: exit $rc"
grep -q '^t_s,window_ms,calls,tflops,sm_mhz,power_w,reasons$' "$out" || fail "no header"
[ "$(grep -c '^[0-9]' "$out")" -ge 4 ] || fail "fewer than 4 windows in 2 s"
grep -q '^# first second: .* sustained / first = ' "$out" || fail "no summary line"
echo "2-second run on the device: windows and summary written"
