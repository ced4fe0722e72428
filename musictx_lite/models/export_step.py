"""One step of the sampler as a graph to export: the shipped models in the reader's browser (chapters 11, 12).

Notebooks: notebooks/11_comparison.ipynb ("The model in your browser"), notebooks/12_harmonise.ipynb.

Chapter 11's cache (``cache.py``) lives in Python objects that each step extends.
An exported graph (ONNX, run by ONNX Runtime Web on the book's pages) holds no
state: the page keeps each layer's keys and values, and every call hands the
graph the rows kept so far and gets back the rows of its new tokens.

- ``relative_step`` is chapter 8's relative global attention for T new tokens
  at positions pos..pos+T-1, against the P rows kept (rows pos and after are
  hidden: a prompt passes one unused row) and against themselves:
  S^rel[i, j] = q_i E^r_{j - i + L - 1} for query position i, gathered. Not
  chapter 8's strided skew: ONNX has no operation for a strided view
  (``as_strided``), so an exporter must rewrite it. The rows are (1, P, nh,
  hs), time first, so that the first P rows of the page's buffer are one
  contiguous block, passed without a copy in JavaScript;
- ``DecoderStep`` runs a decoder of pre-LN relative blocks with it: the same
  graph reads a prompt (pos = 0, T tokens) and samples (T = 1);
- ``MelodyMemory`` and ``HarmoniserStep`` split chapter 12's encoder-decoder
  the same way: the encoder's keys and values once per window, then the
  decoder one sampled token per call (a given soprano token is read with the
  next one);
- ``step`` is one call as the page makes it, in PyTorch: the tests compare the
  two, and both with the model itself.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .blocks import Block
from .decoder import Decoder
from .harmoniser import Harmoniser, melody_steps
from .relative import RelativeGlobal


def relative_step(attn: nn.Module, x: torch.Tensor, pos: torch.Tensor, k_past: torch.Tensor,
                  v_past: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Relative global attention (chapter 8) of the new tokens ``x`` (1, T, C) at positions pos..pos+T-1,
    over the keys and values kept (1, P, nh, hs) each, rows 0..pos-1 the past. Returns the output (1, T, C)
    and the new tokens' keys and values (1, T, nh, hs), which the caller keeps at rows pos..pos+T-1."""
    q, k, v = attn.split_heads(x)                                       # (1, nh, T, hs) each
    kp, vp = k_past.transpose(1, 2), v_past.transpose(1, 2)             # (1, nh, P, hs)
    P, T, hs = kp.shape[-2], q.shape[-2], q.shape[-1]
    E = attn.score_bias.E                                               # (nh, L, hs): distances -(L-1)..0
    L = E.shape[1]
    i = pos + torch.arange(T, device=x.device)                          # (T,) the queries' positions
    j = torch.cat([torch.arange(P, device=x.device), i])                # (P + T,) the keys' positions
    d = j[None, :] - i[:, None]                                         # (T, P + T): key j - query i
    hidden = torch.cat([(j[:P] >= pos)[None, :].expand(T, P), d[:, P:] > 0], dim=1)   # unused rows, the future
    rel = q @ E.transpose(-2, -1)                                       # (1, nh, T, L): column c, distance c - (L-1)
    S = rel.gather(-1, (d + L - 1).clamp(0, L - 1).expand(*rel.shape[:-1], P + T))   # (1, nh, T, P + T)
    scores = torch.cat([q @ kp.transpose(-2, -1), q @ k.transpose(-2, -1)], dim=-1)    # (1, nh, T, P + T)
    w = F.softmax(((scores + S) / math.sqrt(hs)).masked_fill(hidden, float("-inf")), dim=-1)
    y = w[..., :P] @ vp + w[..., P:] @ v                                # (1, nh, T, hs)
    return attn.merge_heads(y), k.transpose(1, 2), v.transpose(1, 2)


def check_relative(blocks) -> None:
    """Only pre-LN blocks of relative global attention (``relative``, the harmoniser) have a step graph."""
    for b in blocks:
        if not (getattr(b, "pre_ln", True) and isinstance(getattr(b.mixer, "score_bias", None), RelativeGlobal)):
            raise ValueError("a step graph needs pre-LN blocks of relative global attention (chapter 8's "
                             f"'relative', chapter 12's harmoniser); got {type(b.mixer).__name__}")


