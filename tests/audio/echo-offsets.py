#!/usr/bin/env python3
# Where the speaker really was in an echo-room recording (kept by `clawvoice-bench --echo-only
# --recording FILE` or EchoRoomTests with CLAWVOICE_ECHO_RECORDING=FILE): every 2 s, a 1 s
# stretch of the microphone is cross-correlated with what was played, and the far-end offset
# that matches best is printed beside the one PulseAudio's timing gave for that frame. A real
# change of alignment (an underrun) moves both; a wander of the timing readings moves only the
# second. Needs numpy (models/training/.venv has it):
#   models/training/.venv/bin/python tests/audio/echo-offsets.py FILE...
import json, sys
import numpy as np

for path in sys.argv[1:]:
    r = json.load(open(path))
    far, mic, ends = np.array(r["far"], float), np.array(r["mic"], float), r["frameEndsTimed"]
    cells = []
    for k in range(50, len(ends) - 100, 100):
        seg = mic[k * 320:(k + 50) * 320]
        timed = ends[k] - 320 * (k + 1)            # far index of mic sample j is j + offset
        lo, hi = k * 320 + timed - 3200, (k + 50) * 320 + timed + 2400
        if np.abs(seg).max() < 100 or lo < 0 or hi > len(far):
            continue                               # silence, or the window leaves the clip
        a, b = seg - seg.mean(), far[lo:hi]
        n = 2 * (len(a) + len(b))
        c = np.fft.irfft(np.conj(np.fft.rfft(a, n)) * np.fft.rfft(b, n), n)[:len(b) - len(a) + 1]
        cells.append(f"{k}:{timed}/{lo + int(np.argmax(np.abs(c))) - k * 320}")
    print(f"{path} (frame: timed offset / correlated offset): {' '.join(cells)}")
