"""The training cache's files (.cache/examples/*.npz): built once by whichever training needs them
first, loaded by the rest. Several trainings run side by side, so building is guarded by an
advisory lock on <file>.lock (the kernel drops it when a training dies, so nothing goes stale); a
<file>.building marker beside it only tells other trainings which file is being built now.
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
