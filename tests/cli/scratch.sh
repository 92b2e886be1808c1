# scratch.sh — sourced by the cli test scripts after setting bin=MEGAPLAN:
# makes bin absolute, moves into a fresh scratch folder (removed on exit),
# and counts checks with ok / bad MESSAGE.
case "$bin" in /*) ;; *) bin=$(pwd)/$bin ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/megaplan-cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail=0
pass=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
