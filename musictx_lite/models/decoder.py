"""The decoder every next-token model from chapter 3 on is made of.

Notebooks: notebooks/03_masking.ipynb (one bare attention layer),
notebooks/05_blocks.ipynb (blocks); chapters 6-10 plug in new parts.

A decoder is a composition of three parts, and nothing else changes between
chapters:

- ``positions``: none, or a module that adds position information to the
  token embeddings (learned positions, chapter 3/6);
- ``mixer``: how tokens see each other, built once per layer from the config
  (causal multi-head attention now; relative, local and Fourier mixers later);
- ``block``: what wraps each mixer (chapter 5's ``Block``: residuals, LayerNorm
  and a feed-forward), or None for a bare mixer (chapters 3 and 4); with blocks
  comes a ``final_norm`` after the last one (``blocks.block_decoder`` builds both).

The read-out is called ``readout``, so that it is never mistaken for an attention ``Head``.
Sampling with a cache (chapter 11) is an extension, in ``cache.py``.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn

from .config import ModelConfig
from .tasks import NEXT_TOKEN


class Decoder(nn.Module):
    """Token embedding (+ positions) -> n_layers mixers, each in a block if given -> read-out."""

    task = NEXT_TOKEN

    def __init__(self, cfg: ModelConfig, mixer: Callable[[ModelConfig], nn.Module],
                 positions: Callable[[ModelConfig], nn.Module] | None = None,
                 block: Callable[..., nn.Module] | None = None,
                 final_norm: Callable[[int], nn.Module] | None = None):
        super().__init__()
        self.cfg, self.context = cfg, cfg.context
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.positions = positions(cfg) if positions is not None else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([block(cfg, mixer(cfg)) if block is not None else mixer(cfg)
                                     for _ in range(cfg.n_layers)])
        self.ln_f = final_norm(cfg.n_embd) if final_norm is not None else nn.Identity()
        self.readout = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) for tokens (B, T). (Each layer's weights: ``attention.recording()``.)"""
        x = self.tok_emb(idx)                                    # (B, T, C)
        if self.positions is not None:
            x = self.positions(x)                                # (B, T, C)
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)                                         # (B, T, C)
        return self.readout(self.ln_f(x))                        # (B, T, V)
