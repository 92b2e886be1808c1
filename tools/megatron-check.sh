#!/bin/sh
# megatron-check.sh — Megatron-LM's own argument parser and model-config
# builder on the flags megaplan exports for every example plan
# (docs/megatron-check.md). Not part of CI: PyTorch alone is several GB.
#
#   tools/megatron-check.sh MEGATRON_LM_DIR [BUILD_DIR] [VENV_DIR]
#
# MEGATRON_LM_DIR: a Megatron-LM checkout; cloned at the pinned commit when
# it does not exist (needs the network). BUILD_DIR: megaplan's meson build
# (default build; needs build/megaplan and build/tests/planner/megatron-flags).
# VENV_DIR: the Python (>= 3.12, as Megatron-LM requires) virtual environment
# with the pinned PyTorch, made when missing (default BUILD_DIR/megatron-venv).
# Exit 0 when Megatron accepts every plan's flags and builds the planned model.
set -eu
PIN=d98e8a64ddf34856e74b24714e3bedb2f5a39553   # megatron-core 0.20.0
PY_PKGS="torch==2.15.0 numpy==2.5.5 packaging==26.4 PyYAML==6.0.4"
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 MEGATRON_LM_DIR [BUILD_DIR] [VENV_DIR]" >&2; exit 2; }
mlm=$1
build=${2:-$here/build}
venv=${3:-$build/megatron-venv}
if [ ! -e "$mlm" ]; then
    git clone https://github.com/NVIDIA/Megatron-LM "$mlm"
    git -C "$mlm" checkout "$PIN"
fi
[ -f "$mlm/megatron/training/arguments.py" ] ||
    { echo "$0: $mlm is not a Megatron-LM checkout" >&2; exit 2; }
commit=$(git -C "$mlm" rev-parse HEAD 2>/dev/null || cat "$mlm/COMMIT" 2>/dev/null || echo unknown)
[ "$commit" = "$PIN" ] || echo "$0: note: Megatron-LM at $commit, not the pinned $PIN" >&2
for f in "$build/megaplan" "$build/tests/planner/megatron-flags"; do
    [ -x "$f" ] || { echo "$0: $f missing: build megaplan first (ninja -C $build)" >&2; exit 2; }
done
if [ ! -x "$venv/bin/python" ]; then
    py=$(command -v python3.12 || command -v python3.13 || true)
    [ -n "$py" ] || { echo "$0: Megatron-LM needs Python >= 3.12" >&2; exit 2; }
    "$py" -m venv "$venv"
    # the PyPI wheel of torch for Linux is the CUDA build; it runs on the CPU here
    "$venv/bin/pip" install -q $PY_PKGS
fi
echo "Megatron-LM $commit; $("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)')"
# Megatron's own progress lines and warnings go to stdout and stderr: keep
# the verdicts (one line per plan) and the driver's exit status
rc=0
out=$(PYTHONPATH=$mlm "$venv/bin/python" "$here/tools/megatron_check.py" "$build/megaplan" \
    "${MEGATRON_FLAGS:-$build/tests/planner/megatron-flags}" "$here"/examples/plan-*.yaml \
    2>/dev/null) || rc=$?
printf '%s\n' "$out" | grep '\.yaml: '
exit $rc
