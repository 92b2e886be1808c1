#!/bin/sh
# CLI tests of `megaplan simulate`: numbers, trace (parsed with cJSON by
# check_trace), JSON output, plots with and without gnuplot, bad input.
#   cli_simulate.sh MEGAPLAN CHECK_TRACE EXAMPLES_DIR
set -u
MP=$1
CHECK=$2
EX=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# expect STATUS CMD...: runs CMD, stdout to $T/out, stderr to $T/err
expect() {
    want=$1
    shift
    "$@" >"$T/out" 2>"$T/err"
    got=$?
    if [ "$got" != "$want" ]; then
        fail "exit $got, want $want: $*"
        sed 's/^/    /' "$T/err" >&2
    fi
}

contains() { # FILE TEXT
    grep -qF -- "$2" "$1" || { fail "'$2' not in $1:"; sed 's/^/    /' "$1" >&2; }
}

one_error_line() { # FIELD: the error is one line naming the field, nothing on stdout
    [ "$(wc -l <"$T/err")" -eq 1 ] || fail "error is not one line: $(cat "$T/err")"
    contains "$T/err" "megaplan simulate: "
    contains "$T/err" "$1"
    [ ! -s "$T/out" ] || fail "stdout not empty on error"
}

# --- unit-time ops: the closed form exactly, trace valid ---
expect 0 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --schedule 1f1b --trace "$T/u.json"
# unit-time ops have no seconds and no bytes: no "s", no "GiB"
contains "$T/out" "pipeline (simulated)      33.0000"
contains "$T/out" "pipeline (closed form)    33.0000     simulated +0.0%"
contains "$T/out" "bubble           9.0000     27.3%"
contains "$T/out" "       4.00 units"
grep -Eq '[0-9] s( |$)|GiB' "$T/out" && fail "unit-time ops printed seconds or GiB"
"$CHECK" trace "$T/u.json" 4 32 || fail "unit 1f1b trace"

expect 0 "$MP" simulate --unit-ops --pp 4 --vpp 2 --micro-batches 8 --trace "$T/i.json"
contains "$T/out" "schedule interleaved-1f1b, 4 pipeline ranks, 2 chunks each, 8 micro-batches"
contains "$T/out" "pipeline (closed form)    28.5000     simulated +0.0%"
"$CHECK" trace "$T/i.json" 4 64 || fail "unit interleaved trace"

expect 0 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --schedule zb-h1 --trace "$T/z.json"
contains "$T/out" "pipeline (simulated)      27.0000"
"$CHECK" trace "$T/z.json" 4 32 || fail "unit zb-h1 trace"
grep -q '"W 7.0"' "$T/z.json" || fail "zb-h1 trace has no W events"

expect 0 "$MP" simulate --unit-ops --pp 2 --micro-batches 4 --schedule gpipe --format json
"$CHECK" json "$T/out" 2 || fail "unit json"
expect 0 "$MP" simulate --unit-ops --pp 2 --micro-batches 4 --schedule gpipe --format json --events
"$CHECK" json "$T/out" 2 events || fail "unit json --events"
expect 0 "$MP" simulate --unit-ops --pp 2 --micro-batches 4 --schedule gpipe --format yaml
python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); assert d["simulation"]["makespan_s"] > 0' "$T/out" ||
    fail "unit yaml is not one YAML document"
expect 2 "$MP" simulate --unit-ops --pp 2 --micro-batches 4 --events
one_error_line "--events: the per-op events come with --format json"

# --- big runs: the JSON summary always works (p64 v2 m1024 was refused over
# 65536 units); --events streams every op ---
expect 0 "$MP" simulate --unit-ops --pp 64 --vpp 2 --micro-batches 1024 --format json
"$CHECK" json "$T/out" 64 || fail "p64 v2 m1024 json summary"
expect 0 "$MP" simulate --model 1T --gpus 4096 --tp 8 --pp 64 --vpp 2 --global-batch 8192 --format json
"$CHECK" json "$T/out" 64 estimate || fail "1T p64 v2 m1024 json summary"
expect 0 "$MP" simulate --unit-ops --pp 64 --vpp 2 --micro-batches 1024 --format json --events
"$CHECK" json "$T/out" 64 events || fail "p64 v2 m1024 json --events"
# every F and B of 64 ranks x 2 chunks x 1024 micro-batches is there
[ "$(grep -c '"stream": "compute"' "$T/out")" -eq $((64 * 2 * 1024 * 2)) ] ||
    fail "p64 v2 m1024 --events: $(grep -c '"stream": "compute"' "$T/out") compute events"

