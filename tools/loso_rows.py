#!/usr/bin/env python3
"""loso_rows.py - one fit source left out, row by row: what its leave-one-source-out figure is
made of. Writes nothing (the profiles are tools/fit_profile.py --write's, never this tool's).

    python3 tools/loso_rows.py VALIDATE DATA SOURCE [--with-full KEY,KEY...]

VALIDATE is build/tests/validation/megaplan-validate, DATA is tests/data, SOURCE a `fit` source
(vtrain-multi, vtrain-single, nccl). Both stages of tools/fit_profile.py are rerun without
SOURCE, exactly as `fit_profile.py --loso` does, and SOURCE's rows are printed as that fit
predicts them, then grouped by model size and tensor-parallel degree (mean signed error).

--with-full KEY,...: the named constants (fit_profile.py's short names: ol, oe, pn for the
scale-out tier, ymax, x0, k, me, ko, ...) are taken from the full fit instead, the others from
the fit without SOURCE. This separates what the left-out source alone constrains (at their
priors in the fit without it: vtrain-multi is the only source of ol, oe and pn) from what the
other sources transfer to it (docs/cost-model.md §10, "What the multi-node figure left out is
made of")."""
import collections
import importlib.util
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_fit_profile():
    spec = importlib.util.spec_from_file_location('fit_profile',
                                                  os.path.join(HERE, 'fit_profile.py'))
    fp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp)
    return fp


def rows(fp, exe, data, p, source):
    """(label, measured, predicted) of SOURCE's rows under the constants p."""
    out = subprocess.run([exe, data, '--rows', '--only', source] + fp.overrides(p),
                         capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit('loso_rows.py: megaplan-validate failed: ' + out.stderr.strip())
    res = []
    for line in out.stdout.splitlines():
        m = re.match(r'\| \d+ \| (.+?) \| ([0-9.eE+-]+) \| ([0-9.eE+-]+) \| [+-]?[0-9.]+% \|$', line)
        if m:
            res.append((m.group(1), float(m.group(2)), float(m.group(3))))
    return res


def group_of(label):
    """model size (hidden) and tensor-parallel degree of a row's label"""
    h = re.search(r'\bh=(\d+)', label)
    t = re.search(r'\bt=(\d+)', label)
    return ('h=%s' % h.group(1) if h else '-', int(t.group(1)) if t else 0)


def main():
    args = sys.argv[1:]
    full_keys = []
    if '--with-full' in args:
        i = args.index('--with-full')
        if i + 1 >= len(args):
            sys.exit(__doc__)
        full_keys = [k for k in args[i + 1].split(',') if k]
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    exe, data, source = args
    fp = load_fit_profile()
    known = [n for n, _, _, _, _ in fp.UP + fp.GPU]
    for k in full_keys:
        if k not in known:
            print('loso_rows.py: --with-full: %s is not one of %s' % (k, ', '.join(known)),
                  file=sys.stderr)
            sys.exit(2)
    r = fp.roles(exe, data)
    if r.get(source) != 'fit':
        print('loso_rows.py: %s is not a fit source (%s)' % (
            source, ', '.join(k for k, role in r.items() if role == 'fit')), file=sys.stderr)
        sys.exit(2)
    rest = [k for k, role in r.items() if role == 'fit' and k != source]
    p = fp.fit(exe, data, rest)
    print('fit without %s: %s' % (source, {k: fp.fmt(k, v) for k, v in p.items()}))
    if full_keys:
        full = fp.fit(exe, data, [k for k, role in r.items() if role == 'fit'])
        for k in full_keys:
            p[k] = full[k]
        print('from the full fit: %s' % {k: fp.fmt(k, full[k]) for k in full_keys})
    rs = rows(fp, exe, data, p, source)
    groups = collections.defaultdict(list)
    print('\n| configuration | measured | predicted | error |\n|---|---:|---:|---:|')
    for label, m, pr in rs:
        e = pr / m - 1
        groups[group_of(label)].append(e)
        print('| %s | %.4g | %.4g | %+.1f%% |' % (label, m, pr, 100 * e))
    errs = [pr / m - 1 for _, m, pr in rs]
    print('\nMAPE %.2f%% over %d rows\n' % (100 * sum(abs(e) for e in errs) / len(errs), len(errs)))
    print('| size | t | rows | mean error | errors |\n|---|---:|---:|---:|---|')
    for (h, t), e in sorted(groups.items()):
        print('| %s | %d | %d | %+.1f%% | %s |' % (h, t, len(e), 100 * sum(e) / len(e),
                                                 ' '.join('%+.0f' % (100 * x) for x in e)))


if __name__ == '__main__':
    main()
