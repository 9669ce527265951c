#!/usr/bin/env bash
# make package-test: the .deb as a user gets it. A clean Debian 12 root (debootstrap --variant=minbase
# bookworm from Debian's archive, nothing else in it), `apt-get install ./clawvoice_*.deb` there with
# no recommends (so Depends alone must be enough), then inside it: clawvoice --version; doctor --json
# (parsed here: every check present, nothing failing for a missing library, model or voice; only
# the sound server, the gateway, the pairing and the daemon may fail in an empty root); wake detect
# on espeak-ng saying "computer" (heard) and on silence (nothing); say --local into a WAV; service
# install enabling the packaged unit. The bootstrapped root is kept as a tar in .build/package-test/
# (and apt's downloads beside it), so a rerun extracts it afresh onto a tmpfs; the whole run is in
# a mount namespace of its own (unshare -m) and its trap unmounts everything, so no mount outlives
# it. Needs root (debootstrap, chroot).
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "package-test: FAIL: needs root (debootstrap and chroot); run it with sudo" >&2; exit 1; }
# The whole run in a mount namespace of its own: the root lives on a tmpfs and every mount ends
# with this process, however it ends.
if [ -z "${CLAWVOICE_PACKAGE_TEST_NS:-}" ]; then
  exec env CLAWVOICE_PACKAGE_TEST_NS=1 unshare --mount --propagation private bash "$(readlink -f "$0")" "$@"
fi
cd "$(dirname "$0")/../.."
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
ok() { echo "package-test: ok: $*"; }
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 )) s"; }

version=$(sed -n 's/^ *public static let current = "\([^"]*\)".*/\1/p' Sources/NodeRuntime/Version.swift)
arch=$(dpkg --print-architecture)
deb="clawvoice_${version}_${arch}.deb"
[ -f "$deb" ] || fail "no $deb here: make deb builds it (make package-test runs it first)"
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache="$PWD/.build/package-test"
base="$cache/bookworm-minbase-$arch.tar"
mkdir -p "$cache/apt-archives/partial"

