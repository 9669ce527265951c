#!/usr/bin/env bash
# without-c.sh: proves ClawvoiceCore needs no C library. Copies Sources/ClawvoiceCore, the
# C-free module it depends on (Sources/GatewayProtocol) and Tests/ClawvoiceCoreTests into a
# package whose Package.swift declares no system library and no other target, runs `swift test`
# there, and checks that the test binary links none of the project's C libraries. It fails when
# a core file imports a C module (or any module not listed below): the copy cannot build then.
#
#   tests/core/without-c.sh [swift test flags...]
#
# The package lives in .build/core-without-c (kept, so a second run builds only what changed).
set -euo pipefail
cd "$(dirname "$0")/../.."

# What the core and its tests may import: the toolchain's Swift modules and the C-free protocol values.
allowed='Foundation|Synchronization|Testing|GatewayProtocol|ClawvoiceCore'
bad=$(grep -rnE '^\s*(@testable\s+|@preconcurrency\s+|(internal|public|private|package)\s+)*import\s+' \
        Sources/ClawvoiceCore Sources/GatewayProtocol Tests/ClawvoiceCoreTests \
      | grep -vE "import\s+($allowed)\s*$" || true)
if [[ -n "$bad" ]]; then
    echo "core-without-c: the core may import only $allowed; found:" >&2
    echo "$bad" >&2
    exit 1
fi

pkg=.build/core-without-c
mkdir -p "$pkg"
rm -rf "$pkg/Sources" "$pkg/Tests"
mkdir -p "$pkg/Sources" "$pkg/Tests"
# -p keeps the files' times, so the kept build in $pkg/.build rebuilds only what changed.
cp -Rp Sources/GatewayProtocol Sources/ClawvoiceCore "$pkg/Sources/"
cp -Rp Tests/ClawvoiceCoreTests "$pkg/Tests/"
cat >"$pkg/Package.swift" <<'SWIFT'
// swift-tools-version:6.0
// Written by tests/core/without-c.sh: ClawvoiceCore and its tests with no C library declared.
import PackageDescription

let package = Package(
    name: "CoreWithoutC",
    targets: [
        .target(name: "GatewayProtocol"),
        .target(name: "ClawvoiceCore", dependencies: ["GatewayProtocol"]),
        .testTarget(name: "ClawvoiceCoreTests", dependencies: ["ClawvoiceCore", "GatewayProtocol"]),
    ]
)
for target in package.targets {
    // The main Package.swift's Swift settings, so the core builds here as it does there.
    target.swiftSettings = [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility"),
                            .enableUpcomingFeature("InternalImportsByDefault")]
}
SWIFT

started=$(date +%s)
if ! swift build --package-path "$pkg" --build-tests "$@" >"$pkg/build.log" 2>&1; then
    grep -E 'error' "$pkg/build.log" | head -20 >&2
    echo "core-without-c: the core or its tests do not build without the C libraries (log: $pkg/build.log)" >&2
    exit 1
fi
bin=$(swift build --package-path "$pkg" --show-bin-path "$@")
# The project's C libraries (Package.swift's system libraries and the C++ edge): none may be linked.
linked=$(ldd "$bin/CoreWithoutCPackageTests.xctest" | grep -Eo \
    'lib(ssl|crypto|websockets|sqlite3|pulse[^ ]*|ogg|sndfile|opus[^ ]*|mpg123|espeak-ng|speexdsp|evdev|systemd|avahi[^ ]*|gst[^ ]*|openblas|webrtc[^ ]*)\.so' \
    | sort -u || true)
if [[ -n "$linked" ]]; then
    echo "core-without-c: the core's tests link C libraries: $linked" >&2
    exit 1
fi
swift test --package-path "$pkg" --skip-build "$@" 2>&1 | tail -1
test "${PIPESTATUS[0]}" = 0 || { echo "core-without-c: the core's tests failed" >&2; exit 1; }
echo "core-without-c: ClawvoiceCore's tests built and ran with no C library declared or linked ($(( $(date +%s) - started )) s)"
