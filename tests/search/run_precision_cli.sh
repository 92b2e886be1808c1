#!/bin/sh
# run_precision_cli.sh MEGAPLAN — search over precisions (--fix
# precision=bf16|fp8): the best of the union is the better of the two
# single-precision searches' bests; each plan names its precision; fp8 on
# hardware without an FP8 rate is refused naming the field; the winner's
# Megatron flags carry the FP8 recipe.
set -u
M=$1
. "$(dirname "$0")/../lib.sh"
common="--model llama3-8b --gpus 8 --hw dgx-h100 --global-batch 64 --no-simulate --top 3 --format json"
step() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["time_s"]["step"])' "$1"; }
prec() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["precision"])' "$1"; }
"$M" search $common --precision bf16 >"$T/b" || fail "bf16 search exit"
"$M" search $common --precision fp8 >"$T/f" || fail "fp8 search exit"
"$M" search $common --fix 'precision=bf16|fp8' >"$T/u" || fail "set search exit"
python3 - "$T/b" "$T/f" "$T/u" <<'PY' || fail "the set's winner is not the better single search's"
import json, sys
b, f, u = (json.load(open(p)) for p in sys.argv[1:])
best = min(b[0]["time_s"]["step"], f[0]["time_s"]["step"])
assert u[0]["time_s"]["step"] == best, (u[0]["time_s"]["step"], best)
steps = [p["time_s"]["step"] for p in u]
assert steps == sorted(steps), steps
assert all(p["precision"] in ("bf16", "fp8") for p in u)
assert all(p.get("fp8_recipe") == "delayed" for p in u if p["precision"] == "fp8")
PY
[ "$(prec "$T/f")" = fp8 ] || fail "the fp8 search's plan does not say fp8"
"$M" search --model llama3-8b --gpus 8 --hw dgx-h100 --global-batch 64 --no-simulate \
    --fix 'precision=bf16|fp8' >"$T/t" || fail "set table exit"
grep -q 'precision$' "$T/t" || fail "the table has no precision column"
"$M" search --model llama3-8b --gpus 8 --hw dgx-h100 --global-batch 64 --no-simulate \
    --precision fp8 --fp8-recipe tensorwise --format megatron >"$T/m" || fail "megatron exit"
grep -q -- '--fp8-recipe tensorwise' "$T/m" || fail "megatron flags lack --fp8-recipe"
grep -q -- '--fp8-format hybrid' "$T/m" || fail "megatron flags lack --fp8-format"
# DeepSpeed and torchtitan configs have no FP8 recipe: refused, not written as bf16
"$M" estimate --model llama3-8b --gpus 8 --hw dgx-h100 --precision fp8 --zero 3 \
    --format torchtitan >"$T/o" 2>"$T/e"
[ $? -eq 2 ] && grep -q 'Megatron-LM only' "$T/e" || fail "fp8 torchtitan config not refused"
# the recipes' storage settings from the command line: bf16 main gradients halve
# the gradients; FP8 parameters drop the bf16 weights beside the FP8 copies; both
# reach Megatron's flags; FP8 parameters without fp8 are refused naming the
# option; a bf16-or-fp8 search asks FP8 parameters of its fp8 runs only
est="estimate --model llama3-8b --gpus 8 --hw dgx-h100 --precision fp8 --format json"
"$M" $est >"$T/s0" || fail "estimate exit"
"$M" $est --grad-reduce-bf16 on >"$T/s1" || fail "--grad-reduce-bf16 exit"
"$M" $est --fp8-param-gather on >"$T/s2" || fail "--fp8-param-gather exit"
python3 - "$T/s0" "$T/s1" "$T/s2" <<'PY' || fail "storage settings do not change the memory"
import json, sys
a, g, p = (json.load(open(x))["memory_gib"] for x in sys.argv[1:])
assert abs(g["grads"] - a["grads"] / 2) < 1e-3, (g["grads"], a["grads"])
assert g["weights"] == a["weights"]
assert p["weights"] < a["weights"] and p["fp8_weights"] == a["fp8_weights"], (p, a)
PY
"$M" estimate --model llama3-8b --gpus 8 --hw dgx-h100 --precision fp8 --fp8-param-gather on \
    --grad-reduce-bf16 on --format megatron >"$T/m2" || fail "megatron storage exit"
grep -q -- '--fp8-param-gather' "$T/m2" && grep -q -- '--grad-reduce-in-bf16' "$T/m2" ||
    fail "megatron flags lack the storage settings"
"$M" estimate --model llama3-8b --gpus 8 --hw dgx-h100 --fp8-param-gather on >"$T/o" 2>"$T/e"
[ $? -eq 2 ] && grep -q -- '--fp8-param-gather.*need precision fp8' "$T/e" ||
    fail "FP8 parameters under bf16 not refused: $(cat "$T/e")"
"$M" search $common --fix 'precision=bf16|fp8' --fp8-param-gather on >"$T/u2" ||
    fail "set search with FP8 parameters exit"
python3 - "$T/u2" <<'PY' || fail "the set search's precisions lost"
import json, sys
u = json.load(open(sys.argv[1]))
assert {p["precision"] for p in u} <= {"bf16", "fp8"} and u, u
PY
# A100: no FP8 rate, refused with one line naming the field, exit 2
"$M" search --model llama3-8b --gpus 8 --hw dgx-a100 --fix 'precision=bf16|fp8' >"$T/o" 2>"$T/e"
[ $? -eq 2 ] || fail "fp8 on A100 not refused with exit 2"
[ "$(wc -l <"$T/e")" -eq 1 ] || fail "refusal is not one line"
grep -q 'precision.*no fp8 rate' "$T/e" || fail "refusal does not name precision: $(cat "$T/e")"
"$M" estimate --model llama3-8b --gpus 8 --hw dgx-h100 --precision fp8 --fp8-recipe mxfp8 \
    >"$T/o" 2>"$T/e"
[ $? -eq 2 ] && grep -q 'fp8-recipe.*Blackwell' "$T/e" || fail "mxfp8 on H100 not refused"
# over several profiles each compares what it runs: A100 plans in bf16, H100's may be fp8
"$M" search --model llama3-8b --tokens 1e11 --gpus 8..16 --hw dgx-a100,dgx-h100 \
    --fix 'precision=bf16|fp8' >"$T/h" 2>&1 || fail "hardware search exit"
grep -q '4 with a plan, 0 where nothing runs' "$T/h" || fail "A100 points lost: $(cat "$T/h")"
grep -q 'dgx-h100 .* fp8$' "$T/h" || fail "H100's fp8 plans not labelled"
echo ok
