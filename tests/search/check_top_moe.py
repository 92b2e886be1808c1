#!/usr/bin/env python3
"""check_top_moe.py MEGAPLAN GOLDEN — search's top five for the two MoE
budget cases (Mixtral 8x7B on 64 GPUs, DeepSeek-V3 on 2048, dgx-h100, bf16)
are the plans in GOLDEN: a speed-up of search (pruning, caching) must not
change its answers. Each plan: its parallel settings, in rank order, and its
step to 4 significant digits. MEGAPLAN_REGEN=1 rewrites GOLDEN (after a
change of the cost model, which may change the answers; never after a change
meant only to make search faster)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import testlib  # noqa: E402

CASES = [("mixtral-8x7b", 64, 512), ("deepseek-v3", 2048, 16384)]
KEYS = ("tp", "sp", "pp", "vpp", "cp", "dp", "micro_batch", "recompute", "recompute_modules",
        "dist_opt", "schedule", "ep", "etp", "dispatcher")


def top(megaplan, model, gpus, batch):
    out = subprocess.run([megaplan, "search", "--model", model, "--gpus", str(gpus), "--hw",
                          "dgx-h100", "--global-batch", str(batch), "--top", "5", "--format",
                          "json"], check=True, capture_output=True, text=True).stdout
    plans = []
    for p in json.loads(out):
        par = p["parallel"]
        row = " ".join("%s=%s" % (k, ",".join(par[k]) if isinstance(par.get(k), list)
                                  else par.get(k)) for k in KEYS)
        plans.append("%s step=%.4g" % (row, p["time_s"]["step"]))
    return plans


def main():
    megaplan, golden = sys.argv[1], sys.argv[2]
    got = {"%s/%d" % (m, g): top(megaplan, m, g, b) for m, g, b in CASES}
    if os.environ.get("MEGAPLAN_REGEN") == "1":
        with open(golden, "w") as f:
            json.dump(got, f, indent=1)
            f.write("\n")
        sys.exit(0)
    with open(golden) as f:
        want = json.load(f)
    checks = testlib.Checks('check_top_moe.py')
    for case, plans in want.items():
        if checks.check(got.get(case) == plans, "%s: search's top five changed" % case):
            continue
        for i, (w, g) in enumerate(zip(plans, got.get(case, []))):
            if w != g:
                print("  #%d want %s\n     got  %s" % (i + 1, w, g))
    checks.finish()


if __name__ == "__main__":
    main()
