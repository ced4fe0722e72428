"""Chapter 6's exercise checkers: a period-4 sinusoid pair (6.2), a voice embedding (6.3).

Notebook: notebooks/06_positions.ipynb
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn as nn

from ...device import evaluating, model_device
from ...models.config import ModelConfig
from ...models.positions import sinusoids, voice_accuracy
from ...models.registry import n_params
from .. import grading

__all__ = ["check_6_2", "check_6_3"]


@grading.checker
def check_6_2(table: Callable, L: int = 128, C: int = 64) -> str:
    """Exercise 6.2: a sinusoid table whose first pair turns by pi/2 per token (period 4: one step).

    ``table``: your function ``table(L, C) -> (L, C)`` tensor, rows = positions 0 .. L - 1, built like
    ``positions.sinusoids`` but with a first (sin, cos) pair at pi/2 radians per token.

    Checks: the shape; every entry in [-1, 1]; some pair of columns is (sin, cos) of pi t / 2 (in
    either order); the voice, (t - 1) mod 4, can be read off the rows (``voice_accuracy`` > 0.9,
    against about 0.25 for the standard table); the rest of the table still tells positions apart.
    Returns True or False.
    """
    P = grading.tensor("your table", grading.call(f"table({L}, {C})", table, L, C)).detach().double().cpu()
    if tuple(P.shape) != (L, C):
        raise grading.Fail(f"table({L}, {C}) has shape {tuple(P.shape)}, expected {(L, C)}: one row per position")
    if P.abs().max() > 1 + 1e-6:
        raise grading.Fail(f"entries up to {P.abs().max().item():.3g}: sines and cosines stay within [-1, 1]")
    t = torch.arange(L, dtype=torch.double)
    quarter = [torch.sin(t * math.pi / 2), torch.cos(t * math.pi / 2)]
    found = [[bool(torch.allclose(P[:, c], w, atol=1e-4)) for c in range(C)] for w in quarter]   # float32 sin
    if not (any(found[0]) and any(found[1])):
        standard = sinusoids(L, C).double()
        why = (" (it is the standard table: its fastest pair turns by 1 radian per token, period 2 pi)"
               if torch.allclose(P, standard, atol=1e-6) else "")
        raise grading.Fail(f"no pair of columns is sin(pi t / 2), cos(pi t / 2){why}")
    acc, base = voice_accuracy(P), voice_accuracy(sinusoids(L, C))
    if acc <= 0.9:
        raise grading.Fail(f"the voice is read off your rows with accuracy {acc:.2f}, "
                           f"expected > 0.9 (standard: {base:.2f})")
    distinct = torch.cdist(P, P)[~torch.eye(L, dtype=torch.bool)].min().item()
    if distinct < 1e-6:
        raise grading.Fail("two positions get the same row: keep the slower pairs, which tell positions apart")
    return f"shape ({L}, {C}); a pi/2 pair; voice accuracy {acc:.2f} (standard table {base:.2f}); rows distinct"


@grading.checker
def check_6_3(positions, n_embd: int | None = None, context: int = 32) -> str:
    """Exercise 6.3: a voice embedding, x + V[(t - 1) mod 4], one of four learned vectors per position.

    ``positions``: your nn.Module class, built here as ``positions(cfg)`` with
    ``cfg = ModelConfig(n_embd=16, context=32)`` like ``positions.LearnedPositions``, or an
    instance (checked on its device, its parameters restored afterwards). ``forward(x)`` maps the
    token embeddings (B, T, C) to (B, T, C).

    Checks, with random parameters: 4 C parameters; the output minus the input is the same for every
    input and batch row; it is periodic with period 4 in t and the four vectors differ; and a
    shorter input (T = 7) gets the same first vectors. Returns True or False.
    """
    C = n_embd or (grading.width(positions, 16) if isinstance(positions, nn.Module) else 16)
    cfg = ModelConfig(n_embd=C, n_heads=1, context=context)
    m = grading.instance(positions, (cfg,), f"(ModelConfig(n_embd={C}, context={context}))")
    if n_params(m) != 4 * C:
        extra = " (one per position: that is learned positions)" if n_params(m) == context * C else ""
        raise grading.Fail(f"your module has {n_params(m):,} parameters{extra}; four learned vectors of C = {C} "
                    f"cost {4 * C}")
    dev, g, L = model_device(m), torch.Generator().manual_seed(0), context
    added = lambda x: grading.tensor("the output", grading.call("your module", m, x.to(dev))).double() - x.double()
    with grading.randomised(m, seed=1), evaluating(m), torch.no_grad():
        x, x2 = torch.randn(2, L, C, generator=g), torch.randn(2, L, C, generator=g)
        a, a2 = added(x), added(x2)                                         # (B, L, C): what was added
        if tuple(a.shape) != (2, L, C):
            raise grading.Fail(f"the output has shape {tuple(a.shape)}, expected {(2, L, C)}")
        change = max((a2 - a).abs().max().item(), (a[1] - a[0]).abs().max().item())
        if change > 1e-5:
            raise grading.Fail(f"output minus input depends on the input (by up to {change:.2e}): the module should "
                        f"add one vector to each token")
        P = a[0]                                                            # (L, C): the vector at each t
        gap = (P[4:] - P[:-4]).abs().max(-1).values
        if gap.max() > 1e-5:
            t = int((gap > 1e-5).nonzero()[0])
            raise grading.Fail(f"not periodic with period 4: positions {t} and {t + 4} (the same voice) get different "
                        f"vectors (max difference {gap[t].item():.3g})")
        for i in range(4):
            for j in range(i + 1, 4):
                if (P[i] - P[j]).abs().max() < 1e-6:
                    raise grading.Fail(f"positions {i} and {j} get the same vector: the four voices need four vectors")
        grading.close("the vectors added for T = 7", added(x[:, :7]), a[:, :7], 1e-5, ref="the first 7 for T = 32")
    return f"{4 * C} parameters (learned positions: {L * C}); adds one vector per position, period 4, four distinct"
