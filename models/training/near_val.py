"""Rule v2's near-miss limit read on more canvases (--near-val N): extra validation canvases that no
head trains on, in the validation's own mix of the limit's kinds (near misses, the other default
triggers, cut-short triggers). With about 200 such canvases, 3 % is six wakes, and the threshold
it sets moved 0.08 with the seed (stop 52); these canvases are the same for every seed, so a seed
changes the head, not the set that measures it. Built once per trigger and cached. The near
misses are the trigger's own list (not --phonetic-near's additions, which only a new phrase's
training canvases get)."""
import zlib

import numpy as np

from cache_file import cached
from canvas import Featurizer, negatives, partials, positives
from render import DEFAULT_TRIGGERS, file_stem, render_trigger

# The validation's mix of the near-miss limit's kinds (stop 52's seeds: 142 : 48 : 20 of 210).
SHARES = {"near": 2 / 3, "other": 7 / 30, "cut": 1 / 10}


def counts(n):
    """How many near-miss, other-trigger and cut-short canvases make n (the rest to near misses)."""
    other, cut = int(n * SHARES["other"]), int(n * SHARES["cut"])
    return n - other - cut, other, cut


def near_validation(n, fe, trigger, stem, engines, near, all_clips, pool, noise, ck, log):
    """n canvases (embeddings, labels, kinds) for validation only. Their draws depend on the trigger
    alone, never on the seed."""
    n_near, n_other, n_cut = counts(n)
    base = 601 + zlib.crc32(stem.encode()) % 1000
    feat = lambda k: Featurizer(fe, np.random.default_rng(base + k))
    out = [cached(ck(f"nearval-{stem}-near{n_near}"), lambda: negatives(
               feat(0), np.random.default_rng(base + 10), near, pool, noise, {"near": n_near, "speech": 0, "noise": 0})),
           cached(ck(f"nearval-{stem}-cut{n_cut}"), lambda: partials(
               feat(1), np.random.default_rng(base + 11), all_clips, pool, noise, n_cut))]
    others = [t for t in DEFAULT_TRIGGERS if file_stem(t) != stem]
    for i, t in enumerate(others):
        m = n_other // len(others) + (1 if i < n_other % len(others) else 0)
        oc = [c for eng in engines for c in render_trigger(eng, t)[0]]
        e, y, k = cached(ck(f"nearval-{stem}-other-{file_stem(t)}{m}"), lambda oc=oc, m=m, i=i: positives(
            feat(2 + i), np.random.default_rng(base + 12 + i), oc, pool, noise, m, kind=2))
        out.append((e, np.zeros_like(y), k))          # another trigger is a negative here
    E, Y, K = (np.concatenate([p[j] for p in out]) for j in range(3))
    log(f"near-miss validation: {len(E)} more canvases never trained on ({n_near} near misses, {n_other} other "
        f"triggers, {n_cut} cut short) for rule v2's near-miss limit")
    return E, Y, K
