"""The voice embedding: the Music Transformer's "instrument embedding", on the four voices of a chorale.

Notebook: notebooks/11_comparison.ipynb

In the raster order of ``tokens``, the token at window position p belongs to
voice (p - 1) mod 4: every training crop and every evaluation window starts on
a step boundary, so position 0 holds BOS or the bass of the previous step (see
``tasks.Crops``). Relative attention knows how far back a token is, not which
voice it is; adding a learned vector per voice tells it.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..io.tokens import VOICES
from .config import ModelConfig


def voice_of(T: int, start: int = 0, device: torch.device | str | None = None) -> torch.Tensor:
    """(T,) the voice, 0 soprano .. 3 bass, of window positions start .. start + T - 1: (p - 1) mod 4."""
    return (torch.arange(start, start + T, device=device) - 1) % len(VOICES)


class VoiceEmbedding(nn.Module):
    """x + V[voice(p)], with V a learned (4, C) table: one vector per voice, S A T B."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.table = nn.Embedding(len(VOICES), cfg.n_embd)             # V: (4, C)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """x (B, T, C): the embeddings of the tokens at window positions start .. start + T - 1."""
        return x + self.table(voice_of(x.shape[1], start, x.device))   # (B, T, C) + (T, C)
