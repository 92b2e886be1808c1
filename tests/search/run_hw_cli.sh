#!/bin/sh
# CLI checks of `megaplan search` over hardware (--hw a,b / all, --gpus MIN..MAX,
# --deadline, --budget, --price, --pue): the table, the JSON's front and picks
# against their definitions, one point reproduced by a plain search, refusals.
#   run_hw_cli.sh MEGAPLAN
M="$1"
. "$(dirname "$0")/../lib.sh"

"$M" search --model gpt3-13b --tokens 3e11 --hw dgx-a100,dgx-h100,h200 --gpus 32..256 \
  --deadline 20d --budget 2M >"$T/table" 2>"$T/err" || fail "table exit $? $(cat "$T/err")"
for s in "Pareto front" "cheapest within 20 days" "fastest within \$2.00M" "prices: dgx-a100 \$1.30/GPU-h (2026-05)" "searched 12 points"; do
  grep -qF "$s" "$T/table" || fail "table lacks '$s'"
done

"$M" search --model gpt3-13b --tokens 3e11 --hw dgx-a100,dgx-h100,h200 --gpus 32..256 \
  --deadline 20d --budget 2M --pue 1.2 --format json >"$T/json" || fail "json exit"
python3 - "$T/json" >"$T/point" <<'PY' || fail "json content"
import json, sys
d = json.load(open(sys.argv[1]))
pts = d["points"]
assert len(pts) == 12 and d["pue"] == 1.2, d.keys()
ok = [p for p in pts if p["fits"]]
def beats(q, p):
    return q["days"] <= p["days"] and q["cost_usd"] <= p["cost_usd"] and \
           (q["days"] < p["days"] or q["cost_usd"] < p["cost_usd"])
for p in ok:
    dominated = any(beats(q, p) for q in ok if q is not p)
    assert p["pareto"] == (not dominated), p
    # cost is price x GPUs x hours
    price = {"dgx-a100": 1.30, "dgx-h100": 3.00, "h200": 4.00}[p["hw"]]
    assert abs(p["cost_usd"] - price * p["gpus"] * p["days"] * 24) < 1e-6 * p["cost_usd"], p
c = pts[d["cheapest_within_deadline"]]
assert c["days"] <= 20 and all(c["cost_usd"] <= p["cost_usd"] for p in ok if p["days"] <= 20)
f = pts[d["fastest_within_budget"]]
assert f["cost_usd"] <= 2e6 and all(f["days"] <= p["days"] for p in ok if p["cost_usd"] <= 2e6)
print(c["hw"], c["gpus"], c["step_s"])
PY
read hw gpus step <"$T/point"
"$M" search --model gpt3-13b --tokens 3e11 --hw "$hw" --gpus "$gpus" --no-split --format json --top 1 >"$T/plain" || fail "plain search exit"
python3 - "$T/plain" "$step" <<'PY' || fail "the chosen point is not what a plain search of $hw x $gpus (--no-split) finds"
import json, sys
a = json.load(open(sys.argv[1]))[0]
step = a.get("simulated_step_s", a["time_s"]["step"])
assert abs(step - float(sys.argv[2])) <= 1e-9 * step, (step, sys.argv[2])
PY

# --price overrides the profile's; --hw-set reaches every profile
"$M" search --model gpt3-13b --tokens 3e11 --hw dgx-a100,dgx-h100 --gpus 64 --price dgx-h100=1.5 \
  --hw-set power.node_watts=0 --format json >"$T/price" || fail "--price exit"
python3 - "$T/price" <<'PY' || fail "--price / --hw-set not applied"
import json, sys
for p in json.load(open(sys.argv[1]))["points"]:
    price = {"dgx-a100": 1.30, "dgx-h100": 1.5}[p["hw"]]
    assert abs(p["cost_usd"] - price * 64 * p["days"] * 24) < 1e-6 * p["cost_usd"], p
    watts = {"dgx-a100": 400, "dgx-h100": 700}[p["hw"]] * 64
    assert abs(p["energy_mwh"] - watts * p["days"] * 24 / 1e6) < 1e-6 * p["energy_mwh"], p
PY

# a profile without a price is ranked by days, never put on the cost front
"$M" search --model gpt3-13b --tokens 3e11 --hw gb200-nvl72,b200 --gpus 64 >"$T/noprice" || fail "no-price exit"
grep -q "without a price" "$T/noprice" || fail "unpriced profile not listed apart"

