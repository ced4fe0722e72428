"""Chapter 4 exercises: multi-head attention.

Notebook: notebooks/04_multi_head.ipynb
"""
from __future__ import annotations

import math
import textwrap

import torch
import torch.nn as nn
import torch.nn.functional as F

from musictx_lite.io.data import Splits, load_data
from musictx_lite.models.attention import MultiHeadAttention, causal_mask
from musictx_lite.models.config import ModelConfig
from musictx_lite.models.tasks import evaluate_nll

__all__ = ["GroupedQueryAttention", "mha_einsum", "exercise_4_1", "exercise_4_2", "exercise_4_3"]


def mha_einsum(mha: MultiHeadAttention, x: torch.Tensor, scale: bool = True, mask: bool = True,
               bias: bool = True) -> torch.Tensor:
    """Multi-head attention in einsums, from the weights of ``mha``: (B, T, C) -> (B, T, C).

    No reshapes and no transposes: the head index is just one more letter.
    b batch, t/i/j positions, n head, h head feature, c/o model features. ``scale``, ``mask`` and
    ``bias`` switch off a part, as a student might (``check_4_1``'s hints name such mistakes).
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
