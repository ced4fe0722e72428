"""Week 3: multi-head attention (chapter 4)."""
from __future__ import annotations

import math

import numpy as np

from ..spec import Assignment, Question, Written

# ----------------------------------------------------------------------------- q1: several heads, one projection

def multi_head(x, W_qkv, W_O, b_O, n_heads):
    """The reference: causal multi-head attention with the package's layout; the output and every head's weights."""
    x, W_qkv, W_O, b_O = (np.asarray(a, dtype=float) for a in (x, W_qkv, W_O, b_O))
    T, C = x.shape
    hs = C // n_heads
    q, k, v = (m.reshape(T, n_heads, hs).transpose(1, 0, 2) for m in np.split(x @ W_qkv, 3, axis=1))   # (nh, T, hs)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(hs)                        # (nh, T, T)
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    heads = (w @ v).transpose(1, 0, 2).reshape(T, C)                    # [head_1, ..., head_nh]
    return {"out": heads @ W_O + b_O, "weights": w}


def mha_cases(variant, rng):
    out = []
    for T, C, nh in ((1, 4, 2), (5, 8, 1), (7, 8, 4), (12, 12, 3), (int(rng.integers(14, 24)), 16, 4)):
        out.append({"x": rng.normal(0, 1, (T, C)), "W_qkv": rng.normal(0, 1, (C, 3 * C)) / math.sqrt(C),
                    "W_O": rng.normal(0, 1, (C, C)) / math.sqrt(C), "b_O": rng.normal(0, 0.1, C), "n_heads": nh})
    return out


# ----------------------------------------------------------------------------- q2: a head without positions

def token_weights(tokens, E, W_Q, W_K, n_heads):
    """The reference: the weight each head's query i puts on each vocabulary entry, summed over the keys j <= i
    that hold it, for causal heads on token embeddings alone (no positions)."""
    tokens = np.asarray(tokens, dtype=int)
    E, W_Q, W_K = (np.asarray(a, dtype=float) for a in (E, W_Q, W_K))
    T, (V, C) = len(tokens), E.shape
    hs = C // n_heads
    X = E[tokens]
    q = (X @ W_Q).reshape(T, n_heads, hs).transpose(1, 0, 2)
    k = (X @ W_K).reshape(T, n_heads, hs).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(hs)                        # (nh, T, T)
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return w @ np.eye(V)[tokens]                                        # (nh, T, V)


def token_cases(variant, rng):
    out = []
    for T, V, C, nh in ((1, 5, 4, 2), (6, 3, 8, 2), (10, 6, 8, 4), (int(rng.integers(15, 30)), 8, 12, 3)):
        out.append({"tokens": rng.integers(0, V, T), "E": rng.normal(0, 1, (V, C)),
                    "W_Q": rng.normal(0, 1, (C, C)) / math.sqrt(C) * 2, "W_K": rng.normal(0, 1, (C, C)) / math.sqrt(C),
                    "n_heads": nh})
    return out


# ----------------------------------------------------------------------------- q3: from multi-head to grouped-query

def pool_kv_heads(W, n_heads, n_groups):
    """The reference: a key (or value) projection (C, C) of n_heads heads, mean-pooled into n_groups heads."""
    W = np.asarray(W, dtype=float)
    C = W.shape[0]
    hs, r = C // n_heads, n_heads // n_groups
    heads = W.reshape(C, n_heads, hs)                                   # head h: columns h*hs .. (h+1)*hs - 1
    return heads.reshape(C, n_groups, r, hs).mean(2).reshape(C, n_groups * hs)


def pool_cases(variant, rng):
    return [{"W": rng.normal(0, 1, (C, C)), "n_heads": nh, "n_groups": ng}
            for C, nh, ng in ((4, 1, 1), (8, 4, 4), (8, 4, 1), (12, 6, 2), (16, 8, int(rng.choice([2, 4]))))]


# ----------------------------------------------------------------------------- q4: what heads with positions do

