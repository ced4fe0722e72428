"""Relative positions: Shaw et al.'s relative attention, the Music Transformer's
simplification and its skew, and two modern descendants, RoPE and ALiBi.

Notebooks: notebooks/07_relative_positions.ipynb (Shaw, the simplification,
RoPE, ALiBi), notebooks/08_skew.ipynb (the skew).

Row vectors, one head, queries q_i and keys k_j of width d. Shaw et al. add a
learned vector a^K_{ij} = w^K_{clip(j - i, -k, k)} to each key and a^V_{ij} to
each value:

    e_ij = q_i (k_j + a^K_ij)^T / sqrt(d) = (q_i k_j^T + q_i a^K_ij^T) / sqrt(d)
    z_i  = sum_j alpha_ij (v_j + a^V_ij)

The Music Transformer keeps only the position term of the score, with one
learned E^r (L, d) per head for the distances -(L-1)..0: S^rel_ij = q_i E^r_{j-i+L-1}^T,
and softmax((Q K^T + S^rel) / sqrt(d)) V. The skew computes S^rel from Q E^r^T
in O(L d) extra memory instead of the (L, L, d) tensor of Shaw's direct way.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import MultiHeadAttention, attention_fast, causal_mask, record
from .config import ModelConfig


def distances(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) long: entry (i, j) is j - i, negative for keys in the past."""
    t = torch.arange(T, device=device)
    return t[None, :] - t[:, None]


class ShawAttention(MultiHeadAttention):
    """Relative attention as Shaw et al. (2018) compute it: the (T, T, hs) tensors a^K and a^V, directly.

    Distances are clipped to [-k, k], so 2k + 1 vectors per table, shared by the
    heads of a layer. With k = 0 every pair gets the same vector: a^K shifts each
    row of scores by a constant (the softmax ignores it) and a^V adds the same
    vector to every output, so the model sees no order at all.
    """

    def __init__(self, cfg: ModelConfig, k: int = 16):
        super().__init__(cfg, causal=True)
        if k < 0:
            raise ValueError(f"clipping distance k must be >= 0, got {k}")
        hs = cfg.n_embd // cfg.n_heads
        self.k = k
        self.a_k = nn.Embedding(2 * k + 1, hs)                          # w^K_{-k} .. w^K_{k}
        self.a_v = nn.Embedding(2 * k + 1, hs)                          # w^V_{-k} .. w^V_{k}

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool):
        T, d = q.shape[-2], q.shape[-1]
        idx = distances(T, q.device).clamp(-self.k, self.k) + self.k    # (T, T) rows of the tables
        aK, aV = self.a_k(idx), self.a_v(idx)                           # (T, T, hs) each: the L x L x d tensors
        scores = q @ k.transpose(-2, -1) + torch.einsum("bhid,ijd->bhij", q, aK)   # (B, nh, T, T)
        scores = (scores / math.sqrt(d)).masked_fill(~causal_mask(T, q.device), float("-inf"))
        w = F.softmax(scores, dim=-1)                                   # (B, nh, T, T)
        record(w)                                                       # inside attention.recording()
        y = w @ v + torch.einsum("bhij,ijd->bhid", w, aV)               # (B, nh, T, hs)
        return y, (w if need_weights else None)


def skew(rel: torch.Tensor) -> torch.Tensor:
    """(..., L, L) logits Q E^r^T, column r for distance r - (L - 1), -> (..., L, L) S^rel, S_ij for j - i.

    Pad one column on the left, reshape to (L + 1, L), drop the first row. On
    and below the diagonal S_ij = rel[i, L - 1 + j - i]; above it the entries are
    undefined (a zero, then the next query's logits) and must be masked.
    """
    L = rel.shape[-1]
    padded = F.pad(rel, (1, 0))                                         # (..., L, L + 1)
    return padded.reshape(*rel.shape[:-2], L + 1, L)[..., 1:, :]        # (..., L, L)


