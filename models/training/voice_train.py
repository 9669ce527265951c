"""Trains the endpointer's voice detector (models/voice.json + voice.bin): a small MLP over the
last 320 ms of log-mel frames (the wake front end's 512-point DFT, Hann window and mel matrix
from models/frontend.bin, one frame per 10 ms), normalised to the window's loudest value so the
loudness of a sound says nothing, only its shape in time and frequency.

Speech: the training engines only (espeak-ng, Piper joe, Pico en-US/en-GB) plus the human voice
recordings alsa-utils ships (/usr/share/sounds/alsa). flite (every voice) is never used here:
awb and rms are the held-out evaluation voices (clawvoice-bench --vad), the others are banned.
Noise (the "not speech" class, also mixed under speech at 30 ... -5 dB SNR): white, pink, brown,
music-like (augment.train_music), mains hum with harmonics, beeps and held tones, clatter
(decaying bursts), a training fan (low-passed noise with a slow wobble), engine drone.

Run: models/training/voice_train.sh (what `make voice-model` runs). Pure numpy training.
"""
import argparse
import hashlib
import json
import os
import sys
import time
import wave

import numpy as np
from scipy.signal import lfilter

import augment
import speech
import voices

SR = 16000
HOP = 160
NFFT = 512
MELS = 32
WINDOW = 32          # mel frames in one decision window (320 ms)
FRAME = 320          # the capture's 20 ms frame: one decision per frame
FLOOR_BELS = 8.0     # the window is floored 80 dB under its loudest value
HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.dirname(HERE)
CACHE = os.path.join(HERE, ".cache", "voice")


