#!/bin/sh
# CLI tests of `megaplan simulate`: numbers, trace (parsed with cJSON by
# check_trace), JSON output, plots with and without gnuplot, bad input.
#   cli_simulate.sh MEGAPLAN CHECK_TRACE EXAMPLES_DIR
set -u
MP=$1
CHECK=$2
EX=$3
. "$(dirname "$0")/../lib.sh"

one_error_line() { # FIELD: the error is one line naming the field, nothing on stdout
    [ "$(wc -l <"$T/err")" -eq 1 ] || bad "error is not one line: $(cat "$T/err")"
    contains "$T/err" "megaplan simulate: "
    contains "$T/err" "$1"
    [ ! -s "$T/out" ] || bad "stdout not empty on error"
}

# --- zb-v on Mixtral 8x7B pp 8, 32 micro-batches: its greedy order used to
# stall ("zb-v order stalled (p=8 m=32)": the last stage's bigger stash filled
# rank 0 with chunk-0 activations and left no room for a chunk-1 forward).
# Now the greedy order runs (no fallback note), every F of 8 ranks x 2 chunks
# x 32 micro-batches is in the trace.
expect_exit 0 "$MP" simulate --model mixtral-8x7b --gpus 64 --hw dgx-h100 --tp 2 --sp --pp 8 \
    --vpp 2 --ep 8 --etp 1 --schedule zb-v --global-batch 128 --micro-batch 1 \
    --recompute selective --trace "$T/mx.json"
contains "$T/out" "schedule zb-v, 8 pipeline ranks, 2 chunks each, 32 micro-batches"
grep -q "fallback" "$T/out" && bad "mixtral zb-v took the fallback order"
"$CHECK" trace "$T/mx.json" 8 512 || bad "mixtral zb-v trace"

# --- unit-time ops: the closed form exactly, trace valid ---
expect_exit 0 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --schedule 1f1b --trace "$T/u.json"
# unit-time ops have no seconds and no bytes: no "s", no "GiB"
contains "$T/out" "pipeline (simulated)      33.0000"
contains "$T/out" "pipeline (estimate)       33.0000     simulated +0.0%"
contains "$T/out" "bubble           9.0000     27.3%"
contains "$T/out" "       4.00 units"
grep -Eq '[0-9] s( |$)|GiB' "$T/out" && bad "unit-time ops printed seconds or GiB"
"$CHECK" trace "$T/u.json" 4 32 || bad "unit 1f1b trace"

expect_exit 0 "$MP" simulate --unit-ops --pp 4 --vpp 2 --micro-batches 8 --trace "$T/i.json"
contains "$T/out" "schedule interleaved-1f1b, 4 pipeline ranks, 2 chunks each, 8 micro-batches"
contains "$T/out" "pipeline (estimate)       28.5000     simulated +0.0%"
"$CHECK" trace "$T/i.json" 4 64 || bad "unit interleaved trace"

expect_exit 0 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --schedule zb-h1 --trace "$T/z.json"
contains "$T/out" "pipeline (simulated)      27.0000"
"$CHECK" trace "$T/z.json" 4 32 || bad "unit zb-h1 trace"
grep -q '"W 7.0"' "$T/z.json" || bad "zb-h1 trace has no W events"
# zb-h1 without a pipeline runs as 1f1b (core/config.h mp_schedule_run_as),
# said so, each backward whole: no W in its trace
expect_exit 0 "$MP" simulate --unit-ops --pp 1 --micro-batches 4 --schedule zb-h1 --trace "$T/z1.json"
contains "$T/out" "free p2p (zb-h1 without a pipeline)"
contains "$T/out" "schedule 1f1b, 1 pipeline rank"
contains "$T/out" "pipeline (simulated)      12.0000"
grep -q '"W ' "$T/z1.json" && bad "zb-h1 at pp 1 trace has W events"

expect_exit 0 "$MP" simulate --unit-ops --pp 2 --micro-batches 4 --schedule gpipe --format json
"$CHECK" json "$T/out" 2 || bad "unit json"
expect_exit 0 "$MP" simulate --unit-ops --pp 2 --micro-batches 4 --schedule gpipe --format json --events
"$CHECK" json "$T/out" 2 events || bad "unit json --events"
expect_exit 0 "$MP" simulate --unit-ops --pp 2 --micro-batches 4 --schedule gpipe --format yaml
python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); assert d["simulation"]["makespan_s"] > 0' "$T/out" ||
    bad "unit yaml is not one YAML document"
