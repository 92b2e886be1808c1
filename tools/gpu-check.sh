#!/usr/bin/env bash
# shellcheck disable=SC2317 # the check steps are functions run through check()
# tools/gpu-check.sh — the CUDA backend's check on one GPU (an H200), in at
# most ~7 minutes (docs/exec.md, "The GPU check"):
#   (a) build with CUDA (meson -Dcuda=enabled -Dnccl=enabled)
#   (b) every kernel against the CPU function, on the device (meson's suite
#       gpu: tests/kernels' kernels-cuda)
#   (c) exec --backend cuda --exact, bitwise against the CPU reference: GPT,
#       LLaMA and BERT on one rank, and tp2 dp2 pp2 (8 ranks on the one GPU:
#       collectives by MPI through host buffers)
#   (d) a bf16 tolerance run (bf16 GEMMs against the fp64 reference)
#   (d') mixture of experts (the experts' GEMMs by one
#       cublasGemmGroupedBatchedEx per product), --exact, bitwise: the tiny
#       MoE on one rank and at EP 2 x DP 2 (all-to-all by MPI on the one
#       GPU), tiny-deepseek's
#       group-limited routing at EP 2 x TP 2 with etp 1, and EP 2 over NCCL's
#       grouped send/receive when there are two GPUs (skipped on one)
#   (d'') multi-token prediction, --exact, bitwise: tiny-llama with two MTP
#       modules on one rank and at TP 2 x CP 2 with SP (the CP roll's
#       exchange), tiny-deepseek's module (latent attention + MoE) over PP 2
#   (d''') GPT-OSS (kernels/oss.cu), --exact, bitwise: tiny-oss (windows,
#       sinks, biases, the clamped SwiGLU, MoE) on one rank and at TP 2 x EP 2
#       x DP 2 with SP
#   (d''''') heads of their own width (Qwen3's, with QK-norm) and a hidden size
#       no multiple of the heads, --exact, bitwise, at TP 2 x CP 2 and TP 2 x DP 2
#   (d'''') T5 (kernels/t5.cu: ReLU, the relative position bias), --exact,
#       bitwise: tiny-t5 on one rank and at PP 2 x TP 2 with SP x DP 2
#   (e) exec --backend cuda --solo 56 on llama3-70b tp8 pp8 (its last pipeline
#       stage at full size) with --compare h200: phase by phase, MFU, and the
#       executor's GEMM rate against cuBLAS alone (the 60% check)
#   (f) calibrate --backend cuda -o: this GPU as a hardware profile
#   (g) bench/bench_gemm_cuda: cuBLAS alone on Megatron's layer GEMMs (fprop,
#       dgrad, wgrad of five models at tp 1-8, 2k-16k tokens), the per-call
#       floor, copy bandwidth and the fprops split as TE's TP overlap splits
#       them (what each further call costs: the profiles' gemm_call_overhead),
#       into OUTDIR/gemm-sweep.csv
#   (h) bench/bench_gemm_sustain: one layer GEMM (LLaMA 3 70B's FFN 1 at t 4,
#       8k tokens) back to back for 45 s, its rate each quarter second beside
#       NVML's SM clock, power and clock-limit reasons: the rate a step
#       sustains against the few-call rate (g) and the matmul searches give,
#       into OUTDIR/gemm-sustain.csv
#
# usage: tools/gpu-check.sh [OUTDIR]      (default docs/gpu/<UTC date>)
# Writes OUTDIR/summary.txt (one line per check), OUTDIR/gpu-check.log (all
# output), OUTDIR/solo.txt, OUTDIR/h200-calibrated.yaml, OUTDIR/gemm-sweep.csv and
# OUTDIR/gemm-sustain.csv: six files, which the device tool's $OUT brings back. Exit status: the number of failed checks.
#
# The GPU machine has nvcc, the CUDA libraries, meson, ninja and NCCL (pip's
# nvidia-nccl) but no Debian -dev packages and no MPI: when pkg-config cannot
# find libyaml or mpirun is missing, the packages that tools/gpu-deps.sh
# downloaded into .gpu/debs are unpacked with dpkg -x into a private prefix
# (GPU_CHECK_DEBS=1 uses them anyway: how the script is tried without a GPU).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 99
out=${1:-docs/gpu/$(date -u +%Y-%m-%d)}
mkdir -p "$out" || exit 99
out=$(cd "$out" && pwd)
log=$out/gpu-check.log
summary=$out/summary.txt
: >"$log"
: >"$summary"
failed=0
start=$SECONDS

