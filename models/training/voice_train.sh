#!/usr/bin/env bash
# Trains the endpointer's voice detector: models/training/voice_train.sh   (what `make voice-model` runs)
# Creates models/training/.venv from requirements.txt on first use (the same one the wake models use),
# renders speech with espeak-ng, Piper joe and Pico (never flite: awb and rms are the held-out voices of
# clawvoice-bench --vad and --endpoint), mixes it with noise, trains the MLP and writes
# models/voice.json + voice.bin. About 20-25 min on this shared 2-core machine (Piper is most of it).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v espeak-ng >/dev/null || { echo "voice_train.sh: espeak-ng is missing; install it with: apt-get install espeak-ng libespeak-ng1" >&2; exit 1; }
[ -d /usr/share/sounds/alsa ] || { echo "voice_train.sh: /usr/share/sounds/alsa is missing; install it with: apt-get install alsa-utils" >&2; exit 1; }
venv="$here/.venv"
if [ ! -f "$venv/.ready" ] || [ "$here/requirements.txt" -nt "$venv/.ready" ]; then
  echo "voice_train.sh: setting up $venv (one time, ~500 MB from PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check wheel
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  touch "$venv/.ready"
fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
cd "$here"
exec nice -n "${VOICE_NICE:-10}" "$venv/bin/python" -u voice_train.py --per-engine 400 --scenes 4000 --epochs 10 "$@"
