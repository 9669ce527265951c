"""Near misses found by sound (recipe v16, train_head.py --phonetic-near N): the words and word pairs
of the training sentences that espeak-ng says most like a new trigger, by edit distance between their
phonemes. Candidate recipe v17 (--phonetic-common N, RULE-V22) adds the common English words that
sound like it, alone or beside a function word as running speech says it (wordfreq's list; vowels
swapped for vowels count half), since the training sentences are mostly technical prose. Measured and
not adopted: it met the alexa goal on one seed of three, as v16 does (RULE-V22's outcome).

A phrase the user picks gets only generic near misses and edits of its own spelling
(speech.near_misses); the heads' false wakes on voices they never heard land on words that share most
of the trigger's sounds ("x", "makes", "affects me" for "alexa": RULE-V20's look at where they wake
on the unseen-voice stream), and these are the words training should see said in every training voice.

    .venv/bin/python phonetic.py alexa [--n 40]             (prints the neighbours and their distances)
    .venv/bin/python phonetic.py alexa --common [--n 40]    (recipe v17's common words)
"""
import argparse
import collections
import functools
import re
import subprocess

STRESS = re.compile(r"[ˈˌː\s]")


def phonemes(lines):
    """espeak-ng's IPA for each line (one call; it answers a line per input line), stress and length
    marks and spaces removed."""
    out = subprocess.run(["espeak-ng", "-q", "--ipa", "-v", "en-us"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True).stdout.splitlines()
    if len(out) != len(lines):
        raise RuntimeError(f"espeak-ng gave {len(out)} lines of phonemes for {len(lines)} words")
    return [STRESS.sub("", o) for o in out]


VOWELS = set("aeiouæɐəɛɜɚɪɑɔʊʌᵻɒɝɨ")
# Function words as espeak-ng says them inside a sentence (alone, "a" is the letter's name).
FUNCTION = {"a": "ɐ", "an": "ɐn", "the": "ðə", "of": "ʌv", "to": "tə", "is": "ɪz", "it": "ɪt", "as": "æz",
            "in": "ɪn", "and": "ænd"}


def distance(a, b, vowel_swap=1.0):
    """Levenshtein distance between two phoneme strings; a vowel swapped for another vowel costs
    vowel_swap (recipe v16: 1; v17's weighted_distance: half, since running speech blurs vowels:
    "makes an" is /meɪksɐn/ beside alexa's /ɐlɛksə/)."""
    prev = [float(j) for j in range(len(b) + 1)]
    for i, ca in enumerate(a, 1):
        cur = [float(i)]
        for j, cb in enumerate(b, 1):
            sub = 0 if ca == cb else (vowel_swap if ca in VOWELS and cb in VOWELS else 1)
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + sub))
        prev = cur
    return prev[-1]


def weighted_distance(a, b):
    return distance(a, b, vowel_swap=0.5)


def vocabulary(sentences, top=24000):
    """The `top` most frequent single words and word pairs of the sentences, with their counts."""
    counts = collections.Counter()
    for s in sentences:
        w = re.findall(r"[a-z]+", s.lower())
        counts.update(w)
        counts.update(f"{a} {b}" for a, b in zip(w, w[1:]))
    return counts.most_common(top)


@functools.lru_cache(maxsize=None)
def neighbours(trigger, n=40):
    """The n words or word pairs closest to the trigger by sound (fewest phoneme edits, at most half
    the trigger's phonemes; the more frequent first among equals), never the trigger itself."""
    import render
    import speech
    tr, _ = render.split_sentences(trigger)
    vocab = [(t, c) for t, c in vocabulary(tr) if not speech.contains_trigger(t, [trigger])]
    target = phonemes([trigger.lower()])[0]
    said = phonemes([t for t, _ in vocab])
    limit = max(2, len(target) // 2)
    scored = []
    for (text, count), ph in zip(vocab, said):
        if not ph or abs(len(ph) - len(target)) > limit:
            continue
        d = distance(ph, target)
        if 0 < d <= limit:
            scored.append((d / len(target), -count, text))
    return [text for _, _, text in sorted(scored)[:n]]


def common(trigger, n=40):
    """The n common English words closest to the trigger by sound (recipe v17), each alone or with a
    function word before or after it (its closest form; "makes a", "a looks")."""
    return [text for _, _, text, _ in common_scored(trigger, n)]


@functools.lru_cache(maxsize=None)
def common_scored(trigger, n=40, top=30000, min_zipf=4.0):
    """common's words as (distance, -zipf, text, phonemes): wordfreq's `top` words, those at least
    `min_zipf` (once in 10,000 words), within half the trigger's phonemes by weighted_distance;
    closest first, the more frequent first among equals; never the trigger."""
    import speech
    import voices
    voices.ensure_wheels("wordfreq", ["wordfreq"], "requirements-wordfreq.txt", "~58 MB", "--phonetic-common")
    import wordfreq
    words = [w for w in wordfreq.top_n_list("en", top) if re.fullmatch(r"[a-z]+", w) and w not in FUNCTION
             and wordfreq.zipf_frequency(w, "en") >= min_zipf]
    target = phonemes([trigger.lower()])[0]
    limit = max(2, len(target) // 2)
    best = {}
    for w, ph in zip(words, phonemes(words)):
        forms = [(w, ph)] + [(f"{w} {f}", ph + p) for f, p in FUNCTION.items()] + [(f"{f} {w}", p + ph) for f, p in FUNCTION.items()]
        for text, said in forms:
            if abs(len(said) - len(target)) > limit or speech.contains_trigger(text, [trigger]):
                continue
            d = weighted_distance(said, target)
            if 0 < d <= limit and (w not in best or d < best[w][0]):
                best[w] = (d, -wordfreq.zipf_frequency(w, "en"), text, said)
    return tuple(sorted(best.values())[:n])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trigger")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--common", action="store_true", help="recipe v17's common words (weighted distance)")
    args = ap.parse_args()
    if args.common:      # the phonemes as running speech says them, which is what was measured
        for d, z, text, said in common_scored(args.trigger, args.n):
            print(f"{text:24s} {said:16s} {d:g}  (Zipf {-z:.1f})")
        return
    target = phonemes([args.trigger.lower()])[0]
    words = neighbours(args.trigger, args.n)
    for w, ph in zip(words, phonemes(words)):
        print(f"{w:24s} {ph:16s} {distance(ph, target):g}")


if __name__ == "__main__":
    main()
