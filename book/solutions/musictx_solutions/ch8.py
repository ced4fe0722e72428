"""Chapter 8 exercises: the skew by hand (masked and unmasked), the paper's Table 1, past the trained length.

Notebook: notebooks/08_skew.ipynb
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from musictx_lite.io.data import Splits
from musictx_lite.models.positions import position_nll
from musictx_lite.models.relative import relative_logits_direct

__all__ = ["skew_unmasked", "exercise_8_1", "exercise_8_2", "exercise_8_3"]


def skew_unmasked(rel: torch.Tensor) -> torch.Tensor:
    """Exercise 8.1's skew for unmasked attention: (L, 2L - 1) logits by distance -(L-1)..(L-1) -> (L, L)."""
    L = rel.shape[0]
    x = F.pad(rel, (0, 1)).flatten()                                    # pad a column on the right, flatten
    x = F.pad(x, (0, L - 1)).reshape(L + 1, 2 * L - 1)                 # pad L - 1, reshape (L + 1, 2L - 1)
    return x[:L, L - 1:]                                                # first L rows, last L columns


def exercise_8_1(L: int = 5, d: int = 8, seed: int = 0) -> torch.Tensor:
    """The skew by hand for one head, checked against the direct gather; then the unmasked version."""
    torch.manual_seed(seed)
    q, E = torch.randn(L, d), torch.randn(L, d)                         # queries, distances -(L-1)..0
    R = q @ E.T                                                         # (L, L)
    S = F.pad(R, (1, 0)).reshape(L + 1, L)[1:]                          # pad left, reshape, drop row 0
    direct = relative_logits_direct(q[None], E[None])[0]                # (L, L), 0 above the diagonal
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    assert torch.allclose(S[causal], direct[causal], atol=1e-5)
    print(f"masked skew, L = {L}: equal to the direct gather on all {int(causal.sum())} defined entries")
    # unmasked: distances -(L-1)..(L-1), R2 (L, 2L-1); out[i, j] = R2[i, j - i + L - 1] for every j
    E2 = torch.randn(2 * L - 1, d)
    R2 = q @ E2.T                                                       # (L, 2L - 1)
    S2 = skew_unmasked(R2)
    ref = torch.stack([torch.stack([R2[i, j - i + L - 1] for j in range(L)]) for i in range(L)])
    assert torch.allclose(S2, ref)
    print("unmasked skew: pad a column on the right, flatten, pad L - 1,")
    print("reshape to (L + 1, 2L - 1), keep the first L rows and the last L columns;")
    print("every entry is defined")
    return S2


def exercise_8_2(D: int = 512, heads: int = 8, lengths=(2048, 3500)) -> dict[int, tuple[float, float]]:
    """Memory of the relative embeddings per head: (L, L, D/h) for Shaw, (L, D/h) for the skew."""
    d = D // heads
    out = {}
    for L in lengths:
        shaw, skew = L * L * d * 4, L * d * 4
        out[L] = (shaw, skew)
        print(f"L = {L}: Shaw {shaw / 1e9:.2f} GB per head ({heads * shaw / 1e9:.1f} GB per layer), "
              f"skew {skew / 1e6:.2f} MB per head")
    assert abs(out[2048][0] / 1e9 - 1.07) < 0.01 and abs(out[2048][1] / 1e6 - 0.52) < 0.01
    print("per head at L = 2048: 1.07 GB and 0.52 MB, the paper's 1.1 GB and 0.52 MB")
    return out


def exercise_8_3(model: nn.Module, data: Splits) -> tuple[float, float]:
    """NLL by position past the trained length, for the relative decoder."""
    L = model.context
    c = position_nll(model, data.valid, 2 * L)                          # (2L,)
    inside, past = c[4:L].mean().item(), c[L:].mean().item()
    print(f"relative decoder, windows of {2 * L}: positions 4..{L - 1}: {inside:.3f}, "
          f"{L}..{2 * L - 1}: {past:.3f} nats/token")
    print(f"past L the NLL {'rises' if past > inside else 'does not rise'}: "
          f"{past - inside:+.3f} nats/token")
    print(f"what differs past L: a query sees more than the {L} keys of any training crop, and")
    print(f"every key beyond distance -{L - 1} gets the same vector, E^r's farthest; the near")
    print("distances keep the vectors they were trained with")
    view = position_nll(model, data.valid, 2 * L, window=L)[L:].mean().item()   # chapter 6's control
    print(f"the control, at most L tokens in view: {L}..{2 * L - 1}: {view:.3f} nats/token")
    if past > inside:
        share = (past - view) / (past - inside)
        print("the extra keys (distances never seen in training, which the model cannot tell apart by")
        print(f"distance) account for {past - view:+.3f} of the {past - inside:+.3f}, {share:.0%} of the rise;")
        print("the rest, which the control shows too, is that of the later tokens and its shorter view")
    return inside, past

