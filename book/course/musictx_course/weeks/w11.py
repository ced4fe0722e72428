"""Week 11: harmonise a melody (chapter 12): cross-attention with a relative term, the lower voices' NLL, what a
masked sampler draws, and how often Bach's own voices break the rules the masks enforce."""
from __future__ import annotations

import numpy as np

from ..spec import Assignment, Question, Written

# ----------------------------------------------------------------------------- q1: cross-attention's weights


def cross_weights(x, m, Wq, Wk, E):
    """The reference: one head's cross-attention weights (n, T) from raster states x to melody states m, with the
    relative term q_i E_{clip(j - sigma(i))} and sigma(i) = floor((i - 1) / 4)."""
    import math

    import torch

    x, m, Wq, Wk, E = (torch.as_tensor(t, dtype=torch.float64) for t in (x, m, Wq, Wk, E))
    q, k = x @ Wq, m @ Wk                                            # (n, d), (T, d)
    n, T, d = q.shape[0], k.shape[0], q.shape[1]
    L = (E.shape[0] + 1) // 2
    sigma = torch.div(torch.arange(n) - 1, 4, rounding_mode="floor")  # (n,): BOS is step -1
    r = (torch.arange(T)[None, :] - sigma[:, None]).clamp(-(L - 1), L - 1) + L - 1   # (n, T) rows of E
    s_rel = (q[:, None, :] * E[r]).sum(-1)                           # (n, T)
    return torch.softmax((q @ k.T + s_rel) / math.sqrt(d), dim=-1).numpy()


def cross_cases(variant, rng):
    out = []
    for n, T, C, d, L in ((1, 1, 4, 2, 1), (5, 2, 8, 4, 2), (13, 3, 8, 4, 4), (33, 8, 16, 8, 4),
                          (int(rng.integers(40, 70)), 16, 16, 4, 8)):
        out.append({"x": rng.normal(0, 1, (n, C)), "m": rng.normal(0, 1, (T, C)),
                    "Wq": rng.normal(0, 0.5, (C, d)), "Wk": rng.normal(0, 0.5, (C, d)),
                    "E": rng.normal(0, 1, (2 * L - 1, d))})
    return out


# ----------------------------------------------------------------------------- q2: the lower voices' NLL


def atb_nll(logits, tokens):
    """The reference: the mean NLL of the alto, tenor and bass targets of a raster (PAD targets skipped), per
    voice and pooled."""
    import torch
    import torch.nn.functional as F

    logits = torch.as_tensor(logits, dtype=torch.float64)            # (N - 1, V)
    tokens = torch.as_tensor(tokens, dtype=torch.long)               # (N,)
    y = tokens[1:]
    nll = F.cross_entropy(logits, y, reduction="none")               # (N - 1,): target p = i + 1
    voice = torch.arange(len(y)) % 4                                 # target at p is voice (p - 1) % 4
    scored = y != 0
    out = {}
    for v, name in ((1, "alto"), (2, "tenor"), (3, "bass")):
        out[name] = float(nll[scored & (voice == v)].mean())
    out["ATB"] = float(nll[scored & (voice > 0)].mean())
    return out


def atb_cases(variant, rng):
    out = []
    for S, V, pad in ((1, 6, 0), (3, 10, int(rng.integers(1, 7))), (10, 20, int(rng.integers(0, 7))),
                      (int(rng.integers(20, 40)), 40, 5)):
        tokens = np.concatenate([[1], rng.integers(2, V, 4 * S)]).astype(np.int64)
        if pad:
            tokens[-pad:] = 0
        out.append({"logits": rng.normal(0, 2, (4 * S, V)), "tokens": tokens})
    return out


# ----------------------------------------------------------------------------- q3: the laws of a masked sampler


def rule_laws(p1, p2, allowed, n):
    """The reference: over pairs (first, second), the model conditioned on the rule, the masked sampler, and the
    likeliest (under the model) of n masked draws."""
    import numpy as np

    p1, p2 = np.asarray(p1, dtype=float), np.asarray(p2, dtype=float)
    ok = np.asarray(allowed, dtype=bool)
    p = p1[:, None] * p2                                             # the model's joint law
    kept = np.where(ok, p, 0.0)
    conditioned = kept / kept.sum()
    rows = np.where(ok, p2, 0.0)
    masked = p1[:, None] * rows / rows.sum(1, keepdims=True)
    best = np.zeros_like(p)
    for a, b in zip(*np.nonzero(ok)):
        at_most = masked[ok & (p <= p[a, b])].sum()
        below = masked[ok & (p < p[a, b])].sum()
        best[a, b] = at_most ** n - below ** n
    return {"conditioned": conditioned, "masked": masked, "best": best}


