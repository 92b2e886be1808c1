#!/usr/bin/env python3
"""tools/fit_profile.py's mixture-of-experts bands (moe_error_band) on a small synthetic row set,
checked against figures worked out by hand: each class's range of predicted/measured - 1 over its
held-out MoE rows only (never a fit row, never a dense row), a class without MoE rows the pooled
range of every class's MoE rows (not its dense band), and the values written into the profiles.

    test_moe_band.py tools/fit_profile.py"""
import importlib.util
import sys


def main():
    spec = importlib.util.spec_from_file_location('fit_profile', sys.argv[1])
    fp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp)
    # (set, role, profile, measured, predicted), as megaplan-validate --rows-tsv gives them
    rows = [
        ('moe', 'held-out', 'dgx-h100', 10.0, 8.0),      # H100: -20%
        ('moe', 'held-out', 'h200', 4.0, 5.0),           # H100: +25%
        ('moe', 'held-out', 'dgx-h100', 2.0, 2.1),       # H100: +5%
        ('moe', 'held-out', 'b200', 5.0, 3.0),           # B200: -40%
        ('moe', 'held-out', 'gb200-nvl72', 8.0, 8.8),    # B200: +10%
        ('moe', 'fit', 'dgx-a100', 1.0, 3.0),            # a fit row: in no band (+200%)
        ('nemo', 'held-out', 'dgx-a100', 1.0, 0.5),      # a dense row: in no MoE band (-50%)
        ('nemo', 'held-out', 'b200', 1.0, 1.9),          # dense (+90%)
    ]
    bad = []

    def near(got, want, what):
        if abs(got[0] - want[0]) > 1e-12 or abs(got[1] - want[1]) > 1e-12:
            bad.append('%s: got %r, want %r' % (what, got, want))

    m = fp.moe_bands(rows)
    near(m['h100'], (-0.20, 0.25), 'H100 MoE band')
    near(m['b200'], (-0.40, 0.10), 'B200 MoE band')
    # no A100 MoE row: the pooled range of the five held-out MoE rows, -40% .. +25%
    near(m['a100'], (-0.40, 0.25), 'A100 MoE band (pooled)')
    # the dense bands ignore the MoE rows (A100: the one dense row, -50%; B200: +90%)
    d = fp.bands(rows)
    near(d['a100'], (-0.50, -0.50), 'A100 dense band')
    near(d['b200'], (0.90, 0.90), 'B200 dense band')
    if fp.moe_bands([r for r in rows if r[0] != 'moe']) != {}:
        bad.append('without MoE rows there is no MoE band')
    v = fp.profile_values(fp.prior(), d, m)
    want = {'dgx-a100': '{low: -0.400, high: 0.250}', 'h800': '{low: -0.200, high: 0.250}',
            'gb200-nvl72': '{low: -0.400, high: 0.100}'}
    for prof, band in want.items():
        if v[prof].get('moe_error_band') != band:
            bad.append('%s moe_error_band: %s, want %s' % (prof, v[prof].get('moe_error_band'), band))
    if v['dgx-a100']['error_band'] != '{low: -0.500, high: -0.500}':
        bad.append('dgx-a100 error_band: %s' % v['dgx-a100']['error_band'])
    for b in bad:
        print(b)
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