class DecoderStep(nn.Module):
    """A relative decoder (chapter 8) as one step of a sampler: tokens (1, T), pos (), and each layer's
    keys and values kept, [k_0, v_0, k_1, v_1, ...] (1, P, nh, hs) each
    -> logits (1, T, V), and each layer's keys and values of the new tokens (1, T, nh, hs)."""

    def __init__(self, model: Decoder):
        super().__init__()
        if model.positions is not None or not all(isinstance(b, Block) for b in model.blocks):
            raise ValueError("a step graph needs a decoder of blocks with relative positions only")
        check_relative(model.blocks)
        self.model = model

    def forward(self, idx: torch.Tensor, pos: torch.Tensor, cache: list[torch.Tensor]):
        m, new = self.model, []
        x = m.tok_emb(idx)                                                # (1, T, C)
        for i, block in enumerate(m.blocks):
            h, k, v = relative_step(block.mixer, block.ln1(x), pos, cache[2 * i], cache[2 * i + 1])
            x = x + h
            x = x + block.ff(block.ln2(x))                                # (1, T, C)
            new += [k, v]
        return m.readout(m.ln_f(x)), new                                  # (1, T, V), 2 n_layers x (1, T, nh, hs)


class MelodyMemory(nn.Module):
    """The harmoniser's encoder once per window: melody (1, S) -> the keys and values each decoder block's
    cross-attention reads, [mk_0, mv_0, mk_1, mv_1, ...] (1, nh, S, hs) each."""

    def __init__(self, model: Harmoniser):
        super().__init__()
        self.model = model

    def forward(self, melody: torch.Tensor) -> list[torch.Tensor]:
        memory = self.model.encode(melody)                                # (1, S, C)
        return [t for b in self.model.blocks for t in b.cross.memory_kv(memory)]


class HarmoniserStep(nn.Module):
    """The harmoniser's decoder (chapter 12) as one step of a sampler: as ``DecoderStep``, with the
    memory's keys and values from ``MelodyMemory``. Positions count from the window's start, as in
    ``generate``."""

    def __init__(self, model: Harmoniser):
        super().__init__()
        check_relative(model.blocks)
        self.model = model

    def forward(self, idx: torch.Tensor, pos: torch.Tensor, cache: list[torch.Tensor], memory: list[torch.Tensor]):
        m, new = self.model, []
        steps = melody_steps(pos + torch.arange(idx.shape[1], device=idx.device))   # (T,)
        x = m.tok_emb(idx)                                                # (1, T, C)
        for i, block in enumerate(m.blocks):
            h, k, v = relative_step(block.mixer, block.ln1(x), pos, cache[2 * i], cache[2 * i + 1])
            x = x + h
            x = x + block.cross(block.ln2(x), steps, kv=(memory[2 * i], memory[2 * i + 1]))   # reads the melody
            x = x + block.ff(block.ln3(x))
            new += [k, v]
        return m.readout(m.ln_f(x)), new


def empty_cache(model: nn.Module) -> list[torch.Tensor]:
    """The page's buffers: zeroed keys and values for each layer, [k_0, v_0, ...] (1, context, nh, hs) each."""
    cfg = model.cfg
    p = next(model.parameters())
    return [p.new_zeros(1, cfg.context, cfg.n_heads, cfg.n_embd // cfg.n_heads) for _ in range(2 * cfg.n_layers)]


@torch.no_grad()
def step(module: nn.Module, idx: torch.Tensor, pos: int, cache: list[torch.Tensor], *memory: list) -> torch.Tensor:
    """One call as the page makes it: the logits (1, T, V) of ``idx`` (1, T) at ``pos``, given the rows
    0..pos-1 of ``cache`` (one unused row for a prompt); the new rows are written into ``cache``."""
    kept = [c[:, :max(pos, 1)] for c in cache]                          # (1, P, nh, hs)
    logits, new = module(idx, torch.tensor(pos), kept, *memory)
    for c, rows in zip(cache, new):
        c[:, pos:pos + idx.shape[1]] = rows
    return logits
