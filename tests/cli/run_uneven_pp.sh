#!/bin/sh
# run_uneven_pp.sh MEGAPLAN — the default split when pp does not divide the
# layers (issue 11, "Uneven pipeline stages"; core/config.h mp_uneven_split):
# DeepSeek-V3's 61 layers on pp 32 were 16, 1 x 30, 15 (estimate 360 s and
# 652 GiB, explain's "pp x2" hint quoting them). Estimate, search, simulate,
# the plan's stages and the Megatron flags all take the balanced split
# 1, 2 x 29, 1, 1; an even split (Llama 3 405B's 126 on 16: 7, 8 x 14, 7,
# as Meta ran it) is what it was.
set -u
. "$(dirname "$0")/../lib.sh"
bin=$(abs_path "$1")
cd "$T" || exit 1

ds="--model deepseek-v3 --gpus 2048 --hw h800"
# estimate: a sane step and peak (before: 360.309 s, 652.69 GiB)
"$bin" estimate $ds --tp 2 --sp --pp 32 --ep 32 --dist-opt >est.txt 2>err.txt || bad "estimate: $(cat err.txt)"
step=$(awk '$1 == "step" { print $2 }' est.txt)
peak=$(awk '$1 == "peak" { print $2 }' est.txt)
awk -v s="$step" 'BEGIN { exit !(s > 30 && s < 80) }' && ok || bad "estimate pp 32: step $step s"
awk -v p="$peak" 'BEGIN { exit !(p > 40 && p < 120) }' && ok || bad "estimate pp 32: peak $peak GiB"

# search with the plan fixed: the split it prints and writes
"$bin" search $ds --fix tp=2,pp=32,ep=32,vpp=1,micro_batch=1,recompute=none,schedule=1f1b,precision=bf16,etp=2 \
    --dist-opt --no-split --top 1 -o plan.yaml >search.txt 2>err.txt || bad "search: $(cat err.txt)"
contains search.txt "blocks per stage 1 2x29 1x2 (embedding on the first, head on the last)"
# the plan's stages: the embedding and one block, 2 blocks each, ..., one block and the head
grep -A3 '^stages:' plan.yaml | tr -d ' \n' >stages.txt
contains stages.txt "stages:-[0,2]-[2,4]-[4,6]"
grep -q -- '- \[60, 61\]' plan.yaml && grep -q -- '- \[61, 63\]' plan.yaml && ok ||
    bad "plan.yaml: the last stages are not [60, 61], [61, 63]"
# simulate reads the same split back: the estimate it quotes is search's
"$bin" simulate plan.yaml >sim.txt 2>err.txt || bad "simulate: $(cat err.txt)"
sstep=$(awk '$1 == "step" && $2 == "(simulated)" { print $3 }' sim.txt)
awk -v s="$sstep" 'BEGIN { exit !(s > 30 && s < 80) }' && ok || bad "simulate: step $sstep s"

# the Megatron flags: Megatron's first/last-stage flags cannot say it, a layout does
"$bin" estimate $ds --tp 2 --sp --pp 32 --ep 32 --dist-opt --format megatron >mg.txt 2>err.txt ||
    bad "--format megatron: $(cat err.txt)"
contains mg.txt '--pipeline-model-parallel-layout "Et|t*2|'
contains mg.txt '|t*2|t|tL"'

# explain's "pp x2" hint from pp 16 quotes the balanced pp 32, not 360 s
"$bin" explain $ds --tp 2 --sp --pp 16 --ep 32 --dist-opt >ex.txt 2>err.txt || bad "explain: $(cat err.txt)"
hint=$(awk '$1 == "pp" && $2 == "x2" { for (i = 1; i <= NF; i++) if ($i == "step") print $(i + 1) }' ex.txt)
awk -v s="$hint" 'BEGIN { exit !(s > 30 && s < 80) }' && ok || bad "explain's pp x2 hint: step '$hint' s"

# an even split is unchanged, and 126 on 16 is Meta's 7, 8 x 14, 7
"$bin" estimate --model llama3-405b --gpus 2048 --hw dgx-h100 --tp 8 --sp --pp 16 --dist-opt \
    --format megatron >l.txt 2>err.txt || bad "405B estimate: $(cat err.txt)"
contains l.txt '--pipeline-model-parallel-layout "Et*7|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*7L"'
"$bin" estimate --model llama3-405b --gpus 1008 --hw dgx-h100 --tp 8 --sp --pp 14 --dist-opt \
    --global-batch 1008 --format megatron >e.txt 2>err.txt || bad "405B pp 14 estimate: $(cat err.txt)"
lacks e.txt "pipeline-model-parallel-layout"  # 126 = 14 x 9: even
finish
