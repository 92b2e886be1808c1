#!/usr/bin/env python3
"""tools/fit_profile.py's scale_up_prior() computes the scale-up tier's priors from the published NCCL
sweep tests/data/nccl/azure_nd_a100_v4_allreduce.csv by the rule docs/validation.md
("Protocol", scale-up prior) writes down: efficiency = the 8 GiB row's busbw / 300 GB/s,
latency = the median time of the rows up to 64 KiB / 15 (an 8-GPU all-reduce's latencies).
They are the fit's priors of those constants (the values the
fit without the NCCL sweeps keeps; stage 1 starts at UP_START, where the shipped fit started).
Recomputed here from the file by hand, and the prior must follow the file: a copy with other
figures gives other priors.

    test_scale_up_prior.py tools/fit_profile.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prior_copy  # noqa: E402


def main():
    fp, path, rows, bad = prior_copy.load(sys.argv[1], 'NCCL_PRIOR')
    sizes = [int(r[0]) for r in rows]
    if sizes != [1024 << i for i in range(24)]:
        bad.append('%s: sizes are not 1 KiB .. 8 GiB by powers of two' % path)
    busbw = {int(r[0]): float(r[2]) for r in rows}
    # by hand: t = bytes * 14/8 / busbw for the seven rows 1 KiB .. 64 KiB, sorted; the fourth
    t = sorted(s * 14 / 8 / (busbw[s] * 1e9) for s in sizes if s <= 65536)
    want_lat = t[3] * 1e6 / 15
    want_eff = busbw[8 << 30] / 300.0
    lat, eff = fp.scale_up_prior()
    if abs(lat - want_lat) > 1e-9 or abs(eff - want_eff) > 1e-9:
        bad.append('scale_up_prior(): latency %.6g us, efficiency %.6g; the rule gives '
                   '%.6g us, %.6g' % (lat, eff, want_lat, want_eff))
    # the fit's priors are these (what the fit without the NCCL sweeps keeps), the local pass
    # 0; stage 1 starts elsewhere, at UP_START (Protocol, scale-up prior 2)
    prior = fp.prior()
    if abs(prior['ul'] - want_lat) > 1e-9 or abs(prior['ue'] - want_eff) > 1e-9:
        bad.append('fit_profile.py priors: latency %.6g us, efficiency %.6g; the rule gives '
                   '%.6g us, %.6g' % (prior['ul'], prior['ue'], want_lat, want_eff))
    if prior['lp'] != 0.0:
        bad.append('collective_local_pass prior %g, not 0' % prior['lp'])
    if fp.UP_START != {'ul': 5.0, 'ue': 0.8, 'lp': 0.0}:
        bad.append('stage 1 starts at %s, not where the shipped fit started' % fp.UP_START)
    if abs(want_lat - 2.853) > 5e-4 or abs(want_eff - 0.7719) > 5e-5:
        bad.append('the file gives latency %.4f us, efficiency %.4f: not the 2.853 us, 0.7719 '
                   'the Protocol entry records' % (want_lat, want_eff))
    # the prior reads the file: halve the 8 GiB busbw and double the small rows' times
    def change(c):
        k = 0.5 if int(c[0]) == 8 << 30 or int(c[0]) <= 65536 else 1.0
        return [c[0], c[1], '%.6g' % (float(c[2]) * k)]
    lat, eff = prior_copy.prior_of_copy(fp.scale_up_prior, path, change)
    if abs(lat - 2 * want_lat) > 1e-9 or abs(eff - want_eff / 2) > 1e-9:
        bad.append('scale_up_prior() does not follow its file: %.6g us, %.6g from a copy with '
                   'the times doubled and the 8 GiB busbw halved' % (lat, eff))
    return prior_copy.report('test_scale_up_prior.py', want_lat, want_eff, bad)

if __name__ == '__main__':
    sys.exit(main())
