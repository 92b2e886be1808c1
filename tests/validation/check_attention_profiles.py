#!/usr/bin/env python3
"""The Blackwell profiles' attention constants follow from the Hopper profile's
by the measurements of tests/data/hw/cudnn_sdpa_llama31.csv (docs/cost-model.md
§4, "Attention core on Blackwell"):

- attention_efficiency = dgx-h100's x (H200 over GB200 forward + backward time
  of cuDNN's causal call at 4,096 keys) x (dgx-h100's BF16 peak over
  gb200-nvl72's), the same share of its own peak on b200 (the same die) times
  B200's sustained fraction (tests/data/hw/flashinfer_b200_throttle.csv: the
  back-to-back rate over the best one, 1237 / 1450);
- attention_efficiency_fused: b200's = gb200-nvl72's (cuDNN's measured share)
  times the same sustained fraction;
- attention_half_rate_keys = dgx-h100's x the profile's dense BF16 rate per SM
  over dgx-h100's;
- and that scaling agrees with the measurement: at every other length of
  the causal calls (2k, 8k, 16k keys) the model's GB200-over-H100 attention
  time ratio (the efficiency ratio times each profile's kv/(kv + k)
  normalised at 4,096 keys) is within 3 % of cuDNN's H200-over-GB200 time
  ratio, which falls from 2.44 at 8k to 2.23 at 2k keys; with the Hopper
  half-rate keys unscaled it would stay at the 4,096-key ratio (2.36).
  (Causal calls: cuDNN's persistent kernels hand out the longest query tiles
  first, so their rounds balance; an unmasked call's equal tiles can leave a
  last partial round, which this rule does not model.)

Fails naming the profile and field that disagree."""
import csv
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
            'fused': num(r'^attention_efficiency_fused: ([0-9.]+)'),
            'half': num(r'^attention_half_rate_keys: ([0-9.]+)'),
            'sm': num(r'^sm_count: ([0-9.]+)'), 'peak': peak}


def sustained_fraction(root):
    """B200's back-to-back attention rate over its best one (FlashInfer #2899):
    the fully throttled window over the peak window"""
    path = os.path.join(root, 'tests/data/hw/flashinfer_b200_throttle.csv')
    rows = {r['state']: float(r['avg_tflops'])
            for r in csv.DictReader(l for l in open(path) if not l.startswith('#'))}
    return rows['fully throttled'] / rows['peak']


def length_factor(kv, half):
    """the model's rate at kv keys relative to its REF_KEYS rate (compute.c)"""
    return (kv / (kv + half)) / (REF_KEYS / (REF_KEYS + half))


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
    sustained = {'b200': sustained_fraction(root), 'gb200-nvl72': 1.0}
    bad = 0
    for name in ('b200', 'gb200-nvl72'):
        p = profile(root, name)
        if abs(p['eff'] - want_eff * sustained[name]) > 0.005:
            print('%s: attention_efficiency %.3f, the transfer gives %.3f' %
                  (name, p['eff'], want_eff * sustained[name]))
            bad += 1
        if abs(p['fused'] - gb['fused'] * sustained[name]) > 0.002:
            print('%s: attention_efficiency_fused %.3f, GB200\'s measured share gives %.3f' %
                  (name, p['fused'], gb['fused'] * sustained[name]))
            bad += 1
        want_half = hop['half'] * (p['peak'] / p['sm']) / (hop['peak'] / hop['sm'])
        if abs(p['half'] - want_half) > 1.0:
            print('%s: attention_half_rate_keys %g, the per-SM rate gives %.1f' %
                  (name, p['half'], want_half))
            bad += 1
    model_ref = (gb['eff'] * gb['peak']) / (hop['eff'] * hop['peak'])
    worst = 0.0
    for kv in (2048, 8192, 16384):
        measured = call_ms('NVIDIA H200', 'top_left', kv) / call_ms('NVIDIA GB200', 'top_left', kv)
        model = model_ref * length_factor(kv, gb['half']) / length_factor(kv, hop['half'])
        worst = max(worst, abs(model / measured - 1.0))
        if abs(model / measured - 1.0) > 0.03:
            print('gb200-nvl72: H100/GB200 attention time ratio at %d causal keys %.3f, cuDNN '
                  'measures %.3f' % (kv, model, measured))
            bad += 1
    print('check_attention_profiles.py: efficiency %.3f, largest ratio error %.1f %%, '
          '%d disagreements' % (want_eff, 100.0 * worst, bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
