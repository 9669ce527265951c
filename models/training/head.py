"""The wake head: a small MLP on HEAD_WINDOW embeddings of the frozen front end (its inputs,
initialisation and forward pass), and how its scores become wakes (k steps in a row at or over
the threshold, then a refractory gap). train_head.py trains it; threshold.py counts with it."""
import numpy as np

HEAD_WINDOW = 16                                       # embeddings per head input (1.28 s)
HIDDEN = 64


def windows(E, zero, window=HEAD_WINDOW):
    """(n, S, 96) embeddings -> (n, S, window * 96) head inputs, history before the canvas = silence."""
    n, S, D = E.shape
    full = np.concatenate([np.broadcast_to(zero, (n, window - 1, D)), E], axis=1)
    idx = np.arange(S)[:, None] + np.arange(window)[None, :]
    return full[:, idx].reshape(n, S, window * D)


def init_params(key, d_in, hidden):
    import jax
    k1, k2, k3 = jax.random.split(key, 3)
    he = lambda k, i, o: jax.random.normal(k, (o, i)) * np.sqrt(2.0 / i)
    return {"w0": he(k1, d_in, hidden), "b0": np.zeros(hidden, np.float32),
            "w1": he(k2, hidden, hidden), "b1": np.zeros(hidden, np.float32),
            "w2": he(k3, hidden, 1) * 0.1, "b2": np.full(1, -3.0, np.float32)}


def forward(p, x):
    import jax.numpy as jnp
    h = jnp.maximum(x @ p["w0"].T + p["b0"], 0)
    h = jnp.maximum(h @ p["w1"].T + p["b1"], 0)
    return (h @ p["w2"].T + p["b2"])[..., 0]


def confirmed(scores, threshold, k=1):
    """Steps (along the last axis) that end a run of k consecutive scores at or over threshold."""
    over = (np.asarray(scores) >= threshold).astype(np.int32)
    if k <= 1:
        return over > 0
    c = np.cumsum(over, axis=-1)
    run = c.copy()
    run[..., k:] = c[..., k:] - c[..., :-k]
    run[..., :k - 1] = 0
    return run >= k


def wake_steps(scores, threshold, refractory=25, k=1):
    """The steps where the detector wakes: k steps in a row over the threshold, then `refractory` steps deaf."""
    out, last = [], -10 ** 9
    for s in np.flatnonzero(confirmed(scores, threshold, k)):
        if s - last >= refractory:
            out.append(int(s))
            last = s
    return out


def detections(scores, threshold, refractory=25, k=1):
    return len(wake_steps(scores, threshold, refractory, k))
