"""Absolute positions: a vector per position, added to the token embeddings.

Notebook: notebooks/03_masking.ipynb uses learned ones in two sentences;
notebooks/06_positions.ipynb explains them, with sinusoidal encodings.

Attention without positions sees its past as a bag: shuffle the earlier tokens
and the output does not move. Adding a vector p_t to the embedding of the
token at position t makes "three tokens back" visible to the scores.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..device import evaluating, to_model
from ..io.tokens import encode
from .config import ModelConfig


class LearnedPositions(nn.Module):
    """x + P[:T], with P a learned (context, C) table: one vector per position."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.table = nn.Embedding(cfg.context, cfg.n_embd)          # P: (context, C)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """x (B, T, C): the embeddings of the tokens at positions start .. start + T - 1."""
        T = start + x.shape[1]
        if T > self.table.num_embeddings:
            raise ValueError(f"sequence of {T} tokens, but learned positions stop at {self.table.num_embeddings}")
        return x + self.table(torch.arange(start, T, device=x.device))   # (B, T, C) + (T, C)


def sinusoids(T: int, C: int, base: float = 10000.0) -> torch.Tensor:
    """(T, C): P[t, 2i] = sin(t / base^(2i/C)), P[t, 2i+1] = cos(t / base^(2i/C)).

    Pair i turns at angular frequency w_i = base^(-2i/C), from 1 radian per
    token down to 1/base; P[t + k] is P[t] with each pair rotated by k w_i, a
    fixed linear map for every offset k (Vaswani et al., 2017).
    """
    if C % 2:
        raise ValueError(f"sinusoidal positions need an even width, got {C}")
    w = base ** (-torch.arange(0, C, 2, dtype=torch.float) / C)       # (C/2,)
    angle = torch.arange(T, dtype=torch.float)[:, None] * w           # (T, C/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)  # (T, C), sin and cos interleaved


class SinusoidalPositions(nn.Module):
    """x + P[:T] with the fixed sinusoids of ``sinusoids``: no parameters, defined for every T."""

    def __init__(self, cfg: ModelConfig, base: float = 10000.0):
        super().__init__()
        self.C, self.base = cfg.n_embd, base
        self.register_buffer("table", sinusoids(cfg.context, cfg.n_embd, base), persistent=False)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """x (B, T, C): the embeddings of the tokens at positions start .. start + T - 1."""
        T = start + x.shape[1]
        if T > len(self.table):                                        # past the trained length: extend
            self.table = sinusoids(T, self.C, self.base).to(x.device)
        return x + self.table[start:T].to(x.dtype)                     # (B, T, C) + (T, C)


@torch.no_grad()
def position_nll(model: nn.Module, pieces, length: int, max_windows: int = 256,
                 window: int | None = None) -> torch.Tensor:
    """Mean NLL at each position 0..length-1 of windows of ``length`` tokens (nats), on the CPU.

    Windows start at every step of each piece, a stride of ``length // 2``; a
    model trained on shorter crops is here asked about positions it never saw.
    With ``window`` (chapter 6's control), the model never sees more than ``window`` tokens: past the
    first ``window`` positions, each token is predicted from a view that slides by ``window // 2`` and
    starts at position 0 again, so it sees between ``window // 2`` and ``window`` tokens, at positions it
    trained on.
    """
    xs = []
    for p in pieces:
        s = torch.as_tensor(encode(p.pitches))
        for start in range(0, len(s) - length - 1, max(4, length // 2 // 4 * 4)):
            xs.append(s[start: start + length + 1])
    if not xs:
        raise ValueError(f"no piece is longer than {length + 1} tokens")
    window = length if window is None else window
    if not 2 <= window <= length or window % 2:
        raise ValueError(f"window must be even and 2..{length}, got {window}")
    half = window // 2
    X = torch.stack(xs[:max_windows])                                  # (N, length + 1)
    total = torch.zeros(length)
    with evaluating(model):
        for i in range(0, len(X), 32):
            xy = to_model(model, X[i: i + 32])
            views = [(0, 0)] + [(o, half) for o in range(half, length - half, half)]   # (start, first kept)
            for o, keep in views:
                end = min(o + window, length)
                logits = model(xy[:, o:end]).float()                    # (b, end - o, V)
                nll = F.cross_entropy(logits.transpose(1, 2), xy[:, o + 1:end + 1], reduction="none")
                total[o + keep:end] += nll[:, keep:].sum(0).cpu()       # (b, end - o - keep)
    return total / len(X)


def lag_similarity(P: torch.Tensor, max_lag: int = 16) -> torch.Tensor:
    """(max_lag,): mean cosine similarity of position vectors k = 1..max_lag apart, P (T, C)."""
    P = F.normalize(P.detach().float().cpu(), dim=-1)                  # unit rows
    return torch.stack([(P[:-k] * P[k:]).sum(-1).mean() for k in range(1, max_lag + 1)])


def voice_accuracy(P: torch.Tensor) -> float:
    """How well the voice of position t, (t - 1) mod 4, can be read off P[t] (T, C) by a linear map.

    A ridge-regularised least-squares linear classifier (the ridge scaled to
    the features' mean square) is fitted on the first half of the positions
    and scored on the second half; chance is 0.25.
    """
    P = P.detach().double().cpu()
    T = len(P)
    voice = (torch.arange(T) - 1) % 4                                  # (T,)
    X = torch.cat([P, torch.ones(T, 1, dtype=P.dtype)], dim=1)         # (T, C + 1) with a bias
    Y = F.one_hot(voice, 4).double()                                   # (T, 4)
    fit, test = slice(0, T // 2), slice(T // 2, T)
    A = X[fit]
    ridge = A.pow(2).mean() * torch.eye(A.shape[1], dtype=A.dtype)
    W = torch.linalg.solve(A.T @ A + ridge, A.T @ Y[fit])
    return (X[test] @ W).argmax(-1).eq(voice[test]).double().mean().item()