# all: the products to rent, without the vTrain cluster and h800 (no price); h800 by name
"$M" search --model gpt3-125m --tokens 1e9 --hw all --gpus 8 >"$T/all" 2>&1 || fail "--hw all exit"
grep -q "; 5 profiles x 8..8 GPUs" "$T/all" || fail "--hw all: not 5 profiles: $(head -1 "$T/all")"
! grep -Eq "^(h800|a100-4xhdr) " "$T/all" || fail "--hw all ran h800 or a100-4xhdr"
# a profile file first in the list, named unlike any preset (its options were
# checked against --hw NAME, and search refused "unknown hardware profile")
"$M" hw dgx-h100 | sed 's/^name: .*/name: my-cluster/' >"$T/my.yaml" || fail "hw dgx-h100"
"$M" search --model gpt3-125m --tokens 1e9 --hw "$T/my.yaml,dgx-a100" --gpus 8 >"$T/file" 2>"$T/err" ||
  fail "--hw FILE,dgx-a100: exit $?: $(cat "$T/err")"
grep -q "^my-cluster " "$T/file" || fail "--hw FILE,dgx-a100: no row of the file's profile"
"$M" search --model gpt3-125m --tokens 1e9 --hw h800,dgx-h100 --gpus 8 >"$T/h800" || fail "--hw h800 exit"
grep -q "^h800 .* no price " "$T/h800" || fail "--hw h800,dgx-h100: no unpriced h800 row"

# --plot: days against cost with the front; checked before any search runs
if command -v gnuplot >/dev/null; then
  "$M" search --model gpt3-13b --tokens 3e11 --hw dgx-a100,dgx-h100 --gpus 32..128 --deadline 20d \
    --plot "$T/front.svg" >/dev/null || fail "--plot exit"
  grep -q "Pareto front" "$T/front.svg" || fail "the picture has no front"
  grep -q "dgx-h100" "$T/front.svg" || fail "the picture has no profile key"
fi
PATH=/nonexistent "$M" search --model gpt3-13b --tokens 3e11 --hw dgx-a100,dgx-h100 --gpus 32 \
  --plot "$T/none.svg" >"$T/out" 2>"$T/err"
[ $? -eq 1 ] || fail "--plot without gnuplot: not exit 1"
grep -q "apt-get install gnuplot" "$T/err" || fail "--plot without gnuplot does not say how to get it"
[ ! -e "$T/none.svg" ] && [ ! -s "$T/out" ] || fail "--plot without gnuplot wrote something"

refuse() {
  "$M" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  [ $rc -eq 2 ] || fail "exit $rc, not 2, for: $*"
  [ "$(wc -l <"$T/err")" -eq 1 ] || fail "not one line for: $* ($(cat "$T/err"))"
  [ ! -s "$T/out" ] || fail "stdout not empty for: $*"
}
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 10..5
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64..
refuse search --model gpt3-13b --tokens 3e11 --hw dgx-a100,nope --gpus 64
refuse search --model gpt3-13b --tokens 3e11 --hw dgx-a100,dgx-a100 --gpus 64
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 --price nothere=3
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 --price dgx-a100=abc
# one profile priced twice: the last price silently won
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 --price dgx-a100=1 --price dgx-a100=2
grep -q "^megaplan search: --price: dgx-a100 is priced twice: say it once$" "$T/err" || fail "--price twice: $(cat "$T/err")"
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 --deadline 30x
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 --budget -5
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 --pue 0.5
refuse search --model gpt3-13b --hw all --gpus 64
refuse search --model gpt3-13b --tokens 3e11 --hw all
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 -o "$T/p.yaml"
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 --format megatron
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 --bogus
refuse search --model gpt3-13b --tokens 3e11 --hw all --gpus 64 --plot "$T/x.pdf"
refuse search --model gpt3-13b --tokens 3e11 --hw gb200-nvl72,b200 --gpus 64 --price b200=0.000001 --hw-set price_per_gpu_hour=0 --plot "$T/np.svg"
[ ! -e "$T/np.svg" ] || fail "--plot with nothing priced wrote a file"
[ ! -e "$T/p.yaml" ] || fail "-o wrote a file it refused"
echo ok
