#!/usr/bin/env python3
"""megaplan-validate --parts-tsv: each whole-step row's exposed parts, which
must add up to its prediction, sit in the columns they are named for, and
agree with --rows-tsv's prediction for the same row.

usage: test_parts_tsv.py MEGAPLAN_VALIDATE DATA_DIR"""
import csv
import io
import subprocess
import sys

PARTS = ["compute", "recompute", "tp", "cp", "pp", "bubble", "dp", "optimizer"]
SETS = "vtrain-multi,narayanan,megatron-core,nemo,moe"


def run(validate, data, mode):
    # exit 1 says a set missed its acceptance threshold, which is not this test's
    # business; 2 is a refusal
    res = subprocess.run([validate, data, mode, "--only", SETS], capture_output=True, text=True)
    if res.returncode not in (0, 1):
        sys.exit(f"{mode}: exit {res.returncode}: {res.stderr.strip()}")
    return res.stdout


def main():
    validate, data = sys.argv[1], sys.argv[2]
    rows = list(csv.DictReader(io.StringIO(run(validate, data, "--parts-tsv")), delimiter="\t"))
    plain = [line.split("\t") for line in run(validate, data, "--rows-tsv").splitlines()]
    fails = []
    if len(rows) != len(plain) or len(rows) < 100:
        fails.append(f"{len(rows)} rows with parts against {len(plain)} in --rows-tsv")
    for r, p in zip(rows, plain):
        pred = float(r["predicted"])
        total = sum(float(r[k]) for k in PARTS)
        if abs(total / pred - 1.0) > 1e-5:
            fails.append(f"{r['label']}: parts sum to {total:.6g}, predicted {pred:.6g}")
        if r["set"] != p[0] or abs(float(p[4]) / pred - 1.0) > 1e-8:
            fails.append(f"{r['label']}: --rows-tsv says {p[0]} {p[4]}")
        if any(float(r[k]) < 0.0 for k in PARTS):
            fails.append(f"{r['label']}: a negative part")

    def row(key, text):
        hit = [r for r in rows if r["set"] == key and text in r["label"]]
        if not hit:
            fails.append(f"no {key} row labelled {text!r}")
            return None
        return hit[0]

    # columns where they belong: no TP time without TP, no pipeline time without a
    # pipeline, both where the configuration has them
    t1 = row("vtrain-multi", "b=8 t=1 d=64 p=1")
    t8 = row("vtrain-multi", "b=8 t=8 d=8 p=1")
    p8 = row("vtrain-multi", "b=4 t=1 d=32 p=8")
    if t1 and (float(t1["tp"]) != 0.0 or float(t1["bubble"]) != 0.0 or float(t1["pp"]) != 0.0):
        fails.append("t=1 p=1 row has TP or pipeline time")
    if t1 and not float(t1["dp"]) > 0.0:
        fails.append("d=64 row has no DP time")
    if t8 and not float(t8["tp"]) > 0.0:
        fails.append("t=8 row has no TP time")
    if p8 and not (float(p8["bubble"]) > 0.0 and float(p8["pp"]) > 0.0):
        fails.append("p=8 row has no bubble or no pipeline transfers")
    for f in fails:
        print("FAIL:", f)
    print(f"{len(rows)} rows checked, {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
