#!/usr/bin/env python3
"""Runs every command shown in README.md and docs/*.md and compares its output with the
output shown under it, so the examples stay true.

Usage: check_examples.py MEGAPLAN SOURCE_ROOT            check; exits 1 on any difference
       check_examples.py --update MEGAPLAN SOURCE_ROOT   rewrite the shown outputs in place
       check_examples.py --self-test                     run the checker on a small folder
                                                         with a fake megaplan: it must catch
                                                         a stale output and pass a true one

After a change to the cost model (or to any output), regenerate the docs' examples with

    python3 tests/docs/check_examples.py --update build/megaplan .

then read the diff (`git diff README.md docs/`): the prose next to a block must still say
what the block now shows.

What is checked
---------------
A command is a line that starts with "$ megaplan " (or "$ mpirun ... megaplan") inside a
```console block. It must exit 0, or the status written after it as "# exit N". Commands run
in a scratch folder that has the project's examples/ and an empty docs/img/, with "megaplan"
meaning the binary under test. Other "$ " lines are neither run nor compared.

The lines after a command, up to the next "$ " line or the end of the block, are its shown
output. A command with no line under it shows no output: only its exit status is checked (a
block that lists commands to try). Otherwise the shown output must equal what the command
prints, line by line: its standard output and its standard error, one after the other, in
either order (a terminal interleaves the two as they come, and under mpirun that order is
a race; `exec --format json` writes its report on stderr and the JSON on stdout, a failing
check its last line on stderr). mpirun's own notices on stderr, the blocks Open MPI frames
between two lines of dashes (a rank's non-zero exit, with process ids and host names), are
left out. Three more allowances:

- trailing spaces of a line are ignored (they do not show in rendered Markdown), and so are
  empty lines at the end of either;
- the parts in MASKS below (wall-clock timings, measured resident memory, the scratch
  folder's path), which differ from run to run or machine to machine, are replaced by a
  placeholder on both sides before comparing; everything else must be produced
  deterministically by megaplan rather than masked;
- an elision line, "..." or "…" alone (optionally followed by a note in parentheses, as in
  "…  (one line per tensor)"), stands for zero or more lines left out. The lines before the
  first elision must be the first lines printed; the lines after the last one must be the
  last lines printed; the lines between two elisions must appear, consecutively, in that
  order, somewhere in between. Use it only where the docs really leave lines out.

A mismatch names the file and line of the first differing shown line, and shows the
expected (shown) and the printed line.

--update
--------
Rewrites each shown output with the printed one (file written to a temporary file beside it,
then renamed over it). A shown line that already matches (masks applied) is kept as it is,
so timings do not churn. Elisions are kept: the part before the first elision is replaced by
as many first printed lines, the part after the last by as many last printed lines, and each
part between two elisions by the printed lines where it fits best (most lines equal once
digits are ignored). Commands with no shown output stay as they are. A command whose exit
status is wrong is reported and its block left alone; the run then exits 1. The plots the
commands write under docs/img/ (`--plot docs/img/front.png`) replace the repository's copies
where their bytes differ, so the pictures the docs show are regenerated too.
"""
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import testlib  # noqa: E402

# What differs between two runs of the same command, or between machines: (why, the lines
# it applies to or None for all, pattern, replacement). Applied, in this order, to each shown
# and each printed line; the scratch folder's path is replaced as well (mask()).
MASKS = [
    ("wall-clock time of a search (\"searched ... in 0.97 s\")",
     re.compile(r"^searched "), re.compile(r"\bin \d+(?:\.\d+)? s\b"), "in <seconds> s"),
    ("wall-clock time of an exec step (\"step 1: loss ..., 0.0130 s\")",
     re.compile(r"^step \d+: loss "), re.compile(r"(?<=\), )\d+(?:\.\d+)? s$"), "<seconds> s"),
    ("exec's measured times of the last step (\"measured, last step, ...: forward 0.0024 s\")",
     re.compile(r"^measured, last step"), re.compile(r"\b\d+\.\d+ s\b"), "<seconds> s"),
    ("exec's measured peak resident memory (machine and MPI dependent)",
     None, re.compile(r"measured peak [\d.e+]+ MiB"), "measured peak <MiB> MiB"),
    ("the same in exec's JSON",
     None, re.compile(r"\"memory_peak_bytes\": \d+"), "\"memory_peak_bytes\": <bytes>"),
]

