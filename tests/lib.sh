# tests/lib.sh — the helpers every shell test under tests/ shares. Source it
# first thing, from the script's own folder:
#
#     . "$(dirname "$0")/../lib.sh"
#
# It gives:
#   T                  a fresh scratch folder, removed when the script exits
#                      (a script with an EXIT trap of its own calls lib_cleanup)
#   fail MESSAGE       a failure that ends the script now (exit 1)
#   ok, bad MESSAGE    one check passed / failed; the script goes on, and
#                      finish reports the count
#   finish             "NAME: N passed, M failed"; exit 1 when any failed
#   skip REASON        the test cannot run here: says why, exit 77 (meson's skip)
#   expect_exit STATUS CMD...
#                      runs CMD with stdout in $T/out and stderr in $T/err;
#                      bad unless it exits STATUS
#   contains FILE TEXT, lacks FILE TEXT
#                      the fixed TEXT is / is not in FILE (bad otherwise)
#   matches FILE REGEX the extended REGEX matches a line of FILE
#   succeeds WHAT CMD...
#                      ok when CMD exits 0, else bad "WHAT"
#   same A B           files A and B are byte for byte the same (bad with
#                      the first lines of their diff otherwise)
#   abs_path PATH      PATH made absolute (before a script cd's away)
# Every message names the script, so a meson log says which one failed.

lib_name=$(basename "$0")
lib_pass=0
lib_failed=0

T=$(mktemp -d "${TMPDIR:-/tmp}/megaplan-test.XXXXXX") || {
    echo "$lib_name: cannot make a scratch folder" >&2
    exit 99
}
lib_cleanup() { rm -rf "$T"; }
trap lib_cleanup EXIT

fail() {
    echo "$lib_name: FAIL: $*"
    exit 1
}

ok() { lib_pass=$((lib_pass + 1)); }

bad() {
    lib_failed=$((lib_failed + 1))
    echo "$lib_name: FAIL: $*"
}

skip() {
    echo "$lib_name: skipped: $*"
    exit 77
}

finish() {
    echo "$lib_name: $lib_pass passed, $lib_failed failed"
    [ "$lib_failed" -eq 0 ] || exit 1
    exit 0
}

expect_exit() {
    lib_want=$1
    shift
    "$@" >"$T/out" 2>"$T/err"
    lib_got=$?
    if [ "$lib_got" -eq "$lib_want" ]; then
        ok
    else
        bad "exit $lib_got, wanted $lib_want: $*"
        sed 's/^/    stderr: /' "$T/err" | head -5
    fi
}

contains() {
    if grep -qF -- "$2" "$1"; then
        ok
    else
        bad "'$2' not in $(basename "$1"):"
        sed 's/^/    /' "$1" | head -10
    fi
}

lacks() {
    if grep -qF -- "$2" "$1"; then
        bad "'$2' in $(basename "$1")"
    else
        ok
    fi
}

matches() {
    if grep -Eq -- "$2" "$1"; then
        ok
    else
        bad "/$2/ matches no line of $(basename "$1"):"
        sed 's/^/    /' "$1" | head -10
    fi
}

same() {
    if cmp -s "$1" "$2"; then
        ok
    else
        bad "$1 and $2 differ:"
        diff "$1" "$2" | head -10 | sed 's/^/    /'
    fi
}

succeeds() {
    lib_what=$1
    shift
    if "$@"; then
        ok
    else
        bad "$lib_what"
    fi
}

abs_path() {
    case "$1" in
    /*) echo "$1" ;;
    *) echo "$(pwd)/$1" ;;
    esac
}
