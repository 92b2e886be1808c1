#!/bin/sh
# The repository is self-contained: no tracked file may refer to the folder beside
# it (the pattern is written with a bracket so this file does not match itself).
# Usage: check_self_contained.sh SOURCE_ROOT. Exits 1 naming each file:line.
#        check_self_contained.sh --self-test: runs the check on a temporary folder
#        holding one such reference and exits 0 only if the check caught it.
. "$(dirname "$0")/../lib.sh"
if [ "$1" = --self-test ]; then
    printf 'data: ../%s/data/x.csv\n' shared > "$T/notes.md"
    sh "$0" "$T" >/dev/null
    rc=$?
    [ "$rc" = 1 ] && exit 0
    fail "the check missed a reference outside the repository (exit $rc)"
fi
root=${1:?usage: check_self_contained.sh SOURCE_ROOT}
cd "$root" || exit 2
pattern='\.\./share[d]'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    hits=$(git grep -nI -e "$pattern" -- . 2>/dev/null)
else
    hits=$(grep -rnI --exclude-dir=.git --exclude-dir='build*' -e "$pattern" . 2>/dev/null)
fi
if [ -n "$hits" ]; then
    echo "files refer to a path outside the repository (copy the data into tests/data):"
    echo "$hits"
    exit 1
fi
exit 0
