"""Week 4: the transformer block (chapter 5)."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..spec import Assignment, Question, Written

# ----------------------------------------------------------------------------- q1: one block, both arrangements

def block_forward(X, params, n_heads, pre_ln):
    """The reference: one transformer block (causal multi-head attention, GELU feed-forward, two LayerNorms),
    pre-LN or post-LN, on X (T, C), in float64."""
    X = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    p = {k: torch.as_tensor(np.asarray(v), dtype=torch.float64) for k, v in params.items()}
    T, C = X.shape
    hs = C // n_heads

    def ln(x, g, b):
        return F.layer_norm(x, (C,), g, b, eps=1e-5)

    def mha(x):
        q, k, v = ((x @ p["W_qkv"]).split(C, dim=1)[n].view(T, n_heads, hs).transpose(0, 1) for n in range(3))
        s = (q @ k.transpose(1, 2) / math.sqrt(hs)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(),
                                                                 float("-inf"))
        return (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(T, C) @ p["W_O"] + p["b_O"]

    def ff(x):
        return F.gelu(x @ p["W_1"] + p["b_1"]) @ p["W_2"] + p["b_2"]

    if pre_ln:
        H = X + mha(ln(X, p["ln1_g"], p["ln1_b"]))
        Y = H + ff(ln(H, p["ln2_g"], p["ln2_b"]))
    else:
        H = ln(X + mha(X), p["ln1_g"], p["ln1_b"])
        Y = ln(H + ff(H), p["ln2_g"], p["ln2_b"])
    return Y.numpy()


def block_cases(variant, rng):
    out = []
    for T, C, nh, pre in ((1, 4, 2, True), (5, 8, 2, True), (6, 8, 4, False), (9, 12, 3, True),
                          (int(rng.integers(10, 16)), 16, 4, False)):
        params = {"ln1_g": 1 + rng.normal(0, 0.2, C), "ln1_b": rng.normal(0, 0.2, C),
                  "W_qkv": rng.normal(0, 1, (C, 3 * C)) / math.sqrt(C),
                  "W_O": rng.normal(0, 1, (C, C)) / math.sqrt(C), "b_O": rng.normal(0, 0.1, C),
                  "ln2_g": 1 + rng.normal(0, 0.2, C), "ln2_b": rng.normal(0, 0.2, C),
                  "W_1": rng.normal(0, 1, (C, 4 * C)) / math.sqrt(C), "b_1": rng.normal(0, 0.1, 4 * C),
                  "W_2": rng.normal(0, 1, (4 * C, C)) / math.sqrt(4 * C), "b_2": rng.normal(0, 0.1, C)}
        out.append({"X": rng.normal(0, 2, (T, C)), "params": params, "n_heads": nh, "pre_ln": pre})
    return out


# ----------------------------------------------------------------------------- q2: what LayerNorm does to a gradient

def layer_norm_jacobian(x, gamma, eps):
    """The reference: the Jacobian (C, C) of LayerNorm(x) (statistics over x's C features) with respect to x."""
    x, gamma = np.asarray(x, dtype=float), np.asarray(gamma, dtype=float)
    C = len(x)
    s = math.sqrt(x.var() + eps)
    xhat = (x - x.mean()) / s
    return gamma[:, None] / s * (np.eye(C) - 1.0 / C - np.outer(xhat, xhat) / C)


def jacobian_cases(variant, rng):
    return [{"x": rng.normal(mu, sd, C), "gamma": 1 + rng.normal(0, 0.3, C), "eps": eps}
            for C, mu, sd, eps in ((1, 0.5, 1.0, 1e-5), (2, 0.0, 1.0, 1e-5), (8, 3.0, 0.5, 1e-5),
                                   (16, -1.0, 10.0, 1e-5), (32, 0.0, 1.0, 0.1))]


# ----------------------------------------------------------------------------- q3: who can see whom through a stack

def stack_reach(masks, residual):
    """The reference: which inputs each output of a stack of attention layers depends on (1) or not (0)."""
    M = np.asarray(masks, dtype=bool)
    L, T, _ = M.shape
    D = np.eye(T, dtype=int)
    for layer in range(L):
        A = (M[layer] | np.eye(T, dtype=bool)) if residual else M[layer]
        D = (A.astype(int) @ D > 0).astype(int)
    return D


def reach_cases(variant, rng):
    def mask(kind, T):
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        return {"causal": j <= i, "peek": j <= i + 1, "window": (j <= i) & (j >= i - 2),
                "voice": (j <= i) & ((i - j) % 4 == 0),
                "previous": (j == i - 1) | ((i == 0) & (j == 0)),
                "before": (j < i) | ((i == 0) & (j == 0)),
                "bar": ((j <= i - 4) & ((i - j) % 4 == 0)) | ((i < 4) & (j == i))}[kind]

    kinds = ("causal", "peek", "window", "voice", "previous", "before", "bar")   # the last three skip the diagonal
    out = []
    for L, T, residual in ((1, 1, False), (2, 6, True), (3, 9, False), (3, 9, True),
                           (int(rng.integers(2, 5)), int(rng.integers(10, 14)), bool(rng.integers(0, 2)))):
        first = kinds[int(rng.integers(4, len(kinds)))]
        out.append({"masks": np.stack([mask(first, T)] + [mask(kinds[int(k)], T)
                                                          for k in rng.integers(0, len(kinds), L - 1)]),
                    "residual": residual})
    return out


# ----------------------------------------------------------------------------- q4: reading the residual stream

def logit_lens(split, pieces, length):
    """The reference: the NLL (nats/token) of the shipped sinusoidal model's read-out (final LayerNorm and
    linear) applied to the residual stream after 0, 1, ..., n_layers blocks, on the first ``length`` inputs of
    some chorales."""
    import torch
    import torch.nn.functional as F

    import musictx_lite as mtx
    from musictx_lite.io.tokens import encode

    model = mtx.pretrained("sinusoidal", device="cpu")
    data = mtx.load_data("chorales")
    total, n = [0.0] * (len(model.blocks) + 1), 0
    with torch.no_grad():
        for i in pieces:
            tokens = torch.as_tensor(encode(data[split][i].pitches))[: length + 1]
            x = model.positions(model.tok_emb(tokens[None, :-1]))       # (1, T, C): the stream before block 1
            for depth in range(len(model.blocks) + 1):
                if depth:
                    x = model.blocks[depth - 1](x)
                logits = model.readout(model.ln_f(x))[0].double()       # (T, V)
                total[depth] += F.cross_entropy(logits, tokens[1:], reduction="sum").item()
            n += length
    return [t / n for t in total]


ASSIGNMENT = Assignment(
    week=4, title="The transformer block", chapters=(5,),
    intro="Feed-forward, LayerNorm and residual connections around attention; pre-LN and post-LN; what a stack of "
          "blocks can see, and what each block of a trained decoder adds. Row vectors throughout: $x W$.",
    variant=lambda rng: {"split": str(rng.choice(["valid", "test"])),
                         "pieces": sorted(rng.choice(66, size=3, replace=False).tolist()),
                         "length": 4 * int(rng.integers(32, 65))},
    setup="import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 3, "One block, both arrangements of chapter 5, on one sequence `X` (T, C) (NumPy float arrays). "
            "`params` is a dict of arrays: `'ln1_g'`, `'ln1_b'`, `'ln2_g'`, `'ln2_b'` (C,) (the LayerNorms' "
            "$\\gamma, \\beta$, $\\epsilon = 10^{-5}$, statistics over the C features with the biased variance); "
            "`'W_qkv'` (C, 3C), `'W_O'` (C, C), `'b_O'` (C,) for causal multi-head attention in the layout of "
            "week 3 (`X @ W_qkv` is $[Q, K, V]$, head $h$ in the columns `h*hs` to `(h+1)*hs - 1` of each, "
            "scale $1/\\sqrt{hs}$, heads concatenated in order, then $W_O$, $b_O$); `'W_1'` (C, 4C), `'b_1'` "
            "(4C,), `'W_2'` (4C, C), `'b_2'` (C,) for $\\mathrm{FF}(x) = \\mathrm{GELU}(x W_1 + b_1) W_2 + b_2$ "
            "with the exact GELU $z\\,\\Phi(z)$. Write `block_forward(X, params, n_heads, pre_ln)` returning the "
            "block's output (T, C) as a NumPy array: pre-LN $H = X + \\mathrm{MHA}(\\mathrm{LN}_1(X))$, "
            "$Y = H + \\mathrm{FF}(\\mathrm{LN}_2(H))$; post-LN $H = \\mathrm{LN}_1(X + \\mathrm{MHA}(X))$, "
            "$Y = \\mathrm{LN}_2(H + \\mathrm{FF}(H))$. No dropout.",
            "block_forward",
            "def block_forward(X, params, n_heads, pre_ln):\n    raise NotImplementedError",
            "C = 4\nrng = np.random.default_rng(0)\n"
            "p = {'ln1_g': np.ones(C), 'ln1_b': np.zeros(C), 'ln2_g': np.ones(C), 'ln2_b': np.zeros(C),\n"
            "     'W_qkv': rng.normal(size=(C, 3 * C)), 'W_O': np.zeros((C, C)), 'b_O': np.zeros(C),\n"
            "     'W_1': rng.normal(size=(C, 4 * C)), 'b_1': np.zeros(4 * C), 'W_2': np.zeros((4 * C, C)), "
            "'b_2': np.zeros(C)}\n"
            "X = rng.normal(size=(3, C)) * 5 + 2\n"
            "assert np.allclose(block_forward(X, p, 2, True), X)    # branches zeroed: pre-LN is the identity\n"
            "Z = (X - X.mean(1, keepdims=True)) / np.sqrt(X.var(1, keepdims=True) + 1e-5)\n"
            "assert np.allclose(block_forward(X, p, 2, False), Z, atol=1e-6)   # post-LN still normalises\n"
            "print('q1: public tests pass')",
            block_forward, block_cases),
        Question(
            "q2", 2, "Post-LN puts a LayerNorm on the residual path, so every gradient that flows back through "
            "the stream is multiplied by LayerNorm's Jacobian. Write `layer_norm_jacobian(x, gamma, eps)` for "
            "one token `x` (C,) and `gamma` (C,) (NumPy float arrays), returning the NumPy array (C, C) of "
            "$J_{cd} = \\partial y_c / \\partial x_d$, where $y = \\mathrm{LN}(x) = (x - \\mu) / "
            "\\sqrt{\\sigma^2 + \\epsilon} \\odot \\gamma + \\beta$ with $\\mu$ and the biased $\\sigma^2$ over "
            "the C features ($\\beta$ does not matter).",
            "layer_norm_jacobian",
            "def layer_norm_jacobian(x, gamma, eps):\n    raise NotImplementedError",
            "J = np.asarray(layer_norm_jacobian(np.array([1.0, -1.0]), np.ones(2), 0.0))\n"
            "assert J.shape == (2, 2) and np.allclose(J, 0, atol=1e-9)   # (1, -1) normalised: no direction left "
            "to move\n"
            "x = np.array([0.3, -1.2, 2.0, 0.5])\n"
            "assert np.allclose(np.asarray(layer_norm_jacobian(x, np.ones(4), 1e-5)).sum(1), 0)   # mean stays 0\n"
            "print('q2: public tests pass')",
            layer_norm_jacobian, jacobian_cases),
        Question(
            "q3", 2, "Only attention mixes tokens: LayerNorm and the feed-forward network act on each token alone. "
            "A stack of L attention layers is given by its masks `masks`, a boolean NumPy array (L, T, T): "
            "`masks[l, i, j]` is True where query $i$ of layer $l$ (0 the first) may attend to key $j$ (every "
            "allowed weight is taken to be nonzero, and every row allows at least one key). With `residual` "
            "True each layer computes $x + \\mathrm{attention}(x)$ (plus per-token parts), with `residual` "
            "False attention alone. Write `stack_reach(masks, residual)` returning an integer NumPy array "
            "(T, T) with 1 where the stack's output at position $i$ depends on its input at position $j$, "
            "and 0 elsewhere.",
            "stack_reach",
            "def stack_reach(masks, residual):\n    raise NotImplementedError",
            "prev = np.array([[[True, False, False], [True, False, False], [False, True, False]]])\n"
            "assert np.array_equal(np.asarray(stack_reach(prev, False)), [[1, 0, 0], [1, 0, 0], [0, 1, 0]])\n"
            "assert np.array_equal(np.asarray(stack_reach(prev, True)), [[1, 0, 0], [1, 1, 0], [0, 1, 1]])\n"
            "assert np.array_equal(np.asarray(stack_reach(np.concatenate([prev, prev]), True)), np.tril(np.ones((3, "
            "3))))\nprint('q3: public tests pass')",
            stack_reach, reach_cases),
        Question(
            "q4", 3, "What does each block add? Load the shipped decoder `musictx_lite.pretrained('sinusoidal', "
            "device='cpu')` (in eval mode: `tok_emb`, `positions`, then the pre-LN `blocks`, then `ln_f` and "
            "`readout`). For each chorale `musictx_lite.load_data('chorales')[VARIANT['split']][i]`, i in "
            "`VARIANT['pieces']`, take `tokens = musictx_lite.io.tokens.encode(piece.pitches)[:L + 1]` with "
            "L = `VARIANT['length']`: the inputs are `tokens[:-1]`, the targets `tokens[1:]`. The residual "
            "stream after $d$ blocks ($d = 0$: the embeddings plus positions, before any block) is read out "
            "through the model's own `ln_f` and `readout`. Set `LOGIT_LENS` to the list of `len(model.blocks) + "
            "1` floats: for $d = 0, 1, \\dots$, the mean NLL (nats per token) of the targets under that "
            "read-out, pooled over your pieces' L targets each. The last one is the model's own NLL on these "
            "windows.",
            "LOGIT_LENS",
            "import musictx_lite as mtx\n\nLOGIT_LENS = None   # a list of floats, for your VARIANT",
            "assert isinstance(LOGIT_LENS, list) and len(LOGIT_LENS) == 5\n"
            "assert all(isinstance(v, float) and 0 < v < 10 for v in LOGIT_LENS)\n"
            "print('q4: public tests pass')",
            logit_lens, timeout=20),
    ),
    written=Written(
        "Read your `LOGIT_LENS` with chapter 5 in mind. In at most 200 words: (a) why reading the stream after "
        "*every* block through the final `ln_f` and `readout` makes sense for a pre-LN decoder, and what makes it "
        "doubtful for a post-LN one; (b) what the read-out at depth 0 can know (compare it with chapter 0's "
        "baselines) and which blocks added the most in your numbers; (c) how q3 explains why a single block "
        "cannot use the notes several steps back through another token, while a stack can.",
        ((1, "pre-LN: an identity path carries the stream from the embedding to ln_f, each block adds a "
             "correction in the same space, so the read-out applies anywhere on it; post-LN renormalises the "
             "stream in every block, the read-out is tuned to the last block's output only"),
         (1, "depth 0: only the current token and its position (its voice), like a bigram with the next voice "
             "known; compares it with a chapter 0 baseline"),
         (1, "reads their own list: the largest drop(s) between consecutive depths, and that the last value is "
             "the model's NLL"),
         (1, "through a stack, dependencies compose (the product of masks): information reaches a position "
             "via intermediate tokens in later layers; one layer sees only its own mask's keys, and the residual "
             "keeps each token's own input in the mix"))),
)
