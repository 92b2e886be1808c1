#!/bin/sh
# --fix sets (KEY=A|B) and --runtime megatron: search keeps to the values and
# to what Megatron-LM runs (no ZB-H1 or GPipe; splits and per-layer recompute
# only in the forms its flags express). --fix schedule=1f1b|interleaved-1f1b
# was once refused as an unknown schedule.
#   run_fix_sets.sh MEGAPLAN
M="$1"
. "$(dirname "$0")/../lib.sh"

"$M" search --model llama3-70b --gpus 1024 --hw dgx-a100 --fix 'schedule=1f1b|interleaved-1f1b' \
  --format json >"$T/sched" || fail "schedule set: exit $?"
"$M" search --model 175B --gpus 1024 --fix 'tp=4|8,micro_batch=1|2' --format json >"$T/tp" ||
  fail "tp set: exit $?"
# 1T on 4096: unrestricted, ZB-H1 reaches the top ten (the top five since
# selective recompute's module sets are searched: the V schedules and
# interleaving with core_attn+layernorm)
"$M" search --model 1T --gpus 4096 --top 10 --format json >"$T/free" || fail "1T: exit $?"
"$M" search --model 1T --gpus 4096 --runtime megatron --format json >"$T/megatron" ||
  fail "--runtime megatron: exit $?"
"$M" search --model 1T --gpus 4096 --runtime megatron --format megatron >"$T/flags" ||
  fail "--runtime megatron --format megatron: exit $?"
# the V schedules (zb-v, dualpipev: two chunks per rank) are searched by default,
# outside --runtime megatron (Megatron-LM runs neither), and --fix keeps to the
# ones named; their flags carry a note saying so
"$M" search --model llama3-8b --gpus 64 --fix 'schedule=zb-v|dualpipev' --top 10 --format json \
  >"$T/v" || fail "V schedules: exit $?"
"$M" search --model llama3-8b --gpus 64 --fix 'schedule=dualpipev' --format megatron \
  >"$T/vflags" || fail "dualpipev flags: exit $?"
grep -q '^# schedule dualpipev: Megatron-LM has no flag for it' "$T/vflags" ||
  { cat "$T/vflags"; fail "dualpipev flags lack the note"; }
# DualPipe (two copies of the stages, even pp) likewise
"$M" search --model llama3-8b --gpus 64 --fix 'schedule=dualpipe' --top 5 --format json \
  >"$T/dual" || fail "dualpipe: exit $?"
"$M" search --model llama3-8b --gpus 64 --fix 'schedule=1f1b|dualpipe' --top 10 --format json \
  >"$T/dual1" || fail "1f1b|dualpipe: exit $?"
"$M" search --model llama3-8b --gpus 64 --fix 'schedule=dualpipe' --format megatron \
  >"$T/dflags" || fail "dualpipe flags: exit $?"
grep -q '^# schedule dualpipe: Megatron-LM has no flag for it' "$T/dflags" ||
  { cat "$T/dflags"; fail "dualpipe flags lack the note"; }
"$M" search --model llama3-8b --gpus 64 --fix pp=4 --top 10 --no-simulate --format json \
  >"$T/pp4" || fail "pp=4 search: exit $?"
for r in default any megatron; do
  if [ $r = default ]; then set --; else set -- --runtime $r; fi
  "$M" search --model llama3-8b --gpus 64 --fix vpp=2 --top 10 --no-simulate --format json "$@" \
    >"$T/vpp2-$r" || fail "vpp=2 search ($r): exit $?"
done
python3 - "$T" <<'PY' || fail "plans outside the sets"
import json, sys, os
d = sys.argv[1]
load = lambda n: json.load(open(os.path.join(d, n)))
s = load("sched")
assert s and {o["parallel"]["schedule"] for o in s} <= {"1f1b", "interleaved-1f1b"}, s
t = load("tp")
assert t and {o["parallel"]["tp"] for o in t} <= {4, 8}, [o["parallel"] for o in t]
assert {o["parallel"]["micro_batch"] for o in t} <= {1, 2}
free = load("free")
assert any(o["parallel"]["schedule"] == "zb-h1" for o in free), "the unrestricted search lost its ZB-H1 plans: the test proves nothing"
# V schedules by default and with --runtime any (among the best at vpp 2),
# never with --runtime megatron
for r in ("default", "any"):
    assert {"zb-v", "dualpipev"} <= {o["parallel"]["schedule"] for o in load("vpp2-" + r)}, r
assert {o["parallel"]["schedule"] for o in load("vpp2-megatron")} == {"interleaved-1f1b"}
v = load("v")
assert v and {o["parallel"]["schedule"] for o in v} == {"zb-v", "dualpipev"}, [o["parallel"] for o in v]
assert all(o["parallel"]["vpp"] == 2 and o["parallel"]["pp"] >= 2 for o in v)
dual = load("dual")
assert dual and all(o["parallel"]["schedule"] == "dualpipe" and o["parallel"]["pp"] % 2 == 0
                    and o["parallel"]["vpp"] == 1 for o in dual), [o["parallel"] for o in dual]
assert "dualpipe" in {o["parallel"]["schedule"] for o in load("dual1")}
assert "dualpipe" in {o["parallel"]["schedule"] for o in load("pp4")}, "dualpipe is not weighed by default"
assert "zb-v" in {o["parallel"]["schedule"] for o in free}, "the V schedules are not weighed by default"
m = load("megatron")
assert m
for o in m:
    assert o["parallel"]["schedule"] in ("1f1b", "interleaved-1f1b"), o["parallel"]
PY
# (GPT-3's tanh GELU is noted whatever the plan: Megatron-Core runs erf)
grep '^# .*Megatron' "$T/flags" | grep -qv '^# activation gelu (tanh form)' &&
    { cat "$T/flags"; fail "the winner needs a caveat to run on Megatron-LM"; }

check_refused() { # want, args...
  want=$1; shift
  "$M" search "$@" >"$T/out" 2>"$T/err" && fail "$* was accepted"
  [ $? -eq 2 ] || fail "$*: exit status not 2"
  grep -q -- "$want" "$T/err" || { cat "$T/err"; fail "$*: stderr lacks '$want'"; }
}
check_refused "Megatron-LM has no zb-h1 schedule" --model 1T --gpus 4096 --runtime megatron --fix schedule=zb-h1
check_refused "none of the --fix schedules runs on Megatron-LM" --model 1T --gpus 4096 --runtime megatron --fix 'schedule=zb-h1|gpipe'
check_refused "Megatron-LM has no zb-v schedule" --model llama3-8b --gpus 64 --runtime megatron --fix schedule=zb-v
check_refused "Megatron-LM has no dualpipev schedule" --model llama3-8b --gpus 64 --runtime megatron --fix schedule=dualpipev
check_refused "Megatron-LM has no dualpipe schedule" --model llama3-8b --gpus 64 --runtime megatron --fix schedule=dualpipe
check_refused "dualpipe pairs rank r with pp-1-r" --model llama3-8b --gpus 48 --fix schedule=dualpipe --fix pp=3
check_refused "expected megatron" --model 1T --gpus 4096 --runtime deepspeed
check_refused "schedule=zb-h2: expected" --model 1T --gpus 4096 --fix 'schedule=1f1b|zb-h2'
check_refused "tp is fixed twice" --model 1T --gpus 4096 --tp 8 --fix 'tp=4|8'
echo "ok: --fix sets and --runtime megatron"
