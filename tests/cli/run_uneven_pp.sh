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
# Megatron's first/last-stage flags say it (the middle ranks share the 112 evenly): no layout
contains l.txt '--decoder-first-pipeline-num-layers 7 \'
contains l.txt '--decoder-last-pipeline-num-layers 7 \'
lacks l.txt "pipeline-model-parallel-layout"
"$bin" estimate --model llama3-405b --gpus 1008 --hw dgx-h100 --tp 8 --sp --pp 14 --dist-opt \
    --global-batch 1008 --format megatron >e.txt 2>err.txt || bad "405B pp 14 estimate: $(cat err.txt)"
lacks e.txt "pipeline-model-parallel-layout"  # 126 = 14 x 9: even

# virtual stages where neither the layers nor the layers + 2 divide into them
# (32 blocks on pp 3 x vpp 2): Megatron's first/last-stage flags, every chunk
# a vpp-th of its rank's count (transformer_block.py get_num_layers_to_build):
# 10, 12, 10 -> 5 | 6 | 5 | 5 | 6 | 5, in estimate, search, simulate and the flags
l8="--model llama3-8b --hw dgx-h100"
l24="$l8 --gpus 24 --global-batch 516"
"$bin" estimate $l24 --tp 2 --pp 3 --vpp 2 >v.txt 2>err.txt || bad "pp 3 vpp 2 estimate: $(cat err.txt)"
vstep=$(awk '$1 == "step" { print $2 }' v.txt)
awk -v s="$vstep" 'BEGIN { exit !(s > 15 && s < 30) }' && ok || bad "pp 3 vpp 2: step $vstep s"
"$bin" estimate $l24 --tp 2 --pp 3 --vpp 2 --format megatron >vm.txt 2>err.txt ||
    bad "pp 3 vpp 2 --format megatron: $(cat err.txt)"
contains vm.txt '--decoder-first-pipeline-num-layers 10 \'
contains vm.txt '--decoder-last-pipeline-num-layers 10 \'
contains vm.txt '--num-virtual-stages-per-pipeline-rank 2 \'
lacks vm.txt "num-layers-per-virtual-pipeline-stage"  # arguments.py refuses it with the flags
lacks vm.txt "pipeline-model-parallel-layout"
"$bin" search $l24 --fix tp=2,pp=3,vpp=2,micro_batch=1,recompute=none,schedule=interleaved-1f1b \
    --no-split --top 1 -o vplan.yaml >vs.txt 2>err.txt || bad "pp 3 vpp 2 search: $(cat err.txt)"
contains vs.txt "blocks per stage 5 6 5x2 6 5 "
grep -A6 '^stages:' vplan.yaml | tr -d ' \n' >vst.txt
contains vst.txt "stages:-[0,6]-[6,12]-[12,17]-[17,22]-[22,28]-[28,34]"
"$bin" simulate vplan.yaml >vsim.txt 2>err.txt || bad "pp 3 vpp 2 simulate: $(cat err.txt)"
vsstep=$(awk '$1 == "step" && $2 == "(simulated)" { print $3 }' vsim.txt)
awk -v s="$vsstep" 'BEGIN { exit !(s > 15 && s < 30) }' && ok || bad "pp 3 vpp 2 simulate: step $vsstep s"
# what the flags cannot make either (32 on pp 4 x vpp 3: 32 not a multiple of 3) is refused
"$bin" estimate $l8 --gpus 16 --tp 2 --pp 4 --vpp 3 >/dev/null 2>err.txt
[ $? -eq 2 ] && ok || bad "pp 4 vpp 3 on 32 layers: not refused with exit 2"
contains err.txt "first/last-stage flags need every rank's layers a multiple of vpp"
[ "$(wc -l <err.txt)" -eq 1 ] && ok || bad "pp 4 vpp 3: more than one line: $(cat err.txt)"