def log(msg):
    print(f"[voice {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- features (the Swift VoiceDetector computes the same) --------------------------------

class Mels:
    def __init__(self):
        man = json.load(open(os.path.join(MODELS, "frontend.json")))
        flat = np.fromfile(os.path.join(MODELS, man["weights"]), "<f4")
        T = {e["name"]: flat[e["offset"]:e["offset"] + int(np.prod(e["shape"]))].reshape(e["shape"]) for e in man["tensors"]}
        self.window = T["stft.window"].astype(np.float64)
        self.mel = T["mel.matrix"].astype(np.float64)

    def frames(self, audio):
        """(n // 160, 32) log-mel frames in bels of int16-valued audio. Frame k covers the 512
        samples that end at sample (k + 1) * 160, zeros before the start."""
        x = np.concatenate([np.zeros(NFFT - HOP), np.asarray(audio, np.float64)])
        n = (len(x) - (NFFT - HOP)) // HOP
        idx = np.arange(n)[:, None] * HOP + np.arange(NFFT)[None, :]
        spec = np.fft.rfft(x[idx] * self.window[None, :], axis=1)
        power = spec.real ** 2 + spec.imag ** 2
        return np.log10(np.maximum(power @ self.mel, 1e-10)).astype(np.float32)


SILENT_BELS = -10.0


def windows(mel, ends):
    """Normalised decision windows: for each capture frame j (in ends), mel frames 2j+2-WINDOW ...
    2j+1 (silence before the start), floored FLOOR_BELS under the window's max, minus the max."""
    pad = np.concatenate([np.full((WINDOW, MELS), SILENT_BELS, np.float32), mel])
    idx = (2 * np.asarray(ends) + 2)[:, None] + np.arange(WINDOW)[None, :]   # into pad
    w = pad[idx]                                                            # (B, WINDOW, MELS)
    top = w.max(axis=(1, 2), keepdims=True)
    w = np.maximum(w, top - FLOOR_BELS) - top
    return (w.reshape(len(ends), -1) / 4.0 + 1.0).astype(np.float32)


def labels(clean):
    """Speech per 20 ms frame of the clean speech track: RMS within 35 dB of the loudest frame
    and above -60 dBFS, gaps of up to 60 ms inside speech filled (stops, closures)."""
    x = clean.astype(np.float64)
    n = len(x) // FRAME
    rms = np.sqrt((x[: n * FRAME].reshape(n, FRAME) ** 2).mean(axis=1) + 1e-9)
    on = (rms > rms.max() * 10 ** (-35 / 20)) & (rms > 32768 * 10 ** (-60 / 20))
    idx = np.nonzero(on)[0]
    for a, b in zip(idx[:-1], idx[1:]):
        if 1 < b - a <= 4:
            on[a:b] = True
    return on


# --- noise -------------------------------------------------------------------------------

def hum(rng, n):
    t = np.arange(n) / SR
    f0 = rng.choice([50.0, 60.0, 100.0, 120.0]) * rng.uniform(0.98, 1.02)
    x = np.zeros(n)
    for h in range(1, int(rng.integers(2, 12))):
        x += rng.uniform(0.1, 1.0) / h ** rng.uniform(0, 1.5) * np.sin(2 * np.pi * f0 * h * t + rng.uniform(0, 6.28))
    return x * (1 + 0.2 * np.sin(2 * np.pi * rng.uniform(0.1, 2) * t))


def tones(rng, n):
    """Beeps, alarms and held notes: runs of one or two sines with gaps."""
    x, pos = np.zeros(n), 0
    while pos < n:
        dur = int(rng.uniform(0.05, 1.5) * SR)
        seg = np.arange(min(dur, n - pos)) / SR
        f = rng.uniform(200, 4000)
        y = np.sin(2 * np.pi * f * seg) + (rng.random() < 0.5) * 0.5 * np.sin(2 * np.pi * f * rng.uniform(1.2, 2.5) * seg)
        r = min(len(seg), 80)
        y[:r] *= np.linspace(0, 1, r)
        y[len(y) - r:] *= np.linspace(1, 0, r)
        x[pos:pos + len(seg)] = y
        pos += len(seg) + int(rng.uniform(0, 0.6) * SR)
    return x


def clatter(rng, n):
    """Dishes, keys, footsteps: decaying bursts of filtered noise or ringing partials."""
    x = np.zeros(n) + 0.02 * rng.standard_normal(n)
    pos = 0
    while pos < n:
        pos += int(rng.exponential(0.25) * SR) + 40
        if pos >= n:
            break
        m = min(n - pos, int(rng.uniform(0.02, 0.4) * SR))
        t = np.arange(m) / SR
        env = np.exp(-t / rng.uniform(0.005, 0.12))
        if rng.random() < 0.5:
            b = rng.standard_normal(m)
            b = lfilter([1, -rng.uniform(-0.9, 0.9)], [1], b)
        else:
            b = sum(np.sin(2 * np.pi * rng.uniform(800, 6000) * t) for _ in range(3))
        x[pos:pos + m] += rng.uniform(0.3, 3) * env * b
    return x


def train_fan(rng, n):
    x = augment.coloured_noise(rng, n, rng.uniform(0.8, 2.0))
    x = lfilter([1 - rng.uniform(0.5, 0.97)], [1, -rng.uniform(0.5, 0.97)], x)
    t = np.arange(n) / SR
    return x * (1 + 0.3 * np.sin(2 * np.pi * rng.uniform(0.2, 4) * t))


def drone(rng, n):
    """Engine or motor: a buzzy pulse train with jitter, low-passed."""
    f0 = rng.uniform(30, 300)
    t = np.arange(n) / SR
    phase = 2 * np.pi * np.cumsum(f0 * (1 + 0.01 * np.sin(2 * np.pi * rng.uniform(0.1, 1) * t))) / SR
    x = np.sign(np.sin(phase)) + 0.3 * rng.standard_normal(n)
    return lfilter([0.2], [1, -0.8], x)


def chords(rng, n):
    """Piano-, organ- and guitar-like chords and arpeggios: 2-5 notes, 1-8 partials with a
    random tilt, a short attack and a decay or a hold, 0.1-1.2 s each."""
    x, pos = np.zeros(n), 0
    while pos < n:
        dur = min(n - pos, int(rng.uniform(0.1, 1.2) * SR))
        root = 65.0 * 2 ** (rng.integers(0, 36) / 12.0)
        notes = [root * 2 ** (int(k) / 12.0) for k in rng.choice([0, 3, 4, 5, 7, 9, 10, 12, 14, 16, 19], size=int(rng.integers(2, 6)), replace=False)]
        stagger = rng.uniform(0, 0.08) if rng.random() < 0.4 else 0.0
        tb = dict(harmonics=int(rng.integers(1, 9)), tilt=rng.uniform(0.3, 2.0), odd_only=rng.random() < 0.2,
                  vibrato=(rng.uniform(4, 7), rng.uniform(0, 0.008) if rng.random() < 0.3 else 0.0),
                  attack=rng.uniform(0.002, 0.05), decay=rng.uniform(0.05, 1.0), sustain=rng.uniform(0, 0.7))
        for i, f0 in enumerate(notes):
            a = pos + int(i * stagger * SR)
            if a >= pos + dur:
                break
            x[a:pos + dur] += augment._note(rng, pos + dur - a, f0, **tb)
        pos += dur
    return x


NOISES = {
    "white": lambda r, n: augment.coloured_noise(r, n, 0),
    "pink": lambda r, n: augment.coloured_noise(r, n, 1),
    "brown": lambda r, n: augment.coloured_noise(r, n, 2),
    "music": augment.train_music,
    "hum": hum, "tones": tones, "clatter": clatter, "fan": train_fan, "drone": drone,
    "chords": chords, "chords2": chords, "music2": augment.train_music,   # music is the hard case: drawn 2x as often
}


def noise(rng, n):
    kinds = list(NOISES)
    x = NOISES[kinds[rng.integers(len(kinds))]](rng, n)
    if rng.random() < 0.3:   # two at once
        x = x / (np.std(x) + 1e-9) + rng.uniform(0.2, 1) * (lambda y: y / (np.std(y) + 1e-9))(NOISES[kinds[rng.integers(len(kinds))]](rng, n))
    return x / (np.std(x) + 1e-12)


# --- speech ------------------------------------------------------------------------------

def read_wav(path):
    with wave.open(path) as w:
        a = np.frombuffer(w.readframes(w.getnframes()), np.int16)
        if w.getnchannels() > 1:
            a = a.reshape(-1, w.getnchannels())[:, 0]
        return speech.to16k(a, w.getframerate())


def human_recordings():
    d = "/usr/share/sounds/alsa"
    if not os.path.isdir(d):
        sys.exit("voice_train.py: /usr/share/sounds/alsa is missing; install it with: apt-get install alsa-utils")
    return [read_wav(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".wav") and "Noise" not in f]


def utterances(n_per_engine, seed):
    os.makedirs(CACHE, exist_ok=True)
    key = hashlib.sha1(repr((2, n_per_engine, seed)).encode()).hexdigest()[:10]  # the speech only
    path = os.path.join(CACHE, f"speech-{key}.npz")
    if os.path.exists(path):
        z = np.load(path, allow_pickle=True)
        return list(z["clips"]), list(z["engine"])
    rng = np.random.default_rng(seed)
    sentences = speech.docstring_sentences("train")
    clips, names = [], []
    for eng in voices.engines():
        t0 = time.time()
        # Piper is ~20 times slower than the others on this CPU: a quarter as many from it.
        count = n_per_engine // 4 if eng.name.startswith("piper") else n_per_engine
        for i in range(count):
            text = sentences[rng.integers(len(sentences))]
            a = eng.render(text, rng)
            if len(a) >= 3200:
                clips.append(a)
                names.append(eng.name)
        log(f"{eng.name}: {count} utterances in {time.time() - t0:.0f} s")
    np.savez(path, clips=np.array(clips, dtype=object), engine=np.array(names))
    return clips, names


def scene(rng, utts, humans):
    """One training clip: lead, one or two utterances with a gap, tail; noise and gain.
    Returns (int16 audio, per-frame labels)."""
    sil = lambda s: np.zeros(int(s * SR))
    noise_only = rng.random() < 0.25
    parts = [sil(rng.uniform(0.1, 1.2))]
    if not noise_only:
        for k in range(1 if rng.random() < 0.6 else 2):
            if k:
                parts.append(sil(rng.uniform(0.15, 1.0)))
            u = humans[rng.integers(len(humans))] if rng.random() < 0.08 else utts[rng.integers(len(utts))]
            parts.append(u.astype(np.float64) * rng.uniform(0.3, 1.0))
    else:
        parts.append(sil(rng.uniform(1.5, 4.0)))
    parts.append(sil(rng.uniform(0.2, 1.2)))
    clean = np.concatenate(parts)
    lab = labels(clean) if not noise_only else np.zeros(len(clean) // FRAME, bool)
    x = clean
    if not noise_only and rng.random() < 0.3:
        x = augment.reverberate(x, augment.train_rir(rng))
    n = len(x)
    if noise_only:
        x = noise(rng, n)
        x = x * (1 + rng.uniform(0, 0.8) * np.sin(2 * np.pi * rng.uniform(0.05, 0.5) * np.arange(n) / SR + rng.uniform(0, 6.28)))
    elif rng.random() < 0.85:
        x = augment.mix_noise(x, noise(rng, n), float(rng.choice([30, 20, 15, 10, 5, 0, -5])))
    peak = np.max(np.abs(x)) + 1e-9
    x = x / peak * 32767 * 10 ** (rng.uniform(-40, -2) / 20)
    # A microphone's own hiss, so that nothing is digital silence.
    x = x + rng.standard_normal(n) * 32768 * 10 ** (rng.uniform(-85, -60) / 20)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16), lab


class Frames:
    """Every clip's mel frames in one array (WINDOW silent frames before each clip) and, per
    training example, where its window starts: windows are cut out batch by batch."""
    def __init__(self, rng, count, utts, humans, mels):
        M, starts, Y, pos = [], [], [], 0
        for i in range(count):
            a, lab = scene(rng, utts, humans)
            m = mels.frames(a)
            nf = min(len(lab), len(m) // 2)
            M += [np.full((WINDOW, MELS), SILENT_BELS, np.float32), m[: 2 * nf]]
            starts.append(pos + 2 * np.arange(nf) + 2)
            Y.append(lab[:nf])
            pos += WINDOW + 2 * nf
        self.M = np.concatenate(M)
        self.starts = np.concatenate(starts)
        self.Y = np.concatenate(Y).astype(np.float32)

    def __len__(self):
        return len(self.Y)

    def x(self, b):
        w = self.M[self.starts[b][:, None] + np.arange(WINDOW)[None, :]]
        top = w.max(axis=(1, 2), keepdims=True)
        w = np.maximum(w, top - FLOOR_BELS) - top
        return (w.reshape(len(b), -1) / 4.0 + 1.0).astype(np.float32)


# --- the network (numpy, Adam) -----------------------------------------------------------

def init(rng, sizes):
    P = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        P += [(rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32), np.zeros(b, np.float32)]
    return P


def forward(P, x):
    acts = [x]
    h = x
    for i in range(0, len(P), 2):
        h = h @ P[i] + P[i + 1]
        if i + 2 < len(P):
            h = np.maximum(h, 0)
        acts.append(h)
    return acts


def train(P, D, V, epochs, rng, batch=256, lr=1e-3, on_best=None):
    Y, Yv = D.Y, V.Y
    m = [np.zeros_like(p) for p in P]
    v = [np.zeros_like(p) for p in P]
    step = 0
    pos_w = (len(Y) - Y.sum()) / max(Y.sum(), 1)
    best = (1e9, [p.copy() for p in P])
    for ep in range(epochs):
        order = rng.permutation(len(D))
        t0, loss_sum = time.time(), 0.0
        for s in range(0, len(order) - batch + 1, batch):
            b = order[s:s + batch]
            x, y = D.x(b), Y[b]
            acts = forward(P, x)
            z = acts[-1][:, 0]
            p = 1 / (1 + np.exp(-z))
            w = np.where(y > 0, np.sqrt(pos_w), 1.0 / np.sqrt(pos_w))
            loss_sum += float(np.mean(w * -(y * np.log(p + 1e-7) + (1 - y) * np.log(1 - p + 1e-7))))
            g = ((p - y) * w / batch)[:, None].astype(np.float32)
            grads = [None] * len(P)
            for i in range(len(P) - 2, -1, -2):
                grads[i] = acts[i // 2].T @ g + 1e-5 * P[i]
                grads[i + 1] = g.sum(axis=0)
                if i:
                    g = (g @ P[i].T) * (acts[i // 2] > 0)
            step += 1
            for k in range(len(P)):
                m[k] = 0.9 * m[k] + 0.1 * grads[k]
                v[k] = 0.999 * v[k] + 0.001 * grads[k] ** 2
                P[k] -= lr * (m[k] / (1 - 0.9 ** step)) / (np.sqrt(v[k] / (1 - 0.999 ** step)) + 1e-8)
        pv = predict(P, V)
        vloss = float(np.mean(-(Yv * np.log(pv + 1e-7) + (1 - Yv) * np.log(1 - pv + 1e-7))))
        acc = float(np.mean((pv >= 0.5) == (Yv > 0)))
        log(f"epoch {ep + 1}/{epochs}: train {loss_sum / max(1, len(order) // batch):.4f}, validation loss {vloss:.4f}, accuracy {acc * 100:.2f} % ({time.time() - t0:.0f} s)")
        if vloss < best[0]:
            best = (vloss, [p.copy() for p in P])
            if on_best:
                on_best(best[1], pv)
        lr *= 0.85
    return best[1]


def predict(P, X):
    """X: a Frames or an array of windows."""
    out = []
    for s in range(0, len(X), 4096):
        b = np.arange(s, min(s + 4096, len(X)))
        z = forward(P, X.x(b) if isinstance(X, Frames) else X[b])[-1][:, 0]
        out.append(1 / (1 + np.exp(-z)))
    return np.concatenate(out)


def golden_signal():
    """A fixed signal the Swift test recomputes: a gliding, amplitude-modulated tone over
    a deterministic pseudo-noise (LCG)."""
    n = 16000 * 2
    t = np.arange(n) / SR
    tone = 6000 * np.sin(2 * np.pi * (150 * t + 200 * t * t)) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))
    state, noise_ = 12345, np.zeros(n)
    for i in range(n):
        state = (state * 1103515245 + 12345) % 2 ** 31
        noise_[i] = (state / 2 ** 31 - 0.5) * 2000
    return np.clip(np.round(tone + noise_), -32768, 32767).astype(np.int16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-engine", type=int, default=500)
    ap.add_argument("--scenes", type=int, default=6000)
    ap.add_argument("--epochs", type=int, default=14)
    ap.add_argument("--hidden", type=int, nargs="+", default=[64, 32])
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    mels = Mels()
    utts, names = utterances(args.per_engine, args.seed)
    humans = human_recordings()
    log(f"{len(utts)} utterances ({', '.join(sorted(set(names)))}), {len(humans)} human recordings")
    # Validation speech: the last tenth of each engine's utterances, never trained on.
    order = rng.permutation(len(utts))
    cut = len(utts) // 10
    val_u, train_u = [utts[i] for i in order[:cut]], [utts[i] for i in order[cut:]]
    t0 = time.time()
    D = Frames(rng, args.scenes, train_u, humans[:-2], mels)
    V = Frames(rng, max(args.scenes // 10, 50), val_u, humans[-2:], mels)
    log(f"{len(D)} training frames ({D.Y.mean() * 100:.1f} % speech), {len(V)} validation ({time.time() - t0:.0f} s)")
    sizes = [WINDOW * MELS] + args.hidden + [1]
    engines = sorted(set(names)) + ["alsa-utils recordings"]
    P = train(init(rng, sizes), D, V, args.epochs, rng, on_best=lambda P, pv: write(P, pv, V.Y, sizes, engines, mels))
    log("done")


def write(P, pv, Yv, sizes, engines, mels):
    """Writes models/voice.json + voice.bin; the threshold is the best validation accuracy
    (training engines only)."""
    grid = np.linspace(0.2, 0.8, 25)
    accs = [np.mean((pv >= th) == (Yv > 0)) for th in grid]
    threshold = float(grid[int(np.argmax(accs))])
    blob = b"".join(p.astype("<f4").tobytes() for p in P)
    g = golden_signal()
    gp = predict(P, windows(mels.frames(g), np.arange(len(g) // FRAME)))
    manifest = {
        "format": "clawvoice-voice-detector", "version": 1,
        "source": "models/training/voice_train.py (make voice-model)",
        "trainingEngines": engines,
        "frontEnd": "frontend.json", "frameSamples": FRAME, "hopSamples": HOP, "fftSize": NFFT,
        "mels": MELS, "windowFrames": WINDOW, "floorBels": FLOOR_BELS, "silentBels": SILENT_BELS,
        "inputScale": 0.25, "inputOffset": 1.0, "layers": sizes, "threshold": threshold,
        "weights": "voice.bin", "weightsBytes": len(blob), "weightsSHA256": hashlib.sha256(blob).hexdigest(),
        "validationAccuracy": round(float(max(accs)), 4),
        "golden": {"signal": "voice_train.golden_signal", "probabilities": [round(float(p), 5) for p in gp]},
    }
    with open(os.path.join(MODELS, "voice.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(MODELS, "voice.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    log(f"wrote models/voice.json + voice.bin (threshold {threshold:.3f}, validation accuracy {max(accs) * 100:.2f} %)")


if __name__ == "__main__":
    main()
