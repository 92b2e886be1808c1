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
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
sed -e "s/@TP@/1/; s/@SP@/false/; s/@DP@/2/; s/@PP@/1/; s/@DISTOPT@/false/" \
    -e "s/@GPUS@/2/; s/@GB@/4/; s/@MB@/1/; s/@TIED@/true/" \
    -e "s/@SCHED@/1f1b/; s/@LAYERS@/2/; s/@VPP@/1/; s/@CP@/1/; s/@HW@/dgx-a100/; s/@KV@/2/" \
    "$template" > "$tmp/a.yaml" || exit 99
sed 's/seq: 16/seq: 32/g' "$tmp/a.yaml" > "$tmp/b.yaml"
cmp -s "$tmp/a.yaml" "$tmp/b.yaml" && { echo "plan_guard.sh: template has no seq: 16"; exit 99; }
fail() { echo "plan_guard.sh: FAIL: $*"; exit 1; }

# 1. the file changes after the check, before the ranks read it
cp "$tmp/a.yaml" "$tmp/plan.yaml"
cat > "$tmp/mpirun" <<WRAP
#!/bin/sh
cp "$tmp/b.yaml" "$tmp/plan.yaml"
exec mpirun "\$@"
WRAP
chmod +x "$tmp/mpirun"
MEGAPLAN_MPIRUN=$tmp/mpirun timeout 60 "$megaplan" exec --np 2 "$tmp/plan.yaml" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc -eq 2 ] || fail "changed plan: exit $rc, wanted 2"
grep -q 'the plan changed after megaplan checked it' "$tmp/out" || fail "changed plan: no message"
grep -q '^OK' "$tmp/out" && fail "changed plan: it ran"

# 2. two plan files in one job
timeout 60 mpirun --oversubscribe -np 1 "$megaplan" exec "$tmp/a.yaml" : \
    -np 1 "$megaplan" exec "$tmp/b.yaml" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc -eq 2 ] || fail "two plans: exit $rc, wanted 2"
grep -q 'rank 1 was started with other arguments than rank 0' "$tmp/out" ||
    fail "two plans: no message naming the rank"
grep -Eq 'AddressSanitizer|MPI_ERR' "$tmp/out" && fail "two plans: crashed"

# 3. the same launch, file untouched
cp "$tmp/a.yaml" "$tmp/plan.yaml"
cat > "$tmp/mpirun" <<WRAP
#!/bin/sh
exec mpirun "\$@"
WRAP
MEGAPLAN_MPIRUN=$tmp/mpirun timeout 60 "$megaplan" exec --np 2 "$tmp/plan.yaml" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc -eq 0 ] || fail "unchanged plan: exit $rc, wanted 0"
grep -q '^OK: ' "$tmp/out" || fail "unchanged plan: no OK line"
echo "plan_guard.sh: PASS"
