#!/usr/bin/env python3
"""tools/host_floor.py's least squares (docs/cost-model.md §13): a sweep made by hand from known
per-layer-slot, per-slot, per-step and per-layer-and-step times, in the single-node sweep's
columns, must give those times back for each group, and a group whose rows cannot separate
the terms (one shape only) is left out rather than printed.

    test_host_floor.py HOST_FLOOR_PY"""
import importlib.util
import os
import sys
import tempfile


def main():
    spec = importlib.util.spec_from_file_location('host_floor', sys.argv[1])
    hf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hf)
    # (h, b, t): (a, c, d, e) in ms; step = a·slots·L/p + c·slots + d + e·L/p
    want = {(1024, 1, 2): (3.4, 2.1, 0.3, 0.05), (2048, 2, 8): (4.0, 3.7, 0.2, 0.13)}
    lines = ['# note: made by hand for this test',
             '# GPUs,global batch,micro batch,hidden size,attention heads,# layers,'
             'sequence length,tensor parallelism,data parallelism,pipeline parallelism,'
             'iteration time (ms)']
    for (h, b, t), (a, c, d, e) in want.items():
        for L in (12, 16, 24):
            for p in (1, 2, 4):
                for gb in (4 * b, 16 * b):
                    slots = gb // b + p - 1
                    ms = a * slots * L / p + c * slots + d + e * L / p
                    lines.append('%d,%d,%d,%d,16,%d,1024,%d,1,%d,%.9f' % (t * p, gb, b, h, L, t, p, ms))
    lines.append('8,8,4,1024,16,12,1024,8,1,1,50.0')  # a group of one shape: not separable
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'sweep.csv')
        with open(path, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        rows = hf.read_sweep(path)
    got = hf.groups(rows, [r['ms'] for r in rows])
    bad = []
    if sorted(got) != sorted(want):
        bad.append('groups %s, not %s' % (sorted(got), sorted(want)))
    for k, v in want.items():
        c, rms, n = got.get(k, ([0] * 4, 1.0, 0))
        if any(abs(x - y) > 1e-6 for x, y in zip(c, v)) or rms > 1e-9 or n != 18:
            bad.append('%s: %s (rms %g, %d rows), by hand %s' % (k, c, rms, n, v))
    for b in bad:
        print('FAIL:', b)
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
