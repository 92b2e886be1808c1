#!/bin/sh
# tools/install-deps.sh works for root without sudo (containers), for a user with sudo,
# and says what to do for a user without it; the README's first command and .ci/run
# both go through it (the README once began with `sudo`, which fails where there is none).
# Usage: run_install_deps.sh SOURCE_ROOT
set -u
. "$(dirname "$0")/../lib.sh"
root=$1
script=$root/tools/install-deps.sh

# A PATH holding only sh and a fake `id` (and, when asked, a fake sudo).
fake_path() { # uid, with_sudo
  dir=$T/bin-$1-$2
  mkdir -p "$dir"
  ln -sf "$(command -v sh)" "$dir/sh"
  printf '#!/bin/sh\necho %s\n' "$1" > "$dir/id"
  chmod +x "$dir/id"
  if [ "$2" = yes ]; then printf '#!/bin/sh\nexit 0\n' > "$dir/sudo"; chmod +x "$dir/sudo"; fi
  echo "$dir"
}

out=$(PATH=$(fake_path 0 no) sh "$script" --dry-run 2>&1); rc=$?
succeeds "root without sudo runs apt-get directly" [ $rc = 0 ]
succeeds "root: no sudo in the commands" sh -c "! printf '%s' \"\$1\" | grep -q sudo" _ "$out"
succeeds "root: apt-get install is run" sh -c "printf '%s' \"\$1\" | grep -q '^env DEBIAN_FRONTEND=noninteractive apt-get install'" _ "$out"

out=$(PATH=$(fake_path 1000 yes) sh "$script" --dry-run 2>&1); rc=$?
succeeds "user with sudo goes through sudo" sh -c "[ $rc = 0 ] && printf '%s\n' \"\$1\" | grep -q '^sudo env DEBIAN_FRONTEND=noninteractive apt-get update'" _ "$out"

out=$(PATH=$(fake_path 1000 no) sh "$script" --dry-run 2>&1); rc=$?
succeeds "user without sudo: exit 1 with the command to run" sh -c "[ $rc = 1 ] && printf '%s' \"\$1\" | grep -q 'not root and no sudo'" _ "$out"

# Every library meson.build asks for is in the list.
list=$(sh "$script" --list)
for pkg in libyaml-dev libcjson-dev libglpk-dev libcmocka-dev libopenblas-dev libopenmpi-dev meson ninja-build clang libclang-rt-dev; do
  succeeds "package list has $pkg" sh -c "printf ' %s ' \"\$1\" | grep -q ' $pkg '" _ "$list"
done

first=$(awk '/^```sh$/ {getline; print; exit}' "$root/README.md")
succeeds "README's first command starts with tools/install-deps.sh" sh -c "case \"\$1\" in tools/install-deps.sh*) exit 0;; *) exit 1;; esac" _ "$first"
succeeds "README's first command has no sudo" sh -c "! printf '%s' \"\$1\" | grep -q sudo" _ "$first"
succeeds "README's first command runs build/megaplan" sh -c "printf '%s' \"\$1\" | grep -q 'build/megaplan '" _ "$first"
succeeds "README says how megaplan gets on PATH" grep -q 'meson install' "$root/README.md"
succeeds ".ci/run calls tools/install-deps.sh" grep -q '^tools/install-deps.sh' "$root/.ci/run"
succeeds ".ci/run has no apt-get of its own" sh -c "! grep -q 'apt-get' \"\$1\"" _ "$root/.ci/run"
finish