# the V schedules place the stages otherwise: not Megatron's first/last-stage
# split but their own (mp_v_stage_blocks), the work of each rank as even as
# can be, rank 0 holding the embedding and the head: 32 on pp 3 is rank 0
# 5 + 4, rank 1 6 + 6, rank 2 6 + 5, in V order 5 6 6 5 6 4
"$bin" search $l24 --fix tp=2,pp=3,vpp=2,micro_batch=1,recompute=none,schedule=zb-v \
    --no-split --top 1 -o zplan.yaml >zs.txt 2>err.txt || bad "pp 3 vpp 2 zb-v search: $(cat err.txt)"
grep -A6 '^stages:' zplan.yaml | tr -d ' \n' >zst.txt
contains zst.txt "stages:-[0,6]-[6,12]-[12,18]-[18,23]-[23,29]-[29,34]"
"$bin" estimate $l24 --tp 2 --pp 3 --vpp 2 --schedule zb-v >z.txt 2>err.txt ||
    bad "pp 3 vpp 2 zb-v estimate: $(cat err.txt)"
"$bin" simulate zplan.yaml >zsim.txt 2>err.txt || bad "pp 3 vpp 2 zb-v simulate: $(cat err.txt)"
# DeepSeek-V3 (61 layers) under dualpipev on pp 16 (issue 14): the brief's
# command runs; the estimate's pipeline is the simulator's (DualPipe(V)'s
# replay, planner/dualpipe_replay.c), to the 4 decimals printed
ds="--model deepseek-v3 --gpus 2048 --hw h800 --tp 1 --pp 16 --vpp 2 --ep 64 --schedule dualpipev --global-batch 4096"
"$bin" estimate $ds >ds.txt 2>err.txt || bad "deepseek-v3 dualpipev pp 16: $(cat err.txt)"
contains ds.txt "schedule=dualpipev"
"$bin" simulate $ds >dss.txt 2>err.txt || bad "deepseek-v3 dualpipev pp 16 simulate: $(cat err.txt)"
dsp=$(awk '$1 == "pipeline" && $2 == "(simulated)" { print $3 }' dss.txt)
dse=$(awk '$1 == "pipeline" && $2 == "(estimate)" { print $3 }' dss.txt)
[ -n "$dsp" ] && [ "$dsp" = "$dse" ] && ok || bad "deepseek-v3 dualpipev: pipeline simulated $dsp, estimate $dse"
# search weighs DualPipeV on that split unasked (before, no vpp of 61 layers
# on 16 ranks was searched: Megatron's splits have none), not interleaving
"$bin" search --model deepseek-v3 --gpus 2048 --hw h800 --global-batch 4096 \
    --fix tp=1,pp=16,ep=64 --top 5 >dsearch.txt 2>err.txt || bad "deepseek-v3 search: $(cat err.txt)"
awk '$1 ~ /^[0-9]+$/ && $4 == 16 && $5 == 2 && $11 == "dualpipev" { f = 1 } END { exit !f }' \
    dsearch.txt && ok || bad "deepseek-v3 search: no dualpipev on pp 16 vpp 2: $(cat dsearch.txt)"
lacks dsearch.txt "interleaved"
contains dsearch.txt "stages (V split): blocks per stage 1 2x15 1 2x14 1 "
# interleaved 1F1B keeps Megatron's rule: 61 on 32 stages is refused
"$bin" estimate --model deepseek-v3 --gpus 2048 --hw h800 --tp 1 --pp 16 --vpp 2 --ep 64 \
    --schedule interleaved-1f1b --global-batch 4096 >/dev/null 2>err.txt
[ $? -eq 2 ] && ok || bad "deepseek-v3 interleaved pp 16 vpp 2: not refused"
contains err.txt "as Megatron does without a layout"

# the flags as a user gives them (--first-stage-layers / --last-stage-layers):
# Megatron's split and its refusals, each one line and exit 2
l16="$l8 --gpus 16 --global-batch 512 --tp 2"
"$bin" estimate $l16 --pp 2 --vpp 2 --first-stage-layers 12 --last-stage-layers 20 \
    --format megatron >gf.txt 2>err.txt || bad "given flags: $(cat err.txt)"
