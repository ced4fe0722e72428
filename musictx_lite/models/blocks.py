"""Transformer blocks: feed-forward, residual connections, LayerNorm over the features,
and the pre-LN and post-LN arrangements; ``block_decoder`` stacks them in chapter 3's ``Decoder``.

Notebook: notebooks/05_blocks.ipynb
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn

from .attention import MultiHeadAttention
from .config import ModelConfig
from .decoder import Decoder


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * gamma + beta, statistics over the last (feature) axis.

    Each token is normalised on its own: nothing is shared across the batch or
    the sequence. Equal to ``nn.LayerNorm(C)``; the blocks use that one.
    """

    def __init__(self, C: int, eps: float = 1e-5):
        super().__init__()
        self.gamma, self.beta, self.eps = nn.Parameter(torch.ones(C)), nn.Parameter(torch.zeros(C)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)                          # (B, T, 1)
        var = x.var(-1, keepdim=True, unbiased=False)            # (B, T, 1)
        return (x - mean) / torch.sqrt(var + self.eps) * self.gamma + self.beta


class FeedForward(nn.Module):
    """The position-wise MLP: C -> 4C -> C with a GELU, applied to every token alone."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd), nn.Dropout(cfg.dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)                                       # (B, T, C)


class Block(nn.Module):
    """A mixer (attention) then feed-forward, each wrapped in a residual connection and a LayerNorm.

    pre-LN:  x = x + mixer(ln1(x));  x = x + ff(ln2(x))
    post-LN: x = ln1(x + mixer(x));  x = ln2(x + ff(x))
    """

    def __init__(self, cfg: ModelConfig, mixer: nn.Module | None = None, pre_ln: bool = True):
        super().__init__()
        self.pre_ln = pre_ln
        self.mixer = mixer if mixer is not None else MultiHeadAttention(cfg, causal=True)
        self.ln1, self.ln2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.ff = FeedForward(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.mixer(self.ln1(x))                      # (B, T, C)
            x = x + self.ff(self.ln2(x))
        else:
            x = self.ln1(x + self.mixer(x))
            x = self.ln2(x + self.ff(x))
        return x


def block_decoder(cfg: ModelConfig, mixer: Callable[[ModelConfig], nn.Module],
                  positions: Callable[[ModelConfig], nn.Module] | None = None, pre_ln: bool = True) -> Decoder:
    """The decoder of chapter 5 on: every mixer in a ``Block``; pre-LN ends in a final LayerNorm (post-LN
    already ends in one)."""
    if pre_ln:
        return Decoder(cfg, mixer, positions, block=Block, final_norm=nn.LayerNorm)
    return Decoder(cfg, mixer, positions, block=lambda c, m: Block(c, m, pre_ln=False))
