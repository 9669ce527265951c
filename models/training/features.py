"""Log-mel features, the reference definition.

Sources/WakeWord/LogMelFeatures.swift computes the same numbers streaming; the golden
fixture Tests/WakeWordTests/Fixtures/features.json is written from this file.

  16 kHz mono Int16 -> x / 32768
  frame t covers samples [160 t, 160 t + 400)           (25 ms window, 10 ms hop)
  subtract the frame mean, multiply by a periodic Hann window of 400
  zero-pad to 512, real FFT, power |X_k|^2 for k = 0 ... 256
  40 triangular filters on the HTK mel scale, 60 ... 7600 Hz, peak weight 1, no area norm
  ln(energy + 1e-6)
"""
import numpy as np

SAMPLE_RATE = 16000
WINDOW = 400
HOP = 160
FFT = 512
MELS = 40
FMIN = 60.0
FMAX = 7600.0
LOG_FLOOR = 1e-6


def hz_to_mel(f):
    return 2595.0 * np.log10(1.0 + np.asarray(f, dtype=np.float64) / 700.0)


def mel_to_hz(m):
    return 700.0 * (10.0 ** (np.asarray(m, dtype=np.float64) / 2595.0) - 1.0)


def mel_filterbank():
    """40 x 257 weights."""
    edges = mel_to_hz(np.linspace(hz_to_mel(FMIN), hz_to_mel(FMAX), MELS + 2))
    freqs = np.arange(FFT // 2 + 1) * SAMPLE_RATE / FFT
    fb = np.zeros((MELS, FFT // 2 + 1))
    for m in range(MELS):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        rise = (freqs - lo) / (mid - lo)
        fall = (hi - freqs) / (hi - mid)
        fb[m] = np.maximum(0.0, np.minimum(rise, fall))
    return fb


_FB = mel_filterbank()
_HANN = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(WINDOW) / WINDOW)


def frame_count(n_samples):
    return 0 if n_samples < WINDOW else 1 + (n_samples - WINDOW) // HOP


def logmel(samples):
    """samples: int16 (or float already scaled to int16 units) 1-D array -> [frames, 40] float64."""
    x = np.asarray(samples, dtype=np.float64) / 32768.0
    n = frame_count(len(x))
    if n == 0:
        return np.zeros((0, MELS))
    idx = np.arange(WINDOW)[None, :] + HOP * np.arange(n)[:, None]
    frames = x[idx]
    frames = frames - frames.mean(axis=1, keepdims=True)
    frames = frames * _HANN
    spec = np.fft.rfft(frames, n=FFT, axis=1)
    power = spec.real ** 2 + spec.imag ** 2
    return np.log(power @ _FB.T + LOG_FLOOR)
