#!/usr/bin/env python3
"""The fitted rates' upper bounds are the fitted GPU's measured ceilings (tools/validation-protocol.md,
refit 8): stage 2 may not put the GEMM curve's asymptote ymax above A100's maximum achievable
matmul efficiency (tests/data/hw/mamf_ml_engineering.csv: 271.2 of 312 TFLOP/s), nor
memory_efficiency above the fastest A100 SXM4 80GB streaming kernel that both loads and stores
(tests/data/hw/gpu_stream_a100.csv: triad, 1759 of 2039 GB/s). Checked by hand here, and
against the bounds stage 2 actually descends within.

    test_fit_ceilings.py FIT_PROFILE_PY"""
import importlib.util
import sys


def main():
    spec = importlib.util.spec_from_file_location('fit_profile', sys.argv[1])
    fp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp)
    bad = []
    if abs(fp.mamf_ceiling() - 271.2 / 312) > 1e-12:
        bad.append('ymax ceiling %r, by hand 271.2/312' % fp.mamf_ceiling())
    # triad (2 loads, 1 store) is the fastest load-and-store kernel; init (store only, 1880)
    # and read (load only, 1769) are faster or as fast and must not set the bound
    if abs(fp.stream_ceiling() - 1759.0 / 2039.0) > 1e-12:
        bad.append('memory_efficiency ceiling %r, by hand 1759/2039' % fp.stream_ceiling())
    bounds = {name: hi for name, _, _, (_, hi), _ in fp.GPU}
    if bounds.get('ymax') != fp.mamf_ceiling():
        bad.append('stage 2 bounds ymax at %r, not the measured %r' % (bounds.get('ymax'),
                                                                       fp.mamf_ceiling()))
    if bounds.get('me') != fp.stream_ceiling():
        bad.append('stage 2 bounds memory_efficiency at %r, not the measured %r' %
                   (bounds.get('me'), fp.stream_ceiling()))
    for line in bad:
        print('test_fit_ceilings: ' + line)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
