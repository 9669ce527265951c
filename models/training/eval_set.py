"""The held-out set of evaluate.py: the triggers, flite's held-out voices and speakers, the test
rooms and noise, and building positives-<trigger>.wav, negatives.wav and near-misses.wav."""
import json
import os
import subprocess
import tempfile
import time
import wave

import numpy as np

import augment
import speech

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TRIGGERS = ["openclaw", "claude", "computer"]
SR = 16000
EVAL_VOICES = ["awb", "rms"]            # flite; never kal, kal16 or slt (held-out speakers)
SNRS = ["clean", "20 dB", "10 dB", "5 dB"]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Flite:
    """The flite command (Debian package flite), held-out voices only."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="wake-eval-")

    def synth(self, text, voice, stretch=1.0, f0=None, f0_range=None):
        assert voice in EVAL_VOICES
        path = os.path.join(self.tmp, "u.wav")
        cmd = ["flite", "-voice", voice, "--setf", f"duration_stretch={stretch:.3f}"]
        if f0:
            cmd += ["--setf", f"int_f0_target_mean={f0:.1f}"]
        if f0_range:
            cmd += ["--setf", f"int_f0_target_stddev={f0_range:.1f}"]
        subprocess.run(cmd + ["-t", text, "-o", path], check=True, capture_output=True)
        with wave.open(path) as w:
            a = np.frombuffer(w.readframes(w.getnframes()), np.int16)
            rate = w.getframerate()
        return speech.to16k(a, rate)


def test_speaker(rng, voice=None):
    """A held-out speaker: a flite voice (drawn unless given) with its own pace and pitch."""
    voice = voice or str(rng.choice(EVAL_VOICES))
    base = 110 if voice == "awb" else 95
    return dict(voice=voice, stretch=float(rng.uniform(0.8, 1.3)), f0=float(base * rng.uniform(0.8, 1.3)),
                f0_range=float(rng.uniform(8, 30)))


def test_noise(rng, n, babble_pool):
    kind = rng.integers(4)
    if kind == 0:
        return augment.fan_noise(rng, n), "fan"
    if kind == 1:
        return augment.music_noise(rng, n), "music"
    if kind == 2:
        return augment.coloured_noise(rng, n, 1.0), "pink"
    return augment.babble(rng, n, babble_pool), "babble"


def condition(rng, x, babble_pool, snr=None, info=None):
    """Test room and noise for one segment; returns float audio at a speaking level.
    snr: one of SNRS, or None for 5-25 dB at random (speech segments)."""
    room = rng.random() < 1 / 3
    if room:
        x = augment.reverberate(x, augment.test_rir(rng))
    kind = "none"
    if snr is None:
        snr = f"{rng.uniform(5, 25):.0f} dB"
    if snr != "clean":
        noise, kind = test_noise(rng, len(x), babble_pool)
        x = augment.mix_noise(x, noise, float(snr.split()[0]))
    else:
        x = x + augment.coloured_noise(rng, len(x), 0.0) * 3.0          # a quiet, dithered room
    if info is not None:
        info.update(room=bool(room), noise=kind, snr=snr)
    return x / (np.max(np.abs(x)) + 1e-9) * 32767 * 10 ** (rng.uniform(-20, -4) / 20)


def write_wav(path, x):
    a = np.clip(np.round(x), -32768, 32767).astype(np.int16)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(a.tobytes())
    return len(a) / SR


def sil(seconds):
    return np.zeros(int(seconds * SR))


def build(out, eng, rng, sentences, positives, hours, near_per_trigger):
    def say(text, spk=None):
        return eng.synth(text, **(spk or test_speaker(rng))).astype(float)

    babble_pool = [say(sentences[i]) for i in rng.integers(len(sentences), size=60)]
    meta = {}
    # Positives: every event's trigger end, in ms from the start of the file.
    for trig in TRIGGERS:
        parts, ends, infos, t = [], [], [], 0
        for k in range(positives):
            seg = [sil(rng.uniform(0.3, 1.0))]
            if rng.random() < 0.5:
                seg += [say(sentences[rng.integers(len(sentences))]), sil(rng.uniform(0.3, 0.8))]
            spk = test_speaker(rng)
            clip = say(str(rng.choice(speech.trigger_spellings(trig))), spk)
            _, e = speech.speech_bounds(clip.astype(np.int16))
            end_in_seg = sum(len(s) for s in seg) + e
            seg.append(clip)
            if rng.random() < 0.7:
                seg += [sil(rng.uniform(0.2, 0.6)), say(sentences[rng.integers(len(sentences))])]
            seg.append(sil(rng.uniform(2.0, 4.0)))
            info = dict(spk)
            x = condition(rng, np.concatenate(seg), babble_pool, snr=SNRS[k % len(SNRS)], info=info)
            infos.append(info)
            ends.append(int((t + end_in_seg) * 1000 / SR))
            parts.append(x)
            t += len(x)
        dur = write_wav(os.path.join(out, f"positives-{trig}.wav"), np.concatenate(parts))
        meta[f"positives-{trig}"] = {"ends_ms": ends, "seconds": dur, "events": infos}
        log(f"positives-{trig}.wav: {positives} events, {dur / 60:.1f} min")

    # Negatives: continuous speech, 20-40 s segments each in one room and noise.
    parts, total, n_utt = [], 0.0, 0
    while total < hours * 3600:
        seg = []
        while sum(map(len, seg)) < rng.uniform(20, 40) * SR:
            seg += [say(sentences[rng.integers(len(sentences))]), sil(rng.uniform(0.15, 1.2))]
            n_utt += 1
        x = condition(rng, np.concatenate(seg), babble_pool, snr=None if rng.random() < 0.8 else "clean")
        parts.append(x)
        total += len(x) / SR
        if len(parts) % 50 == 0:
            log(f"  negatives: {total / 60:.0f} min")
    dur = write_wav(os.path.join(out, "negatives.wav"), np.concatenate(parts))
    meta["negatives"] = {"seconds": dur, "utterances": n_utt}
    log(f"negatives.wav: {n_utt} utterances, {dur / 60:.1f} min")

    # Near misses: each word alone or in a carrier sentence, 3 s apart.
    carriers = ["{}", "{}", "I said {} yesterday.", "The {} was on the table.", "Please {} now.", "What about {}?"]
    parts, words, t = [], [], 0
    for trig in TRIGGERS:
        for _ in range(near_per_trigger):
            w = str(rng.choice(speech.NEAR_MISSES[trig]))
            text = str(rng.choice(carriers)).format(w)
            x = condition(rng, np.concatenate([sil(0.5), say(text), sil(2.5)]), babble_pool,
                          snr=str(rng.choice(["clean", "20 dB", "10 dB"])))
            parts.append(x)
            words.append({"trigger": trig, "word": w, "text": text, "start_ms": int(t * 1000 / SR),
                          "end_ms": int((t + len(x)) * 1000 / SR)})
            t += len(x)
    dur = write_wav(os.path.join(out, "near-misses.wav"), np.concatenate(parts))
    meta["near-misses"] = {"seconds": dur, "utterances": words}
    log(f"near-misses.wav: {len(words)} utterances, {dur / 60:.1f} min")
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f)
    return meta
