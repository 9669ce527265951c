#!/usr/bin/env bash
# Trains one wake head: models/training/train.sh "hey claw"   (what `make wake-model TRIGGER="hey claw"` runs;
# --help says what it does). Creates models/training/.venv on first use, then runs train_head.py
# (espeak-ng, Piper and Pico only: flite and the engine it shares speakers with are held out for
# make wake-eval) and, for a new phrase, threshold rule v5c (prompt_threshold.py --fine).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
trigger="${1:-${TRIGGER:-}}"
case "$trigger" in
  -h|--help)
    cat <<'USAGE'
usage: models/training/train.sh "trigger phrase" [train_head.py options]
       make wake-model TRIGGER="trigger phrase" [WAKE_RECIPE=v4]

Trains a wake head for the phrase from synthetic voices (espeak-ng, Piper, Pico; the trigger is never a
recording, though candidate options can add recorded speech as negatives: models/README.md)
and writes models/<stem>.json + .bin, where the node finds it. A new phrase gets recipe v16: near
misses found by sound, then threshold rule v5c (the threshold raised until the head wakes at most
once in 2.27 h of voices it never trained on; RHVoice's engine is cloned and built for it once). About
26 min the first time on a 2-core machine (plus the clone, and a release build of clawvoice in a
checkout without one), 5-8 min after; progress and ETAs are printed throughout.

  WAKE_RECIPE=v4       recipe v4 and rule v2 alone (what the default triggers and the stop word get)
  WAKE_RECIPE=v17      a measured candidate, not better: v16 and 40 common words that sound like the phrase
                       (RULE-V22); --members 5 is another (recipe v18, RULE-V23)
  WAKE_EPOCHS=N        train N epochs instead of the recipe's
  WAKE_NICE=N          the training's niceness (default 10)
  WAKE_DETECTOR=PATH   the clawvoice binary rule v5c runs (default: this checkout's release build, else
                       an installed clawvoice, else one built here)
  --models-dir DIR     write the head there instead of models/
  --cache-dir DIR      cache embeddings, canvases and the streams there (default models/training/.cache)
The other options: models/training/.venv/bin/python models/training/train_head.py --help
Recipes, rules and measured figures: models/README.md ("Training").
USAGE
    exit 0 ;;
esac
if [ -z "$trigger" ]; then
  echo "usage: models/training/train.sh \"trigger phrase\"   (or make wake-model TRIGGER=\"trigger phrase\")" >&2
  exit 2
fi
command -v espeak-ng >/dev/null || { echo "train.sh: espeak-ng is missing; install it with: apt-get install espeak-ng libespeak-ng1" >&2; exit 1; }
# A detector named by the caller is checked now, not after half an hour of training.
detector=""
if [ -n "${WAKE_DETECTOR:-}" ]; then
  [ -x "$WAKE_DETECTOR" ] && [ -f "$WAKE_DETECTOR" ] || { echo "train.sh: WAKE_DETECTOR=$WAKE_DETECTOR is not an executable file; build one with: swift build -c release" >&2; exit 2; }
  detector="$(cd "$(dirname "$WAKE_DETECTOR")" && pwd)/$(basename "$WAKE_DETECTOR")"   # the rule runs in $here
fi
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
# Recipe v16 (RULE-V20, RULE-V21, RULE-V24; a new phrase): near misses found by sound, then threshold rule v5c on
# the unseen-voice stream's RHVoice part (built once per machine, a few minutes; needs the release
# detector: the checkout's, else an installed clawvoice, else built here). The default triggers
# (render.DEFAULT_TRIGGERS) and the stop word keep their own near-miss lists: never v16.
own=0
"$venv/bin/python" -c 'import sys; from render import own_recipe; sys.exit(3 if own_recipe(sys.argv[1]) else 0)' "$trigger" || own=$?
[ "$own" = 0 ] || [ "$own" = 3 ] || { echo "train.sh: the training venv is broken (render.py did not load: above); remove $venv and run again" >&2; exit 1; }
if [ "$own" = 3 ]; then
  recipe="${WAKE_RECIPE:-v4}"
  if [ "$recipe" = v16 ] || [ "$recipe" = v17 ]; then
    echo "train.sh: WAKE_RECIPE=$recipe is for a new phrase; \"$trigger\" keeps its own near-miss list (recipe v4)" >&2
    exit 2
  fi
else
  recipe="${WAKE_RECIPE:-v16}"
fi
case "$recipe" in
  v4) ;;
  v16) extra+=(--phonetic-near 40) ;;
  v17) extra+=(--phonetic-near 40 --phonetic-common 40) ;;   # candidate (RULE-V22): v16 and common words found by sound
  *) echo "train.sh: unknown WAKE_RECIPE=$recipe (v16, a new phrase's default, v4, or the candidate v17)" >&2; exit 2 ;;
