#!/usr/bin/env python3
"""fit_profile.py - how the A100 profiles' global efficiency parameters were fitted.

    python3 tools/fit_profile.py build/tests/validation/megaplan-validate tests/data [--split-by-model]
    python3 tools/fit_profile.py build/tests/validation/megaplan-validate tests/data --partial-node

Coordinate descent over seven global parameters shared by dgx-a100 and
a100-4xhdr (the GEMM efficiency curve ymax / (1 + (x0/x)^k), memory efficiency,
host overhead per kernel, scale-out latency and efficiency), minimising

    0.5 * MAPE(vTrain multi-node, fit half) + 0.3 * MAPE(vTrain single-node, fit half)
    + 0.2 * max(8%, worst published A100 row)

where the fit half is the 1st, 3rd, 5th, ... data row of each vTrain file
(megaplan-validate reports the other half as the hold-out), or with
--split-by-model the smaller model of each file (3.6B multi-node, h = 1024
single-node), the larger one being held out. Each evaluation
runs megaplan-validate with --set-a100 overrides; nothing per row. Prints the
best parameters and the profile lines to paste into hwprofiles/*.yaml.

Refit in round 2 after two changes of model structure (the per-byte local pass
of NVLink collectives, the asynchronous column-parallel TP backward): ymax 0.72,
x0 6.1e9, k 1.0, memory efficiency 0.80, host 60 us, scale-out 2 us / 0.9 (both
at the edge of the searched range); --split-by-model gives 0.74, 3.1e9, 0.8,
0.75, 60 us, 4 us / 0.9. The scale-up tier is fitted to the NCCL sweeps alone
(docs/cost-model.md section 5), not here.

--partial-node (round 3) scans the one parameter a100-4xhdr has for DP groups
holding some but not all of a node's GPUs (scale_out.partial_node_efficiency,
docs/cost-model.md section 5) from 0.20 to 1.00, the other parameters as
shipped, and reports the vTrain multi-node MAPE of the fit half (odd rows: the
value chosen is its minimum) and of the hold-out half (even rows), computed
from the per-row table to 0.01 %. Round 3: minimum 4.35 % at 0.34 (1.0:
6.03 %); hold-out 8.39 % -> 6.83 %.
"""
import subprocess
import sys


def curve(p):
    pts = []
    for e in range(7, 14):
        y = p['ymax'] / (1 + (p['x0'] / 10 ** e) ** p['k'])
        pts.append('[1e%d, %.3f]' % (e, max(y, 0.001)))
    return '[' + ', '.join(pts) + ']'


SPLIT = []


def run(exe, data, p):
    args = [exe, data, '--summary'] + SPLIT + [
            '--set-a100', 'gemm_efficiency=' + curve(p),
            '--set-a100', 'memory_efficiency=%.3f' % p['me'],
            '--set-a100', 'kernel_overhead=%.1fus' % p['ko'],
            '--set-a100', 'scale_out.efficiency=%.3f' % p['oe'],
            '--set-a100', 'scale_out.latency=%.1fus' % p['ol']]
    out = subprocess.run(args, capture_output=True, text=True).stdout
    res = {}
    section = ''
    for line in out.splitlines():
        if line.startswith('## '):
            section = line
        c = [x.strip() for x in line.split('|')]
        if len(c) > 6 and c[1].startswith(('vTrain', 'Naray', 'Korthikanti 2022 Tables')) \
                and c[3].endswith('%'):
            res[c[1][:12] + '_all'] = (float(c[3][:-1]), float(c[5][:-1]))
        if section.startswith('## Hold-out') and len(c) == 6 and c[1].startswith('vTrain') \
                and c[1][:12] + '_fit' not in res:  # the first table: the split in use
            res[c[1][:12] + '_fit'] = float(c[2][:-1])
            res[c[1][:12] + '_hold'] = float(c[3][:-1])
    return res


def objective(r):
    pub = max(r['Narayanan 20_all'][1], r['Korthikanti _all'][1])
    return 0.5 * r['vTrain multi_fit'] + 0.3 * r['vTrain singl_fit'] + 0.2 * max(pub, 8)


def multi_node_rows(exe, data, value):
    """(measured, predicted) of each vTrain multi-node row, in file order."""
    args = [exe, data, '--set-a100', 'scale_out.partial_node_efficiency=%g' % value]
    out = subprocess.run(args, capture_output=True, text=True).stdout
    rows, section = [], ''
    for line in out.splitlines():
        if line.startswith('## '):
            section = line
        c = [x.strip() for x in line.split('|')]
        if section.startswith('## vTrain multi') and len(c) > 5 and c[1].isdigit():
            rows.append((float(c[3]), float(c[4])))
    return rows


def scan_partial_node(exe, data):
    best = None
    for i in range(20, 101):
        v = i / 100
        err = [abs(p / m - 1) * 100 for m, p in multi_node_rows(exe, data, v)]
        fit, hold = err[0::2], err[1::2]
        f, h = sum(fit) / len(fit), sum(hold) / len(hold)
        print('partial_node_efficiency %.2f: fit half %.2f%%, hold-out %.2f%%, all %.2f%%'
              % (v, f, h, sum(err) / len(err)), flush=True)
        if best is None or f < best[1] - 1e-9:
            best = (v, f, h)
    print('best on the fit half: %.2f (fit %.2f%%, hold-out %.2f%%)' % best)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    exe, data = sys.argv[1], sys.argv[2]
    if len(sys.argv) == 4 and sys.argv[3] == '--partial-node':
        scan_partial_node(exe, data)
        return
    if len(sys.argv) == 4 and sys.argv[3] == '--split-by-model':
        SPLIT.append('--split-by-model')
    p = dict(ymax=0.8, x0=2e9, k=0.8, me=0.75, ko=60, oe=0.8, ol=10)
    step = dict(ymax=0.02, x0=1.25, k=0.1, me=0.05, ko=5, oe=0.05, ol=2)
    lim = dict(ymax=(0.5, 0.95), x0=(1e7, 1e12), k=(0.2, 3), me=(0.4, 0.9), ko=(0, 200),
               oe=(0.5, 0.9), ol=(2, 20))
    best = objective(run(exe, data, p))
    for _ in range(6):
        improved = False
        for k in p:
            for d in (-1, 1):
                while True:
                    q = dict(p)
                    q[k] = p[k] * step[k] ** d if k == 'x0' else round(p[k] + d * step[k], 4)
                    if not lim[k][0] <= q[k] <= lim[k][1]:
                        break
                    o = objective(run(exe, data, q))
                    if o < best - 1e-3:
                        best, p, improved = o, q, True
                    else:
                        break
        print('objective %.2f' % best, p, flush=True)
        if not improved:
            break
    print(run(exe, data, p))
    print('gemm_efficiency:', curve(p))
    print('memory_efficiency: %.2f  kernel_overhead: %g us  scale_out latency: %g us, efficiency: %.2f'
          % (p['me'], p['ko'], p['ol'], p['oe']))


if __name__ == '__main__':
    main()
