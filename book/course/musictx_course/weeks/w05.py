"""Week 5: absolute positions (chapter 6)."""
from __future__ import annotations

import math

import numpy as np

from ..spec import Assignment, Question, Written


def _sinusoid_rows(t, C, base=10000.0):
    """Rows t (any ints) of the sinusoid table, in float64: P[t, 2i] = sin(t w_i), P[t, 2i+1] = cos(t w_i)."""
    w = base ** (-np.arange(0, C, 2) / C)
    angle = np.asarray(t, dtype=float)[..., None] * w
    return np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(*angle.shape[:-1], C)


# ----------------------------------------------------------------------------- q1: k tokens later is one linear map

def offset_matrix(k, C, base):
    """The reference: the block-diagonal rotation R_k (C, C) with P[t + k] = P[t] @ R_k for the sinusoids."""
    R = np.zeros((C, C))
    for i in range(C // 2):
        a = k * base ** (-2 * i / C)
        R[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
    return R


def offset_cases(variant, rng):
    return [{"k": k, "C": C, "base": base}
            for k, C, base in ((0, 2, 10000.0), (1, 8, 10000.0), (4, 16, 10000.0), (-3, 8, 100.0),
                               (int(rng.integers(5, 300)), 32, float(rng.choice([1000.0, 10000.0]))))]


# ----------------------------------------------------------------------------- q2: the distance between two positions

def decode_offset(p, q, max_offset, base):
    """The reference: s - t for two rows p = P[t], q = P[s] of the sinusoid table, |s - t| <= max_offset."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    C = len(p)
    w = base ** (-np.arange(0, C, 2) / C)                               # (C/2,)
    k = np.arange(-max_offset, max_offset + 1)[:, None] * w             # (2K + 1, C/2): the angles k w_i
    sp, cp, sq, cq = p[0::2], p[1::2], q[0::2], q[1::2]
    rotated_sin = sp * np.cos(k) + cp * np.sin(k)                       # P[t + k], pair by pair
    rotated_cos = cp * np.cos(k) - sp * np.sin(k)
    score = (rotated_sin * sq + rotated_cos * cq).sum(1)                # P[t + k] . P[s]
    return int(np.argmax(score)) - max_offset


def decode_cases(variant, rng):
    out = []
    for C, K, d in ((8, 16, 0), (8, 64, -5), (16, 100, 100), (32, 256, int(rng.integers(-256, 257))),
                    (64, 512, int(rng.integers(-512, 513)))):
        t = int(rng.integers(max(0, -d), 5000))
        out.append({"p": _sinusoid_rows(t, C), "q": _sinusoid_rows(t + d, C), "max_offset": K, "base": 10000.0})
    return out


# ----------------------------------------------------------------------------- q3: where positions enter a score

def score_terms(E, P, W_Q, W_K):
    """The reference: the scores (E + P) W_Q ((E + P) W_K)^T / sqrt(d_k), split into their four terms."""
    E, P, W_Q, W_K = (np.asarray(a, dtype=float) for a in (E, P, W_Q, W_K))
    scale = math.sqrt(W_K.shape[1])
    return {"cc": (E @ W_Q) @ (E @ W_K).T / scale, "cp": (E @ W_Q) @ (P @ W_K).T / scale,
            "pc": (P @ W_Q) @ (E @ W_K).T / scale, "pp": (P @ W_Q) @ (P @ W_K).T / scale}


def score_cases(variant, rng):
    out = []
    for T, C, d in ((1, 4, 4), (5, 8, 4), (9, 8, 8), (int(rng.integers(12, 24)), 16, 8)):
        out.append({"E": rng.normal(0, 1, (T, C)), "P": _sinusoid_rows(np.arange(T), C),
                    "W_Q": rng.normal(0, 1, (C, d)) / math.sqrt(C), "W_K": rng.normal(0, 1, (C, d)) / math.sqrt(C)})
    return out


# ----------------------------------------------------------------------------- q4: move the positions

def shift_nll(pieces, offsets):
    """The reference: the shipped sinusoidal model's NLL on the first 128 inputs of some valid chorales, with
    the positions start .. start + 127 for each start in ``offsets`` instead of 0 .. 127."""
    import torch
    import torch.nn.functional as F

    import musictx_lite as mtx
    from musictx_lite.io.tokens import encode

    model = mtx.pretrained("sinusoidal", device="cpu")
    data = mtx.load_data("chorales")
    out = []
    with torch.no_grad():
        for start in offsets:
            total = 0.0
            for i in pieces:
                tokens = torch.as_tensor(encode(data.valid[i].pitches))[:129]
                x = model.positions(model.tok_emb(tokens[None, :-1]), start=start)
                for block in model.blocks:
                    x = block(x)
                logits = model.readout(model.ln_f(x))[0].double()
                total += F.cross_entropy(logits, tokens[1:], reduction="sum").item()
            out.append(total / (128 * len(pieces)))
    return out


ASSIGNMENT = Assignment(
    week=5, title="Absolute positions", chapters=(6,),
    intro="Sinusoidal positions as rotations, distances read off two positions, where positions enter an "
          "attention score, and what a trained model does when its positions are moved. Row vectors throughout: "
          "$P_{t+k} = P_t R_k$.",
    variant=lambda rng: {"pieces": sorted(rng.choice(66, size=3, replace=False).tolist()),
                         "offsets": [0, int(rng.integers(1, 4)), 4 * int(rng.integers(1, 33)),
                                     4 * int(rng.integers(1, 32)) + int(rng.integers(1, 4)),
                                     256 + 4 * int(rng.integers(0, 65))]},
    setup="import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 2, "The sinusoidal table of chapter 6 has $P_{t, 2i} = \\sin(t\\,\\omega_i)$, "
            "$P_{t, 2i+1} = \\cos(t\\,\\omega_i)$ with $\\omega_i$ = `base`$^{-2i/C}$, $i = 0, \\dots, C/2 - 1$ "
            "(sine and cosine interleaved). Write `offset_matrix(k, C, base)` returning the NumPy array (C, C) "
            "$R_k$ with $P_{t+k} = P_t R_k$ for every $t$ (row vectors; `k` is an int, possibly negative or "
            "zero, `C` even, `base` a float).",
            "offset_matrix",
            "def offset_matrix(k, C, base):\n    raise NotImplementedError",
            "assert np.allclose(offset_matrix(0, 4, 10000.0), np.eye(4))\n"
            "t = np.arange(20.0)[:, None] * 10000.0 ** (-np.arange(0, 6, 2) / 6)\n"
            "P = np.stack([np.sin(t), np.cos(t)], axis=-1).reshape(20, 6)\n"
            "assert np.allclose(P[:-3] @ offset_matrix(3, 6, 10000.0), P[3:])\n"
            "assert np.allclose(P[3:] @ offset_matrix(-3, 6, 10000.0), P[:-3])\nprint('q1: public tests pass')",
            offset_matrix, offset_cases),
        Question(
            "q2", 3, "Chapter 6 shows that $P_t P_s^\\top$ depends on the distance $s - t$ only. Go further: given "
            "two rows `p` $= P_t$ and `q` $= P_s$ of the table of q1 (NumPy float arrays (C,), `base` given, "
            "$t, s \\ge 0$ unknown, possibly in the thousands), and an int `max_offset` with "
            "$|s - t| \\le$ `max_offset`, write `decode_offset(p, q, max_offset, base)` returning $s - t$ as an "
            "int, **with its sign**.",
            "decode_offset",
            "def decode_offset(p, q, max_offset, base):\n    raise NotImplementedError",
            "t = np.arange(4000.0)[:, None] * 10000.0 ** (-np.arange(0, 8, 2) / 8)\n"
            "P = np.stack([np.sin(t), np.cos(t)], axis=-1).reshape(4000, 8)\n"
            "assert decode_offset(P[3], P[10], 16, 10000.0) == 7 and decode_offset(P[10], P[3], 16, 10000.0) == -7\n"
            "assert decode_offset(P[3210], P[3210], 16, 10000.0) == 0\nprint('q2: public tests pass')",
            decode_offset, decode_cases),
        Question(
            "q3", 2, "With absolute positions the input of token $t$ is $e_t + p_t$, so a score splits into four "
            "terms. For token embeddings `E` (T, C) (row $t$ is $e_t$, the embedding of the token at position "
            "$t$), positions `P` (T, C) and `W_Q`, `W_K` (C, d) (NumPy float arrays), write "
            "`score_terms(E, P, W_Q, W_K)` returning a dict of four NumPy arrays (T, T), each divided by "
            "$\\sqrt{d}$: `'cc'` $= (E W_Q)(E W_K)^\\top$ (content to content), `'cp'` $= (E W_Q)(P W_K)^\\top$ "
            "(a query's content to a key's position), `'pc'` $= (P W_Q)(E W_K)^\\top$ and "
            "`'pp'` $= (P W_Q)(P W_K)^\\top$. Their sum is the score matrix of one head.",
            "score_terms",
            "def score_terms(E, P, W_Q, W_K):\n    raise NotImplementedError",
            "rng = np.random.default_rng(0)\nE, P, W_Q, W_K = (rng.normal(size=(3, 4)), rng.normal(size=(3, 4)),\n"
            "                   rng.normal(size=(4, 2)), rng.normal(size=(4, 2)))\n"
            "r = score_terms(E, P, W_Q, W_K)\nX = E + P\n"
            "assert np.allclose(sum(np.asarray(r[k]) for k in ('cc', 'cp', 'pc', 'pp')), (X @ W_Q) @ (X @ W_K).T "
            "/ np.sqrt(2))\n"
            "assert np.allclose(score_terms(E, np.zeros((3, 4)), W_Q, W_K)['pp'], 0)\nprint('q3: public tests pass')",
            score_terms, score_cases),
        Question(
            "q4", 3, "What does a trained model read off its positions? Load the shipped decoder "
            "`musictx_lite.pretrained('sinusoidal', device='cpu')` (eval mode; trained on crops of 256 tokens, "
            "positions 0 to 255). For each valid chorale `musictx_lite.load_data('chorales').valid[i]`, i in "
            "`VARIANT['pieces']`, take `tokens = musictx_lite.io.tokens.encode(piece.pitches)[:129]`: inputs "
            "`tokens[:-1]` (128 tokens, BOS first), targets `tokens[1:]`. Run the model with its positions "
            "moved: `model.positions(x, start=o)` adds the sinusoids of positions `o` to `o + 127` to the token "
            "embeddings `x = model.tok_emb(inputs)` (shape (1, 128, C)); the rest is the model's own forward "
            "(`blocks`, `ln_f`, `readout`). Set `SHIFT_NLL` to the list of floats, one per start `o` in "
            "`VARIANT['offsets']` (in that order): the mean NLL (nats per token) of the targets, pooled over "
            "your pieces. The first start is 0, the model as trained.",
            "SHIFT_NLL",
            "import musictx_lite as mtx\n\nSHIFT_NLL = None   # a list of floats, for your VARIANT",
            "assert isinstance(SHIFT_NLL, list) and len(SHIFT_NLL) == len(VARIANT['offsets'])\n"
            "assert all(isinstance(v, float) and 0 < v < 10 for v in SHIFT_NLL)\nprint('q4: public tests pass')",
            shift_nll, timeout=20),
    ),
    written=Written(
        "Explain your `SHIFT_NLL` with chapter 6. In at most 200 words: (a) why some starts hardly change the "
        "NLL and others ruin it, in terms of the voice a position holds; (b) why that tells you the model reads "
        "more than relative distances off the sinusoids, although $P_t P_s^\\top$ depends on $s - t$ only "
        "(q3 says where else positions enter); (c) what happens to your last start, past 256, and why a learned "
        "table could not even be asked.",
        ((1, "a start that is a multiple of 4 keeps every token at a position of its own voice ((p - 1) mod 4), so "
             "the NLL barely moves; a start of 1, 2 or 3 (mod 4) tells the model the wrong voice for every token "
             "and the NLL rises sharply; uses their own numbers"),
         (1, "P_t P_s^T alone is relative, but a head's pp term P_t W_Q W_K^T P_s^T is not in general, and the "
             "cp and pc terms and the feed-forward layers see p_t on its own: the model can read absolute "
             "position, here the voice; a purely relative model would not change under any shift"),
         (1, "past 256 the positions carry angle combinations never seen in training (the slow pairs leave their "
             "trained range), and the NLL breaks down (in their numbers), even for a multiple of 4"),
         (1, "a learned table has no row at position 256 or later: the model raises an error instead of "
             "extrapolating"))),
)
