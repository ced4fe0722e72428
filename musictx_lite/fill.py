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

from .attention import Head
from .config import ModelConfig
from .data import Piece
from .tokens import MASK, PAD, encode


class VoiceFill(nn.Module):
    """Embed the 4 notes of a step (+ voice vectors), one unmasked head, a read-out per note."""

    task = "fill"
    context = 4

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.voice_emb = nn.Parameter(torch.randn(4, cfg.n_embd) * 0.02)   # S, A, T, B
        self.attn = Head(cfg.n_embd, cfg.n_embd, causal=False)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def forward(self, idx: torch.Tensor, return_attention: bool = False):
        x = self.tok_emb(idx) + self.voice_emb                         # (B, 4, C)
        y, w = self.attn(x, return_attention=True)                     # (B, 4, C), (B, 4, 4)
        logits = self.head(y)                                          # (B, 4, V)
        return (logits, w) if return_attention else logits


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


def fill_batch(steps: torch.Tensor, batch_size: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random steps (N, 4) -> a batch with one random voice of each step hidden."""
    pick = torch.randint(len(steps), (batch_size,), generator=gen)
    return hide(steps[pick], torch.randint(4, (batch_size,), generator=gen))   # (B, 4) each


@torch.no_grad()
def evaluate_fill_nll(model: nn.Module, pieces: list[Piece], device=None) -> float:
    """NLL in nats per hidden note: every step of every piece, each voice hidden in turn."""
    from .training import evaluating

    device = device or next(model.parameters()).device
    steps = all_steps(pieces).to(device)                              # (N, 4)
    total = 0.0
    with evaluating(model):
        for v in range(4):
            x, y = hide(steps, torch.full((len(steps),), v, device=device))
            total += F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=PAD, reduction="sum").item()
    return total / (4 * len(steps))
