"""The baseline for clawvoice-bench's wake figure: the same 16 kHz mono WAV through pyopen-wakeword
(its TFLite front end + three of its shipped heads: hey_jarvis, alexa, hey_mycroft), fed in
1280-sample chunks as its streaming API expects. Prints one JSON line: audio seconds and the CPU
seconds of this process spent inside the loop.

    models/training/.venv/bin/python models/training/bench_oww.py audio.wav
"""
import json
import sys
import time
import wave

import numpy as np
from pyopen_wakeword import Model
from pyopen_wakeword.openwakeword import OpenWakeWord, OpenWakeWordFeatures


def main():
    with wave.open(sys.argv[1]) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1
        audio = np.frombuffer(w.readframes(w.getnframes()), np.int16)
    features = OpenWakeWordFeatures.from_builtin()
    heads = [OpenWakeWord.from_builtin(m) for m in (Model.HEY_JARVIS, Model.ALEXA, Model.HEY_MYCROFT)]
    t0 = time.process_time()
    best = 0.0
    for i in range(0, len(audio) - 1279, 1280):
        for emb in features.process_streaming(audio[i:i + 1280].tobytes()):
            for h in heads:
                for p in h.process_streaming(emb):
                    best = max(best, p)
    cpu = time.process_time() - t0
    print(json.dumps({"secondsOfAudio": len(audio) / 16000, "cpuSeconds": cpu, "models": 3, "maxScore": best}))


if __name__ == "__main__":
    main()