contains gf.txt '--decoder-first-pipeline-num-layers 12 \'
contains gf.txt '--decoder-last-pipeline-num-layers 20 \'
contains gf.txt '--num-virtual-stages-per-pipeline-rank 2 \'
"$bin" search $l16 --first-stage-layers 12 --last-stage-layers 20 \
    --fix pp=2,vpp=2,micro_batch=1,recompute=none,schedule=interleaved-1f1b \
    --top 1 -o gplan.yaml >gs.txt 2>err.txt || bad "given flags search: $(cat err.txt)"
contains gs.txt "stages (first/last flags 12, 20): blocks per stage 6 10 6 10 "
contains gplan.yaml "first_stage_layers: 12"
"$bin" simulate gplan.yaml >gsim.txt 2>err.txt || bad "given flags simulate: $(cat err.txt)"
refuse() { # refuse NAME TEXT ARGS...: exit 2 and one line holding TEXT
    name=$1 text=$2
    shift 2
    "$bin" "$@" >/dev/null 2>err.txt
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -qF -- "$text" err.txt; then
        ok
    else
        bad "$name: exit $rc: $(cat err.txt)"
    fi
}
refuse first-odd "--first-stage-layers: 13 layers on the first rank must be a multiple of vpp=2" \
    estimate $l16 --pp 2 --vpp 2 --first-stage-layers 13 --last-stage-layers 19
refuse middle-odd "11 layers on each of the other 2 ranks must be a multiple of vpp=2" \
    estimate $l8 --gpus 24 --global-batch 516 --tp 2 --pp 3 --vpp 2 --first-stage-layers 10
refuse too-many "the first and last ranks' 20 + 20 layers are more than the model's 32" \
    estimate $l16 --pp 4 --first-stage-layers 20 --last-stage-layers 20
refuse with-layout "cannot be given with pipeline_layout" \
    estimate $l16 --pp 2 --pipeline-layout "Et*16|t*16L" --first-stage-layers 16
refuse search-unfixed "fixes the stages: give pp and vpp too" \
    search $l16 --first-stage-layers 12
# 126 layers on 16 x 8 = 128 stages: Megatron counts the embedding and the loss as a layer
# each, leaving those stages no block; the refusal names the flags that give that split
refuse emb-loss-stages "set account_for_embedding and account_for_loss" \
    estimate --model llama3-405b --gpus 256 --hw gb200-nvl72 --tp 4 --pp 16 --vpp 8 --global-batch 1536
"$bin" estimate --model llama3-405b --gpus 256 --hw gb200-nvl72 --tp 4 --pp 16 --vpp 8 \
    --global-batch 1536 --account-for-embedding --account-for-loss >/dev/null 2>err.txt && ok ||
    bad "the flags the refusal names are refused: $(cat err.txt)"
"$bin" estimate --model llama3-405b --gpus 256 --hw gb200-nvl72 --tp 4 --pp 16 --vpp 8 \
    --global-batch 1536 --pipeline-layout 'E|(t|)*126L' >/dev/null 2>err.txt && ok ||
    bad "the layout the refusal names is refused: $(cat err.txt)"

# a layout whose last stage holds the loss alone: the head's work and memory
# there, no block (the plan's last stage is [33, 34])
"$bin" estimate --model llama3-8b --gpus 16 --hw dgx-h100 --tp 2 --pp 4 \
    --pipeline-layout "Et*10|t*11|t*11|L" >lo.txt 2>err.txt || bad "loss-only stage: $(cat err.txt)"
contains lo.txt "layout    Et*10|t*11|t*11|L"
# interleaved with an empty chunk and a loss-only one: search keeps the
# layout, simulate runs its schedule (unequal chunks) to the end
for lay in "Et*8|t*8||t*16L" "Et*10|t*11|t*11|L"; do
    "$bin" search $l16 --pipeline-layout "$lay" \
        --fix pp=2,vpp=2,micro_batch=1,recompute=none,schedule=interleaved-1f1b \
        --top 1 -o lplan.yaml >ls.txt 2>err.txt || bad "layout $lay search: $(cat err.txt)"
    contains ls.txt "stages (layout \"$lay\")"
    "$bin" simulate lplan.yaml >lsim.txt 2>err.txt || bad "layout $lay simulate: $(cat err.txt)"
    lstep=$(awk '$1 == "step" && $2 == "(simulated)" { print $3 }' lsim.txt)
    awk -v s="$lstep" 'BEGIN { exit !(s > 25 && s < 60) }' && ok || bad "layout $lay: step $lstep s"
