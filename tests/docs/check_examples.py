#!/usr/bin/env python3
"""Runs every command shown in README.md and docs/*.md, so the examples stay true.

A command is a line that starts with "$ megaplan " (or "$ mpirun ... megaplan")
inside a ```console block. It must exit 0, or the status written after it as
"# exit N". Commands run in a scratch folder that has the project's examples/
and an empty docs/img/, with "megaplan" meaning the binary under test.
Usage: check_examples.py MEGAPLAN SOURCE_ROOT
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import testlib  # noqa: E402

megaplan, root = os.path.abspath(sys.argv[1]), sys.argv[2]  # meson passes ./megaplan; commands run elsewhere
docs = [os.path.join(root, "README.md")] + sorted(
    os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))

commands = []
for path in docs:
    in_console = False
    for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.startswith("```"):
            in_console = line.strip() == "```console"
            continue
        if in_console and line.startswith("$ ") and " megaplan" in " " + line[2:]:
            commands.append((path, lineno, line[2:].rstrip("\n")))

if not commands:
    print("no commands found: the checker would check nothing")
    sys.exit(1)

scratch = tempfile.mkdtemp(prefix="megaplan-docs-")
checks = testlib.Checks('check_examples.py')
try:
    os.symlink(os.path.join(root, "examples"), os.path.join(scratch, "examples"))
    os.makedirs(os.path.join(scratch, "docs", "img"))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    for path, lineno, cmd in commands:
        expect = 0
        m = re.search(r"#\s*exit\s+(\d+)\s*$", cmd)
        if m:
            expect = int(m.group(1))
            cmd = cmd[:m.start()]
        argv = [megaplan if a == "megaplan" else a for a in shlex.split(cmd, comments=True)]
        r = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=300)
        where = f"{os.path.relpath(path, root)}:{lineno}"
        if r.returncode != expect:
            checks.bad(f"{where}: `{cmd}` exited {r.returncode}, expected {expect}")
            print(r.stderr.strip()[-2000:])
        else:
            checks.ok(f"{where}: {cmd}")
finally:
    shutil.rmtree(scratch, ignore_errors=True)
checks.finish(f"{len(commands)} documented commands")
