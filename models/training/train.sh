#!/usr/bin/env bash
# Trains one wake model: models/training/train.sh "hey claw"   (WAKE_EPOCHS=50 WAKE_CHANNELS=64 to change the defaults)
# (what `make wake-model TRIGGER="hey claw"` runs). Creates models/training/.venv from
# requirements.txt on first use, then synthesises data with espeak-ng, trains on ONE core and
# writes models/<stem>.json + models/<stem>.bin and Tests/WakeWordTests/Fixtures/golden-<stem>.json.
# About 14-15 minutes per trigger on one core of a 2-core machine (12.5 with the data cached); progress and ETA per epoch.
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
  echo "train.sh: setting up $venv (one time, ~150 MB from PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  touch "$venv/.ready"
fi
# One core: BLAS/XLA single-threaded, and pinned to one CPU where taskset exists.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c "${WAKE_TRAIN_CPU:-$(( $(nproc) - 1 ))}"); fi
cd "$here"
extra=()
[ -n "${WAKE_EPOCHS:-}" ] && extra+=(--epochs "$WAKE_EPOCHS")
[ -n "${WAKE_CHANNELS:-}" ] && extra+=(--channels "$WAKE_CHANNELS")
exec "${pin[@]}" "$venv/bin/python" -u train.py --trigger "$trigger" "${extra[@]}" "${@:2}"
