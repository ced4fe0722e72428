"""Chapter 9's exercise checkers: keys per query, how far back n local layers reach, the square local skew
(exercises 9.1, 9.2 and 9.3).

Notebook: notebooks/09_local_attention.ipynb
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn

from ...models.config import ModelConfig
from ...models.local import LocalAttention, band_mask, skew_local
from ...models.probes import gradient_dependency
from .. import grading

__all__ = ["check_9_1", "check_9_2", "check_9_3"]


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


def _depends(T: int, N: int, n_layers: int) -> torch.Tensor:
    """(T, T) boolean, True where output i of a stack of ``n_layers`` random ``LocalAttention`` layers with
    blocks of N has a nonzero gradient with respect to input j: measured by ``probes.gradient_dependency``,
    the probe of chapter 3 (a masked weight is exactly 0, so a zero gradient is exact)."""
    torch.manual_seed(0)                                        # the checker's random state is forked
    cfg = ModelConfig(n_embd=8, n_heads=2, context=T)
    stack = nn.Sequential(*[LocalAttention(cfg, N=N) for _ in range(n_layers)])
    with torch.enable_grad():                                   # even if called under torch.no_grad()
        return gradient_dependency(stack, T=T) > 0


@grading.checker
def check_9_2(reach_fn: Callable) -> str:
    """Exercise 9.2: how far back information travels through n local layers.

    ``reach_fn(T, N, n_layers)``: your function, a (T, T) boolean (or 0/1) matrix, True where output i
    of n stacked local layers with blocks of N depends on input j.

    Checks: equal to where the gradient of a stack of n random ``local.LocalAttention`` layers is nonzero
    (``probes.gradient_dependency``) for (T, N, n) = (12, 3, 1), (24, 4, 2), (24, 4, 3), (10, 2, 5).
    Returns True or False.
    """
    for T, N, n in ((12, 3, 1), (24, 4, 2), (24, 4, 3), (10, 2, 5)):
        shown = f"reach({T}, {N}, {n})"
        got = grading.tensor(f"{shown}'s result", grading.call(shown, reach_fn, T, N, n)) != 0
        if tuple(got.shape) != (T, T):
            raise grading.Fail(f"{shown} has shape {tuple(got.shape)}, expected {(T, T)}")
        want = _depends(T, N, n)                                               # (T, T) bool
        if not torch.equal(got, want):
            i, j = [int(v) for v in (got != want).nonzero()[0]]
            raise grading.Fail(f"{shown}: output {i} {'depends' if want[i, j] else 'does not depend'} on input {j}, "
                               f"yours says the opposite ({int((got != want).sum())} of {T * T} entries differ)")
    return "equal to the gradient probe of n stacked local layers for 4 (T, N, n_layers), up to 5 layers"


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
        grading.close(f"for rel of shape {shape}, the result", got, skew_local(rel, shape[-2]), 1e-6,
                      ref="skew_local")
    return "equals skew_local for N = 1, 4, 6, 5, with 0, 1 and 2 leading dims"
