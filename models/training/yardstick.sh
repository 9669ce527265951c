#!/usr/bin/env bash
# The real-speech yardstick (issue 22): heads for "alexa" and "jarvis" trained from text exactly as
# `make wake-model TRIGGER=...` trains a user's trigger (train.sh: espeak-ng, Piper and Pico only,
# never a real recording of the word), scored by realspeech.py on real people saying those words.
#   bash models/training/yardstick.sh [path/to/clawvoice]            (what make wake-eval-real runs: recipe
#                                                                     v16 and rule v5c, a new phrase's default)
#   WAKE_YARDSTICK_RECIPE=v4 bash models/training/yardstick.sh ...   (recipe v4 and rule v2, the default before RULE-V21)
#   WAKE_YARDSTICK_RECIPE=v9 bash models/training/yardstick.sh ...   (candidate recipe v9: real negatives)
#   WAKE_YARDSTICK_RECIPE=v13 bash models/training/yardstick.sh ...  (candidate recipe v13: RHVoice's speakers)
#   WAKE_YARDSTICK_RECIPE=v17 (or v18) bash models/training/yardstick.sh ...   (candidates v17, common words found
#                                                                     by sound, and v18, five members: RULE-V22, V23)
# The heads live in models/training/.cache/yardstick/<recipe>/ (gitignored, not shipped) and are
# trained there only when absent: one run per word, ~26 min the first from a clean cache on a quiet
# 2-core machine, 5-8 min each after.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
recipe="${WAKE_YARDSTICK_RECIPE:-v16}"
export WAKE_RECIPE=v4                     # v4, v9 and v13 are recipe v4 with flags
case "$recipe" in
  v16) flags=(--tag=-v16); export WAKE_RECIPE=v16 ;;   # train.sh: --phonetic-near 40, then rule v5c (RULE-V20, V21, V24)
  v17) flags=(--tag=-v17); export WAKE_RECIPE=v17 ;;   # candidate: v16 and --phonetic-common 40 (RULE-V22)
  v18) flags=(--members 5 --tag=-v18); export WAKE_RECIPE=v16 ;;   # candidate: v16 with five members (RULE-V23)
  v4) flags=() ;;
  v9) flags=(--real-negatives 1500 --real-exclude alexa,jarvis --tag=-v9) ;;   # models/training/RULE-V9.md
  v13) flags=(--rhvoice 1500 --tag=-v13) ;;                                      # models/training/RULE-V13.md
  *) echo "yardstick.sh: unknown WAKE_YARDSTICK_RECIPE=$recipe (v16, v17, v18, v4, v9 or v13)" >&2; exit 2 ;;
esac
dir="$here/.cache/yardstick/$recipe"
mkdir -p "$dir"
# The shipped front end, so the heads sit on exactly what the node runs.
cp -p "$repo/models/frontend.json" "$repo/models/frontend.bin" "$dir/"
bin="${WAKE_DETECTOR:-$repo/.build/release/clawvoice}"   # train.sh's WAKE_DETECTOR, when set, is ours too
# The detector, made absolute (the rule and the scoring run from models/training).
need_bin() {
  [ -x "$bin" ] && [ -f "$bin" ] || { echo "yardstick.sh: $bin is not an executable clawvoice; build one with: swift build -c release" >&2; exit 1; }
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
}
if [ -n "${1:-}" ] && [ "$1" != "--train-only" ]; then
  # A detector named here is the one every step runs, train.sh's rule v5c included.
  bin="$1"; need_bin; export WAKE_DETECTOR="$bin"
fi
for word in alexa jarvis; do
  if [ ! -f "$dir/$word.json" ]; then
    echo "yardstick.sh: training \"$word\" (recipe $recipe) into $dir; log: $dir/$word.log"
    # The script stops on any failure, so no head is scored unless its recipe finished; a head whose
    # threshold rule failed is kept and finished below on the next run.
    if ! WAKE_NICE="${WAKE_NICE:-15}" bash "$here/train.sh" "$word" --models-dir "$dir" "${flags[@]}" 2>&1 | tee "$dir/$word.log" \
       || [ ! -f "$dir/$word.json" ]; then
      echo "yardstick.sh: training \"$word\" failed; see $dir/$word.log" >&2
      exit 1
    fi
  fi
  # Recipe v16's heads (and candidates v17's and v18's) carry rule v5c's threshold; a head without it
  # (rules v5 and v5b before RULE-V24, or a rule that failed) is raised by rule v5c now.
  if [ "$WAKE_RECIPE" != v4 ] && ! grep -q "rule v5c" "$dir/$word.json"; then
    need_bin
    echo "yardstick.sh: $dir/$word.json has no rule-v5c threshold; applying rule v5c"
    (cd "$here" && .venv/bin/python -u prompt_threshold.py "$word" --models "$dir" --stream unseen-rhvoice --fine --bin "$bin" --apply)
    grep -q "rule v5c" "$dir/$word.json" || { echo "yardstick.sh: rule v5c left $dir/$word.json as it was (above); not scored" >&2; exit 1; }
  fi
done
if [ "${1:-}" = "--train-only" ] || [ "${2:-}" = "--train-only" ]; then exit 0; fi
need_bin
venv="$here/.venv"
# The anchors: the wheels ship their alexa models (pyopen-wakeword is in requirements.txt already).
if [ ! -f "$venv/.anchors" ] || [ "$here/requirements-anchors.txt" -nt "$venv/.anchors" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements-anchors.txt"
  touch "$venv/.anchors"
fi
export OMP_NUM_THREADS=1
cd "$here"
# The held-out flite negatives (make wake-eval builds them; ~22 min once).
[ -f eval-flite/negatives.wav ] || "$venv/bin/python" -u evaluate.py --build-only
exec "$venv/bin/python" -u realspeech.py --clawvoice "$bin" --heads "$dir" --recipe "$recipe" "${@:2}"