done
# Megatron's account-for split (--account-for-embedding/loss-in-pipeline-split):
# given, estimate/simulate take it and the flags say it; a split Megatron refuses
# is refused naming the field
"$bin" estimate --model llama3-405b --gpus 1024 --hw dgx-h100 --tp 8 --pp 16 --vpp 2 \
    --account-for-embedding --account-for-loss --format megatron >af.txt 2>err.txt ||
    bad "account-for estimate: $(cat err.txt)"
contains af.txt "--account-for-embedding-in-pipeline-split \\"
contains af.txt "--account-for-loss-in-pipeline-split \\"
contains af.txt "--num-virtual-stages-per-pipeline-rank 2 \\"
lacks af.txt "pipeline-model-parallel-layout"
"$bin" simulate --model llama3-405b --gpus 1024 --hw dgx-h100 --tp 8 --pp 16 --vpp 8 \
    --account-for-embedding --account-for-loss >afs.txt 2>err.txt || bad "account-for simulate: $(cat err.txt)"
contains afs.txt "interleaved-1f1b, 16 pipeline ranks, 8 chunks each"
# pp 1: Megatron accepts the flags and they do nothing (transformer_block.py: the
# one stage holds L + e + l units and builds e + l fewer); megaplan says so
"$bin" estimate --model llama3-8b --gpus 8 --hw dgx-h100 --tp 8 --pp 1 \
    --account-for-embedding --account-for-loss >af1.txt 2>err.txt || bad "account-for pp 1: $(cat err.txt)"
contains af1.txt "no effect with pp 1: one stage, nothing to split"
"$bin" estimate --model llama3-8b --gpus 8 --hw dgx-h100 --tp 8 --pp 1 \
    --account-for-loss --format megatron >af1m.txt 2>err.txt || bad "account-for pp 1 megatron: $(cat err.txt)"
contains af1m.txt "# account_for_embedding/loss: with pp 1 there is no split"
lacks af1m.txt "--account-for-loss-in-pipeline-split"
"$bin" explain --model llama3-8b --gpus 8 --hw dgx-h100 --tp 8 --pp 1 \
    --account-for-embedding >af1x.txt 2>err.txt || bad "account-for pp 1 explain: $(cat err.txt)"
contains af1x.txt "no effect with pp 1"
refuse account-loss-only "account-for-loss: the 126 layers + the loss = 127 do not divide among pp=16 ranks" \
    estimate --model llama3-405b --gpus 1024 --hw dgx-h100 --tp 8 --pp 16 --account-for-loss
refuse account-vpp "account-for-embedding: 8 layers (the embedding and loss counted) on each rank must be a multiple of vpp=3" \
    estimate --model llama3-405b --gpus 1536 --hw dgx-h100 --tp 8 --pp 16 --vpp 3 --global-batch 1536 \
    --account-for-embedding --account-for-loss
# 29 layers on 2 x 3: neither 29 nor 31 divides into 6, nor 29 into 3 a rank, but 30
# does: the refusal names account_for_loss, which runs, and search sets it itself
printf 'name: t29\narch: llama\nlayers: 29\nhidden: 1024\nheads: 8\nvocab: 32000\nseq: 2048\n' >t29.yaml
refuse account-hint "the layers + 1 do: set account_for_loss" \
    estimate --model t29.yaml --gpus 16 --hw dgx-h100 --pp 2 --vpp 3 --global-batch 64
"$bin" estimate --model t29.yaml --gpus 16 --hw dgx-h100 --pp 2 --vpp 3 --global-batch 64 \
    --account-for-loss >t29.txt 2>err.txt || bad "29 layers, account-for loss: $(cat err.txt)"
contains t29.txt "layout    the loss counted as a layer in the split"
"$bin" search --model t29.yaml --gpus 16 --hw dgx-h100 --global-batch 64 --fix pp=2,vpp=3 \
    --top 1 >t29s.txt 2>err.txt || bad "29 layers search: $(cat err.txt)"
