#!/usr/bin/env bash
# make deb: clawvoice_<version>_<arch>.deb in the checkout's top directory, with dpkg-deb.
# The release binary is linked with --static-swift-stdlib (the Swift runtime and Foundation inside
# it), so the package needs no toolchain; this script fails if it still names a libswift*,
# Foundation or /opt/swift. Depends: the Debian libraries it links, from packaging/runtime-depends,
# which must equal what dpkg-shlibdeps derives from the binary (`make deb-depends` rewrites it),
# and the servers it uses (packaging/control.in). The version is ClawvoiceVersion.current, the one
# `clawvoice --version` prints. Then lintian; packaging/lintian-overrides holds each tag left, and
# docs/packaging.md says why.
#   packaging/build-deb.sh                   build the package
#   packaging/build-deb.sh --update-depends  build the binary, rewrite packaging/runtime-depends
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "make deb: $*" >&2; exit 1; }

version=$(sed -n 's/^ *public static let current = "\([^"]*\)".*/\1/p' Sources/NodeRuntime/Version.swift)
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || fail "no version in Sources/NodeRuntime/Version.swift (ClawvoiceVersion.current), got '$version'"
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-clawvoice developers <clawvoice@users.noreply.github.com>}
deb="clawvoice_${version}_${arch}.deb"
out=.build/deb
root="$out/root"

# The release binary with the Swift runtime linked in. SWIFT_FLAGS passes through (a cross --triple).
# shellcheck disable=SC2086
swift build -c release --static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now --product clawvoice ${SWIFT_FLAGS:-}
# shellcheck disable=SC2086
bin="$(swift build -c release --static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now ${SWIFT_FLAGS:-} --show-bin-path)/clawvoice"
[ -x "$bin" ] || fail "no binary at $bin"

