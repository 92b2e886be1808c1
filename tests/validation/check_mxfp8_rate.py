#!/usr/bin/env python3
"""The Blackwell profiles' mxfp8_gemm_rate is the measurement of
tests/data/hw/te_gemm_profiling.csv (docs/cost-model.md §13): Transformer
Engine's GEMM profiling tutorial on a B300, one dense layer's GEMMs with
their operands quantized beforehand, per-tensor FP8 (fp8_current) over MXFP8
per-layer time; profiles without MXFP8 (mxfp8: false) carry none. Fails
naming the profile that disagrees."""
import csv
import os
import re
import sys

# the B300 row stands for the SM100 parts (B300 has B200's dense FP8 and BF16
# peaks; the tutorial measured no B200 or GB200)
MEASURED_ON = 'NVIDIA B300 SXM6 AC'


def main():
    root = sys.argv[1]
    path = os.path.join(root, 'tests/data/hw/te_gemm_profiling.csv')
    rows = list(csv.DictReader(l for l in open(path) if not l.startswith('#')))
    total = [r for r in rows if r['gpu'] == MEASURED_ON and r['mode'] == 'prequantized' and
             r['pass'] == 'total']
    if len(total) != 1:
        print('%s: no single prequantized total row of %s' % (path, MEASURED_ON))
        return 1
    want = float(total[0]['fp8_current_ms']) / float(total[0]['mxfp8_ms'])
    bad = 0
    profiles = sorted(f[:-5] for f in os.listdir(os.path.join(root, 'hwprofiles'))
                      if f.endswith('.yaml'))
    for prof in profiles:
        text = open(os.path.join(root, 'hwprofiles', prof + '.yaml')).read()
        mx = re.search(r'^mxfp8: true\b', text, re.M)
        rate = re.search(r'^mxfp8_gemm_rate: ([0-9.]+)', text, re.M)
        if mx and (not rate or abs(float(rate.group(1)) - want) > 5e-4):
            print('%s: mxfp8_gemm_rate is not %.4f (%s, prequantized fp8_current / mxfp8)' %
                  (prof, want, MEASURED_ON))
            bad += 1
        if not mx and rate:
            print('%s: mxfp8_gemm_rate set on a profile without MXFP8' % prof)
            bad += 1
    print('check_mxfp8_rate.py: %d profiles, rate %.4f, %d disagreements' %
          (len(profiles), want, bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
