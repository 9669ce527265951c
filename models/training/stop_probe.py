"""Why the stop head misses one held-out voice (models/EVALUATION-stop.md, "Why rms is never heard"):
the shipped stop head's peak score around each held-out "stop", by voice and noise, against the
speaker draw; then the plain word as flite's two voices and espeak-ng (a training engine) say it,
the word after "ok" in flite's voices, and the spread of the head's peaks over twelve renders of
the word by each training engine (RULE-STOP-V3.md's probe).

    .venv/bin/python evaluate.py --triggers stop --hours 0.05 --near 20 --out /tmp/eval-stop --build-only
    .venv/bin/python stop_probe.py /tmp/eval-stop

Replayed on the numpy front end (frontend.py) and the shipped head, as enroll_eval.py does.
"""
import json
import os
import sys

import numpy as np

import enroll_eval
import evaluate
import frontend
import speech
import voices


def main():
    eval_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/eval-stop"
    fe = frontend.FrontEnd(enroll_eval.MODELS)
    zero = fe.embed_mels(np.repeat(fe.zero_mel[None], frontend.EMB_FRAMES, axis=0))[0]
    head = enroll_eval.Head("stop")

    def peak(audio):
        return float(head.scores(enroll_eval.windows(fe.embed(audio), zero, head.window)).max())

    meta = json.load(open(os.path.join(eval_dir, "meta.json")))["positives-stop"]
    a = enroll_eval.read_wav(os.path.join(eval_dir, "positives-stop.wav"))
    s = head.scores(enroll_eval.windows(fe.embed(a), zero, head.window))
    rows = [(e["voice"], e["snr"], e["stretch"], e["f0"], float(s[(end - 500) // 80:(end + 1000) // 80].max()))
            for e, end in zip(meta["events"], meta["ends_ms"])]
    bar = 0.915                         # the head's threshold at talk.stopWordSensitivity 0.7
    for v in evaluate.EVAL_VOICES:
        for snr in evaluate.SNRS:
            p = [r[4] for r in rows if r[0] == v and r[1] == snr]
            print(f"{v} {snr:>6}: {len(p)} events, median peak {np.median(p):.3f}, over {bar}: {sum(q >= bar for q in p)}")
        r = np.array([x[2:] for x in rows if x[0] == v])
        print(f"{v}: peak against stretch r = {np.corrcoef(r[:, 0], r[:, 2])[0, 1]:.2f}, against pitch r = {np.corrcoef(r[:, 1], r[:, 2])[0, 1]:.2f}")

    def plain(name, y):
        b, e = speech.speech_bounds(y.astype(np.int16))
        print(f"plain 'stop', {name}: {(e - b) / 16:.0f} ms of speech, peak {peak(np.concatenate([np.zeros(8000), y.astype(float), np.zeros(8000)])):.3f}")
    flite = evaluate.Flite()
    for v in evaluate.EVAL_VOICES:
        plain(f"flite {v}", flite.synth("stop", v))
    espeak = speech.Espeak()
    for v in ("en", "en-us", "en-gb-x-rp", "en-029"):
        plain(f"espeak-ng {v}", espeak.synth("stop", v))
    for v in evaluate.EVAL_VOICES:      # said after another word, in one utterance
        print(f"'ok stop', flite {v}: peak {peak(np.concatenate([np.zeros(8000), flite.synth('ok stop', v).astype(float), np.zeros(8000)])):.3f}")
    rng = np.random.default_rng(5)
    for eng in voices.engines():        # the training engines' own renders, 12 each
        p = [peak(np.concatenate([np.zeros(8000), np.asarray(eng.render(t, rng), float), np.zeros(8000)]))
             for t in ["stop", "Stop!", "stop.", "stop"] * 3]
        print(f"training engine {eng.name}: 12 renders of 'stop', peak median {np.median(p):.3f} "
              f"(min {min(p):.3f}, max {max(p):.3f}), over {bar}: {sum(q >= bar for q in p)}")


if __name__ == "__main__":
    main()
