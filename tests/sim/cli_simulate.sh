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
expect 0 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --schedule 1f1b --trace "$T/u.json"
contains "$T/out" "pipeline (simulated)      33.0000 s"
contains "$T/out" "pipeline (closed form)    33.0000 s   simulated +0.0%"
contains "$T/out" "bubble           9.0000 s   27.3%"
"$CHECK" trace "$T/u.json" 4 32 || fail "unit 1f1b trace"

expect 0 "$MP" simulate --unit-ops --pp 4 --vpp 2 --microbatches 8 --trace "$T/i.json"
contains "$T/out" "schedule interleaved-1f1b, 4 pipeline ranks, 2 chunks each, 8 micro-batches"
contains "$T/out" "pipeline (closed form)    28.5000 s   simulated +0.0%"
"$CHECK" trace "$T/i.json" 4 64 || fail "unit interleaved trace"

expect 0 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --schedule zb-h1 --trace "$T/z.json"
contains "$T/out" "pipeline (simulated)      27.0000 s"
"$CHECK" trace "$T/z.json" 4 32 || fail "unit zb-h1 trace"
grep -q '"W 7.0"' "$T/z.json" || fail "zb-h1 trace has no W events"

expect 0 "$MP" simulate --unit-ops --pp 2 --microbatches 4 --schedule gpipe --format json
"$CHECK" json "$T/out" 2 || fail "unit json"

# --- a configuration from estimate's options ---
expect 0 "$MP" simulate --model 175B --gpus 64 --tp 8 --pp 4 --global-batch 32 --trace "$T/c.json"
contains "$T/out" "step (simulated)"
contains "$T/out" "step (estimate)"
contains "$T/out" "per pipeline rank:"
"$CHECK" trace "$T/c.json" 4 $((4 * 16)) || fail "config trace"

expect 0 "$MP" simulate --model 175B --gpus 64 --tp 8 --pp 4 --vpp 2 --global-batch 32 --format json
"$CHECK" json "$T/out" 4 estimate || fail "config json"

# --- plan files ---
expect 0 "$MP" simulate "$EX/plan-gpt-pp2.yaml" --trace "$T/p.json"
contains "$T/out" "schedule interleaved-1f1b, 2 pipeline ranks, 2 chunks each, 4 micro-batches"
"$CHECK" trace "$T/p.json" 2 16 || fail "plan trace"
expect 0 "$MP" simulate "$EX/plan-gpt3-175b-1024.yaml" --format json
"$CHECK" json "$T/out" 8 estimate || fail "plan json"

# --- plots ---
if command -v gnuplot >/dev/null 2>&1; then
    expect 0 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --plot "$T/pipe.png"
    head -c 4 "$T/pipe.png" | od -c | grep -q 'P   N   G' || fail "pipe.png is not a PNG"
    [ -s "$T/pipe-memory.png" ] || fail "no memory plot"
    expect 0 "$MP" simulate "$EX/plan-gpt-pp2.yaml" --plot "$T/pipe.svg"
    grep -q '<svg' "$T/pipe.svg" || fail "pipe.svg is not SVG"
    grep -q '<svg' "$T/pipe-memory.svg" || fail "pipe-memory.svg is not SVG"
fi
# without gnuplot: a note, the trace still written, no picture
expect 0 env PATH=/nonexistent "$MP" simulate --unit-ops --pp 2 --microbatches 2 \
    --trace "$T/np.json" --plot "$T/np.svg"
contains "$T/err" "gnuplot not found on PATH, plot $T/np.svg skipped (the trace is written)"
[ -s "$T/np.json" ] || fail "trace not written without gnuplot"
[ ! -e "$T/np.svg" ] || fail "a plot appeared without gnuplot"

# --- bad input: one line, exit 2, no file ---
expect 2 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --plot "$T/x.pdf"
one_error_line "--plot: the plot file must end in .svg or .png"
expect 2 "$MP" simulate --unit-ops --pp 4 --vpp 2 --microbatches 6
one_error_line "--microbatches: interleaved-1f1b needs the micro-batches (6) to be a multiple of pp (4)"
expect 2 "$MP" simulate --unit-ops --microbatches 8
one_error_line "--pp: required with --unit-ops"
expect 2 "$MP" simulate --unit-ops --pp 4
one_error_line "--microbatches: required with --unit-ops"
expect 2 "$MP" simulate --unit-ops --pp 4 --microbatches 0
one_error_line "--microbatches"
expect 2 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --bogus
one_error_line "--bogus: unknown option"
expect 2 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --trace
one_error_line "--trace: needs a value"
expect 2 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --format yaml
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
expect 2 "$MP" simulate --unit-ops --pp 4 --microbatches 8 --trace "$T/nodir/t.json"
one_error_line "nodir"
[ ! -e "$T/nodir" ] || fail "a folder appeared"
expect 0 "$MP" simulate --help
contains "$T/out" "usage: megaplan simulate"
# no temporary files left behind
ls "$T" | grep -q '\.tmp\.' && fail "temporary files left: $(ls "$T")"

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "all simulate CLI checks passed"
