#!/bin/sh
# run_mtp_stage.sh MEGAPLAN EXAMPLES — Megatron's standalone MTP stage
# (issues 11 and 14; core/layout.h, cost.c place_mtp_standalone):
# DeepSeek-V3 with one MTP module (examples/deepseek-v3-h800.yaml's model)
# on pp 16, vpp 2 with Megatron-LM's own layout "Et*3|(tt|)*29,m|L" (its
# parse_str_to_list docstring): rank 14's second chunk holds the module,
# rank 15's the loss alone. estimate, search, simulate and the Megatron flags
# take it (it was refused); the module leaves the last rank, whose chunk was
# the slowest, so the step is shorter than with "...|mL"; exec takes it
# (it runs it: tests/exec, exec-llama-mtp*-stage-*).
set -u
. "$(dirname "$0")/../lib.sh"
bin=$(abs_path "$1")
ex=$(abs_path "$2")
cd "$T" || exit 1

awk '/^model:/ { f = 1; next } /^[a-z]/ { f = 0 } f' "$ex/deepseek-v3-h800.yaml" |
    sed 's/^  //' >dsmtp.yaml
grep -q '^mtp_layers: 1' dsmtp.yaml || fail "no mtp_layers in the example's model"
m="--model dsmtp.yaml --gpus 2048 --hw h800 --ep 64 --dist-opt"
ds="$m --pp 16"
alone="Et*3|(tt|)*29,m|L"
beside="Et*3|(tt|)*29,|mL"

"$bin" estimate $ds --pipeline-layout "$alone" >a.txt 2>err.txt || bad "standalone: $(cat err.txt)"
contains a.txt "layout    $alone"
"$bin" estimate $ds --pipeline-layout "$beside" >b.txt 2>err.txt || bad "beside: $(cat err.txt)"
sa=$(awk '$1 == "step" { print $2 }' a.txt)
sb=$(awk '$1 == "step" { print $2 }' b.txt)
awk -v a="$sa" -v b="$sb" 'BEGIN { exit !(a > 3 && a < b && b < 20) }' && ok ||
    bad "step standalone $sa s, beside the loss $sb s: expected 3 < standalone < beside < 20"

# explain names the stage
"$bin" explain $ds --pipeline-layout "$alone" >x.txt 2>err.txt || bad "explain: $(cat err.txt)"
contains x.txt "multi-token prediction (1 module): on virtual stage 30, the layout's standalone MTP stage"

# the Megatron flags: the layout as written, the module count
"$bin" estimate $ds --pipeline-layout "$alone" --format megatron >mg.txt 2>err.txt ||
    bad "megatron flags: $(cat err.txt)"
contains mg.txt "--pipeline-model-parallel-layout \"$alone\""
contains mg.txt "--mtp-num-layers 1"

# search keeps the layout, simulate runs it
"$bin" search $m --pipeline-layout "$alone" \
    --fix tp=1,pp=16,vpp=2,micro_batch=1,recompute=none,schedule=interleaved-1f1b,precision=bf16,etp=1 \
    --top 1 -o plan.yaml >s.txt 2>err.txt || bad "search: $(cat err.txt)"
contains s.txt "stages (layout \"$alone\")"
"$bin" simulate plan.yaml >sim.txt 2>err.txt || bad "simulate: $(cat err.txt)"
sstep=$(awk '$1 == "step" && $2 == "(simulated)" { print $3 }' sim.txt)
awk -v s="$sstep" 'BEGIN { exit !(s > 0.5 && s < 20) }' && ok || bad "simulate: step $sstep s"

# Megatron's refusals stay: an m outside its rank's last chunk
expect_exit 2 "$bin" estimate $ds --pipeline-layout "Et*3|(tt|)*28,tm|t|L"
contains err "pipeline-layout: character 18: a transformer layer after an MTP layer"

# exec runs it now: its checks of the plan pass (they come first) and it
# stops at the ranks, which one process has not (before MPI_Init, so nothing
# of Open MPI's is left for LeakSanitizer to report)
expect_exit 2 "$bin" exec plan.yaml
contains err "the plan needs 2048 ranks"
lacks err "pipeline_layout"
finish
