#!/usr/bin/env bash
# Held-out evaluation of the shipped wake models with the Swift detector; writes models/EVALUATION.md.
#   bash models/training/evaluate.sh [path/to/clawvoice]
# Needs a release build (swift build -c release) and the training venv (train.sh makes it).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${1:-$repo/.build/release/clawvoice}"
[ -x "$bin" ] || { echo "evaluate.sh: $bin not found; build it with: swift build -c release" >&2; exit 1; }
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"   # the run below works in $here
venv="$here/.venv"
if [ ! -f "$venv/.ready" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check wheel
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  touch "$venv/.ready"
fi
export OMP_NUM_THREADS=1
cd "$here"
exec "$venv/bin/python" -u evaluate.py --clawvoice "$bin" "${@:2}"
