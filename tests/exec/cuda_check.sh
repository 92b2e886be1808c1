#!/bin/sh
# cuda_check.sh MEGAPLAN PLAN SOURCE_ROOT — on a machine without a GPU: `exec --backend cuda`
# and `calibrate --backend cuda` exit 2 with one line saying there is no CUDA
# device. Fails when the CUDA toolkit is installed (/usr/local/cuda/bin/nvcc)
# and the kernels are in the tree (SOURCE_ROOT/kernels) but the build left the
# CUDA backend out: CI must compile it. Skips (77) where
# a GPU is present (tools/gpu-check.sh runs the backend there).
. "$(dirname "$0")/../lib.sh"
megaplan=$1 plan=$2 src=$3
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    skip "a GPU is present; tools/gpu-check.sh checks the backend"
fi
for verb in exec calibrate; do
    if [ "$verb" = exec ]; then
        out=$("$megaplan" exec --backend cuda "$plan" 2>&1)
    else
        out=$("$megaplan" calibrate --backend cuda -o /dev/null 2>&1)
    fi
    rc=$?
    printf '%s\n' "$out"
    if printf '%s\n' "$out" | grep -q 'built without the CUDA backend'; then
        [ -x /usr/local/cuda/bin/nvcc ] && [ -f "$src/kernels/kernels.h" ] &&
            fail "the CUDA toolkit and kernels/ are here but the build skipped the CUDA backend"
        skip "no CUDA toolkit or no kernels/ here, no backend"
    fi
    [ "$rc" -eq 2 ] || fail "$verb --backend cuda: exit $rc, wanted 2"
    [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$verb: more than one line"
    printf '%s\n' "$out" | grep -q "^megaplan $verb: --backend: no CUDA device" ||
        fail "$verb: the line does not say there is no CUDA device"
done
echo "cuda_check.sh: PASS"
