"""Self-attention: the attention core and one head (chapter 2), the causal mask
and a causal head (chapter 3), and multi-head attention as a loop of heads and as
one batched module, with the fused kernel (chapter 4).

Notebooks: notebooks/02_self_attention.ipynb, 03_masking.ipynb, 04_multi_head.ipynb

Row vectors throughout: X is (T, C), Q = X W_Q, K = X W_K, V = X W_V, and
attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V.

Every mixer returns one tensor. To look at the weights, run the model inside
``recording()``: each attention layer that runs then computes its weights and
hands them over, in the order the layers ran.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..device import evaluating, to_model
from .config import ModelConfig


def causal_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) boolean, True where query i may attend to key j, i.e. j <= i."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


_RECORDINGS: list[list[torch.Tensor]] = []         # the open ``recording()`` lists, the innermost last


@contextlib.contextmanager
def recording():
    """``with recording() as weights: model(x)`` leaves in ``weights`` the attention weights of every layer
    that ran, in order: (B, T, Tk) for one head, (B, nh, T, Tk) for several. Outside, no layer computes
    weights it does not need (and the fused kernels may run)."""
    weights: list[torch.Tensor] = []
    _RECORDINGS.append(weights)
    try:
        yield weights
    finally:
        _RECORDINGS.pop()


def is_recording() -> bool:
    return bool(_RECORDINGS)


def record(weights: torch.Tensor | None) -> None:
    """Hand ``weights`` to the innermost open ``recording()``, if there is one."""
    if _RECORDINGS and weights is not None:
        _RECORDINGS[-1].append(weights)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_k)) v for (..., T, d_k) inputs; returns the output and the weights.

    The attention core of the book. ``mask`` (T, T), if given, is True where query i
    may attend to key j; the other keys get weight 0. Inside ``recording()`` the
    weights are recorded.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])      # (..., T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)                              # (..., T, T), rows sum to 1
    record(weights)
    return weights @ v, weights                                      # (..., T, d_v)


def attention_fast(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   mask: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                   need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``attention`` as the package's layers run it: the same output, through PyTorch's fused
    ``scaled_dot_product_attention`` whenever the weights are not needed.

    ``causal`` adds the causal mask (chapter 3) to ``mask``. ``bias``, broadcastable to the scores,
    is added to them before masking, so a masked key stays at weight 0 whatever the bias says
    (relative positions, chapters 7-9). With fewer queries than keys (sampling with a key/value
    cache, chapter 11) the queries are the last positions. The weights come back only if
    ``need_weights``, or inside ``recording()`` (then they are recorded).
    """
    Tq, Tk = q.shape[-2], k.shape[-2]
    causal = causal and Tq > 1                                       # one new query may see every key
    need_weights = need_weights or is_recording()
    if not need_weights and bias is None and mask is None and (Tq == Tk or not causal):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal), None   # fused kernels
    if causal:
        future = causal_mask(Tk, q.device)[Tk - Tq:]                  # (Tq, Tk): queries are the last Tq
        mask = future if mask is None else mask & future
    # SDPA takes a boolean or an additive mask. On a CPU, a bias that needs gradients (relative
    # positions) sends SDPA to its unfused fallback, slower to train than the explicit lines below.
    if not need_weights and (bias is None or q.is_cuda):
        if bias is not None and mask is not None:
            bias = bias.masked_fill(~mask, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask if bias is None else bias), None
    if bias is None:
        out, weights = attention(q, k, v, mask)
        return out, (weights if need_weights else None)
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]) + bias   # (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    record(weights)
    return weights @ v, (weights if need_weights else None)         # (..., Tq, d_v)


class Head(nn.Module):
    """One head of self-attention: its own query, key and value projections, then ``attention``."""

    def __init__(self, n_embd: int, head_size: int):
        super().__init__()
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.query(x), self.key(x), self.value(x)            # (B, T, hs) each
        out, _ = attention(q, k, v)                                     # (B, T, hs)
        return out


