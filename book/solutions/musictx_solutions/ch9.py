"""Chapter 9 exercises: relative local attention (keys per query, receptive field, the skew).

Notebook: notebooks/09_local_attention.ipynb
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from musictx_lite.models.config import ModelConfig
from musictx_lite.models.local import LocalAttention, band_mask, skew_local
from musictx_lite.models.probes import gradient_dependency

__all__ = ["keys_per_query", "reach", "my_skew_local", "exercise_9_1", "exercise_9_2", "exercise_9_3"]


def keys_per_query(L: int, N: int | None = None) -> torch.Tensor:
    """(L,) number of keys query i sees: i + 1 (global, N None) or i - (i // N - 1) N + 1 (local)."""
    i = torch.arange(L)
    if N is None:
        return i + 1
    return i - (i // N - 1).clamp(min=0) * N + 1


def reach(T: int, N: int, n_layers: int) -> torch.Tensor:
    """(T, T) boolean: output i of n stacked local layers depends on input j (a boolean power)."""
    M = band_mask(T, N).float()
    R = torch.eye(T)
    for _ in range(n_layers):
        R = (M @ R > 0).float()
    return R.bool()


def my_skew_local(rel: torch.Tensor) -> torch.Tensor:
    """(..., N, 2N-1) -> (..., N, N), out[n, m] = rel[n, N - 1 + m - n]: the square local skew."""
    N = rel.shape[-2]
    x = F.pad(rel, (0, 1))                                      # (..., N, 2N)
    x = F.pad(x.flatten(-2), (0, N - 1))                        # (..., 2N^2 + N - 1)
    x = x.reshape(*rel.shape[:-2], N + 1, 2 * N - 1)            # (..., N + 1, 2N - 1)
    return x[..., :N, N - 1:]                                   # (..., N, N)


def exercise_9_1(L: int = 8192, N: int = 128) -> dict:
    glob, loc = keys_per_query(L), keys_per_query(L, N)
    for i in (0, N - 1, N, 2 * N - 1, 2 * N, L - 1):
        print(f"query {i:5d}: global sees {glob[i].item():5d} keys, local {loc[i].item():4d}")
    out = {"global": int(glob.sum()), "local": int(loc.sum()), "local window": L * 2 * N}
    assert out["global"] == L * (L + 1) // 2
    assert loc.max() == 2 * N and (loc >= 1).all()
    print(f"L = {L}, N = {N}: score entries, global (causal) {out['global']:,d};")
    print(f"  local, attended {out['local']:,d}; local, stored (N, 2N) windows "
          f"{out['local window']:,d}")
    print(f"  global / local stored = {out['global'] / out['local window']:.1f}")
    return out


def exercise_9_2(T: int = 24, N: int = 4, n_max: int = 4) -> dict:
    far = {}
    for n in range(1, n_max + 1):
        R = reach(T, N, n)
        far[n] = int((torch.arange(T) - R.float().argmax(1)).max())   # farthest look-back
        torch.manual_seed(0)
        cfg = ModelConfig(n_embd=8, n_heads=2, context=T)
        stack = nn.Sequential(*[LocalAttention(cfg, N=N) for _ in range(n)])
        G = gradient_dependency(stack, T=T)
        assert torch.equal(G > 0, R), n
        print(f"{n} local layer{'s' * (n > 1)} (N = {N}): reaches back {far[n]} tokens "
              f"= ({n} + 1) N - 1; the gradient probe agrees")
        assert far[n] == (n + 1) * N - 1
    return far


def exercise_9_3(N: int = 5) -> bool:
    torch.manual_seed(0)
    rel = torch.randn(2, 3, N, 2 * N - 1)
    ok = torch.equal(my_skew_local(rel), skew_local(rel, N))
    assert ok
    print(f"my_skew_local equals skew_local(rel, N) for N = {N} on a (2, 3, N, 2N-1) batch")
    return ok

