"""train_head.py's command line (the shipped recipe v4's defaults and the candidate recipes'
flags), and the recipe name those flags make, which the head's manifest records."""
import argparse
import os

from head import HEAD_WINDOW, HIDDEN
from threshold import RULES

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_SEED = 20261201
RECIPE_VERSION = 4                                     # the shipped recipe; candidates v5-v8 by their flags (recipe_name)


def parser():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trigger", required=True)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--split-seed", type=int, default=None, help="the seed of the train/validation split alone "
                    "(default: --seed). Heads of several seeds trained with one split seed hold out the same canvases, "
                    "so merge_heads.py can join them into one head (candidate recipe v23, RULE-V40)")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=HIDDEN)
    ap.add_argument("--window", type=int, default=HEAD_WINDOW, help="embeddings per head input (80 ms each; candidate "
                    "recipe v11: a shorter window for a one-syllable word, so less of what came before it is heard)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--positives", type=int, default=3000, help="trigger canvases")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every data count (smoke tests)")
    ap.add_argument("--negatives-scale", type=float, default=1.0,
                    help="multiplies this training's own negatives and validation stream (the stop word, on a busy machine)")
    ap.add_argument("--models-dir", default=os.path.join(REPO, "models"))
    ap.add_argument("--fixtures-dir", default=os.path.join(REPO, "Tests", "WakeWordTests", "Fixtures"))
    ap.add_argument("--cache-dir", default=os.path.join(HERE, ".cache"))
    ap.add_argument("--wide", type=int, default=3000,
                    help="extra trigger canvases with wider speaker changes (speed 0.82-1.22, VTLP 0.84-1.18)")
    ap.add_argument("--wide-speed", type=float, nargs=2, default=(0.82, 1.22), metavar=("LO", "HI"),
                    help="the wide canvases' speed range (candidate recipe v8: 0.75 1.33)")
    ap.add_argument("--wide-vtlp", type=float, nargs=2, default=(0.84, 1.18), metavar=("LO", "HI"),
                    help="the wide canvases' VTLP range (candidate recipe v8: 0.78 1.25)")
    ap.add_argument("--hard", type=int, default=0, help="extra trigger canvases at 0-12 dB SNR, rooms on 80 %% with "
                    "RT60 0.3-1.0 s (candidate recipe v5: 1500, measured and not shipped, models/README.md; 0: recipe v4)")
    ap.add_argument("--human", type=int, default=400, help="canvases of recorded human speech (negatives)")
    ap.add_argument("--real-negatives", type=int, default=0,
                    help="candidate recipe v9: canvases of real people saying OTHER words (real.py: the training half "
                         "of ../shared/wake-real, never the trigger's own word), as negatives, training only")
    ap.add_argument("--real-exclude", default="", help="with --real-negatives: comma-separated words whose real clips "
                    "are never used (the real-speech yardstick leaves out alexa and jarvis)")
    ap.add_argument("--prompt-negatives", type=int, default=0,
                    help="canvases of recorded voice prompts as negatives, training only (candidate recipe v12): the "
                         "training half of prompts.py's five Asterisk sets; real_negatives.py --half eval scores the other")
    ap.add_argument("--stamp-negatives", type=int, default=0,
                    help="canvases of Tux Paint's spoken stamp descriptions as negatives, training only (candidate recipe "
                         "v19): the training half of stamps.py's descriptions; stamp_negatives.py --half eval scores the other")
    ap.add_argument("--game-negatives", type=int, default=0,
                    help="canvases of a game's English voice acting as negatives, training only (candidate recipe v20): "
                         "the training half of game_speech.py's lines; game_negatives.py --half eval scores the other")
    ap.add_argument("--kokoro", type=int, default=0, help="extra trigger canvases spoken by Kokoro's mixed speakers, "
                    "with Kokoro's near misses, cut-short triggers and speech as negatives, training only (candidate "
                    "recipe v6: 1500; 0: none)")
    ap.add_argument("--others-rendered", default=None, help="the default triggers whose negatives "
                    "come from their own small rendered set (500 canvases); any left out use their trigger canvases when "
                    "another training has cached them. Which of the two decides the canvas count, so the validation split "
                    "and rule v2's threshold: the default (all; with --rescore, what the head's manifest records, else none) gives "
                    "every machine the same head, whatever its cache holds "
                    "(since 2026-12-05; heads trained before took whatever the cache held, their manifests lack "
                    "othersRendered, and a list such as 'computer' or '' rebuilds their split)")
    ap.add_argument("--rhvoice", type=int, default=0, help="extra trigger canvases spoken by RHVoice's speakers (two "
                    "English, twelve saying the default triggers and 'stop' with other languages' accents), with its near "
                    "misses, cut-short triggers and speech as negatives, training only (candidate recipe v13: 1500; 0: none)")
    ap.add_argument("--phonetic-near", type=int, default=0, help="a new phrase's near misses also hold the N words or "
                    "word pairs of the training sentences espeak-ng says most like it (phonetic.py; candidate recipe v16: 40; "
                    "0: none; the default triggers keep their own lists)")
    ap.add_argument("--phonetic-common", type=int, default=0, help="a new phrase's near misses also hold the N "
                    "common English words that sound most like it, alone or beside a function word (phonetic.common; "
                    "candidate recipe v17: 40, with --phonetic-near 40; 0: none)")
    ap.add_argument("--over-speech", type=int, default=0, help="extra trigger canvases said over the node's own speech "
                    "(espeak-ng, as the echo canceller leaves it), and half as many of that speech alone (the stop word: issue 22)")
    ap.add_argument("--near-weight", type=int, default=1, help="train on each near-miss canvas this many times "
                    "(candidate recipe v7 for openclaw, whose threshold rule v2's near-miss limit sets: 3; 1: recipe v4)")
    ap.add_argument("--near-val", type=int, default=0, help="this many more validation canvases no head trains on "
                    "(near misses, other triggers, cut short: the same for every seed; scaled by --scale; not with "
                    "--hold-out), read by rule v2's near-miss limit (near_val.py; candidate recipe v22: 1500; 0: the "
                    "split's own, about 200). Every rule's negatives hold them, so rule v1's 'all' limit reads them too")
    ap.add_argument("--val-minutes", type=int, default=120, help="length of the validation stream")
    ap.add_argument("--rule", default="v2", choices=sorted(RULES), help="threshold rule (validation only)")
    ap.add_argument("--consecutive", type=int, default=2, help="steps in a row over the threshold for a wake")
    ap.add_argument("--rescore", action="store_true",
                    help="no training: score the validation data with the existing models/<stem>.json head")
    ap.add_argument("--hold-out", default="", help="leave this engine (name prefix: espeak, piper, pico) out of the "
                    "trigger canvases and validate on it; no head is written")
    ap.add_argument("--hold-out-negatives", action="store_true", help="with --hold-out: leave the engine out "
                    "entirely (its near-miss, speech, cut-short and other-trigger canvases too, holdout.py) and validate on "
                    "all of them and on its part of the stream (calibrate.py reads them)")
    ap.add_argument("--stop-after", type=int, default=3,
                    help="stop after this many epochs of the --epochs learning-rate schedule (0: run it all)")
    ap.add_argument("--dropout", type=float, default=0.3, help="input dropout")
    ap.add_argument("--noise", type=float, default=1.0, help="Gaussian noise on the normalised inputs")
    ap.add_argument("--shift", type=float, default=1.0, help="one Gaussian offset per canvas on the normalised embeddings")
    ap.add_argument("--l2", type=float, default=1e-4, help="weight decay of the hidden layers")
    ap.add_argument("--mine-hours", type=float, default=0, help="hours of training sentences to mine hard negatives from (0: none)")
    ap.add_argument("--mine-threshold", type=float, default=0.2, help="windows scoring at least this are mined")
    ap.add_argument("--mine-weight", type=int, default=2, help="each mined window is trained on this many times")
    ap.add_argument("--mine-inset-weight", type=int, default=2, help="training negatives scoring over --mine-threshold "
                    "are trained on this many times (1: once, as before)")
    ap.add_argument("--mine-source", default="pool", choices=["pool", "fresh", "human"], help="mine the training pool's sentences, "
                    "fresh ones no canvas holds, or recorded human speech: the training halves of the voice prompts, stamp "
                    "descriptions and game lines (candidate recipe v21; real_halves.py)")
    ap.add_argument("--mine-rounds", type=int, default=1, help="train, mine, retrain from scratch: this many times")
    ap.add_argument("--members", type=int, default=3, help="heads in the ensemble (logits averaged; recipe v4: 3, v3: 1)")
    ap.add_argument("--member", type=int, default=0, help="ensemble member: another initialisation, dropout and batch "
                    "order on the same data and validation split (0: the single head's)")
    ap.add_argument("--tag", default="", help="name of this run's validation-score file (.cache/valscores-<stem>-<tag>.npz; a tag starting with - is given as --tag=-x)")
    return ap


