"""Week 8: relative local attention (chapter 9): a sliding window with the relative term, a band with
same-voice keys, what a band of N hides in the chorales, and reading costs as log-log slopes."""
from __future__ import annotations

import math

import numpy as np
import torch

from ..spec import Assignment, Question, Written

# ----------------------------------------------------------------------------- q1: a sliding window

def sliding_relative_attention(Q, K, V, E):
    """The reference: one causal head where query i sees the W = len(E) keys i-W+1 .. i, with the relative term
    q_i e_{j-i}, E (W, d) for the distances -(W-1)..0, in float64."""
    Q, K, V, E = (torch.as_tensor(a, dtype=torch.float64) for a in (Q, K, V, E))
    T, d = Q.shape
    W = E.shape[0]
    i = torch.arange(T)
    dist = i[None, :] - i[:, None]                                      # (T, T): j - i
    seen = (dist <= 0) & (dist > -W)                                    # the window
    S = torch.einsum("id,ijd->ij", Q, E[(dist + W - 1).clamp(0, W - 1)])   # (T, T): q_i e_{j-i}
    s = ((Q @ K.T + S) / math.sqrt(d)).masked_fill(~seen, float("-inf"))
    return torch.softmax(s, dim=-1) @ V                                 # (T, d)


def sliding_cases(variant, rng):
    return [{"Q": rng.normal(0, 1, (T, d)), "K": rng.normal(0, 1, (T, d)), "V": rng.normal(0, 1, (T, d)),
             "E": rng.normal(0, 1, (W, d))}
            for T, W, d in ((1, 3, 4), (7, 1, 4), (12, 4, 8), (20, 25, 4), (30, 6, 2))]


# ----------------------------------------------------------------------------- q2: a band and the same voice

