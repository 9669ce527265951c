"""Noise and reverberation. Training and test use different noise kinds and room models, so
the held-out figures are on conditions the models never saw.

train noise: white, pink, brown, babble (training voices), train_music (its own generator:
             melody, bass, pads and drums from ADSR-shaped notes with random timbres)
test noise:  fan (low-passed rumble with mains hum), music (random chords), babble (test voices)
Training never calls fan_noise, music_noise or test_rir; evaluation never calls train_music or
train_rir.
train rooms: exponentially decaying Gaussian tails, RT60 0.15 ... 0.7 s
test rooms:  sparse early reflections plus a decaying tail, RT60 0.2 ... 0.9 s
"""
import numpy as np
from scipy.signal import fftconvolve, lfilter

SR = 16000


def coloured_noise(rng, n, exponent):
    """1/f^exponent noise: 0 white, 1 pink, 2 brown."""
    spec = rng.standard_normal(n // 2 + 1) + 1j * rng.standard_normal(n // 2 + 1)
    f = np.arange(n // 2 + 1, dtype=np.float64)
    f[0] = 1.0
    spec = spec / f ** (exponent / 2.0)
    x = np.fft.irfft(spec, n)
    return x / (np.std(x) + 1e-12)


def babble(rng, n, pool):
    out = np.zeros(n)
    for _ in range(rng.integers(3, 7)):
        u = pool[rng.integers(len(pool))].astype(np.float64)
        if len(u) < n:
            u = np.pad(u, (0, n - len(u)))
        start = rng.integers(0, len(u) - n + 1)
        out += u[start:start + n] / (np.std(u) + 1e-9)
    return out / (np.std(out) + 1e-12)


def _note(rng, n_samples, f0, harmonics, tilt, odd_only, vibrato, attack, decay, sustain):
    """One note: additive partials (amplitude k^-tilt, odd partials only for a hollow timbre),
    vibrato, an attack / decay / sustain envelope and a short release."""
    t = np.arange(n_samples) / SR
    rate, depth = vibrato
    phase = 2 * np.pi * f0 * (t + depth / (2 * np.pi * rate) * np.sin(2 * np.pi * rate * t))
    out = np.zeros(n_samples)
    for k in range(1, harmonics + 1):
        if odd_only and k % 2 == 0:
            continue
        if f0 * k > 7600:
            break
        out += np.sin(k * phase + rng.uniform(0, 6.28)) / k ** tilt
    a = max(1, int(attack * SR))
    env = np.full(n_samples, sustain)
    env[:min(a, n_samples)] = np.linspace(0, 1, a)[:n_samples]
    d = np.arange(max(0, n_samples - a))
    env[a:] = sustain + (1 - sustain) * np.exp(-d / (decay * SR))
    r = min(n_samples, int(0.03 * SR))
    env[n_samples - r:] *= np.linspace(1, 0, r)
    return out * env


def _drum(rng, n_samples, kind):
    t = np.arange(n_samples) / SR
    if kind == 0:       # kick: a falling sine
        f = 45 + 110 * np.exp(-t / 0.03)
        return np.sin(2 * np.pi * np.cumsum(f) / SR) * np.exp(-t / rng.uniform(0.08, 0.2))
    x = rng.standard_normal(n_samples)
    if kind == 1:       # snare: band of noise plus a tone
        x = lfilter([1, 0, -1], [1, -1.2, 0.6], x) + 0.5 * np.sin(2 * np.pi * rng.uniform(160, 240) * t)
        return x * np.exp(-t / rng.uniform(0.05, 0.15))
    x = np.diff(x, prepend=0)  # hi-hat: bright noise, very short
    return x * np.exp(-t / rng.uniform(0.01, 0.05))


def train_music(rng, n):
    """Music-like noise for TRAINING: a tempo, a key and a scale; a melody line, a bass line,
    optional sustained pads and optional drums, each with its own random timbre. Not the
    evaluation's music_noise (fixed three-partial chords with plain exponential decays)."""
    out = np.zeros(n)
    beat = rng.uniform(0.12, 0.6)
    key = 55.0 * 2 ** (rng.integers(0, 12) / 12.0)
    scale = [[0, 2, 4, 5, 7, 9, 11], [0, 2, 3, 5, 7, 8, 10], [0, 3, 5, 7, 10], [0, 2, 4, 7, 9]][rng.integers(4)]

    def pitch(octave):
        return key * 2 ** (octave + scale[rng.integers(len(scale))] / 12.0)

    def timbre():
        return dict(harmonics=int(rng.integers(1, 12)), tilt=rng.uniform(0.5, 2.5), odd_only=rng.random() < 0.3,
                    vibrato=(rng.uniform(4, 7), rng.uniform(0, 0.01) if rng.random() < 0.5 else 0.0),
                    attack=rng.uniform(0.003, 0.08), decay=rng.uniform(0.05, 0.8), sustain=rng.uniform(0, 0.6))

    layers = [("melody", rng.integers(2, 5), 1.0), ("bass", rng.integers(0, 2), rng.uniform(0.3, 1.0))]
    if rng.random() < 0.5:
        layers.append(("pad", rng.integers(1, 4), rng.uniform(0.2, 0.7)))
    for name, octave, gain in layers:
        tb = timbre()
        if name == "pad":
            tb.update(attack=rng.uniform(0.05, 0.3), sustain=rng.uniform(0.5, 1.0))
        layer, pos = np.zeros(n), int(rng.uniform(-1, 0) * beat * SR)
        while pos < n:
            length = int(beat * SR * (rng.choice([0.5, 1, 1, 2, 4]) if name != "pad" else rng.choice([4, 8])))
            if rng.random() < (0.15 if name != "pad" else 0.0):   # a rest
                pos += length
                continue
            tones = [pitch(octave)] if name != "pad" else [pitch(octave) for _ in range(rng.integers(2, 5))]
            a, b = max(0, pos), min(n, pos + length)
            if b > a:
                for f0 in tones:
                    note = _note(rng, length, f0, **tb)
                    layer[a:b] += note[a - pos:b - pos]
            pos += length
        out += gain * layer / (np.std(layer) + 1e-9)
    if rng.random() < 0.5:
        pattern = [rng.integers(3) for _ in range(8)]
        drums, pos, i = np.zeros(n), 0, 0
        step = int(beat * SR / 2)
        while pos < n:
            if rng.random() < 0.8:
                d = _drum(rng, min(step * 2, n - pos), pattern[i % 8])
                drums[pos:pos + len(d)] += d
            pos += step
            i += 1
        out += rng.uniform(0.2, 0.8) * drums / (np.std(drums) + 1e-9)
    return out / (np.std(out) + 1e-12)


def fan_noise(rng, n):
    x = coloured_noise(rng, n, 1.5)
    b, a = [0.05], [1.0, -0.95]
    x = lfilter(b, a, x)
    t = np.arange(n) / SR
    mains = rng.choice([50.0, 60.0])
    for h in range(1, 5):
        x += rng.uniform(0.05, 0.3) * np.std(x) * np.sin(2 * np.pi * mains * h * t + rng.uniform(0, 6.28))
    return x / (np.std(x) + 1e-12)


def music_noise(rng, n):
    out = np.zeros(n)
    t = np.arange(n) / SR
    pos = 0
    while pos < n:
        dur = int(rng.uniform(0.2, 0.8) * SR)
        seg = slice(pos, min(n, pos + dur))
        env = np.exp(-np.arange(seg.stop - seg.start) / (rng.uniform(0.1, 0.5) * SR))
        root = 110.0 * 2 ** (rng.integers(0, 24) / 12.0)
        for semis in rng.choice([0, 3, 4, 7, 10, 12], size=3, replace=False):
            f = root * 2 ** (semis / 12.0)
            for k in range(1, 4):
                out[seg] += env * np.sin(2 * np.pi * f * k * t[seg]) / k
        pos += dur
    return out / (np.std(out) + 1e-12)


def train_rir(rng, rt60_range=(0.15, 0.7)):
    rt60 = rng.uniform(*rt60_range)
    n = int(rt60 * SR)
    t = np.arange(n) / SR
    h = rng.standard_normal(n) * np.exp(-6.9 * t / rt60) * rng.uniform(0.1, 0.5)
    h[0] = 1.0
    return h / np.sqrt(np.sum(h ** 2))


def test_rir(rng):
    rt60 = rng.uniform(0.2, 0.9)
    n = int(rt60 * SR)
    t = np.arange(n) / SR
    h = np.zeros(n)
    h[0] = 1.0
    for _ in range(8):
        i = rng.integers(int(0.002 * SR), int(0.05 * SR))
        h[i] += rng.uniform(-0.6, 0.6)
    tail_start = int(0.03 * SR)
    h[tail_start:] += rng.standard_normal(n - tail_start) * np.exp(-6.9 * t[tail_start:] / rt60) * 0.2
    return h / np.sqrt(np.sum(h ** 2))


def reverberate(x, h):
    return fftconvolve(x, h)[: len(x)]


def mix_noise(speech, noise, snr_db):
    """speech and noise float; SNR measured over the speech's active (non-silent) part."""
    active = np.abs(speech) > 1e-3 * (np.max(np.abs(speech)) + 1e-9)
    p_s = np.mean(speech[active] ** 2) if active.any() else 1e-9
    p_n = np.mean(noise ** 2) + 1e-12
    return speech + noise * np.sqrt(p_s / (p_n * 10 ** (snr_db / 10.0)))


def to_int16(x, rng, peak_dbfs_range=(-30.0, -3.0)):
    peak = np.max(np.abs(x)) + 1e-9
    target = 32767 * 10 ** (rng.uniform(*peak_dbfs_range) / 20.0)
    return np.clip(np.round(x * target / peak), -32768, 32767).astype(np.int16)
