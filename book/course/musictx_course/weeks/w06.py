"""Week 6: relative positions (chapter 7): Shaw's relative attention, RoPE and ALiBi."""
from __future__ import annotations

import math

import numpy as np
import torch

from ..spec import Assignment, Question, Written, close

# ----------------------------------------------------------------------------- q1: Shaw's relative attention

def shaw_attention(X, Wq, Wk, Wv, wK, wV, k):
    """The reference: one causal head of Shaw et al.'s relative attention, the direct way, in float64."""
    X, Wq, Wk, Wv, wK, wV = (np.asarray(a, dtype=float) for a in (X, Wq, Wk, Wv, wK, wV))
    T, d = X.shape[0], Wq.shape[1]
    Q, K, V = X @ Wq, X @ Wk, X @ Wv                                    # (T, d) each
    i = np.arange(T)
    idx = np.clip(i[None, :] - i[:, None], -k, k) + k                   # (T, T): row of wK, wV for j - i
    aK, aV = wK[idx], wV[idx]                                           # (T, T, d) each
    e = (Q @ K.T + np.einsum("id,ijd->ij", Q, aK)) / math.sqrt(d)       # (T, T)
    e = np.where(i[None, :] <= i[:, None], e, -np.inf)                  # causal: j <= i
    w = np.exp(e - e.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return w @ V + np.einsum("ij,ijd->id", w, aV)                       # (T, d)


def shaw_cases(variant, rng):
    out = []
    for T, C, d, k in ((1, 4, 2, 0), (5, 6, 4, 0), (8, 6, 4, 2), (12, 8, 4, 3), (6, 8, 8, 10)):
        out.append({"X": rng.normal(0, 1, (T, C)),
                    **{w: rng.normal(0, 1 / math.sqrt(C), (C, d)) for w in ("Wq", "Wk", "Wv")},
                    "wK": rng.normal(0, 1, (2 * k + 1, d)), "wV": rng.normal(0, 1, (2 * k + 1, d)), "k": k})
    return out


# ----------------------------------------------------------------------------- q2: RoPE at any positions

def rope(X, pos, base=10000.0):
    """The reference: the rows of X (T, d) rotated by RoPE at the integer positions pos (T,), in float64."""
    X = torch.as_tensor(X, dtype=torch.float64)
    pos = torch.as_tensor(pos, dtype=torch.float64)
    d = X.shape[-1]
    w = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)       # (d/2,): w_c = base^(-2c/d)
    ang = pos[:, None] * w                                              # (T, d/2)
    x1, x2 = X[:, 0::2], X[:, 1::2]
    out = torch.empty_like(X)
    out[:, 0::2] = x1 * ang.cos() - x2 * ang.sin()
    out[:, 1::2] = x1 * ang.sin() + x2 * ang.cos()
    return out


def rope_cases(variant, rng):
    out = []
    for T, d in ((1, 2), (5, 8), (12, 16), (7, 6)):
        if T == 12:
            pos = np.arange(T) + int(rng.integers(0, 100))             # a block of positions, shifted
        else:
            pos = rng.integers(0, 200, T)                               # any positions, in any order
        out.append({"X": rng.normal(0, 1, (T, d)), "pos": pos.astype(np.int64),
                    "base": float(rng.choice([10000.0, 500.0, 100.0]))})
    return out


# ----------------------------------------------------------------------------- q3: a number of your variant

