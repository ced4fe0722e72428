"""Chapter 3's exercise checkers: a head that sees one token of the future (3.1), masking after the softmax (3.2).

Notebook: notebooks/03_masking.ipynb
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...device import evaluating, model_device
from ...models.attention import causal_mask, recording
from ...models.config import ModelConfig
from ...models.decoder import Decoder
from ...models.positions import LearnedPositions
from ...models.probes import future_effect, gradient_dependency
from .. import grading

__all__ = ["check_3_1", "check_3_2"]


@grading.checker
def check_3_1(head, C: int | None = None) -> str:
    """Exercise 3.1: a head whose query t sees the keys j <= t + 1 (one token of the future).

    ``head``: your nn.Module class, built here as ``head(C, C)`` (n_embd, head_size; C = 16) like
    ``attention.Head``, or an instance with head_size = n_embd (checked on its device). ``forward(x)`` maps (B, T, C) to
    (B, T, head_size); if it computes its weights with ``attention.attention``, or hands them to
    ``attention.record``, the weights (B, T, T) it records inside ``attention.recording()`` are checked too.

    Checks: output t depends on the inputs up to t + 1 and on no later one (the gradient probe
    ``probes.gradient_dependency``, T = 10); the weights are zero beyond t + 1, positive at t + 1,
    rows sum to 1; and the perturbation probe ``probes.future_effect`` finds chapter 3's model with
    your head (learned positions, no blocks) not causal. Returns True or False.
    """
    C = C or (grading.width(head, 16) if isinstance(head, nn.Module) else 16)
    m = grading.instance(head, (C, C), f"({C}, {C})")
    dev, T = model_device(m), 10
    x = torch.randn(2, T, C, generator=torch.Generator().manual_seed(0)).to(dev)
    with evaluating(m), torch.no_grad():
        out = grading.tensor("the output", grading.call("your head", m, x))
    if out.dim() != 3 or tuple(out.shape[:2]) != (2, T):
        raise grading.Fail(f"the output has shape {tuple(out.shape)} for x of shape {(2, T, C)}, "
                           f"expected (2, {T}, head_size)")
    G = grading.call("the gradient probe on your head", gradient_dependency, m, T, C)     # (T, T): |d out_i / d x_j|
    seen = G > 1e-7 * G.max()
    allowed = torch.ones(T, T, dtype=torch.bool).tril(1)
    if (seen & ~allowed).any():
        i, j = [int(v) for v in (seen & ~allowed).nonzero()[0]]
        raise grading.Fail(f"output {i} depends on input {j} = {i} + {j - i}: "
                           f"the head sees more than one token of the future")
    missing = [i for i in range(T - 1) if not seen[i, i + 1]]
    if missing:
        raise grading.Fail(f"output {missing[0]} does not depend on input {missing[0] + 1}: "
                    f"the head does not see t + 1 "
                    f"(the mask is j <= i + 1, i.e. tril(1))")
    checked = "output t depends on inputs up to t + 1 only (gradient probe)"
    with evaluating(m), torch.no_grad(), recording() as recorded:
        grading.call("your head inside recording()", m, x)
    if recorded:
        w = grading.tensor("the weights", recorded[-1]).double()
        if tuple(w.shape) != (2, T, T):
            raise grading.Fail(f"the weights have shape {tuple(w.shape)}, expected {(2, T, T)}")
        beyond = w.triu(2).abs().max().item()
        if beyond > 1e-6:
            raise grading.Fail(f"weights beyond t + 1 are not zero (up to {beyond:.3f})")
        if w.diagonal(1, -2, -1).min() <= 0:
            raise grading.Fail("a query gives weight 0 to the key at t + 1")
        if (w.sum(-1) - 1).abs().max() > 1e-5:
            raise grading.Fail("rows of the weights do not sum to 1")
        checked += "; weights zero beyond t + 1, positive at t + 1, rows sum to 1"
    cfg = ModelConfig(n_embd=C, n_heads=1, n_layers=1, context=32)
    model = Decoder(cfg, lambda c: m, LearnedPositions).to(dev)
    past, _ = grading.call("chapter 3's model with your head", future_effect, model)
    if past <= 1e-5:
        raise grading.Fail(f"the perturbation probe finds the model causal: changing the tokens after t moves the "
                    f"outputs up to t by {past:.1e}")
    return checked + f"; the perturbation probe finds the model not causal (outputs up to t move by {past:.2f})"


@grading.checker
def check_3_2(renormalise: Callable) -> str:
    """Exercise 3.2: mask after the softmax, then renormalise.

    ``renormalise(weights)``: your function. It takes softmax weights computed *without* a mask,
    (..., T, T), zeroes the weights of the future (key j > query i) and divides every row by its sum.

    Checks, on random scores of shapes (1, 1), (8, 8) and (2, 3, 8, 8): the rows sum to 1, the future
    has weight 0, and the result equals the correct masked softmax, softmax of the scores with the future
    set to -inf. Returns True or False.
    """
    g = torch.Generator().manual_seed(0)
    for shape in ((1, 1), (8, 8), (2, 3, 8, 8)):
        T = shape[-1]
        scores = 2 * torch.randn(shape, generator=g, dtype=torch.float64)
        full = F.softmax(scores, dim=-1)                                    # (..., T, T), no mask
        right = F.softmax(scores.masked_fill(~causal_mask(T), float("-inf")), dim=-1)
        got = grading.tensor("the result", grading.call("your function", renormalise, full.clone()))
        if tuple(got.shape) == shape:
            rows = got.double().sum(-1).flatten()
            worst = int((rows - 1).abs().argmax())
            if (rows[worst] - 1).abs() > 1e-6:
                raise grading.Fail(f"rows do not sum to 1 for weights of shape {shape}: row {worst % T} sums to "
                            f"{rows[worst].item():.4f}; divide each row by its sum after zeroing")
            if got.double().triu(1).abs().max() > 1e-9:
                raise grading.Fail(f"not causal: weights above the diagonal are not zero (shape {shape})")
        grading.close(f"the result for weights of shape {shape}", got, right, 1e-6,
               ref="the softmax of the masked scores",
               known={"the weights zeroed without renormalising": full * causal_mask(T)})
    return "rows sum to 1, the future gets 0, equal to the masked softmax, for shapes (1, 1), (8, 8), (2, 3, 8, 8)"
