#!/bin/sh
# Installs every Debian package megaplan's build, tests, plots and fuzz targets need.
# Runs apt-get directly as root (containers usually have no sudo) and through sudo
# otherwise. --list prints the packages; --dry-run prints the commands instead of running them.
set -eu

packages="build-essential meson ninja-build pkg-config python3
  libyaml-dev libcjson-dev libglpk-dev libcmocka-dev
  libopenblas-dev openmpi-bin libopenmpi-dev gnuplot-nox
  clang libclang-rt-dev
  zsh groff-base"

dry_run=0
case "${1:-}" in
  --list) echo $packages; exit 0 ;;
  --dry-run) dry_run=1 ;;
  "") ;;
  *) echo "usage: tools/install-deps.sh [--list | --dry-run]" >&2; exit 2 ;;
esac

if [ "$(id -u)" = 0 ]; then
  as_root=
elif command -v sudo >/dev/null 2>&1; then
  as_root=sudo
else
  echo "install-deps.sh: not root and no sudo; as root run: apt-get install" $packages >&2
  exit 1
fi

run() {
  if [ "$dry_run" = 1 ]; then echo "$*"; else "$@"; fi
}

# env, not export: sudo drops the caller's environment.
run $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
run $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages
