#!/usr/bin/env python3
"""The profiles' matmul_achievable and curve_matmul_efficiency are the
measurements of tests/data/hw/mamf_ml_engineering.csv (docs/cost-model.md §4):
each transferred profile's matmul_achievable is its GPU's BF16 row, and
curve_matmul_efficiency is the A100's (the GPU the curve was fitted on) BF16
MAMF over its peak. Fails naming the profile and field that disagree."""
import csv
import os
import re
import sys

GPU = {'dgx-h100': 'NVIDIA H100 SXM', 'h200': 'NVIDIA H100 SXM',  # the table: "H200 is the same"
       'b200': 'NVIDIA B200 SXM', 'gb200-nvl72': 'NVIDIA GB200 SXM'}
FITTED_ON = 'NVIDIA A100 SXM'


def main():
    root = sys.argv[1]
    path = os.path.join(root, 'tests/data/hw/mamf_ml_engineering.csv')
    lines = [l for l in open(path) if not l.startswith('#')]
    bf16 = {r['accelerator']: r for r in csv.DictReader(lines) if r['dtype'] == 'bf16'}
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
    print('check_mamf_profiles.py: %d profiles, %d disagreements' % (len(GPU), bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