esac
echo "train.sh: recipe $recipe for \"$trigger\"$([ "$recipe" != v4 ] && echo ' (near misses found by sound, then threshold rule v5c)')$([ $# -gt 1 ] && echo " with ${*:2} (the head's manifest names the candidate recipe they make)")"
nice -n "${WAKE_NICE:-10}" "$venv/bin/python" -u train_head.py --trigger "$trigger" "${extra[@]}" "${@:2}"
[ "$recipe" != v4 ] || exit 0
models="$(cd "$here/../.." && pwd)/models"
cache="$here/.cache"
args=("${@:2}")
for i in "${!args[@]}"; do
  case "${args[$i]}" in
    --models-dir) models="${args[$((i + 1))]}" ;;
    --models-dir=*) models="${args[$i]#--models-dir=}" ;;
    --cache-dir) cache="${args[$((i + 1))]}" ;;
    --cache-dir=*) cache="${args[$i]#--cache-dir=}" ;;
    -h|--help|--rescore|--hold-out|--hold-out=*) exit 0 ;;   # train_head.py wrote no head: no rule to apply
  esac
done
stem="$("$venv/bin/python" -c 'import sys; from render import file_stem; print(file_stem(sys.argv[1]))' "$trigger")"
# Rule v5c (rule v5b on a grid of 0.001 from 0.90 up: RULE-V24), the last step. If it cannot run (no
# release detector, RHVoice's engine not built: no network, no cmake), the head written above keeps
# rule v2's threshold: say so, and how to finish later.
bin="${detector:-$here/../../.build/release/clawvoice}"
if [ -z "$detector" ] && [ ! -x "$bin" ] && command -v clawvoice >/dev/null; then bin="$(command -v clawvoice)"; fi
rule=(prompt_threshold.py "$stem" --models "$models" --stream unseen-rhvoice --out "$cache/unseen" --bin "$bin"
      --fine --apply --keep-if-refused)
rule_v5c() {
  if [ -z "$detector" ] && [ ! -x "$bin" ]; then   # a named detector is never built over (the rule says if it is gone)
    # Whether the stream refuses this phrase needs no detector: ask before building one.
    local rc=0
    "$venv/bin/python" -u "${rule[@]}" --refusal-only || rc=$?
    [ "$rc" = 3 ] && return 0
    [ "$rc" = 0 ] || return 1
    echo "train.sh: building the release detector for threshold rule v5c (one time): swift build -c release --product clawvoice"
    (cd "$here/../.." && swift build -c release --product clawvoice) || return 1
  fi
  echo "train.sh: threshold rule v5c: the unseen-voice stream's RHVoice part (built once per machine, a few minutes)"
  nice -n "${WAKE_NICE:-10}" "$venv/bin/python" -u "${rule[@]}"
}
if ! rule_v5c; then
  echo "train.sh: threshold rule v5c did not finish (see above), so $models/$stem.json keeps rule v2's threshold," \
       "which wakes more often on voices training never heard. Once that is fixed, finish it with:" \
       "$(printf '%q ' cd "$here")&& $(printf '%q ' .venv/bin/python "${rule[@]}")" >&2
  exit 1
fi
