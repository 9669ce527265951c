"""The training cache's files (.cache/examples/*.npz): built once by whichever training needs them
first, loaded by the rest. Several trainings run side by side, so building is guarded by an
advisory lock on <file>.lock (the kernel drops it when a training dies, so nothing goes stale); a
<file>.building marker beside it only tells other trainings which file is being built now.
`python cache_file.py` checks that (four processes at once, and a builder that dies).
"""
import fcntl
import os
import time

import numpy as np

import render

log = render.log


def _load(path):
    with np.load(path) as z:
        return z["E"], z["Y"], z["K"]


def cached(path, build, wait_only=False):
    """Loads path, or builds and saves it; while another training builds it, waits for its file.
    wait_only: never build (None when the file neither exists nor is being built)."""
    if os.path.exists(path):
        return _load(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    marker = path + ".building"
    with open(path + ".lock", "a") as lock:
        t0 = time.time()
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:               # another training holds it: it is building this file
                if int(time.time() - t0) % 60 < 5 and time.time() - t0 > 5:
                    log(f"  waiting for {os.path.basename(path)} (another training is building it)")
                time.sleep(5)
        try:
            if os.path.exists(path):              # built while we waited
                return _load(path)
            if wait_only:
                return None
            open(marker, "w").close()
            try:
                E, Y, K = build()
                tmp = f"{path}.{os.getpid()}.tmp.npz"
                np.savez(tmp, E=E, Y=Y, K=K)
                os.replace(tmp, path)
            finally:
                try:
                    os.remove(marker)
                except FileNotFoundError:
                    pass
            return E, Y, K
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _check():
    """`python cache_file.py`: four trainings asking for one file at once build it once and all load
    it; a caller that only waits gets it too; a builder that dies leaves no lock behind."""
    import multiprocessing as mp
    import tempfile
    d = tempfile.mkdtemp()
    path, builds = os.path.join(d, "x.npz"), mp.Value("i", 0)

    def build():
        with builds.get_lock():
            builds.value += 1
        time.sleep(2)
        return np.ones(3), np.zeros(3), np.zeros(3)

    got = mp.Array("d", 4)

    def ask(i):
        if i == 3:                                  # arrives while another builds, never builds itself
            time.sleep(0.5)
            got[i] = float(cached(path, None, wait_only=True)[0].sum())
        else:
            got[i] = float(cached(path, build)[0].sum())

    ctx = mp.get_context("fork")                   # forked children may run these local functions
    askers = [ctx.Process(target=ask, args=(i,)) for i in range(4)]
    for a in askers:
        a.start()
    for a in askers:
        a.join()
    assert list(got) == [3.0] * 4 and builds.value == 1, (list(got), builds.value)
    dying = ctx.Process(target=lambda: cached(os.path.join(d, "y.npz"), lambda: os._exit(1)))
    dying.start()
    dying.join()
    assert float(cached(os.path.join(d, "y.npz"), build)[0].sum()) == 3.0 and builds.value == 2
    print("cache_file.py: 4 trainings at once: 1 build, 4 loads; a dead builder's lock was freed")


if __name__ == "__main__":
    _check()
