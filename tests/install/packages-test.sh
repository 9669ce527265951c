#!/usr/bin/env bash
# The Makefile's Debian package lists: `make install` (and build, release) install only the
# runtime and build lists; no test tool, test server or Python tooling is among them, and the
# runtime list holds no -dev package. `make test` still checks its whole list.
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "packages-test: FAIL: $*" >&2; exit 1; }
ok() { echo "packages-test: ok: $*"; }

runtime=$(make -s --no-print-directory print-APT_RUNTIME)
build=$(make -s --no-print-directory print-APT_BUILD)
testing=$(make -s --no-print-directory print-APT_TEST)
[ -n "$runtime" ] && [ -n "$build" ] && [ -n "$testing" ] || fail "a package list is empty (runtime '$runtime', build '$build', test '$testing')"

# What make install, build and release check for: the first recipe line of `make -n`.
for target in install build release; do
  line=$(make -n --no-print-directory "$target" PREFIX=/nonexistent 2>/dev/null | grep -m1 'for p in' || true)
  [ -n "$line" ] || fail "make -n $target shows no package check"
  for p in ffmpeg flite sox python3-pip python3-venv pulseaudio pulseaudio-utils opus-tools alsa-utils avahi-daemon avahi-utils \
           dbus-daemon espeak-ng lintian debootstrap; do
    grep -qE "(^| )$p( |;)" <<<"$line" && fail "make $target would install the test tool $p"
  done
  for p in $build; do grep -qE "(^| )$p( |;)" <<<"$line" || fail "make $target does not check the build package $p"; done
done
ok "make install, build and release check only the runtime and build packages"

for p in $runtime; do case "$p" in *-dev) fail "runtime list holds the -dev package $p";; esac; done
ok "no -dev package in the runtime list"

line=$(make -n --no-print-directory deps | grep -m1 'for p in')
for p in $runtime $build $testing; do grep -qE "(^| )$p( |;)" <<<"$line" || fail "make deps (make test) does not check $p"; done
ok "make deps (make test) checks all three lists"