contains t29s.txt "stages (account-for: the loss): blocks per stage 5x5 4"
refuse account-layout "cannot be given with pipeline_layout" \
    estimate $l16 --pp 2 --pipeline-layout "Et*16|t*16L" --account-for-loss

# Llama 3 405B on 16384 H100s with pp 16 (issue 11): search finds Meta's shape,
# tp 8, pp 16, each rank's 8 layers less one on the first and the last (7, 8 x 14,
# 7 = 126, Llama 3 paper §3.3.2) -- with virtual stages as Megatron's account-for
# split (16 x 8 chunks of one layer, the first and last chunk the embedding and
# the loss alone), and with vpp 1 as its first/last-stage flags, in Megatron-LM's
# space (--runtime megatron: the splits and recompute its flags express). The
# default space may rank first
# a per-layer recompute mix Megatron cannot express (its flags then recompute
# more, and say so); that winner must still be Meta's shape, checked last.
meta="--model llama3-405b --gpus 16384 --hw dgx-h100 --global-batch 2048 --runtime megatron"
"$bin" search $meta --fix pp=16,tp=8,cp=1 --top 1 --format json >m.json 2>err.txt ||
    bad "405B search: $(cat err.txt)"
"$bin" search $meta --fix pp=16,tp=8,cp=1,vpp=1 --top 1 --format json >m1.json 2>err.txt ||
    bad "405B search vpp 1: $(cat err.txt)"
python3 - m.json m1.json <<'PY' && ok || bad "405B search: not Meta's 7, 8 x 14, 7"
import json, sys
for path, method in zip(sys.argv[1:], ["account-for", "first/last flags"]):
    o = json.load(open(path))[0]
    p = o["parallel"]
    assert (p["tp"], p["pp"]) == (8, 16), p
    assert o["split"]["method"] == method, (path, o["split"]["method"])
    st = o["split"]["stages"]
    per_rank = [0] * 16
    for k, (b, e) in enumerate(st):
        per_rank[k % 16] += min(e, 127) - max(b, 1)
    assert per_rank == [7] + [8] * 14 + [7], (path, per_rank)
    if method == "account-for":
        assert p["vpp"] > 1 and p["account_for_embedding"] and p["account_for_loss"], p
PY
# unfixed, search tries every vpp whose split Megatron's flags make: the
# first/last-stage flags' (126 = 21 + 14 x 6 + 21 on vpp 3) and the
# account-for flags' (vpp 8), not only the even and L + 2 ones (in the top 60:
# the selective module sets fill the top 30 with vpp 8's and the others')
"$bin" search $meta --fix pp=16,tp=8,cp=1 --top 60 --format json >m30.json 2>err.txt ||
    bad "405B search top 60: $(cat err.txt)"
python3 - m30.json <<'PY' && ok || bad "405B search: the flags' vpps are not searched"
import json, sys
seen = {(o["parallel"]["vpp"], o["split"]["method"]) for o in json.load(open(sys.argv[1]))}
assert (3, "first/last flags") in seen and (8, "account-for") in seen, sorted(seen)
PY
"$bin" search $meta --fix pp=16,tp=8,cp=1 --top 1 >m.txt 2>err.txt || bad "405B search table: $(cat err.txt)"
contains m.txt "stages (account-for: the embedding and the loss): blocks per stage 0 1x126 0"
"$bin" search $meta --fix pp=16,tp=8,cp=1 --top 1 --format megatron >mm.txt 2>err.txt ||
    bad "405B search flags: $(cat err.txt)"
contains mm.txt "--account-for-embedding-in-pipeline-split \\"
contains mm.txt "--account-for-loss-in-pipeline-split \\"
"$bin" search $meta --fix pp=16,tp=8,cp=1,vpp=1 --top 1 --format megatron >mm1.txt 2>err.txt ||
    bad "405B search vpp 1 flags: $(cat err.txt)"
