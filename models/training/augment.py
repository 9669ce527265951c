"""Noise and reverberation. Training and test use different noise kinds and room models, so
the held-out figures are on conditions the models never saw.

train noise: white, pink, brown, babble (training voices)
test noise:  fan (low-passed rumble with mains hum), music (random chords), babble (test voices)
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


def train_rir(rng):
    rt60 = rng.uniform(0.15, 0.7)
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
