"""Probes of causality: does output t depend on anything after t?

Notebook: notebooks/03_masking.ipynb

Two ways to ask. The perturbation probe changes every token after t and
checks that the outputs up to t do not move. The gradient probe measures
|d out_i / d x_j|, the norm of a (C', C) Jacobian block, for every pair: a
causal layer has exact zeros above the diagonal. tests/model/test_probes.py runs
both over every next-token model in ``models.MODELS``, so a model that a
later chapter adds is checked without anyone remembering to.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..device import evaluating, model_device, to_model
from ..io.tokens import N_SPECIAL, VOCAB_SIZE


@torch.no_grad()
def future_effect(model: nn.Module, T: int = 24, t: int = 10, seed: int = 0) -> tuple[float, float]:
    """Change every token after ``t``; return how far the outputs move at positions <= t and after t.

    A causal model gives 0 for the first number (up to rounding); the second is
    positive for any model that reads its input.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(N_SPECIAL, VOCAB_SIZE, (2, T), generator=g)             # (B, T) pitch tokens
    x2 = x.clone()
    x2[:, t + 1:] = torch.randint(N_SPECIAL, VOCAB_SIZE, (2, T - t - 1), generator=g)
    with evaluating(model):
        y, y2 = model(to_model(model, x)).float(), model(to_model(model, x2)).float()   # (B, T, V)
    past = (y[:, : t + 1] - y2[:, : t + 1]).abs().max().item()
    future = (y[:, t + 1:] - y2[:, t + 1:]).abs().max().item()
    return past, future


def is_causal(model: nn.Module, T: int = 24, t: int = 10, atol: float = 1e-5) -> bool:
    """True if changing the tokens after ``t`` leaves every output up to ``t`` unchanged."""
    return future_effect(model, T, t)[0] <= atol


def gradient_dependency(layer: nn.Module, T: int = 12, n_embd: int | None = None, seed: int = 0) -> torch.Tensor:
    """(T, T) matrix G with G[i, j] = |d out_i / d x_j| for a layer mapping (1, T, C) to (1, T, C').

    d out_i / d x_j is a (C', C) block of the Jacobian, and G[i, j] is its Frobenius norm: one
    backward pass per output entry out[i, c], so G[i, j] = 0 exactly when no entry of out_i
    depends on x_j. Computed on the layer's device, returned on the CPU.
    """
    C = n_embd or next(p for p in layer.parameters() if p.dim() == 2).shape[1]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, T, C, generator=g).to(model_device(layer)).requires_grad_()   # (1, T, C)
    G = torch.zeros(T, T)
    with evaluating(layer):
        out = layer(x)                                                        # (1, T, C')
        for i in range(T):
            rows = [torch.autograd.grad(out[0, i, c], x, retain_graph=True)[0][0]
                    for c in range(out.shape[-1])]                            # C' x (T, C)
            J = torch.stack(rows)                                             # (C', T, C): d out_ic / d x_jk
            G[i] = torch.linalg.vector_norm(J, dim=(0, 2)).cpu()              # |d out_i / d x_j| for every j
    return G
