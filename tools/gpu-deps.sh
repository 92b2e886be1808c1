#!/usr/bin/env bash
# tools/gpu-deps.sh — run where apt works (this project's Debian machines):
# downloads the Debian packages that tools/gpu-check.sh unpacks on a GPU
# machine lacking them (Open MPI, OpenBLAS, libyaml, cJSON, GLPK, cmocka,
# pkgconf, with their libraries) into .gpu/debs (ignored by git; the device
# tool carries it: `run` with carry [".gpu"]). About 36 MB.
#
# The list is the closure of their dependencies as installed here, less what
# every Linux system has (libc, libstdc++, zlib, ...): unpacking those into a
# folder on LD_LIBRARY_PATH would shadow the machine's own.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.gpu/debs
wanted=(pkgconf libyaml-dev libcjson-dev libglpk-dev libcmocka-dev libopenblas-dev
        openmpi-bin libopenmpi-dev)
mkdir -p "$dest"
python3 - "${wanted[@]}" >"$dest/.list" <<'PY'
import re, subprocess, sys

def depends(pkg):
    """Depends + Pre-Depends of an installed package, or None."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}#${Depends}#${Pre-Depends}", pkg],
                       capture_output=True, text=True)
    if r.returncode or " installed" not in r.stdout.split("#")[0]:
        return None
    _, dep, pre = r.stdout.split("#")
    return ", ".join(x for x in (dep, pre) if x)

base = re.compile(
    r"^(libc6|libc6-dev|libc-dev-bin|linux-libc-dev|libcrypt.*|libgcc-s1|libstdc\+\+6|gcc.*|"
    r"g\+\+.*|cpp.*|binutils.*|zlib1g|debconf|dpkg|perl.*|libperl.*|python3.*|adduser|"
    r"debianutils|sensible-utils|libselinux1|libpcre2.*|liblzma5|libzstd1|libbz2.*|libsystemd0|"
    r"libudev1|libcap2|libgcrypt20|libgpg-error0|liblz4-1|libtinfo6|libssl3|libdb5.3|libexpat1|"
    r"libffi8|libgmp10|libuuid1|libnsl.*|libtirpc.*|rpcsvc-proto|libkrb5.*|libk5crypto3|"
    r"libgssapi-krb5-2|libcom-err2|libkeyutils1|openssh-client|libedit2|libbsd0|libmd0|"
    r"libfido2-1|libcbor.*|libsqlite3-0|gfortran.*|libgfortran-.*-dev|libicu.*|libxml2|"
    r"libjs-.*|libx11-.*|libxcb1|libxau6|libxdmcp6|libxext6|m4|autoconf|automake|"
    r"autotools-dev|libltdl-dev|libtool)$")
todo, seen, out = list(sys.argv[1:]), set(), []
while todo:
    p = todo.pop()
    if p in seen or base.match(p):
        continue
    seen.add(p)
    d = depends(p)
    if d is None:
        sys.exit(f"gpu-deps.sh: {p} is not installed here (apt-get install it first)")
    out.append(p)
    for alt in filter(None, (a.strip() for a in d.split(","))):
        for a in alt.split("|"):
            name = a.strip().split(" ")[0].split(":")[0]
            if depends(name) is not None:
                todo.append(name)
                break
print("\n".join(sorted(out)))
PY
cd "$dest"
rm -f ./*.deb
# shellcheck disable=SC2046 # one package name per word
apt-get -o APT::Sandbox::User=root download $(cat .list) >/dev/null
echo "gpu-deps.sh: $(find . -name '*.deb' | wc -l) packages, $(du -sh . | cut -f1) in $dest"
