#!/usr/bin/env python3
"""tools/fit_profile.py evaluates a candidate fit with --set on every profile it writes
(profile_values), each with every fitted value it would write there, so the rows and the error
bands it computes before --write are the ones megaplan-validate computes after it (before the
tenth stop only the A100 profiles and dgx-h100 took it: a written candidate's B200 band came
out stale; docs/validation.md, "Protocol").

    test_fit_overrides.py tools/fit_profile.py"""
import importlib.util
import sys


def main():
    spec = importlib.util.spec_from_file_location('fit_profile', sys.argv[1])
    fp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp)
    p = fp.prior()
    args = fp.overrides(p)
    got = {}
    for flag, val in zip(args[::2], args[1::2]):
        assert flag == '--set', flag
        prof, kv = val.split(':', 1)
        k, v = kv.split('=', 1)
        got.setdefault(prof, {})[k] = v
    want = fp.profile_values(p, {'a100': (0, 0), 'h100': (0, 0), 'b200': (0, 0)})
    bad = 0
    for prof, vals in want.items():
        for k, v in vals.items():
            if k != 'error_band' and got.get(prof, {}).get(k) != v:
                print('%s %s: written %s, evaluated with %s' % (prof, k, v, got.get(prof, {}).get(k)))
                bad += 1
    print('test_fit_overrides.py: %d profiles, %d values evaluated otherwise than written' %
          (len(want), bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
