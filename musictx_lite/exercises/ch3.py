"""Chapter 3 exercises: masking.

Notebook: notebooks/03_masking.ipynb
"""
from __future__ import annotations

import torch

from ..attention import attention, causal_mask

__all__ = ["exercise_3_1", "exercise_3_2"]


def exercise_3_1(T: int = 12, t: int = 5, seed: int = 0) -> bool:
    """A mask that lets position t see one future token (j <= t + 1) is not causal."""
    torch.manual_seed(seed)
    peek = torch.ones(T, T, dtype=torch.bool).tril(1)                   # j <= i + 1
    q, k, v = (torch.randn(1, T, 8) for _ in range(3))
    out = attention(q, k, v, peek)[0]
    v2 = v.clone()
    v2[:, t + 1] += 1.0                                                  # change the next token only
    moved = not torch.allclose(attention(q, k, v2, peek)[0][:, t], out[:, t])
    print(f"output at {t} changes when token {t + 1} changes: {moved}; the loss would fall by copying "
          f"the next token, as with no mask at all")
    return moved


def exercise_3_2(T: int = 8, seed: int = 0) -> float:
    """Zeroing after the softmax breaks the sum to 1; renormalising recovers the masked weights."""
    torch.manual_seed(seed)
    q, k, v = (torch.randn(T, 4) for _ in range(3))
    full = attention(q, k, v)[1]
    zeroed = full * causal_mask(T)
    right = attention(q, k, v, causal_mask(T))[1]
    renorm = zeroed / zeroed.sum(-1, keepdim=True)
    assert torch.allclose(renorm, right, atol=1e-6)
    print("row sums after zeroing:", zeroed.sum(-1).numpy().round(3))
    print("renormalised == masked before the softmax:", torch.allclose(renorm, right, atol=1e-6))
    return float(zeroed.sum(-1).min())