def relative_logits_direct(q: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """S^rel the direct way: gather E^r into a (L, L, d) tensor, one vector per pair; 0 above the diagonal.

    ``q`` (..., nh, L, d), ``E`` (nh, L, d) for distances -(L-1)..0: the definition, computed literally.
    """
    L = q.shape[-2]
    idx = distances(L, q.device) + L - 1                                # (L, L): j - i + L - 1
    future = idx > L - 1
    R = E[:, idx.clamp(max=L - 1)]                                      # (nh, L, L, d): the big tensor
    S = torch.einsum("...hid,hijd->...hij", q, R)                       # (..., nh, L, L)
    return S.masked_fill(future, 0.0)


def relative_logits_skew(q: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """S^rel with the skew: one matmul Q E^r^T (L, L) per head, then ``skew``. Above the diagonal: undefined."""
    return skew(q @ E.transpose(-2, -1))                                # (..., nh, L, L)


class RelativeGlobal(nn.Module):
    """The Music Transformer's relative term, a ``score_bias`` for ``BiasedAttention``: S^rel / sqrt(d).

    One learned E^r (L, hs) per head, for the distances -(L-1)..0, L = context.
    Past L tokens the farthest vector repeats (Shaw's clipping at k = L - 1), so
    the model runs on any length. ``use_skew=False`` computes the same with the
    direct gather, in O(L^2 d) memory.
    """

    def __init__(self, cfg: ModelConfig, use_skew: bool = True):
        super().__init__()
        hs = cfg.n_embd // cfg.n_heads
        self.E = nn.Parameter(torch.randn(cfg.n_heads, cfg.context, hs) / math.sqrt(hs))   # (nh, L, hs)
        self.use_skew = use_skew

    def table(self, T: int) -> torch.Tensor:
        """(nh, T, hs): the vectors for distances -(T-1)..0."""
        L = self.E.shape[1]
        if T <= L:
            return self.E[:, L - T:]
        return torch.cat([self.E[:, :1].expand(-1, T - L, -1), self.E], dim=1)   # clip beyond -(L-1)

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        """S^rel / sqrt(d) (B, nh, T, T) for queries q (B, nh, T, hs); above the diagonal: masked later."""
        E = self.table(q.shape[-2]).to(q.dtype)                         # (nh, T, hs)
        q = q / math.sqrt(q.shape[-1])                                  # scale (T, hs), not (T, T)
        return relative_logits_skew(q, E) if self.use_skew else relative_logits_direct(q, E)   # (B, nh, T, T)


class Rotary(nn.Module):
    """RoPE (Su et al., 2021), the rotation of ``RotaryAttention``: rotate each pair of features of
    q_t and k_t by the angle t w_c, so that q_i k_j^T depends on positions through j - i only."""

    def __init__(self, cfg: ModelConfig, base: float = 10000.0):
        super().__init__()
        hs = cfg.n_embd // cfg.n_heads
        if hs % 2:
            raise ValueError(f"RoPE rotates pairs of features: head size {hs} must be even")
        self.register_buffer("w", base ** (-torch.arange(0, hs, 2, dtype=torch.float) / hs), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, nh, T, hs) at positions 0 .. T - 1, rotated."""
        T = x.shape[-2]
        angle = torch.arange(T, device=x.device, dtype=torch.float)[:, None] * self.w   # (T, hs/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]                             # (B, nh, T, hs/2) each
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)   # (B, nh, T, hs)


class ALiBi(nn.Module):
    """ALiBi (Press et al., 2022), a ``score_bias`` for ``BiasedAttention``: m_h (j - i) for head h, with fixed slopes
    m_h = 2^(-8h / nh): a penalty linear in the distance, steep in some heads, gentle in others."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        h = torch.arange(1, cfg.n_heads + 1, dtype=torch.float)
        self.register_buffer("slopes", 2.0 ** (-8.0 * h / cfg.n_heads), persistent=False)   # (nh,)

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        d = distances(q.shape[-2], q.device).to(q.dtype)                # (T, T), <= 0 in the past
        return (self.slopes.to(q.dtype)[:, None, None] * d)[None]       # (1, nh, T, T)


class BiasedAttention(MultiHeadAttention):
    """Causal multi-head attention plus a term of the scores computed from the queries, ``score_bias``:
    the Music Transformer's relative term (``RelativeGlobal``) or ALiBi's penalty (``ALiBi``). Without the
    mask (``causal=False``), chapter 12's encoder with relative positions both ways (``RelativeBoth``)."""

    def __init__(self, cfg: ModelConfig, score_bias: nn.Module, fast: bool = True, causal: bool = True):
        super().__init__(cfg, causal=causal, fast=fast)
        self.score_bias = score_bias

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool):
        bias = self.score_bias(q)                                       # (B or 1, nh, T, T)
        return attention_fast(q, k, v, causal=self.causal, bias=bias, need_weights=need_weights)


class RotaryAttention(MultiHeadAttention):
    """Causal multi-head attention on rotated queries and keys (RoPE, ``Rotary``)."""

    def __init__(self, cfg: ModelConfig, fast: bool = True):
        super().__init__(cfg, causal=True, fast=fast)
        self.rotary = Rotary(cfg)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool):
        return super().attend(self.rotary(q), self.rotary(k), v, need_weights)
