#!/bin/sh
# expect_exit.sh STATUS REGEX CMD ARGS... — runs CMD, passes when it exits with
# STATUS and its output (stdout + stderr) matches REGEX (empty: anything).
want=$1 pattern=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq "$want" ] || { echo "expect_exit.sh: exit $rc, wanted $want"; exit 1; }
if [ -n "$pattern" ] && ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
    echo "expect_exit.sh: output lacks /$pattern/"
    exit 1
fi
exit 0
