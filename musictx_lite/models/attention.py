"""Self-attention: the attention core and one head (chapter 2), the causal mask
(chapter 3), and multi-head attention as a loop of heads and as one batched
module (chapter 4).

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
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig
from ..device import evaluating, to_model


def causal_mask(T: int, device: torch.device | str | None = None, n_keys: int | None = None) -> torch.Tensor:
    """(T, T) boolean, True where query i may attend to key j, i.e. j <= i.

    With ``n_keys`` > T (a key/value cache, chapter 11) the T queries are the
    last T of the ``n_keys`` positions: (T, n_keys), True where j <= i + n_keys - T.
    """
    S = T if n_keys is None else n_keys
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(S - T)


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


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              bias: torch.Tensor | None = None, causal: bool = False,
              need_weights: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q k^T / sqrt(d_k) + bias) v for (..., T, d_k) inputs; returns the output and the weights.

    The one attention core of the book. ``mask`` (T, T) is True where query i may
    attend to key j; ``causal=True`` adds the causal mask. ``bias`` is added to
    the scores before masking, so a masked key stays at weight 0 whatever the
    bias says (relative positions, chapters 7-9, live there). Without
    ``need_weights`` the weights come back as None, and the fused
    ``F.scaled_dot_product_attention`` computes the same output (on a CPU, only
    without a bias). Inside ``recording()`` the weights are computed and recorded.
    With fewer queries than keys (a key/value cache, chapter 11), the queries are
    the last positions.
    """
    Tq, Tk = q.shape[-2], k.shape[-2]
    causal = causal and Tq > 1                                       # one new query may see every key
    need_weights = need_weights or is_recording()
    if not need_weights and bias is None and mask is None and (Tq == Tk or not causal):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal), None   # fused kernels
    if causal:
        mask = causal_mask(Tq, q.device, Tk) if mask is None else mask & causal_mask(Tq, q.device, Tk)
    # SDPA takes a boolean or an additive mask. On a CPU, a bias that needs gradients (relative
    # positions) sends SDPA to its unfused fallback, slower to train than the explicit lines below.
    if not need_weights and (bias is None or q.is_cuda):
        if bias is not None and mask is not None:
            bias = bias.masked_fill(~mask, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask if bias is None else bias), None
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])      # (..., Tq, Tk)
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)                              # (..., Tq, Tk), rows sum to 1
    record(weights)
    return weights @ v, (weights if need_weights else None)          # (..., Tq, d_v)


@dataclass
class KVCache:
    """A layer's keys and values while sampling (chapter 11): (..., t, d) each; None before the prompt."""

    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    @property
    def seen(self) -> int:
        """The tokens seen so far, which is the position of the next one."""
        return 0 if self.k is None else self.k.shape[-2]


def remember(cache: KVCache | None, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Append this call's keys and values (..., T, d) to those in ``cache``; return all of them.

    The key/value cache of chapter 11: when sampling, the keys and values of
    earlier tokens never change, so each step computes them for the new token
    only. ``cache`` is the layer's own (from its ``new_cache()``), or None.
    """
    if cache is None:
        return k, v
    if cache.k is not None:
        k, v = torch.cat([cache.k, k], dim=-2), torch.cat([cache.v, v], dim=-2)   # (..., t + T, d)
    cache.k, cache.v = k, v
    return k, v


class Head(nn.Module):
    """One head of self-attention, causal or not."""

    def __init__(self, n_embd: int, head_size: int, causal: bool = True):
        super().__init__()
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.causal = causal

    def new_cache(self) -> KVCache | None:
        """An empty cache to sample with (chapter 11); None without the mask: then every new token
        changes the earlier outputs, and nothing computed before can be kept."""
        return KVCache() if self.causal else None

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        q, k, v = self.query(x), self.key(x), self.value(x)            # (B, T, hs) each
        k, v = remember(cache, k, v)                                    # (B, t + T, hs) with a cache
        out, _ = attention(q, k, v, causal=self.causal, need_weights=False)   # (B, T, hs)
        return out


class MultiHeadLoop(nn.Module):
    """Multi-head attention as in the paper: h separate heads, concatenated, then W_O."""

    def __init__(self, cfg: ModelConfig, causal: bool = True):
        super().__init__()
        hs = cfg.n_embd // cfg.n_heads
        self.heads = nn.ModuleList([Head(cfg.n_embd, hs, causal) for _ in range(cfg.n_heads)])
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)                  # W_O

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))   # (B, T, C)


class MultiHeadAttention(nn.Module):
    """The same computation batched: one projection for Q, K, V of all heads, one matmul.

    Two hooks let later chapters change how positions enter, without a new class:
    ``score_bias(q, n_keys)`` maps the queries (B, nh, T, hs) to an additive term
    of the scores, (B or 1, nh, T, n_keys) (relative positions and ALiBi, chapters 7-8);
    ``rotary(x, start)`` maps queries or keys (B, nh, T, hs) at positions start.. to
    rotated ones (RoPE, chapter 7). ``fast=False`` always takes the
    readable path; otherwise SDPA runs unless the weights are recorded.
    Subclasses that compute attention differently (chapters 7 and 9) override ``attend``.

    With a ``cache`` (from ``new_cache()``, chapter 11) it takes the new
    tokens only: the prompt first, then one token per call. ``extend`` decides
    which keys and values to keep: all of them here, two blocks in chapter 9.
    """

    def __init__(self, cfg: ModelConfig, causal: bool = True, fast: bool = True,
                 score_bias: nn.Module | None = None, rotary: nn.Module | None = None):
        super().__init__()
        self.n_heads, self.causal, self.fast = cfg.n_heads, causal, fast
        self.score_bias, self.rotary = score_bias, rotary
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)  # [W_Q | W_K | W_V] of all heads
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)                  # W_O
        self.drop = nn.Dropout(cfg.dropout)

    def new_cache(self) -> KVCache | None:
        """An empty key/value cache to sample with (chapter 11); None without the causal mask."""
        return KVCache() if self.causal else None

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)                          # (B, T, C) each
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        if self.rotary is not None:                                     # rotate by the tokens' positions
            start = cache.seen if cache is not None else 0
            q, k = self.rotary(q, start), self.rotary(k, start)         # (B, nh, T, hs) each
        if cache is not None:
            k, v = self.extend(cache, k, v)                             # (B, nh, t + T, hs) each
        y, _ = self.attend(q, k, v, need_weights=not self.fast)         # (B, nh, T, hs)
        return self.drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))   # (B, T, C)

    def extend(self, cache: KVCache, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values the new queries see: every earlier one and their own."""
        return remember(cache, k, v)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool):
        """Each head's output (B, nh, T, hs) and weights (B, nh, T, T) or None, from its q, k, v.
        Weights computed inside ``recording()`` are recorded.

        With a cache, q holds the newest T of the k.shape[-2] positions."""
        bias = self.score_bias(q, k.shape[-2]) if self.score_bias is not None else None   # (B, nh, T, Tk)
        return attention(q, k, v, bias=bias, causal=self.causal, need_weights=need_weights)

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
