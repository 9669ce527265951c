"""The training halves of the recorded human speech sets, as (name, int16 at 16 kHz) lists: the voice
prompts (prompts.py), Tux Paint's stamp descriptions (stamps.py) and a game's voice acting
(game_speech.py). What --prompt-negatives, --stamp-negatives and --game-negatives crop canvases from,
and what --mine-source human mines hard negatives from (train_data.py). The evaluation halves are
never read here: game_negatives.py, real_negatives.py and stamp_negatives.py score them.

Each list comes with a key that changes when its list of names does (and, for the stamps and the game,
its decoder), so a cache named by it is rebuilt then (cache_file.cached). The prompt canvases' cache
(prompts-N) predates the key and is named without it, as it always was.
"""
import zlib

import numpy as np


def prompt_names():
    """The voice prompts' training half as (name, path), and its key (read with prompt_recordings)."""
    import prompts
    files = [(f"{lang}/{name}", path) for lang in prompts.SETS for name, path in prompts.prompts(lang, "train")[0]]
    return files, zlib.crc32(" ".join(name for name, _ in files).encode())


def prompt_recordings(files):
    """The prompts at 8 kHz, resampled to the front end's 16 kHz; a prompt in another format is left out."""
    from scipy.signal import resample_poly

    import prompts
    recs = []
    for name, path in files:
        data = prompts.read(path)
        if data is not None:
            recs.append((name, np.clip(resample_poly(np.frombuffer(data, "<i2").astype(np.float64), 2, 1),
                                       -32768, 32767).astype(np.int16)))
    return recs


def stamp_names():
    """The stamp descriptions' training half as (name, path), and its key (read with stamp_recordings)."""
    import stamps
    files = [f for fs in stamps.negatives("train")[0].values() for f in fs]
    return files, zlib.crc32(" ".join(stamps.DECODER + [name for name, _ in files]).encode())


def stamp_recordings(files):
    import stamps
    return [(name, np.frombuffer(stamps.read(path), "<i2").copy()) for name, path in files]


def game_names():
    """The game lines' training half as (name, where), and its key (read with game_recordings)."""
    import game_speech
    lines = game_speech.negatives("train")
    return lines, zlib.crc32(" ".join(game_speech.DECODER + [name for name, _ in lines]).encode())


def game_recordings(lines):
    import game_speech
    return [(name, np.frombuffer(data, "<i2").copy())
            for (name, _), data in zip(lines, game_speech.read_many([w for _, w in lines]))]