expect_exit 2 "$MP" simulate --unit-ops --pp 2 --micro-batches 4 --events
one_error_line "--events: the per-op events come with --format json"

# --- big runs: the JSON summary always works (p64 v2 m1024 was refused over
# 65536 units); --events streams every op ---
expect_exit 0 "$MP" simulate --unit-ops --pp 64 --vpp 2 --micro-batches 1024 --format json
"$CHECK" json "$T/out" 64 || bad "p64 v2 m1024 json summary"
expect_exit 0 "$MP" simulate --model 1T --gpus 4096 --tp 8 --pp 64 --vpp 2 --global-batch 8192 --format json
"$CHECK" json "$T/out" 64 estimate || bad "1T p64 v2 m1024 json summary"
expect_exit 0 "$MP" simulate --unit-ops --pp 64 --vpp 2 --micro-batches 1024 --format json --events
"$CHECK" json "$T/out" 64 events || bad "p64 v2 m1024 json --events"
# every F and B of 64 ranks x 2 chunks x 1024 micro-batches is there
[ "$(grep -c '"stream": "compute"' "$T/out")" -eq $((64 * 2 * 1024 * 2)) ] ||
    bad "p64 v2 m1024 --events: $(grep -c '"stream": "compute"' "$T/out") compute events"

# --- a configuration from estimate's options ---
expect_exit 0 "$MP" simulate --model 175B --gpus 64 --tp 8 --pp 4 --global-batch 32 --trace "$T/c.json"
contains "$T/out" "step (simulated)"
contains "$T/out" "step (estimate)"
contains "$T/out" "per pipeline rank:"
"$CHECK" trace "$T/c.json" 4 $((4 * 16)) || bad "config trace"

expect_exit 0 "$MP" simulate --model 175B --gpus 64 --tp 8 --pp 4 --vpp 2 --global-batch 32 --format json
"$CHECK" json "$T/out" 4 estimate || bad "config json"
# --- the header and the plot title name every degree, cp included ---
expect_exit 0 "$MP" simulate --model llama3-70b --gpus 1024 --hw dgx-h100 --tp 8 --cp 16 --global-batch 64
contains "$T/out" "llama3-70b on 1024 x dgx-h100: tp=8 pp=1 vpp=1 cp=16 dp=8, 1f1b"
if command -v gnuplot >/dev/null 2>&1; then
    expect_exit 0 "$MP" simulate --model llama3-70b --gpus 1024 --hw dgx-h100 --tp 8 --cp 16 \
        --global-batch 64 --plot "$T/cp.svg"
    grep -q 'tp=8 pp=1 vpp=1 cp=16 dp=8' "$T/cp.svg" || bad "the plot title lacks cp=16"
    grep -q 'tp=8 pp=1 vpp=1 cp=16 dp=8' "$T/cp-memory.svg" || bad "the memory plot title lacks cp=16"
fi

# --- plan files ---
expect_exit 0 "$MP" simulate "$EX/plan-gpt-pp2.yaml" --trace "$T/p.json"
contains "$T/out" "schedule interleaved-1f1b, 2 pipeline ranks, 2 chunks each, 4 micro-batches"
"$CHECK" trace "$T/p.json" 2 16 || bad "plan trace"
expect_exit 0 "$MP" simulate "$EX/plan-gpt3-175b-1024.yaml" --format json
"$CHECK" json "$T/out" 8 estimate || bad "plan json"

# --- plots ---
if command -v gnuplot >/dev/null 2>&1; then
    expect_exit 0 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --plot "$T/pipe.png"
    head -c 4 "$T/pipe.png" | od -c | grep -q 'P   N   G' || bad "pipe.png is not a PNG"
    [ -s "$T/pipe-memory.png" ] || bad "no memory plot"
    expect_exit 0 "$MP" simulate "$EX/plan-gpt-pp2.yaml" --plot "$T/pipe.svg"
    grep -q '<svg' "$T/pipe.svg" || bad "pipe.svg is not SVG"
    grep -q '<svg' "$T/pipe-memory.svg" || bad "pipe-memory.svg is not SVG"
    # every virtual chunk has its own key entry (the key knew chunks 0 and 1)
    expect_exit 0 "$MP" simulate --unit-ops --pp 4 --vpp 3 --micro-batches 8 --plot "$T/v3.svg"
    for k in "F chunk 0" "F chunk 1" "F chunk 2" "B chunk 0" "B chunk 1" "B chunk 2"; do
        grep -q "$k" "$T/v3.svg" || bad "the vpp=3 key lacks $k"
    done
    # unit-time ops: no seconds, no GiB, anywhere in the pictures
    grep -q "time (units)" "$T/v3.svg" || bad "the unit-ops time axis is not in units"
    grep -Eq 'GiB|time \(s\)' "$T/v3.svg" "$T/v3-memory.svg" && bad "unit-ops plots show s or GiB"
    # the memory plot has a line at the GPU's capacity
    expect_exit 0 "$MP" simulate "$EX/plan-gpt3-175b-1024.yaml" --plot "$T/175b.svg"
    grep -q "GPU memory (80 GiB)" "$T/175b-memory.svg" || bad "no capacity line on the memory plot"
    # ops narrower than a pixel are drawn together: this plot was 2.66 MB
    # (4639 boxes, one per op, 1544 of them under a pixel); now about 357 KB
    size=$(wc -c <"$T/175b.svg")
    [ "$size" -lt 600000 ] || bad "the 175B pipeline SVG is $size bytes (over 600 KB)"
