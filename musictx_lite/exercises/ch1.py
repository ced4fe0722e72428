"""Chapter 1 exercises: attention in RNNs.

Notebook: notebooks/01_attention_in_rnns.ipynb
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..attention import attention_weights
from ..data import Splits, load_data
from ..tokens import encode


class AdditiveAttention(nn.Module):
    """Bahdanau's additive score e_ij = v^T tanh(h_i W_1 + h_j W_2), causal, over hidden states."""

    def __init__(self, C: int, d: int = 32):
        super().__init__()
        self.W1, self.W2 = nn.Linear(C, d, bias=False), nn.Linear(C, d, bias=False)
        self.v = nn.Linear(d, 1, bias=False)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        T = h.shape[1]
        e = self.v(torch.tanh(self.W1(h)[:, :, None] + self.W2(h)[:, None, :])).squeeze(-1)   # (B, T, T)
        e = e.masked_fill(torch.ones(T, T, dtype=torch.bool, device=h.device).triu(1), float("-inf"))
        alpha = F.softmax(e, dim=-1)                                                        # (B, T, T)
        return alpha @ h, alpha


def exercise_1_1(C: int = 16, T: int = 10, seed: int = 0) -> AdditiveAttention:
    """Additive attention: build it, and check the invariants of chapter 1 hold for it too."""
    torch.manual_seed(seed)
    att = AdditiveAttention(C)
    h = torch.randn(2, T, C)
    c, alpha = att(h)
    assert torch.allclose(alpha.sum(-1), torch.ones(2, T)) and (alpha >= 0).all()
    assert (alpha.triu(1) == 0).all()
    h2 = h.clone()
    h2[:, 6:] += 1.0
    assert torch.allclose(att(h2)[0][:, :6], c[:, :6])           # the past does not see the future
    print(f"additive attention: rows sum to 1, causal; {sum(p.numel() for p in att.parameters())} parameters "
          f"(the bilinear W has {C * C})")
    return att


def exercise_1_2(model: nn.Module, prompt: np.ndarray, temperatures=(0.5, 1.0, 1.5), n_steps: int = 32,
                 seed: int = 0, data: Splits | None = None) -> dict[float, float]:
    """Temperature: how often does a voice change pitch from one 16th to the next, per temperature?

    The same measure (``music.voice_stats``) on Bach's valid chorales is the
    reference: a too-hot sampler fidgets, a too-cold one stalls.
    """
    from ..music import voice_stats
    from ..sample import generate
    from ..tokens import decode

    data = data or load_data()
    bach = voice_stats([p.pitches for p in data.valid])["moves"]
    out = {}
    for temp in temperatures:
        g = decode(generate(model, prompt, n_steps, temperature=temp, seed=seed))[-n_steps:]
        out[temp] = voice_stats(g)["moves"]
        print(f"temperature {temp}: voices change pitch on {out[temp]:.0%} of steps")
    print(f"Bach (every valid chorale): {bach:.0%} of steps")
    closest = min(out, key=lambda t: abs(out[t] - bach))
    print(f"closest to Bach: temperature {closest} (one sample of {n_steps} steps per temperature)")
    return out


def uniform_by_lag(T: int, max_lag: int) -> np.ndarray:
    """Mean weight at lag l of a causal attention that is uniform over the past:
    query i gives 1 / (i + 1) to each key j <= i; the mean runs over the queries i >= l."""
    return np.array([np.mean(1.0 / np.arange(lag + 1, T + 1)) for lag in range(max_lag + 1)])


def exercise_1_3(model: nn.Module, data: Splits | None = None, max_lag: int = 12, pieces: int = 8,
                 steps: int = 64) -> np.ndarray:
    """Where does the LSTM's attention look? Mean weight on the token ``lag`` positions back, against uniform."""
    data = data or load_data()
    mass = np.zeros(max_lag + 1)
    T = 1 + 4 * steps
    for p in data.valid[:pieces]:
        a = attention_weights(model, encode(p.pitches[:steps])).numpy()  # (T, T), on any device
        for lag in range(max_lag + 1):
            mass[lag] += np.diagonal(a, -lag).mean()
    mass /= pieces
    uniform = uniform_by_lag(T, max_lag)                                  # same windows, uniform weights
    best = np.argsort(mass)[::-1][:3]
    print("lag      " + " ".join(f"{k:5d}" for k in range(max_lag + 1)))
    print("weight   " + " ".join(f"{m:.3f}" for m in mass))
    print("uniform  " + " ".join(f"{u:.3f}" for u in uniform))
    print(f"largest at lags {best.tolist()}; against uniform: " + ", ".join(
        f"lag {k} x{mass[k] / uniform[k]:.1f}" for k in best))
    print("The query at i predicts x_(i+1); the state at lag 3 has just read x_(i-3), the same\n"
          "voice one step before the target. Lag 4 is one token further back: that state read the\n"
          "voice just above the target's previous note (for a soprano target, the bass before it).")
    return mass
