"""Week 1: music as tokens (chapter 0) and attention in an RNN (chapter 1)."""
from __future__ import annotations

import numpy as np

from ..spec import Assignment, Question, Written

VOCAB = 64          # a vocabulary size for the unigram question's hidden cases


# ----------------------------------------------------------------------------- q1: one voice of the raster

def voice_line(tokens, voice):
    """The reference: the tokens of one voice (0 soprano ... 3 bass) of a raster BOS, S A T B, S A T B, ..."""
    return [int(t) for t in np.asarray(tokens)[1 + voice::4]]


def voice_cases(variant, rng):
    out = []
    for steps in (1, 5, 16, int(rng.integers(20, 40))):
        tokens = [1] + rng.integers(4, VOCAB, 4 * steps).tolist()
        out.append({"tokens": tokens, "voice": int(rng.integers(0, 4))})
    return out


# ----------------------------------------------------------------------------- q2: an add-alpha unigram

def unigram_nll(train, test, alpha, vocab):
    """The reference: the mean NLL (nats per token) of ``test`` under add-``alpha`` unigram counts of ``train``."""
    counts = np.bincount(np.asarray(train, dtype=int), minlength=vocab).astype(float)
    p = (counts + alpha) / (counts.sum() + alpha * vocab)
    return float(-np.log(p[np.asarray(test, dtype=int)]).mean())


def unigram_cases(variant, rng):
    out = []
    for n in (10, 200, 1000):
        train = rng.integers(0, VOCAB, n) if n > 10 else rng.integers(0, 8, n)
        out.append({"train": train.tolist(), "test": rng.integers(0, VOCAB, 50).tolist(),
                    "alpha": float(rng.choice([0.1, 0.5, 1.0, 2.0])), "vocab": VOCAB})
    return out


# ----------------------------------------------------------------------------- q3: a number of your variant

def repeat_share(voice, pieces):
    """The reference: over the given training chorales of the embedded corpus, the share of steps (after the
    first) at which ``voice`` sounds the same pitch as one step earlier (rests count as a pitch, -1)."""
    from musictx_lite import load_data

    data = load_data("chorales")
    same = total = 0
    for i in pieces:
        line = data.train[i].pitches[:, voice]
        same += int((line[1:] == line[:-1]).sum())
        total += len(line) - 1
    return same / total


# ----------------------------------------------------------------------------- q4: dot-product attention

def dot_attention(H, s):
    """The reference: Luong's dot-product attention over an RNN's states H (T, C) for a query s (C,): the
    weights softmax(H s) (T,) and the context (C,), their weighted sum of the rows of H."""
    H, s = np.asarray(H, dtype=float), np.asarray(s, dtype=float)
    e = H @ s
    w = np.exp(e - e.max())
    w /= w.sum()
    return {"weights": w, "context": w @ H}


def attention_cases(variant, rng):
    return [{"H": rng.normal(0, scale, (T, C)), "s": rng.normal(0, 1, C)}
            for T, C, scale in ((1, 4, 1.0), (6, 8, 1.0), (12, 16, 3.0), (30, 8, 10.0))]


ASSIGNMENT = Assignment(
    week=1, title="Tokens, a baseline and attention in an RNN", chapters=(0, 1),
    intro="The raster of chapter 0, the simplest baseline a model must beat, and the attention that chapter 1 "
          "adds to an LSTM.",
    variant=lambda rng: {"voice": int(rng.integers(0, 4)),
                         "pieces": sorted(rng.choice(190, size=10, replace=False).tolist())},
    setup="import numpy as np",
    questions=(
        Question(
            "q1", 2, "A chorale's raster is `BOS`, then the soprano, alto, tenor and bass tokens of each 16th step "
            "(chapter 0). Write `voice_line(tokens, voice)`: the tokens of one voice (0 soprano, 1 alto, 2 tenor, "
            "3 bass) in order, as a list of ints. `tokens` is a list of ints starting with BOS.",
            "voice_line",
            "def voice_line(tokens, voice):\n    raise NotImplementedError",
            "assert voice_line([1, 10, 11, 12, 13, 20, 21, 22, 23], 0) == [10, 20]\n"
            "assert voice_line([1, 10, 11, 12, 13], 3) == [13]\nprint('q1: public tests pass')",
            voice_line, voice_cases),
        Question(
            "q2", 3, "The unigram baseline with add-$\\alpha$ smoothing: count each token of `train` (ints in "
            "`range(vocab)`), $p(v) = (c_v + \\alpha) / (N + \\alpha V)$ with $N$ the number of training tokens and "
            "$V$ = `vocab`. Write `unigram_nll(train, test, alpha, vocab)`: the mean of $-\\log p(x)$ over the "
            "tokens $x$ of `test`, in nats, as a float.",
            "unigram_nll",
            "def unigram_nll(train, test, alpha, vocab):\n    raise NotImplementedError",
            "import math\nassert abs(unigram_nll([0, 0, 1], [0], 1.0, 2) - -math.log(3 / 5)) < 1e-9\n"
            "assert abs(unigram_nll([], [1], 1.0, 4) - math.log(4)) < 1e-9\nprint('q2: public tests pass')",
            unigram_nll, unigram_cases),
        Question(
            "q3", 2, "How often does a voice hold its pitch from one 16th step to the next? For the voice "
            "`VARIANT['voice']` (0 soprano ... 3 bass) and the training chorales numbered `VARIANT['pieces']` of "
            "the book's embedded corpus (`musictx_lite.load_data('chorales').train[i].pitches`, a (steps, 4) "
            "array of MIDI pitches, -1 for a rest), set `REPEAT_SHARE` to the share of steps after the first at "
            "which that voice's pitch equals its pitch one step earlier (a rest equal to a rest counts), pooled "
            "over the pieces: the number of such steps over the number of steps compared.",
            "REPEAT_SHARE",
            "from musictx_lite import load_data\n\nREPEAT_SHARE = None   # a float, for your VARIANT",
            "assert isinstance(REPEAT_SHARE, float) and 0 < REPEAT_SHARE < 1\nprint('q3: public tests pass')",
            repeat_share, timeout=20),
        Question(
            "q4", 3, "Luong's dot-product attention: for an RNN's hidden states `H` (T, C) and a query `s` (C,), "
            "scores $e = H s$, weights $w = \\mathrm{softmax}(e)$ over the T states, context $c = w H$. Write "
            "`dot_attention(H, s)` returning a dict with the NumPy arrays `'weights'` (T,) and `'context'` (C,). "
            "It must stay finite for large scores.",
            "dot_attention",
            "def dot_attention(H, s):\n    raise NotImplementedError",
            "out = dot_attention(np.eye(3), np.array([0.0, 0.0, 0.0]))\n"
            "assert np.allclose(out['weights'], 1 / 3) and np.allclose(out['context'], 1 / 3)\n"
            "print('q4: public tests pass')",
            dot_attention, attention_cases),
    ),
    written=Written(
        "Chapter 0's \"same voice, previous step\" baseline predicts each voice's next token from its own previous "
        "one (only the two-token table, which adds the token just before, does better). Using your "
        "`REPEAT_SHARE`, explain in at most 150 words why such a baseline already scores far better than the "
        "unigram, and name one thing about a chorale that it cannot capture and attention can.",
        ((1, "reads REPEAT_SHARE as how often the best guess 'the same as before' is right on the 16th grid"),
         (1, "links a frequent exact repeat to a low NLL for that token, against the unigram's spread"),
         (1, "names something beyond the previous token of the same voice: the other voices at this step, the "
             "beat, a phrase or a cadence many steps back"))),
)
