#!/bin/sh
# run_plans.sh MEGAPLAN EXAMPLES_DIR — every plan in examples/ runs through
# `megaplan estimate PLAN` and `megaplan simulate PLAN` (the two agree on the
# estimate); DeepSeek-V3's run on the h800 profile (examples/deepseek-v3-h800.yaml)
# says what its report says; with training tokens, estimate prints days to
# train and GPU-hours = days x 24 x GPUs, each with its error band, in the
# table and in the JSON; h800 is slower than dgx-h100 on a TP plan only.
set -u
. "$(dirname "$0")/../lib.sh"
bin=$(abs_path "$1")
examples=$(abs_path "$2")
cd "$T" || exit 1

n=0
for f in "$examples"/*.yaml; do
    grep -q '^megaplan_plan:' "$f" || continue
    n=$((n + 1))
    name=$(basename "$f")
    "$bin" estimate "$f" >est.txt 2>err.txt && [ ! -s err.txt ] && ok || bad "estimate $name: $(head -2 err.txt)"
    "$bin" estimate "$f" --format json >est.json 2>err.txt && ok || bad "estimate $name --format json"
    "$bin" simulate "$f" --format json >sim.json 2>err.txt && ok || bad "simulate $name: $(head -2 err.txt)"
    python3 - est.json sim.json <<'PY' && ok || bad "estimate and simulate $name disagree on the estimate"
import json, sys
e, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
# the estimate object's numbers are written to 6 significant digits
assert abs(e["time_s"]["step"] - s["simulation"]["estimate_step_s"]) <= 1e-5 * e["time_s"]["step"]
PY
done
[ "$n" -ge 9 ] && ok || bad "only $n plans in examples/"

# --- DeepSeek-V3 on 2048 H800 ---
ds="$examples/deepseek-v3-h800.yaml"
"$bin" estimate "$ds" >ds.txt 2>err.txt || bad "estimate deepseek-v3-h800: $(head -2 err.txt)"
contains ds.txt "deepseek-v3-mtp1 on 2048 x h800"
contains ds.txt "tp=1 pp=16 vpp=1 cp=1 dp=128"
contains ds.txt "schedule=dualpipe  precision=fp8  seq=4096"
contains ds.txt "ep=64 etp=1 edp=2  dispatcher=flex"
matches ds.txt '^  days to train +[0-9.]+  \(1\.48e\+13 tokens\)  likely [0-9.]+ to [0-9.]+$'
matches ds.txt '^  GPU-hours +[0-9.e+]+  \(days x 24 x 2048 GPUs\)  likely [0-9.e+]+ to [0-9.e+]+$'
"$bin" estimate "$ds" --format json >ds.json || bad "estimate deepseek-v3-h800 --format json"
python3 - ds.json <<'PY' && ok || bad "deepseek-v3-h800 JSON: the report's setup, GPU-hours and its band"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["parallel"]
assert d["hw"] == "h800" and d["gpus"] == 2048, d["hw"]
assert d["precision"] == "fp8" and d["fp8_recipe"] == "blockwise"
assert (p["tp"], p["pp"], p["vpp"], p["dp"], p["ep"]) == (1, 16, 1, 128, 64), p
assert p["schedule"] == "dualpipe" and p["dist_opt"] and p["dispatcher"] == "flex"
assert p["global_batch"] == 15360 and p["recompute"] == "selective"
assert set(p["recompute_modules"]) == {"layernorm", "mla_up_proj", "moe_act"}, p
assert p.get("dispatch_fp8") is True, p  # §3.3.3: FP8 dispatch, BF16 combine
t, b = d["throughput"], d["band"]
days, gh = t["days_for_tokens"], t["gpu_hours_for_tokens"]
assert days > 0 and abs(gh - days * 24 * 2048) <= 1e-5 * gh, (days, gh)  # 6 digits
# times: the band bounds them as it bounds the step
for k, v in (("days_for_tokens", days), ("gpu_hours_for_tokens", gh)):
    lo, hi = b[k]
    assert abs(lo - v / (1 + b["high"])) <= 1e-5 * v and abs(hi - v / (1 + b["low"])) <= 1e-5 * v, k
PY
# the table says what the JSON says
python3 - ds.txt ds.json <<'PY' && ok || bad "deepseek-v3-h800: the table's GPU-hours is not the JSON's"
import json, re, sys
text, d = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
m = re.search(r"GPU-hours +([0-9.e+]+) .* likely ([0-9.e+]+) to ([0-9.e+]+)", text)
v = [float(x) for x in m.groups()]
want = [d["throughput"]["gpu_hours_for_tokens"]] + d["band"]["gpu_hours_for_tokens"]
assert all(abs(a - b) <= 1e-3 * b for a, b in zip(v, want)), (v, want)
PY
"$bin" simulate "$ds" >dssim.txt 2>err.txt && ok || bad "simulate deepseek-v3-h800: $(head -2 err.txt)"
contains dssim.txt "schedule dualpipe, 16 pipeline ranks"
# §3.3.3's BF16 moments beside FP32 master weights, as Megatron-Core's flags
"$bin" estimate "$ds" --format megatron >dsmeg.txt 2>err.txt || bad "estimate deepseek-v3-h800 --format megatron: $(head -2 err.txt)"
contains dsmeg.txt "--use-precision-aware-optimizer"
contains dsmeg.txt "--exp-avg-dtype bf16"
contains dsmeg.txt "--exp-avg-sq-dtype bf16"
contains dsmeg.txt "--moe-dispatch-fwd-dtype mxfp8"

# without tokens: no days, no GPU-hours, no band for them
"$bin" estimate --model llama3-8b --gpus 8 --hw h800 >nt.txt || bad "estimate without --tokens"
lacks nt.txt "GPU-hours"
lacks nt.txt "days to train"
"$bin" estimate --model llama3-8b --gpus 8 --hw h800 --format json >nt.json || bad "json without --tokens"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["throughput"]["gpu_hours_for_tokens"] == 0 and "gpu_hours_for_tokens" not in d["band"]' nt.json &&
    ok || bad "without tokens: gpu_hours_for_tokens not 0, or a band for it"
# with --tokens on the command line: the same line
"$bin" estimate --model llama3-8b --gpus 8 --hw h800 --tokens 1e12 >wt.txt || bad "estimate --tokens"
matches wt.txt '^  GPU-hours +[0-9.e+]+  \(days x 24 x 8 GPUs\)  likely '

# a plan file, or the options: not both; one plan only
expect_exit 2 "$bin" estimate "$ds" --gpus 8
contains "$T/err" "give a plan file or a configuration's options, not both"
expect_exit 2 "$bin" estimate "$ds" "$ds"
contains "$T/err" "unexpected argument"

# h800 against dgx-h100: TP on NVLink slower, one GPU the same
step() { "$bin" estimate "$@" --format json | python3 -c 'import json, sys; print(json.load(sys.stdin)["time_s"]["step"])'; }
a=$(step --model llama3-70b --gpus 64 --tp 8 --sp --recompute full --hw h800)
h=$(step --model llama3-70b --gpus 64 --tp 8 --sp --recompute full --hw dgx-h100)
python3 -c "import sys; sys.exit(0 if $a > $h else 1)" && ok || bad "tp 8: h800 $a s not slower than dgx-h100 $h s"
a=$(step --model llama3-8b --gpus 1 --hw h800 --global-batch 8 --recompute full)
h=$(step --model llama3-8b --gpus 1 --hw dgx-h100 --global-batch 8 --recompute full)
[ "$a" = "$h" ] && ok || bad "one GPU: h800 $a s, dgx-h100 $h s"
finish
