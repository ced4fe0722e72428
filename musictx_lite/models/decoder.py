"""The decoder every next-token model from chapter 3 on is made of.

Notebooks: notebooks/03_masking.ipynb (one bare attention layer),
notebooks/05_blocks.ipynb (blocks); chapters 6-10 plug in new parts.

A decoder is a composition of three parts, and nothing else changes between
chapters:

- ``positions``: none, or a module that adds position information to the
  token embeddings (learned positions, chapter 3/6);
- ``mixer``: how tokens see each other, built once per layer from the config
  (causal multi-head attention now; relative, local and Fourier mixers later);
- ``block``: what wraps each mixer (``Block``: residuals, LayerNorm and a
  feed-forward, chapter 5), or None for a bare mixer (chapters 3 and 4).

The read-out is called ``readout``, so that it is never mistaken for an attention ``Head``.

Sampling (chapter 11) feeds the prompt once and then one token per call, with
a ``DecoderCache``: the number of tokens seen (the one position counter), and
each layer's cache, made by its mixer's ``new_cache()``, in which the mixer
keeps its keys and values, so no step recomputes an earlier token.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn

from .blocks import Block
from .config import ModelConfig
from .tasks import NEXT_TOKEN


class DecoderCache:
    """What a decoder keeps between sampling steps: how many tokens it has seen, and each layer's cache."""

    def __init__(self, layers: list):
        self.pos = 0
        self.layers = layers


class Decoder(nn.Module):
    """Token embedding (+ positions) -> n_layers x block(mixer) -> final LayerNorm -> read-out."""

    task = NEXT_TOKEN

    def __init__(self, cfg: ModelConfig, mixer: Callable[[ModelConfig], nn.Module],
                 positions: Callable[[ModelConfig], nn.Module] | None = None,
                 block: Callable[..., nn.Module] | None = Block, final_norm: bool = True):
        super().__init__()
        self.cfg, self.context = cfg, cfg.block_size
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.positions = positions(cfg) if positions is not None else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([block(cfg, mixer(cfg)) if block is not None else mixer(cfg)
                                     for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.n_embd) if final_norm else nn.Identity()
        self.readout = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def _layer_caches(self) -> list:
        """A new cache from each mixer's ``new_cache()``; None where a mixer keeps none."""
        mixers = [b.mixer if isinstance(b, Block) else b for b in self.blocks]
        return [m.new_cache() if hasattr(m, "new_cache") else None for m in mixers]

    @property
    def cacheable(self) -> bool:
        """Can it sample with a cache? Only if every mixer is causal and keeps a cache."""
        return all(c is not None for c in self._layer_caches())

    def new_cache(self) -> DecoderCache:
        layers = self._layer_caches()
        if any(c is None for c in layers):
            raise ValueError(f"{getattr(self, 'name', type(self).__name__)} cannot sample with a cache: "
                             f"a mixer is not causal, so every new token changes earlier outputs")
        return DecoderCache(layers)

    def forward(self, idx: torch.Tensor, cache: DecoderCache | None = None) -> torch.Tensor:
        """Logits (B, T, V) for tokens (B, T). (Each layer's weights: ``attention.recording()``.)

        With a ``cache`` (from ``new_cache``), ``idx`` holds the new tokens only: the prompt, then one token per call.
        """
        T = idx.shape[1]
        if cache is not None and cache.pos and T != 1:
            raise ValueError(f"with a cache, feed the prompt once and then one token at a time (got {T})")
        start = cache.pos if cache is not None else 0            # position of idx[:, 0]
        x = self.tok_emb(idx)                                    # (B, T, C)
        if self.positions is not None:
            x = self.positions(x, start) if start else self.positions(x)   # (B, T, C)
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            kw = {} if cache is None else {"cache": cache.layers[i]}
            x = block(x, **kw)                                   # (B, T, C)
        if cache is not None:
            cache.pos += T
        return self.readout(self.ln_f(x))                        # (B, T, V)
