#!/bin/sh
# run_outputs.sh MEGAPLAN — where -o, --trace and --plot write (core/output.h):
# through to devices and FIFOs, "-" and /dev/stdout to standard output,
# through symlinks (the target written, the link kept), a read-only file
# refused (exit 2, one line) unless --force, a regular file replaced by
# rename (never half-written). Each check failed on the old rename-over-
# anything behaviour.
set -u
. "$(dirname "$0")/../lib.sh"
bin=$(abs_path "$1")
cd "$T" || exit 1

search() { "$bin" search --model 125M --gpus 8 --no-simulate --top 1 "$@"; }
sim() { "$bin" simulate --unit-ops --pp 2 --micro-batches 4 "$@"; }
# refused_at_once REGEX CMD: megaplan CMD (words split) is refused with exit 2,
# one stderr line matching the extended REGEX and nothing on stdout (skipped
# where the executor is not built)
refused_at_once() {
    ra_want=$1
    shift
    # shellcheck disable=SC2086
    "$bin" $* >out.txt 2>err.txt
    rc=$?
    if grep -q "was not built" err.txt; then
        echo "SKIP $*: the executor is not built"
    else
        [ "$rc" -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && [ ! -s out.txt ] &&
            grep -Eq "$ra_want" err.txt && ok || bad "$*: exit $rc: $(head -3 err.txt)"
    fi
}

# --- a regular file: written by rename, mode kept ---
search -o plan.yaml >out.txt 2>err.txt && ok || bad "search -o plan.yaml: $(cat err.txt)"
grep -q '^megaplan_plan: 1' plan.yaml && ok || bad "plan.yaml is not a plan"
"$bin" simulate plan.yaml >/dev/null 2>&1 && ok || bad "the plan written does not read back"
chmod 640 plan.yaml
search -o plan.yaml >/dev/null 2>&1 && ok || bad "search -o over an existing file"
[ "$(stat -c %a plan.yaml)" = 640 ] && ok || bad "replacing plan.yaml lost its mode: $(stat -c %a plan.yaml)"

# --- /dev/null: written through, the device stays a device ---
search -o /dev/null >out.txt 2>err.txt && ok || bad "search -o /dev/null: $(cat err.txt)"
[ -c /dev/null ] && ok || bad "/dev/null is no longer a character device"
sim --trace /dev/null >/dev/null 2>err.txt && ok || bad "simulate --trace /dev/null: $(cat err.txt)"
[ -c /dev/null ] && ok || bad "/dev/null is no longer a character device after --trace"
# a device that refuses the write: the error comes back, exit 2, one line
if [ -c /dev/full ]; then
    search -o /dev/full >out.txt 2>err.txt
    rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q '/dev/full: cannot write: No space left' err.txt &&
        ok || bad "search -o /dev/full: exit $rc: $(cat err.txt)"
    [ -c /dev/full ] && ok || bad "/dev/full is no longer a character device"
fi

# --- a FIFO: written through to its reader, still a FIFO ---
mkfifo fifo
cat fifo >from-fifo.txt &
reader=$!
search -o fifo >/dev/null 2>err.txt && ok || bad "search -o fifo: $(cat err.txt)"
# a FIFO replaced by a file leaves its reader waiting: end it, not the test
[ -p fifo ] && ok || { bad "the FIFO was replaced"; kill "$reader" 2>/dev/null; }
wait "$reader"
grep -q '^megaplan_plan: 1' from-fifo.txt && ok || bad "the FIFO's reader got no plan"
cat fifo >trace-from-fifo.json &
reader=$!
sim --trace fifo >/dev/null 2>err.txt && ok || bad "simulate --trace fifo: $(cat err.txt)"
[ -p fifo ] || { bad "simulate --trace replaced the FIFO"; kill "$reader" 2>/dev/null; }
wait "$reader"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' trace-from-fifo.json && ok ||
    bad "the trace through the FIFO is not JSON"

# --- "-" and /dev/stdout: standard output; the report goes to stderr ---
search -o - >stdout.txt 2>err.txt && ok || bad "search -o -: $(cat err.txt)"
grep -q '^megaplan_plan: 1' stdout.txt && ok || bad "search -o -: no plan on stdout"
grep -q '^rank ' stdout.txt && bad "search -o -: the table is mixed into the plan" || ok
grep -q '^rank ' err.txt && ok || bad "search -o -: the table is not on stderr"
[ ! -e ./- ] && ok || bad "search -o - made a file named -"
# standard output that refuses the write: one line (main's check of stdout said it again)
if [ -c /dev/full ]; then
    for cmd in "search -o -" "sim --trace -"; do
        $cmd >/dev/full 2>err.txt
        rc=$?
        [ "$rc" -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] &&
            grep -q ': standard output: cannot write: No space left on device$' err.txt &&
            ok || bad "$cmd >/dev/full: exit $rc: $(cat err.txt)"
    done
fi
search -o /dev/stdout >stdout2.txt 2>/dev/null && ok || bad "search -o /dev/stdout"
grep -q '^megaplan_plan: 1' stdout2.txt && ok || bad "search -o /dev/stdout: no plan on stdout"
sim --trace - >trace-stdout.json 2>err.txt && ok || bad "simulate --trace -: $(cat err.txt)"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' trace-stdout.json && ok ||
    bad "simulate --trace -: stdout is not the trace alone"
sim --trace - --format json >out.txt 2>err.txt
[ $? -eq 2 ] && [ ! -s out.txt ] && ok || bad "simulate --trace - --format json: two documents on stdout"

# --- a symlink: the target written, the link kept ---
mkdir real
: >real/target.yaml
ln -s real/target.yaml link.yaml
search -o link.yaml >/dev/null 2>err.txt && ok || bad "search -o link.yaml: $(cat err.txt)"
[ -L link.yaml ] && ok || bad "the symlink was replaced by a file"
grep -q '^megaplan_plan: 1' real/target.yaml && ok || bad "the symlink's target was not written"
ls real | grep -q '\.tmp\.' && bad "temporary file left beside the target" || ok
# a dangling symlink: the file it names is created
ln -s real/new.json dangling.json
sim --trace dangling.json >/dev/null 2>err.txt && ok || bad "--trace dangling.json: $(cat err.txt)"
[ -L dangling.json ] && [ -s real/new.json ] && ok || bad "the dangling symlink's target was not created"
if command -v gnuplot >/dev/null 2>&1; then
    : >real/pic.svg
    : >real/pic-memory.svg
    ln -s real/pic.svg pic.svg
    ln -s real/pic-memory.svg pic-memory.svg
    sim --plot pic.svg >/dev/null 2>err.txt && ok || bad "--plot through symlinks: $(cat err.txt)"
    [ -L pic.svg ] && [ -L pic-memory.svg ] && ok || bad "--plot replaced its symlinks"
    grep -q '<svg' real/pic.svg && grep -q '<svg' real/pic-memory.svg && ok ||
        bad "--plot did not draw into the symlinks' targets"
fi

# --- an output that is an input of the run: refused, the input kept (search -o
# over the --model file, --trace over the plan: each replaced it, exit 0) ---
"$bin" models --format yaml 125M >model.yaml
cp plan.yaml plan-in.yaml
for cmd in "search --model model.yaml --gpus 8 -o model.yaml" "search --model ./model.yaml --gpus 8 -o model.yaml" \
           "simulate plan-in.yaml --trace plan-in.yaml" "exec plan-in.yaml --np 1 --trace ./plan-in.yaml"; do
    refused_at_once "^megaplan [a-z]+: [-a-z]+: [./a-z-]+\.yaml is an input of this run: writing it would replace it" $cmd
done
grep -q '^name: gpt3-125m' model.yaml && cmp -s plan.yaml plan-in.yaml && ok || bad "an input was replaced by an output"

# --- --trace naming a picture of --plot: refused before anything is written
# (the plot was drawn over the trace, exit 0) ---
if command -v gnuplot >/dev/null 2>&1; then
    for t in same.svg ./same.svg same-memory.svg; do
        sim --trace "$t" --plot same.svg >out.txt 2>err.txt
        rc=$?
        [ "$rc" -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] &&
            grep -q "^megaplan simulate: --trace: .* is also a picture of --plot" err.txt &&
            ok || bad "--trace $t --plot same.svg: exit $rc: $(cat err.txt)"
    done
    [ ! -e same.svg ] && [ ! -e same-memory.svg ] && ok || bad "a refused --trace/--plot pair wrote a file"
fi

# --- a read-only file: refused (exit 2, one line, untouched) unless --force ---
printf 'keep me\n' >ro.yaml
chmod 444 ro.yaml
search -o ro.yaml >out.txt 2>err.txt
rc=$?
[ "$rc" -eq 2 ] && ok || bad "search -o ro.yaml: exit $rc, expected 2"
[ "$(wc -l <err.txt)" -eq 1 ] && grep -q '^megaplan search: ro.yaml: read-only file: not replaced (--force replaces it)$' err.txt &&
    ok || bad "search -o ro.yaml: message: $(cat err.txt)"
[ ! -s out.txt ] && ok || bad "search -o ro.yaml: output on stdout"
[ "$(cat ro.yaml)" = "keep me" ] && ok || bad "the read-only file was replaced without --force"
sim --trace ro.yaml >out.txt 2>err.txt
[ $? -eq 2 ] && grep -q 'read-only file' err.txt && [ "$(cat ro.yaml)" = "keep me" ] && ok ||
    bad "simulate --trace ro.yaml: $(cat err.txt)"
# exec --trace and calibrate -o refuse it before any rank starts
for cmd in "exec plan.yaml --np 1 --trace ro.yaml" "calibrate --np 1 -o ro.yaml"; do
    "$bin" $cmd >out.txt 2>err.txt
    rc=$?
    if grep -q "was not built" err.txt; then
        echo "SKIP $cmd: the executor is not built"
    else
        [ "$rc" -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q 'ro.yaml: read-only file' err.txt &&
            ok || bad "$cmd: exit $rc: $(cat err.txt)"
    fi
done
[ "$(cat ro.yaml)" = "keep me" ] && ok || bad "exec or calibrate replaced the read-only file"
# a missing folder too: one line before any work (exec ran every step, then
# failed writing the trace under mpirun's own lines)
for cmd in "exec plan.yaml --np 1 --trace nodir/t.json" "calibrate --np 1 -o nodir/c.yaml" \
           "search --model 125M --gpus 8 -o nodir/x.yaml" \
           "simulate --unit-ops --pp 2 --micro-batches 4 --trace ro.yaml/t.json"; do
    refused_at_once ': (nodir/[a-z]+|ro\.yaml/t)\.(json|yaml): cannot write: (No such file or directory|Not a directory)$' $cmd
done
# a folder access() calls writable that refuses a new file (sysfs, even for root):
# refused before any rank starts (calibrate measured, then failed under mpirun's lines)
if [ -d /sys/kernel ] && ! (: >/sys/megaplan-probe) 2>/dev/null; then
    printf 'megaplan_plan: 1\nmodel: {name: t, arch: gpt, layers: 1, hidden: 64, heads: 2, vocab: 128, seq: 32}\nhw: dgx-a100\ntraining: {gpus: 1, global_batch: 1}\n' >one.yaml
    for cmd in "calibrate --np 1 -o /sys/c.yaml" "exec one.yaml --np 1 --trace /sys/t.json"; do
        refused_at_once ': /sys/[ct]\.[a-z]+: cannot write: ' $cmd
    done
fi
search -o ro.yaml --force >/dev/null 2>err.txt && ok || bad "search -o ro.yaml --force: $(cat err.txt)"
grep -q '^megaplan_plan: 1' ro.yaml && ok || bad "--force did not replace the read-only file"
[ "$(stat -c %a ro.yaml)" = 444 ] && ok || bad "--force: the file is no longer read-only"
chmod 444 ro.yaml
sim --trace ro.yaml --force >/dev/null 2>err.txt && ok || bad "simulate --trace ro.yaml --force: $(cat err.txt)"

# --- a folder: refused, one line ---
search -o real >out.txt 2>err.txt
[ $? -eq 2 ] && grep -q 'real: is a folder, not a file' err.txt && ok || bad "search -o FOLDER: $(cat err.txt)"

ls | grep -q '\.tmp\.' && bad "temporary files left: $(ls)" || ok
finish