# --- a configuration from estimate's options ---
expect 0 "$MP" simulate --model 175B --gpus 64 --tp 8 --pp 4 --global-batch 32 --trace "$T/c.json"
contains "$T/out" "step (simulated)"
contains "$T/out" "step (estimate)"
contains "$T/out" "per pipeline rank:"
"$CHECK" trace "$T/c.json" 4 $((4 * 16)) || fail "config trace"

expect 0 "$MP" simulate --model 175B --gpus 64 --tp 8 --pp 4 --vpp 2 --global-batch 32 --format json
"$CHECK" json "$T/out" 4 estimate || fail "config json"
# --- the header and the plot title name every degree, cp included ---
expect 0 "$MP" simulate --model llama3-70b --gpus 1024 --hw dgx-h100 --tp 8 --cp 16 --global-batch 64
contains "$T/out" "llama3-70b on 1024 x dgx-h100: tp=8 pp=1 vpp=1 cp=16 dp=8, 1f1b"
if command -v gnuplot >/dev/null 2>&1; then
    expect 0 "$MP" simulate --model llama3-70b --gpus 1024 --hw dgx-h100 --tp 8 --cp 16 \
        --global-batch 64 --plot "$T/cp.svg"
    grep -q 'tp=8 pp=1 vpp=1 cp=16 dp=8' "$T/cp.svg" || fail "the plot title lacks cp=16"
    grep -q 'tp=8 pp=1 vpp=1 cp=16 dp=8' "$T/cp-memory.svg" || fail "the memory plot title lacks cp=16"
fi

# --- plan files ---
expect 0 "$MP" simulate "$EX/plan-gpt-pp2.yaml" --trace "$T/p.json"
contains "$T/out" "schedule interleaved-1f1b, 2 pipeline ranks, 2 chunks each, 4 micro-batches"
"$CHECK" trace "$T/p.json" 2 16 || fail "plan trace"
expect 0 "$MP" simulate "$EX/plan-gpt3-175b-1024.yaml" --format json
"$CHECK" json "$T/out" 8 estimate || fail "plan json"

# --- plots ---
if command -v gnuplot >/dev/null 2>&1; then
    expect 0 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --plot "$T/pipe.png"
    head -c 4 "$T/pipe.png" | od -c | grep -q 'P   N   G' || fail "pipe.png is not a PNG"
    [ -s "$T/pipe-memory.png" ] || fail "no memory plot"
    expect 0 "$MP" simulate "$EX/plan-gpt-pp2.yaml" --plot "$T/pipe.svg"
    grep -q '<svg' "$T/pipe.svg" || fail "pipe.svg is not SVG"
    grep -q '<svg' "$T/pipe-memory.svg" || fail "pipe-memory.svg is not SVG"
    # every virtual chunk has its own key entry (the key knew chunks 0 and 1)
    expect 0 "$MP" simulate --unit-ops --pp 4 --vpp 3 --micro-batches 8 --plot "$T/v3.svg"
    for k in "F chunk 0" "F chunk 1" "F chunk 2" "B chunk 0" "B chunk 1" "B chunk 2"; do
        grep -q "$k" "$T/v3.svg" || fail "the vpp=3 key lacks $k"
    done
    # unit-time ops: no seconds, no GiB, anywhere in the pictures
    grep -q "time (units)" "$T/v3.svg" || fail "the unit-ops time axis is not in units"
    grep -Eq 'GiB|time \(s\)' "$T/v3.svg" "$T/v3-memory.svg" && fail "unit-ops plots show s or GiB"
    # the memory plot has a line at the GPU's capacity
    expect 0 "$MP" simulate "$EX/plan-gpt3-175b-1024.yaml" --plot "$T/175b.svg"
    grep -q "GPU memory (80 GiB)" "$T/175b-memory.svg" || fail "no capacity line on the memory plot"
    # ops narrower than a pixel are drawn together: this plot was 2.66 MB
    # (4639 boxes, one per op, 1544 of them under a pixel); now about 357 KB
    size=$(wc -c <"$T/175b.svg")
    [ "$size" -lt 600000 ] || fail "the 175B pipeline SVG is $size bytes (over 600 KB)"
