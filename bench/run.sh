#!/usr/bin/env bash
# Runs every benchmark and prints docs/benchmarks.md:
#   bench/run.sh build > docs/benchmarks.md
# The machine is noisy: each program reports the best or median of repeats,
# and budgets are checked by the programs themselves (--check exits 1 on a miss).
set -euo pipefail
build=${1:-build}
meg="$build/megaplan"
[ -x "$meg" ] || { echo "bench/run.sh: build $build first (meson setup $build && ninja -C $build)" >&2; exit 2; }

section() { printf '\n## %s\n\nCommand: `%s`\n\n```\n' "$1" "$2"; }
run() { "$@" 2>&1 || echo "(exit $?: a budget was missed)"; }

cat <<HDR
# Benchmarks

Regenerate this page with \`bench/run.sh build > docs/benchmarks.md\` (about a minute).
Measured on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(date -u +%Y-%m-%d),
build type $(meson introspect --buildoptions "$build" 2>/dev/null | python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="buildtype"))' 2>/dev/null || echo unknown).
This machine is shared and noisy: compare ratios within one run, not absolute times across runs.

| what | budget (docs/design.md §8) |
|---|---|
| \`estimate\`, one configuration | < 1 ms |
| \`search\` 175B on 1024 GPUs, full space | < 1 s |
| \`search\` 1T on 4096 GPUs | < 3 s |
| \`search\` Mixtral 8x7B on 64 GPUs, DeepSeek-V3 on 2048 GPUs | < 2 s each |
| \`simulate\` p=64, v=2, m=1024 | < 100 ms |
| \`search\` over hardware: 70B, 5 profiles x 64..8192 GPUs | < 5 s |
| peak memory | < 200 MB |
| CPU backend GEMM vs plain OpenBLAS sgemm | ≥ 80% |
| CUDA backend GEMMs vs cuBLAS alone (8192³, random data), solo llama3-70b rank | ≥ 60% |
HDR

section "estimate: cost of one configuration" "$build/bench/bench_estimate --check"
run "$build/bench/bench_estimate" --check
echo '```'

section "search: the whole space" "$build/bench/bench_search --check --repeat 5"
run "$build/bench/bench_search" --check --repeat 5
echo '```'

section "search from the command line (wall time and peak resident memory)" "/usr/bin/time -f '%e s %M KiB' $meg search --model 175B --gpus 1024"
for args in "--model 175B --gpus 1024" "--model 1T --gpus 4096" "--model 175B --gpus 1024 --top 100"; do
  # shellcheck disable=SC2086
  r=$( { /usr/bin/time -f '%e s wall, %M KiB peak RSS' "$meg" search $args >/dev/null; } 2>&1 | tail -1)
  echo "megaplan search $args: $r"
done
echo '```'

section "search over hardware: profiles x GPU counts" "$build/bench/bench_hwchoice --check --repeat 3"
run "$build/bench/bench_hwchoice" --check --repeat 3
echo '```'

section "simulate: discrete-event engine" "$build/bench/bench_simulate --check"
run "$build/bench/bench_simulate" --check
echo '```'

if [ -x "$build/bench/bench_attention" ]; then
  section "exec CPU backend: attention by GEMMs vs by loops (one thread)" "$build/bench/bench_attention 512 4 64 3"
  run "$build/bench/bench_attention" 512 4 64 3
  echo '```'
fi

if [ -x "$build/bench/bench_gemm" ]; then
  section "exec CPU backend: GEMM path vs plain OpenBLAS sgemm (one thread)" "$build/bench/bench_gemm 768 1024 10"
  run "$build/bench/bench_gemm" 768 1024 10
  echo '```'
fi

# The GPU figures cannot be measured here: the newest run of tools/gpu-check.sh
# committed under docs/gpu/ (one H200), quoted as it came back.
gpu=$(find "$(dirname "$0")/../docs/gpu" -name summary.txt 2>/dev/null | sort | tail -1)
if [ -n "$gpu" ]; then
  dir=$(basename "$(dirname "$gpu")")
  echo
  echo "## exec CUDA backend and cuBLAS alone, on a GPU (docs/gpu/$dir)"
  echo
  echo "Not measured by this script (no GPU here): the newest \`tools/gpu-check.sh\` run on one"
  echo "H200, quoted from docs/gpu/$dir/summary.txt. Commands: \`megaplan exec"
  echo "tools/gpu/llama3-70b-tp8-pp8.yaml --backend cuda --solo 56 --steps 2 --compare h200\`,"
  echo "\`megaplan calibrate --backend cuda\`, \`build-gpu/bench/bench_gemm_cuda\` (docs/gpu/README.md)."
  echo
  echo '```'
  grep -E '^(  gemm|  step|  compute|  MFU|  gemm sweep|#   )' "$gpu"
  echo '```'
fi
