#!/usr/bin/env python3
"""kernel_overhead is moved by a fit only when a row of its step sources is host-bound at
the prior (tools/fit_profile.py, host_constrained; docs/validation.md, "Protocol", eighth
stop). Without the rule the fit on the multi-node sweep alone, whose every row is GPU-bound,
leaves the constant wherever its descent stopped (90 us in the fit left out of the
single-node sweep), and that value alone decides the left-out host-bound rows.

    test_fit_host_rule.py FIT_PROFILE_PY MEGAPLAN_VALIDATE DATA"""
import importlib.util
import sys


def main():
    tool, exe, data = sys.argv[1:4]
    spec = importlib.util.spec_from_file_location('fit_profile', tool)
    fp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp)
    bad = []
    # the rule on rows made by hand: (set, role, profile, measured, predicted)
    zero = [('s', 'fit', 'a', 1.0, 1.0), ('s', 'fit', 'a', 1.0, 2.0)]
    if fp.host_bound_rows([('s', 'fit', 'a', 1.0, 1.05), ('s', 'fit', 'a', 1.0, 2.0)], zero) != 1:
        bad.append('a row 5% slower with the prior overhead is not host-bound')
    if fp.host_bound_rows([('s', 'fit', 'a', 1.0, 1.04), ('s', 'fit', 'a', 1.0, 2.06)], zero) != 0:
        bad.append('rows 4% and 3% slower with the prior overhead are host-bound')
    # the data: the single-node sweep constrains the overhead, the multi-node one does not
    if not fp.host_constrained(exe, data, ['vtrain-single']):
        bad.append('vtrain-single has no host-bound row at the prior')
    if fp.host_constrained(exe, data, ['vtrain-multi']):
        bad.append('vtrain-multi has a host-bound row at the prior')
    ko = fp.fit(exe, data, ['vtrain-multi'])['ko']
    if ko != fp.prior()['ko']:
        bad.append('the fit on vtrain-multi alone moved kernel_overhead to %g us' % ko)
    for b in bad:
        print('FAIL:', b)
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
