#!/bin/sh
# expect_exit.sh STATUS REGEX CMD ARGS... — runs CMD, passes when it exits with
# STATUS and its output (stdout + stderr) matches REGEX (empty: anything).
. "$(dirname "$0")/../lib.sh"
want=$1 pattern=$2
shift 2
expect_exit "$want" "$@"
cat "$T/out" "$T/err" | tee "$T/all"
[ -z "$pattern" ] || matches "$T/all" "$pattern"
finish
