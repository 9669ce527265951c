"""The wake network in JAX, and its export to the clawvoice-wake format (models/README.md).

A causal dilated depthwise-separable temporal CNN over 40 log-mel features:

  x      = (logmel - mean) / std                      per frame, 10 ms
  h0[s]  = relu(W0 . concat(x[3s-2 .. 3s+2]) + b0)     stride 3 frames: one step every 30 ms
  block i (dilation d_i, kernel 3), for i = 1 ... 5:
    y[s] = relu(dw[:,0]*h[s-2d] + dw[:,1]*h[s-d] + dw[:,2]*h[s] + dwb)
    h[s] = h[s] + relu(PW . y[s] + pwb)
  logit[s] = wh . h[s] + bh,   score = sigmoid(logit)

Everything is causal, and positions before the start are zeros (in normalised-feature space
for the input, in activation space for each block), so running it over a whole sequence and
running it one step at a time (WakeInference.swift) give the same numbers.
"""
import jax
import jax.numpy as jnp
import numpy as np

MELS = 40
INPUT_KERNEL = 5
STRIDE = 3
DILATIONS = [1, 2, 4, 8, 16]
CHANNELS = 64


def steps_for_frames(t):
    return 0 if t < 3 else (t - 3) // STRIDE + 1


def step_end_seconds(s):
    """Time at which step s is available: the end of frame 3s+2's window."""
    return ((STRIDE * s + 2) * 160 + 400) / 16000.0


def init_params(rng, channels=CHANNELS):
    k = jax.random.split(rng, 2 + 2 * len(DILATIONS))
    fan0 = INPUT_KERNEL * MELS
    p = {
        "w0": jax.random.normal(k[0], (fan0, channels)) * np.sqrt(2.0 / fan0),
        "b0": jnp.zeros(channels),
        "blocks": [],
        "wh": jax.random.normal(k[1], (channels,)) * np.sqrt(1.0 / channels),
        "bh": jnp.array(-2.0),
    }
    for i, _ in enumerate(DILATIONS):
        p["blocks"].append({
            "dw": jax.random.normal(k[2 + 2 * i], (3, channels)) * np.sqrt(2.0 / 3),
            "dwb": jnp.zeros(channels),
            # Residual branches start small so the stack begins close to the identity.
            "pw": jax.random.normal(k[3 + 2 * i], (channels, channels)) * np.sqrt(2.0 / channels) * 0.5,
            "pwb": jnp.zeros(channels),
        })
    return p


def forward(params, x):
    """x: [B, T, 40] normalised features -> logits [B, S]."""
    B, T, _ = x.shape
    S = steps_for_frames(T)
    xp = jnp.pad(x, ((0, 0), (INPUT_KERNEL - STRIDE, 0), (0, 0)))
    taps = [xp[:, k::STRIDE][:, :S] for k in range(INPUT_KERNEL)]
    win = jnp.concatenate(taps, axis=-1)                      # [B, S, 5*40], tap-major
    h = jax.nn.relu(win @ params["w0"] + params["b0"])
    for d, blk in zip(DILATIONS, params["blocks"]):
        hp = jnp.pad(h, ((0, 0), (2 * d, 0), (0, 0)))
        y = blk["dw"][0] * hp[:, 0:S] + blk["dw"][1] * hp[:, d:d + S] + blk["dw"][2] * hp[:, 2 * d:2 * d + S]
        y = jax.nn.relu(y + blk["dwb"])
        h = h + jax.nn.relu(y @ blk["pw"] + blk["pwb"])
    return h @ params["wh"] + params["bh"]


def export_tensors(params, mean, std):
    """Ordered (name, array) in the on-disk layout Swift reads (row-major, float32)."""
    out = [("norm.mean", np.asarray(mean, np.float32)), ("norm.invStd", (1.0 / np.asarray(std)).astype(np.float32))]
    # input.weight [C][5*40]: output channel major, then tap, then mel.
    out.append(("input.weight", np.asarray(params["w0"], np.float32).T.copy()))
    out.append(("input.bias", np.asarray(params["b0"], np.float32)))
    for i, blk in enumerate(params["blocks"]):
        # depthwise.weight [C][3]: taps oldest (s-2d) to newest (s).
        out.append((f"block{i}.depthwise.weight", np.asarray(blk["dw"], np.float32).T.copy()))
        out.append((f"block{i}.depthwise.bias", np.asarray(blk["dwb"], np.float32)))
        # pointwise.weight [out][in].
        out.append((f"block{i}.pointwise.weight", np.asarray(blk["pw"], np.float32).T.copy()))
        out.append((f"block{i}.pointwise.bias", np.asarray(blk["pwb"], np.float32)))
    out.append(("head.weight", np.asarray(params["wh"], np.float32)))
    out.append(("head.bias", np.asarray(params["bh"], np.float32).reshape(1)))
    return out


def receptive_field_frames():
    return INPUT_KERNEL + STRIDE * sum(2 * d for d in DILATIONS)
