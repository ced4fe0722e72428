"""Week 9: mixing without attention (chapter 10): a long convolution that is also a recurrence, the naive FNet
at generation time, the best fixed linear mix of the chorales, and a causal matrix read as a convolution."""
from __future__ import annotations

import numpy as np
import torch

from ..spec import Assignment, Question, Written, close

# ----------------------------------------------------------------------------- q1: a convolution and a recurrence

def ema_mix(u, a, b):
    """The reference: y[t, c] = sum_{s <= t} b_c a_c^(t - s) u[s, c], the causal convolution with the kernel
    h_c[k] = b_c a_c^k, computed as the recurrence s_t = a s_{t-1} + b u_t."""
    u, a, b = (np.asarray(x, dtype=float) for x in (u, a, b))
    y = np.zeros_like(u)
    state = np.zeros(u.shape[1])
    for t in range(u.shape[0]):
        state = a * state + b * u[t]
        y[t] = state
    return y


def ema_cases(variant, rng):
    out = []
    for T, C in ((1, 3), (8, 2), (50, 4), (200, 8)):
        a = rng.uniform(0.3, 0.99, C)
        a[0] = 0.0 if T == 8 else a[0]                                  # a = 0: the token alone
        out.append({"u": rng.normal(0, 1, (T, C)), "a": a, "b": rng.normal(0, 1, C)})
    return out


# ----------------------------------------------------------------------------- q2: the naive FNet, generating

def prefix_fnet(X):
    """The reference: row t of FNet's sublayer applied to the prefix X[:t + 1] alone, for every t, in float64."""
    X = torch.as_tensor(X, dtype=torch.float64)
    return torch.stack([torch.fft.fft2(X[: t + 1]).real[t] for t in range(X.shape[0])])


def prefix_cases(variant, rng):
    return [{"X": rng.normal(0, 1, (T, C))} for T, C in ((1, 4), (2, 3), (6, 8), (16, 5), (24, 16))]


# ----------------------------------------------------------------------------- q3: a number of your variant

def lag_kernel(pieces, voice, K):
    """The reference: the least-squares weights h_1..h_K (with an intercept) of z_t ~ b + sum_k h_k z_{t-k}, z the
    raster of MIDI pitches (no BOS), over the positions t >= K of ``voice`` whose window z_{t-K..t} has no rest."""
    import musictx_lite as mtx

    data = mtx.load_data("chorales")
    rows, target = [], []
    for i in pieces:
        z = data.train[i].pitches.reshape(-1).astype(float)             # S A T B per step, no BOS
        for t in range(K + (voice - K) % 4, len(z), 4):                 # t >= K, t mod 4 == voice
            window = z[t - K: t + 1]
            if (window >= 0).all():
                rows.append(np.concatenate([[1.0], z[t - K: t][::-1]]))   # 1, z_{t-1}, ..., z_{t-K}
                target.append(z[t])
    coef = np.linalg.lstsq(np.array(rows), np.array(target), rcond=None)[0]
    return coef[1:].tolist()


# ----------------------------------------------------------------------------- q4: a matrix read as a convolution

def toeplitz_projection(M):
    """The reference: h_k, the mean of the k-th diagonal below the main one of M (T, T): the kernel of the causal
    convolution nearest to M's lower triangle in least squares."""
    M = np.asarray(M, dtype=float)
    T = M.shape[0]
    return np.array([np.diagonal(M, -k).mean() for k in range(T)])


def toeplitz_cases(variant, rng):
    return [{"M": rng.normal(0, 1, (T, T))} for T in (1, 2, 7, 16, int(rng.integers(20, 40)))]