def split_seed(args, seed):
    """The seed the validation split is drawn with (seed: the training's, the trigger's offset added):
    --split-seed with the same offset, else the training's own."""
    return seed if getattr(args, "split_seed", None) is None else args.split_seed + (seed - args.seed)


def recipe_name(args, wide_changed):
    """The recipe a head was trained with: v4, or the candidate its flags make (each measured and
    not shipped, models/README.md), with those flags."""
    on = [(v, flag) for v, used, flag in [
        (5, args.hard > 0, f"--hard {args.hard}"),
        (6, args.kokoro > 0, f"--kokoro {args.kokoro}"),
        (7, args.near_weight > 1, f"--near-weight {args.near_weight}"),
        (10, args.over_speech > 0, f"--over-speech {args.over_speech}"),
        (9, args.real_negatives > 0, f"--real-negatives {args.real_negatives}"
                                     + (f" --real-exclude {args.real_exclude}" if args.real_exclude else "")),
        (11, args.window != HEAD_WINDOW, f"--window {args.window}"),
        (12, args.prompt_negatives > 0, f"--prompt-negatives {args.prompt_negatives}"),
        (13, args.rhvoice > 0, f"--rhvoice {args.rhvoice}"),
        (19, args.stamp_negatives > 0, f"--stamp-negatives {args.stamp_negatives}"),
        (20, args.game_negatives > 0, f"--game-negatives {args.game_negatives}"),
        (21, args.mine_hours > 0 and args.mine_source == "human",
         f"--mine-hours {args.mine_hours:g} --mine-source human --mine-threshold {args.mine_threshold:g} --mine-weight {args.mine_weight}"
         f" --mine-inset-weight {args.mine_inset_weight} --mine-rounds {args.mine_rounds}"),
        (22, args.near_val > 0, f"--near-val {args.near_val}"),
        (16, args.phonetic_near > 0, f"--phonetic-near {args.phonetic_near}"),
        (17, args.phonetic_common > 0, f"--phonetic-common {args.phonetic_common}"),
        (18, args.members > 3, f"--members {args.members}"),
        (8, wide_changed, f"--wide-speed {args.wide_speed[0]:g} {args.wide_speed[1]:g} "
                          f"--wide-vtlp {args.wide_vtlp[0]:g} {args.wide_vtlp[1]:g}")] if used]
    return f"models/training/train_head.py v{max((v for v, _ in on), default=RECIPE_VERSION)}" + "".join(f" ({f})" for _, f in on)
