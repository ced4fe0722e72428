"""Week 2: self-attention (chapter 2) and the causal mask (chapter 3)."""
from __future__ import annotations

import math

import numpy as np
import torch

from ..spec import Assignment, Question, Written

# ----------------------------------------------------------------------------- q1: a prefix-LM mask

def prefix_attention(Q, K, V, prefix):
    """The reference: scaled dot-product attention where query i may see key j iff j < prefix or j <= i."""
    Q, K, V = (torch.as_tensor(a, dtype=torch.float64) for a in (Q, K, V))
    T = Q.shape[0]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = (j < prefix) | (j <= i)                                   # (T, T)
    scores = Q @ K.T / math.sqrt(K.shape[1])
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ V                                                  # (T, d_v)


def prefix_cases(variant, rng):
    out = []
    for T, prefix in ((1, 0), (6, 0), (7, 7), (9, 3), (int(rng.integers(12, 20)), int(rng.integers(2, 10)))):
        d_k, d_v = int(rng.choice([4, 8])), int(rng.choice([3, 5]))
        out.append({"Q": rng.normal(0, 1, (T, d_k)), "K": rng.normal(0, 1, (T, d_k)),
                    "V": rng.normal(0, 1, (T, d_v)), "prefix": prefix})
    return out


# ----------------------------------------------------------------------------- q2: the gradient of the weights

def weights_grad(q, K):
    """The reference: the Jacobian (T, d_k) of alpha = softmax(K q / sqrt(d_k)) with respect to q."""
    q, K = np.asarray(q, dtype=float), np.asarray(K, dtype=float)
    d = len(q)
    s = K @ q / math.sqrt(d)
    a = np.exp(s - s.max())
    a /= a.sum()
    return a[:, None] * (K - a @ K) / math.sqrt(d)                      # d alpha_j / d q_c


def grad_cases(variant, rng):
    return [{"q": rng.normal(0, 1, d) * scale, "K": rng.normal(0, 1, (T, d))}
            for T, d, scale in ((1, 4, 1.0), (5, 4, 1.0), (16, 8, 1.0), (12, 64, 1.0), (10, 16, 6.0))]


# ----------------------------------------------------------------------------- q3: attention as a soft look-up

def retrieval_nll(voice, train, valid, beta):
    """The reference: fill in ``voice`` at every step of the valid pieces by attending over every step of the
    train pieces, with scores beta * (number of other voices whose pitches agree); NLL in nats per note."""
    from musictx_lite import load_data

    data = load_data("chorales")
    memory = np.concatenate([data.train[i].pitches for i in train])     # (Nk, 4): keys and values
    query = np.concatenate([data.valid[i].pitches for i in valid])      # (Nq, 4)
    matches = sum((query[:, None, u] == memory[None, :, u]).astype(float) for u in range(4) if u != voice)
    s = beta * matches                                                  # (Nq, Nk)
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    hit = (memory[None, :, voice] == query[:, None, voice]).astype(float)
    p = 0.99 * (w * hit).sum(1) + 0.01 / 54
    return float(-np.log(p).mean())


# ----------------------------------------------------------------------------- q4: the leak, measured

