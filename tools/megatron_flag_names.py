#!/usr/bin/env python3
"""megatron_flag_names.py — the command-line flags Megatron-LM's parser knows,
read from its source without importing it (no PyTorch needed).

    python3 tools/megatron_flag_names.py MEGATRON_LM_GIT_DIR_OR_CHECKOUT [COMMIT]

Prints one flag per line: every '--name' literal of
megatron/training/arguments.py, and the flags its ArgumentGroupFactory makes
from its config dataclasses (TransformerConfig and its base
ModelParallelConfig, TrainingConfig, TokenizerConfig, ...: '--' + the
field name with '-' for '_', or the field's argparse_meta arg_names; a bool
field that defaults to True also as '--no-...'). Over-inclusive by design
(excluded fields are listed too): the test built on it
(tests/planner/megatron_flag_names.sh) catches a misspelt or renamed flag,
while tools/megatron-check.sh runs the real parser.
"""
import os
import re
import subprocess
import sys


def read(root, commit, path):
    if os.path.isdir(os.path.join(root, "megatron")):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            return f.read()
    return subprocess.run(["git", "--git-dir", root, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def dataclass_flags(src, classes):
    flags = set()
    current = None
    lines = src.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"class (\w+)\b", line)
        if m:
            current = m.group(1)
            continue
        if current not in classes:
            continue
        m = re.match(r"    (\w+): [^=]+?(?:= (.*))?$", line)
        if not m or m.group(1).startswith("_"):
            continue
        name, default = m.group(1), (m.group(2) or "")
        block = "\n".join(lines[i:i + 4])
        names = re.search(r'"arg_names":\s*\[([^\]]*)\]', block)
        if names and "field(" in block.split("\n\n")[0]:
            flags.update(re.findall(r'"(--[\w-]+)"', names.group(1)))
            continue
        flags.add("--" + name.replace("_", "-"))
        if default.strip() == "True":
            flags.add("--no-" + name.replace("_", "-"))
    return flags


def class_files(root, commit, name):
    """The files that define class name (git grep or grep -r)."""
    if os.path.isdir(os.path.join(root, "megatron")):
        out = subprocess.run(["grep", "-rlE", f"^class {name}\\b", "megatron"], cwd=root,
                             capture_output=True, text=True).stdout
        return out.split()
    out = subprocess.run(["git", "--git-dir", root, "grep", "-lE", f"^class {name}\\b", commit,
                          "--", "megatron"], capture_output=True, text=True).stdout
    return [l.split(":", 1)[1] for l in out.split()]


def main():
    root = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    args = read(root, commit, "megatron/training/arguments.py")
    flags = set(re.findall(r"['\"](--[a-z0-9][\w-]*)['\"]", args))
    # the dataclasses its ArgumentGroupFactory turns into flags, and
    # TransformerConfig's base ModelParallelConfig
    classes = set(re.findall(r"ArgumentGroupFactory\((\w+)", args)) | {"ModelParallelConfig"}
    for name in sorted(classes):
        for path in class_files(root, commit, name):
            flags |= dataclass_flags(read(root, commit, path), {name})
    for f in sorted(flags):
        print(f)


if __name__ == "__main__":
    main()
