"""Every model the book has defined so far, by name, for the training loop and the CLI.

Notebook: notebooks/01_attention_in_rnns.ipynb (the list grows with each chapter).
"""
from __future__ import annotations

import torch.nn as nn

from .attention import AttentionLM, MultiHeadLM, PositionalAttentionLM, UnmaskedAttentionLM
from .blocks import PostLNDecoder, TransformerDecoder
from .config import ModelConfig
from .fill import VoiceFill
from .rnn import LSTMAttention, LSTMModel

MODELS: dict[str, type[nn.Module]] = {
    "lstm": LSTMModel,                              # chapter 1
    "lstm-attention": LSTMAttention,                # chapter 1
    "fill": VoiceFill,                              # chapter 2: fill in a hidden voice
    "attention-unmasked": UnmaskedAttentionLM,      # chapter 3: the leak (with positions)
    "attention-positions": PositionalAttentionLM,   # chapter 3: its masked twin
    "attention": AttentionLM,                       # chapter 3: one causal head, no positions
    "multi-head": MultiHeadLM,                      # chapter 4
    "transformer": TransformerDecoder,              # chapter 5: pre-LN blocks, no positions
    "transformer-post-ln": PostLNDecoder,           # chapter 5
}


def build_model(name: str, cfg: ModelConfig) -> nn.Module:
    """Instantiate the model called ``name`` with ``cfg``."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    return MODELS[name](cfg)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
