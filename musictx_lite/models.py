"""Every model the book has defined so far, by name, for the training loop and the CLI.

Notebook: notebooks/01_attention_in_rnns.ipynb (the list grows with each chapter).
"""
from __future__ import annotations

import torch.nn as nn

from .config import ModelConfig
from .rnn import LSTMAttention, LSTMModel

MODELS: dict[str, type[nn.Module]] = {
    "lstm": LSTMModel,               # chapter 1
    "lstm-attention": LSTMAttention,  # chapter 1
}


def build_model(name: str, cfg: ModelConfig) -> nn.Module:
    """Instantiate the model called ``name`` with ``cfg``."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    return MODELS[name](cfg)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