def head_lags(layer, pieces, length):
    """The reference: for each head of one layer of the shipped sinusoidal model, on the first ``length`` tokens
    of some valid chorales, the mean weight (over queries i >= 16) on the keys of the target voice (lags 3, 7,
    11, ...) and on lag 3 alone."""
    import math

    import torch

    import musictx_lite as mtx
    from musictx_lite.io.tokens import encode

    model = mtx.pretrained("sinusoidal", device="cpu")
    data = mtx.load_data("chorales")
    voice, lag3 = 0.0, 0.0
    for i in pieces:
        tokens = torch.as_tensor(encode(data.valid[i].pitches))[:length]
        T = len(tokens)
        with torch.no_grad():                       # the weights by hand (what attention_weights records)
            x = model.positions(model.tok_emb(tokens[None]))
            for block in model.blocks[:layer]:
                x = block(x)
            q, k, _ = model.blocks[layer].mixer.split_heads(model.blocks[layer].ln1(x))   # (1, nh, T, hs)
            s = q[0] @ k[0].transpose(-2, -1) / math.sqrt(q.shape[-1])
            w = torch.softmax(s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")), -1)
        w = w.double()                                                  # (nh, T, T)
        lag = torch.arange(T)[:, None] - torch.arange(T)[None, :]       # i - j
        voice = voice + (w * ((lag >= 0) & (lag % 4 == 3))).sum(-1)[:, 16:].mean(-1)
        lag3 = lag3 + w[:, torch.arange(16, T), torch.arange(13, T - 3)].mean(-1)
    return {"voice": [float(x) / len(pieces) for x in voice], "lag3": [float(x) / len(pieces) for x in lag3]}


ASSIGNMENT = Assignment(
    week=3, title="Multi-head and grouped-query attention", chapters=(4,),
    intro="Several heads in one projection, what a head can see without positions, sharing keys and values, "
          "and what the heads of a trained model with positions look at. Row vectors throughout: "
          "$Q = X W_Q$.",
    variant=lambda rng: {"layer": int(rng.integers(0, 4)),
                         "pieces": sorted(rng.choice(66, size=3, replace=False).tolist()),
                         "length": 4 * int(rng.integers(24, 65))},
    setup="import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 2, "Causal multi-head attention in the package's layout, on one sequence `x` (T, C) (NumPy "
            "float arrays throughout). `W_qkv` (C, 3C) holds $[W_Q, W_K, W_V]$ side by side, so "
            "`x @ W_qkv` is $[Q, K, V]$; within each of $Q, K, V$ head $h$ ($h = 0, \\dots, n_h - 1$) owns the "
            "columns `h*hs` to `(h+1)*hs - 1`, with `hs = C // n_heads`. Each head computes "
            "$A^h = \\mathrm{softmax}(Q_h K_h^\\top / \\sqrt{hs} + M)$ with the causal mask $M$ and its output "
            "$A^h V_h$; the outputs are concatenated side by side in head order and mixed: "
            "$[\\dots] W_O + b_O$ (`W_O` (C, C), `b_O` (C,)). Write `multi_head(x, W_qkv, W_O, b_O, n_heads)` "
            "returning a dict: `'out'`, an array (T, C), and `'weights'`, the array (n_heads, T, T) of the "
            "$A^h$.",
            "multi_head",
            "def multi_head(x, W_qkv, W_O, b_O, n_heads):\n    raise NotImplementedError",
            "x = np.array([[1.0, 2.0, 3.0, 4.0]])\nI = np.eye(4)\n"
            "r = multi_head(x, np.hstack([I, I, I]), I, np.zeros(4), 2)\n"
            "assert np.allclose(r['out'], x) and np.asarray(r['weights']).shape == (2, 1, 1)\n"
            "x = np.array([[1.0, 0.0], [0.0, 1.0]])\n"
            "r = multi_head(x, np.hstack([np.zeros((2, 2)), np.zeros((2, 2)), np.eye(2)]), np.eye(2), np.ones(2), 2)\n"
            "assert np.allclose(r['weights'][:, 1], 0.5) and np.allclose(r['out'][1], 1.5)\n"
            "print('q1: public tests pass')",
            multi_head, mha_cases),
        Question(
            "q2", 3, "Chapter 4 shows that without positions a head weighs a key by its token alone, so it sees its "
            "past as a bag of tokens. Make that the output: tokens `tokens` (T,) (ints in `range(V)`), token "
            "embeddings `E` (V, C), `W_Q`, `W_K` (C, C) of `n_heads` heads (head $h$ owns the columns "
            "`h*hs` to `(h+1)*hs - 1`, `hs = C // n_heads`), inputs $X = E[\\text{tokens}]$ with **no** positions, "
            "causal weights $A^h = \\mathrm{softmax}(Q_h K_h^\\top / \\sqrt{hs} + M)$. Write "
            "`token_weights(tokens, E, W_Q, W_K, n_heads)` returning a NumPy array (n_heads, T, V) whose entry "
            "$[h, i, a]$ is the total weight query $i$ of head $h$ puts on the keys $j \\le i$ holding token $a$ "
            "(zero for a token absent from positions $0 \\dots i$).",
            "token_weights",
            "def token_weights(tokens, E, W_Q, W_K, n_heads):\n    raise NotImplementedError",
            "r = np.asarray(token_weights([0, 1, 0], np.eye(3), np.zeros((3, 3)), np.zeros((3, 3)), 1))\n"
            "assert r.shape == (1, 3, 3) and np.allclose(r[0], [[1, 0, 0], [0.5, 0.5, 0], [2 / 3, 1 / 3, 0]])\n"
            "rng = np.random.default_rng(0)\nargs = (rng.normal(size=(4, 4)), rng.normal(size=(4, 4)), "
            "rng.normal(size=(4, 4)), 2)\n"
            "a, b = np.asarray(token_weights([3, 1, 2, 1, 0], *args)), np.asarray(token_weights([2, 1, 3, 1, 0], "
            "*args))\n"
            "assert np.allclose(a[:, 4], b[:, 4])     # the same bag before the last token: the same weights\n"
            "print('q2: public tests pass')",
            token_weights, token_cases),
        Question(
            "q3", 2, "Grouped-query attention can be made from a trained multi-head model by *mean-pooling* the key "
            "and value heads of each group (Ainslie et al., 2023). `W` (C, C) is a key (or value) projection of "
            "`n_heads` heads, head $h$ in the columns `h*hs` to `(h+1)*hs - 1` (`hs = C // n_heads`); group $g$ "
            "($g = 0, \\dots,$ `n_groups` $- 1$) holds the consecutive heads $g r, \\dots, g r + r - 1$ with "
            "$r$ = `n_heads // n_groups`. Write `pool_kv_heads(W, n_heads, n_groups)` returning the NumPy array "
            "(C, n_groups * hs) whose group $g$ columns (`g*hs` to `(g+1)*hs - 1`) are the mean of its heads' "
            "columns.",
            "pool_kv_heads",
            "def pool_kv_heads(W, n_heads, n_groups):\n    raise NotImplementedError",
            "W = np.arange(16.0).reshape(4, 4)\nassert np.allclose(pool_kv_heads(W, 4, 4), W)\n"
            "assert np.allclose(pool_kv_heads(W, 2, 1), (W[:, :2] + W[:, 2:]) / 2)\n"
            "assert np.allclose(pool_kv_heads(W, 4, 1), W.mean(1, keepdims=True))\nprint('q3: public tests pass')",
            pool_kv_heads, pool_cases),
        Question(
            "q4", 3, "The heads of a model **with** positions. Load the shipped model "
            "`musictx_lite.pretrained('sinusoidal', device='cpu')` (4 blocks of 4 heads, sinusoidal positions, "
            "trained on the chorales) and, for each of the valid chorales numbered `VARIANT['pieces']` "
            "(`musictx_lite.load_data('chorales').valid[i]`), take the first `VARIANT['length']` tokens of "
            "`musictx_lite.io.tokens.encode(piece.pitches)`. "
            "`musictx_lite.models.attention.attention_weights(model, tokens, layer)` gives the weights "
            "$A^h_{ij}$ (n_heads, T, T) of layer `VARIANT['layer']` (0 is the first block). For each head $h$, "
            "over the queries $i = 16, \\dots, T - 1$, compute the mean of "
            "$\\sum_{j \\le i,\\ (i - j) \\bmod 4 = 3} A^h_{ij}$ (the weight on the voice of the token to be "
            "predicted, chapter 4's share on lags $\\equiv 3 \\pmod 4$) and the mean of $A^h_{i, i-3}$ (lag 3 "
            "alone), then average each over your pieces. Set `HEAD_LAGS` to "
            "`{'voice': [one float per head], 'lag3': [one float per head]}`, heads in order.",
            "HEAD_LAGS",
            "import musictx_lite as mtx\n\nHEAD_LAGS = None   # a dict of two lists of floats, for your VARIANT",
            "assert isinstance(HEAD_LAGS, dict) and set(HEAD_LAGS) == {'voice', 'lag3'}\n"
            "assert len(HEAD_LAGS['voice']) == len(HEAD_LAGS['lag3']) == 4\n"
            "assert all(0 <= b <= a + 1e-6 <= 1 + 1e-6 for a, b in zip(HEAD_LAGS['voice'], HEAD_LAGS['lag3']))\n"
            "print('q4: public tests pass')",
            head_lags, timeout=20),
    ),
    written=Written(
        "Read your `HEAD_LAGS` against chapter 4. In at most 200 words: (a) what share on the target voice would "
        "a head give that attends uniformly over its past, and what can a head *without* positions do about "
        "it; (b) which of your heads look at position and which do not, and what a head close to 1 on lag 3 "
        "computes, in musical terms; (c) why several heads help here, with one head of full width as the "
        "alternative (think of what one softmax row can put its weight on).",
        ((1, "uniform: about a quarter (lags = 3 mod 4 are a quarter of the past); without positions the score "
             "depends on the tokens only, so a share above 1/4 can come only from content (which tokens tend to "
             "be in the target voice), never from the lag as such"),
         (1, "reads their own numbers: names heads well above 1/4 (positional, voice-selective) and heads near or "
             "below it, for their layer"),
         (1, "lag 3 near 1: the same voice one step earlier, i.e. the previous note of the voice about to be "
             "predicted (the same-voice baseline as a head)"),
         (1, "one softmax row is one distribution: it cannot put all its weight on the same voice's previous "
             "note and on the notes of the current chord at once; several heads read several such mixes at the "
             "same parameter count"))),
)