def laws_cases(variant, rng):
    out = []
    for A, B, n in ((1, 1, 3), (2, 2, 1), (3, 4, int(rng.integers(2, 5))), (5, 6, 8), (4, 3, 1)):
        ok = rng.random((A, B)) < 0.6
        ok[np.arange(A), rng.integers(0, B, A)] = True               # every first chord leads somewhere
        out.append({"p1": rng.dirichlet(np.ones(A)), "p2": rng.dirichlet(np.ones(B), size=A),
                    "allowed": ok, "n": n})
    return out


# ----------------------------------------------------------------------------- q4: Bach against the masks


def bach_forbidden(pieces):
    """The reference: the share of Bach's sounding alto, tenor and bass tokens that the range, crossing and
    spacing masks would forbid, in the validation chorales ``pieces``."""
    import numpy as np

    from musictx_lite import load_data

    ranges = {1: (55, 74), 2: (48, 67), 3: (40, 60)}
    data = load_data("chorales")
    total = 0
    counts = {"range": 0, "crossing": 0, "spacing": 0, "any": 0}
    for i in pieces:
        g = data.valid[i].pitches.astype(np.int64)
        for v in (1, 2, 3):
            x = g[:, v]
            sounds = x >= 0
            lo, hi = ranges[v]
            bad_range = sounds & ((x < lo) | (x > hi))
            above = np.full(len(g), -1)
            for u in range(v):                                       # the nearest sounding voice above wins
                above = np.where(g[:, u] >= 0, g[:, u], above)
            bad_cross = sounds & (above >= 0) & (x > above)
            bad_space = np.zeros(len(g), bool)
            if v in (1, 2):
                upper = g[:, v - 1]
                bad_space = sounds & (upper >= 0) & (x < upper - 12)
            total += int(sounds.sum())
            counts["range"] += int(bad_range.sum())
            counts["crossing"] += int(bad_cross.sum())
            counts["spacing"] += int(bad_space.sum())
            counts["any"] += int((bad_range | bad_cross | bad_space).sum())
    return {k: c / total for k, c in counts.items()}