fi
# without gnuplot: --plot fails at once (exit 1) saying how to install it;
# nothing is written
expect 1 env PATH=/nonexistent "$MP" simulate --unit-ops --pp 2 --micro-batches 2 \
    --trace "$T/np.json" --plot "$T/np.svg"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "no gnuplot: not one line: $(cat "$T/err")"
contains "$T/err" "megaplan simulate: --plot: gnuplot not found on PATH: install it (Debian/Ubuntu: apt-get install gnuplot-nox)"
[ ! -s "$T/out" ] || fail "no gnuplot: stdout not empty"
[ ! -e "$T/np.json" ] || fail "no gnuplot: the trace was written before the refusal"
[ ! -e "$T/np.svg" ] || fail "a plot appeared without gnuplot"

# --- bad input: one line, exit 2, no file ---
expect 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --plot "$T/x.pdf"
one_error_line "--plot: the plot file must end in .svg or .png"
expect 2 "$MP" simulate --unit-ops --pp 4 --vpp 2 --micro-batches 6
one_error_line "--micro-batches: interleaved-1f1b needs the micro-batches (6) to be a multiple of pp (4)"
expect 2 "$MP" simulate --unit-ops --micro-batches 8
one_error_line "--pp: required with --unit-ops"
expect 2 "$MP" simulate --unit-ops --pp 4
one_error_line "--micro-batches: required with --unit-ops"
expect 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 0
one_error_line "--micro-batches"
expect 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --bogus
one_error_line "--bogus: unknown option"
expect 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --trace
one_error_line "--trace: needs a value"
expect 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --format megatron
one_error_line "--format"
expect 2 "$MP" simulate "$EX/plan-gpt-pp2.yaml" --tp 2
one_error_line "not both"
expect 2 "$MP" simulate "$T/missing.yaml"
one_error_line "missing.yaml"
printf 'megaplan_plan: 1\nmodel: [1, 2\n' >"$T/broken.yaml"
expect 2 "$MP" simulate "$T/broken.yaml"
one_error_line "broken.yaml:"
expect 2 "$MP" simulate --model 175B --gpus 64 --tp 8 --pp 3
one_error_line "megaplan simulate: "
expect 2 "$MP" simulate
one_error_line "--model: required: a plan file"
expect 2 "$MP" simulate --unit-ops --pp 4 --micro-batches 8 --trace "$T/nodir/t.json"
one_error_line "nodir"
[ ! -e "$T/nodir" ] || fail "a folder appeared"
expect 0 "$MP" simulate --help
contains "$T/out" "usage: megaplan simulate"
contains "$T/out" "--micro-batches M"
# the old spelling still works, is not shown, and means the same
grep -q -- "--microbatches" "$T/out" && fail "--help shows the old spelling --microbatches"
expect 0 "$MP" simulate --unit-ops --pp 4 --micro-batches 8
cp "$T/out" "$T/new.txt"
expect 0 "$MP" simulate --unit-ops --pp 4 --microbatches 8
cmp -s "$T/out" "$T/new.txt" || fail "--microbatches and --micro-batches differ"
expect 0 "$MP" simulate --unit-ops --pp 4 --microbatches=8
cmp -s "$T/out" "$T/new.txt" || fail "--microbatches=8 and --micro-batches 8 differ"
expect 2 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --micro-batches 8
one_error_line "--micro-batches: given twice"
# no temporary files left behind
ls "$T" | grep -q '\.tmp\.' && fail "temporary files left: $(ls "$T")"

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "all simulate CLI checks passed"
