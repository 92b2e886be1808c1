#!/bin/sh
# run_install.sh BUILD_DIR — `meson install` puts megaplan, its man page, the
# bash and zsh completions, the hardware profiles and the examples where
# they belong; the installed megaplan works from any folder (its profiles
# and presets are compiled in); the completions propose the verbs and each
# verb's options, and the man page is well-formed roff.
set -u
. "$(dirname "$0")/../lib.sh"
build=$(abs_path "$1")
dest=$T/dest

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$T/install.log" 2>&1 ||
    { cat "$T/install.log"; fail "meson install --destdir"; }
# where meson was told to put things (prefix, bindir, datadir, mandir)
dirs=$(meson introspect "$build" --buildoptions | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"], o["bindir"], o["datadir"], o["mandir"])') || fail "meson introspect"
set -- $dirs
prefix=$1 bindir=$2 datadir=$3 mandir=$4
root=$dest$prefix
mp=$root/$bindir/megaplan
share=$root/$datadir
man=$root/$mandir/man1/megaplan.1
bash_file=$share/bash-completion/completions/megaplan
zsh_file=$share/zsh/site-functions/_megaplan

for f in "$mp" "$man" "$bash_file" "$zsh_file" "$share/megaplan/examples/plan-gpt-pp2.yaml" \
         "$share/megaplan/examples/hf/llama3-70b.json"; do
    [ -s "$f" ] && ok || bad "not installed: ${f#$dest}"
done
[ -x "$mp" ] && ok || bad "the installed megaplan is not executable"

# the installed profiles are the compiled-in ones, and read back as such
cd / || exit 1
"$mp" hw >"$T/hw.txt" 2>&1 && ok || bad "installed megaplan hw: $(cat "$T/hw.txt")"
for name in $(awk 'NR > 1 {print $1}' "$T/hw.txt"); do
    [ -f "$share/megaplan/hwprofiles/$name.yaml" ] && ok || bad "profile $name not installed"
    "$mp" hw "$name" >"$T/a.yaml" 2>&1 && "$mp" hw "$share/megaplan/hwprofiles/$name.yaml" >"$T/b.yaml" 2>&1
    same "$T/a.yaml" "$T/b.yaml"
done
"$mp" estimate --model gpt3-175b --gpus 1024 --tp 8 --pp 8 >/dev/null 2>"$T/err" &&
    ok || bad "installed megaplan estimate from /: $(cat "$T/err")"
"$mp" simulate "$share/megaplan/examples/plan-gpt-pp2.yaml" >/dev/null 2>"$T/err" &&
    ok || bad "installed megaplan simulate of an installed example: $(cat "$T/err")"

# the installed files are what this megaplan writes
for what in man bash zsh; do
    "$mp" --generate "$what" >"$T/gen.$what" || bad "megaplan --generate $what"
done
same "$T/gen.man" "$man"
same "$T/gen.bash" "$bash_file"
same "$T/gen.zsh" "$zsh_file"
expect_exit 2 "$mp" --generate fish

# --- the man page: a section per verb, every verb's options ---
for s in '^\.TH MEGAPLAN 1 ' '^\.SH NAME$' '^\.SH SYNOPSIS$' '^\.SH "MEGAPLAN SEARCH"$' \
         '^\.SH "MEGAPLAN EXEC"$' '^\.SH "MEGAPLAN HW"$' '^\.B \\-\\-micro\\-batches ' \
         '^\.B \\-\\-fix ' '^\.B \\-\\-deadline '; do
    matches "$man" "$s"
done
lacks "$man" "microbatches"
if command -v groff >/dev/null 2>&1; then
    # -ww: every warning; -z: no output, only the diagnostics
    groff -man -ww -z "$man" >"$T/groff.txt" 2>&1 && ok || bad "groff refuses the man page"
    [ ! -s "$T/groff.txt" ] && ok || bad "groff warns: $(head -3 "$T/groff.txt")"
    if command -v man >/dev/null 2>&1; then
        MANWIDTH=80 man -l "$man" 2>/dev/null | grep -q "MEGAPLAN EXEC" && ok ||
            bad "man -l does not render the exec section"
    fi
else
    echo "run_install.sh: no groff here: the man page had the structural checks only"
fi

# --- bash: the verbs, then a verb's options and their values ---
if command -v bash >/dev/null 2>&1; then
    complete_bash() { # words of the command line; the last is being completed
        PATH=$root/$bindir:$PATH bash -c '
            . "$1"; shift
            COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
            _megaplan
            printf "%s\n" "${COMPREPLY[@]}"' _ "$bash_file" "$@" | sort
    }
    complete_bash megaplan "" >"$T/c"
    for v in search estimate explain simulate exec calibrate models hw help; do
        matches "$T/c" "^$v$"
    done
    complete_bash megaplan ex >"$T/c"
    [ "$(tr '\n' ' ' <"$T/c")" = "exec explain " ] && ok || bad "megaplan ex<TAB>: $(cat "$T/c")"
    complete_bash megaplan exec --mi >"$T/c"
    [ "$(cat "$T/c")" = "--micro-batches" ] && ok || bad "exec --mi<TAB>: $(cat "$T/c")"
    complete_bash megaplan search --model 175B --f >"$T/c"
    [ "$(tr '\n' ' ' <"$T/c")" = "--first-stage-layers --fix --flex-backend --flex-sms --force --format --fp8-act-cache --fp8-param-gather --fp8-recipe " ] && ok || bad "search --f<TAB>: $(cat "$T/c")"
    complete_bash megaplan search --hw all --dead >"$T/c"
    matches "$T/c" "^--deadline$"
    complete_bash megaplan estimate --schedule "" >"$T/c"
    [ "$(tr '\n' ' ' <"$T/c")" = "1f1b dualpipe dualpipev gpipe interleaved-1f1b zb-h1 zb-v " ] && ok || bad "--schedule <TAB>: $(cat "$T/c")"
    complete_bash megaplan estimate --hw dgx-h >"$T/c"
    matches "$T/c" "^dgx-h100$"
    complete_bash megaplan help s >"$T/c"
    [ "$(tr '\n' ' ' <"$T/c")" = "search simulate " ] && ok || bad "help s<TAB>: $(cat "$T/c")"
    complete_bash megaplan exec --test >"$T/c"
    grep -q . "$T/c" && bad "the hidden test options are proposed: $(cat "$T/c")" || ok
else
    echo "run_install.sh: no bash here: the bash completion was not run"
fi

# --- zsh: the completion parses (zsh -n) ---
if command -v zsh >/dev/null 2>&1; then
    zsh -n "$zsh_file" 2>"$T/zsh.txt" && ok || bad "zsh -n: $(cat "$T/zsh.txt")"
    head -1 "$zsh_file" | grep -q '^#compdef megaplan$' && ok || bad "_megaplan lacks #compdef"
    matches "$zsh_file" "'--micro-batches\["
else
    echo "run_install.sh: no zsh here (apt-get install zsh): the zsh completion was not parsed"
fi
finish
