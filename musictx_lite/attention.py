"""Self-attention: one head (chapter 2), the causal mask (chapter 3), and
multi-head attention as a loop of heads and as one batched module (chapter 4).

Notebooks: notebooks/02_self_attention.ipynb, 03_masking.ipynb, 04_multi_head.ipynb

Row vectors throughout: X is (T, C), Q = X W_Q, K = X W_K, V = X W_V, and
attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig


def causal_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) boolean, True where query i may attend to key j, i.e. j <= i."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_k)) v for (..., T, d_k) inputs; returns output and weights (..., T, T).

    ``mask`` is True where attending is allowed; the others get -inf before the softmax.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])      # (..., T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)                              # (..., T, T), rows sum to 1
    return weights @ v, weights                                      # (..., T, d_v)


class Head(nn.Module):
    """One head of self-attention, causal or not."""

    def __init__(self, n_embd: int, head_size: int, causal: bool = True):
        super().__init__()
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.causal = causal

    def forward(self, x: torch.Tensor, return_attention: bool = False):
        T = x.shape[1]
        q, k, v = self.query(x), self.key(x), self.value(x)            # (B, T, hs) each
        mask = causal_mask(T, x.device) if self.causal else None
        out, w = attention(q, k, v, mask)                              # (B, T, hs), (B, T, T)
        return (out, w) if return_attention else out


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

    ``fast=True`` uses ``F.scaled_dot_product_attention`` (fused kernels) unless
    the weights are asked for.
    """

    def __init__(self, cfg: ModelConfig, causal: bool = True, fast: bool = True):
        super().__init__()
        self.n_heads, self.causal, self.fast = cfg.n_heads, causal, fast
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)  # [W_Q | W_K | W_V] of all heads
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)                  # W_O
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, return_attention: bool = False):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)                          # (B, T, C) each
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        if self.fast and not return_attention:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)      # (B, nh, T, hs)
            w = None
        else:
            y, w = attention(q, k, v, causal_mask(T, x.device) if self.causal else None)   # w: (B, nh, T, T)
        y = self.drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))  # (B, T, C)
        return (y, w) if return_attention else y

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


class AttentionLM(nn.Module):
    """Embedding -> one attention layer -> read-out (chapters 3 and 4).

    ``causal=False`` lets every position see the whole crop: on next-token
    prediction that leaks the answer (chapter 3). ``positions=True`` adds a
    learned vector per position (chapter 6 explains them), which the leaking
    model needs to find the next token.
    """

    def __init__(self, cfg: ModelConfig, causal: bool = True, multi_head: bool = False, positions: bool = False):
        super().__init__()
        self.cfg, self.context = cfg, cfg.block_size
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd) if positions else None
        self.attn = MultiHeadAttention(cfg, causal) if multi_head else Head(cfg.n_embd, cfg.n_embd, causal)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def forward(self, idx: torch.Tensor, return_attention: bool = False):
        x = self.tok_emb(idx)                                          # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        y, w = self.attn(x, return_attention=True)                     # (B, T, C), (B, [nh,] T, T)
        logits = self.head(y)                                          # (B, T, V)
        return (logits, w) if return_attention else logits


class UnmaskedAttentionLM(AttentionLM):
    """The leak of chapter 3: next-token prediction with no causal mask (and positions, to find the answer)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg, causal=False, positions=True)


class PositionalAttentionLM(AttentionLM):
    """Chapter 3: the leaking model's honest twin, masked, with the same learned positions."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg, causal=True, positions=True)


class MultiHeadLM(AttentionLM):
    """Chapter 4: the single head replaced by causal multi-head attention."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg, multi_head=True)
