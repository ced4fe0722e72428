"""Week 7: the skew (chapter 8): the Music Transformer's relative attention, the skew's indices, the undefined
entries and what they leak, and the relative logits of one causal chunk."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..spec import Assignment, Question, Written

# ----------------------------------------------------------------------------- q1: relative attention, one head

def relative_attention(Q, K, V, E):
    """The reference: one causal head of the Music Transformer's relative attention, E (M, d) for the distances
    -(M-1)..0 and the farthest vector repeated beyond, in float64."""
    Q, K, V, E = (torch.as_tensor(a, dtype=torch.float64) for a in (Q, K, V, E))
    T, d = Q.shape
    M = E.shape[0]
    i = torch.arange(T)
    dist = i[None, :] - i[:, None]                                      # (T, T): j - i
    rows = (dist + M - 1).clamp(min=0, max=M - 1)                       # row of E; beyond -(M-1): row 0
    S = torch.einsum("id,ijd->ij", Q, E[rows])                          # (T, T): q_i e_{j-i}
    s = ((Q @ K.T + S) / math.sqrt(d)).masked_fill(dist > 0, float("-inf"))
    return torch.softmax(s, dim=-1) @ V                                 # (T, d)


def relative_cases(variant, rng):
    return [{"Q": rng.normal(0, 1, (T, d)), "K": rng.normal(0, 1, (T, d)), "V": rng.normal(0, 1, (T, d)),
             "E": rng.normal(0, 1, (M, d))}
            for T, M, d in ((1, 4, 4), (6, 8, 4), (10, 10, 8), (12, 5, 4), (16, 3, 2))]


# ----------------------------------------------------------------------------- q2: where each entry comes from

def skew_source(L):
    """The reference: for each entry (i, j) of skew(R), R (L, L), the flat index i' L + c of the entry of R it
    holds, or -1 where it holds the padding zero."""
    out = np.full((L, L), -1, dtype=np.int64)
    for i in range(L):
        for j in range(L):
            r, c = divmod((i + 1) * L + j, L + 1)                       # row i + 1 of the (L + 1, L) view
            if c > 0:                                                   # column 0 of the padded matrix: the pad
                out[i, j] = r * L + c - 1
    return out


def skew_cases(variant, rng):
    return [{"L": L} for L in (1, 2, 5, int(rng.integers(6, 13)), int(rng.integers(13, 31)))]


# ----------------------------------------------------------------------------- q3: a number of your variant

def leak_mass(L, d, seed):
    """The reference: per query row, the share of the softmax's normaliser that the skew's undefined entries
    (above the diagonal) take when they are let into it, the content scores of future keys masked."""
    g = torch.Generator().manual_seed(seed)
    Q = torch.randn(L, d, generator=g, dtype=torch.float64)
    K = torch.randn(L, d, generator=g, dtype=torch.float64)
    E = torch.randn(L, d, generator=g, dtype=torch.float64)
    S = F.pad(Q @ E.T, (1, 0)).reshape(L + 1, L)[1:]                    # the skew of R = Q E^T
    i = torch.arange(L)
    future = i[None, :] > i[:, None]
    w = torch.softmax(torch.where(future, S, Q @ K.T + S) / math.sqrt(d), dim=-1)
    return (w * future).sum(-1).tolist()


# ----------------------------------------------------------------------------- q4: one causal chunk

def chunk_relative_logits(Qc, E):
    """The reference: the relative logits (n, e) of the chunk of queries e-n .. e-1 against the keys 0 .. e-1,
    E (e, d) for the distances -(e-1)..0; 0 for keys after their query."""
    Qc, E = (torch.as_tensor(a, dtype=torch.float64) for a in (Qc, E))
    n, e = Qc.shape[0], E.shape[0]
    i = torch.arange(e - n, e)[:, None]                                 # (n, 1): the queries' positions
    j = torch.arange(e)[None, :]                                        # (1, e): the keys
    r = (j - i + e - 1).clamp(max=e - 1)                                # (n, e): row of E for j - i
    S = torch.einsum("ad,ajd->aj", Qc, E[r])
    return S.masked_fill(j > i, 0.0)


def chunk_cases(variant, rng):
    return [{"Qc": rng.normal(0, 1, (n, d)), "E": rng.normal(0, 1, (e, d))}
            for n, e, d in ((1, 1, 4), (1, 7, 4), (3, 3, 2), (4, 10, 8), (5, int(rng.integers(12, 20)), 4))]


ASSIGNMENT = Assignment(
    week=7, title="The skew", chapters=(8,),
    intro="The Music Transformer's relative attention, the skew's pad-reshape-slice read index by index, what "
          "its undefined entries would leak, and the relative logits of one causal chunk.",
    variant=lambda rng: {"L": int(rng.integers(6, 25)), "d": int(rng.choice([4, 8, 16])),
                         "seed": int(rng.integers(0, 2 ** 31 - 1))},
    setup="import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 3, "The Music Transformer's relative attention, one causal head (chapter 8), in row vectors. "
            "`Q`, `K`, `V` are float64 torch tensors (T, d); `E` (M, d) holds one vector per distance, row "
            "$r$ for the distance $r - (M - 1)$ (the last row is distance 0). A key farther back than "
            "$M - 1$ uses row 0, the farthest vector, as `RelativeGlobal.table` does; $M$ may be smaller or "
            "larger than T. With $e_{j - i}$ the row of the distance $j - i$,\n\n"
            "$$S^{rel}_{ij} = q_i e_{j-i}^\\top, \\qquad "
            "Z = \\mathrm{softmax}\\Big(\\frac{Q K^\\top + S^{rel}}{\\sqrt{d}}\\Big) V,$$\n\n"
            "the softmax over the keys $j \\le i$ only. Write `relative_attention(Q, K, V, E)` returning $Z$, a "
            "float64 tensor (T, d).",
            "relative_attention",
            "def relative_attention(Q, K, V, E):\n    raise NotImplementedError",
            "Q = torch.zeros(2, 2, dtype=torch.float64)\n"
            "V = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)\n"
            "Z = torch.as_tensor(relative_attention(Q, Q, V, torch.zeros(3, 2, dtype=torch.float64)))\n"
            "assert torch.allclose(Z, torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64))\n"
            "Q = torch.tensor([[0.0, 0.0], [2.0, 0.0]], dtype=torch.float64)\n"
            "E = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)   # distances -1, 0\n"
            "Z = torch.as_tensor(relative_attention(Q, torch.zeros(2, 2, dtype=torch.float64), V, E))\n"
            "w = 1 / (1 + math.exp(-2 / math.sqrt(2)))                     # query 1 prefers 1 back\n"
            "assert torch.allclose(Z[1], torch.tensor([w, 1 - w], dtype=torch.float64))\n"
            "print('q1: public tests pass')",
            relative_attention, relative_cases, tensors=True),
        Question(
            "q2", 2, "The skew, index by index. For $R$ an (L, L) matrix, `skew(R)` pads one zero column on the "
            "left, reads the (L, L + 1) result row by row as an (L + 1, L) matrix and drops its first row. "
            "Write `skew_source(L)` returning an int NumPy array (L, L) whose entry $(i, j)$ says which entry "
            "of $R$ the skewed matrix holds at $(i, j)$: its flat index $i' L + c$ (the entry $R_{i'c}$), or "
            "$-1$ where it holds the padding zero. Do it for the whole matrix, the entries above the diagonal "
            "included: they are the undefined entries of chapter 8.",
            "skew_source",
            "def skew_source(L):\n    raise NotImplementedError",
            "assert np.asarray(skew_source(4)).tolist() == [[3, -1, 4, 5], [6, 7, -1, 8], [9, 10, 11, -1],\n"
            "                                               [12, 13, 14, 15]]   # chapter 8's toy, minus 1\n"
            "assert np.asarray(skew_source(1)).tolist() == [[0]]\n"
            "print('q2: public tests pass')",
            skew_source, skew_cases),
        Question(
            "q3", 3, "What the undefined entries leak. Draw, with `g = torch.Generator().manual_seed(VARIANT"
            "['seed'])`, first `Q`, then `K`, then `E`, each `torch.randn(L, d, generator=g, dtype=torch."
            "float64)` with `L, d = VARIANT['L'], VARIANT['d']`. Let $S$ = `skew(Q @ E.T)` (the package's "
            "`musictx_lite.models.relative.skew`, or your own), undefined entries included. Now let those "
            "entries into the softmax while the future keys stay masked, as chapter 8's `let_through` does: "
            "row $i$ gets the logits $(q_i k_j^\\top + S_{ij}) / \\sqrt{d}$ for $j \\le i$ and $S_{ij} / "
            "\\sqrt{d}$ alone for $j > i$, and one softmax over all $L$ keys. Set `LEAK` to a list of $L$ "
            "floats: for each row $i$, the total weight of the entries $j > i$ (0 for the last row).",
            "LEAK",
            "LEAK = None   # a list of VARIANT['L'] floats",
            "assert isinstance(LEAK, list) and len(LEAK) == VARIANT['L']\n"
            "assert all(-1e-9 <= x < 1 for x in LEAK) and abs(LEAK[-1]) < 1e-9 and LEAK[0] > 0\n"
            "print('q3: public tests pass')",
            leak_mass),
        Question(
            "q4", 2, "Relative logits in causal chunks (chapter 8, 'Faster'). A chunk holds the $n$ queries at "
            "positions $e - n, \\dots, e - 1$, and sees the keys $0, \\dots, e - 1$. `Qc` is a float64 torch "
            "tensor (n, d), its rows the chunk's queries in order; `E` (e, d) holds the vectors of the "
            "distances $-(e - 1), \\dots, 0$ (row $r$ for the distance $r - (e - 1)$). Write "
            "`chunk_relative_logits(Qc, E)` returning the float64 tensor (n, e) whose entry $(a, j)$ is "
            "$q_a e_{j - i}^\\top$, with $i = e - n + a$ the position of the chunk's query $a$, for $j \\le i$, "
            "and 0 for $j > i$.",
            "chunk_relative_logits",
            "def chunk_relative_logits(Qc, E):\n    raise NotImplementedError",
            "E = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], dtype=torch.float64)   # distances -2, -1, 0\n"
            "one = torch.tensor([[1.0, 0.0]], dtype=torch.float64)\n"
            "assert torch.as_tensor(chunk_relative_logits(one, E)).tolist() == [[1.0, 2.0, 3.0]]\n"
            "got = torch.as_tensor(chunk_relative_logits(one.repeat(2, 1), E))   # queries 1 and 2\n"
            "assert got.tolist() == [[2.0, 3.0, 0.0], [1.0, 2.0, 3.0]]\n"
            "print('q4: public tests pass')",
            chunk_relative_logits, chunk_cases, tensors=True),
    ),
    written=Written(
        "Look at your `LEAK`. In at most 200 words: (a) using `skew_source`, say which entries of $R$ row $i$'s "
        "undefined entries hold, and why that carries the future into row $i$ although no future key's "
        "content or value reaches it; (b) explain, with your numbers, how the leak changes the outputs of "
        "row $i$ (what the extra softmax terms do to the weights of the past keys), and why a control with "
        "zeros in their place would not leak; (c) say in which order the package applies the bias and the "
        "causal mask, and why that order makes the undefined entries harmless.",
        ((1, "(a) the entry at (i, i + 1) is the padding zero and those at j >= i + 2 hold R[i + 1, j - i - 2], "
             "the next query's logits, which are computed from token i + 1"),
         (1, "(b) reads LEAK as the share of the normaliser the future terms take, so every past weight of the "
             "row is scaled by 1 - LEAK[i], an amount set by query i + 1; quotes numbers from the student's list"),
         (1, "(b) the control adds terms that do not depend on the future (zeros), so the rescaling is the same "
             "whatever the later tokens are: no information flows"),
         (1, "(c) attention_fast adds the bias to the scores first and then sets every masked score to -inf, so "
             "a future key gets weight 0 whatever the skew left there"))),
)
