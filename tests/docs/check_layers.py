#!/usr/bin/env python3
"""The layers of docs/design.md §3 hold: no file under src/ includes a header
of a layer above its own (or beside it: exec and the search driver do not use
each other).

Usage: check_layers.py SOURCE_ROOT   exits 1 naming each file:line at fault
       check_layers.py --self-test   runs the check on a small tree with one
                                     upward include and one clean tree; exits
                                     0 only if it caught the first and passed
                                     the second
"""
import os
import re
import sys
import tempfile

# Bottom to top. A file belongs to the first layer with a matching prefix
# (schedule*.c, timeline and the heap, which schedule_vorder.c uses, before
# the rest of src/sim). "uses": the layers its files may include besides its
# own.
LAYERS = [
    ("core", ["src/core/"], []),
    ("schedule", ["src/sim/schedule", "src/sim/timeline.", "src/sim/heap."], ["core"]),
    ("planner", ["src/planner/"], ["core", "schedule"]),
    ("sim", ["src/sim/"], ["core", "schedule", "planner"]),
    ("search", ["src/search/"], ["core", "schedule", "planner", "sim"]),
    ("exec", ["src/exec/"], ["core", "schedule", "planner", "sim"]),
    ("cli", ["src/cli/", "src/megaplan.c"], ["core", "schedule", "planner", "sim", "search",
                                             "exec"]),
]
# Included names that are not under src/: the configure-time header and the
# CUDA kernels' host interface (kernels/), which only the executor uses.
OUTSIDE = {"megaplan_config.h": None, "kernels/": {"exec"}}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(rel):
    for name, prefixes, _ in LAYERS:
        if any(rel.startswith(p) for p in prefixes):
            return name
    return None


def check(root):
    uses = {name: set(u) | {name} for name, _, u in LAYERS}
    faults = []
    src = os.path.join(root, "src")
    for dirpath, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            mine = layer_of(rel)
            if mine is None:
                faults.append(f"{rel}: in no layer (add its folder to tests/docs/check_layers.py "
                              "and docs/design.md §3)")
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    name = m.group(1)
                    outside = next((v for k, v in OUTSIDE.items()
                                    if name == k or (k.endswith("/") and name.startswith(k))),
                                   False)
                    if outside is not False:
                        if outside is not None and mine not in outside:
                            faults.append(f"{rel}:{n}: {mine} includes {name}")
                        continue
                    # the project's style names headers from src/; a bare name is
                    # the including file's folder
                    target = "src/" + name
                    if not os.path.exists(os.path.join(root, target)):
                        target = os.path.relpath(os.path.join(dirpath, name), root)
                    theirs = layer_of(target.replace(os.sep, "/"))
                    if theirs is None:
                        faults.append(f"{rel}:{n}: includes {name}, which is in no layer")
                    elif theirs not in uses[mine]:
                        faults.append(f"{rel}:{n}: {mine} includes {name} ({theirs}), "
                                      f"which is not below it")
    return faults


def self_test():
    def tree(files):
        d = tempfile.TemporaryDirectory()
        for rel, text in files.items():
            p = os.path.join(d.name, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as fh:
                fh.write(text)
        return d

    clean = {"src/core/a.h": "", "src/sim/schedule.h": '#include "core/a.h"\n',
             "src/planner/cost.h": '#include "sim/schedule.h"\n#include "megaplan_config.h"\n',
             "src/sim/simulate.h": '#include "planner/cost.h"\n'}
    bad = dict(clean)
    bad["src/planner/search.c"] = '#include "planner/cost.h"\n#include "sim/simulate.h"\n'
    with tree(clean) as good_dir, tree(bad) as bad_dir:
        good_faults, bad_faults = check(good_dir), check(bad_dir)
    if good_faults:
        print("self-test: a clean tree failed:", *good_faults, sep="\n  ")
        return 1
    if len(bad_faults) != 1 or "src/planner/search.c:2" not in bad_faults[0]:
        print("self-test: the upward include sim/simulate.h in planner was not the one fault:",
              *bad_faults, sep="\n  ")
        return 1
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    faults = check(argv[1])
    if faults:
        print("includes against the layers of docs/design.md §3 (a part may use only what "
              "lies below it):")
        print("\n".join("  " + f for f in faults))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