ASSIGNMENT = Assignment(
    week=11, title="Cross-attention and harmonisation", chapters=(12,),
    intro="Chapter 12 harmonises a melody three ways. This assignment writes the encoder-decoder's "
          "cross-attention with its relative term, scores the lower voices as the chapter does, works out what a "
          "masked sampler draws against what the rules ask for, and measures how often Bach himself would have "
          "been stopped by the masks.",
    variant=lambda rng: {"pieces": sorted(rng.choice(66, size=12, replace=False).tolist())},
    setup="import numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 3, "One head of chapter 12's `CrossAttention`, with row vectors. `x` (n, C) are the states of "
            "the raster's n tokens (BOS at position 0, then S A T B per step), `m` (T, C) the encoder's states of "
            "T melody steps, `Wq`, `Wk` (C, d) the head's projections, and `E` (2L - 1, d) its relative "
            "vectors, row $r + L - 1$ for the distance $r = -(L-1), \\dots, L-1$. All are float64 tensors. "
            "With $Q = xW_Q$, $K = mW_K$ and $\\sigma(i) = \\lfloor (i - 1)/4 \\rfloor$ the melody step of raster "
            "position i (BOS: step -1), the relative term is $S_{ij} = q_i \\cdot E_{r_{ij}}$ with "
            "$r_{ij} = j - \\sigma(i)$ clipped to $[-(L-1), L-1]$. Write `cross_weights(x, m, Wq, Wk, E)` "
            "returning the weights $\\mathrm{softmax}_j\\big((q_i \\cdot k_j + S_{ij})/\\sqrt{d}\\big)$, an array or "
            "tensor (n, T), no mask.",
            "cross_weights",
            "def cross_weights(x, m, Wq, Wk, E):\n    raise NotImplementedError",
            "x, m = torch.zeros(5, 2, dtype=torch.float64), torch.zeros(3, 2, dtype=torch.float64)\n"
            "W = torch.eye(2, dtype=torch.float64)\n"
            "w = torch.as_tensor(np.asarray(cross_weights(x, m, W, W, torch.zeros(3, 2, dtype=torch.float64))))\n"
            "assert w.shape == (5, 3) and torch.allclose(w, torch.full((5, 3), 1 / 3, dtype=torch.float64))\n"
            "x = torch.tensor([[1.0, 0.0]] * 5, dtype=torch.float64)   # q_i = (1, 0): only E's first column counts\n"
            "E = torch.tensor([[0.0, 0.0], [20.0, 0.0], [0.0, 0.0]], dtype=torch.float64)   # L = 2: r = 0 wins\n"
            "w = np.asarray(cross_weights(x, m, W, W, E))\n"
            "assert list(w.argmax(1)) == [0, 0, 0, 0, 0] and w[0, 0] < 0.5   # BOS (step -1) sees r = 1 at j = 0\n"
            "print('q1: public tests pass')",
            cross_weights, cross_cases, tensors=True),
        Question(
            "q2", 2, "Chapter 12 scores a harmoniser by the NLL of Bach's alto, tenor and bass tokens only. "
            "`tokens` is a LongTensor (N,) of one raster, BOS at position 0, then S A T B per step: the token at "
            "position $p \\ge 1$ belongs to voice $(p - 1) \\bmod 4$ (0 soprano, 1 alto, 2 tenor, 3 bass). Its end "
            "may be padded with PAD (token 0), which is never scored. `logits` (N - 1, V), float64: row $p - 1$ is "
            "the prediction of the token at position p. Write `atb_nll(logits, tokens)` returning a dict of "
            "floats: `'alto'`, `'tenor'` and `'bass'`, the mean NLL (nats, log-softmax of the logits) over that "
            "voice's scored tokens, and `'ATB'`, the mean over all scored alto, tenor and bass tokens together. "
            "The soprano is never scored.",
            "atb_nll",
            "def atb_nll(logits, tokens):\n    raise NotImplementedError",
            "import math\n"
            "tok = torch.tensor([1, 5, 6, 7, 8, 5, 6, 0, 0])\n"
            "out = atb_nll(torch.zeros(8, 10, dtype=torch.float64), tok)\n"
            "assert set(out) == {'alto', 'tenor', 'bass', 'ATB'}\n"
            "assert all(abs(out[k] - math.log(10)) < 1e-9 for k in out)\n"
            "lg = torch.zeros(8, 10, dtype=torch.float64)\n"
            "lg[1, 6] = lg[5, 6] = 50.0                     # the two alto targets: nearly certain\n"
            "out = atb_nll(lg, tok)\n"
            "assert out['alto'] < 1e-9 and abs(out['ATB'] - 2 * math.log(10) / 4) < 1e-9\n"
            "print('q2: public tests pass')",
            atb_nll, atb_cases, tensors=True),
        Question(
            "q3", 3, "Chapter 12's toy, in general. A model writes two chords: the first $a$ with probability "
            "`p1[a]` (`p1`, (A,)), then the second $b$ with probability `p2[a, b]` (`p2`, (A, B), rows sum to "
            "1), so the model's law of the pair is $p(a, b)$ = `p1[a] * p2[a, b]`. A rule allows only the pairs "
            "where `allowed[a, b]` is True (`allowed`, (A, B) bool; every row has at least one allowed pair). "
            "Write `rule_laws(p1, p2, allowed, n)` (NumPy arrays, n an int >= 1) returning a dict of (A, B) "
            "arrays, zero at the forbidden pairs: `'conditioned'`, the model's law conditioned on the rule "
            "holding; `'masked'`, the law of the masked sampler, which draws $a$ from `p1` and then $b$ from "
            "`p2[a]` renormalised over the allowed $b$; and `'best'`, the law of the pair the model finds "
            "likeliest ($p(a, b)$ largest) among n independent draws of the masked sampler. The pairs' "
            "probabilities $p(a, b)$ are all different. The chapter enumerates the draws; that is too slow "
            "here (n up to 8, up to 30 pairs): find the law in closed form.",
            "rule_laws",
            "def rule_laws(p1, p2, allowed, n):\n    raise NotImplementedError",
            "p1, p2 = np.array([0.7, 0.3]), np.array([[0.9, 0.1], [0.8, 0.2]])   # C, Em; then G, Bdim\n"
            "ok = np.array([[False, True], [True, True]])                           # C -> G is forbidden\n"
            "out = rule_laws(p1, p2, ok, 2)\n"
            "assert np.allclose(out['masked'], [[0, 0.7], [0.24, 0.06]])\n"
            "assert np.allclose(out['conditioned'], np.array([[0, 0.07], [0.24, 0.06]]) / 0.37)\n"
            "assert np.allclose(out['best'], [[0, 0.76 ** 2 - 0.06 ** 2], [1 - 0.76 ** 2, 0.06 ** 2]])\n"
            "assert np.allclose(rule_laws(p1, p2, ok, 1)['best'], out['masked'])\n"
            "print('q3: public tests pass')",
            rule_laws, laws_cases),
        Question(
            "q4", 2, "How often would the masks have stopped Bach? In the validation chorales numbered "
            "`VARIANT['pieces']` of the embedded corpus (`musictx_lite.load_data('chorales').valid[i].pitches`, "
            "(steps, 4), S A T B, -1 for a rest), look at every step's alto, tenor and bass pitch where that voice "
            "sounds (pitch >= 0): these are the tokens counted. A token breaks *range* when its pitch lies outside "
            "its voice's range (inclusive: alto 55-74, tenor 48-67, bass 40-60); *crossing* when the nearest voice "
            "above it that sounds at that step (for the tenor: the alto, or the soprano where the alto rests) "
            "exists and is lower than it; *spacing* (alto and tenor only) when the voice just above it (soprano "
            "for the alto, alto for the tenor) sounds at that step and is more than 12 semitones above it. Set "
            "`BACH_FORBIDDEN` to a dict of floats `{'range': ..., 'crossing': ..., 'spacing': ..., 'any': ...}`: "
            "the share of the counted tokens (pooled over your pieces and the three voices) that break each rule, "
            "and that break at least one of them.",
            "BACH_FORBIDDEN",
            "from musictx_lite import load_data\n\nBACH_FORBIDDEN = None   # a dict of four floats, for your "
            "VARIANT",
            "assert isinstance(BACH_FORBIDDEN, dict)\n"
            "assert set(BACH_FORBIDDEN) == {'range', 'crossing', 'spacing', 'any'}\n"
            "assert all(0 <= BACH_FORBIDDEN[k] <= BACH_FORBIDDEN['any'] < 1 for k in BACH_FORBIDDEN)\n"
            "print('q4: public tests pass')",
            bach_forbidden, timeout=20),
    ),
    written=Written(
        "Your `BACH_FORBIDDEN['any']` is the share of Bach's own lower-voice tokens that the masks of chapter 12 "
        "would have banned. In at most 200 words: what does a harmoniser gain and lose when these masks hold at "
        "every token, given that Bach breaks them at your rate? Use your `rule_laws` toy (or the chapter's) to "
        "explain why a masked sampler does not sample the model conditioned on the rules, and what keeping the "
        "likeliest of N harmonisations changes. Finally, say which of the chapter's three ways could know, when "
        "it writes the alto under step t, that the melody ends on the next step, and why.",
        ((1, "uses the student's own share: the masks forbid moves Bach makes at that rate, so a masked "
             "harmoniser is stricter than Bach (lower rule rates than his are not better writing), while it "
             "removes the model's worst slips"),
         (1, "explains that the mask renormalises step by step over what is allowed now, without weighing a token "
             "by how likely it leaves the rest of the piece able to keep the rules; a good-looking first choice "
             "can force a poor second (dead ends)"),
         (1, "says that the best of N moves mass toward the likeliest allowed harmonisation as N grows, repairing "
             "bad forced choices at the price of variety, and that it is neither the masked nor the conditioned "
             "law"),
         (1, "names the encoder-decoder (its unmasked encoder reads the whole melody, and cross-attention lets "
             "every raster token read it) and Coconet (it sees the whole melody), against the causal decoder, "
             "which has seen the melody only up to s_t"))),
)