tmp=$(mktemp -d /tmp/cv-package.XXXXXX)
root="$tmp/root"
cleanup() {
  umount -R "$tmp" 2>/dev/null || umount -R -l "$tmp" 2>/dev/null || true
  # Delete only once nothing is mounted below: never through a bind mount of /dev.
  if findmnt -rn -o TARGET | grep -q "^$tmp"; then
    echo "package-test: still mounted under $tmp, not removing it:" >&2; findmnt -rn -o TARGET | grep "^$tmp" >&2
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
mount -t tmpfs -o size=4g,mode=0755 cv-package "$tmp"

if [ ! -f "$base" ]; then
  echo "package-test: debootstrap --variant=minbase bookworm $mirror (once; kept in $base)"
  debootstrap --variant=minbase bookworm "$tmp/base" "$mirror" >"$tmp/debootstrap.log" 2>&1 \
    || { tail -20 "$tmp/debootstrap.log" >&2; fail "debootstrap (log above)"; }
  tar -C "$tmp/base" -cf "$base.part" . && mv "$base.part" "$base"
  rm -rf "$tmp/base"
  echo "package-test: bootstrapped at $(elapsed)"
fi
mkdir "$root"
tar -C "$root" -xf "$base"
[ ! -e "$root/usr/bin/clawvoice" ] && [ ! -e "$root/opt/swift" ] || fail "the cached root is not clean: rm $base"
ok "a clean Debian 12 minbase root ($(du -sh "$root" | cut -f1)) at $(elapsed)"

# What a user would have: the release and its updates; no service starts in a chroot.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"; chmod 0755 "$root/usr/sbin/policy-rc.d"
# No fsync per file while unpacking (a throw-away root): the same files, installed faster.
echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/unsafe-io"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/tmp/pkg" "$root/tmp/out"
cp "$deb" "$root/tmp/pkg/"
# The WAVs come from the host: espeak-ng saying the trigger, and 2 s of silence (sox would do too).
espeak-ng -w "$root/tmp/pkg/computer.wav" "computer"
python3 - "$root/tmp/pkg/silence.wav" <<'PY'
import sys, wave
w = wave.open(sys.argv[1], "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
w.writeframes(b"\0\0" * 32000); w.close()
PY

# Inside the root: install, then each command's output and exit status into /tmp/out.
cat >"$root/tmp/pkg/inside.sh" <<'SH'
set -u
cd /tmp/pkg
t0=$(date +%s)
export DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin
run() { local name=$1; shift; "$@" >"/tmp/out/$name.out" 2>"/tmp/out/$name.err"; echo $? >"/tmp/out/$name.rc"; }
apt-get update -q >/tmp/out/apt.log 2>&1 || { echo "apt-get update failed"; tail -5 /tmp/out/apt.log; exit 1; }
echo "package-test: apt-get update done at $(( $(date +%s) - t0 )) s"
apt-get install -y -q --no-install-recommends ./clawvoice_*.deb >>/tmp/out/apt.log 2>&1 || { echo "apt-get install failed"; tail -20 /tmp/out/apt.log; exit 1; }
echo "package-test: apt-get install done at $(( $(date +%s) - t0 )) s"
dpkg-query -W -f='${Package}\n' >/tmp/out/installed
run ldd ldd /usr/bin/clawvoice
run version clawvoice --version
run doctor timeout 60 clawvoice doctor --json --seconds 1
run wake timeout 60 clawvoice wake detect --input /tmp/pkg/computer.wav
run silence timeout 60 clawvoice wake detect --input /tmp/pkg/silence.wav
run say timeout 60 clawvoice say "Hello from the package" --local --out /tmp/out/hello.wav
mkdir -p /tmp/fakebin
printf '#!/bin/sh\necho "$*" >>/tmp/out/systemctl.log\n' >/tmp/fakebin/systemctl; chmod 0755 /tmp/fakebin/systemctl
PATH=/tmp/fakebin:$PATH run service clawvoice service install
find /opt /usr/lib/swift -mindepth 1 -maxdepth 1 2>/dev/null >/tmp/out/toolchain
find / -xdev \( -name 'libswift*' -o -name 'swift-frontend' -o -name 'libFoundation*.so' \) 2>/dev/null >>/tmp/out/toolchain
exit 0
SH

echo "package-test: apt-get install ./$deb in the root (apt's downloads kept in $cache/apt-archives)"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t sysfs sysfs "$root/sys"
mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
chroot "$root" /bin/bash /tmp/pkg/inside.sh || fail "inside the root (above)"
for m in var/cache/apt/archives sys dev proc; do umount "$root/$m"; done
o="$root/tmp/out"
ok "apt-get install ./$deb: $(wc -l <"$o/installed") packages in the root at $(elapsed)"

# Depends alone were enough, and they are what a user expects.
for p in clawvoice espeak-ng-data ca-certificates; do grep -qx "$p" "$o/installed" || fail "$p is not installed"; done
grep -qxE 'pulseaudio|pipewire-pulse' "$o/installed" || fail "no sound server was pulled in"
bad=$(grep -E -- '-dev$|^swift|^gcc(-[0-9]+)?$|^cpp(-[0-9]+)?$|^g\+\+|^clang|^binutils$|^make$|^python3|^ffmpeg|^sox$|^flite$|^lintian$' "$o/installed" || true)
[ -z "$bad" ] || fail "the package pulled in build or test tools: $(echo $bad)"
[ ! -s "$o/toolchain" ] || fail "the root has toolchain files: $(head -3 "$o/toolchain")"
grep -qE 'not found|/opt/swift|libswift' "$o/ldd.out" && fail "ldd /usr/bin/clawvoice: $(grep -E 'not found|swift' "$o/ldd.out")"
ok "Depends alone install it: no compiler, -dev package, test tool or Swift toolchain in the root"

[ "$(cat "$o/version.rc")" = 0 ] && [ "$(cat "$o/version.out")" = "clawvoice $version" ] \
  || fail "clawvoice --version: '$(cat "$o/version.out" "$o/version.err")' (want 'clawvoice $version')"
ok "clawvoice --version: $(cat "$o/version.out")"

python3 - "$o/doctor.out" "$o/doctor.err" "$(cat "$o/doctor.rc")" <<'PY' || fail "clawvoice doctor --json (above)"
import json, sys
out, err, rc = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3])
try:
    d = json.loads(out)
