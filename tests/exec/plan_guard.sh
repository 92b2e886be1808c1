#!/bin/sh
# plan_guard.sh MEGAPLAN TEMPLATE — every rank runs the plan the launcher checked:
#  1. a plan file changed between `exec --np`'s check and the ranks' start
#     (MEGAPLAN_MPIRUN is a wrapper that edits it, then runs mpirun) is refused;
#  2. ranks started with different plan files (mpirun's MPMD form) are refused;
#  3. the same launch with the file left alone runs and passes.
# Before rank 0 broadcast the plan, 1 ran the edited plan and 2 ran two plans
# at once (MPI_ERR_TRUNCATE, then a heap overflow in the DP reduction).
set -u
megaplan=$1 template=$2
. "$(dirname "$0")/../lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
sed -e "s/@TP@/1/; s/@SP@/false/; s/@DP@/2/; s/@PP@/1/; s/@DISTOPT@/false/" \
    -e "s/@GPUS@/2/; s/@GB@/4/; s/@MB@/1/; s/@TIED@/true/" \
    -e "s/@SCHED@/1f1b/; s/@LAYERS@/2/; s/@VPP@/1/; s/@CP@/1/; s/@HW@/dgx-a100/; s/@KV@/2/" \
    "$template" > "$T/a.yaml" || exit 99
sed 's/seq: 16/seq: 32/g' "$T/a.yaml" > "$T/b.yaml"
cmp -s "$T/a.yaml" "$T/b.yaml" && { echo "plan_guard.sh: template has no seq: 16"; exit 99; }

# 1. the file changes after the check, before the ranks read it
cp "$T/a.yaml" "$T/plan.yaml"
cat > "$T/mpirun" <<WRAP
#!/bin/sh
cp "$T/b.yaml" "$T/plan.yaml"
exec mpirun "\$@"
WRAP
chmod +x "$T/mpirun"
MEGAPLAN_MPIRUN=$T/mpirun timeout 60 "$megaplan" exec --np 2 "$T/plan.yaml" >"$T/out" 2>&1
rc=$?
cat "$T/out"
[ $rc -eq 2 ] || fail "changed plan: exit $rc, wanted 2"
grep -q 'the plan changed after megaplan checked it' "$T/out" || fail "changed plan: no message"
grep -q '^OK' "$T/out" && fail "changed plan: it ran"

# 2. two plan files in one job
timeout 60 mpirun --oversubscribe -np 1 "$megaplan" exec "$T/a.yaml" : \
    -np 1 "$megaplan" exec "$T/b.yaml" >"$T/out" 2>&1
rc=$?
cat "$T/out"
[ $rc -eq 2 ] || fail "two plans: exit $rc, wanted 2"
grep -q 'rank 1 was started with other arguments than rank 0' "$T/out" ||
    fail "two plans: no message naming the rank"
grep -Eq 'AddressSanitizer|MPI_ERR' "$T/out" && fail "two plans: crashed"

# 3. the same launch, file untouched
cp "$T/a.yaml" "$T/plan.yaml"
cat > "$T/mpirun" <<WRAP
#!/bin/sh
exec mpirun "\$@"
WRAP
MEGAPLAN_MPIRUN=$T/mpirun timeout 60 "$megaplan" exec --np 2 "$T/plan.yaml" >"$T/out" 2>&1
rc=$?
cat "$T/out"
[ $rc -eq 0 ] || fail "unchanged plan: exit $rc, wanted 0"
grep -q '^OK: ' "$T/out" || fail "unchanged plan: no OK line"
echo "plan_guard.sh: PASS"