contains mm1.txt "--decoder-first-pipeline-num-layers 7 \\"
contains mm1.txt "--decoder-last-pipeline-num-layers 7 \\"
# the plan carries the flags: simulate reads them back
"$bin" search $meta --fix pp=16,tp=8,cp=1 --top 1 -o mplan.yaml >/dev/null 2>err.txt ||
    bad "405B search -o: $(cat err.txt)"
contains mplan.yaml "account_for_embedding: true"
"$bin" simulate mplan.yaml >msim.txt 2>err.txt || bad "405B plan simulate: $(cat err.txt)"
# the default space: whatever it ranks first is still tp 8, pp 16 with Meta's
# 7, 8 x 14, 7 layers a rank (the ILP's split over the virtual stages)
"$bin" search ${meta% --runtime megatron} --fix pp=16,tp=8,cp=1 --top 1 --format json >md.json 2>err.txt ||
    bad "405B search, default runtime: $(cat err.txt)"
python3 - md.json <<'PY' && ok || bad "405B search, default runtime: not Meta's 7, 8 x 14, 7"
import json, sys
o = json.load(open(sys.argv[1]))[0]
p = o["parallel"]
assert (p["tp"], p["pp"]) == (8, 16), p
per_rank = [0] * 16
for k, (b, e) in enumerate(o["split"]["stages"]):
    per_rank[k % 16] += min(e, 127) - max(b, 1)
assert per_rank == [7] + [8] * 14 + [7], per_rank
PY
# torchtitan's job file says the split the plan costs, even or not
# (module_fqns_per_model_part, torchtitan v0.2.x). It wrote
# pipeline_parallel_layers_per_stage for an even split only, and nothing for an
# uneven one (a layout, the first/last-stage or the account-for flags, a plan
# file's stages): torchtitan then split by its own rule.
# tt_split FILE: the blocks of every stage ("5 9 9 9"), or why the list is wrong
tt_split() {
    python3 - "$1" <<'PY'
import sys, tomllib
parts = tomllib.load(open(sys.argv[1], "rb"))["parallelism"]["module_fqns_per_model_part"]
flat = [m for p in parts for m in p]
blocks = [m for m in flat if m.startswith("layers.")]
assert parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "output"], parts
assert blocks == ["layers.%d" % i for i in range(len(blocks))], "layers out of order"
assert len(flat) == len(blocks) + 3, "a module twice"
print(" ".join(str(sum(m.startswith("layers.") for m in p)) for p in parts))
PY
}
# tt_check NAME WANT ARGS...: estimate ARGS --format torchtitan splits as WANT
tt_check() {
    name=$1
    want=$2
    shift 2
    if ! "$bin" estimate "$@" --format torchtitan >tt.txt 2>err.txt; then
        bad "torchtitan $name: $(cat err.txt)"
        return
    fi
    got=$(tt_split tt.txt 2>&1 | tail -1)
    [ "$got" = "$want" ] && ok || bad "torchtitan $name: stages $got, want $want"
    lacks tt.txt "pipeline_parallel_layers_per_stage"
}
fs="--model llama3-8b --gpus 16 --global-batch 64 --zero 3 --dist-opt --zero-runtime fsdp2"
tt_check first-stage "5 9 9 9" $fs --pp 4 --first-stage-layers 5
tt_check layout "4 10 10 8" $fs --pp 4 --pipeline-layout "Et*4|t*10|t*10|t*8L"
tt_check account "10 11 11" --model llama3-8b --gpus 24 --global-batch 48 --zero 3 --dist-opt \
    --zero-runtime fsdp2 --pp 3 --account-for-embedding
tt_check even-vpp "8 8 8 8" $fs --pp 2 --vpp 2
cat >tt.yaml <<'EOF'
megaplan_plan: 1
model: llama3-70b
hw: dgx-h100
training: {gpus: 256, seq: 8192, global_batch: 512, precision: bf16}
parallel: {tp: 8, sp: true, pp: 4, vpp: 1, cp: 1, dp: 8, micro_batch: 1, recompute: none,
           dist_opt: true, zero: 3, zero_runtime: fsdp2, schedule: 1f1b}
stages: [[0, 21], [21, 41], [41, 62], [62, 82]]
EOF
tt_check plan-stages "20 20 21 19" tt.yaml
finish
