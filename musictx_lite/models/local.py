"""Relative local attention: blocks of N tokens, each attending to itself and the
previous block, with the Music Transformer's relative term and a local skew.

Notebook: notebooks/09_local_attention.ipynb

Query i = bN + n (block b, offset n) sees keys j from (b - 1)N to i: the band
of ``band_mask``. Scores live in (N, 2N) windows, one per block, so time and
memory grow as L * 2N instead of L^2. Equal to ``RelativeGlobal`` attention
under the band mask when both hold the same vectors for distances -(2N-1)..0.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import MultiHeadAttention, is_recording, record
from .config import ModelConfig


def band_mask(T: int, N: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) boolean: query i sees key j when j <= i and j is in i's block or the one before."""
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    return (j <= i) & (j >= (i // N - 1) * N)


def skew_local(rel: torch.Tensor, n_keys: int) -> torch.Tensor:
    """(..., N, W) logits, column c for m - n = c - (N - 1): the key's index m in its
    window minus the query's index n in its block, W = N - 1 + n_keys, -> (..., N, n_keys)
    with out[n, m] = rel[n, N - 1 + m - n]. Every entry is defined. (In ``local_blocks``
    the window starts a block before the query's, so column c is the distance
    c - (2N - 1) of key from query.)

    Pad a column on the right, flatten, pad W - N (N - 1 when n_keys = N),
    reshape to (N + 1, W), keep the first N rows and the last n_keys columns.
    """
    N, W = rel.shape[-2:]
    if W != N - 1 + n_keys:
        raise ValueError(f"need {N - 1 + n_keys} columns for {N} queries and {n_keys} keys, got {W}")
    x = F.pad(rel, (0, 1))                                              # (..., N, W + 1)
    x = F.pad(x.flatten(-2), (0, W - N))                                # (..., (N + 1) W)
    x = x.reshape(*rel.shape[:-2], N + 1, W)                            # (..., N + 1, W)
    return x[..., :N, W - n_keys:]                                      # (..., N, n_keys)


def local_blocks(qb: torch.Tensor, kw: torch.Tensor, vw: torch.Tensor, E: torch.Tensor, first: bool):
    """Relative local attention of the query blocks ``qb`` (B, nh, nb, N, d) against their windows
    ``kw``, ``vw`` (B, nh, nb, 2N, d): the previous block, then their own. ``first``: the first block
    of ``qb`` is block 0, which has no previous block. Returns (B, nh, nb, N, d) and the weights."""
    N, d = qb.shape[-2:]
    rel = F.pad(qb @ E.to(qb.dtype)[:, None].transpose(-2, -1), (0, N - 1))  # (B, nh, nb, N, 3N-1): d > 0 is 0
    scores = (qb @ kw.transpose(-2, -1) + skew_local(rel, 2 * N)) / math.sqrt(d)   # (B, nh, nb, N, 2N)
    n = torch.arange(N, device=qb.device)[:, None]
    m = torch.arange(2 * N, device=qb.device)[None, :]
    allowed = (m <= N + n)[None].expand(qb.shape[2], N, 2 * N).clone()   # causal inside the window
    if first:
        allowed[0, :, :N] = False                                       # block 0 has no predecessor
    w = F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, nh, nb, N, 2N)
    return w @ vw, w


def local_relative_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, E: torch.Tensor, N: int,
                             need_weights: bool = False, step: int = 1024):
    """Relative local attention of (B, nh, T, d) inputs in blocks of N; ``E`` (nh, 2N, d) holds the
    vectors for distances -(2N-1)..0. Returns (B, nh, T, d) and, if asked, dense (B, nh, T, T) weights.

    The blocks go through ``local_blocks`` about ``step`` queries at a time: each step's tensors stay
    small, so the time per token does not grow with T.
    """
    B, H, T, d = q.shape
    pad = (-T) % N                                                      # the last block may be short
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))             # (B, nh, T', d)
    nb = (T + pad) // N
    qb, kb, vb = (t.view(B, H, nb, N, d) for t in (q, k, v))            # (B, nh, nb, N, d)
    prev = lambda t: F.pad(t, (0, 0, 0, 0, 1, 0))[:, :, :-1]            # block b-1 at b; zeros before block 0
    kw = torch.cat([prev(kb), kb], dim=3)                               # (B, nh, nb, 2N, d)
    vw = torch.cat([prev(vb), vb], dim=3)
    per = max(1, step // N)                                             # blocks per step
    ys, ws = zip(*(local_blocks(qb[:, :, b:b + per], kw[:, :, b:b + per], vw[:, :, b:b + per], E, b == 0)
                   for b in range(0, nb, per)))
    y = torch.cat(ys, dim=2).reshape(B, H, nb * N, d)[:, :, :T]         # (B, nh, T, d)
    if not need_weights:
        return y, None
    w = torch.cat(ws, dim=2)                                            # (B, nh, nb, N, 2N)
    dense = q.new_zeros(B, H, nb * N, (nb + 1) * N)                     # keys shifted by one block
    for b in range(nb):
        dense[:, :, b * N:(b + 1) * N, b * N:(b + 2) * N] = w[:, :, b]
    return y, dense[:, :, :T, N:N + T]                                  # (B, nh, T, T)


class LocalAttention(MultiHeadAttention):
    """Causal multi-head attention in blocks of N with the relative term: the mixer of chapter 9."""

    def __init__(self, cfg: ModelConfig, N: int = 32):
        super().__init__(cfg, causal=True)
        if N < 1:
            raise ValueError(f"block length N must be >= 1, got {N}")
        hs = cfg.n_embd // cfg.n_heads
        self.N = N
        self.E = nn.Parameter(torch.randn(cfg.n_heads, 2 * N, hs) / math.sqrt(hs))   # distances -(2N-1)..0

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool):
        y, w = local_relative_attention(q, k, v, self.E, self.N, need_weights or is_recording())
        record(w)                                                       # dense (B, nh, T, T), if computed
        return y, w
