#!/bin/sh
# Runs the libFuzzer targets (tests/fuzz/libfuzzer.c) for SECONDS each, from the
# seed corpus tests/fuzz/corpus (files named model-, hw-, plan-, hf-). New
# inputs go to WORKDIR/<target> (kept between runs, so a long campaign resumes),
# crashes to WORKDIR/crashes. Build the targets first:
#   CC=clang meson setup build-fuzz -Dlibfuzzer=enabled -Db_sanitize=address,undefined -Db_lundef=false
#   ninja -C build-fuzz
# then, for a few seconds (CI) or for hours:
#   tools/fuzz.sh build-fuzz 15
#   tools/fuzz.sh build-fuzz 14400 fuzz-work    # 4 hours per target
# Usage: tools/fuzz.sh BUILD_DIR SECONDS [WORKDIR] [TARGET...]
# FUZZ_SEED and FUZZ_RUNS (environment) make a run reproducible: the same
# seed, corpus and binary mutate the same inputs in the same order, so CI's
# short run passes or fails the same way every time (SECONDS then only caps it).
set -u
build=${1:?usage: tools/fuzz.sh BUILD_DIR SECONDS [WORKDIR] [TARGET...]}
seconds=${2:?usage: tools/fuzz.sh BUILD_DIR SECONDS [WORKDIR] [TARGET...]}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d)}
[ $# -ge 3 ] && shift 3 || shift $#
targets=${*:-model hw plan hf}
mkdir -p "$work/crashes"
status=0
for t in $targets; do
  exe=$build/tests/fuzz/libfuzz_$t
  [ -x "$exe" ] || { echo "fuzz.sh: no $exe (configure with -Dlibfuzzer=enabled and CC=clang)"; exit 2; }
  mkdir -p "$work/$t"
  # the seeds of this reader; libFuzzer writes what it finds into the first folder
  for f in "$root"/tests/fuzz/corpus/"$t"-*; do cp -n "$f" "$work/$t/" 2>/dev/null; done
  echo "fuzz.sh: $t for $seconds s"
  # shellcheck disable=SC2086
  "$exe" -max_total_time="$seconds" ${FUZZ_SEED:+-seed=$FUZZ_SEED} ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} \
    -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 -artifact_prefix="$work/crashes/$t-" "$work/$t" 2>"$work/$t.log"
  rc=$?
  tail -n 12 "$work/$t.log"
  if [ $rc -ne 0 ]; then
    echo "fuzz.sh: $t FAILED (exit $rc); inputs in $work/crashes"
    status=1
  fi
done
exit $status
