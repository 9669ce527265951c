#!/usr/bin/env bash
# Trains the end-of-turn detector: models/training/turn_train.sh   (what `make turn-model` runs)
# Uses models/training/.venv (requirements.txt, as voice_train.sh sets it up) for Pico (and Piper),
# and the release clawvoice-bench for the features (the Swift TurnDetector's own). Renders turns
# with espeak-ng and Pico, Piper joe with --piper N (never flite: awb and rms are the bench's held-out voices),
# fits the logistic model and writes models/turn.json.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
command -v espeak-ng >/dev/null || { echo "turn_train.sh: espeak-ng is missing; install it with: apt-get install espeak-ng libespeak-ng1" >&2; exit 1; }
venv="${TURN_VENV:-$here/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  echo "turn_train.sh: setting up $venv (one time, ~500 MB from PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check wheel
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  touch "$venv/.ready"
fi
[ -x "$root/.build/release/clawvoice-bench" ] || (cd "$root" && swift build -c release --product clawvoice-bench)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
cd "$here"
exec nice -n "${TURN_NICE:-15}" "$venv/bin/python" -u turn_train.py "$@"
