"""Transformer blocks: feed-forward, residual connections, LayerNorm over the features,
pre-LN and post-LN arrangements, and the decoder-only transformer built from them.

Notebook: notebooks/05_blocks.ipynb
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .attention import MultiHeadAttention
from .config import ModelConfig


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
    """Attention then feed-forward, each wrapped in a residual connection and a LayerNorm.

    pre-LN:  x = x + attn(ln1(x));  x = x + ff(ln2(x))
    post-LN: x = ln1(x + attn(x));  x = ln2(x + ff(x))
    """

    def __init__(self, cfg: ModelConfig, pre_ln: bool = True, attn: nn.Module | None = None):
        super().__init__()
        self.pre_ln = pre_ln
        self.ln1, self.ln2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.attn = attn if attn is not None else MultiHeadAttention(cfg, causal=True)
        self.ff = FeedForward(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.attn(self.ln1(x))                       # (B, T, C)
            return x + self.ff(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ff(x))


class TransformerDecoder(nn.Module):
    """Token embedding, a stack of causal blocks, a final LayerNorm (pre-LN) and the read-out.

    No positional encoding: chapter 6 adds one.
    """

    def __init__(self, cfg: ModelConfig, pre_ln: bool = True):
        super().__init__()
        self.cfg, self.context = cfg, cfg.block_size
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg, pre_ln) for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.n_embd) if pre_ln else nn.Identity()
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.tok_emb(idx))                         # (B, T, C)
        for block in self.blocks:
            x = block(x)                                         # (B, T, C)
        return self.head(self.ln_f(x))                           # (B, T, V)


class PostLNDecoder(TransformerDecoder):
    """The original arrangement of Vaswani et al.: LayerNorm after each residual sum."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg, pre_ln=False)
