#!/bin/sh
# norm_eps_loss.sh — the model's norm_eps is really used: one tiny plan run
# twice in one process (fp32 against the fp64 reference, mpi_case.sh), with
# two epsilons, passes its check both times and reports two different
# first-step losses (a run that ignored norm_eps would report the same).
#   norm_eps_loss.sh MEGAPLAN TEMPLATE EPS_A EPS_B [KEY=VALUE...]
# EPS "arch": no norm_eps in the plan (the architecture's default).
set -u
megaplan=$1 template=$2 a=$3 b=$4
shift 4
here=$(dirname "$0")
. "$here/../lib.sh"
for e in "$a" "$b"; do
    set_eps=
    [ "$e" = arch ] || set_eps="NORMEPS=$e"
    # shellcheck disable=SC2086 # no word when the plan keeps its architecture's
    sh "$here/mpi_case.sh" "$megaplan" "$template" ok 1 1 false 1 false LAUNCH=direct \
        $set_eps "$@" >"$T/out.$e" 2>&1 || {
        cat "$T/out.$e"
        fail "norm_eps $e: the run failed its check"
    }
    sed -n 's/^step 1: loss \([^ ]*\) .*/\1/p' "$T/out.$e" >"$T/loss.$e"
    [ -s "$T/loss.$e" ] || fail "norm_eps $e: no step 1 loss in the report"
    echo "norm_eps $e: step 1 loss $(cat "$T/loss.$e")"
done
if cmp -s "$T/loss.$a" "$T/loss.$b"; then
    fail "norm_eps $a and $b give the same loss: the epsilon is not used"
fi
echo "norm_eps_loss.sh: PASS"
