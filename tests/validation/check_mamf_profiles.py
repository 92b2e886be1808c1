#!/usr/bin/env python3
"""The profiles' matmul_achievable and curve_matmul_efficiency are the
measurements of tests/data/hw/mamf_ml_engineering.csv (docs/cost-model.md §4):
each transferred profile's matmul_achievable is its GPU's BF16 row, and
curve_matmul_efficiency is the A100's (the GPU the curve was fitted on) BF16
MAMF over its peak; a profile's matmul_achievable_fp8_split is its GPU's FP8
row (the split-accumulator path, docs/cost-model.md §13), present on the
Hopper profiles and absent on the Blackwell ones. Fails naming the profile
and field that disagree."""
import csv
import os
import re
import sys

GPU = {'dgx-h100': 'NVIDIA H100 SXM', 'h200': 'NVIDIA H100 SXM',  # the table: "H200 is the same"
       'h800': 'NVIDIA H100 SXM',  # no H800 row: the same GH100 die, clocks and power limit
       'b200': 'NVIDIA B200 SXM', 'gb200-nvl72': 'NVIDIA GB200 SXM'}
FITTED_ON = 'NVIDIA A100 SXM'
# the FP8 (split-accumulator) row of each profile that carries one: Hopper,
# where Transformer Engine's split accumulator is a slower path; none on
# Blackwell, whose FP8 and BF16 ratios agree
FP8_SPLIT = {'dgx-h100': 'NVIDIA H100 SXM', 'h200': 'NVIDIA H200 SXM', 'h800': 'NVIDIA H100 SXM',
             'b200': None, 'gb200-nvl72': None}


def main():
    root = sys.argv[1]
    path = os.path.join(root, 'tests/data/hw/mamf_ml_engineering.csv')
    lines = [l for l in open(path) if not l.startswith('#')]
    rows = list(csv.DictReader(lines))
    bf16 = {r['accelerator']: r for r in rows if r['dtype'] == 'bf16'}
    fp8 = {r['accelerator']: r for r in rows if r['dtype'] == 'fp8'}
    ref = float(bf16[FITTED_ON]['mamf_tflops']) / float(bf16[FITTED_ON]['theory_tflops'])
    bad = 0
    for prof, gpu in GPU.items():
        text = open(os.path.join(root, 'hwprofiles', prof + '.yaml')).read()
        ach = re.search(r'^matmul_achievable: ([0-9.]+) TFLOP/s', text, re.M)
        eff = re.search(r'^curve_matmul_efficiency: ([0-9.]+)', text, re.M)
        if not ach or abs(float(ach.group(1)) - float(bf16[gpu]['mamf_tflops'])) > 1e-9:
            print('%s: matmul_achievable is not %s TFLOP/s (%s, bf16)' %
                  (prof, bf16[gpu]['mamf_tflops'], gpu))
            bad += 1
        if not eff or abs(float(eff.group(1)) - ref) > 5e-4:
            print('%s: curve_matmul_efficiency is not %.3f (%s bf16 MAMF / peak)' %
                  (prof, ref, FITTED_ON))
            bad += 1
        split = re.search(r'^matmul_achievable_fp8_split: ([0-9.]+) TFLOP/s', text, re.M)
        want = FP8_SPLIT[prof]
        if want is None and split:
            print('%s: matmul_achievable_fp8_split set on a profile without one' % prof)
            bad += 1
        if want is not None and (not split or abs(float(split.group(1)) -
                                                  float(fp8[want]['mamf_tflops'])) > 1e-9):
            print('%s: matmul_achievable_fp8_split is not %s TFLOP/s (%s, fp8)' %
                  (prof, fp8[want]['mamf_tflops'], want))
            bad += 1
    print('check_mamf_profiles.py: %d profiles, %d disagreements' % (len(GPU), bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
