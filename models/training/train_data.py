"""The data of one training (train_head.py): render the trigger, near misses and sentences with
every training engine, build the embeddings of every canvas set (cached in .cache/examples), the
validation and mining streams (and with --near-val, near_val.py's validation-only canvases), and
split the canvases into training and validation with the input normalisation. With --hold-out, which engine spoke each canvas (holdout.py)."""
import os
import sys
import time
import zlib
from types import SimpleNamespace

import numpy as np

import frontend
import holdout
import human
import real
import real_halves
import render
import voices
from cache_file import cached
from canvas import (FIRST_STEP, HARD, STEP_S, STEPS, Featurizer, Noise, canvas_engines, human_negatives, negatives,
                    over_speech, partials, positives)
from near_val import near_validation
from train_args import split_seed
from streams import mining_stream, validation_stream
from render import (DEFAULT_TRIGGERS, file_stem, pool_tag, render_extra, render_extra_pool, render_mining_pool,
                    render_pool, render_trigger)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_VERSION = 1

log = render.log


def render_all(args, trigger):
    """Every training engine's sentences, validation sentences, triggers and near misses (cached
    per engine); with --kokoro, Kokoro's voices start rendering in a second process."""
    kproc = None
    if args.kokoro > 0:      # Kokoro renders in a second process beside the other engines (2 cores)
        import subprocess
        ktrig = [trigger] + ([t for t in DEFAULT_TRIGGERS if t != trigger.lower()] if trigger.lower() in DEFAULT_TRIGGERS else [])
        kproc = subprocess.Popen([sys.executable, "-u", os.path.join(HERE, "render.py"), "--kokoro"]
                                 + [a for t in ktrig for a in ("--trigger", t)])
        log(f"kokoro: rendering in the background (pid {kproc.pid})")
    engines = voices.engines()
    pool, vpool, clips, near, pool_of, own_near = [], [], {}, [], {}, []
    tag = pool_tag(trigger)
    if tag:
        log(f"{trigger!r} occurs in the shared sentences: they are left out, and this training builds its own "
            f"negatives and validation stream (caches *{tag})")
    for eng in engines:
        pool_of[eng.name] = render_pool(eng, trigger=trigger)
        pool += pool_of[eng.name]
        vpool += render_pool(eng, 400, "val", trigger=trigger)
        own, nm = render_trigger(eng, trigger)
        clips[eng.name] = own
        near += nm
        # Recipe v16's (and candidate v17's) words found by sound go into this phrase's own near-miss canvases only: the
        # shared negatives (built by whichever training comes first) stay as every recipe has them.
        found = dict(phonetic=args.phonetic_near, common=args.phonetic_common)
        own_near += render_trigger(eng, trigger, **found)[1] if any(found.values()) else nm
        log(f"{eng.name}: {len(own)} triggers, {len(near)} near misses")
    all_clips = [c for v in clips.values() for c in v]
    log(f"rendered: {len(all_clips)} triggers, {len(near)} near misses, {len(pool)} sentences "
        f"({sum(map(len, pool)) / 16000 / 60:.0f} min), {len(vpool)} validation sentences")
    return engines, pool, vpool, clips, near, pool_of, all_clips, tag, kproc, own_near


