#!/usr/bin/env python3
"""The Blackwell profiles' attention constants follow from the Hopper profile's
by the measurements of tests/data/hw/cudnn_sdpa_llama31.csv (docs/cost-model.md
§4, "Attention core on Blackwell"):

- attention_efficiency = dgx-h100's x (H200 over GB200 forward + backward time
  of cuDNN's causal call at 4,096 keys) x (dgx-h100's BF16 peak over
  gb200-nvl72's), the same share of its own peak on b200 (the same die);
- attention_half_rate_keys = dgx-h100's x the profile's dense BF16 rate per SM
  over dgx-h100's;
- and that scaling agrees with the measurement: the half-rate keys of
  s/(s + k) fitted to each GPU's unmasked calls at 2k-8k keys have a
  GB200-over-H200 ratio within 10 % of the per-SM rate ratio.

Fails naming the profile and field that disagree."""
import csv
import math
import os
import re
import sys

REF_KEYS = 4096


def profile(root, name):
    text = open(os.path.join(root, 'hwprofiles', name + '.yaml')).read()

    def num(pattern):
        m = re.search(pattern, text, re.M)
        if not m:
            raise SystemExit('%s: no match for %s' % (name, pattern))
        return float(m.group(1))
    bf16 = re.search(r'^peak_flops: \{.*?bf16: ([0-9.]+) (T|P)FLOP/s', text, re.M)
    peak = float(bf16.group(1)) * (1e3 if bf16.group(2) == 'P' else 1.0)
    return {'eff': num(r'^attention_efficiency: ([0-9.]+)'),
            'half': num(r'^attention_half_rate_keys: ([0-9.]+)'),
            'sm': num(r'^sm_count: ([0-9.]+)'), 'peak': peak}


def half_rate_fit(rows, gpu):
    """k minimising the spread of log(rate) - log(s/(s + k)) over the
    unmasked calls at 2048, 4096 and 8192 keys (rate: FLOPs over time)"""
    pts = []
    for r in rows:
        s = int(r['kv_seqlen'])
        if r['gpu'] == gpu and r['attn_mask'] == 'no_mask' and 2048 <= s <= 8192:
            pts.append((s, s * s / (float(r['fwd_ms']) + float(r['bwd_ms']))))
    best = None
    for k in range(10, 5000):
        v = [math.log(rate) - math.log(s / (s + k)) for s, rate in pts]
        m = sum(v) / len(v)
        e = sum((x - m) ** 2 for x in v)
        if best is None or e < best[0]:
            best = (e, k)
    return best[1]


def main():
    root = sys.argv[1]
    path = os.path.join(root, 'tests/data/hw/cudnn_sdpa_llama31.csv')
    rows = list(csv.DictReader(l for l in open(path) if not l.startswith('#')))

    def call_ms(gpu, mask, s):
        r = [r for r in rows if r['gpu'] == gpu and r['attn_mask'] == mask and
             int(r['kv_seqlen']) == s]
        return float(r[0]['fwd_ms']) + float(r[0]['bwd_ms'])
    hop = profile(root, 'dgx-h100')
    gb = profile(root, 'gb200-nvl72')
    ratio = call_ms('NVIDIA H200', 'top_left', REF_KEYS) / call_ms('NVIDIA GB200', 'top_left',
                                                                  REF_KEYS)
    want_eff = hop['eff'] * ratio * hop['peak'] / gb['peak']
    bad = 0
    for name in ('b200', 'gb200-nvl72'):
        p = profile(root, name)
        if abs(p['eff'] - want_eff) > 0.005:
            print('%s: attention_efficiency %.3f, the transfer gives %.3f' % (name, p['eff'],
                                                                              want_eff))
            bad += 1
        want_half = hop['half'] * (p['peak'] / p['sm']) / (hop['peak'] / hop['sm'])
        if abs(p['half'] - want_half) > 1.0:
            print('%s: attention_half_rate_keys %g, the per-SM rate gives %.1f' %
                  (name, p['half'], want_half))
            bad += 1
    measured = half_rate_fit(rows, 'NVIDIA GB200') / half_rate_fit(rows, 'NVIDIA H200')
    scaled = gb['half'] / hop['half']
    if abs(measured / scaled - 1.0) > 0.10:
        print('gb200-nvl72: half-rate keys over dgx-h100\'s %.2f, cuDNN measures %.2f' %
              (scaled, measured))
        bad += 1
    print('check_attention_profiles.py: efficiency %.3f, half-rate key ratio %.2f (measured %.2f), '
          '%d disagreements' % (want_eff, scaled, measured, bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
