"""A per-household verifier for enrollment, learned on the device (issue 22, item 4): the takes of
the trigger against the same person reading a few sentences that are not the trigger, so what
separates them is the word and not the voice (the cosine rule's failure: a window near the user's
takes was often the user saying something else).

What the node has at enrollment and nothing more: the five takes, the prompt sentences read by
the same person, and noise it can make itself (white, pink, the person's own speech as babble,
training-style rooms). Nothing from the held-out set's generators (fan, music, test rooms, babble
of other voices) goes in. The model is a logistic regression over the head's first layer (all
members) and, with --feature both, the raw 16-embedding window too; class-balanced, L2.
"""
import numpy as np
from scipy.optimize import minimize
from scipy.signal import resample_poly

import augment
import evaluate

SR = 16000
# What `wake enroll` asks the household to read once the takes are in: everyday sentences, none
# with a trigger, about 15 s in all.
PROMPTS = [
    "Could you remind me to water the plants before dinner tonight?",
    "The weather looks good for a walk along the river this weekend.",
    "Please add milk, bread and a dozen eggs to the shopping list.",
    "My sister is coming over on Sunday afternoon with her two kids.",
]


def user_speech(flite, voice, rng):
    """The stand-in user reading the prompts: one flite voice, a new speaker draw per sentence
    (as the held-out events draw theirs), in a quiet room."""
    out = []
    for text in PROMPTS:
        x = flite.synth(text, **evaluate.test_speaker(rng, voice)).astype(float)
        x = np.concatenate([np.zeros(SR // 2), x, np.zeros(SR // 2)])
        x = x + augment.coloured_noise(rng, len(x), 0.0) * 3.0
        out.append(x / (np.max(np.abs(x)) + 1e-9) * 32767 * 10 ** (rng.uniform(-20, -4) / 20))
    return out


def variants(clip, rng, speech, speeds=()):
    """A take as the node can make it sound: as recorded, and at 20/10/5 dB of white, pink or the
    person's own speech as babble, a third of them in a training-style room; each extra speed in
    `speeds` adds the nine noisy ones again at that speed."""
    clip = clip.astype(float)
    out = [clip]
    speeds = [1.0] + list(speeds)
    for i, (snr, kind) in enumerate((s, k) for _ in speeds for s in (20, 10, 5) for k in ("white", "pink", "babble")):
        x = clip
        speed = speeds[i // 9]
        if speed != 1.0:
            # Said faster or slower (and higher or lower): resampled, as a speed perturbation.
            x = resample_poly(x, 100, int(round(100 * speed)))
        if rng.random() < 1 / 3:
            x = augment.reverberate(x, augment.train_rir(rng))
        if kind == "babble":
            noise = augment.babble(rng, len(x), speech)
        else:
            noise = augment.coloured_noise(rng, len(x), 0.0 if kind == "white" else 1.0)
        x = augment.mix_noise(x, noise, snr)
        out.append(x / (np.max(np.abs(x)) + 1e-9) * np.max(np.abs(clip)))
    return out


class Logistic:
    """p(trigger | window view), standardised inputs, class-balanced L2 logistic regression."""

    def __init__(self, pos, neg, l2=1.0, neg_weight=None):
        X = np.vstack([pos, neg]).astype(np.float64)
        self.mu, self.sd = X.mean(axis=0), X.std(axis=0) + 1e-6
        Z = (X - self.mu) / self.sd
        y = np.concatenate([np.ones(len(pos)), np.zeros(len(neg))])
        nw = np.ones(len(neg)) if neg_weight is None else np.asarray(neg_weight, float)
        w = np.concatenate([np.full(len(pos), 0.5 / len(pos)), 0.5 * nw / nw.sum()])

        def loss(p):
            z = Z @ p[:-1] + p[-1]
            lse = np.logaddexp(0, z)
            f = np.sum(w * (lse - y * z)) + 0.5 * l2 * p[:-1] @ p[:-1] / len(X)
            g = w * (1 / (1 + np.exp(-z)) - y)
            return f, np.concatenate([Z.T @ g + l2 * p[:-1] / len(X), [g.sum()]])

        self.p = minimize(loss, np.zeros(Z.shape[1] + 1), jac=True, method="L-BFGS-B", options={"maxiter": 500}).x

    def prob(self, X):
        z = ((X - self.mu) / self.sd) @ self.p[:-1] + self.p[-1]
        return 1 / (1 + np.exp(-z))
