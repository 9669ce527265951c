"""Streams of speech back to back, as a head hears a room: rule v2's validation stream and the
mining stream (training engines), and the audio of any such stream (stream_audio: the unseen-voice
stream of unseen_stream.py too). Each 30 s segment goes through its own training room and noise.
"""
import time

import numpy as np

import frontend
from canvas import finish, log


def mining_stream(feat, rng, pool, noise, seconds, seg_s=30):
    """Training sentences (the training pool, never the validation sentences) back to back, as
    the validation stream is built, in 30 s segments, each through its own random speaker warp,
    room and noise: the source of hard negatives (recipe v4's --mine-hours). (n, 375, 96)."""
    out, t0 = [], time.time()
    n = int(seconds // seg_s)
    order = rng.permutation(len(pool))
    i = 0
    for j in range(n):
        seg = []
        while sum(map(len, seg)) < seg_s * 16000:
            seg += [pool[order[i % len(order)]].astype(np.float64), np.zeros(int(rng.uniform(0.1, 1.0) * 16000))]
            i += 1
        y = finish(rng, np.concatenate(seg)[:seg_s * 16000], noise, snr=(3.0, 30.0))
        out.append(feat(y)[:seg_s * 16000 // frontend.CHUNK])
        if (j + 1) % 20 == 0 or j + 1 == n:
            el = time.time() - t0
            log(f"  mining stream: {j + 1}/{n} segments of {seg_s} s ({el:.0f} s, ~{el / (j + 1) * (n - j - 1):.0f} s left)")
    E = np.stack(out)
    return E, np.zeros(E.shape[:2], np.int8), np.zeros(len(E), np.int8)


def stream_audio(rng, pool, noise, seconds=None, gap=(0.1, 1.0), seg_s=30):
    """The pool's clips back to back in a random order, in segments of about seg_s seconds, each
    through its own training room and noise at 3-30 dB (int16): until `seconds` of audio, the clips
    taken again in turn, or each clip once when seconds is None."""
    total, parts, i = 0, [], 0
    order = rng.permutation(len(pool))

    def more():
        return total < seconds * 16000 if seconds is not None else i < len(pool)

    while more():
        seg = []
        while sum(map(len, seg)) < seg_s * 16000 and (seconds is not None or i < len(pool)):
            seg += [pool[order[i % len(order)]].astype(np.float64), np.zeros(int(rng.uniform(*gap) * 16000))]
            i += 1
        y = finish(rng, np.concatenate(seg), noise, snr=(3.0, 30.0))
        parts.append(y)
        total += len(y)
    return np.concatenate(parts)


def validation_stream(feat, rng, pool, noise, seconds):
    """Training-engine speech never trained on, back to back in training rooms and noise, as
    embeddings (with the zero-history prefix of a stream start)."""
    audio = stream_audio(rng, pool, noise, seconds)
    return feat(audio, warp=False), len(audio) / 16000
