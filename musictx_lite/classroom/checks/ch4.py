"""Chapter 4's exercise checkers: multi-head attention in einsums (4.1), grouped-query attention (4.2).

Notebook: notebooks/04_multi_head.ipynb
"""
from __future__ import annotations

import copy
import math
from typing import Callable

import torch
import torch.nn as nn

from ...models.attention import MultiHeadAttention, attention, causal_mask
from ...models.config import ModelConfig
from ...models.registry import n_params
from .. import grading

__all__ = ["check_4_1", "check_4_2"]


def _mistakes(mha: MultiHeadAttention, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """What ``mha`` computes on ``x`` (B, T, C) with one part left out, as a student might: the outputs of known
    mistakes, for check_4_1's hint, from the package's own MultiHeadAttention."""
    q, k, v = mha.split_heads(x)                                            # (B, nh, T, hs) each
    T, hs = x.shape[1], q.shape[-1]
    unscaled, _ = attention(q * math.sqrt(hs), k, v, causal_mask(T, x.device))   # scores q k^T, not / sqrt(hs)
    unmasked = copy.deepcopy(mha)
    unmasked.causal = False
    return {"attention without the 1/sqrt(head size) scale": mha.merge_heads(unscaled),
            "attention without the causal mask": unmasked(x),
            "attention without W_O's bias": mha(x) - mha.proj.bias}


def _gqa_shapes(n_embd: int) -> dict[str, tuple[int, ...]]:
    """The state_dict shapes of the reference GroupedQueryAttention with n_groups = n_heads: q, kv, proj."""
    return {"q.weight": (n_embd, n_embd), "kv.weight": (2 * n_embd, n_embd), "proj.weight": (n_embd, n_embd),
            "proj.bias": (n_embd,)}


@grading.checker
def check_4_1(mha_einsum: Callable, n_embd: int = 32, n_heads: int = 4) -> str:
    """Exercise 4.1: multi-head attention in einsums.

    ``mha_einsum(mha, x)``: your function. ``mha`` is a ``MultiHeadAttention`` (its weights:
    ``mha.qkv.weight`` (3C, C), ``mha.proj.weight`` (C, C), ``mha.proj.bias`` (C,); ``mha.n_heads``),
    ``x`` is (B, T, C); it returns the causal multi-head attention output (B, T, C).

    Checks: equal to ``mha(x)`` (within 1e-5) for random weights and x of shapes (2, 12, 32),
    (2, 5, 32), (2, 1, 32), with 4 heads. Returns True or False.
    """
    torch.manual_seed(0)                                                    # inside fork_rng: yours is kept
    g = torch.Generator().manual_seed(0)
    for T in (12, 5, 1):
        mha = MultiHeadAttention(ModelConfig(n_embd=n_embd, n_heads=n_heads), fast=False).eval()
        x = torch.randn(2, T, n_embd, generator=g)                          # (B, T, C)
        with torch.no_grad():
            expected = mha(x)
            got = grading.call("your function", mha_einsum, mha, x.clone())
            known = _mistakes(mha, x)
        grading.close(f"the output for x of shape {(2, T, n_embd)}", got, expected, 1e-5,
               ref="MultiHeadAttention's forward", known=known)
    return f"equals MultiHeadAttention ({n_heads} heads, C = {n_embd}) for T = 12, 5, 1"


@grading.checker
def check_4_2(gqa: type, n_embd: int = 32, n_heads: int = 4) -> str:
    """Exercise 4.2: grouped-query attention, n_heads query heads sharing n_groups key/value heads.

    ``gqa``: your nn.Module class (not an instance), built here as ``gqa(cfg, n_groups)`` for every
    n_groups dividing n_heads, with ``cfg = ModelConfig(n_embd=32, n_heads=4)``. ``forward(x)`` maps
    (B, T, C) to (B, T, C), causal, like ``MultiHeadAttention``.

    Checks: the output shape; causality (changing x after t leaves the outputs up to t); the parameter
    count, n_groups heads save 2 (n_heads - n_groups) head_size C weights (K and V) against
    n_groups = n_heads; and, if your parameters are named like the reference ``GroupedQueryAttention``
    (``q``, ``kv``, ``proj``) or like ``MultiHeadAttention`` (``qkv``, ``proj``), that n_groups = n_heads
    with MultiHeadAttention's weights computes exactly MultiHeadAttention. Returns True or False.
    """
    if isinstance(gqa, nn.Module):
        raise grading.Fail(f"pass your class itself, check_4_2({type(gqa).__name__}), not an instance: the checker "
                    f"builds it for every n_groups")
    cfg = ModelConfig(n_embd=n_embd, n_heads=n_heads)
    hs, T, t = n_embd // n_heads, 9, 4
    groups = [d for d in range(n_heads, 0, -1) if n_heads % d == 0]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, T, n_embd, generator=g)                              # (B, T, C)
    x2 = x.clone()
    x2[:, t + 1:] = torch.randn(2, T - t - 1, n_embd, generator=g)
    counts, modules = {}, {}
    for ng in groups:
        m = grading.instance(gqa, (cfg, ng), f"(cfg, {ng})").eval()
        modules[ng], counts[ng] = m, n_params(m)
        with torch.no_grad():
            y = grading.tensor("the output", grading.call(f"your module with n_groups = {ng}", m, x))
            y2 = grading.tensor("the output", grading.call(f"your module with n_groups = {ng}", m, x2))
        if tuple(y.shape) != tuple(x.shape):
            raise grading.Fail(f"with n_groups = {ng} the output has shape {tuple(y.shape)}, expected {tuple(x.shape)}")
        moved = (y2 - y)[:, : t + 1].abs().max().item()
        if moved > 1e-5:
            raise grading.Fail(f"not causal with n_groups = {ng}: changing x after t = {t} moves the outputs up to t "
                        f"by {moved:.2e}")
    for ng in groups[1:]:
        saved, want = counts[n_heads] - counts[ng], 2 * (n_heads - ng) * hs * n_embd
        if saved not in (want, want + 2 * (n_heads - ng) * hs):                # K and V with or without biases
            raise grading.Fail(f"n_groups = {ng} has {counts[ng]:,} parameters, {saved:,} fewer than "
                        f"n_groups = {n_heads}; "
                        f"sharing should save the 2 (n_heads - n_groups) head_size C = {want:,} weights of the K and "
                        f"V heads it drops")
    m, mha = modules[n_heads], MultiHeadAttention(cfg, fast=False).eval()
    shapes = lambda module: {k: tuple(v.shape) for k, v in module.state_dict().items()}
    with torch.no_grad():
        if shapes(m) == _gqa_shapes(n_embd):
            # the K and V rows of kv: [all K | all V] as the reference, or [K | V] per group
            K, V = mha.qkv.weight[n_embd:2 * n_embd], mha.qkv.weight[2 * n_embd:]          # (C, C) each
            per_group = torch.cat([K.view(n_heads, hs, n_embd), V.view(n_heads, hs, n_embd)], 1).reshape(-1, n_embd)
            layouts = [torch.cat([K, V]), per_group]
        elif shapes(m) == shapes(mha):
            layouts = [None]
        else:
            return (f"output shape, causal, parameter counts for n_groups = {groups}; parameters not named like "
                    f"the reference's (q, kv, proj): equality with MultiHeadAttention not checked")
        for kv in layouts:
            if kv is None:
                m.load_state_dict(mha.state_dict())
            else:
                m.load_state_dict({"q.weight": mha.qkv.weight[:n_embd], "kv.weight": kv,
                                   "proj.weight": mha.proj.weight, "proj.bias": mha.proj.bias})
            got = grading.call(f"your module with n_groups = {n_heads}", m, x)
            if torch.allclose(got, mha(x), atol=1e-5):
                break
        grading.close(f"with n_groups = n_heads = {n_heads} and MultiHeadAttention's weights, the output", got, mha(x),
               1e-5, ref="MultiHeadAttention")
    return (f"output shape, causal, parameter counts for n_groups = {groups}; n_groups = n_heads equals "
            f"MultiHeadAttention")
