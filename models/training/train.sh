#!/usr/bin/env bash
# Trains one wake head: models/training/train.sh "hey claw"   (what `make wake-model TRIGGER="hey claw"` runs)
# Creates models/training/.venv from requirements.txt on first use, renders the trigger, near misses
# and ordinary speech with espeak-ng, Piper and Pico (never flite or the other held-out engine: those are held out for
# make wake-eval), computes the frozen front end's embeddings once (cached in .cache/), trains the
# head, picks its threshold on training-engine validation and writes models/<stem>.json + .bin.
# Progress and ETAs are printed throughout; models/README.md gives the measured time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
trigger="${1:-${TRIGGER:-}}"
if [ -z "$trigger" ]; then
  echo "usage: models/training/train.sh \"trigger phrase\"   (or make wake-model TRIGGER=\"trigger phrase\")" >&2
  exit 2
fi
command -v espeak-ng >/dev/null || { echo "train.sh: espeak-ng is missing; install it with: apt-get install espeak-ng libespeak-ng1" >&2; exit 1; }
venv="$here/.venv"
if [ ! -f "$venv/.ready" ] || [ "$here/requirements.txt" -nt "$venv/.ready" ]; then
  echo "train.sh: setting up $venv (one time, ~500 MB from PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check wheel
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  touch "$venv/.ready"
fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
cd "$here"
extra=()
[ -n "${WAKE_EPOCHS:-}" ] && extra+=(--epochs "$WAKE_EPOCHS")
exec nice -n "${WAKE_NICE:-10}" "$venv/bin/python" -u train_head.py --trigger "$trigger" "${extra[@]}" "${@:2}"