def examples(args, fe, trigger, stem, seed, t_start, rendered):
    """The canvases (E embeddings, Y labels, K kinds), the validation stream and the mining stream,
    from render_all's output."""
    engines, pool, vpool, clips, near, pool_of, all_clips, tag, kproc, own_near = rendered
    sc = args.scale
    key = f"v{DATA_VERSION}-s{sc:g}"
    ck = lambda name: os.path.join(args.cache_dir, "examples", f"{name}-{key}.npz")
    feat = Featurizer(fe, np.random.default_rng(seed + 9))
    noise = Noise(np.random.default_rng(3), pool)
    r = np.random.default_rng(seed)
    parts = []
    stem_idx = zlib.crc32(stem.encode()) % 3
    # This trigger's own canvases first (several trainings can run side by side).
    parts.append(cached(ck(f"trigger-{stem}-p{args.positives}"), lambda: positives(feat, r, all_clips, pool, noise, int(args.positives * sc))))
    eng_names = held_ids = None                     # set by --hold-out
    if args.hold_out:        # which engine spoke each trigger canvas (leave-one-engine-out validation)
        eng_names = list(clips)
        held_ids = [i for i, e in enumerate(eng_names) if e.startswith(args.hold_out)]
        if not held_ids:
            raise SystemExit(f"--hold-out {args.hold_out!r} names no training engine ({', '.join(eng_names)})")
        eng_parts = {0: canvas_engines(ck(f"trigger-{stem}-p{args.positives}"), clips, np.random.default_rng(seed),
                                       pool, noise, int(args.positives * sc), wide=False)}
    ns = args.negatives_scale
    nt = "" if ns == 1 else f"-n{ns:g}"
    parts.append(cached(ck(f"partial-{stem}"), lambda: partials(feat, r, all_clips, pool, noise, int(600 * sc))))
    whole = args.hold_out and args.hold_out_negatives
    if whole:                # leave the engine out entirely: the engine of every negative canvas too (holdout.py)
        if trigger.lower() not in DEFAULT_TRIGGERS or sc != 1 or ns != 1 or tag:
            raise SystemExit("--hold-out-negatives: only for the default triggers at full scale")
        pools_by_engine = [render_pool(eng, trigger=trigger) for eng in engines]
        warps = Featurizer(fe, np.random.default_rng(0)).warps
        eng_parts[len(parts) - 1] = holdout.partials_engines(ck(f"partial-{stem}"), fe, warps, clips, pools_by_engine, seed,
                                                             int(args.positives * sc), int(600 * sc))
    if trigger.lower() not in DEFAULT_TRIGGERS:
        ph = (f"-ph{args.phonetic_near}" if args.phonetic_near else "") + (f"-pc{args.phonetic_common}" if args.phonetic_common else "")
        parts.append(cached(ck(f"near-{stem}{nt}{ph}"), lambda: negatives(feat, r, own_near, pool, noise,
                                                                  {"near": int(1500 * sc * ns), "speech": 0, "noise": 0})))
    # Trigger-independent negatives: speech, noise and near misses of every default trigger.
    # In three parts, so that trainings running side by side build them in parallel.
    order = [(stem_idx + k) % 3 for k in range(3)]
    for part in order:       # build the parts nobody is building yet, then wait for the rest
        if not (os.path.exists(ck(f"negatives{part}{tag}{nt}")) or os.path.exists(ck(f"negatives{part}{tag}{nt}") + ".building")):
            order = [part] + [q for q in order if q != part]
            break
    for part in order:
        parts.append(cached(ck(f"negatives{part}{tag}{nt}"), lambda part=part: negatives(
            feat, np.random.default_rng(101 + part), near, pool, noise,
            {k: int(v * sc * ns) for k, v in dict(near=1000, speech=1350, noise=100).items()})))
        if whole:
            near_lists = [[render_trigger(eng, t)[1] for eng in engines]
                          for t in [trigger] + [t for t in DEFAULT_TRIGGERS if t != trigger.lower()]]
            eng_parts[len(parts) - 1] = holdout.negatives_engines(ck(f"negatives{part}"), fe, warps, pools_by_engine, near_lists,
                                                                  101 + part, dict(near=1000, speech=1350, noise=100))
    # The other default triggers are negatives: their trigger canvases (another training's, or
    # made here) with the labels cleared. Which of the two decides the canvas count, so the split:
    # the manifest records it (othersRendered) and --others-rendered rebuilds it.
    others_rendered = []
    for t in DEFAULT_TRIGGERS:
        if file_stem(t) == stem:
            continue
        theirs = None if file_stem(t) in args.others_rendered else cached(ck(f"trigger-{file_stem(t)}-p{args.positives}"), None, wait_only=True)
        if theirs is None:
            others_rendered.append(file_stem(t))
            oc = [c for eng in engines for c in render_trigger(eng, t)[0]]
            theirs = cached(ck(f"other-{file_stem(t)}"), lambda oc=oc: positives(feat, np.random.default_rng(zlib.crc32(t.encode())),
                                                                               oc, pool, noise, int(500 * sc), kind=2))
        pick = np.random.default_rng(zlib.crc32(t.encode()) + 1).permutation(len(theirs[0]))[:int(800 * sc)]
        parts.append((theirs[0][pick], np.zeros_like(theirs[1][pick]), np.full(len(pick), 2, np.int8)))
        if whole:            # their engines, as their own leave-one-engine-out runs found them
            their_clips = {eng.name: render_trigger(eng, t)[0] for eng in engines}
            their_seed = args.seed + zlib.crc32(file_stem(t).encode()) % 100000
            eng_parts[len(parts) - 1] = canvas_engines(ck(f"trigger-{file_stem(t)}-p{args.positives}"), their_clips,
                                                       np.random.default_rng(their_seed), pool, noise, int(args.positives * sc),
                                                       wide=False)[pick]
    n_orig = sum(len(p[0]) for p in parts)          # the validation canvases are drawn from these only
    wspan = (int(round(100 / args.wide_speed[1])), int(round(100 / args.wide_speed[0])) + 1)
    wtag = "" if (tuple(args.wide_speed), tuple(args.wide_vtlp)) == ((0.82, 1.22), (0.84, 1.18)) else \
        f"-s{args.wide_speed[0]:g}-{args.wide_speed[1]:g}-w{args.wide_vtlp[0]:g}-{args.wide_vtlp[1]:g}"
    if args.wide > 0:
        feat_wide = Featurizer(fe, np.random.default_rng(seed + 19), span=tuple(args.wide_vtlp), n=13, p=0.85)
        parts.append(cached(ck(f"wide-{stem}-p{args.wide}{wtag}"), lambda: positives(
            feat_wide, np.random.default_rng(seed + 17), all_clips, pool, noise, int(args.wide * sc), wide=wspan)))
        if args.hold_out:
            eng_parts[len(parts) - 1] = canvas_engines(ck(f"wide-{stem}-p{args.wide}{wtag}"), clips, np.random.default_rng(seed + 17),
                                                       pool, noise, int(args.wide * sc), wide=wspan)
    if args.hard > 0:
        feat_hard = Featurizer(fe, np.random.default_rng(seed + 29))
        parts.append(cached(ck(f"hard-{stem}-p{args.hard}"), lambda: positives(
            feat_hard, np.random.default_rng(seed + 27), all_clips, pool, noise, int(args.hard * sc), cond=HARD)))
        if args.hold_out:
            eng_parts[len(parts) - 1] = canvas_engines(ck(f"hard-{stem}-p{args.hard}"), clips, np.random.default_rng(seed + 27),
                                                       pool, noise, int(args.hard * sc), wide=False, cond=HARD)
    if args.over_speech > 0:  # the stop word's condition: said over the node's own voice (espeak-ng)
        feat_os = Featurizer(fe, np.random.default_rng(seed + 49))
        parts.append(cached(ck(f"overspeech-{stem}-p{args.over_speech}{tag}"), lambda: over_speech(
            feat_os, np.random.default_rng(seed + 47), all_clips, pool_of["espeak-ng"], pool, noise,
            int(args.over_speech * sc), int(args.over_speech * sc) // 2)))
    if args.human > 0:
        recs = human.recordings(args.cache_dir, log)
        if recs:
            log(f"human negatives: {len(recs)} recordings, {sum(len(a) for _, a in recs) / 16000:.0f} s")
            parts.append(cached(ck(f"human{args.human}"), lambda: human_negatives(
                feat, np.random.default_rng(303), recs, noise, int(args.human * sc))))
    if args.real_negatives > 0:   # candidate recipe v9: real people saying other words, training only
        excl = [w.strip() for w in args.real_exclude.split(",") if w.strip()]
        recs = real.training_negatives(stem, os.path.join(args.cache_dir, "real"), excl)
        if not recs:
            raise SystemExit(f"--real-negatives: no real clips left for {trigger!r} (excluded: {excl})")
        words = sorted({n.split("/")[0] for n, _ in recs})
        log(f"real negatives: {len(recs)} clips of {', '.join(words)} ({sum(len(a) for _, a in recs) / 3600 / 16000:.2f} h)")
        parts.append(cached(ck(f"real-{'-'.join(words)}-{args.real_negatives}"), lambda: human_negatives(
            feat, np.random.default_rng(313), recs, noise, int(args.real_negatives * sc))))
    if args.prompt_negatives > 0:  # candidate recipe v12: recorded voice prompts, their training half only
        recs = real_halves.prompt_recordings(real_halves.prompt_names()[0])
        log(f"prompt negatives: {len(recs)} prompts of the training half, {sum(len(a) for _, a in recs) / 16000 / 3600:.2f} h")
        parts.append(cached(ck(f"prompts-{args.prompt_negatives}"), lambda: human_negatives(
            feat, np.random.default_rng(323), recs, noise, int(args.prompt_negatives * sc))))
    if args.stamp_negatives > 0:  # candidate recipe v19: Tux Paint's spoken stamp descriptions, their training half only
        files, which = real_halves.stamp_names()
        log(f"stamp negatives: {len(files)} descriptions of the training half (decoded only when not cached)")
        parts.append(cached(ck(f"stamps-{args.stamp_negatives}-{which:08x}"), lambda: human_negatives(
            feat, np.random.default_rng(333), real_halves.stamp_recordings(files), noise, int(args.stamp_negatives * sc))))
    if args.game_negatives > 0:   # candidate recipe v20: a game's English voice acting, its training half only
        lines, which = real_halves.game_names()
        log(f"game negatives: {len(lines)} lines of the training half (decoded only when not cached)")
        parts.append(cached(ck(f"game-{args.game_negatives}-{which:08x}"), lambda: human_negatives(
            feat, np.random.default_rng(343), real_halves.game_recordings(lines), noise, int(args.game_negatives * sc))))
    if args.kokoro > 0:      # candidate recipe v6: Kokoro's speakers, training only (never validation)
        if kproc.wait() != 0:
            raise SystemExit(f"kokoro: rendering failed (exit {kproc.returncode}); see the lines above")
        parts += extra_engine_parts(voices.kokoro_engine(), args.kokoro, 0, trigger, stem, tag, fe, noise, sc, seed, ck)
    if args.rhvoice > 0:     # candidate recipe v13: RHVoice's speakers, training only (never validation)
        import rhvoice
        parts += extra_engine_parts(rhvoice.rhvoice_engine(), args.rhvoice, 100, trigger, stem, tag, fe, noise, sc, seed, ck)
    E = np.concatenate([p[0] for p in parts])
    engine_of = np.full(len(E), -1, np.int16)          # -1: not a trigger canvas whose engine is known
    if args.hold_out:
        offs = np.concatenate([[0], np.cumsum([len(p[0]) for p in parts])])
        for i, lab in eng_parts.items():
            engine_of[offs[i]:offs[i + 1]] = lab
    Y = np.concatenate([p[1] for p in parts])
    K = np.concatenate([p[2] for p in parts])
    log(f"{len(E)} canvases of {STEPS} scores, {int((Y == 1).any(axis=1).sum())} with the trigger "
        f"({(time.time() - t_start) / 60:.1f} min so far)")
    vrng = np.random.default_rng(seed + 1)
    vname = ("valstream" if args.val_minutes == 30 else f"valstream{args.val_minutes}m") + f"{tag}{nt}"
    vE, v_seconds = cached(ck(vname), lambda: (lambda e, s: (e[None], np.array([[s]]), np.zeros(1, np.int8)))(
        *validation_stream(feat, vrng, vpool, noise, args.val_minutes * 60 * sc * ns)))[:2]
    vE, v_seconds = vE[0], float(v_seconds[0, 0])
    log(f"validation stream: {v_seconds / 60:.1f} min of training-engine speech never trained on")
    stream_engine = None
    if whole:
        vpools_by_engine = [render_pool(eng, 400, "val", trigger=trigger) for eng in engines]
        seeds = [args.seed + zlib.crc32(file_stem(t).encode()) % 100000 + 1 for t in DEFAULT_TRIGGERS]
        seeds.sort(key=lambda s_: s_ != seed + 1)
        stream_engine = holdout.stream_engines(ck(vname), fe, pools_by_engine, vpools_by_engine, seeds, args.val_minutes * 60)
        log("validation stream by engine: " + ", ".join(f"{e} {np.mean(stream_engine == i) * v_seconds / 60:.1f} min"
                                                       for i, e in enumerate(eng_names)))
    mE = None                                       # no mining stream without --mine-hours
    if args.mine_hours > 0:   # trigger-independent, shared by all trainings
        if args.mine_source == "human":       # candidate recipe v21: the recorded speech sets' training halves
            mE = human_mining_stream(args, fe, noise, ck)
        else:
            if args.mine_source == "fresh":   # sentences no canvas holds (rendered once, cached)
                mpool = [c for eng in engines for c in render_mining_pool(eng, trigger=trigger)]
                mname = f"minestream-fresh{args.mine_hours:g}h{tag}{nt}"
            else:                             # the training pool's own sentences (what recipe v4's first try used)
                mpool, mname = pool, f"minestream{args.mine_hours:g}h{tag}{nt}"
            mE = cached(ck(mname), lambda: mining_stream(
                Featurizer(fe, np.random.default_rng(405)), np.random.default_rng(404), mpool, noise,
                args.mine_hours * 3600 * sc * ns))[0]
        log(f"mining stream: {len(mE) * mE.shape[1] * STEP_S / 3600:.1f} h of "
            + ("recorded human speech, gaps included" if args.mine_source == "human" else f"{args.mine_source} training-engine sentences")
            + " (hard-negative source)")
    xE = xY = xK = None                             # no extra validation without --near-val
    if args.near_val > 0:     # candidate recipe v22: the near-miss limit read on more canvases, validation only
        xE, xY, xK = near_validation(int(args.near_val * sc), fe, trigger, stem, engines, near, all_clips, pool, noise, ck, log)
    return SimpleNamespace(E=E, Y=Y, K=K, engine_of=engine_of, n_orig=n_orig, eng_names=eng_names, held_ids=held_ids,
                           whole=whole, wtag=wtag, vE=vE, v_seconds=v_seconds, stream_engine=stream_engine, mE=mE,
                           others_rendered=others_rendered, xE=xE, xY=xY, xK=xK)


def human_mining_stream(args, fe, noise, ck):
    """The mining stream of --mine-source human (candidate recipe v21): the training halves of the voice
    prompts, the stamp descriptions and the game's lines (real_halves.py) in a random order with
    0.1-1 s gaps, in 30 s segments through training rooms and noise, as mining_stream builds the
    training engines'. The stream is cut at the speech's own length (or --mine-hours if shorter), so
    the gaps crowd the last recordings of the order out. The evaluation halves are never in it."""
    prompt_files, pkey = real_halves.prompt_names()
    stamp_files, skey = real_halves.stamp_names()
    game_lines, gkey = real_halves.game_names()
    name = f"minestream-human{args.mine_hours:g}h-{zlib.crc32(f'{pkey} {skey} {gkey}'.encode()):08x}"

    def build():
        pool = [a for _, a in real_halves.prompt_recordings(prompt_files) + real_halves.stamp_recordings(stamp_files) + real_halves.game_recordings(game_lines)]
        hours = sum(map(len, pool)) / 16000 / 3600
        log(f"human mining stream: {len(pool)} recordings, {hours:.2f} h of speech (prompts, stamps, game lines: training halves)")
        return mining_stream(Featurizer(fe, np.random.default_rng(415)), np.random.default_rng(414), pool, noise,
                             min(args.mine_hours, hours) * 3600)
    return cached(ck(name), build)[0]


def split(args, seed, E, Y, K, engine_of, n_orig, held_ids, eng_names, whole):
    """The input normalisation, the validation and training canvases, and which scores the loss
    reads; rng goes on to draw member 0's batch order (fit.py)."""
    flat = E[:, ::4].reshape(-1, frontend.EMB_DIM).astype(np.float64)
    mean, std = flat.mean(axis=0), np.maximum(flat.std(axis=0), 1e-3)
    mean_w, std_w = np.tile(mean, args.window).astype(np.float32), np.tile(std, args.window).astype(np.float32)
    rng = np.random.default_rng(seed + 2)
    pseed = split_seed(args, seed)
    # --split-seed: the split from its own draws, everything after it (batch order, ...) from the seed's
    perm = (rng if pseed == seed else np.random.default_rng(pseed + 2)).permutation(n_orig)
    n_val = n_orig // 20
    val_idx, tr_idx = perm[:n_val], np.concatenate([perm[n_val:], np.arange(n_orig, len(E))])
    if args.hold_out:
        # Leave one engine out: none of its trigger canvases (plain or wide) is trained on; the
        # validation's trigger canvases are all of its plain ones and nothing else, so recall
        # measures a voice the head never heard. Negatives and the stream are as usual.
        held = np.isin(engine_of, held_ids)
        has_pos = (Y == 1).any(axis=1)
        val_idx = np.concatenate([val_idx[~has_pos[val_idx]], np.flatnonzero(held[:n_orig] & has_pos[:n_orig])])
        if whole:            # and every one of its negative canvases (none is trained on)
            extra_neg = np.setdiff1d(np.flatnonzero(held[:n_orig] & ~has_pos[:n_orig]), val_idx)
            val_idx = np.concatenate([val_idx, extra_neg])
            log(f"leave-one-engine-out entirely: {int((held & ~has_pos).sum())} of its negative canvases held out too")
        tr_idx = tr_idx[~held[tr_idx]]
        log(f"leave-one-engine-out: {', '.join(eng_names[i] for i in held_ids)} held out; training on "
            f"{int(has_pos[tr_idx].sum())} trigger canvases, validating on {int(held[:n_orig].sum())} of the held-out engine")
    if args.near_weight > 1:  # near-miss canvases (kind 1) trained on more often, validation untouched
        tr_idx = np.concatenate([tr_idx] + [tr_idx[K[tr_idx] == 1]] * (args.near_weight - 1))
        log(f"near-miss canvases trained {args.near_weight} times: {int((K[tr_idx] == 1).sum())} of {len(tr_idx)} training canvases")
    start_canvas = rng.random(len(E)) < 0.1             # these also learn from the stream-start scores
    step_ok = np.arange(STEPS)[None, :] >= FIRST_STEP
    mask_all = (step_ok | start_canvas[:, None]).astype(np.float32)
    return mean_w, std_w, rng, val_idx, tr_idx, step_ok, mask_all


def extra_engine_parts(eng, count, seed_off, trigger, stem, tag, fe, noise, sc, seed, ck):
    """Canvases spoken by an extra engine alone (its own sentences around its triggers, so a voice
    is never the cue): count trigger canvases, a sixth as many cut short, its near misses and
    speech as negatives, and the other default triggers in its voices. Kokoro's caches keep their
    names and seeds (seed_off 0)."""
    name = eng.name
    epos, enear = render_extra(eng, trigger)
    epool = render_extra_pool(eng, trigger)
    log(f"{name}: {len(epos)} triggers, {len(enear)} near misses, {len(epool)} sentences")
    feat_e = Featurizer(fe, np.random.default_rng(seed + 39 + seed_off))
    n = int(count * sc)
    out = [cached(ck(f"{name}-{stem}-p{count}"), lambda: positives(
               feat_e, np.random.default_rng(seed + 37 + seed_off), epos, epool, noise, n)),
           cached(ck(f"{name}-partial-{stem}"), lambda: partials(
               feat_e, np.random.default_rng(seed + 38 + seed_off), epos, epool, noise, n // 6))]
    shared = trigger.lower() in DEFAULT_TRIGGERS
    out.append(cached(ck(f"{name}-neg" + ("" if shared else f"-{stem}") + tag), lambda: negatives(
        Featurizer(fe, np.random.default_rng(409 + seed_off)), np.random.default_rng(408 + seed_off), enear, epool, noise,
        {"near": int(800 * sc), "speech": int(800 * sc), "noise": 0})))
    if shared:           # the other default triggers in its voices (a new phrase skips these)
        for t in DEFAULT_TRIGGERS:
            if file_stem(t) != stem:
                theirs = render_extra(eng, t)[0]
                out.append(cached(ck(f"{name}-other-{file_stem(t)}"), lambda theirs=theirs, t=t: positives(
                    Featurizer(fe, np.random.default_rng(zlib.crc32(t.encode()) + 7 + seed_off)),
                    np.random.default_rng(zlib.crc32(t.encode()) + 8 + seed_off), theirs, epool, noise, int(300 * sc), kind=2)))
    return out