def relative_profile(pieces, voice, k):
    """The reference: over the given training chorales, for the tokens of ``voice`` (raster without BOS, the
    token t is of voice t mod 4), the share equal to the token d back for d = 1 .. k - 1, and the share of
    equal pairs pooled over every earlier token k or more back (the bag Shaw's clipped row sees)."""
    import musictx_lite as mtx

    data = mtx.load_data("chorales")
    hits, pairs = np.zeros(k), np.zeros(k)
    for i in pieces:
        s = mtx.encode(data.train[i].pitches)[1:]                       # S A T B per step, no BOS
        t = np.arange(voice, len(s), 4)                                 # the voice's tokens
        for d in range(1, k):
            tt = t[t >= d]
            hits[d - 1] += int((s[tt] == s[tt - d]).sum())
            pairs[d - 1] += len(tt)
        seen = np.cumsum(np.eye(mtx.VOCAB_SIZE, dtype=np.int64)[s], axis=0)   # (n, V): counts in s[0..p]
        tt = t[t >= k]
        hits[k - 1] += int(seen[tt - k, s[tt]].sum())                   # equal tokens among s[0 .. t - k]
        pairs[k - 1] += int((tt - k + 1).sum())
    return (hits / pairs).tolist()


# ----------------------------------------------------------------------------- q4: ALiBi

def alibi_attention(Q, K, V):
    """The reference: causal multi-head attention with ALiBi's penalty m_h (j - i), m_h = 2^(-8h/nh), in float64."""
    Q, K, V = (torch.as_tensor(a, dtype=torch.float64) for a in (Q, K, V))
    nh, T, d = Q.shape
    m = 2.0 ** (-8.0 * torch.arange(1, nh + 1, dtype=torch.float64) / nh)     # (nh,)
    t = torch.arange(T)
    dist = (t[None, :] - t[:, None]).to(torch.float64)                  # (T, T): j - i
    s = Q @ K.transpose(-2, -1) / math.sqrt(d) + m[:, None, None] * dist      # (nh, T, T)
    s = s.masked_fill(dist > 0, float("-inf"))
    return torch.softmax(s, dim=-1) @ V                                 # (nh, T, d)


def alibi_cases(variant, rng):
    return [{"Q": rng.normal(0, scale, (nh, T, d)), "K": rng.normal(0, 1, (nh, T, d)),
             "V": rng.normal(0, 1, (nh, T, d))}
            for nh, T, d, scale in ((1, 1, 4, 1.0), (2, 6, 4, 1.0), (4, 16, 8, 2.0), (3, 10, 2, 1.0),
                                    (8, 40, 4, 3.0))]


