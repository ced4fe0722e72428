"""Filling in a hidden voice with unmasked self-attention, as Coconet fills in notes.

Notebook: notebooks/02_self_attention.ipynb

One training example is one 16th step: the four notes S A T B sounding
together, with one voice replaced by MASK. Attention over a set is the right
tool here: the four notes have no order besides their voices, and every note
may look at every other, because the task is to explain the present, not to
predict the future. A learned voice vector is added to each note so that the
model knows which role each pitch plays.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..device import evaluating, to_model
from ..io.data import Piece
from ..io.tokens import MASK, PAD, encode
from .attention import Head, recording
from .config import ModelConfig


def hide(steps: torch.Tensor, voice: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, 4) step tokens -> inputs with ``voice[n]`` hidden by MASK, and targets (PAD elsewhere)."""
    rows = torch.arange(len(steps))
    x = steps.clone()
    x[rows, voice] = MASK
    y = torch.full_like(steps, PAD)
    y[rows, voice] = steps[rows, voice]
    return x, y


def all_steps(pieces: list[Piece]) -> torch.Tensor:
    """Every 16th step of every piece as tokens, (N, 4)."""
    return torch.cat([torch.as_tensor(encode(p.pitches)[1:]).view(-1, 4) for p in pieces])


class FillBatches:
    """Random steps of the training pieces, one random voice of each hidden."""

    def __init__(self, pieces: list[Piece], seed: int = 0):
        self.steps = all_steps(pieces)                                 # (N, 4)
        self.gen = torch.Generator().manual_seed(seed)

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        pick = torch.randint(len(self.steps), (batch_size,), generator=self.gen)
        return hide(self.steps[pick], torch.randint(4, (batch_size,), generator=self.gen))   # (B, 4) each


@torch.no_grad()
def fill_logits(model: nn.Module, steps: torch.Tensor, voice: int,
                return_attention: bool = False, weights: torch.Tensor | None = None):
    """Hide ``voice`` in every step of ``steps`` (N, 4) and return the model's logits (N, 4, V) on the CPU.

    The steps are moved to the model's device; with ``return_attention`` the
    weights (N, 4, 4) come back too. ``weights`` (4, 4), if given, replaces the
    learned attention weights at every step (chapter 2 asks how much they matter).
    """
    x, _ = hide(torch.as_tensor(steps), torch.full((len(steps),), voice))
    kw = {"weights": to_model(model, weights)} if weights is not None else {}
    with evaluating(model), recording() as recorded:
        logits = model(to_model(model, x), **kw).float().cpu()          # (N, 4, V)
    if not return_attention:
        return logits
    w = recorded[0] if recorded else kw["weights"].expand(len(x), 4, 4)   # (N, 4, 4)
    return logits, w.float().cpu()


@torch.no_grad()
def evaluate_fill_nll(model: nn.Module, pieces: list[Piece], weights: str | None = None) -> float:
    """NLL in nats per hidden note: every step of every piece, each voice hidden in turn.

    ``weights="uniform"`` replaces the attention weights by 1/4 everywhere;
    ``weights="mean"`` by their mean over all the steps, for each hidden voice:
    the same mix at every step, as if the head could not tell one chord from another.
    """
    steps = all_steps(pieces)                                          # (N, 4)
    total = 0.0
    for v in range(4):
        fixed = None
        if weights == "uniform":
            fixed = torch.full((4, 4), 0.25)
        elif weights == "mean":
            fixed = fill_logits(model, steps, v, return_attention=True)[1].mean(0)   # (4, 4)
        elif weights is not None:
            raise ValueError(f"weights must be None, 'uniform' or 'mean', got {weights!r}")
        logits = fill_logits(model, steps, v, weights=fixed)[:, v]
        total += F.cross_entropy(logits, steps[:, v], reduction="sum").item()
    return total / (4 * len(steps))


class FillTask:
    """Chapter 2's task: predict a hidden voice from the other three notes of its step."""

    name = "fill"

    def sampler(self, pieces: list[Piece], length: int, seed: int) -> FillBatches:
        return FillBatches(pieces, seed)

    def evaluate(self, model: nn.Module, pieces: list[Piece]) -> float:
        return evaluate_fill_nll(model, pieces)


FILL = FillTask()


class VoiceFill(nn.Module):
    """Embed the 4 notes of a step (+ voice vectors), one unmasked head, a read-out per note."""

    task = FILL
    context = 4

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.voice_emb = nn.Parameter(torch.randn(4, cfg.n_embd) * 0.02)   # S, A, T, B
        self.attn = Head(cfg.n_embd, cfg.n_embd)
        self.readout = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def forward(self, idx: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        x = self.tok_emb(idx) + self.voice_emb                         # (B, 4, C)
        if weights is None:
            y = self.attn(x)                                           # (B, 4, C)
        else:                                                          # the same (4, 4) weights at every step
            y = weights.to(x.dtype) @ self.attn.value(x)               # (4, 4) @ (B, 4, C)
        return self.readout(y)                                         # (B, 4, V)