def leak_nll(tokens, E, P, W_Q, W_K, W_V, W_out, b_out, causal):
    """The reference: one attention layer with positions, scored on the whole sequence in one pass and
    token by token from each prefix alone; a dict of the two mean NLLs."""
    tokens = np.asarray(tokens, dtype=int)
    E, P, W_Q, W_K, W_V, W_out, b_out = (np.asarray(a, dtype=float) for a in (E, P, W_Q, W_K, W_V, W_out, b_out))

    def logits(x):                                                      # x (T,) token ids -> (T, V)
        T = len(x)
        X = E[x] + P[:T]
        Q, K, V = X @ W_Q, X @ W_K, X @ W_V
        s = Q @ K.T / math.sqrt(K.shape[1])
        if causal:
            s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
        w = np.exp(s - s.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        return (w @ V) @ W_out + b_out

    def nll(lg, y):                                                     # lg (N, V), y (N,) -> (N,)
        m = lg.max(1, keepdims=True)
        logz = (m + np.log(np.exp(lg - m).sum(1, keepdims=True)))[:, 0]
        return logz - lg[np.arange(len(y)), y]

    x, y = tokens[:-1], tokens[1:]
    whole = nll(logits(x), y).mean()
    prefix = np.mean([nll(logits(x[: t + 1])[-1:], y[t: t + 1])[0] for t in range(len(x))])
    return {"whole": float(whole), "prefix": float(prefix)}


def leak_cases(variant, rng):
    out, V, C = [], 10, 8
    for T, causal in ((1, False), (4, True), (10, False), (12, True), (int(rng.integers(14, 22)), False)):
        out.append({"tokens": rng.integers(0, V, T + 1), "E": rng.normal(0, 1, (V, C)),
                    "P": rng.normal(0, 1, (T + 2, C)),
                    "W_Q": rng.normal(0, 1, (C, C)) / math.sqrt(C), "W_K": rng.normal(0, 1, (C, C)) / math.sqrt(C),
                    "W_V": rng.normal(0, 1, (C, C)) / math.sqrt(C),
                    "W_out": rng.normal(0, 2, (C, V)) / math.sqrt(C), "b_out": rng.normal(0, 0.5, V),
                    "causal": causal})
    return out


ASSIGNMENT = Assignment(
    week=2, title="Self-attention and the causal mask", chapters=(2, 3),
    intro="Queries, keys and values (chapter 2), and the mask that makes attention a language model "
          "(chapter 3). Row vectors throughout: $Q = X W_Q$, scores $Q K^\\top / \\sqrt{d_k}$.",
    variant=lambda rng: {"voice": int(rng.integers(0, 4)),
                         "train": sorted(rng.choice(197, size=12, replace=False).tolist()),
                         "valid": sorted(rng.choice(66, size=3, replace=False).tolist()),
                         "beta": float(rng.choice([0.5, 1.0, 2.0, 3.0]))},
    setup="import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 2, "A *prefix language model* reads a prompt of `prefix` tokens bidirectionally and continues "
            "causally: query $i$ may attend to key $j$ if $j <$ `prefix` **or** $j \\le i$ (positions from 0). "
            "Write `prefix_attention(Q, K, V, prefix)` for torch tensors `Q`, `K` (T, $d_k$) and `V` (T, $d_v$) "
            "(float64) and an int `prefix` $\\ge 0$: the output $\\mathrm{softmax}(Q K^\\top / \\sqrt{d_k} + M)\\,V$, "
            "a tensor (T, $d_v$), with $M_{ij} = 0$ where allowed and $-\\infty$ elsewhere (chapter 3). With "
            "`prefix = 0` it is the causal attention of chapter 3; with `prefix >= T` it is chapter 2's.",
            "prefix_attention",
            "def prefix_attention(Q, K, V, prefix):\n    raise NotImplementedError",
            "Q = K = torch.zeros(3, 2, dtype=torch.float64)\nV = torch.tensor([[3.0], [6.0], [9.0]], "
            "dtype=torch.float64)\n"
            "assert torch.allclose(torch.as_tensor(prefix_attention(Q, K, V, 0)).flatten(), "
            "torch.tensor([3.0, 4.5, 6.0], dtype=torch.float64))\n"
            "assert torch.allclose(torch.as_tensor(prefix_attention(Q, K, V, 2)).flatten(), "
            "torch.tensor([4.5, 4.5, 6.0], dtype=torch.float64))\nprint('q1: public tests pass')",
            prefix_attention, prefix_cases, tensors=True),
        Question(
            "q2", 2, "Chapter 2 says that saturated attention stops the query and key matrices from learning. "
            "Measure it exactly: for a query `q` ($d_k$,) and keys `K` (T, $d_k$), NumPy float arrays, the "
            "weights are $\\alpha = \\mathrm{softmax}(K q / \\sqrt{d_k})$ (T,). Write `weights_grad(q, K)` "
            "returning the Jacobian $J_{jc} = \\partial \\alpha_j / \\partial q_c$ as a NumPy array (T, $d_k$). "
            "(Work it out with the softmax's derivative $\\alpha_j(\\delta_{jl} - \\alpha_l)$, or use autograd; "
            "either way it must stay finite for large scores.)",
            "weights_grad",
            "def weights_grad(q, K):\n    raise NotImplementedError",
            "J = np.asarray(weights_grad(np.array([1.0, -2.0]), np.array([[0.5, 1.0]])))\n"
            "assert J.shape == (1, 2) and np.allclose(J, 0)           # one key: its weight is always 1\n"
            "rng = np.random.default_rng(0)\nq, K, h = rng.normal(size=3), rng.normal(size=(4, 3)), 1e-6\n"
            "def alpha(q):\n    s = K @ q / np.sqrt(3)\n    return np.exp(s) / np.exp(s).sum()\n"
            "fd = np.stack([(alpha(q + h * e) - alpha(q - h * e)) / (2 * h) for e in np.eye(3)], axis=1)\n"
            "assert np.allclose(weights_grad(q, K), fd, atol=1e-6)\nprint('q2: public tests pass')",
            weights_grad, grad_cases),
        Question(
            "q3", 3, "Attention is a soft look-up. Fill in the voice `VARIANT['voice']` (0 soprano ... 3 bass) of "
            "every step of the **valid** chorales numbered `VARIANT['valid']` by attending over every step of "
            "the **training** chorales numbered `VARIANT['train']` (`musictx_lite.load_data('chorales')`; a "
            "piece's `.pitches` is a (steps, 4) array of MIDI pitches, -1 for a rest; stack the steps of the "
            "pieces in the order listed). A query is a valid step and a key a training step, both seen through "
            "their three *other* voices: the score of key $b$ for query $a$ is $\\beta$ = `VARIANT['beta']` times "
            "the number of those three voices whose pitches are equal in $a$ and $b$ (a rest equals a rest). The "
            "weights are the softmax of the scores over **all** training steps; the value of a key is the "
            "one-hot of its hidden-voice pitch. So the predicted probability of pitch $x$ at query $a$ is "
            "$p_a(x) = 0.99 \\sum_b \\alpha_{ab} [y_b = x] + 0.01 / 54$, with $y_b$ the hidden voice's pitch "
            "(or rest) at step $b$. Set `RETRIEVAL_NLL` to the mean of $-\\log p_a(y_a)$ over the valid steps "
            "(nats per note), a float.",
            "RETRIEVAL_NLL",
            "from musictx_lite import load_data\n\nRETRIEVAL_NLL = None   # a float, for your VARIANT",
            "assert isinstance(RETRIEVAL_NLL, float) and 0 < RETRIEVAL_NLL < math.log(100)\n"
            "print('q3: public tests pass')",
            retrieval_nll, timeout=20),
        Question(
            "q4", 3, "Chapter 3's leak, on a model small enough to write by hand. Token ids `tokens` (length "
            "T + 1, ints in `range(V)`) give the inputs $x$ = `tokens[:-1]` and the targets `tokens[1:]`. One "
            "layer with learned positions: $X = E[x] + P_{0:T}$ (`E` (V, C), `P` (at least T, C)), "
            "$Q, K, V = X W_Q, X W_K, X W_V$ (`W_Q`, `W_K`, `W_V` (C, d)), one head "
            "$O = \\mathrm{softmax}(Q K^\\top / \\sqrt{d} + M)\\,V$ with the causal mask $M$ if `causal` is True "
            "and no mask otherwise, and logits $O W_{out} + b_{out}$ (`W_out` (d, V), `b_out` (V,)). Write "
            "`leak_nll(tokens, E, P, W_Q, W_K, W_V, W_out, b_out, causal)` returning a dict of two floats: "
            "`'whole'`, the mean NLL (nats) of the T targets from **one** pass over all T inputs, and "
            "`'prefix'`, the mean NLL when target $t$ is predicted from a pass over the inputs $0 \\dots t$ "
            "alone (positions $0 \\dots t$), as generation must. The arrays are NumPy arrays.",
            "leak_nll",
            "def leak_nll(tokens, E, P, W_Q, W_K, W_V, W_out, b_out, causal):\n    raise NotImplementedError",
            "rng = np.random.default_rng(1)\n"
            "args = dict(tokens=np.array([0, 2, 1, 3, 2]), E=rng.normal(size=(4, 6)), P=rng.normal(size=(4, 6)),\n"
            "            W_Q=rng.normal(size=(6, 6)), W_K=rng.normal(size=(6, 6)), W_V=rng.normal(size=(6, 6)),\n"
            "            W_out=rng.normal(size=(6, 4)), b_out=np.zeros(4))\n"
            "masked, leaky = leak_nll(**args, causal=True), leak_nll(**args, causal=False)\n"
            "assert set(masked) == {'whole', 'prefix'} and abs(masked['whole'] - masked['prefix']) < 1e-9\n"
            "assert abs(masked['prefix'] - leaky['prefix']) < 1e-9   # from a prefix, nothing is masked anyway\n"
            "assert abs(leaky['whole'] - leaky['prefix']) > 1e-3\nprint('q4: public tests pass')",
            leak_nll, leak_cases),
    ),
    written=Written(
        "Your `RETRIEVAL_NLL` came from attention with hand-made queries and keys and a temperature $1/\\beta$. "
        "In at most 200 words: (a) say what the look-up becomes as $\\beta \\to 0$ and as $\\beta \\to \\infty$, "
        "and relate each limit to one of chapter 2's two baselines; (b) chapter 2's trained head gives the hidden "
        "note the *same* query at every step: say what differs here and why it matters; (c) the steps here are "
        "a set, yet q4 shows that attention over a sequence needs a mask: say why the fill-in task needs none.",
        ((1, "beta -> 0: uniform weights, the hidden voice's own pitch distribution over the training steps (the "
             "per-voice unigram); beta -> infinity: only the best-matching steps count, a count table of the "
             "pitch given the other voices (like the neighbour table), which is undefined or sharp where no step "
             "matches"),
         (1, "uses their own number sensibly: e.g. compares it with the chapter's per-voice unigram or "
             "neighbour-table NLL, or explains why 0.01/54 keeps it finite"),
         (1, "here the query is built from the query step's own visible notes, so the weights change with the "
             "chord; in chapter 2 only the keys move the weights, so selection is weak"),
         (1, "fill-in explains the present from notes that sound at the same time: nothing is in the future, "
             "so full attention is legitimate; next-token prediction must not see the answer, whose copy the "
             "unmasked model exploits (whole vs prefix NLL)"))),
)
