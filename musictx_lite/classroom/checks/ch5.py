"""Chapter 5's exercise checkers: RMSNorm (exercise 5.1).

Notebook: notebooks/05_blocks.ipynb
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...device import evaluating, model_device
from ...models.registry import n_params
from .. import grading

__all__ = ["check_5_1"]

STORED_C = 16                          # the reference's values are stored for this width, the default


def _inputs(C: int, g: torch.Generator) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """check_5_1's random tokens, drawn from ``g`` in this order: x (2, 5, C) for the shift, then x of shapes
    (2, 5, C), (3, C), (2, 2, 3, C) to compare with the reference."""
    shift = 3 * torch.randn(2, 5, C, generator=g) + 1
    return shift, [3 * torch.randn(shape, generator=g) + 1 for shape in ((2, 5, C), (3, C), (2, 2, 3, C))]


@grading.checker
def check_5_1(norm, C: int | None = None) -> str:
    """Exercise 5.1: RMSNorm, x / sqrt(mean(x^2) + eps) * gamma over the last axis.

    ``norm``: your nn.Module class, built here as ``norm(C)`` (C = 16) on the CPU, or an instance
    (checked on its device, C read from its gamma, its parameters restored afterwards). It maps
    (..., C) to (..., C) and has one learned vector gamma of C values (no beta).

    Checks: C parameters; with random gamma, the output changes when 10 is added to every feature of a
    token (LayerNorm's would not); on zero-mean tokens it equals LayerNorm with the same gamma; and, for
    C = 16, it equals the book's reference RMSNorm (within 1e-4; its per-token scales are stored) on inputs of
    shapes (2, 5, C), (3, C), (2, 2, 3, C). Returns True or False.
    """
    C = C or (grading.width(norm, 16) if isinstance(norm, nn.Module) else 16)
    m = grading.instance(norm, (C,), f"({C})")
    params = list(m.parameters())
    if n_params(m) != C or len(params) != 1:
        extra = " (gamma and beta: that is LayerNorm's)" if n_params(m) == 2 * C else ""
        raise grading.Fail(f"your module has {n_params(m)} parameters in {len(params)} tensors{extra}; RMSNorm has "
                    f"C = {C}, one gamma")
    dev, g = model_device(m), torch.Generator().manual_seed(0)
    run = lambda x: grading.tensor("the output", grading.call("your module", m, x.to(dev))).double()
    with grading.randomised(m, seed=1, mean=1.0), evaluating(m), torch.no_grad():
        gamma = params[0].detach().cpu().reshape(C).double()
        x, xs = _inputs(C, g)                                              # x: (B, T, C)
        shift = (run(x + 10.0) - run(x)).abs().max().item()
        if shift < 1e-2:
            raise grading.Fail(f"the output does not change when 10 is added to every feature "
                        f"(max change {shift:.1e}): "
                        f"it subtracts the mean, as LayerNorm does")
        # the reference's 1 / sqrt(mean(x^2) + eps) of every token, as it computed them on these inputs
        scales = grading.expected(5)["scales"] if C == STORED_C else None
        for x, scale in zip(xs, scales or []):
            r = torch.tensor(scale, dtype=torch.float64)[..., None]       # (..., 1)
            xd = x.double()
            known = {"LayerNorm": F.layer_norm(xd, (C,), gamma, None, 1e-5),
                     "x / sqrt(mean(x^2)) without gamma": xd * r,
                     "x / sqrt(sum(x^2)): the sum, not the mean": xd * r / math.sqrt(C) * gamma,
                     "x / mean(x^2): no square root": xd * r ** 2 * gamma}
            grading.close(f"the output for x of shape {tuple(x.shape)}", run(x), xd * r * gamma, 1e-4,
                          ref="the reference RMSNorm", known=known)
        xc = xs[-1] - xs[-1].mean(-1, keepdim=True)                         # zero-mean tokens
        grading.close("on zero-mean tokens, the output", run(xc),
                      F.layer_norm(xc.double(), (C,), gamma, None, 1e-5), 1e-4, ref="LayerNorm with the same gamma")
    reference = ("equals the reference RMSNorm on 3 shapes, random gamma" if scales is not None else
                 f"the reference's values are stored for C = {STORED_C} only: not compared for C = {C}")
    return f"{C} parameters; changes under a shift; equals LayerNorm on zero-mean tokens; {reference}"
