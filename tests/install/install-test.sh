#!/usr/bin/env bash
# make install into a temp PREFIX, then: the layout; the installed binary (also through a symlink,
# from another directory, with no CLAWVOICE_MODELS_DIR) loads every shipped wake model, and
# wake.modelsDirectory overrides that; systemd-analyze verify accepts the installed unit and the
# unit `service install` writes for a binary without one; `service install|uninstall|status` run
# the right `systemctl --user` commands (a recording systemctl on PATH: this container has no
# systemd user manager); make uninstall leaves no file behind.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/cv-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
fail() { echo "install-test: FAIL: $*" >&2; exit 1; }
ok() { echo "install-test: ok: $*"; }

make --no-print-directory install PREFIX="$prefix" INSTALL_BUILD="${INSTALL_BUILD:-debug}" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install"; }
for f in bin/clawvoice share/clawvoice/models/openclaw.json share/clawvoice/models/openclaw.bin share/clawvoice/models/claude.json \
         share/clawvoice/models/computer.bin share/clawvoice/config.example.json5 share/systemd/user/clawvoice.service; do
  [ -f "$prefix/$f" ] || fail "missing $prefix/$f"
done
[ -x "$prefix/bin/clawvoice" ] || fail "binary not executable"
grep -qx "ExecStart=$prefix/bin/clawvoice run" "$prefix/share/systemd/user/clawvoice.service" || fail "unit ExecStart does not name the installed binary"
ok "layout"

# A clean environment: no CLAWVOICE_MODELS_DIR, cwd outside the checkout.
mkdir -p "$tmp/home" "$tmp/elsewhere" "$tmp/run" "$tmp/empty-models"; chmod 700 "$tmp/run"
sox -n -r 16000 -b 16 -c 1 "$tmp/silence.wav" trim 0 0.5
ln -s "$prefix/bin/clawvoice" "$tmp/elsewhere/clawvoice"
E=(env -i PATH="$tmp/fakebin:/usr/bin:/bin" HOME="$tmp/home" LANG=C.UTF-8 XDG_RUNTIME_DIR="$tmp/run")
for exe in "$prefix/bin/clawvoice" "$tmp/elsewhere/clawvoice"; do
  (cd "$tmp/elsewhere" && "${E[@]}" "$exe" wake detect --input "$tmp/silence.wav" >"$tmp/out" 2>"$tmp/err") || { cat "$tmp/err"; fail "$exe wake detect"; }
  [ ! -s "$tmp/err" ] || { cat "$tmp/err"; fail "$exe did not find every model"; }
done
ok "the installed binary finds its three models (directly and through a symlink)"
printf '{ wake: { modelsDirectory: "%s" } }\n' "$tmp/empty-models" >"$tmp/override.json5"
if (cd "$tmp/elsewhere" && "${E[@]}" "$prefix/bin/clawvoice" --config "$tmp/override.json5" wake detect --input "$tmp/silence.wav" >/dev/null 2>"$tmp/err"); then
  fail "wake.modelsDirectory did not override the installed models"
fi
grep -q "$tmp/empty-models" "$tmp/err" || { cat "$tmp/err"; fail "override error does not name the directory"; }
ok "wake.modelsDirectory overrides"

(cd "$tmp" && "${E[@]}" systemd-analyze verify --user "$prefix/share/systemd/user/clawvoice.service") || fail "systemd-analyze verify (installed unit)"
ok "systemd-analyze verify --user accepts the installed unit"

# service install|status|uninstall through a systemctl that records its arguments.
mkdir -p "$tmp/fakebin"
cat >"$tmp/fakebin/systemctl" <<SH
#!/bin/sh
echo "\$*" >>"$tmp/systemctl.log"
case "\$2" in is-enabled) echo enabled;; is-active) echo active;; esac
SH
chmod +x "$tmp/fakebin/systemctl"
"${E[@]}" "$prefix/bin/clawvoice" service install >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "service install"; }
grep -qx -- "--user daemon-reload" "$tmp/systemctl.log" || fail "no daemon-reload"
grep -qx -- "--user enable --now $prefix/share/systemd/user/clawvoice.service" "$tmp/systemctl.log" || { cat "$tmp/systemctl.log"; fail "enable --now of the installed unit"; }
grep -q "loginctl enable-linger" "$tmp/out" || { cat "$tmp/out"; fail "no enable-linger line"; }
grep -q "not paired yet" "$tmp/out" || fail "no pairing note"
"${E[@]}" "$prefix/bin/clawvoice" service status >"$tmp/out" 2>&1 || fail "service status"
grep -q "clawvoice.service: enabled, active" "$tmp/out" || { cat "$tmp/out"; fail "status line"; }
"${E[@]}" "$prefix/bin/clawvoice" service uninstall >/dev/null 2>&1 || fail "service uninstall"
grep -qx -- "--user disable --now clawvoice.service" "$tmp/systemctl.log" || fail "disable --now"
ok "service install|status|uninstall"

# A copied binary with no unit beside it: service install writes one for itself.
mkdir -p "$tmp/copy/bin"; cp "$prefix/bin/clawvoice" "$tmp/copy/bin/"
"${E[@]}" "$tmp/copy/bin/clawvoice" service install >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "service install (copied binary)"; }
own="$tmp/home/.config/systemd/user/clawvoice.service"
grep -qx "ExecStart=$tmp/copy/bin/clawvoice run" "$own" || fail "written unit does not run the copied binary"
(cd "$tmp" && "${E[@]}" systemd-analyze verify --user "$own") || fail "systemd-analyze verify (written unit)"
grep -qx -- "--user enable --now clawvoice.service" "$tmp/systemctl.log" || fail "enable --now clawvoice.service"
"${E[@]}" "$tmp/copy/bin/clawvoice" service uninstall >/dev/null 2>&1 || fail "service uninstall (copied binary)"
[ ! -e "$own" ] || fail "service uninstall left its unit"
ok "a binary without a unit writes, verifies and removes its own"

make --no-print-directory uninstall PREFIX="$prefix" >/dev/null
left=$(find "$prefix" -type f 2>/dev/null | head -5)
[ -z "$left" ] || fail "make uninstall left: $left"
ok "make uninstall removes every installed file"
