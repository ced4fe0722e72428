"""Absolute positions: a learned vector per position, added to the token embeddings.

Notebook: notebooks/03_masking.ipynb uses them in two sentences;
notebooks/06_positions.ipynb explains them (with sinusoidal encodings).

Attention without positions sees its past as a bag: shuffle the earlier tokens
and the output does not move. Adding a vector p_t to the embedding of the
token at position t makes "three tokens back" visible to the scores.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .config import ModelConfig


class LearnedPositions(nn.Module):
    """x + P[:T], with P a learned (block_size, C) table: one vector per position."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.table = nn.Embedding(cfg.block_size, cfg.n_embd)          # P: (block_size, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        if T > self.table.num_embeddings:
            raise ValueError(f"sequence of {T} tokens, but learned positions stop at {self.table.num_embeddings}")
        return x + self.table(torch.arange(T, device=x.device))        # (B, T, C) + (T, C)
