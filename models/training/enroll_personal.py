"""A personal head for enrollment (issue 22, item 4): the shipped head fine-tuned on the device to
the household's takes, the other route the issue names beside a verifier.

Starts from the shipped head's weights (every member) and trains all its layers a few hundred
steps on the same examples enroll_verifier's logistic model learns from: the takes as the node can
make them sound (enroll_verifier.variants) against the user's own prompt sentences, the node's own
espeak-ng speech and the trigger's near-miss words (and, with --mined, what the head scored high
in half of the negative streams). A pull toward the shipped weights (--anchor) keeps what the head
learned from thousands of voices; what moves is where this voice's trigger sits. Its probability
takes the verifier's place in enroll_eval.py's rule (`--verifier head`), so a floor of 0 lets it
wake on its own. Pure numpy: the node would do the same in Swift at `wake enroll`.

    models/training/.venv/bin/python models/training/enroll_personal.py    # checks the gradient
"""
import numpy as np


class PersonalHead:
    def __init__(self, members, pos, neg, neg_weight=None, steps=300, lr=3e-4, anchor=1e-2, batch=512, seed=0):
        rng = np.random.default_rng(seed)
        self.theta0 = [[(w.astype(np.float64), b.astype(np.float64)) for w, b in m] for m in members]
        self.theta = [[(w.copy(), b.copy()) for w, b in m] for m in self.theta0]
        nw = np.ones(len(neg)) if neg_weight is None else np.asarray(neg_weight, float)
        pos, neg = pos.astype(np.float64), neg.astype(np.float64)
        m_, v_ = self._zeros(), self._zeros()
        for t in range(1, steps + 1):
            k = rng.choice(len(neg), min(batch, len(neg)), replace=False, p=nw / nw.sum())
            X = np.vstack([pos, neg[k]])
            y = np.concatenate([np.ones(len(pos)), np.zeros(len(k))])
            w = np.where(y == 1, 0.5 / len(pos), 0.5 / len(k))
            grads = self._grads(X, y, w, anchor)
            for i, member in enumerate(self.theta):          # Adam
                for j, (W, b) in enumerate(member):
                    for q, (P, G) in enumerate(((W, grads[i][j][0]), (b, grads[i][j][1]))):
                        m_[i][j][q] = 0.9 * m_[i][j][q] + 0.1 * G
                        v_[i][j][q] = 0.999 * v_[i][j][q] + 0.001 * G * G
                        P -= lr * (m_[i][j][q] / (1 - 0.9 ** t)) / (np.sqrt(v_[i][j][q] / (1 - 0.999 ** t)) + 1e-8)

    def _zeros(self):
        return [[[np.zeros_like(W), np.zeros_like(b)] for W, b in m] for m in self.theta]

    def _forward(self, X, member):
        acts = [X]
        for j, (W, b) in enumerate(member):
            h = acts[-1] @ W.T + b
            acts.append(np.maximum(h, 0) if j < len(member) - 1 else h)
        return acts

    def _grads(self, X, y, w, anchor):
        n = len(self.theta)
        runs = [self._forward(X, m) for m in self.theta]
        z = sum(r[-1][:, 0] for r in runs) / n                   # the members' logits averaged, as the detector does
        dz = w * (1 / (1 + np.exp(-z)) - y) / n
        out = []
        for member, member0, acts in zip(self.theta, self.theta0, runs):
            g, d = [None] * len(member), dz[:, None]
            for j in range(len(member) - 1, -1, -1):
                W, b = member[j]
                g[j] = (d.T @ acts[j] + anchor * (W - member0[j][0]), d.sum(axis=0) + anchor * (b - member0[j][1]))
                if j:
                    d = (d @ W) * (acts[j] > 0)
            out.append(g)
        return out

    def prob(self, X):
        z = sum(self._forward(X.astype(np.float64), m)[-1][:, 0] for m in self.theta) / len(self.theta)
        return 1 / (1 + np.exp(-z))


def gradient_check(seed=0):
    """The largest difference between the analytic gradient and central finite differences, on a
    small random two-member head moved off its anchor."""
    rng = np.random.default_rng(seed)
    members = [[(rng.standard_normal((4, 6)) * 0.5, rng.standard_normal(4) * 0.1),
                (rng.standard_normal((3, 4)) * 0.5, rng.standard_normal(3) * 0.1),
                (rng.standard_normal((1, 3)) * 0.5, rng.standard_normal(1) * 0.1)] for _ in range(2)]
    h = PersonalHead(members, rng.standard_normal((5, 6)), rng.standard_normal((20, 6)), steps=0)
    for member in h.theta:
        for W, _ in member:
            W += rng.standard_normal(W.shape) * 0.1
    X, y, w, anchor = rng.standard_normal((8, 6)), (rng.random(8) > 0.5).astype(float), np.full(8, 1 / 8), 0.3

    def loss():
        z = sum(h._forward(X, m)[-1][:, 0] for m in h.theta) / len(h.theta)
        pull = sum(((W - W0) ** 2).sum() + ((b - b0) ** 2).sum()
                   for m, m0 in zip(h.theta, h.theta0) for (W, b), (W0, b0) in zip(m, m0))
        return np.sum(w * (np.logaddexp(0, z) - y * z)) + 0.5 * anchor * pull
    grads, worst = h._grads(X, y, w, anchor), 0.0
    for i, member in enumerate(h.theta):
        for j, pair in enumerate(member):
            for q, P in enumerate(pair):
                for idx in np.ndindex(P.shape):
                    old = P[idx]
                    P[idx] = old + 1e-6
                    up = loss()
                    P[idx] = old - 1e-6
                    down = loss()
                    P[idx] = old
                    worst = max(worst, abs((up - down) / 2e-6 - grads[i][j][q][idx]))
    return worst


if __name__ == "__main__":
    err = gradient_check()
    print(f"largest gradient error against finite differences: {err:.1e}")
    raise SystemExit(0 if err < 1e-6 else 1)
