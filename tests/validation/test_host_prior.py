#!/usr/bin/env python3
"""A counted kernel_overhead (docs/validation.md, "Protocol", refits 4 and 5, both rejected, so
the fit keeps its 20 us prior): tools/fit_profile.py's host_prior() costs the host work of one
Megatron-DeepSpeed GPT layer and micro-batch (tests/data/host/megatron_deepspeed_layer_ops.csv) with the public per-call and
per-launch measurements (host/eager_op_overhead.csv, host/cuda_launch.csv) and divides it by the
launches the cost model counts for that layer. Checked by hand here: the count's totals, each
pass's cost, the value refits 4 and 5 took as the prior.

    test_host_prior.py FIT_PROFILE_PY"""
import importlib.util
import sys


def main():
    spec = importlib.util.spec_from_file_location('fit_profile', sys.argv[1])
    fp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp)
    bad = []
    totals = {}
    for r in fp.host_data('megatron_deepspeed_layer_ops.csv'):
        t = totals.setdefault(r['pass'], [0, 0, 0, 0])
        for i, k in enumerate(('python_ops', 'cpp_ops', 'launches', 'syncs')):
            t[i] += int(r[k])
    want = {'layer_forward': [82, 19, 20, 2], 'checkpoint_forward': [6, 0, 0, 0],
            'checkpoint_backward': [20, 0, 2, 2], 'backward': [53, 59, 49, 0]}
    if totals != want:
        bad.append('the count is %s, not %s' % (totals, want))
    ko, parts = fp.host_prior()
    # by hand: python calls at 5.0 us (6.8 with autograd, the recompute), C++ ops 1.0, launches 3.0
    hand = {'forward': 82 * 5.0 + 19 + 20 * 3.0,
            'recompute': 82 * 6.8 + 19 + 20 * 3.0,
            'checkpoint': 6 * 5.0 + 20 * 5.0 + 2 * 3.0,
            'backward': 53 * 5.0 + 59 + 49 * 3.0}
    for k, v in hand.items():
        if abs(parts.get(k, -1.0) - v) > 1e-9:
            bad.append('%s costs %s us, by hand %g' % (k, parts.get(k), v))
    if fp.LAYER_LAUNCHES_T1 != 52:
        bad.append('the model counts %d launches per layer, not 13 + 13 + 26' % fp.LAYER_LAUNCHES_T1)
    if abs(ko - sum(hand.values()) / 52) > 1e-9:
        bad.append('prior %g us, by hand %g' % (ko, sum(hand.values()) / 52))
    if abs(ko - 33.3) > 0.05:
        bad.append('the counted prior is %g us, not the 33.3 refits 4 and 5 took' % ko)
    for b in bad:
        print('FAIL:', b)
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