ELISION = re.compile(r"^(?:\.\.\.|…)(?:\s+\(.*\))?\s*$")
EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")


def mask(line, scratch=None):
    line = line.rstrip()
    if scratch:
        line = line.replace(scratch + os.sep, "").replace(scratch, "<scratch>")
    for _why, where, pat, repl in MASKS:
        if where is None or where.search(line):
            line = pat.sub(repl, line)
    return line


def strip_mpi_notices(lines):
    """The standard error without mpirun's own notices: the blocks Open MPI frames between
    two lines of dashes (a rank's non-zero exit, ...), whose wording depends on the MPI
    version and which name process ids and hosts."""
    kept, inside = [], False
    for line in lines:
        if re.match(r"^-{20,}\s*$", line):
            inside = not inside
            continue
        if not inside:
            kept.append(line)
    return kept


def shape(line):
    """A line with its numbers ignored: how --update places a part between elisions."""
    return re.sub(r"\d+(?:\.\d+)?", "0", line.rstrip())


def strip_end(lines):
    lines = [l.rstrip() for l in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


# ---- reading the docs ---------------------------------------------------------------

class Command:
    def __init__(self, path, lineno, text):
        self.path, self.lineno, self.text = path, lineno, text  # lineno: 1-based
        self.out = []        # shown output lines (without "\n")
        self.out_start = lineno  # 0-based index in the file of the first output line

    @property
    def runs(self):
        return " megaplan" in " " + self.text


def read_doc(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    commands = []
    in_console = False
    cur = None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            in_console = line.strip() == "```console"
            cur = None
            continue
        if not in_console:
            continue
        if line.startswith("$ "):
            cur = Command(path, i + 1, line[2:])
            cur.out_start = i + 1
            commands.append(cur)
        elif cur is not None:
            cur.out.append(line)
    return lines, commands


def doc_paths(root):
    docs = os.path.join(root, "docs")
    return [os.path.join(root, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


# ---- comparing ----------------------------------------------------------------------

def segments(shown):
    """Splits the shown lines at elisions: ([(offset in shown, lines)], whether any
    elision was found). The first part is the head, the last the tail."""
    segs, cur, start = [], [], 0
    elided = False
    for k, line in enumerate(shown):
        if ELISION.match(line):
            segs.append((start, cur))
            cur, start, elided = [], k + 1, True
        else:
            cur.append(line)
    segs.append((start, cur))
    return segs, elided


def compare(shown, got, scratch):
    """None when shown matches got; else (index in shown, expected, printed) of the first
    difference."""
    shown = strip_end(shown)
    got = strip_end(got)
    ms = [mask(l, scratch) for l in shown]
    mg = [mask(l, scratch) for l in got]
    segs, elided = segments(ms)
    if not elided:
        for k in range(max(len(ms), len(mg))):
            if k >= len(ms) or k >= len(mg) or ms[k] != mg[k]:
                return (k, shown[k] if k < len(shown) else "(nothing: the shown output ends here)",
                        got[k] if k < len(got) else "(nothing: the output ends here)")
        return None
    # anchored head
    head_off, head = segs[0]
    for k, line in enumerate(head):
        if k >= len(mg) or mg[k] != line:
            return (head_off + k, shown[head_off + k],
                    got[k] if k < len(got) else "(nothing: the output ends here)")
    lo = len(head)
    tail_off, tail = segs[-1]
    hi = len(mg) - len(tail)
    if hi < lo:
        return (tail_off, shown[tail_off] if tail else "…",
                f"(the output has {len(got)} lines, fewer than the shown head and tail)")
    for k, line in enumerate(tail):
        if mg[hi + k] != line:
            return (tail_off + k, shown[tail_off + k], got[hi + k])
    # the middle parts, in order, each consecutive (the earliest fit leaves the most room)
    for off, seg in segs[1:-1]:
        if not seg:
            continue
        at = next((p for p in range(lo, hi - len(seg) + 1) if mg[p:p + len(seg)] == seg), None)
        if at is None:
            best = place(seg, mg, lo, hi)
            k = 0
            if best is not None:
                k = next((j for j in range(len(seg)) if mg[best + j] != seg[j]), 0)
                return (off + k, shown[off + k], got[best + k])
            return (off, shown[off], "(no such lines between the parts around it)")
        lo = at + len(seg)
    return None


def place(seg, lines, lo, hi):
    """Where a part between elisions fits best in lines[lo:hi]: the most lines equal once
    numbers are ignored, ties to the most similar text; None when no line of it matches
    anywhere."""
    best, best_score = None, (0, 0.0)
    ss = [shape(l) for l in seg]
    sl = [shape(l) for l in lines]
    for p in range(lo, hi - len(seg) + 1):
        same = sum(1 for j in range(len(seg)) if sl[p + j] == ss[j])
        if not same:
            continue
        score = (same, sum(difflib.SequenceMatcher(None, seg[j], lines[p + j]).ratio()
                           for j in range(len(seg))))
        if score > best_score:
            best, best_score = p, score
    return best


def updated(shown, got, scratch):
    """The shown lines rewritten from the printed ones (module docstring, --update), or None
    when a part between elisions cannot be placed."""
    trailing = []
    while shown and not shown[-1].strip():
        trailing.append(shown.pop())
    got = strip_end(got)

    def keep(old, new):  # the shown line when it already matches, so timings do not churn
        return old if mask(old, scratch) == mask(new, scratch) else new

    def fresh(new):
        return new.replace(scratch + os.sep, "").rstrip() if scratch else new.rstrip()

    segs, elided = segments(shown)
    if not elided:
        out = [keep(shown[k], g) if k < len(shown) else g for k, g in enumerate(got)]
        return [fresh(l) for l in out] + trailing
    result = []
    head_off, head = segs[0]
    tail_off, tail = segs[-1]
    n_head = min(len(head), len(got))
    result += [keep(head[k], got[k]) for k in range(n_head)]
    lo = n_head
    hi = max(lo, len(got) - len(tail))
    mids = []
    for off, seg in segs[1:-1]:
        if not seg:
            mids.append([])
            continue
        p = place(seg, got, lo, hi)
        if p is None:
            return None
        mids.append([keep(seg[j], got[p + j]) for j in range(len(seg))])
        lo = p + len(seg)
    new_tail = [keep(tail[k], got[hi + k]) for k in range(len(got) - hi)] if tail else []
    # rebuild, keeping each elision line as written
    elisions = [l for l in shown if ELISION.match(l)]
    result = [fresh(l) for l in result]
    for k, mid in enumerate(mids):
        result.append(elisions[k])
        result += [fresh(l) for l in mid]
    result.append(elisions[-1])
    result += [fresh(l) for l in new_tail]
    return result + trailing


# ---- running ------------------------------------------------------------------------

def replace_file(path, data):
    """Writes path through a temporary file beside it, renamed over it."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".check_examples-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, (os.stat(path).st_mode if os.path.exists(path) else 0o644) & 0o777)
    os.replace(tmp, path)


def update_images(scratch, root, say):
    """--update: the plots the documented commands wrote under docs/img/ replace the
    repository's where their bytes differ."""
    made = os.path.join(scratch, "docs", "img")
    for name in sorted(os.listdir(made)):
        with open(os.path.join(made, name), "rb") as fh:
            data = fh.read()
        dest = os.path.join(root, "docs", "img", name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.exists(dest):
            with open(dest, "rb") as fh:
                if fh.read() == data:
                    continue
        replace_file(dest, data)
        say(f"rewrote docs/img/{name}")
    return 0


def run(megaplan, root, update=False, say=print):
    """Checks (or updates) every documented command under root; returns the number of
    failures."""
    root = os.path.abspath(root)
    docs = doc_paths(root)
    parsed = {p: read_doc(p) for p in docs}
    commands = [c for p in docs for c in parsed[p][1] if c.runs]
    if not commands:
        say("FAIL no commands found: the checker would check nothing")
        return 1
    failures = 0
    changed = {}  # path -> [(start, end, new lines)]
    scratch = tempfile.mkdtemp(prefix="megaplan-docs-")
    try:
        os.symlink(os.path.join(root, "examples"), os.path.join(scratch, "examples"))
        os.makedirs(os.path.join(scratch, "docs", "img"))
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        for c in commands:
            cmd, expect = c.text, 0
            m = EXIT.search(cmd)
            if m:
                expect = int(m.group(1))
                cmd = cmd[:m.start()]
            argv = [megaplan if a == "megaplan" else a for a in shlex.split(cmd, comments=True)]
            r = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True,
                               timeout=300)
            where = f"{os.path.relpath(c.path, root)}:{c.lineno}"
            if r.returncode != expect:
                failures += 1
                say(f"FAIL {where}: `{cmd.strip()}` exited {r.returncode}, expected {expect}")
                say(r.stderr.strip()[-2000:])
                continue
            out, err = r.stdout.split("\n"), strip_mpi_notices(r.stderr.split("\n"))
            if not strip_end(c.out):
                say(f"ok   {where}: {cmd.strip()} (exit status only: no output shown)")
                continue
            # either order of the two streams (module docstring): the one that matches, or
            # else the one that matches longer
            orders = [strip_end(out) + err, strip_end(err) + out]
            diffs = [compare(c.out, g, scratch) for g in orders]
            pick = 0 if diffs[0] is None or (diffs[1] is not None and
                                             diffs[0][0] >= diffs[1][0]) else 1
            got, diff = orders[pick], diffs[pick]
            if diff is None:
                say(f"ok   {where}: {cmd.strip()}")
                continue
            if update:
                new = updated(list(c.out), got, scratch)
                if new is None:
                    failures += 1
                    k, e, g = diff
                    say(f"FAIL {where}: cannot update: a part between elisions, from line "
                        f"{c.out_start + 1 + k}, matches no printed lines")
                    continue
                if compare(new, got, scratch) is not None:
                    failures += 1
                    say(f"FAIL {where}: --update could not make the shown output match "
                        f"(elisions placed wrongly?): fix the block by hand")
                    continue
                changed.setdefault(c.path, []).append((c.out_start, c.out_start + len(c.out),
                                                       new))
                say(f"upd  {where}: {cmd.strip()}")
                continue
            failures += 1
            k, e, g = diff
            line = c.out_start + 1 + k
            say(f"FAIL {os.path.relpath(c.path, root)}:{line}: the output of `{cmd.strip()}` "
                f"(line {c.lineno}) differs:\n  expected: {e}\n  got:      {g}\n"
                f"  (rerun with --update to rewrite it: tests/docs/check_examples.py)")
        if update:
            update_images(scratch, root, say)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for path, edits in changed.items():
        lines = parsed[path][0]
        for start, end, new in sorted(edits, reverse=True):
            lines[start:end] = new
        replace_file(path, "\n".join(lines).encode("utf-8"))
        say(f"rewrote {os.path.relpath(path, root)} ({len(edits)} blocks)")
    say(f"check_examples.py: {len(commands)} documented commands, {failures} failed"
        + (f", {sum(len(e) for e in changed.values())} outputs rewritten" if update else ""))
    return failures


# ---- self-test ----------------------------------------------------------------------

FAKE = r'''#!{python}
import sys
args = sys.argv[1:]
if args[:1] == ["fail"]:
    print("megaplan fail: no such thing", file=sys.stderr)
    sys.exit(2)
if args[:1] == ["plot"]:  # --plot PATH, as search and simulate write a picture
    open(args[3], "w").write("picture of " + args[1] + "\n")
    sys.exit(0)
if args[:1] == ["json"]:  # a report on stderr, the JSON on stdout, an mpirun notice
    print("searched 3 candidates in {seconds} s", file=sys.stderr)
    print("-" * 74 + "\nPrimary job terminated normally\n" + "-" * 74, file=sys.stderr)
    print('{{"ok": true}}')
    sys.exit(0)
print("megaplan " + args[0] + ": " + " ".join(args[1:]))
for k in range(1, 6):
    print(f"row {{k}}: step {{k * 1.5:.3f}} s")
print("searched 12 candidates in {seconds} s")
'''

GOOD = """# demo

```console
$ megaplan demo a
megaplan demo: a
row 1: step 1.500 s
row 2: step 3.000 s
row 3: step 4.500 s
row 4: step 6.000 s
row 5: step 7.500 s
searched 12 candidates in 0.31 s
$ megaplan demo b
megaplan demo: b
…
row 3: step 4.500 s
…  (the rest)
searched 12 candidates in 9.99 s
$ megaplan demo c
$ megaplan fail  # exit 2
megaplan fail: no such thing
$ megaplan plot new --plot docs/img/demo.png
$ megaplan json
searched 3 candidates in 0.5 s
{"ok": true}
```
"""


def self_test():
    checks = testlib.Checks('check_examples.py --self-test')
    tmp = tempfile.mkdtemp(prefix="megaplan-docs-selftest-")
    try:
        fake = os.path.join(tmp, "fake-megaplan")
        os.makedirs(os.path.join(tmp, "root", "docs"))
        os.makedirs(os.path.join(tmp, "root", "examples"))
        root = os.path.join(tmp, "root")
        readme = os.path.join(root, "README.md")
        with open(os.path.join(root, "docs", "other.md"), "w") as fh:
            fh.write("no console blocks here\n")

        def attempt(text, update=False, seconds="0.02"):
            with open(fake, "w") as fh:
                fh.write(FAKE.format(python=sys.executable, seconds=seconds))
            os.chmod(fake, 0o755)
            if text is not None:
                with open(readme, "w") as fh:
                    fh.write(text)
            said = []
            n = run(fake, root, update=update, say=said.append)
            return n, "\n".join(said)

        n, said = attempt(GOOD)
        checks.check(n == 0, f"the true README passes (timings masked):\n{said}")
        n, said = attempt(GOOD, seconds="123.45")
        checks.check(n == 0, f"a slower run passes too:\n{said}")

        stale = GOOD.replace("row 4: step 6.000 s", "row 4: step 6.100 s", 1)
        n, said = attempt(stale)
        checks.check(n == 1 and "README.md:9:" in said and "expected: row 4: step 6.100 s" in said
                     and "got:      row 4: step 6.000 s" in said,
                     f"a stale line fails, naming file, line, expected and got:\n{said}")
        checks.check(open(readme).read() == stale, "checking leaves the file alone")

        n, said = attempt(GOOD.replace("megaplan demo: a\n", "megaplan demo: a\nextra line\n"))
        checks.check(n == 1 and "README.md:6:" in said, f"an extra shown line fails:\n{said}")
        n, said = attempt(GOOD.replace("row 5: step 7.500 s\nsearched 12 candidates in 0.31 s\n",
                                       "row 5: step 7.500 s\n"))
        checks.check(n == 1, f"a missing last line fails:\n{said}")

        n, said = attempt(GOOD.replace("…\nrow 3: step 4.500 s", "…\nrow 3: step 4.400 s"))
        checks.check(n == 1 and "README.md:15:" in said,
                     f"a wrong line between elisions fails:\n{said}")
        n, said = attempt(GOOD.replace("…  (the rest)\nsearched 12 candidates in 9.99 s",
                                       "…  (the rest)\nsearched 13 candidates in 9.99 s"))
        checks.check(n == 1 and "README.md:17:" in said, f"a wrong tail after an elision fails:\n{said}")
        n, said = attempt(GOOD.replace("megaplan demo: b\n…", "megaplan demo: B\n…"))
        checks.check(n == 1 and "README.md:13:" in said, f"a wrong head before an elision fails:\n{said}")
        n, said = attempt(GOOD.replace("# exit 2", "# exit 0"))
        checks.check(n == 1 and "exited 2, expected 0" in said, f"a wrong exit status fails:\n{said}")

        # --update repairs the stale blocks, keeps elisions, masked timings and trailing prose
        broken = (GOOD.replace("row 4: step 6.000 s", "row 4: step 6.100 s")
                  .replace("…\nrow 3: step 4.500 s", "…\nrow 3: step 4.400 s")
                  .replace("searched 12 candidates in 9.99 s", "searched 11 candidates in 9.99 s")
                  + "\nprose after\n")
        n, said = attempt(broken, update=True)
        after = open(readme).read()
        checks.check(n == 0 and after == GOOD.replace("in 9.99 s", "in 0.02 s") + "\nprose after\n",
                     f"--update rewrites the stale lines only:\n{said}\n---\n{after}")
        n, said = attempt(None)
        checks.check(n == 0, f"after --update the check passes:\n{said}")
        img = os.path.join(root, "docs", "img", "demo.png")
        checks.check(os.path.exists(img) and open(img).read() == "picture of new\n",
                     "--update copies the plots the commands write under docs/img/")
        checks.check(not [f for f in os.listdir(root) if f.startswith(".check_examples-")],
                     "--update leaves no temporary file")
        n, said = attempt(GOOD.replace("# exit 2", "# exit 0"), update=True)
        checks.check(n == 1 and open(readme).read() == GOOD.replace("# exit 2", "# exit 0"),
                     f"--update fails on a wrong exit status and leaves that block:\n{said}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    checks.finish("the checker catches stale outputs and --update repairs them")


def main(argv):
    if argv[:1] == ["--self-test"]:
        self_test()
        return 0
    update = False
    if argv[:1] == ["--update"]:
        update, argv = True, argv[1:]
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    # meson passes ./megaplan; commands run elsewhere
    return 1 if run(os.path.abspath(argv[0]), argv[1], update=update) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
