"""Training the head (train_head.py): the loss, the Adam steps with input noise and dropout, the
per-epoch validation, rounds of hard-negative mining and the ensemble's other members; or, with
--rescore, the existing head read back instead."""
import time

import numpy as np

import frontend
import render
from canvas import KINDS, STEP_S, STEPS
from head import detections, forward, init_params, windows
from head_file import read_head
from threshold import Validation, choose_threshold

log = render.log


def fit(args, stem, seed, zero, E, Y, K, mask_all, step_ok, tr_idx, val_idx, mean_w, std_w, rng, vE, v_seconds, mE):
    """The trained head (a list of heads for an ensemble), its validation canvas and stream scores,
    and E, Y, K, mask_all with the mined canvases appended, and how many were mined."""
    import jax             # loaded here, not at import: --help and the scripts reading the rules need none
    import jax.numpy as jnp

    def inputs(idx):
        return (windows(E[idx], zero, args.window).astype(np.float32) - mean_w) / std_w

    member_seed = lambda m: seed + 7919 * m            # member 0: exactly the single head's draws
    params = init_params(jax.random.PRNGKey(member_seed(args.member)), args.window * frontend.EMB_DIM, args.hidden)

    def loss_fn(p, x, y, m):
        logits = forward(p, x)
        valid = (y >= 0) * m
        pos = (y == 1).astype(jnp.float32)
        w = valid * (1.0 + 2.0 * pos)
        bce = jnp.maximum(logits, 0) - logits * pos + jnp.log1p(jnp.exp(-jnp.abs(logits)))
        frame = jnp.sum(w * bce) / jnp.sum(w)
        negm = (y == 0) * m
        worst = jnp.max(jnp.where(negm > 0, logits, -30.0), axis=1)
        has = (jnp.sum(negm, axis=1) > 0).astype(jnp.float32)
        worst_l = jnp.sum(has * jax.nn.softplus(worst)) / jnp.maximum(jnp.sum(has), 1.0)
        posm = pos * m
        best = jnp.max(jnp.where(posm > 0, logits, -30.0), axis=1)
        hasp = (jnp.sum(posm, axis=1) > 0).astype(jnp.float32)
        best_l = jnp.sum(hasp * jax.nn.softplus(-best)) / jnp.maximum(jnp.sum(hasp), 1.0)
        l2 = args.l2 * (jnp.sum(p["w0"] ** 2) + jnp.sum(p["w1"] ** 2))
        return frame + 2.0 * worst_l + 0.5 * best_l + l2

    @jax.jit
    def train_step(p, m1, v1, t, lr, x, y, m, dkey):
        k1, k2, k3 = jax.random.split(dkey, 3)
        if args.shift > 0:   # one offset per canvas, the same for every embedding of the window: a voice or channel the data lacks
            off = jax.random.normal(k2, (x.shape[0], 1, frontend.EMB_DIM)) * args.shift
            x = x + jnp.tile(off, (1, 1, args.window))
        if args.noise > 0:   # and independent noise on every value
            x = x + jax.random.normal(k3, x.shape) * args.noise
        x = x * (jax.random.uniform(k1, x.shape) > args.dropout) / (1 - args.dropout)      # dropout on the input
        loss, g = jax.value_and_grad(loss_fn)(p, x, y, m)
        b1, b2 = 0.9, 0.999
        m1 = jax.tree_util.tree_map(lambda a, b: b1 * a + (1 - b1) * b, m1, g)
        v1 = jax.tree_util.tree_map(lambda a, b: b2 * a + (1 - b2) * b * b, v1, g)
        p = jax.tree_util.tree_map(lambda a, b, c: a - lr * (b / (1 - b1 ** t)) / (jnp.sqrt(c / (1 - b2 ** t)) + 1e-8), p, m1, v1)
        return p, m1, v1, loss

    # An ensemble (a list of heads) scores with the mean of its members' logits, as WakeHead does.
    predict = jax.jit(lambda p, x: jax.nn.sigmoid(sum(forward(q, x) for q in p) / len(p) if isinstance(p, list) else forward(p, x)))
    vwin = ((windows(vE[None], zero, args.window)[0].astype(np.float32) - mean_w) / std_w)
    v_hours = v_seconds / 3600

    def validate(p):
        sc_ = np.concatenate([np.asarray(predict(p, inputs(val_idx[i:i + 512]))) for i in range(0, len(val_idx), 512)])
        lab, m = Y[val_idx], mask_all[val_idx] > 0
        is_pos = (lab == 1).any(axis=1)
        pos_max = np.where((lab != 0) & m, sc_, 0).max(axis=1)[is_pos]
        neg_max = np.where(m, sc_, 0).max(axis=1)[~is_pos]
        stream = np.asarray(predict(p, vwin))
        validate.canvas, validate.stream = sc_, stream
        kinds = K[val_idx][~is_pos]
        validate.by_kind = "  ".join(f"{KINDS[k]} {np.mean(neg_max[kinds == k] >= 0.5) * 100:.1f}%"
                                     for k in range(1, len(KINDS)) if (kinds == k).any())
        return pos_max, neg_max, stream

    def train(params, tr_idx, label="", member=args.member):
        ms = member_seed(member)
        member_rng = rng if member == 0 else np.random.default_rng(ms + 2)
        m1 = jax.tree_util.tree_map(jnp.zeros_like, params)
        v1 = jax.tree_util.tree_map(jnp.zeros_like, params)
        spe = len(tr_idx) // args.batch
        total = spe * args.epochs
        t, t_train = 0, time.time()
        dkey = jax.random.PRNGKey(ms + 5)
        n_epochs = min(args.stop_after or args.epochs, args.epochs)
        for epoch in range(args.epochs):
            order = member_rng.permutation(tr_idx)
            losses = []
            for i in range(spe):
                sel = np.sort(order[i * args.batch:(i + 1) * args.batch])
                t += 1
                lr = 1e-3 * 0.5 * (1 + np.cos(np.pi * t / total)) + 2e-5
                dkey, sub = jax.random.split(dkey)
                params, m1, v1, loss = train_step(params, m1, v1, t, lr, inputs(sel), Y[sel], mask_all[sel], sub)
                losses.append(float(loss))
            pos_max, neg_max, ss = validate(params)
            el = time.time() - t_train
            log(f"{label}epoch {epoch + 1}/{n_epochs}  loss {np.mean(losses):.4f}  val recall@0.5 {np.mean(pos_max >= 0.5) * 100:.1f}%  "
                f"window FA@0.5 {np.mean(neg_max >= 0.5) * 100:.2f}%  stream wakes@0.5 {detections(ss, 0.5)}  "
                f"({el:.0f} s, ETA {el / (epoch + 1) * (n_epochs - epoch - 1):.0f} s)")
            log(f"    false accepts@0.5 by kind: {validate.by_kind}")
            ve = Validation({"canvas": validate.canvas, "labels": Y[val_idx], "mask": mask_all[val_idx], "kinds": K[val_idx],
                             "stream": ss, "stream_seconds": v_seconds})
            te = choose_threshold(ve, args.rule, args.consecutive)
            what = f"held-out {args.hold_out}" if args.hold_out else "validation"
            log(f"    {what} after {label}epoch {epoch + 1}: recall {ve.recall(te, args.consecutive) * 100:.1f}% "
                f"at rule {args.rule}'s threshold {te:.3f} (stream wakes {ve.stream_wakes(te, args.consecutive)})")
            if args.stop_after and epoch + 1 >= args.stop_after:
                log(f"stopping after epoch {epoch + 1} of the {args.epochs}-epoch schedule (--stop-after)")
                break
        return params

    def mine(p):
        """Hard negatives for the next round: windows of the mining stream where head p scores
        at least --mine-threshold (one canvas per peak, peaks 1 s apart at least, the peak
        18-37 steps in so the head sees its full history), and the training negatives whose
        best score reaches it (trained on once more)."""
        mrng = np.random.default_rng(seed + 41)
        thr, canv = args.mine_threshold, []
        for i in range(0, len(mE), 8):
            sc_ = np.asarray(predict(p, (windows(mE[i:i + 8], zero, args.window).astype(np.float32) - mean_w) / std_w))
            for j, row in enumerate(sc_):
                row = row.copy()
                row[:args.window] = 0
                for k in np.argsort(-row):
                    if row[k] < thr:
                        break
                    if row[k] < 0:
                        continue
                    st = int(np.clip(k - mrng.integers(18, 38), 0, row.shape[0] - STEPS))
                    canv.append(mE[i + j, st:st + STEPS])
                    row[max(0, k - 12):k + 13] = -1
        negs = tr_idx[~(Y[tr_idx] == 1).any(axis=1) & (K[tr_idx] != 7)]
        best = np.concatenate([np.where(mask_all[negs[i:i + 512]] > 0, np.asarray(predict(p, inputs(negs[i:i + 512]))), 0).max(axis=1)
                               for i in range(0, len(negs), 512)])
        hard = negs[best >= thr]
        log(f"mined: {len(canv)} windows of the {len(mE) * mE.shape[1] * STEP_S / 3600:.1f} h mining stream and "
            f"{len(hard)} of {len(negs)} training negatives score >= {thr:g} ("
            + ", ".join(f"{KINDS[q]} {int((K[hard] == q).sum())}" for q in np.unique(K[hard])) + ")")
        return (np.stack(canv) if canv else np.zeros((0, STEPS, frontend.EMB_DIM), np.float16)), hard

    mined_total = 0
    if args.rescore:
        params = read_head(args.models_dir, stem, mean_w, std_w)
        args.epochs = 0
    else:
        rounds = args.mine_rounds if args.mine_hours > 0 else 0
        params = train(params, tr_idx, "round 1 " if rounds else "")
        for rnd in range(rounds):
            newE, hard = mine(params)
            n0 = len(E)
            E = np.concatenate([E, newE.astype(E.dtype)])
            Y = np.concatenate([Y, np.zeros((len(newE), STEPS), Y.dtype)])
            K = np.concatenate([K, np.full(len(newE), 7, K.dtype)])
            mask_all = np.concatenate([mask_all, np.broadcast_to(step_ok, (len(newE), STEPS)).astype(np.float32)])
            mined_total += len(newE)
            w = args.mine_weight
            wi = args.mine_inset_weight
            tr_idx = np.concatenate([tr_idx, np.repeat(np.arange(n0, len(E)), w), np.repeat(hard, wi - 1)])
            log(f"round {rnd + 2}: retraining from scratch on {len(tr_idx)} canvases ({len(newE)} mined windows x{w}, "
                f"{len(hard)} hard training negatives x{wi})")
            params = train(init_params(jax.random.PRNGKey(member_seed(args.member)), args.window * frontend.EMB_DIM, args.hidden),
                           tr_idx, f"round {rnd + 2} ")
        if args.members > 1:   # more heads on the same data, other initialisations and draws; logits averaged
            params = [params] + [train(init_params(jax.random.PRNGKey(member_seed(args.member + m)), args.window * frontend.EMB_DIM,
                                                   args.hidden), tr_idx, f"member {m + 1}/{args.members} ", member=args.member + m)
                                 for m in range(1, args.members)]

    pos_max, neg_max, ss = validate(params)
    return params, validate.canvas, ss, E, Y, K, mask_all, mined_total
