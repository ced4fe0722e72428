"""Chapter 1 exercises: attention in RNNs.

Notebook: notebooks/01_attention_in_rnns.ipynb
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from musictx_lite.classroom.checks.ch1 import STORED_C, STORED_D, _hidden_states, _seeded_weights
from musictx_lite.io.data import Splits, load_data
from musictx_lite.io.tokens import encode
from musictx_lite.models.attention import attention_weights


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
                 seed: int = 0, data: Splits | None = None, n_samples: int = 8) -> dict[float, float]:
    """Temperature: how often does a voice change pitch from one 16th to the next, per temperature?

    The same measure (``stats.voice_stats``) on Bach's valid chorales is the
    reference: a too-hot sampler fidgets, a too-cold one stalls. ``n_samples``
    continuations per temperature (seeds ``seed`` ...), with a bootstrap interval
    over them: one short sample cannot rank temperatures that lie close.
    """
    from musictx_lite.engine.sample import generate
    from musictx_lite.io.stats import bootstrap_interval, voice_stats
    from musictx_lite.io.tokens import decode

    data = data or load_data()

    def moves(grids) -> float:
        return voice_stats(grids)["moves"]

    bach = moves([p.pitches for p in data.valid])
    b_lo, b_hi = bootstrap_interval([p.pitches for p in data.valid], moves, n=200)
    out, gaps = {}, {}
    for temp in temperatures:
        grids = [decode(generate(model, prompt, n_steps, temperature=temp, seed=seed + i))[-n_steps:]
                 for i in range(n_samples)]
        out[temp] = moves(grids)
        lo, hi = bootstrap_interval(grids, moves, n=200)
        gaps[temp] = (abs(out[temp] - bach), lo, hi)
        print(f"temperature {temp}: voices change pitch on {out[temp]:.0%} of steps "
              f"(95% interval over {n_samples} samples: {lo:.0%} to {hi:.0%})")
    print(f"Bach (every valid chorale): {bach:.0%} of steps ({b_lo:.0%} to {b_hi:.0%})")
    closest = min(out, key=lambda t: gaps[t][0])
    inside = [t for t in temperatures if gaps[t][1] <= bach <= gaps[t][2]]
    # decisive only if the closest temperature's interval is nearer to Bach than every other's, end to end
    far = {t: min(abs(gaps[t][1] - bach), abs(gaps[t][2] - bach)) if t not in inside else 0.0 for t in out}
    near = max(abs(gaps[closest][1] - bach), abs(gaps[closest][2] - bach))
    if all(near < far[t] for t in out if t != closest):
        print(f"closest to Bach: temperature {closest}, whatever the samples within their intervals")
    else:
        print(f"nearest on these samples: temperature {closest}; but within the intervals another "
              f"temperature could lie as near to Bach's rate: {n_samples} samples of {n_steps} steps "
              f"do not rank them")
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


def expected() -> dict:
    """What ``check_1_1`` compares with (``musictx_solutions.expected``): the weights (2, 9, 9) of the reference
    AdditiveAttention(16) with the checker's seeded W1, W2, v, on the checker's hidden states for T = 9."""
    att = AdditiveAttention(STORED_C, STORED_D)
    att.load_state_dict(_seeded_weights(STORED_C, STORED_D))
    h = _hidden_states(STORED_C, torch.Generator().manual_seed(0))[9]     # (2, 9, C)
    with torch.no_grad():
        _, weights = att(h)
    return {"weights": weights.tolist()}
