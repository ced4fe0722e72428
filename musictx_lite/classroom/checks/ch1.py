"""Chapter 1's exercise checkers: additive attention over an RNN's hidden states (exercise 1.1).

Notebook: notebooks/01_attention_in_rnns.ipynb
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
import torch.nn as nn

from ...device import evaluating, model_device
from .. import grading

__all__ = ["check_1_1"]

STORED_C, STORED_D = 16, 32             # the reference's values are stored for AdditiveAttention(16), d = 32


def _hidden_states(C: int, g: torch.Generator) -> dict[int, torch.Tensor]:
    """check_1_1's random hidden states h (2, T, C) for T = 1 and 9, drawn from ``g`` in this order."""
    return {T: torch.randn(2, T, C, generator=g) for T in (1, 9)}


def _seeded_weights(C: int = STORED_C, d: int = STORED_D) -> dict[str, torch.Tensor]:
    """The weights check_1_1 puts in a module named like the reference's, in place of the student's: random, by
    name, each entry with standard deviation 1 / sqrt(its fan-in)."""
    g = torch.Generator().manual_seed(1)
    shapes = {"W1.weight": (d, C), "W2.weight": (d, C), "v.weight": (1, d)}
    return {k: torch.randn(s, generator=g) / math.sqrt(s[1]) for k, s in shapes.items()}


@contextlib.contextmanager
def _loaded(module: nn.Module, weights: dict[str, torch.Tensor]):
    """``module`` with ``weights`` loaded (on its device); its own weights restored afterwards."""
    saved = {k: v.detach().clone() for k, v in module.state_dict().items()}
    grading.call("loading the seeded weights into your module", module.load_state_dict,
                 {k: v.to(saved[k].device, saved[k].dtype) for k, v in weights.items()})
    try:
        yield module
    finally:
        module.load_state_dict(saved)


@grading.checker
def check_1_1(attention, C: int | None = None) -> str:
    """Exercise 1.1: additive attention, e_ij = v^T tanh(h_i W_1 + h_j W_2), causal.

    ``attention``: your nn.Module class, built here as ``attention(C)`` (C = 16) on the CPU, or an
    instance (checked on its device; C is its first Linear's input width unless you pass C=...).
    ``forward(h)`` takes hidden states (B, T, C) and returns ``(contexts, weights)``: contexts
    (B, T, C), each the weighted sum of h, and weights (B, T, T).

    Checks, for T = 1 and 9: the shapes, weights >= 0, rows sum to 1, zero above the diagonal,
    contexts = weights @ h, and that changing h after t leaves everything up to t as it was. If your
    parameters are named and shaped like the reference's for C = 16 (``W1``, ``W2``: nn.Linear(16, 32,
    bias=False), ``v``: nn.Linear(32, 1, bias=False)), also that with seeded weights in place of yours
    (put back afterwards) your module's weights and contexts equal those of the book's reference
    AdditiveAttention with the same weights (stored values). Returns True or False.
    """
    C = C or (grading.width(attention, 16) if isinstance(attention, nn.Module) else 16)
    m = grading.instance(attention, (C,), f"({C})")
    dev = model_device(m)
    g = torch.Generator().manual_seed(0)

    def run(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = grading.call("your module", m, h.to(dev))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise grading.Fail(f"your module should return (contexts, weights), got {type(out).__name__}")
        return grading.tensor("the contexts", out[0]).double(), grading.tensor("the weights", out[1]).double()

    with evaluating(m), torch.no_grad():
        for T, h in _hidden_states(C, g).items():                          # h: (B, T, C)
            ctx, w = run(h)
            for what, x, shape in (("the contexts", ctx, (2, T, C)), ("the weights", w, (2, T, T))):
                if tuple(x.shape) != shape:
                    raise grading.Fail(f"{what} have shape {tuple(x.shape)} for h of shape {(2, T, C)}, "
                                       f"expected {shape}")
            if w.min() < -1e-6:
                raise grading.Fail(f"weights are negative: min {w.min().item():.3g} (T = {T})")
            rows = w.sum(-1)                                                # (B, T)
            if (rows - 1).abs().max() > 1e-5:
                b, i = np.unravel_index(int((rows - 1).abs().argmax()), tuple(rows.shape))
                raise grading.Fail(f"rows do not sum to 1: row {i} sums to {rows[b, i].item():.4f} (T = {T}); "
                            f"take the softmax over the keys, the last axis")
            future = w.triu(1).abs()
            if future.max() > 1e-6:
                b, i, j = np.unravel_index(int(future.argmax()), tuple(future.shape))
                raise grading.Fail(f"not causal: query {i} gives the later key {j} weight {w[b, i, j].item():.3f} "
                                   f"(T = {T})")
            grading.close(f"the context tensor (T = {T})", ctx, w @ h.double(), 1e-5, ref="weights @ h")
        t = 4                                                               # change h after t
        h2 = h.clone()
        h2[:, t + 1:] = torch.randn(2, T - t - 1, C, generator=g)
        ctx2, w2 = run(h2)
        moved = max((ctx2 - ctx)[:, : t + 1].abs().max().item(), (w2 - w)[:, : t + 1].abs().max().item())
        if moved > 1e-5:
            raise grading.Fail(f"not causal: changing h after t = {t} moves the contexts or weights up to t by "
                               f"{moved:.2e}")
        note = "parameters not named like the reference's (W1, W2, v): invariants only"
        shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
        seeded = _seeded_weights()
        if set(shapes) == set(seeded):
            note = (f"W1, W2, v not shaped like the reference's for C = {STORED_C}, d = {STORED_D}, whose values "
                    f"are stored: invariants only")
            if C == STORED_C and shapes == {k: tuple(v.shape) for k, v in seeded.items()}:
                ref = "the reference AdditiveAttention with the same seeded weights"
                ref_w = torch.tensor(grading.expected(1)["weights"], dtype=torch.float64)      # (2, 9, 9)
                with _loaded(m, seeded):
                    ctx, w = run(h)                                         # h: (2, 9, C)
                grading.close("the weight tensor", w, ref_w, 1e-5, ref=ref)
                grading.close("the context tensor", ctx, ref_w @ h.double(), 1e-5, ref=ref)
                note = "equals the reference AdditiveAttention with the same seeded weights"
    return (f"shapes, weights >= 0, rows sum to 1, causal, contexts = weights @ h, for T = 1 and 9; "
            f"{note}")
