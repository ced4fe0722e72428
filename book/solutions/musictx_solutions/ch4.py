"""Chapter 4 exercises: multi-head attention.

Notebook: notebooks/04_multi_head.ipynb
"""
from __future__ import annotations

import math
import textwrap
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...io.data import Splits, load_data
from ...models.attention import MultiHeadAttention, causal_mask
from ...models.config import ModelConfig
from ...models.registry import n_params
from ...models.tasks import evaluate_nll
from . import grading

__all__ = ["GroupedQueryAttention", "mha_einsum", "exercise_4_1", "exercise_4_2", "exercise_4_3", "check_4_1",
           "check_4_2"]


def mha_einsum(mha: MultiHeadAttention, x: torch.Tensor, scale: bool = True, mask: bool = True,
               bias: bool = True) -> torch.Tensor:
    """Multi-head attention in einsums, from the weights of ``mha``: (B, T, C) -> (B, T, C).

    No reshapes and no transposes: the head index is just one more letter.
    b batch, t/i/j positions, n head, h head feature, c/o model features. ``scale``, ``mask`` and
    ``bias`` switch off a part, as a student might (checkers.check_4_1 names such mistakes).
    """
    nh, (T, C) = mha.n_heads, x.shape[-2:]
    hs = C // nh
    W = mha.qkv.weight.view(3, nh, hs, C)                                   # [W_Q | W_K | W_V]^T, split by head
    q, k, v = torch.einsum("btc,snhc->sbnth", x, W)                        # (B, nh, T, hs) each
    scores = torch.einsum("bnih,bnjh->bnij", q, k) / (math.sqrt(hs) if scale else 1.0)   # (B, nh, T, T)
    if mask:
        scores = scores.masked_fill(~causal_mask(T, device=x.device), float("-inf"))
    y = torch.einsum("bnij,bnjh->bnih", scores.softmax(-1), v)              # (B, nh, T, hs)
    W_O = mha.proj.weight.view(C, nh, hs)                                   # (C_out, nh, hs)
    out = torch.einsum("bnth,onh->bto", y, W_O)                             # (B, T, C): concat + W_O in one go
    return out + mha.proj.bias if bias else out


@torch.no_grad()
def exercise_4_1(n_embd: int = 32, n_heads: int = 4, T: int = 12, seed: int = 0) -> float:
    """Multi-head attention in einsums (``mha_einsum``) against ``MultiHeadAttention``; returns the max difference."""
    torch.manual_seed(seed)
    cfg = ModelConfig(n_embd=n_embd, n_heads=n_heads)
    mha = MultiHeadAttention(cfg, fast=False).eval()
    x = torch.randn(2, T, n_embd)                                           # (B, T, C)
    out = mha_einsum(mha, x)
    diff = (out - mha(x)).abs().max().item()
    assert diff < 1e-5, diff
    print(f"einsum multi-head attention = MultiHeadAttention: max |difference| = {diff:.1e}")
    return diff


class GroupedQueryAttention(nn.Module):
    """Causal attention whose ``n_heads`` query heads share ``n_groups`` key/value heads.

    ``n_groups == n_heads`` is ordinary multi-head attention, ``n_groups == 1``
    multi-query attention (Shazeer 2019; GQA: Ainslie et al. 2023).
    """

    def __init__(self, cfg: ModelConfig, n_groups: int):
        super().__init__()
        if cfg.n_heads % n_groups:
            raise ValueError(f"n_heads={cfg.n_heads} is not divisible by n_groups={n_groups}")
        self.n_heads, self.n_groups, self.hs = cfg.n_heads, n_groups, cfg.n_embd // cfg.n_heads
        self.q = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        self.kv = nn.Linear(cfg.n_embd, 2 * n_groups * self.hs, bias=False)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.n_heads, self.hs).transpose(1, 2)                        # (B, nh, T, hs)
        k, v = (t.view(B, T, self.n_groups, self.hs).transpose(1, 2)
                for t in self.kv(x).split(self.n_groups * self.hs, dim=-1))                    # (B, ng, T, hs)
        rep = self.n_heads // self.n_groups
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)                # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)                            # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))                                   # (B, T, C)