# Nothing from the toolchain may be needed at run time.
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
paths=$(readelf -d "$bin" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p')
bad=$(grep -E 'swift|Foundation|dispatch|BlocksRuntime' <<<"$needed" || true)
[ -z "$bad" ] || fail "the binary still needs toolchain libraries: $(echo $bad) (build with --static-swift-stdlib)"
grep -qE 'swift|/opt/' <<<"$paths" && fail "the binary has a run path into the toolchain: $paths"
ldd "$bin" | grep -qE 'not found|/opt/swift|libswift' && { ldd "$bin"; fail "ldd: the binary needs something outside Debian"; }

rm -rf "$out"
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/clawvoice/models" "$root/usr/lib/systemd/user" \
  "$root/usr/share/doc/clawvoice/examples" "$root/usr/share/man/man1"
install -m 0755 "$bin" "$root/usr/bin/clawvoice"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/clawvoice"
install -m 0644 models/*.json models/*.bin "$root/usr/share/clawvoice/models/"
install -m 0644 config/clawvoice.json5 "$root/usr/share/doc/clawvoice/examples/config.json5"
install -m 0644 README.md "$root/usr/share/doc/clawvoice/README.md"
install -m 0644 packaging/copyright "$root/usr/share/doc/clawvoice/copyright"
sed -e 's|^ExecStart=%h/.local/bin/clawvoice |ExecStart=/usr/bin/clawvoice |' \
    -e 's|^Description=.*|&\nDocumentation=man:clawvoice(1)|' config/clawvoice.service >"$root/usr/lib/systemd/user/clawvoice.service"
chmod 0644 "$root/usr/lib/systemd/user/clawvoice.service"
grep -qx 'ExecStart=/usr/bin/clawvoice run' "$root/usr/lib/systemd/user/clawvoice.service" || fail "the unit's ExecStart was not rewritten"

# The Debian libraries it links, derived by dpkg-shlibdeps (it wants a debian/control to read).
shl="$out/shlibdeps"
mkdir -p "$shl/debian"
printf 'Source: clawvoice\n\nPackage: clawvoice\nArchitecture: any\n' >"$shl/debian/control"
derived=$(cd "$shl" && dpkg-shlibdeps -O "$OLDPWD/$root/usr/bin/clawvoice" 2>"$OLDPWD/$out/shlibdeps.log" | sed -n 's/^shlibs:Depends=//p' \
  | tr ',' '\n' | sed 's/^ *//;s/ *$//' | sort)
[ -n "$derived" ] || { cat "$out/shlibdeps.log" >&2; fail "dpkg-shlibdeps derived nothing"; }
if [ "${1:-}" = --update-depends ]; then
  { echo "# The Debian runtime libraries /usr/bin/clawvoice links (dpkg-shlibdeps on the release binary, Debian 12 $arch)."
    echo "# Written by \`make deb-depends\`; \`make deb\` fails when the binary needs a different list."
    echo "$derived"; } >packaging/runtime-depends
  echo "make deb-depends: packaging/runtime-depends has $(wc -l <<<"$derived") libraries"
  exit 0
fi
kept=$(grep -v '^#' packaging/runtime-depends | sed '/^$/d' | sort)
if [ "$kept" != "$derived" ]; then
  diff <(echo "$kept") <(echo "$derived") >&2 || true
  fail "packaging/runtime-depends (<) differs from what the binary links (>); check the change and run make deb-depends"
fi
grep -E -- '-dev( |$)' <<<"$kept" && fail "a -dev package in packaging/runtime-depends"

# The man page: the binary's own --help, so it is never out of date.
{
  echo ".TH CLAWVOICE 1 \"\" \"clawvoice $version\" \"User Commands\""
  echo ".SH NAME"
  echo "clawvoice \\- voice node for OpenClaw gateways"
  echo ".SH SYNOPSIS"
  echo ".B clawvoice"
  echo "\\fIcommand\\fR [\\fIoptions\\fR]"
  echo ".SH DESCRIPTION"
  echo ".nf"
  "$root/usr/bin/clawvoice" --help | sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
  echo ".fi"
  echo ".SH FILES"
  echo ".TP"
  echo ".I /usr/share/clawvoice/models"
  echo "the wake-word, stop-word and voice-detector models"
  echo ".TP"
  echo ".I /usr/share/doc/clawvoice/examples/config.json5"
  echo "every configuration key with its default; copy it to ~/.config/clawvoice/config.json5"
  echo ".TP"
  echo ".I /usr/lib/systemd/user/clawvoice.service"
  echo "the user unit that \\fBclawvoice service install\\fR enables"
  echo ".SH SEE ALSO"
  echo "/usr/share/doc/clawvoice/README.md"
} | gzip -9n >"$root/usr/share/man/man1/clawvoice.1.gz"

# changelog: one entry for this version, dated by the last commit (reproducible).
date=$(git log -1 --format=%cD 2>/dev/null || date -R)
{
  echo "clawvoice ($version) unstable; urgency=medium"
  echo
  echo "  * clawvoice $version (see /usr/share/doc/clawvoice/README.md)."
  echo
  echo " -- $maintainer  $date"
} | gzip -9n >"$root/usr/share/doc/clawvoice/changelog.gz"
chmod 0644 "$root/usr/share/man/man1/clawvoice.1.gz" "$root/usr/share/doc/clawvoice/changelog.gz"

if grep -qv '^#' packaging/lintian-overrides 2>/dev/null; then
  mkdir -p "$root/usr/share/lintian/overrides"
  grep -v '^#' packaging/lintian-overrides >"$root/usr/share/lintian/overrides/clawvoice"
  chmod 0644 "$root/usr/share/lintian/overrides/clawvoice"
fi

find "$root" -type d -exec chmod 0755 {} +
size=$(du -k -s --exclude=DEBIAN "$root" | cut -f1)
depends=$(paste -sd, <<<"$kept" | sed 's/,/, /g')
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" -e "s|@INSTALLED_SIZE@|$size|" \
    -e "s|@SHLIBS@|$depends|" packaging/control.in >"$root/DEBIAN/control"
(cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "make deb: built $deb ($(du -h "$deb" | cut -f1); Installed-Size $((size / 1024)) MiB)"
echo "make deb: Depends: $(sed -n 's/^Depends: //p' "$root/DEBIAN/control")"

# lintian: clean, or each remaining tag overridden in packaging/lintian-overrides with its reason.
if lintian --fail-on error,warning --display-info "$deb" >"$out/lintian.log" 2>&1; then
  if [ -s "$out/lintian.log" ]; then sed 's/^/make deb: lintian: /' "$out/lintian.log"; fi
  echo "make deb: lintian: no error or warning"
else
  cat "$out/lintian.log" >&2
  fail "lintian reports errors or warnings (above): fix them, or override one in packaging/lintian-overrides and say why in docs/packaging.md"
fi
