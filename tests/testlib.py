"""testlib.py — what the Python test scripts under tests/ share (the shell
scripts' counterpart is tests/lib.sh). A script in tests/AREA/ imports it with

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    import testlib

and gets:
    checks = testlib.Checks('name.py')
    checks.ok(what) / checks.bad(what)   one check passed / failed (printed)
    checks.check(cond, what)             ok or bad by cond
    checks.finish(summary='')            prints the counts, exits 1 on any failure
    testlib.skip(name, reason)           exit 77, meson's "skipped", saying why
    testlib.args(name, usage, n)         sys.argv[1:], which must hold n arguments
                                         (else the usage line and exit 2)
    testlib.MPI_ENV                      the environment mpirun needs as root in a
                                         container, with one BLAS thread a rank
"""
import os
import sys

MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
               OPENBLAS_NUM_THREADS='1')


def skip(name, reason):
    print(f'{name}: skipped: {reason}')
    sys.exit(77)


def args(name, usage, n):
    if len(sys.argv) != n + 1:
        print(f'usage: {name} {usage}', file=sys.stderr)
        sys.exit(2)
    return sys.argv[1:]


class Checks:
    def __init__(self, name, quiet_ok=False):
        self.name = name
        self.quiet_ok = quiet_ok  # print only the failures
        self.passed = 0
        self.failed = 0

    def ok(self, what=''):
        self.passed += 1
        if what and not self.quiet_ok:
            print('ok   ' + what)

    def bad(self, what):
        self.failed += 1
        print('FAIL ' + what)

    def check(self, cond, what):
        if cond:
            self.ok()
        else:
            self.bad(what)
        return cond

    def finish(self, summary=''):
        print(f'{self.name}: {self.passed} passed, {self.failed} failed'
              + (f' ({summary})' if summary else ''))
        sys.exit(1 if self.failed else 0)