@torch.no_grad()
def exercise_4_2(n_embd: int = 128, n_heads: int = 8, T: int = 256, seed: int = 0) -> dict[int, dict]:
    """Fewer key/value heads: parameters and the keys and values a generator must keep per token.

    Checks first that ``n_groups == n_heads`` computes exactly MultiHeadAttention.
    """
    torch.manual_seed(seed)
    cfg = ModelConfig(n_embd=n_embd, n_heads=n_heads)
    mha = MultiHeadAttention(cfg).eval()
    gqa = GroupedQueryAttention(cfg, n_heads)
    gqa.q.weight.copy_(mha.qkv.weight[:n_embd])
    gqa.kv.weight.copy_(mha.qkv.weight[n_embd:])
    gqa.proj.load_state_dict(mha.proj.state_dict())
    x = torch.randn(2, T, n_embd)
    assert torch.allclose(gqa(x), mha(x), atol=1e-5)
    print(f"n_groups = n_heads = {n_heads} equals MultiHeadAttention\n")
    print(f"C = {n_embd}, {n_heads} query heads of size {n_embd // n_heads}")
    print(f" groups   parameters   K,V floats per token   K,V floats for T = {T}")
    out = {}
    for g in [d for d in range(n_heads, 0, -1) if n_heads % d == 0]:
        m = GroupedQueryAttention(cfg, g)
        kv = 2 * g * (n_embd // n_heads)
        out[g] = {"params": sum(p.numel() for p in m.parameters()), "kv_per_token": kv}
        print(f"{g:7d} {out[g]['params']:12,d} {kv:22d} {kv * T:21,d}")
    print("\nEvery query head still scores all T keys, so the (nh, T, T) weights and their cost\n"
          "do not shrink; what shrinks is K and V, which a generator caches for every past token.")
    return out


@torch.no_grad()
def exercise_4_3(model: nn.Module, data: Splits | None = None, pieces: int | None = None,
                 gain: float | None = None) -> dict[int, float]:
    """Knock out one head at a time (zero its slice before W_O) and measure the valid NLL it costs.

    ``gain``, if given, is what the heads gained over one head (both with W_O) on the whole validation split;
    the costs are measured on the same pieces (``pieces`` None: all of them), so that the two compare.
    """
    data = data or load_data()
    attn = model.blocks[0]                                                  # the bare attention layer
    nh, C = attn.n_heads, attn.proj.in_features
    hs = C // nh
    valid = data.valid if pieces is None else data.valid[:pieces]
    base = evaluate_nll(model, valid)
    out = {}
    for h in range(nh):
        def knock_out(module, args, h=h):
            y = args[0].clone()
            y[..., h * hs:(h + 1) * hs] = 0                                  # head h contributes nothing
            return (y,)
        handle = attn.proj.register_forward_pre_hook(knock_out)
        try:
            out[h] = evaluate_nll(model, valid) - base
        finally:
            handle.remove()
    print(f"valid NLL on {len(valid)} chorales: {base:.3f} nats/token with all {nh} heads")
    for h, d in out.items():
        print(f"  without head {h + 1}: {d:+.3f}")
    cheapest = min(out.values())
    if gain is not None:
        print(f"the cheapest head costs {cheapest:+.3f}; {nh} heads gained {gain:+.3f} over one")
    if gain is not None and cheapest > gain:
        text = (f"Removing any one head costs more than the whole gain of {nh} heads over one: this trained "
                "model depends on every head. That is not what a head is worth. A model trained with "
                f"{nh} heads has learned to rely on all of them, and W_O reads their outputs together, so "
                "zeroing one leaves it with an input it never saw. What a head is worth is what a model "
                f"trained without it would lose: {nh} heads against {nh - 1}, which neither number measures "
                f"({nh} heads against one is the gain). Michel et al. (2019) "
                "removed many heads from much larger trained models at little cost; in this small one, "
                "with heads of {hs} features, no head can be removed so.".replace("{hs}", str(hs)))
    elif cheapest < 0.01:
        text = ("At least one head costs almost nothing when removed: this trained model does not depend on "
                "it, as Michel et al. (2019) found for many heads of larger models.")
    else:
        text = ("Every head costs something when removed: this trained model depends on each. Removal "
                "measures that dependence, not what a model trained without the head would lose.")
    print(textwrap.fill(text, 88))
    return out


# ----------------------------------------------------------------------------- checkers

_reference_mha_einsum = mha_einsum     # check_4_1's argument is named mha_einsum


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
            known = {"attention without the 1/sqrt(head size) scale": _reference_mha_einsum(mha, x, scale=False),
                     "attention without the causal mask": _reference_mha_einsum(mha, x, mask=False),
                     "attention without W_O's bias": _reference_mha_einsum(mha, x, bias=False)}
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
        if shapes(m) == shapes(GroupedQueryAttention(cfg, n_heads)):
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
