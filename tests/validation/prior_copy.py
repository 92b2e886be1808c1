"""Helpers of the prior tests (test_scale_up_prior.py, test_scale_out_prior.py): a prior computed
from a copy of its data file with the data rows changed, and the tests' closing report."""
import importlib.util
import os
import tempfile


def prior_of_copy(prior, path, change):
    """prior(copy) where copy is `path` with each data row's fields (a list of strings) replaced
    by change(fields); '#' lines and the column names are copied as they are."""
    with tempfile.NamedTemporaryFile('w', suffix='.csv', delete=False) as f:
        for l in open(path):
            if not l.startswith('#') and l[0].isdigit():
                l = ','.join(change(l.strip().split(','))) + '\n'
            f.write(l)
    try:
        return prior(f.name)
    finally:
        os.unlink(f.name)


def report(name, lat, eff, bad):
    """Prints each problem and the summary line; the exit status."""
    for b in bad:
        print(b)
    print('%s: latency %.4f us, efficiency %.4f, %d problems' % (name, lat, eff, len(bad)))
    return 1 if bad else 0


def load(fit_profile, attr):
    """(tools/fit_profile.py as a module, its data file named by `attr`, its data rows as lists
    of fields, problems so far: the file's '# role: prior' line)."""
    spec = importlib.util.spec_from_file_location('fit_profile', fit_profile)
    fp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp)
    path = getattr(fp, attr)
    bad = []
    if '# role: prior\n' not in [l for l in open(path) if l.startswith('#')]:
        bad.append('%s: no "# role: prior" line' % path)
    rows = [l.strip().split(',') for l in open(path) if not l.startswith('#')][1:]
    return fp, path, rows, bad
