"""Coconet's way (chapter 12): fill in any hidden notes of a stretch of music, then harmonise by Gibbs sampling.

Notebook: notebooks/12_harmonise.ipynb

Chapter 2's fill model hid one voice of one step and predicted it from the other three. Coconet
(Huang et al., 2017) hides *any* set of notes of a whole passage, and a model trained to fill every such
set can write music in any order: start from random alto, tenor and bass under the melody, then again and
again hide a part of them and draw it anew from the model's prediction given the rest. Hiding much at first
and less and less later (an annealed schedule) lets the early draws fix the large shape and the late ones
polish it.

The model reads the raster of a passage without BOS (S A T B per step), some tokens replaced by MASK, with
attention that has no mask (chapter 2) and relative positions both ways (``harmoniser.RelativeBoth``), and
predicts every token. It is trained on random masks: per crop a rate r drawn uniformly, each token hidden
with probability r, after the orderless NADE of Uria et al. (2014) that Coconet trains (Coconet rescales each
crop's loss by its number of hidden tokens; here every hidden token weighs the same). Coconet's own network is
convolutional, over a piano roll; this is its task and its sampler with chapter 8's attention. The sampler is
Yao et al.'s (2014) annealed blocked Gibbs sampling, as Coconet samples.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..device import evaluating, to_model
from ..io.data import Piece
from ..io.tokens import BOS, HOLD, MASK, PAD, encode
from .blocks import Block
from .config import ModelConfig
from .harmoniser import RelativeBoth
from .relative import BiasedAttention
from .tasks import shift_range, transposed


class MaskedCrops:
    """Random crops of ``length`` tokens (a multiple of 4, on step boundaries, without BOS), each token hidden
    with a probability drawn per crop from U(0, 1), at least one: inputs with MASK, targets (PAD where shown).
    With ``transpose``, each crop moves by a shift that keeps its chorale in range (chapter 11's augmentation)."""

    def __init__(self, pieces: list[Piece], length: int, seed: int = 0, transpose: bool = False):
        if length % 4:
            raise ValueError(f"a crop holds whole steps: length {length} is not a multiple of 4")
        self.length, self.transpose = length, transpose
        self.seqs = [torch.as_tensor(encode(p.pitches)[1:]) for p in pieces]             # no BOS
        self.n_starts = torch.tensor([max(1, (len(s) - length) // 4 + 1) for s in self.seqs], dtype=torch.float)
        self.shifts = [shift_range(p.pitches) for p in pieces]
        self.gen = torch.Generator().manual_seed(seed)

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        full = torch.full((batch_size, self.length), PAD, dtype=torch.long)
        which = torch.multinomial(self.n_starts, batch_size, replacement=True, generator=self.gen)
        for b, i in enumerate(which.tolist()):
            k = int(torch.randint(int(self.n_starts[i]), (1,), generator=self.gen))
            shift = 0
            if self.transpose:
                lo, hi = self.shifts[i]
                shift = lo + int(torch.randint(hi - lo + 1, (1,), generator=self.gen))
            chunk = transposed(self.seqs[i][4 * k: 4 * k + self.length], shift)
            full[b, : len(chunk)] = chunk
        rate = torch.rand(batch_size, 1, generator=self.gen)                            # (B, 1)
        hidden = torch.rand(batch_size, self.length, generator=self.gen) < rate         # (B, L)
        hidden[torch.arange(batch_size), torch.randint(self.length, (batch_size,), generator=self.gen)] = True
        hidden &= full != PAD
        x = torch.where(hidden, torch.full_like(full, MASK), full)
        y = torch.where(hidden, full, torch.full_like(full, PAD))
        return x, y


def hide_lower_voices(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 4T) raster tokens without BOS -> the soprano shown and every alto, tenor and bass hidden, and the
    targets (the hidden tokens; PAD under the soprano)."""
    lower = torch.ones_like(tokens, dtype=torch.bool)
    lower[:, 0::4] = False
    return (torch.where(lower, torch.full_like(tokens, MASK), tokens),
            torch.where(lower, tokens, torch.full_like(tokens, PAD)))


class Infill:
    """Coconet's task: fill in hidden notes. Trained on random masks (``MaskedCrops``); scored by the NLL of
    the alto, tenor and bass of whole pieces when all of them are hidden at once and only the soprano is
    shown, each token predicted from the melody alone: the exact NLL of a model whose lower notes are
    independent given the soprano, which is not the distribution the Gibbs sampler draws from (chapter 12
    says which numbers each way can give)."""

    name = "infill"
    transposes = True

    def sampler(self, pieces: list[Piece], length: int, seed: int, transpose: bool = False) -> MaskedCrops:
        return MaskedCrops(pieces, length - length % 4, seed, transpose)

    def evaluate(self, model: nn.Module, pieces: list[Piece]) -> float:
        return melody_only_nll(model, pieces)


INFILL = Infill()


class Coconet(nn.Module):
    """Embedding (+ a voice vector per token) -> n_layers blocks of attention without a mask, with relative
    positions both ways over the tokens -> read-out: logits (B, T, V) for every token of (B, T)."""

    task = INFILL

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg, self.context = cfg, cfg.context
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.voice_emb = nn.Parameter(torch.randn(4, cfg.n_embd) * 0.02)                 # S, A, T, B
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg, BiasedAttention(cfg, RelativeBoth(cfg, cfg.context), causal=False))
                                     for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.readout = nn.Linear(cfg.n_embd, cfg.vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        voice = self.voice_emb[torch.arange(T, device=idx.device) % 4]      # (T, C): token t is voice t mod 4
        x = self.drop(self.tok_emb(idx) + voice)                                         # (B, T, C)
        for block in self.blocks:
            x = block(x)                                                                 # (B, T, C): no mask
        return self.readout(self.ln_f(x))                                                # (B, T, V)


@torch.no_grad()
def melody_only_nll(model: nn.Module, pieces: list[Piece]) -> float:
    """NLL per alto, tenor and bass token with all three voices hidden and the soprano shown, whole pieces
    (in windows of the model's context where a piece is longer, each window's tokens scored once)."""
    total, count, ctx = 0.0, 0, model.context - model.context % 4
    with evaluating(model):
        for p in pieces:
            s = torch.as_tensor(encode(p.pitches)[1:])                                   # (4T,) no BOS
            whole = len(s) // ctx * ctx
            parts = [s[:whole].view(-1, ctx)] if whole else []                           # (n, ctx): full windows
            if whole < len(s):
                parts.append(s[None, whole:])                                            # the shorter last one
            for windows in parts:
                x, y = hide_lower_voices(to_model(model, windows))
                total += F.cross_entropy(model(x).float().transpose(1, 2), y, ignore_index=PAD,
                                         reduction="sum").item()
                count += int((y != PAD).sum())
    return total / count


def windowed_logits(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Logits (T, V) for a raster without BOS (1, T) of any length, each token read in a window of the
    model's context, as it was trained: windows of ``ctx`` tokens every ``ctx / 2`` (on step boundaries), and
    each token takes the window in which it sits farthest from an edge (at least ``ctx / 4`` tokens of
    music on each side where the piece has them). One pass when the raster fits the context."""
    T, ctx = tokens.shape[1], model.context - model.context % 4
    if T <= ctx:
        return model(tokens)[0].float()
    starts = np.array(list(range(0, T - ctx, ctx // 2)) + [T - ctx])                 # the last one ends at T
    i = np.arange(T)
    margin = np.minimum(i[None] - starts[:, None], starts[:, None] + ctx - 1 - i[None])   # (windows, T)
    best = np.where(margin >= 0, margin, -1).argmax(0)                              # (T,): each token's window
    out = torch.empty(T, model.cfg.vocab_size, device=tokens.device)
    for w, a in enumerate(starts.tolist()):
        mine = torch.as_tensor(np.flatnonzero(best == w), device=tokens.device)
        if len(mine):
            out[mine] = model(tokens[:, a: a + ctx])[0, mine - a].float()
    return out


def gibbs_schedule(n_iter: int, hi: float = 0.9, lo: float = 0.05, eta: float = 0.75) -> np.ndarray:
    """Coconet's annealed share of the free tokens hidden at each of ``n_iter`` steps: from ``hi`` down to
    ``lo`` linearly over the first ``eta`` of the steps, then ``lo``."""
    n = np.arange(n_iter)
    return np.maximum(lo, hi - n / (eta * n_iter) * (hi - lo))


@torch.no_grad()
def gibbs_harmonise(model: nn.Module, soprano: np.ndarray, n_iter: int = 64, temperature: float = 1.0,
                    seed: int | None = 0) -> np.ndarray:
    """Alto, tenor and bass under the soprano tokens (T,), by Gibbs sampling: start from every lower token
    hidden and drawn at once, then ``n_iter`` times hide a share of them (``gibbs_schedule``) and draw them
    again from the model given the rest. A melody longer than the model's context is read in windows of the
    context (``windowed_logits``). Returns the raster tokens with BOS (1 + 4T,)."""
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature}")
    gen = torch.Generator().manual_seed(seed if seed is not None else int(torch.randint(2**31, (1,))))
    T = len(soprano)
    tokens = torch.full((1, 4 * T), MASK, dtype=torch.long)
    tokens[0, 0::4] = torch.as_tensor(np.asarray(soprano))
    free = torch.ones(4 * T, dtype=torch.bool)
    free[0::4] = False
    banned = [PAD, BOS, HOLD, MASK]

    def draw(x: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        logits = windowed_logits(model, to_model(model, x)).cpu()                         # (4T, V)
        logits[:, banned] = float("-inf")
        probs = F.softmax((logits - logits.max(-1, keepdim=True).values) / temperature, -1)
        new = torch.multinomial(probs, 1, generator=gen)[:, 0]                           # (4T,)
        return torch.where(where, new, x[0])[None]

    with evaluating(model):
        tokens = draw(tokens, free)                                                      # every lower note at once
        for share in gibbs_schedule(n_iter):
            hide = free & (torch.rand(4 * T, generator=gen) < share)
            if hide.any():
                tokens = draw(torch.where(hide, torch.full_like(tokens, MASK), tokens), hide)
    return np.r_[BOS, tokens[0].numpy()]
