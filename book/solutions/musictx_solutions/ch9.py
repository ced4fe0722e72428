"""Chapter 9 exercises: relative local attention (keys per query, receptive field, the skew).

Notebook: notebooks/09_local_attention.ipynb
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...models.config import ModelConfig
from ...models.local import LocalAttention, band_mask, skew_local
from ...models.probes import gradient_dependency
from . import grading

__all__ = ["keys_per_query", "reach", "my_skew_local", "exercise_9_1", "exercise_9_2",
           "exercise_9_3", "check_9_1", "check_9_2", "check_9_3"]


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


# ----------------------------------------------------------------------------- checkers

@grading.checker
def check_9_1(keys_per_query: Callable) -> str:
    """Exercise 9.1: how many keys query i sees.

    ``keys_per_query(L, N=None)``: your function, (L,) numbers (tensor, array or list): entry i is the
    number of keys query i sees, in causal global attention when N is None (called as
    ``keys_per_query(L)``), in local attention with blocks of N (its own block up to i and the block
    before) otherwise.

    Checks: equal to the row sums of the causal mask and of ``local.band_mask(L, N)`` for several L
    and N (N = 1, L not a multiple of N, L < N included). Returns True or False.
    """
    for L, N in ((1, None), (12, None), (1, 4), (16, 4), (19, 4), (10, 1), (6, 8)):
        shown = f"keys_per_query({L})" if N is None else f"keys_per_query({L}, {N})"
        got = grading.tensor(f"{shown}'s result", grading.call(shown, keys_per_query, L) if N is None
                      else grading.call(shown, keys_per_query, L, N)).double().flatten()
        want = (torch.arange(L) + 1 if N is None else band_mask(L, N).sum(1)).double()
        if got.shape != want.shape:
            raise grading.Fail(f"{shown} has {got.numel()} entries, expected {L}, one per query")
        if not torch.equal(got, want):
            i = int((got != want).nonzero()[0])
            raise grading.Fail(f"{shown}: query {i} sees {int(want[i])} keys, you say {got[i].item():g}")
    return "global and local counts for L = 1 .. 19, N = 1, 4, 8"


@grading.checker
def check_9_2(reach_fn: Callable) -> str:
    """Exercise 9.2: how far back information travels through n local layers.

    ``reach_fn(T, N, n_layers)``: your function, a (T, T) boolean (or 0/1) matrix, True where output i
    of n stacked local layers with blocks of N depends on input j.

    Checks: equal to the boolean powers of ``local.band_mask`` (``exercises.ch9.reach``) for
    (T, N, n) = (12, 3, 1), (24, 4, 2), (24, 4, 3), (10, 2, 5). Returns True or False.
    """
    for T, N, n in ((12, 3, 1), (24, 4, 2), (24, 4, 3), (10, 2, 5)):
        shown = f"reach({T}, {N}, {n})"
        got = grading.tensor(f"{shown}'s result", grading.call(shown, reach_fn, T, N, n)) != 0
        want = reach(T, N, n)                                                # (T, T) bool
        if tuple(got.shape) != (T, T):
            raise grading.Fail(f"{shown} has shape {tuple(got.shape)}, expected {(T, T)}")
        if not torch.equal(got, want):
            i, j = [int(v) for v in (got != want).nonzero()[0]]
            raise grading.Fail(f"{shown}: output {i} {'depends' if want[i, j] else 'does not depend'} on input {j}, "
                        f"yours says the opposite ({int((got != want).sum())} of {T * T} entries differ)")
    return "equal to powers of the band mask for 4 (T, N, n_layers), up to 5 layers"


@grading.checker
def check_9_3(skew: Callable) -> str:
    """Exercise 9.3: the square local skew, (..., N, 2N - 1) -> (..., N, N), with F.pad and reshape.

    ``skew(rel)``: your function; out[..., n, m] = rel[..., n, N - 1 + m - n], any leading batch dims.

    Checks: equal to ``local.skew_local(rel, N)`` for rel of shapes (1, 1), (4, 7), (2, 6, 11) and
    (2, 3, 5, 9). Returns True or False.
    """
    g = torch.Generator().manual_seed(0)
    for shape in ((1, 1), (4, 7), (2, 6, 11), (2, 3, 5, 9)):
        rel = torch.randn(shape, generator=g)
        got = grading.call(f"your function on rel of shape {shape}", skew, rel.clone())
        grading.close(f"for rel of shape {shape}, the result", got, skew_local(rel, shape[-2]), 1e-6, ref="skew_local")
    return "equals skew_local for N = 1, 4, 6, 5, with 0, 1 and 2 leading dims"
