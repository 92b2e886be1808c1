#!/usr/bin/env python3
"""Every built-in hardware profile's memory is its GPU's device memory as
nvidia-smi reports it (memory.total, MiB), tests/data/hw/gpu_memory_total.csv:
the capacity the estimate's per-GPU peak is checked against. Reads the value
the way the tool does (`megaplan hw --format json PROFILE`, bytes), so a
profile written in decimal GB (141 GB = 131.3 GiB, not the H200's 140.4) or in
round GiB (80 GiB for an H100's 79.6) fails. Every profile `megaplan hw` lists
must have a row, and every row's profiles must exist. Fails naming the profile."""
import csv
import json
import os
import subprocess
import sys


def main():
    megaplan, root = sys.argv[1], sys.argv[2]
    path = os.path.join(root, 'tests/data/hw/gpu_memory_total.csv')
    rows = list(csv.DictReader(l for l in open(path) if not l.startswith('#')))
    want = {}
    for r in rows:
        for prof in r['profile'].split():
            if prof in want:
                print('%s: profile %s in two rows' % (path, prof))
                return 1
            want[prof] = (int(r['memory_total_mib']), r['gpu'])
    listed = json.loads(subprocess.run([megaplan, 'hw', '--format', 'json'], check=True,
                                       capture_output=True, text=True).stdout)
    names = sorted(p['name'] for p in listed)
    bad = 0
    for prof in names:
        if prof not in want:
            print('%s: no row of %s names it' % (prof, path))
            bad += 1
            continue
        out = subprocess.run([megaplan, 'hw', '--format', 'json', prof], check=True,
                             capture_output=True, text=True).stdout
        got = float(json.loads(out)['memory'])
        mib, gpu = want[prof]
        if got != mib * 1048576.0:
            print('%s: memory is %.1f MiB (%.2f GiB), not the %d MiB nvidia-smi reports for %s' %
                  (prof, got / 1048576, got / 2**30, mib, gpu))
            bad += 1
    for prof in sorted(set(want) - set(names)):
        print('%s: named in %s but not a built-in profile' % (prof, path))
        bad += 1
    print('check_gpu_memory_profiles.py: %d profiles, %d disagreements' % (len(names), bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
