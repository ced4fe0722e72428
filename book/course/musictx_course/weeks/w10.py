"""Week 10: the comparison (chapter 11): error bars over pieces, the statistics of the music, an ensemble's NLL,
and what a key/value cache saves."""
from __future__ import annotations

import numpy as np

from ..spec import Assignment, Question, Written

# ----------------------------------------------------------------------------- q1: how the outer voices move


def outer_motion(pitches):
    """The reference: the shares of contrary, similar and oblique motion between the soprano and the bass."""
    g = np.asarray(pitches, dtype=np.int64)
    s0, s1, b0, b1 = g[:-1, 0], g[1:, 0], g[:-1, 3], g[1:, 3]
    sound = (s0 >= 0) & (s1 >= 0) & (b0 >= 0) & (b1 >= 0)
    ds, db = s1 - s0, b1 - b0
    moving = sound & ((ds != 0) | (db != 0))
    n = int(moving.sum())
    if n == 0:
        return {"contrary": 0.0, "similar": 0.0, "oblique": 0.0}
    both = moving & (ds != 0) & (db != 0)
    contrary = int((both & (np.sign(ds) != np.sign(db))).sum())
    similar = int((both & (np.sign(ds) == np.sign(db))).sum())
    oblique = int((moving & ((ds == 0) | (db == 0))).sum())
    return {"contrary": contrary / n, "similar": similar / n, "oblique": oblique / n}


def motion_cases(variant, rng):
    out = []
    for steps, rest in ((1, 0.0), (2, 0.0), (24, 0.1), (int(rng.integers(60, 120)), 0.15)):
        # a random walk per voice, held for a few steps now and then, with some rests
        start = np.array([72, 65, 58, 48])
        moves = rng.choice([-2, -1, 0, 0, 0, 1, 2], size=(steps, 4))
        g = start + np.cumsum(moves, axis=0)
        g[rng.random((steps, 4)) < rest] = -1
        out.append({"pitches": g.astype(np.int64)})
    return out


# ----------------------------------------------------------------------------- q2: the ensemble's NLL


def ensemble_nll(logp, targets):
    """The reference: each model's mean NLL and the NLL of the mixture (the mean of the models' probabilities)."""
    import math

    import torch

    logp = torch.as_tensor(logp, dtype=torch.float64)                # (M, T, V)
    targets = torch.as_tensor(targets, dtype=torch.long)             # (T,)
    M, T, _ = logp.shape
    picked = logp[:, torch.arange(T), targets]                       # (M, T)
    each = -picked.mean(dim=1)                                       # (M,)
    mix = torch.logsumexp(picked, dim=0) - math.log(M)              # (T,): log of the mean probability
    return {"each": each.numpy(), "mixture": float(-mix.mean())}


def ensemble_cases(variant, rng):
    import torch

    out = []
    for M, T, V, scale in ((1, 1, 5, 1.0), (3, 8, 12, 2.0), (5, 40, 30, 4.0), (4, 16, 20, 400.0)):
        logits = torch.as_tensor(rng.normal(0, scale, (M, T, V)))
        logp = torch.log_softmax(logits, dim=-1)
        out.append({"logp": logp.numpy(), "targets": rng.integers(0, V, T).astype(np.int64)})
    return out


# ----------------------------------------------------------------------------- q3: an interval over pieces


def onbeat_gap(pieces, voices, seed, n):
    """The reference: the on-beat share of onsets of voices[0] minus that of voices[1], pooled over the validation
    chorales ``pieces``, with a paired 95% percentile bootstrap interval over pieces."""
    import numpy as np

    from musictx_lite import load_data

    data = load_data("chorales")
    on = np.zeros((len(pieces), 2))
    all_ = np.zeros((len(pieces), 2))
    for k, i in enumerate(pieces):
        g = data.valid[i].pitches
        for c, v in enumerate(voices):
            line = g[:, v]
            onset = line >= 0
            onset[1:] &= line[1:] != line[:-1]
            on[k, c] = (onset & (np.arange(len(line)) % 4 == 0)).sum()
            all_[k, c] = onset.sum()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(pieces), size=(n, len(pieces)))
    share = on[idx].sum(1) / all_[idx].sum(1)                        # (n, 2)
    lo, hi = np.quantile(share[:, 0] - share[:, 1], [0.025, 0.975])
    gap = on.sum(0) / all_.sum(0)
    return [float(gap[0] - gap[1]), float(lo), float(hi)]


def gap_variant(rng):
    voices = rng.choice(4, size=2, replace=False)
    return {"pieces": sorted(rng.choice(66, size=20, replace=False).tolist()),
            "voices": [int(v) for v in voices], "seed": int(rng.integers(0, 10_000)), "n": 1000}


# ----------------------------------------------------------------------------- q4: what the cache saves


