#!/bin/sh
# run_help.sh MEGAPLAN — help comes from the option tables (src/cli/opt.h):
# `megaplan help VERB` and `megaplan VERB --help` print the same text for
# every verb; hidden rows (test hooks, old spellings) are not shown; an
# unknown option names the closest one; an old spelling still works.
set -u
. "$(dirname "$0")/../lib.sh"
bin=$(abs_path "$1")
cd "$T" || exit 1

"$bin" --help >top.txt && ok || bad "megaplan --help"
"$bin" help >help.txt && ok || bad "megaplan help"
same top.txt help.txt
for verb in search estimate explain simulate exec calibrate models hw; do
    contains top.txt "  $verb "
    expect_exit 0 "$bin" help "$verb"
    cp "$T/out" "help-$verb.txt"
    expect_exit 0 "$bin" "$verb" --help
    same "$T/out" "help-$verb.txt"
    # not the top-level list: the verb's own usage and its options
    matches "help-$verb.txt" "^usage: (mpirun -np N )?megaplan $verb "
    lacks "help-$verb.txt" "usage: megaplan <verb>"
    matches "help-$verb.txt" "^  --[a-z]"
done
# each verb shows its own options, from its own table and the shared ones
contains help-search.txt "--fix KEY=VALUE"
contains help-search.txt "--model M"
contains help-explain.txt "--top K"
lacks help-explain.txt "--fix"
contains help-estimate.txt "--dispatcher D"
contains help-simulate.txt "--unit-ops"
contains help-simulate.txt "--tp t"
contains help-exec.txt "--micro-batches M"
contains help-calibrate.txt "--name NAME"
contains help-models.txt "--format F"
"$bin" search --hw all --help >hwmode.txt && ok || bad "search --hw all --help"
contains hwmode.txt "--deadline D"
# hidden rows stay hidden
lacks help-exec.txt "--microbatches"
lacks help-exec.txt "--test-"
lacks help-exec.txt "--checked-plan"
lacks help-simulate.txt "--microbatches"

expect_exit 2 "$bin" help frobnicate
contains "$T/err" "megaplan help: 'frobnicate' is not a verb"
expect_exit 2 "$bin" help search estimate
contains "$T/err" "megaplan help: estimate: one verb at a time"

# an unknown option names the nearest of the verb's (and only within two edits)
expect_exit 2 "$bin" estimate --model 125M --gpus 8 --tpp 2
same_line() { [ "$(cat "$T/err")" = "$1" ] && ok || bad "stderr '$(cat "$T/err")', wanted '$1'"; }
same_line "megaplan estimate: --tpp: unknown option (did you mean --tp? see megaplan estimate --help)"
expect_exit 2 "$bin" search --model 125M --gpus 8 --fixx tp=2
same_line "megaplan search: --fixx: unknown option (did you mean --fix? see megaplan search --help)"
expect_exit 2 "$bin" simulate --unit-op --pp 2 --micro-batches 4
same_line "megaplan simulate: --unit-op: unknown option (did you mean --unit-ops? see megaplan simulate --help)"
expect_exit 2 "$bin" exec plan.yaml --steps=2 --sheck-every 2
same_line "megaplan exec: --sheck-every: unknown option (did you mean --check-every? see megaplan exec --help)"
expect_exit 2 "$bin" hw --frobnicate
same_line "megaplan hw: --frobnicate: unknown option (see megaplan hw --help)"

# exec's --micro-batches and its old spelling are one option
expect_exit 2 "$bin" exec plan.yaml --micro-batches 0
if grep -q "not built" "$T/err"; then
    echo "run_help.sh: the executor is not built: exec's option values are not read"
else
    same_line "megaplan exec: --micro-batches: '0': expected a whole number from 1 to 1048576"
    expect_exit 2 "$bin" exec plan.yaml --microbatches 0
    same_line "megaplan exec: --micro-batches: '0': expected a whole number from 1 to 1048576"
fi
finish
