"""Recurrent baselines: an LSTM language model, and the same LSTM with attention
over its own past hidden states.

Notebook: notebooks/01_attention_in_rnns.ipynb

With row vectors, H = (h_1 .. h_T) stacked as rows (T, C), the attention scores
are e_ij = h_i W h_j^T / sqrt(C) for j <= i (the seed's bilinear score, scaled),
alpha_i = softmax_j(e_i), and the context c_i = sum_j alpha_ij h_j.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import record
from .config import ModelConfig
from .tasks import NEXT_TOKEN


@dataclass
class LSTMCache:
    """What an LSTM keeps while sampling (chapter 11): its last state, and with attention every hidden state."""

    state: tuple[torch.Tensor, torch.Tensor] | None = None            # (h, c), (n_layers, B, C) each
    h: torch.Tensor | None = None                                      # (B, t, C): the attention's keys


class LSTMModel(nn.Module):
    """Embedding -> LSTM -> linear read-out of next-token logits."""

    task = NEXT_TOKEN
    context: int | None = None   # no limit on how far back it reads
    cacheable = True             # when sampling, the state (h, c) carries the past (chapter 11)

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.lstm = nn.LSTM(cfg.n_embd, cfg.n_embd, cfg.n_layers, batch_first=True,
                            dropout=cfg.dropout if cfg.n_layers > 1 else 0.0)
        self.drop = nn.Dropout(cfg.dropout)
        self.readout = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def new_cache(self) -> LSTMCache:
        return LSTMCache()

    def run_lstm(self, idx: torch.Tensor, cache: LSTMCache | None) -> torch.Tensor:
        """Hidden states (B, T, C); with a cache, start from the state it holds and store the new one."""
        h, state = self.lstm(self.drop(self.emb(idx)), cache.state if cache is not None else None)
        if cache is not None:
            cache.state = state
        return h

    def forward(self, idx: torch.Tensor, cache: LSTMCache | None = None) -> torch.Tensor:
        h = self.run_lstm(idx, cache)                    # (B, T, C)
        return self.readout(self.drop(h))                # (B, T, V)


class LSTMAttention(LSTMModel):
    """An LSTM whose read-out also sees an attention-weighted sum of its past states."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        C = cfg.n_embd
        self.W = nn.Linear(C, C, bias=False)             # the bilinear score matrix
        self.combine = nn.Linear(2 * C, C)                # [h_i ; c_i] -> C

    def attend(self, h: torch.Tensor, past: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden states (B, T, C) -> context (B, T, C) and weights alpha (B, T, T).

        ``past`` (B, S, C), S >= T, are the states to attend to when sampling with
        a cache: the queries h are the last T of them."""
        past = h if past is None else past
        T, S, C = h.shape[1], past.shape[1], h.shape[2]
        e = self.W(h) @ past.transpose(1, 2) / math.sqrt(C)   # (B, T, S): e_ij = h_i W h_j^T / sqrt(C)
        future = torch.ones(T, S, dtype=torch.bool, device=h.device).triu(S - T + 1)
        e = e.masked_fill(future, float("-inf"))          # only j <= i
        alpha = F.softmax(e, dim=-1)                       # (B, T, S), rows sum to 1
        return alpha @ past, alpha                         # (B, T, C), (B, T, S)

    def forward(self, idx: torch.Tensor, cache: LSTMCache | None = None) -> torch.Tensor:
        h = self.run_lstm(idx, cache)                      # (B, T, C)
        past = None
        if cache is not None:                              # every state so far
            past = cache.h = h if cache.h is None else torch.cat([cache.h, h], dim=1)
        c, alpha = self.attend(h, past)                    # (B, T, C), (B, T, T)
        record(alpha)                                      # inside attention.recording()
        out = torch.tanh(self.combine(torch.cat([h, c], dim=-1)))   # (B, T, C)
        return self.readout(self.drop(out))                # (B, T, V)