ASSIGNMENT = Assignment(
    week=6, title="Relative positions, RoPE and ALiBi", chapters=(7,),
    intro="Shaw et al.'s relative attention computed the direct way, RoPE's rotation at any position, ALiBi's "
          "fixed penalty, and what a clipped relative table sees of the chorales.",
    variant=lambda rng: {"pieces": sorted(rng.choice(197, size=8, replace=False).tolist()),
                         "voice": int(rng.integers(0, 4)), "k": int(rng.integers(5, 13))},
    setup="import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 3, "Shaw et al.'s relative attention, one causal head, the direct way (chapter 7), in row "
            "vectors. `X` is a NumPy array (T, C) of tokens; `Wq`, `Wk`, `Wv` are (C, d), so $Q = X W_Q$, "
            "$K = X W_K$, $V = X W_V$; `wK` and `wV` are the tables, (2k + 1, d), whose row $r$ belongs to the "
            "distance $r - k$ (row 0 is $-k$, row $k$ is distance 0); `k` is the clipping distance (an int "
            "$\\ge 0$, possibly larger than T). With $a^K_{ij} = w^K_{\\mathrm{clip}(j - i, -k, k)}$ and "
            "likewise $a^V_{ij}$,\n\n"
            "$$e_{ij} = \\frac{q_i (k_j + a^K_{ij})^\\top}{\\sqrt{d}}, \\quad "
            "\\alpha_{ij} = \\mathrm{softmax}_{j \\le i}(e_{ij}), \\quad "
            "z_i = \\sum_{j \\le i} \\alpha_{ij} (v_j + a^V_{ij}).$$\n\n"
            "Write `shaw_attention(X, Wq, Wk, Wv, wK, wV, k)` returning $Z$, a float64 NumPy array (T, d). "
            "Keys after the query ($j > i$) get no weight.",
            "shaw_attention",
            "def shaw_attention(X, Wq, Wk, Wv, wK, wV, k):\n    raise NotImplementedError",
            "rng = np.random.default_rng(0)\n"
            "X, W = np.array([[1.0, 0.0]]), np.eye(2)\n"
            "wV = np.array([[9.0, 9.0], [1.0, 2.0], [9.0, 9.0]])          # k = 1: distances -1, 0, 1\n"
            "assert np.allclose(shaw_attention(X, W, W, W, np.zeros((3, 2)), wV, 1), [[2.0, 2.0]])\n"
            "X, Ws = rng.normal(size=(5, 3)), [rng.normal(size=(3, 2)) for _ in range(3)]\n"
            "wK, wV = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))\n"
            "Z = shaw_attention(X, *Ws, wK, wV, 2)\n"
            "assert Z.shape == (5, 2)\n"
            "assert np.allclose(shaw_attention(X[:3], *Ws, wK, wV, 2), Z[:3])   # causal\n"
            "print('q1: public tests pass')",
            shaw_attention, shaw_cases),
        Question(
            "q2", 2, "RoPE at any positions. A cache holds keys that were rotated at their own positions, and a "
            "new query arrives at position $t$ alone, so a rotation must take the positions as an input. "
            "Write `rope(X, pos, base=10000.0)`: `X` is a float64 torch tensor (T, d), d even, `pos` an int64 "
            "tensor (T,) of positions (any order); row $t$ of `X` is rotated at the position `pos[t]`. Split "
            "each row into the pairs of features $(2c, 2c + 1)$, $c = 0 \\dots d/2 - 1$, and turn pair $c$ by "
            "the angle $p\\,\\omega_c$, $\\omega_c = \\mathrm{base}^{-2c/d}$, as chapter 7 writes it in row "
            "vectors: $(x_1, x_2) \\mapsto (x_1 \\cos\\theta - x_2 \\sin\\theta,\\ x_1 \\sin\\theta + "
            "x_2 \\cos\\theta)$. Return a float64 tensor (T, d). Compute the angles in float64 (float32 angles "
            "at position 200 are off by about $10^{-5}$).",
            "rope",
            "def rope(X, pos, base=10000.0):\n    raise NotImplementedError",
            "X = torch.randn(4, 6, dtype=torch.float64)\n"
            "assert torch.allclose(torch.as_tensor(rope(X, torch.zeros(4, dtype=torch.long))), X)\n"
            "one = torch.as_tensor(rope(torch.tensor([[1.0, 0.0]], dtype=torch.float64), torch.tensor([1]), "
            "base=1.0))\n"
            "assert torch.allclose(one, torch.tensor([[math.cos(1.0), math.sin(1.0)]], dtype=torch.float64))\n"
            "q, k = torch.randn(1, 6, dtype=torch.float64), torch.randn(1, 6, dtype=torch.float64)\n"
            "s = lambda i, j: float(torch.as_tensor(rope(q, torch.tensor([i])) @ rope(k, torch.tensor([j])).T))\n"
            "assert abs(s(3, 5) - s(10, 12)) < 1e-9                        # a score depends on j - i only\n"
            "print('q2: public tests pass')",
            rope, rope_cases, judge=lambda got, want: close(got, want, rtol=1e-3, atol=1e-5), tensors=True),
        Question(
            "q3", 3, "What does a clipped relative table see of the chorales? Read the training chorales "
            "numbered `VARIANT['pieces']` of the embedded corpus as chapter 7's first table does: "
            "`s = musictx_lite.encode(piece.pitches)[1:]` (the raster without BOS: token $t$ belongs to voice "
            "$t \\bmod 4$), with `piece = musictx_lite.load_data('chorales').train[i]`. Take as queries the "
            "tokens $t$ of the voice `VARIANT['voice']`, and let $k$ = `VARIANT['k']` be Shaw's clipping "
            "distance. Set `REL_PROFILE` to a list of $k$ floats: for $d = 1, \\dots, k - 1$, entry $d - 1$ is "
            "the share of the queries $t \\ge d$ with `s[t] == s[t - d]`; the last entry is the share of equal "
            "pairs among all pairs $(t, j)$ of a query $t$ and a key $0 \\le j \\le t - k$ of the same piece "
            "(the keys that share Shaw's row of distance $-k$). Pool each entry over the pieces: the number "
            "of equal pairs over the number of pairs.",
            "REL_PROFILE",
            "import musictx_lite as mtx\n\nREL_PROFILE = None   # a list of VARIANT['k'] floats",
            "assert isinstance(REL_PROFILE, list) and len(REL_PROFILE) == VARIANT['k']\n"
            "assert all(0 <= p <= 1 for p in REL_PROFILE)\n"
            "assert REL_PROFILE[3] == max(REL_PROFILE)                   # 4 back: the same voice\n"
            "print('q3: public tests pass')",
            relative_profile, timeout=20),
        Question(
            "q4", 2, "ALiBi (chapter 7), several heads. `Q`, `K`, `V` are float64 torch tensors (nh, T, d), head "
            "$h = 1 \\dots n_h$ in row $h - 1$. Each head adds the penalty $m_h (j - i)$, "
            "$m_h = 2^{-8h/n_h}$, to its scaled scores: "
            "$\\mathrm{softmax}_{j \\le i}\\big(q_i k_j^\\top / \\sqrt{d} + m_h (j - i)\\big)$, causal, then "
            "the weighted sum of the rows of $V$. Write `alibi_attention(Q, K, V)` returning the outputs, a "
            "float64 tensor (nh, T, d). $n_h$ need not be a power of 2.",
            "alibi_attention",
            "def alibi_attention(Q, K, V):\n    raise NotImplementedError",
            "Z = torch.zeros(1, 2, 1, dtype=torch.float64)\n"
            "V = torch.tensor([[[1.0], [0.0]]], dtype=torch.float64)\n"
            "out = torch.as_tensor(alibi_attention(Z, Z, V))\n"
            "m = 2 ** -8.0                                                  # one head: m_1 = 2^-8\n"
            "assert out.shape == (1, 2, 1) and abs(float(out[0, 0, 0]) - 1.0) < 1e-12\n"
            "assert abs(float(out[0, 1, 0]) - 1 / (1 + math.exp(m))) < 1e-12   # key 1 back loses m\n"
            "print('q4: public tests pass')",
            alibi_attention, alibi_cases, tensors=True),
    ),
    written=Written(
        "Using your `REL_PROFILE`, explain in at most 200 words (a) which of the distances your table can tell "
        "apart with your clipping distance $k$, and what the model loses by seeing every key $k$ or more back "
        "at the one shared row (compare your last entry with your entries at 4 and at 1-3); (b) why ALiBi's "
        "penalty can never by itself favour the token 4 back over the tokens 1 to 3 back, and what in your "
        "profile makes that a handicap on these chorales; (c) what RoPE offers instead, with no parameters.",
        ((1, "reads the profile: the share 4 back (and at multiples of 4 within k) far above 1-3 back, with the "
             "numbers; says that distances 1 .. k-1 get rows of their own"),
         (1, "explains the bag: keys k or more back share one row, so one layer cannot tell 8 back from 40 back "
             "by position; the pooled share is low, so the useful far repeats are averaged away (stacking "
             "layers, or a larger k, helps)"),
         (1, "ALiBi: the penalty m_h |j - i| only grows with the distance, so 4 back loses more than 1-3 back "
             "in every head; only the content term can overturn it, and the profile shows 4 back is the one "
             "to favour"),
         (1, "RoPE: rotated queries and keys give scores that depend on j - i through the contents, so a head "
             "can learn to prefer distance 4 at every position; no learned table, no clipping"))),
)
