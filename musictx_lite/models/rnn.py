"""Recurrent baselines: an LSTM language model, and the same LSTM with attention
over its own past hidden states.

Notebook: notebooks/01_attention_in_rnns.ipynb

With row vectors, H = (h_1 .. h_T) stacked as rows (T, C), the attention scores
are e_ij = h_i W h_j^T / sqrt(C) for j <= i (the seed's bilinear score, scaled),
alpha_i = softmax_j(e_i), and the context c_i = sum_j alpha_ij h_j.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import record
from .config import ModelConfig
from .tasks import NEXT_TOKEN


class LSTMModel(nn.Module):
    """Embedding -> LSTM -> linear read-out of next-token logits."""

    task = NEXT_TOKEN
    context: int | None = None   # no limit on how far back it reads

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.lstm = nn.LSTM(cfg.n_embd, cfg.n_embd, cfg.n_layers, batch_first=True,
                            dropout=cfg.dropout if cfg.n_layers > 1 else 0.0)
        self.drop = nn.Dropout(cfg.dropout)
        self.readout = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.drop(self.emb(idx)))       # (B, T, C): every hidden state
        return self.readout(self.drop(h))                # (B, T, V)


class LSTMAttention(LSTMModel):
    """An LSTM whose read-out also sees an attention-weighted sum of its past states."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        C = cfg.n_embd
        self.W = nn.Linear(C, C, bias=False)             # the bilinear score matrix
        self.combine = nn.Linear(2 * C, C)                # [h_i ; c_i] -> C

    def attend(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden states (B, T, C) -> context (B, T, C) and weights alpha (B, T, T)."""
        T, C = h.shape[1], h.shape[2]
        e = self.W(h) @ h.transpose(1, 2) / math.sqrt(C)   # (B, T, T): e_ij = h_i W h_j^T / sqrt(C)
        future = torch.ones(T, T, dtype=torch.bool, device=h.device).triu(1)
        e = e.masked_fill(future, float("-inf"))          # only j <= i
        alpha = F.softmax(e, dim=-1)                       # (B, T, T), rows sum to 1
        return alpha @ h, alpha                            # (B, T, C), (B, T, T)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.drop(self.emb(idx)))         # (B, T, C)
        c, alpha = self.attend(h)                          # (B, T, C), (B, T, T)
        record(alpha)                                      # inside attention.recording()
        out = torch.tanh(self.combine(torch.cat([h, c], dim=-1)))   # (B, T, C)
        return self.readout(self.drop(out))                # (B, T, V)
