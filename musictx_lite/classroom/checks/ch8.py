"""Chapter 8's exercise checkers: the skew by hand, masked and unmasked (exercise 8.1).

Notebook: notebooks/08_skew.ipynb
"""
from __future__ import annotations

from typing import Callable

import torch

from ...models.relative import distances, relative_logits_direct
from .. import grading

__all__ = ["check_8_1"]


@grading.checker
def check_8_1(skew: Callable, skew_unmasked: Callable | None = None) -> str:
    """Exercise 8.1: the skew by hand, and (optional) its unmasked version.

    ``skew(rel)``: your function. ``rel`` (L, L) = Q E^T, column r for distance r - (L - 1); it returns
    S (L, L) with S[i, j] = rel[i, L - 1 + j - i] for j <= i (entries above the diagonal may be anything).
    ``skew_unmasked(rel)``, if given: ``rel`` (L, 2L - 1), distances -(L - 1) .. L - 1; it returns
    (L, L) with out[i, j] = rel[i, L - 1 + j - i] for every i, j.

    Checks: ``skew`` equals ``relative.relative_logits_direct`` on random q, E on and below the diagonal,
    for L = 1, 2, 5, 8; ``skew_unmasked`` equals the direct gather for L = 1, 3, 5. Returns True or False.
    """
    g, d = torch.Generator().manual_seed(0), 4
    for L in (1, 2, 5, 8):
        q, E = torch.randn(L, d, generator=g), torch.randn(L, d, generator=g)
        direct = relative_logits_direct(q[None], E[None])[0]                 # (L, L), 0 above the diagonal
        got = grading.call(f"your skew on a ({L}, {L}) matrix", skew, (q @ E.T).clone())
        grading.close(f"for L = {L}, your S", got, direct, 1e-5, ref="relative_logits_direct on the entries j <= i",
                      mask=torch.ones(L, L, dtype=torch.bool).tril())
    checked = "S[i, j] = rel[i, L - 1 + j - i] for j <= i, L = 1, 2, 5, 8"
    if skew_unmasked is not None:
        for L in (1, 3, 5):
            rel = torch.randn(L, 2 * L - 1, generator=g)                     # (L, 2L - 1)
            want = rel.gather(1, distances(L) + L - 1)                        # (L, L)
            got = grading.call(f"your skew_unmasked on a ({L}, {2 * L - 1}) matrix", skew_unmasked, rel.clone())
            grading.close(f"for L = {L}, the unmasked skew", got, want, 1e-6, ref="rel[i, L - 1 + j - i]")
        checked += "; unmasked: every entry, L = 1, 3, 5"
    return checked
