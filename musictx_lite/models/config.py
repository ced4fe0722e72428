"""The model configuration every chapter's models share.

Notebook: notebooks/01_attention_in_rnns.ipynb (first used there).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..io.tokens import VOCAB_SIZE


@dataclass
class ModelConfig:
    """Sizes of a model. RNNs read ``n_embd`` as the hidden size and ignore ``n_heads``."""

    vocab_size: int = VOCAB_SIZE
    context: int = 128       # the most tokens a transformer sees at once; the length of training crops
    n_layers: int = 1
    n_heads: int = 4
    n_embd: int = 192
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for k in ("vocab_size", "context", "n_layers", "n_heads", "n_embd"):
            if not isinstance(getattr(self, k), int) or getattr(self, k) < 1:
                raise ValueError(f"{k} must be a positive integer, got {getattr(self, k)!r}")
        if self.n_embd % self.n_heads:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_heads={self.n_heads}: "
                             f"each head needs n_embd / n_heads features")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> dict:
        return asdict(self)