class CausalHead(Head):
    """A head that sees only the past: query i attends to the keys j <= i."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.query(x), self.key(x), self.value(x)            # (B, T, hs) each
        out, _ = attention(q, k, v, causal_mask(x.shape[1], x.device))  # (B, T, hs)
        return out


class MultiHeadLoop(nn.Module):
    """Multi-head attention as in the paper: h separate heads, concatenated, then W_O."""

    def __init__(self, cfg: ModelConfig, causal: bool = True):
        super().__init__()
        hs, head = cfg.n_embd // cfg.n_heads, CausalHead if causal else Head
        self.heads = nn.ModuleList([head(cfg.n_embd, hs) for _ in range(cfg.n_heads)])
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)                  # W_O

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))   # (B, T, C)


class MultiHeadAttention(nn.Module):
    """The same computation batched: one projection for Q, K, V of all heads, one matmul.

    ``fast=False`` always takes the readable path; otherwise ``attention_fast`` runs
    PyTorch's fused kernel unless the weights are recorded. Later chapters change how
    the heads attend by overriding ``attend``.
    """

    def __init__(self, cfg: ModelConfig, causal: bool = True, fast: bool = True):
        super().__init__()
        self.n_heads, self.causal, self.fast = cfg.n_heads, causal, fast
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)  # [W_Q | W_K | W_V] of all heads
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)                  # W_O
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.split_heads(x)                                   # (B, nh, T, hs) each
        y, _ = self.attend(q, k, v, need_weights=not self.fast)         # (B, nh, T, hs)
        return self.merge_heads(y)                                      # (B, T, C)

    def split_heads(self, x: torch.Tensor) -> list[torch.Tensor]:
        """(B, T, C) -> q, k, v, each (B, nh, T, hs): every head's slice of one projection."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)                          # (B, T, C) each
        return [t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v)]

    def merge_heads(self, y: torch.Tensor) -> torch.Tensor:
        """(B, nh, T, hs) -> (B, T, C): the heads side by side, then W_O."""
        B, nh, T, hs = y.shape
        return self.drop(self.proj(y.transpose(1, 2).reshape(B, T, nh * hs)))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool):
        """Each head's output (B, nh, T, hs), and its weights (B, nh, T, T) if ``need_weights``."""
        return attention_fast(q, k, v, causal=self.causal, need_weights=need_weights)

    @torch.no_grad()
    def load_from_loop(self, loop: MultiHeadLoop) -> "MultiHeadAttention":
        """Copy the weights of a MultiHeadLoop, so that both compute the same function."""
        for i, w in enumerate(("query", "key", "value")):
            self.qkv.weight[i * self.proj.in_features:(i + 1) * self.proj.in_features] = torch.cat(
                [getattr(h, w).weight for h in loop.heads])
        self.proj.load_state_dict(loop.proj.state_dict())
        return self

    @torch.no_grad()
    def to_torch(self) -> nn.MultiheadAttention:
        """An ``nn.MultiheadAttention`` with the same weights (call it with ``need_weights=False``)."""
        C = self.proj.in_features
        mha = nn.MultiheadAttention(C, self.n_heads, batch_first=True)
        mha.in_proj_weight.copy_(self.qkv.weight)
        mha.in_proj_bias.zero_()
        mha.out_proj.load_state_dict(self.proj.state_dict())
        return mha


@torch.no_grad()
def attention_weights(model: nn.Module, tokens, layer: int = -1) -> torch.Tensor:
    """The attention weights of ``model`` on one token sequence, on the CPU.

    ``tokens`` (T,) may be a list, an array or a tensor on any device; it is moved
    to the model's device. Returns (T, T) for one head, (nh, T, T) for several;
    ``layer`` picks the layer of a decoder (the layers record in order).
    """
    x = to_model(model, tokens)[None]                                   # (1, T)
    with evaluating(model), recording() as weights:
        model(x)
    if not weights:
        raise ValueError(f"{getattr(model, 'name', type(model).__name__)} computes no attention weights "
                         f"(an LSTM without attention, or a Fourier mixer)")
    return weights[layer][0].float().cpu()                              # (T, T) or (nh, T, T)
