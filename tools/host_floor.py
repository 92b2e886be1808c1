#!/usr/bin/env python3
"""host_floor.py - where the vTrain single-node sweep's step time goes, by least squares, per
group of hidden size h, micro-batch b and tensor parallelism t (docs/cost-model.md §13,
"Only the single-node sweep measures kernel_overhead"). Writes nothing; fits no constant.

    python3 tools/host_floor.py CSV [ROWS_TSV]

CSV is tests/data/vtrain/ground_truth_single.csv. Each group's iteration times are fitted as

    step = a·(m + p − 1)·L/p + c·(m + p − 1) + d + e·L/p      (ms)

m = global batch / (b·dp) micro-batches, p pipeline stages, L layers: `a` is one layer's
forward, recompute and backward of one micro-batch (a 1F1B pipeline slot of one layer), `c`
what each slot costs outside the layers (embedding, head, loss, the data), `d` and `e` the
step's fixed and per-layer work (optimizer, DP all-reduce). With ROWS_TSV (megaplan-validate
--rows-tsv --only vtrain-single: source, role, profile, measured s, predicted s) the model's
predictions are fitted the same way beside the measurements."""
import csv
import math
import sys


def read_sweep(path):
    """The sweep's rows as dicts of ints (and `ms`), in file order."""
    names = ('gpus', 'gb', 'b', 'h', 'heads', 'L', 's', 't', 'd', 'p')
    out = []
    with open(path) as f:
        for r in csv.reader(line for line in f if not line.startswith('#')):
            row = dict(zip(names, map(int, r[:10])))
            row['ms'] = float(r[10])
            out.append(row)
    return out


def design(r):
    """The regressors of one row: slot-layers, slots, 1, layers per stage."""
    slots = r['gb'] // (r['b'] * r['d']) + r['p'] - 1
    per = r['L'] / r['p']
    return [slots * per, float(slots), 1.0, per]


def lstsq(X, Y):
    """Ordinary least squares by the normal equations (a few regressors; no numpy here)."""
    n = len(X[0])
    A = [[sum(x[i] * x[j] for x in X) for j in range(n)] for i in range(n)]
    B = [sum(x[i] * y for x, y in zip(X, Y)) for i in range(n)]
    for i in range(n):
        piv = max(range(i, n), key=lambda k: abs(A[k][i]))
        A[i], A[piv], B[i], B[piv] = A[piv], A[i], B[piv], B[i]
        if abs(A[i][i]) < 1e-12:
            return None  # the group does not separate the terms
        for j in range(i + 1, n):
            f = A[j][i] / A[i][i]
            A[j] = [a - f * b for a, b in zip(A[j], A[i])]
            B[j] -= f * B[i]
    c = [0.0] * n
    for i in reversed(range(n)):
        c[i] = (B[i] - sum(A[i][k] * c[k] for k in range(i + 1, n))) / A[i][i]
    return c


def groups(rows, times):
    """{(h, b, t): (coefficients, rms relative residual, rows)} of `times` (ms, one a row)."""
    by = {}
    for r, y in zip(rows, times):
        by.setdefault((r['h'], r['b'], r['t']), []).append((design(r), y))
    out = {}
    for k, v in sorted(by.items()):
        X, Y = [x for x, _ in v], [y for _, y in v]
        c = lstsq(X, Y)
        if c is None:
            continue
        rms = math.sqrt(sum((sum(a * b for a, b in zip(c, x)) / y - 1) ** 2
                            for x, y in zip(X, Y)) / len(Y))
        out[k] = (c, rms, len(Y))
    return out


def predicted(rows, tsv):
    """The model's times (ms) in the sweep's order (megaplan-validate prints the rows in the
    file's order; each line's measured value is checked against the sweep's)."""
    out = []
    for r, line in zip(rows, open(tsv)):
        f = line.rstrip('\n').split('\t')
        if abs(float(f[3]) * 1e3 - r['ms']) > 1e-6 * r['ms']:
            sys.exit('%s: row %d measures %s s, not the sweep\'s %g ms' % (tsv, len(out) + 1,
                                                                        f[3], r['ms']))
        out.append(float(f[4]) * 1e3)
    if len(out) != len(rows):
        sys.exit('%s: %d rows, not the sweep\'s %d' % (tsv, len(out), len(rows)))
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    rows = read_sweep(sys.argv[1])
    meas = groups(rows, [r['ms'] for r in rows])
    model = groups(rows, predicted(rows, sys.argv[2])) if len(sys.argv) == 3 else {}
    print('| h | b | t | rows | layer-slot ms | slot ms | step ms | per layer and step ms | rms |'
          + (' model layer-slot | model slot |' if model else ''))
    print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|' + ('---:|---:|' if model else ''))
    for k, (c, rms, n) in meas.items():
        line = '| %d | %d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.3f |' % (k + (n,) + tuple(c) + (rms,))
        if k in model:
            line += ' %.2f | %.2f |' % tuple(model[k][0][:2])
        print(line)


if __name__ == '__main__':
    main()