def voice_band_mask(T, N, steps):
    """The reference: (T, T) bool, query i sees key j <= i in its block of N or the one before, or in its own
    voice (i - j a multiple of 4) at most ``steps`` steps back."""
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    band = (j <= i) & (j >= (i // N - 1) * N)
    voice = (j <= i) & ((i - j) % 4 == 0) & (i - j <= 4 * steps)
    return band | voice


def mask_cases(variant, rng):
    return [{"T": 1, "N": 4, "steps": 2}, {"T": 12, "N": 4, "steps": 0}, {"T": 16, "N": 2, "steps": 3},
            {"T": 40, "N": 8, "steps": 6},
            {"T": int(rng.integers(30, 61)), "N": (N := int(rng.choice([4, 8, 16]))),
             "steps": int(rng.integers(N // 4 + 1, N // 4 + 8))}]     # reaching past the band


# ----------------------------------------------------------------------------- q3: a number of your variant

def band_share(pieces, voice, N):
    """The reference: for the tokens of ``voice`` that differ from the voice's previous token (4 back), in the
    given training chorales: the share with an earlier token of the same voice and the same value, and of those,
    the share whose latest such token lies in the band of blocks of N (chapter 9's band_mask)."""
    import musictx_lite as mtx

    data = mtx.load_data("chorales")
    changed = found = inside = 0
    for p in pieces:
        x = mtx.encode(data.train[p].pitches)                           # BOS, then S A T B per step
        last = {}                                                       # token -> its latest position so far
        for i in range(1 + voice, len(x), 4):
            if i >= 5 and x[i] != x[i - 4]:
                changed += 1
                j = last.get(int(x[i]))
                if j is not None:
                    found += 1
                    inside += int(j >= (i // N - 1) * N)
            last[int(x[i])] = i
    return {"found": found / changed, "band": inside / found}


# ----------------------------------------------------------------------------- q4: slopes on a log-log plot

def growth_exponents(lengths, times):
    """The reference: the log-log slopes between consecutive lengths, and the least-squares slope of log t
    against log L over all of them."""
    L, t = np.log(np.asarray(lengths, dtype=float)), np.log(np.asarray(times, dtype=float))
    return {"slopes": np.diff(t) / np.diff(L), "fit": float(np.polyfit(L, t, 1)[0])}


def growth_cases(variant, rng):
    out = []
    for n, p in ((2, 1.0), (4, 2.0), (5, float(rng.uniform(0.8, 2.2))), (6, float(rng.uniform(1.0, 2.0)))):
        lengths = 256 * 2 ** np.arange(n) if n != 5 else np.sort(rng.choice(np.arange(100, 9000), n, replace=False))
        times = 1e-3 * lengths.astype(float) ** p * np.exp(rng.normal(0, 0.1, n))
        out.append({"lengths": lengths.astype(np.int64), "times": times})
    return out


ASSIGNMENT = Assignment(
    week=8, title="Relative local attention", chapters=(9,),
    intro="A sliding window with the relative term, a band that also keeps a voice's own earlier steps, what "
          "a band of N tokens hides of the chorales, and costs read as slopes on a log-log plot.",
    variant=lambda rng: {"pieces": sorted(rng.choice(197, size=8, replace=False).tolist()),
                         "voice": int(rng.integers(0, 4)), "N": int(rng.choice([16, 32, 64, 128]))},
    setup="import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 3, "Chapter 9 cuts the sequence into blocks; a *sliding window* (Longformer's) gives every "
            "query the same reach instead: query $i$ sees the $W$ keys $j = i - W + 1, \\dots, i$ (those that "
            "exist). Add the Music Transformer's relative term. `Q`, `K`, `V` are float64 torch tensors (T, d); "
            "`E` (W, d) holds the vectors of the distances $-(W - 1), \\dots, 0$ (row $r$ for the distance "
            "$r - (W - 1)$), and its length is the window $W$ ($W$ may exceed T). For the keys in the window, "
            "the scores are $(q_i k_j^\\top + q_i e_{j-i}^\\top) / \\sqrt{d}$, a softmax over the window, then "
            "the weighted sum of the rows of $V$. Write `sliding_relative_attention(Q, K, V, E)` returning a "
            "float64 tensor (T, d).",
            "sliding_relative_attention",
            "def sliding_relative_attention(Q, K, V, E):\n    raise NotImplementedError",
            "Q = torch.randn(5, 2, dtype=torch.float64)\n"
            "V = torch.randn(5, 2, dtype=torch.float64)\n"
            "Z = torch.as_tensor(sliding_relative_attention(Q, Q, V, torch.randn(1, 2, dtype=torch.float64)))\n"
            "assert torch.allclose(Z, V)                                    # W = 1: each query sees itself\n"
            "Z0 = torch.zeros(4, 2, dtype=torch.float64)\n"
            "V = torch.arange(8.0, dtype=torch.float64).view(4, 2)\n"
            "Z = torch.as_tensor(sliding_relative_attention(Z0, Z0, V, torch.zeros(2, 2, dtype=torch.float64)))\n"
            "assert torch.allclose(Z[3], (V[2] + V[3]) / 2) and torch.allclose(Z[0], V[0])\n"
            "print('q1: public tests pass')",
            sliding_relative_attention, sliding_cases, tensors=True),
        Question(
            "q2", 2, "A band that also keeps the voice. Positions $0, \\dots, T - 1$ are a raster without BOS, "
            "so position $p$ is of voice $p \\bmod 4$. Query $i$ sees key $j$ when $j \\le i$ and either $j$ is "
            "in chapter 9's band (its block of $N$ or the block before: $j \\ge (\\lfloor i / N \\rfloor - 1) "
            "N$), or $j$ is of the same voice as $i$ at most `steps` steps back ($i - j$ a multiple of 4 and "
            "$i - j \\le 4\\,$`steps`). Write `voice_band_mask(T, N, steps)` returning a bool NumPy array "
            "(T, T), True where query $i$ (row) sees key $j$ (column).",
            "voice_band_mask",
            "def voice_band_mask(T, N, steps):\n    raise NotImplementedError",
            "m = np.asarray(voice_band_mask(12, 4, 0))\n"
            "assert m.sum(1).tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 5, 6, 7, 8]   # steps = 0: the band alone\n"
            "m = np.asarray(voice_band_mask(12, 2, 2))\n"
            "assert np.flatnonzero(m[11]).tolist() == [3, 7, 8, 9, 10, 11]\n"
            "print('q2: public tests pass')",
            voice_band_mask, mask_cases),
        Question(
            "q3", 3, "What does a band of $N$ tokens hide? Chapter 10 asks 'where did this voice last sing this "
            "pitch?'. For each training chorale numbered `VARIANT['pieces']` of the embedded corpus, take its "
            "tokens as a model sees the whole piece, `x = musictx_lite.encode(piece.pitches)` with BOS at "
            "position 0 (position $i \\ge 1$ is of voice $(i - 1) \\bmod 4$). The queries are the positions "
            "$i \\ge 5$ of the voice `VARIANT['voice']` whose token differs from the voice's previous one, "
            "`x[i] != x[i - 4]`. For each, look for the latest earlier position $j < i$ of the same voice with "
            "`x[j] == x[i]`; it is in the band of blocks of $N$ = `VARIANT['N']` when $j \\ge (\\lfloor i / N "
            "\\rfloor - 1) N$ (chapter 9's `band_mask`). Set `BAND_SHARE` to a dict of two floats, pooled over "
            "the pieces: `'found'`, the share of the queries that have such a $j$, and `'band'`, of the queries "
            "that have one, the share whose $j$ is in the band.",
            "BAND_SHARE",
            "import musictx_lite as mtx\n\nBAND_SHARE = None   # {'found': float, 'band': float}, for your VARIANT",
            "assert isinstance(BAND_SHARE, dict) and set(BAND_SHARE) == {'found', 'band'}\n"
            "assert 0 < BAND_SHARE['found'] < 1 and 0 <= BAND_SHARE['band'] <= 1\n"
            "print('q3: public tests pass')",
            band_share, timeout=20),
        Question(
            "q4", 2, "Chapter 9 reads how a cost grows from a log-log plot: between lengths $L_1 < L_2$ with "
            "times $t_1, t_2$, the slope $\\log(t_2 / t_1) / \\log(L_2 / L_1)$ is 1 for a cost that grows as "
            "$L$ and 2 for $L^2$. Write `growth_exponents(lengths, times)`: `lengths` an increasing int NumPy "
            "array (n,), $n \\ge 2$, `times` a float array (n,) of positive times. Return a dict with "
            "`'slopes'`, a float NumPy array (n - 1,) of the slopes between consecutive lengths, and `'fit'`, "
            "a float, the slope of the least-squares line of $\\log t$ against $\\log L$ through all n points.",
            "growth_exponents",
            "def growth_exponents(lengths, times):\n    raise NotImplementedError",
            "L = np.array([256, 512, 1024, 2048])\n"
            "g = growth_exponents(L, 3.0 * L.astype(float) ** 2)\n"
            "assert np.allclose(g['slopes'], [2, 2, 2]) and abs(g['fit'] - 2) < 1e-9\n"
            "g = growth_exponents(np.array([100, 200]), np.array([1.0, 2.0]))\n"
            "assert np.allclose(g['slopes'], [1.0]) and abs(g['fit'] - 1) < 1e-9\n"
            "print('q4: public tests pass')",
            growth_exponents, growth_cases),
    ),
    written=Written(
        "Using your `BAND_SHARE` and your $N$, in at most 200 words: (a) say what share of these "
        "'where did this voice last sing this pitch' look-ups one local layer can make, and how far back a "
        "stack of $n$ local layers reaches; (b) compare with chapter 8's relative global attention at the "
        "same context, in what it sees and in what it costs as $L$ grows; (c) say what the same-voice keys of "
        "`voice_band_mask` add for such look-ups, and what they cost per query against a band alone.",
        ((1, "(a) reads 'band' as the share of matches within one layer's reach of the band, with the number, and "
             "notes that the rest lie farther back than the previous block; a stack of n layers reaches "
             "(n + 1) N - 1 tokens back, only through intermediate positions"),
         (1, "(b) global relative attention sees every earlier token of its context, so every match within the "
             "context, at O(L^2) work (and O(L^2) memory unless chunked); the band costs O(L N)"),
         (1, "(c) same-voice keys reach the voice's own earlier steps, 4 * steps tokens back, where most matches "
             "lie, at 'steps' more keys per query: about 2N + steps instead of 2N, still linear in L"))),
)