def score_counts(prompt, new, context):
    """The reference: query-key scores per layer and head while sampling ``new`` tokens after ``prompt`` tokens,
    re-encoding the window at every token against reading it once and then one query per token (a cache)."""
    re_encoded = cached = 0
    for k in range(new):
        t = prompt + k                                               # tokens so far, before drawing the next
        w = min(t, context)
        re_encoded += w * (w + 1) // 2
        cached += w * (w + 1) // 2 if k == 0 else w
    return {"cached": cached, "re_encoded": re_encoded, "ratio": re_encoded / cached}


def count_cases(variant, rng):
    return [{"prompt": 1, "new": 1, "context": 8},
            {"prompt": int(rng.integers(2, 10)), "new": int(rng.integers(2, 10)), "context": 64},
            {"prompt": int(rng.integers(20, 60)), "new": int(rng.integers(300, 700)), "context": 256},
            {"prompt": int(rng.integers(300, 400)), "new": int(rng.integers(50, 200)), "context": 256},
            {"prompt": 1, "new": int(rng.integers(1000, 3000)), "context": int(rng.choice([512, 1024]))}]


ASSIGNMENT = Assignment(
    week=10, title="Comparing models: error bars and sampling cost", chapters=(11,),
    intro="Chapter 11 sets the book's models side by side. This assignment puts numbers on the music, an "
          "interval over pieces on one of them, scores an ensemble of models as the distillation section does, "
          "and counts what a key/value cache saves when a model samples.",
    variant=gap_variant,
    setup="import numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 2, "Chapter 11 puts numbers on what a listener hears. Here is one more: how the outer voices "
            "move against each other. `pitches` is a (steps, 4) NumPy int array, S A T B, MIDI pitches on the 16th "
            "grid, -1 for a rest. Between each step and the next, look at the soprano (column 0) and the bass "
            "(column 3); a *motion* is a pair of consecutive steps at which both voices sound at both steps and at "
            "least one of them changes pitch. A motion is *contrary* when both change pitch in opposite directions, "
            "*similar* when both change pitch in the same direction (parallel motion included), and *oblique* when "
            "exactly one of them changes pitch. Write `outer_motion(pitches)` returning a dict of floats "
            "`{'contrary': ..., 'similar': ..., 'oblique': ...}`: each kind's share of the motions (they sum to 1), "
            "or all three `0.0` when there is no motion (a grid of one step, for instance).",
            "outer_motion",
            "def outer_motion(pitches):\n    raise NotImplementedError",
            "g = np.array([[72, 67, 64, 48], [74, 67, 64, 47], [74, 67, 64, 45], [76, 67, 64, 47], "
            "[76, 67, 64, -1]])\n"
            "out = outer_motion(g)\n"
            "assert set(out) == {'contrary', 'similar', 'oblique'}\n"
            "assert abs(out['contrary'] - 1 / 3) < 1e-9 and abs(out['similar'] - 1 / 3) < 1e-9\n"
            "assert abs(out['oblique'] - 1 / 3) < 1e-9\n"
            "assert outer_motion(g[:1]) == {'contrary': 0.0, 'similar': 0.0, 'oblique': 0.0}\n"
            "print('q1: public tests pass')",
            outer_motion, motion_cases),
        Question(
            "q2", 3, "Chapter 11's distillation section averages the predicted probabilities of several models, "
            "token by token, and the mixture scores better than any of them. `logp` is a float64 tensor (M, T, V): "
            "the log-probabilities (each row a log-softmax over the V tokens) that M models give the T tokens of a "
            "piece; `targets` is a LongTensor (T,) of the tokens that came. Write `ensemble_nll(logp, targets)` "
            "returning a dict: `'each'`, an array or tensor (M,) of each model's mean NLL over the T tokens, in "
            "nats, and `'mixture'`, a float: the mean over the tokens of $-\\log \\frac{1}{M}\\sum_m p_m(x_t)$. "
            "It must stay finite when every model gives a target a log-probability of -1000.",
            "ensemble_nll",
            "def ensemble_nll(logp, targets):\n    raise NotImplementedError",
            "import math\n"
            "lp = torch.log(torch.tensor([[[0.5, 0.5]], [[0.1, 0.9]]], dtype=torch.float64))   # M=2, T=1, V=2\n"
            "out = ensemble_nll(lp, torch.tensor([0]))\n"
            "assert np.allclose(np.asarray(out['each'], dtype=float), [math.log(2), math.log(10)])\n"
            "assert abs(float(out['mixture']) - -math.log(0.3)) < 1e-9\n"
            "far = ensemble_nll(torch.full((2, 1, 2), -1000.0, dtype=torch.float64), torch.tensor([1]))\n"
            "assert abs(float(far['mixture']) - 1000.0) < 1e-6\n"
            "print('q2: public tests pass')",
            ensemble_nll, ensemble_cases, tensors=True),
        Question(
            "q3", 3, "An interval over pieces, as chapter 11's paired bootstrap draws it, on a statistic of the "
            "music. From the validation chorales numbered `VARIANT['pieces']` of the embedded corpus "
            "(`musictx_lite.load_data('chorales').valid[i].pitches`, (steps, 4), -1 for a rest), take the two "
            "voices `VARIANT['voices']` (0 soprano ... 3 bass). In one voice, step `t` is an *onset* when the voice "
            "sounds there (pitch >= 0) and `t == 0` or its pitch differs from step `t - 1`'s; an onset is *on the "
            "beat* when `t % 4 == 0`. A voice's on-beat share over a set of pieces is its on-beat onsets over its "
            "onsets, both summed over the pieces (pooled). Set `ONBEAT_GAP` to a list of three floats "
            "`[gap, low, high]`: `gap` the first voice's share minus the second's over your pieces, and `low`, "
            "`high` the 2.5 and 97.5 percentiles (`np.quantile`, its default method) of that difference over "
            "`VARIANT['n']` resamples drawn as `idx = np.random.default_rng(VARIANT['seed']).integers(0, P, "
            "size=(VARIANT['n'], P))`, where P is the number of pieces and row r of `idx` lists, by their place in "
            "`VARIANT['pieces']`, the pieces of resample r (with repeats). Both voices use the same resampled "
            "pieces: the interval is paired.",
            "ONBEAT_GAP",
            "from musictx_lite import load_data\n\nONBEAT_GAP = None   # [gap, low, high], for your VARIANT",
            "assert isinstance(ONBEAT_GAP, list) and len(ONBEAT_GAP) == 3\n"
            "assert all(isinstance(x, float) for x in ONBEAT_GAP)\n"
            "assert ONBEAT_GAP[1] <= ONBEAT_GAP[2] and -1 <= ONBEAT_GAP[0] <= 1\n"
            "print('q3: public tests pass')",
            onbeat_gap, timeout=20),
        Question(
            "q4", 2, "What does a key/value cache save? Count the query-key scores (dot products $q_i \\cdot k_j$) "
            "that one attention head of one layer computes while a model samples `new` tokens after a prompt of "
            "`prompt` tokens (ints >= 1), when it can read at most `context` tokens. Before drawing each new "
            "token, let t be the number of tokens so far (t = prompt, prompt + 1, ..., prompt + new - 1) and "
            "$w = \\min(t, \\text{context})$ the window it reads. *Re-encoding* runs the causal model on the w "
            "tokens of the window every time: query i of the window scores keys 1..i, $w(w+1)/2$ scores. *With a "
            "cache*, the first draw reads the prompt's window the same way, $w(w+1)/2$ scores; every later draw "
            "passes only the newest token, whose one query scores the w keys of the window (its own included). "
            "Write `score_counts(prompt, new, context)` returning a dict `{'cached': int, 're_encoded': int, "
            "'ratio': float}`, the ratio being re-encoded over cached.",
            "score_counts",
            "def score_counts(prompt, new, context):\n    raise NotImplementedError",
            "assert score_counts(1, 1, 8) == {'cached': 1, 're_encoded': 1, 'ratio': 1.0}\n"
            "out = score_counts(2, 3, 3)          # windows of 2, 3, 3 tokens\n"
            "assert out['re_encoded'] == 3 + 6 + 6 and out['cached'] == 3 + 3 + 3\n"
            "assert abs(out['ratio'] - 15 / 9) < 1e-12\n"
            "print('q4: public tests pass')",
            score_counts, count_cases),
    ),
    written=Written(
        "Read your `ONBEAT_GAP` as chapter 11 reads a difference between two models. In at most 200 words: does "
        "your interval say that the two voices differ in how often they start notes on the beat, and what would "
        "you answer if the interval straddled 0? Say what the interval measures (which source of variation it "
        "resamples) and what it does not, and why keeping both voices of a piece together (pairing) makes it "
        "narrower than drawing each voice's pieces independently would. Finally, from chapter 11's comparison, "
        "name the other source of variation a difference between two *trained models* must also beat.",
        ((1, "reads the student's own numbers correctly: whether [low, high] excludes 0 and what the sign of the "
             "gap says about the two voices; a straddling interval means the pieces cannot tell, not 'no "
             "difference'"),
         (1, "says the interval resamples the pieces (which chorales were measured), with the data and the "
             "statistic held fixed"),
         (1, "explains pairing: what makes a piece unusual for both voices (its metre, tempo of notes, style) "
             "cancels in the difference, so the resampled differences vary less"),
         (1, "names the seed (training variation, another run of the same model) as the other source, and says "
             "a difference is real only if it is larger than both, as chapter 11 and exercise 11.1 put it"))),
)
