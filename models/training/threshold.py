"""Choosing a head's threshold on validation of training engines only: the validation scores that
train_head.py saves (Validation), the threshold rules and the grid they are tried on.
calibrate.py, diagnose.py, loeo_table.py and val_rules.py use these through train_head."""
import numpy as np

from head import confirmed, detections


class Validation:
    """Validation scores of one head (what train_head.py saves): trigger canvases, other canvases
    and the validation stream, all training engines."""

    def __init__(self, z):
        self.S, lab, m = np.asarray(z["canvas"]), np.asarray(z["labels"]), np.asarray(z["mask"]) > 0
        is_pos = (lab == 1).any(axis=1)
        self.pos, self.pos_ok = self.S[is_pos], ((lab != 0) & m)[is_pos]
        self.neg, self.neg_ok, self.kinds = self.S[~is_pos], m[~is_pos], np.asarray(z["kinds"])[~is_pos]
        self.stream, self.hours = np.asarray(z["stream"]), float(z["stream_seconds"]) / 3600

    def recall(self, t, k=1):
        return float(np.mean((confirmed(self.pos, t, k) & self.pos_ok).any(axis=1))) if len(self.pos) else 0.0

    def canvas_fa(self, t, k=1, kinds=None):
        hit = (confirmed(self.neg, t, k) & self.neg_ok).any(axis=1)
        if kinds is not None:
            hit = hit[np.isin(self.kinds, kinds)]
        return float(np.mean(hit)) if len(hit) else 0.0

    def canvas_fa_by_kind(self, t, k=1):
        hit = (confirmed(self.neg, t, k) & self.neg_ok).any(axis=1)
        return {int(q): float(np.mean(hit[self.kinds == q])) for q in np.unique(self.kinds)}

    def stream_wakes(self, t, k=1):
        return detections(self.stream, t, k=k)


# Threshold rules (validation of training engines only). v1: recipe v1's rule (no wake in the
# 30-minute stream, <= 0.5 % of all other canvases over). v2: at most 0.5 false wakes per hour on
# the 2-hour stream, <= 0.5 % of plain-speech canvases and <= 3 % of near-miss, other-trigger and
# cut-short canvases over.
RULES = {"v1": dict(stream=0.25, all=0.005), "v2": dict(stream=0.5, speech=0.005, near=0.03),
         "stream-only": dict(stream=0.5)}
THRESHOLD_GRID = np.round(np.concatenate([np.arange(0.20, 0.98, 0.01), np.arange(0.98, 0.9991, 0.001)]), 3)
# Rule v5c's grid (RULE-V24): 0.001 steps from 0.90 up, where a 0.01 step costs real people 1-2 points.
FINE_GRID = np.round(np.concatenate([THRESHOLD_GRID[THRESHOLD_GRID < 0.9], np.arange(0.90, 0.9991, 0.001)]), 3)


def rule_checks(v, rule, k=1):
    """Each limit of a rule as a test of one threshold (diagnose.py reads them one by one)."""
    r = RULES[rule]
    checks = {"stream": lambda t: v.stream_wakes(t, k) / v.hours <= r["stream"],
              "all": lambda t: v.canvas_fa(t, k) <= r["all"],
              "speech": lambda t: v.canvas_fa(t, k, [3, 4]) <= r["speech"],        # plain speech, noise
              "near": lambda t: v.canvas_fa(t, k, [1, 2, 5]) <= r["near"]}         # near miss, other trigger, cut short
    return {name: c for name, c in checks.items() if name in r}


def choose_threshold(v, rule, k=1):
    checks = rule_checks(v, rule, k).values()
    return next((float(t) for t in THRESHOLD_GRID if all(c(t) for c in checks)), 0.999)
