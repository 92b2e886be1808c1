#!/bin/sh
# The same search names the same plans whatever the machine's load: run it on
# an idle machine, then again while busy loops hold every core, and compare the
# outputs byte for byte (only the wall time they report may differ). A time
# limit on GLPK's stage split once made a loaded machine choose another winner.
#   run_reproducible.sh MEGAPLAN
M="$1"
. "$(dirname "$0")/../lib.sh"
busy=""
cleanup() {
  for pid in $busy; do kill "$pid" 2>/dev/null; done
  lib_cleanup
}
trap cleanup EXIT

# The reported wall time is the one field allowed to differ.
search() { # tag, then arguments
  tag=$1; shift
  "$M" search "$@" -o "$T/$tag.plan.yaml" >"$T/$tag.text" 2>"$T/$tag.err" || fail "search $* exit $?"
  "$M" search "$@" --format json >"$T/$tag.json" 2>>"$T/$tag.err" || fail "search $* --format json exit $?"
  "$M" search "$@" --format megatron >"$T/$tag.megatron" 2>>"$T/$tag.err" || fail "search $* --format megatron exit $?"
  sed -i 's/ in [0-9.]* s:/ in (time) s:/' "$T/$tag.text"
  sed -i 's/"seconds":[^,}]*/"seconds": (time)/' "$T/$tag.json"
}

jobs="llama3-70b:dgx-a100 175B:dgx-a100"
for job in $jobs; do
  search "idle-${job%%:*}" --model "${job%%:*}" --gpus 1024 --hw "${job##*:}"
done

cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
n=0
while [ $n -lt $((cores * 3)) ]; do
  sh -c 'while :; do :; done' &
  busy="$busy $!"
  n=$((n + 1))
done

for round in 1 2; do
  for job in $jobs; do
    model=${job%%:*}
    search "busy-$model" --model "$model" --gpus 1024 --hw "${job##*:}"
    for kind in text json megatron plan.yaml; do
      cmp -s "$T/idle-$model.$kind" "$T/busy-$model.$kind" || {
        diff "$T/idle-$model.$kind" "$T/busy-$model.$kind" | head -20
        fail "search --model $model: $kind under load (round $round) differs from the idle run"
      }
    done
  done
done
echo "ok: $jobs give the same output under load ($((cores * 3)) busy loops) as idle"
