#!/usr/bin/env python3
"""check_top_prefix.py MEGAPLAN — the plans `search --top k` lists are the
first k of those `--top k'` lists for k < k' (k = 1, 3, 5, 10): a user who
asks for three plans gets the first three of the ten, whatever split or
schedule the search found for them. Before the pool of split and simulated
plans was sized independently of --top (src/planner/search_rank.c), GPT-3
175B's --top 6 listed a plan with an uneven split (17.93 s) that --top 5 never
split, and DeepSeek-V3's pp 8 1F1B plan (28.09 s) was missing from --top 3..5.
Each plan is compared by its parallel settings, its stage split, its
estimated and its simulated step."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import testlib  # noqa: E402

CASES = [
    ["--model", "gpt3-175b", "--gpus", "1024"],
    ["--model", "llama3-70b", "--gpus", "1024", "--hw", "dgx-h100"],
    ["--model", "mixtral-8x7b", "--gpus", "64", "--hw", "dgx-h100", "--global-batch", "512"],
    ["--model", "deepseek-v3", "--gpus", "2048", "--hw", "dgx-h100", "--global-batch", "16384"],
]
TOPS = (1, 3, 5, 10)


def plans(megaplan, case, k):
    out = subprocess.run([megaplan, "search", *case, "--top", str(k), "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    return [json.dumps({"parallel": p["parallel"], "split": p["split"],
                        "step": p["time_s"]["step"], "sim": p.get("simulated_step_s")},
                       sort_keys=True) for p in json.loads(out)]


def main():
    (megaplan,) = testlib.args("check_top_prefix.py", "MEGAPLAN", 1)
    checks = testlib.Checks("check_top_prefix.py")
    for case in CASES:
        name = " ".join(case)
        got = {k: plans(megaplan, case, k) for k in TOPS}
        longest = got[TOPS[-1]]
        checks.check(len(longest) == TOPS[-1], "%s: --top %d lists %d plans"
                     % (name, TOPS[-1], len(longest)))
        for a, b in zip(TOPS, TOPS[1:]):
            ok = got[a] == got[b][:a]
            if checks.check(ok, "%s: --top %d is the start of --top %d" % (name, a, b)):
                continue
            for i, (x, y) in enumerate(zip(got[a], got[b])):
                if x != y:
                    print("  #%d --top %d: %s\n     --top %d: %s" % (i + 1, a, x, b, y))
    checks.finish()


if __name__ == "__main__":
    main()
