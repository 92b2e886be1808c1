#!/usr/bin/env python3
"""tools/fit_profile.py's scale_out_prior() computes the scale-out tier's priors from the published
nccl-tests rows tests/data/nccl/a100_4xhdr_3node_allreduce.csv (3 nodes of 8 A100 SXM4, 4 x HDR
each, 24 ranks) by the rule tools/validation-protocol.md ("Scale-out prior") writes down: the
least-squares line t = a + s * bytes through the in-place times; efficiency = 2(n-1)/n /
(s * 8 * 12.5 GB/s), latency = a / (2(n-1) + 1), n = 24. They are the fit's priors of those
constants (the values the fit without the multi-node sweep keeps; stage 2 starts them at
SO_START, where the shipped fit started), and partial_node_efficiency keeps 1 (the source's
groups hold whole nodes). Recomputed here from the file by hand, and the prior must follow
the file: a copy with other figures gives other priors.

    test_scale_out_prior.py tools/fit_profile.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prior_copy  # noqa: E402


def line(pts):
    """Least squares by the normal equations, written out: (intercept, slope)."""
    k = len(pts)
    sx = sum(x for x, _ in pts)
    sy = sum(y for _, y in pts)
    sxx = sum(x * x for x, _ in pts)
    sxy = sum(x * y for x, y in pts)
    s = (k * sxy - sx * sy) / (k * sxx - sx * sx)
    return (sy - s * sx) / k, s


def main():
    fp, path, rows, bad = prior_copy.load(sys.argv[1], 'NCCL_OUT_PRIOR')
    if len(rows) != 17:
        bad.append('%s: %d rows, not the 17 the Protocol entry names' % (path, len(rows)))
    for r in rows:
        # nccl-tests: algbw = bytes / time, busbw = algbw * 2(n-1)/n, n = 24 (each to 0.01-0.02)
        b, t, alg, bus = float(r[0]), float(r[5]), float(r[6]), float(r[7])
        if abs(b / t / 1e3 - alg) > 0.02 or abs(alg * 46 / 24 - bus) > 0.03:
            bad.append('%s: row %s is not one all-reduce of 24 ranks (time %g us, algbw %g, '
                       'busbw %g)' % (path, r[0], t, alg, bus))
    n = 24
    a, s = line([(float(r[0]), float(r[5])) for r in rows])
    want_eff = 2 * (n - 1) / n / (s * 8 * 12.5e3)
    want_lat = a / (2 * (n - 1) + 1)
    lat, eff = fp.scale_out_prior()
    if abs(lat - want_lat) > 1e-6 or abs(eff - want_eff) > 1e-9:
        bad.append('scale_out_prior(): latency %.6g us, efficiency %.6g; the rule gives '
                   '%.6g us, %.6g' % (lat, eff, want_lat, want_eff))
    prior = fp.prior()
    if abs(prior['ol'] - want_lat) > 1e-6 or abs(prior['oe'] - want_eff) > 1e-9:
        bad.append('fit_profile.py priors: latency %.6g us, efficiency %.6g; the rule gives '
                   '%.6g us, %.6g' % (prior['ol'], prior['oe'], want_lat, want_eff))
    if prior['pn'] != 1.0:
        bad.append('partial_node_efficiency prior %g, not 1' % prior['pn'])
    if fp.SO_START != {'ol': 10.0, 'oe': 0.8}:
        bad.append('stage 2 starts the scale-out tier at %s, not where the shipped fit started'
                   % fp.SO_START)
    if abs(want_lat - 1.614) > 5e-4 or abs(want_eff - 0.9901) > 5e-5:
        bad.append('the file gives latency %.4f us, efficiency %.4f: not the 1.614 us, 0.9901 '
                   'the Protocol entry records' % (want_lat, want_eff))
    # the prior reads the file: every time doubled gives twice the latency, half the efficiency
    lat, eff = prior_copy.prior_of_copy(
        fp.scale_out_prior, path, lambda c: c[:5] + ['%.6g' % (2 * float(c[5]))] + c[6:])
    if abs(lat - 2 * want_lat) > 1e-6 or abs(eff - want_eff / 2) > 1e-9:
        bad.append('scale_out_prior() does not follow its file: %.6g us, %.6g from a copy with '
                   'the times doubled' % (lat, eff))
    return prior_copy.report('test_scale_out_prior.py', want_lat, want_eff, bad)

if __name__ == '__main__':
    sys.exit(main())
