#!/bin/sh
# The framework formats: a ZeRO-3 plan as a DeepSpeed config (valid JSON with
# the plan's stage and batch arithmetic) or a torchtitan job file (valid TOML
# with the plan's degrees); Megatron flags refused for it; search's table
# naming the framework and showing the best FSDP plan beside the winner.
#   run_framework_cli.sh MEGAPLAN
M="$1"
. "$(dirname "$0")/../lib.sh"

"$M" estimate --model gpt3-1.3b --gpus 64 --zero 3 --micro-batch 2 --format deepspeed >"$T/ds" || fail "deepspeed exit"
python3 - "$T/ds" <<'PY' || fail "deepspeed config"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["zero_optimization"]["stage"] == 3, d
assert d["train_micro_batch_size_per_gpu"] == 2
assert d["train_batch_size"] == d["train_micro_batch_size_per_gpu"] * d["gradient_accumulation_steps"] * 64, d
assert d["bf16"]["enabled"] is True and "tensor_parallel" not in d
PY
"$M" estimate --model gpt3-13b --gpus 64 --tp 4 --sp --zero 2 --format deepspeed >"$T/ds2" || fail "zero2 tp deepspeed exit"
python3 -c "import json,sys; d=json.load(open('$T/ds2')); assert d['tensor_parallel']['autotp_size']==4 and d['zero_optimization']['stage']==2" || fail "autotp"

"$M" estimate --model gpt3-13b --gpus 64 --tp 4 --sp --zero 3 --recompute selective --format torchtitan >"$T/tt" || fail "torchtitan exit"
python3 - "$T/tt" <<'PY' || fail "torchtitan config"
import sys, tomllib
d = tomllib.load(open(sys.argv[1], "rb"))
p = d["parallelism"]
assert p["tensor_parallel_degree"] == 4 and p["data_parallel_shard_degree"] == 16, p
assert p["fsdp_reshard_after_forward"] == "always"
assert d["activation_checkpoint"]["mode"] == "selective"
assert d["training"]["seq_len"] == 2048
PY

# HSDP: shard inside a node, replicate across: the replicas times the shard are dp
"$M" estimate --model llama3-8b --gpus 256 --hsdp --format torchtitan >"$T/hsdp" || fail "hsdp torchtitan exit"
python3 - "$T/hsdp" <<'PY' || fail "hsdp torchtitan config"
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["parallelism"]
assert p["data_parallel_replicate_degree"] == 32 and p["data_parallel_shard_degree"] == 8, p
PY
"$M" search --model llama3-8b --gpus 256 --hsdp --format json --top 2 >"$T/hsj" || fail "search --hsdp"
python3 -c "
import json
a=json.load(open('$T/hsj'))
assert a and all(o['parallel'].get('hsdp') is True and o['parallel']['zero'] == 3 for o in a), a[0]['parallel']" || fail "--hsdp not held"

# --runtime any ranks ZeRO-2/3 plans with Megatron's (they win this small model)
"$M" search --model gpt3-1.3b --gpus 64 --runtime any --format json >"$T/any" || fail "--runtime any exit"
python3 -c "
import json
a=json.load(open('$T/any'))
assert any(o['parallel'].get('zero', 0) >= 2 for o in a), [o['parallel'] for o in a]" || fail "--runtime any ranks no ZeRO plan"
"$M" search --model gpt3-1.3b --gpus 64 --format json >"$T/meg" || fail "default search exit"
python3 -c "
import json
a=json.load(open('$T/meg'))
assert all(o['parallel'].get('zero', 0) < 2 for o in a)" || fail "the default search ranked a ZeRO-2/3 plan"

# --format megatron without a plan: the default split every part uses (Llama 3 405B
# on pp 16: Megatron's first/last-stage split, 7, 8 x 14, 7, as Meta ran it)
"$M" estimate --model llama3-405b --gpus 16384 --hw dgx-h100 --tp 8 --pp 16 --format megatron >"$T/l405" ||
  fail "405B flags exit"
grep -q -- '--decoder-first-pipeline-num-layers 7 ' "$T/l405" &&
  grep -q -- '--decoder-last-pipeline-num-layers 7 ' "$T/l405" ||
  fail "405B flags' split is not 7, 8 x 14, 7: $(grep pipeline "$T/l405")"

refuse() {
  "$M" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  [ $rc -eq 2 ] || fail "exit $rc, not 2, for: $*"
  [ "$(wc -l <"$T/err")" -eq 1 ] || fail "not one line for: $* ($(cat "$T/err"))"
  [ ! -s "$T/out" ] || fail "stdout not empty for: $*"
}
refuse estimate --model gpt3-13b --gpus 64 --tp 4 --zero 3 --format megatron
grep -q "torchtitan" "$T/err" || fail "megatron refusal does not name the framework"
refuse estimate --model gpt3-13b --gpus 64 --tp 4 --zero 3 --format deepspeed
refuse estimate --model gpt3-13b --gpus 64 --pp 2 --dist-opt --format deepspeed
refuse estimate --model gpt3-13b --gpus 64 --pp 2 --zero 3
refuse estimate --model gpt3-13b --gpus 64 --zero 4
refuse estimate --model gpt3-13b --gpus 64 --format nonsense
refuse estimate --model llama3-8b --gpus 256 --hsdp --format deepspeed
refuse search --model gpt3-1.3b --gpus 64 --zero 3 --runtime megatron
refuse search --model gpt3-1.3b --gpus 64 --runtime nonsense
refuse search --model gpt3-1.3b --gpus 64 --fix 'zero=2|3'