ASSIGNMENT = Assignment(
    week=9, title="Mixing without attention: FNet and its causal fixes", chapters=(10,),
    intro="A long convolution that runs as a recurrence, what the naive FNet computes while generating, the best "
          "fixed linear mix of the chorales, and a learned causal matrix read as a convolution.",
    variant=lambda rng: {"pieces": sorted(rng.choice(197, size=10, replace=False).tolist()),
                         "voice": int(rng.integers(0, 4)), "K": int(rng.choice([8, 12, 16]))},
    setup="import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F",
    questions=(
        Question(
            "q1", 3, "A long convolution can also be a recurrence. Give each channel $c$ the kernel "
            "$h_{c,k} = b_c\\, a_c^{\\,k}$, $k = 0, 1, 2, \\dots$ (a decay, as S4's kernels are sums of), and "
            "mix causally as chapter 10's fix (b) does: $y_{tc} = \\sum_{s=0}^{t} h_{c,\\,t-s}\\, u_{sc}$. "
            "Write `ema_mix(u, a, b)`: `u` a float NumPy array (T, C), `a` (C,) with $0 \\le a_c < 1$, `b` (C,); "
            "return $y$, a float64 NumPy array (T, C). Hint: $y_t = a \\odot y_{t-1} + b \\odot u_t$ needs "
            "only $C$ numbers of state per step, where chapter 10's cache keeps the last $L$ inputs.",
            "ema_mix",
            "def ema_mix(u, a, b):\n    raise NotImplementedError",
            "u = np.array([[1.0], [0.0], [0.0], [2.0]])\n"
            "assert np.allclose(ema_mix(u, np.array([0.5]), np.array([2.0])), [[2.0], [1.0], [0.5], [4.25]])\n"
            "u = np.random.default_rng(0).normal(size=(5, 3))\n"
            "assert np.allclose(ema_mix(u, np.zeros(3), np.ones(3)), u)    # a = 0: no memory\n"
            "print('q1: public tests pass')",
            ema_mix, ema_cases),
        Question(
            "q2", 2, "The naive FNet at generation time. FNet's sublayer is $Y = \\mathrm{Re}(D_T X D_C)$ = "
            "`torch.fft.fft2(X).real` for $X$ (T, C). While generating, the model sees only the prefix "
            "$X_{0..t}$ (t + 1 rows) when it predicts from position $t$, so it computes row $t$ of "
            "$\\mathrm{Re}(D_{t+1} X_{0..t} D_C)$, not row $t$ of the whole $Y$. Write `prefix_fnet(X)`: `X` "
            "a float64 torch tensor (T, C); return the float64 tensor (T, C) whose row $t$ is that row, the "
            "sublayer's output at $t$ computed from the prefix alone.",
            "prefix_fnet",
            "def prefix_fnet(X):\n    raise NotImplementedError",
            "X = torch.randn(5, 4, dtype=torch.float64)\n"
            "P = torch.as_tensor(prefix_fnet(X))\n"
            "assert P.shape == (5, 4)\n"
            "assert torch.allclose(P[-1], torch.fft.fft2(X).real[-1])          # the whole input: the same row\n"
            "assert torch.allclose(P[0], torch.fft.fft(X[0]).real)              # one token: F_hidden alone\n"
            "assert not torch.allclose(P, torch.fft.fft2(X).real)\n"
            "print('q2: public tests pass')",
            prefix_fnet, prefix_cases, tensors=True),
        Question(
            "q3", 3, "The best *fixed* linear mix. Chapter 10's causal mixers weigh earlier positions by offset, "
            "whatever they hold. Fit the best such weights by least squares, on pitches. For each training "
            "chorale numbered `VARIANT['pieces']` of the embedded corpus, let `z = piece.pitches.reshape(-1)` "
            "(the raster of MIDI pitches without BOS, -1 for a rest; position $t$ is of voice $t \\bmod 4$). "
            "With $K$ = `VARIANT['K']`, take every position $t \\ge K$ of the voice `VARIANT['voice']` whose "
            "window $z_{t-K}, \\dots, z_t$ holds no rest, and fit $z_t \\approx b + \\sum_{k=1}^{K} h_k\\, "
            "z_{t-k}$ over all of them, pooled over the pieces (ordinary least squares, with the intercept "
            "$b$). Set `LAG_KERNEL` to the list of the $K$ floats $h_1, \\dots, h_K$ (without $b$).",
            "LAG_KERNEL",
            "import musictx_lite as mtx\n\nLAG_KERNEL = None   # a list of VARIANT['K'] floats",
            "assert isinstance(LAG_KERNEL, list) and len(LAG_KERNEL) == VARIANT['K']\n"
            "assert max(range(len(LAG_KERNEL)), key=lambda k: LAG_KERNEL[k]) == 3   # lag 4: the voice itself\n"
            "print('q3: public tests pass')",
            lag_kernel, judge=lambda got, want: close(got, want, rtol=1e-3, atol=1e-5), timeout=20),
        Question(
            "q4", 2, "Fix (a) learns a causal matrix $M$ (T, T), fix (b) a kernel: $M_{ts} = h_{t-s}$. Which "
            "convolution is nearest to a given matrix? Over the lower triangle, $\\sum_{s \\le t} (M_{ts} - "
            "h_{t-s})^2$ is smallest when $h_k$ is the mean of $M$ along the $k$-th diagonal below the main "
            "one, $h_k = \\frac{1}{T - k} \\sum_{t=k}^{T-1} M_{t,\\,t-k}$. Write `toeplitz_projection(M)`: "
            "`M` a float NumPy array (T, T); return $h$, a float NumPy array (T,), $h_0$ from the main diagonal. "
            "The entries above the diagonal do not count.",
            "toeplitz_projection",
            "def toeplitz_projection(M):\n    raise NotImplementedError",
            "h = np.array([3.0, 2.0, 1.0])\n"
            "M = np.array([[3.0, 9.0, 9.0], [2.0, 3.0, 9.0], [1.0, 2.0, 3.0]])   # a convolution, 9s above\n"
            "assert np.allclose(toeplitz_projection(M), h)\n"
            "assert np.allclose(toeplitz_projection(np.array([[1.0, 0.0], [2.0, 3.0]])), [2.0, 2.0])\n"
            "print('q4: public tests pass')",
            toeplitz_projection, toeplitz_cases),
    ),
    written=Written(
        "Read your `LAG_KERNEL`. In at most 200 words: (a) which lags carry the most weight, and how they "
        "compare with the lags chapter 10 finds in its trained mixers (mind the shift: there output $t$ "
        "predicts token $t + 1$, here $z_t$ is predicted from $z_{t-1}, \\dots$); (b) what such a fixed mix "
        "cannot do on a chorale that attention can, with a musical example; (c) using `prefix_fnet`, why the "
        "naive FNet, which the chapter shows leaks in training, also mixes differently while generating, and "
        "why the two causal fixes do not.",
        ((1, "(a) names the largest weights at the same-voice lags (4, 8, ...; the chapter's 3, 7, 11, 15 after "
             "the shift) with numbers from LAG_KERNEL, and notes smaller weights on the other voices of the "
             "current step"),
         (1, "(b) a fixed mix weighs by offset for every chorale alike; it cannot pick an earlier note by its "
             "content (the last time the soprano sang this pitch, the chord with this bass note), whose "
             "distance differs from chorale to chorale; attention computes its weights from the tokens"),
         (1, "(c) the sequence transform D_T depends on the length, so the prefix of t + 1 tokens is mixed by "
             "D_{t+1}: the output at t changes with the length of the input, and differs from training on "
             "whole crops"),
         (1, "(c) the fixes mix row t with fixed weights on positions <= t (a lower-triangular matrix of fixed "
             "size, or a kernel by offset), so a prefix gets the same rows as a whole crop"))),
)