fi
# without gnuplot: --plot fails at once (exit 1) saying how to install it;
# nothing is written
expect_exit 1 env PATH=/nonexistent "$MP" simulate --unit-ops --pp 2 --micro-batches 2 \
    --trace "$T/np.json" --plot "$T/np.svg"
[ "$(wc -l <"$T/err")" -eq 1 ] || bad "no gnuplot: not one line: $(cat "$T/err")"
contains "$T/err" "megaplan simulate: --plot: gnuplot not found on PATH: install it (Debian/Ubuntu: apt-get install gnuplot-nox)"
[ ! -s "$T/out" ] || bad "no gnuplot: stdout not empty"
[ ! -e "$T/np.json" ] || bad "no gnuplot: the trace was written before the refusal"
[ ! -e "$T/np.svg" ] || bad "a plot appeared without gnuplot"

# --- bad input: one line, exit 2, no file ---
expect_exit 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --plot "$T/x.pdf"
one_error_line "--plot: the plot file must end in .svg or .png"
expect_exit 2 "$MP" simulate --unit-ops --pp 4 --vpp 2 --micro-batches 6
one_error_line "--micro-batches: interleaved-1f1b needs the micro-batches (6) to be a multiple of pp (4)"
expect_exit 2 "$MP" simulate --unit-ops --micro-batches 8
one_error_line "--pp: required with --unit-ops"
expect_exit 2 "$MP" simulate --unit-ops --pp 4
one_error_line "--micro-batches: required with --unit-ops"
expect_exit 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 0
one_error_line "--micro-batches"
expect_exit 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --bogus
one_error_line "--bogus: unknown option"
expect_exit 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --trace
one_error_line "--trace: needs a value"
expect_exit 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --format megatron
one_error_line "--format"
expect_exit 2 "$MP" simulate "$EX/plan-gpt-pp2.yaml" --tp 2
one_error_line "not both"
expect_exit 2 "$MP" simulate "$T/missing.yaml"
one_error_line "missing.yaml"
printf 'megaplan_plan: 1\nmodel: [1, 2\n' >"$T/broken.yaml"
expect_exit 2 "$MP" simulate "$T/broken.yaml"
one_error_line "broken.yaml:"
expect_exit 2 "$MP" simulate --model 175B --gpus 64 --tp 8 --pp 3
one_error_line "megaplan simulate: "
expect_exit 2 "$MP" simulate
one_error_line "--model: required: a plan file"
expect_exit 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --trace "$T/nodir/t.json"
one_error_line "nodir"
[ ! -e "$T/nodir" ] || bad "a folder appeared"
expect_exit 0 "$MP" simulate --help
contains "$T/out" "usage: megaplan simulate"
contains "$T/out" "--micro-batches M"
# the old spelling still works, is not shown, and means the same
grep -q -- "--microbatches" "$T/out" && bad "--help shows the old spelling --microbatches"
expect_exit 0 "$MP" simulate --unit-ops --pp 4 --micro-batches 8
cp "$T/out" "$T/new.txt"
expect_exit 0 "$MP" simulate --unit-ops --pp 4 --microbatches 8
cmp -s "$T/out" "$T/new.txt" || bad "--microbatches and --micro-batches differ"
expect_exit 0 "$MP" simulate --unit-ops --pp 4 --microbatches=8
cmp -s "$T/out" "$T/new.txt" || bad "--microbatches=8 and --micro-batches 8 differ"
expect_exit 2 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --micro-batches 8
one_error_line "--micro-batches: given twice"
# no temporary files left behind
ls "$T" | grep -q '\.tmp\.' && bad "temporary files left: $(ls "$T")"

finish