except ValueError as e:
    sys.exit(f"not JSON ({e}): {out[:300]!r} stderr {err[:300]!r}")
checks = {c["id"]: c for c in d["checks"]}
for c in d["checks"]:
    print(f"package-test:   doctor {'ok  ' if c['ok'] else 'fail'} {c['id']}: {c['line']}")
want = {"sound-server", "espeak-voice", "wake-models", "gateway", "daemon", "disk"}
if not want <= checks.keys(): sys.exit(f"checks missing: {sorted(want - checks.keys())}")
for must in ("espeak-voice", "wake-models", "disk"):
    if not checks[must]["ok"]: sys.exit(f"{must} fails in the installed package: {checks[must]['line']}")
if "/usr/share/clawvoice/models" not in checks["wake-models"]["line"]:
    sys.exit(f"models not found where the package puts them: {checks['wake-models']['line']}")
# With no sound server running and nothing paired, only these may fail, and never for a library.
may_fail = {"sound-server", "mic-level", "speaker-tone", "gateway", "tls", "clock", "daemon"}
for c in d["checks"]:
    text = (c["line"] + " " + (c.get("fix") or "")).lower()
    if any(s in text for s in ("shared object", "error while loading", "no such file or directory: /usr/share/clawvoice")):
        sys.exit(f"{c['id']} fails for a missing file: {c['line']}")
    if not c["ok"] and c["id"] not in may_fail and not c["id"].startswith("pairing-"):
        sys.exit(f"{c['id']} fails: {c['line']}")
if rc != 1 or d["ok"]: sys.exit(f"doctor should fail (no gateway) with exit 1, got {rc}, ok={d['ok']}")
if "error while loading" in err: sys.exit(err)
PY
ok "clawvoice doctor --json: parses, every check there; voice, wake models and disk pass; only sound/gateway/daemon fail"

[ "$(cat "$o/wake.rc")" = 0 ] || fail "wake detect exited $(cat "$o/wake.rc"): $(cat "$o/wake.err")"
[ ! -s "$o/wake.err" ] || fail "wake detect said on stderr: $(cat "$o/wake.err")"
python3 - "$o/wake.out" <<'PY' || fail "wake detect on espeak-ng's \"computer\": $(cat "$o/wake.out")"
import json, sys
hits = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
if not any(h["phrase"] == "computer" and h["score"] >= 0.5 for h in hits): sys.exit("no detection of computer")
PY
ok "wake detect hears \"computer\": $(head -1 "$o/wake.out")"
[ "$(cat "$o/silence.rc")" = 0 ] && [ ! -s "$o/silence.out" ] && [ ! -s "$o/silence.err" ] \
  || fail "wake detect on silence: rc $(cat "$o/silence.rc"), '$(cat "$o/silence.out" "$o/silence.err")'"
ok "wake detect on 2 s of silence: nothing"

[ "$(cat "$o/say.rc")" = 0 ] || fail "say --local: $(cat "$o/say.err")"
python3 - "$o/hello.wav" <<'PY' || fail "say --local wrote no speech"
import sys, wave
w = wave.open(sys.argv[1]); n = w.getnframes() / w.getframerate()
if n < 0.5: sys.exit(f"{n:.2f} s of audio")
PY
ok "say --local speaks with the packaged espeak-ng data: $(cat "$o/say.out")"

[ "$(cat "$o/service.rc")" = 0 ] || fail "service install: $(cat "$o/service.out" "$o/service.err")"
grep -q "unit: /usr/lib/systemd/user/clawvoice.service" "$o/service.out" \
  || fail "service install did not use the packaged unit: $(cat "$o/service.out")"
grep -qx -- "--user enable --now clawvoice.service" "$o/systemctl.log" || fail "systemctl: $(cat "$o/systemctl.log")"
[ ! -e "$root/root/.config/systemd/user/clawvoice.service" ] || fail "service install wrote its own unit beside the packaged one"
ok "service install enables the packaged /usr/lib/systemd/user/clawvoice.service"

echo "package-test: passed in $(elapsed)"