note() { echo "$*" | tee -a "$summary"; }

# check NAME SECONDS CMD...: runs CMD (a program, or a function of this
# script: they are exported) in bash under timeout, which ends its whole
# process group (mpirun and ranks too) at the limit; output to the log; one
# PASS/FAIL/SKIP line in the summary (exit 77 is a skip).
check() {
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    echo "==== $name: $*" >>"$log"
    timeout --kill-after=10 "$limit" bash -c '"$@"' check "$@" >>"$log" 2>&1
    rc=$?
    local took=$((SECONDS - t0))
    if [ "$rc" -eq 0 ]; then
        note "PASS $name (${took}s)"
    elif [ "$rc" -eq 77 ]; then
        note "SKIP $name (${took}s)"
    else
        note "FAIL $name (exit $rc after ${took}s; see gpu-check.log)"
        failed=$((failed + 1))
    fi
    return "$rc"
}

# ---- what the machine lacks: Debian packages unpacked into a prefix ----
prefix=/tmp/megaplan-gpu-prefix
multiarch=x86_64-linux-gnu
setup_deps() {
    if [ -z "${GPU_CHECK_DEBS:-}" ] && pkg-config --exists yaml-0.1 libcjson ompi-c 2>/dev/null &&
        command -v mpirun >/dev/null; then
        echo "system packages suffice"
        return 0
    fi
    local debs=$root/.gpu/debs
    if ! ls "$debs"/*.deb >/dev/null 2>&1; then
        echo "no .gpu/debs: run tools/gpu-deps.sh where apt works and carry .gpu"
        return 1
    fi
    rm -rf "$prefix"
    mkdir -p "$prefix/bin"
    local f
    for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix" || return 1; done
    # .pc files name /usr: point them at the prefix
    find "$prefix/usr" -type f -name '*.pc' -exec sed -i "s#/usr#$prefix/usr#g" {} +
    # Debian's alternatives (mpirun, pkg-config, libopenblas.so.0) are not in the packages
    ln -sf "$prefix/usr/bin/mpirun.openmpi" "$prefix/bin/mpirun"
    ln -sf "$prefix/usr/bin/pkgconf" "$prefix/bin/pkg-config"
    echo "unpacked $(find "$debs" -name '*.deb' | wc -l) packages into $prefix"
}
export_deps() {
    local lib=$prefix/usr/lib/$multiarch
    export PATH=$prefix/bin:$prefix/usr/bin:$PATH
    export PKG_CONFIG_PATH=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:$lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LIBRARY_PATH=$LD_LIBRARY_PATH
    export CPATH=$prefix/usr/include:$prefix/usr/include/$multiarch
    # Open MPI and PMIx from a prefix other than the one they were built for
    export OPAL_PREFIX=$prefix/usr OPAL_EXEC_PREFIX=$prefix/usr OPAL_BINDIR=$prefix/usr/bin
    export OPAL_LIBDIR=$lib/openmpi/lib OPAL_DATADIR=$prefix/usr/share
    export OPAL_PKGDATADIR=$prefix/usr/share/openmpi OPAL_SYSCONFDIR=$prefix/etc/openmpi
    export OMPI_MCA_mca_base_component_path=$lib/openmpi/lib/openmpi3
    export PMIX_INSTALL_PREFIX=$prefix/usr
    export PMIX_MCA_mca_base_component_path=$lib/pmix2/lib/pmix
}
# One node, shared memory only; ptrace-based single copy is not allowed in VMs.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_osc=^ucx
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1

# NCCL from pip (nvidia-nccl-cu13/cu12): a folder meson's NCCL_HOME can read
setup_nccl() {
    local dir
    dir=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) || dir=
    if [ -z "$dir" ] || [ ! -f "$dir/include/nccl.h" ]; then
        echo "no pip NCCL; the toolkit's, if any"
        return 0
    fi
    mkdir -p "$prefix/nccl/lib"
    ln -sfn "$dir/include" "$prefix/nccl/include"
    local so
    so=$(find "$dir/lib" -name 'libnccl.so*' | head -1)
    ln -sf "$so" "$prefix/nccl/lib/libnccl.so"
    export NCCL_HOME=$prefix/nccl
    export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "NCCL: $so"
}

export root out prefix multiarch
export -f setup_deps setup_nccl

{
    # GPU_CHECK_COMMIT: the commit the tree is, where the machine's copy of
    # .git does not know it (the device tool copies the working tree)
    echo "megaplan gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}"
    if command -v nvidia-smi >/dev/null; then nvidia-smi -L; else echo "no nvidia-smi"; fi
    if command -v nvcc >/dev/null; then nvcc --version | tail -1; else echo "no nvcc on PATH"; fi
} | tee -a "$log" >"$summary"

check deps 60 setup_deps || true
export_deps
setup_nccl >>"$log" 2>&1

# ---- (a) build ----
bdir=$root/build-gpu
export bdir
build() {
    [ -f "$bdir/build.ninja" ] ||
        meson setup "$bdir" -Dcuda=enabled -Dnccl=enabled -Dwerror=false -Dgnuplot=disabled \
            -Dtests=auto || return 1
    ninja -C "$bdir" -j "$(nproc)"
}
export -f build
if ! check build "${GPU_CHECK_BUILD_SECONDS:-240}" build; then
    note "the build failed: nothing else can run"
    exit "$failed"
fi
mp=$bdir/megaplan
export bdir mp
{ grep -q 'HAVE_EXEC_CUDA 1' "$bdir/megaplan_config.h" && [ -x "$bdir/megaplan-cuda" ]; } ||
  note "FAIL build: the CUDA backend (megaplan-cuda) was not built"

# ---- (b) the kernels against the CPU functions, on the device ----
kernels_device() {
    # introspect, not `test --list`: the GPU image's meson printed a list the
    # old grep did not match, and the check skipped (docs/gpu/2026-12-04-a)
    if ! meson introspect "$bdir" --tests 2>/dev/null | grep -q '"kernels-cuda"'; then
        echo "no gpu suite in this build (tests/kernels' kernels-cuda)"
        return 77
    fi
    meson test -C "$bdir" --suite gpu --print-errorlogs --num-processes 4
}
export -f kernels_device
check kernels-on-device 60 kernels_device

# ---- (c) exact mode, bitwise; (d) bf16 tolerance ----
case_sh=$root/tests/exec/mpi_case.sh
plans=$root/tests/exec/plans
check exact-gpt-tp1 60 sh "$case_sh" "$mp" "$plans/tiny.yaml.in" ok 1 1 false 1 false \
    -- --backend cuda --exact
check exact-llama-tp1 60 sh "$case_sh" "$mp" "$plans/tiny-llama.yaml.in" ok 1 1 false 1 false \
    -- --backend cuda --exact
check exact-bert-tp1 60 sh "$case_sh" "$mp" "$plans/tiny-bert.yaml.in" ok 1 1 false 1 false \
    -- --backend cuda --exact
check exact-tp2-dp2-pp2-mpi 90 sh "$case_sh" "$mp" "$plans/tiny.yaml.in" ok 8 2 true 2 true \
    PP=2 M=4 'WANT=transport: collectives by mpi' -- --backend cuda --exact
bf16_plan=$(mktemp --suffix=.yaml.in)
sed 's/precision: fp32/precision: bf16/' "$plans/tiny.yaml.in" >"$bf16_plan"
check bf16-tolerance-tp2-dp2 60 sh "$case_sh" "$mp" "$bf16_plan" ok 4 2 true 2 false \
    'WANT=cuda backend, bf16' -- --backend cuda
rm -f "$bf16_plan"
grep -E '^(OK|MISMATCH): ' "$log" | tail -1 | sed 's/^/  bf16: /' >>"$summary"

# ---- (d') mixture of experts (kernels/moe.cu, the all-to-all) ----
check exact-moe-tp1 60 sh "$case_sh" "$mp" "$plans/tiny-moe.yaml.in" ok 1 1 false 1 false \
    -- --backend cuda --exact
check exact-moe-ep2-dp2-mpi 60 sh "$case_sh" "$mp" "$plans/tiny-moe.yaml.in" ok 2 1 false 2 \
    false EP=2 SHARED=1 -- --backend cuda --exact
check exact-deepseek-groups-tp2-sp-ep2-etp1 90 sh "$case_sh" "$mp" \
    "$plans/tiny-deepseek.yaml.in" ok 4 2 true 2 false EP=2 ETP=1 EXPERTS=16 TOPK=4 \
    GROUPS=4 GTOPK=2 RSCALE=2.5 BRATE=0.125 CF=1.0 -- --backend cuda --exact
moe_nccl() { # two ranks, a GPU each: the dispatch by ncclSend/ncclRecv
    local gpus
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    if [ "${gpus:-0}" -lt 2 ]; then
        echo "one GPU: NCCL refuses two ranks on it"
        return 77
    fi
    sh "$case_sh" "$mp" "$plans/tiny-moe.yaml.in" ok 2 1 false 2 false EP=2 \
        'WANT=transport: collectives by nccl' -- --backend cuda --exact
}
export case_sh plans
export -f moe_nccl
check exact-moe-ep2-nccl 60 moe_nccl

# ---- (d'') multi-token prediction (mtp.c on the backend's ops) ----
check exact-llama-mtp2-tp1 60 sh "$case_sh" "$mp" "$plans/tiny-llama.yaml.in" ok 1 1 false 1 \
    false MTP=2 -- --backend cuda --exact
check exact-llama-mtp2-tp2-sp-cp2 60 sh "$case_sh" "$mp" "$plans/tiny-llama.yaml.in" ok 4 2 \
    true 1 false MTP=2 CP=2 HW=dgx-h100 -- --backend cuda --exact
check exact-deepseek-mtp-tp2-sp-ep2-pp2 90 sh "$case_sh" "$mp" "$plans/tiny-deepseek.yaml.in" \
    ok 4 2 true 1 false EP=2 ETP=1 PP=2 LAYERS=3 M=3 MTP=1 'LAYOUT=Et|ttmL' BRATE=0.125 \
    -- --backend cuda --exact

# ---- (d''') GPT-OSS's ops ----
check exact-oss-tp1 60 sh "$case_sh" "$mp" "$plans/tiny-oss.yaml.in" ok 1 1 false 1 false \
    -- --backend cuda --exact
check exact-oss-ep2-tp2-sp-dp2 60 sh "$case_sh" "$mp" "$plans/tiny-oss.yaml.in" ok 4 2 true 2 \
    false EP=2 -- --backend cuda --exact

# ---- (d''''') heads of their own width (Qwen3's: 12 on hidden 32, QK-norm), and a hidden
# size no multiple of the heads (30 on 4 heads of 8): the kernels on those widths ----
check exact-qwen-headdim12-tp2-sp-cp2 60 sh "$case_sh" "$mp" "$plans/tiny-llama.yaml.in" ok 4 \
    2 true 1 false CP=2 HW=dgx-h100 HEADDIM=12 QKNORM=1 -- --backend cuda --exact
check exact-gpt-hidden30-tp2-sp-dp2 60 sh "$case_sh" "$mp" "$plans/tiny.yaml.in" ok 4 2 true 2 \
    false HIDDEN=30 -- --backend cuda --exact

# ---- (d'''') T5 ----
check exact-t5-tp1 60 sh "$case_sh" "$mp" "$plans/tiny-t5.yaml.in" ok 1 1 false 1 false \
    -- --backend cuda --exact
check exact-t5-pp2-tp2-sp-dp2 90 sh "$case_sh" "$mp" "$plans/tiny-t5.yaml.in" ok 8 2 true 2 \
    true PP=2 M=2 TIED=false -- --backend cuda --exact

# ---- (e) one full-size rank: llama3-70b tp8 pp8, the last stage (rank 56) ----
solo() {
    set -o pipefail
    "$mp" exec "$root/tools/gpu/llama3-70b-tp8-pp8.yaml" --backend cuda --solo 56 --steps 2 \
        --compare h200 | tee "$out/solo.txt" || return 1
    # the executor's GEMMs against cuBLAS alone: the bar is 0.6 (docs/exec.md)
    awk '/^gemm: .* ratio /{r = $NF} END {if (r == "") exit 1; print "GEMM ratio " r; exit !(r >= 0.6)}' \
        "$out/solo.txt"
}
export -f solo
check solo-llama3-70b 150 solo
grep -E '^(gemm|  MFU|  step|  compute)' "$out/solo.txt" 2>/dev/null | sed 's/^ */  /' >>"$summary"

# ---- (f) this GPU as a hardware profile ----
check calibrate 60 "$mp" calibrate --backend cuda --name h200-calibrated \
    -o "$out/h200-calibrated.yaml"
grep -E 'GEMM|cuBLAS|memcpy' "$out/h200-calibrated.yaml" 2>/dev/null >>"$summary"

# ---- (g) cuBLAS alone on Megatron's layer GEMMs (bench/bench_gemm_cuda.c) ----
gemm_sweep() {
    set -o pipefail
    "$bdir/bench/bench_gemm_cuda" >"$out/gemm-sweep.csv"
}
export -f gemm_sweep
check gemm-sweep 120 gemm_sweep
awk -F, '$1 == "gemm" {n++; if ($11 > best) best = $11} $1 == "floor" {fl = $10}
    END {if (n) printf "  gemm sweep: %d products, best %.1f TFLOP/s; per-call floor %s us\n", n, best, fl}' \
    "$out/gemm-sweep.csv" 2>/dev/null >>"$summary"
# TP overlap's split fprops: what each further call costs (the profiles' gemm_call_overhead)
awk -F, '$1 == "split" {split($9, o, "/"); key = $2 "," $3 "," $4 "," $5
        if (o[2] == 1) whole[key] = $10; else list[key "," o[2]] = $10}
    END {for (k in list) {split(k, a, ","); w = whole[a[1] "," a[2] "," a[3] "," a[4]]
            if (w > 0 && a[5] > 1) {s += (list[k] - w) / (a[5] - 1); c++}}
         if (c) printf "  split fprops: %d sequences, %.1f us a further call on the mean\n", c, s / c}' \
    "$out/gemm-sweep.csv" 2>/dev/null >>"$summary"

# ---- (h) one GEMM sustained for 45 s (bench/bench_gemm_sustain.c) ----
gemm_sustain() {
    set -o pipefail
    "$bdir/bench/bench_gemm_sustain" 45 >"$out/gemm-sustain.csv"
}
export -f gemm_sustain
check gemm-sustain 90 gemm_sustain
grep '^# first second' "$out/gemm-sustain.csv" 2>/dev/null | sed 's/^# /  sustained GEMM: /' >>"$summary"

note "gpu-check: $failed failed, $((SECONDS - start)) s"
exit "$failed"