"$M" search --model gpt3-1.3b --gpus 64 >"$T/table" || fail "search exit"
grep -q "runs under Megatron-LM (--format megatron)" "$T/table" || fail "framework not named"
grep -q "beside it, ZeRO-3 / FSDP" "$T/table" || fail "no FSDP plan beside the winner"
"$M" search --model gpt3-1.3b --gpus 64 --zero 3 --fix hsdp=false >"$T/z3" || fail "search --zero 3 exit"
grep -q "runs under DeepSpeed (--format deepspeed)" "$T/z3" || fail "zero3 winner's framework"
! grep -q "beside it" "$T/z3" || fail "beside line when ZeRO was asked for"
# --cp-comm-type a2a: the FSDP plan beside the winner (cp=4, torchtitan) is the one a p2p
# search shows, costed with p2p (torchtitan's job file takes no other exchange), and the line
# says so; it was costed with a2a, a plan --format torchtitan refuses
L7="--model llama2-7b --gpus 16 --seq 32768 --global-batch 64 --hw dgx-h100 --cp 4"
"$M" search $L7 --cp-comm-type a2a >"$T/a2a" || fail "search --cp-comm-type a2a exit"
"$M" search $L7 >"$T/p2p" || fail "search --cp 4 exit"
a2a_fsdp=$(grep "^beside it" "$T/a2a" | sed 's/ s by the estimate.*//')
p2p_fsdp=$(grep "^beside it" "$T/p2p" | sed 's/ s by the estimate.*//')
case "$a2a_fsdp" in *"under torchtitan"*"cp=4"*) ;; *) fail "no torchtitan cp=4 plan beside the a2a winner: $a2a_fsdp" ;; esac
[ "$a2a_fsdp" = "$p2p_fsdp" ] || fail "the FSDP plan beside an a2a search is not the p2p one: $a2a_fsdp / $p2p_fsdp"
grep -q "costed with the p2p exchange, torchtitan's ring attention: the a2a" "$T/a2a" ||
  fail "the a2a search does not say its FSDP plan is costed with p2p"
! grep -q "costed with the p2p exchange" "$T/p2p" || fail "a p2p search explains p2p"
# a winner its framework's --format refuses is not said to run under it (a ZeRO-3 plan
# with the a2a exchange was "runs under torchtitan (FSDP2) (--format torchtitan)")
"$M" search $L7 --cp-comm-type a2a --zero 3 >"$T/z3a2a" || fail "search --zero 3 --cp-comm-type a2a exit"
grep -q "would run under torchtitan (FSDP2), but --format torchtitan refuses it: the a2a context-parallel exchange" "$T/z3a2a" ||
  fail "zero 3 a2a winner: $(grep -i 'run' "$T/z3a2a" | head -3)"
! grep -q "runs under torchtitan" "$T/z3a2a" || fail "zero 3 a2a winner said to run under torchtitan"
# an fp8 FSDP plan beside the winner: its framework's --format refuses fp8, and the line says so
"$M" search --model gpt3-1.3b --gpus 64 --precision fp8 --hw dgx-h100 >"$T/fp8" || fail "search fp8 exit"
grep -q "^beside it, ZeRO-3 / FSDP" "$T/fp8" || fail "no FSDP plan beside the fp8 winner"
grep -Eq "^  \(--format (deepspeed|torchtitan) refuses it: an fp8 plan" "$T/fp8" ||
  fail "the fp8 FSDP plan beside the winner is not said to be refused by its --format"
! grep -q "refuses it" "$T/table" || fail "a bf16 search's FSDP plan said refused"
# ZeRO-2 with cp > 1 is torchtitan's (DeepSpeed's config has no context parallelism: it was
# named "runs under DeepSpeed", whose --format refused it)
refuse estimate $L7 --zero 2 --format megatron
grep -q "this plan runs under torchtitan (FSDP2) (--format torchtitan)" "$T/err" || fail "zero 2 cp 4: $(cat "$T/err")"
"$M" estimate $L7 --zero 2 --format torchtitan >"$T/z2cp" || fail "zero 2 cp 4 --format torchtitan"
grep -q 'fsdp_reshard_after_forward = "never"' "$T/z2cp" || fail "zero 2 cp 4 torchtitan file"
"$M" search --model gpt3-1.3b --gpus 64 --zero 3 -o "$T/plan.yaml" >/dev/null || fail "-o zero3"
grep -q "zero: 3" "$T/plan.yaml" || fail "plan file lacks zero: 3"
"$M" simulate "$T/plan.yaml" >/dev/null || fail "simulate a zero3 plan"
echo ok
