"""The Transformer's other half: an encoder over the melody, and a decoder that attends to it (chapter 12).

Notebook: notebooks/12_harmonise.ipynb

The harmoniser writes the alto, tenor and bass under a given soprano. It reads
the same raster of tokens as every decoder of the book, S A T B per 16th step,
so the soprano note of a step is always the token just before its alto: the
note the lower voices need most stays at hand. What it adds is the future of
the melody, through the two parts of the translation models attention was born
in (Bahdanau et al.; chapter 1 pointed the same attention at an LSTM's own past):

- an **encoder** over the soprano alone, one token per step, whose attention
  has no mask (chapter 2): every step sees the melody before and after it, with
  relative positions in both directions (chapters 7-8, ``RelativeBoth``);
- **cross-attention** in every decoder block: the queries come from the raster,
  the keys and values from the encoder's output (``CrossAttention``), as a
  translation model attends over the sentence it translates.

The decoder is chapter 8's (relative global attention, pre-LN blocks) with one
cross-attention sublayer per block. It is trained on the alto, tenor and bass
only (``tasks.MELODY``): the soprano is given, never predicted.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from .attention import MultiHeadAttention, attention_fast
from .blocks import Block, FeedForward
from .config import ModelConfig
from .relative import BiasedAttention, distances
from .relative_fast import RelativeGlobalAttention
from .tasks import MELODY


class RelativeBoth(nn.Module):
    """Relative positions in both directions, a ``score_bias``: q_i E_{d_ij}^T / sqrt(d), one learned E
    (2L - 1, hs) per head for the distances d = -(L-1)..(L-1), L in steps; farther distances are clipped to
    the farthest vector (Shaw's clipping). In the encoder d_ij = j - i; across (``CrossAttention``) it is the
    distance from the query's step to the melody's step j."""

    def __init__(self, cfg: ModelConfig, L: int):
        super().__init__()
        hs = cfg.n_embd // cfg.n_heads
        self.L = L
        self.E = nn.Parameter(torch.randn(cfg.n_heads, 2 * L - 1, hs) / math.sqrt(hs))   # (nh, 2L - 1, hs)

    def forward(self, q: torch.Tensor, d: torch.Tensor | None = None) -> torch.Tensor:
        """(B, nh, Tq, Tk) for queries q (B, nh, Tq, hs) and distances ``d`` (Tq, Tk) (default: j - i)."""
        d = distances(q.shape[-2], q.device) if d is None else d
        idx = d.clamp(-(self.L - 1), self.L - 1) + self.L - 1                           # (Tq, Tk)
        rel = (q / math.sqrt(q.shape[-1])) @ self.E.to(q.dtype).transpose(-2, -1)       # (B, nh, Tq, 2L - 1)
        return rel.gather(-1, idx.expand(*rel.shape[:-2], *idx.shape))                  # (B, nh, Tq, Tk)


def melody_steps(positions: torch.Tensor) -> torch.Tensor:
    """The melody step of each raster position of a window that starts with BOS or a bass: position p holds
    a token of step (p - 1) // 4, and its first token (before the first soprano) is step -1."""
    return torch.div(positions - 1, 4, rounding_mode="floor")


class CrossAttention(MultiHeadAttention):
    """Multi-head attention whose queries come from ``x`` and whose keys and values come from ``memory``:
    softmax((Q K^T + S^rel) / sqrt(d)) V with Q = x W_Q and K, V = memory W_K, memory W_V, and S^rel the
    relative term of ``RelativeBoth`` over the distance from each query's melody step to each memory step,
    so that a token knows which note of the melody is its own. No mask: every query may read the whole
    memory. ``memory_kv`` computes K and V once, for a sampler that asks many queries of one memory."""

    _with_cache = True                   # its cache is ``memory_kv``: cache.with_cache leaves it as it is

    def __init__(self, cfg: ModelConfig, L: int):
        super().__init__(cfg, causal=False)
        C = cfg.n_embd
        del self.qkv
        self.q = nn.Linear(C, C, bias=False)                               # W_Q of all heads
        self.kv = nn.Linear(C, 2 * C, bias=False)                          # [W_K | W_V] of all heads
        self.rel = RelativeBoth(cfg, L)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, C = t.shape
        return t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)   # (B, nh, T, hs)

    def memory_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V (B, nh, S, hs) each, of the memory (B, S, C)."""
        k, v = self.kv(memory).split(memory.shape[-1], dim=-1)
        return self._heads(k), self._heads(v)

    def forward(self, x: torch.Tensor, steps: torch.Tensor, memory: torch.Tensor | None = None,
                kv: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """(B, T, C) from x (B, T, C), the melody step of each query ``steps`` (T,), and the memory (B, S, C)
        or its ``memory_kv``."""
        k, v = kv if kv is not None else self.memory_kv(memory)
        q = self._heads(self.q(x))                                         # (B, nh, T, hs)
        d = torch.arange(k.shape[-2], device=x.device)[None, :] - steps[:, None]   # (T, S): step j - own
        y, _ = attention_fast(q, k, v, bias=self.rel(q, d), need_weights=not self.fast)   # (B, nh, T, hs)
        return self.merge_heads(y)                                        # (B, T, C)


class CrossBlock(nn.Module):
    """A decoder block with cross-attention, pre-LN: causal self-attention, then attention to the memory,
    then the feed-forward, each in a residual connection:

        x = x + self(ln1(x));  x = x + cross(ln2(x), memory);  x = x + ff(ln3(x))
    """

    def __init__(self, cfg: ModelConfig, L: int):
        super().__init__()
        self.mixer = RelativeGlobalAttention(cfg)                         # chapter 8's, causal
        self.cross = CrossAttention(cfg, L)
        self.ln1, self.ln2, self.ln3 = (nn.LayerNorm(cfg.n_embd) for _ in range(3))
        self.ff = FeedForward(cfg)

    def forward(self, x: torch.Tensor, steps: torch.Tensor, memory: torch.Tensor | None = None,
                kv: tuple[torch.Tensor, torch.Tensor] | None = None, cache=None) -> torch.Tensor:
        """(B, T, C). Sampling passes the memory's ``kv`` (computed once) and the self-attention's ``cache``."""
        x = x + (self.mixer(self.ln1(x)) if cache is None else self.mixer(self.ln1(x), cache=cache))
        x = x + self.cross(self.ln2(x), steps, memory, kv)                # (B, T, C): reads the melody
        return x + self.ff(self.ln3(x))


class Harmoniser(nn.Module):
    """The encoder-decoder of chapter 12. ``forward(idx)`` reads a raster of tokens (B, T), BOS or a bass
    first, as every decoder does, and returns next-token logits (B, T, V); its melody, ``idx[:, 1::4]``, is
    all the soprano notes of the window (its context), the future ones included, and the encoder reads them.
    A sampler that knows the melody before the raster holds it passes ``melody`` (B, S) instead."""

    task = MELODY

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg, self.context = cfg, cfg.context
        steps = -(-cfg.context // 4)                                      # the melody's context, in steps
        self.mel_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.encoder = nn.ModuleList([
            Block(cfg, BiasedAttention(cfg, RelativeBoth(cfg, steps), causal=False)) for _ in range(cfg.n_layers)])
        self.ln_enc = nn.LayerNorm(cfg.n_embd)
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([CrossBlock(cfg, steps) for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.readout = nn.Linear(cfg.n_embd, cfg.vocab_size)

    @torch.no_grad()
    def start_from(self, decoder: nn.Module, freeze: bool = False) -> "Harmoniser":
        """Take the weights of a trained decoder of the same size (chapter 8's ``relative``, a shipped model):
        its embedding, its blocks' self-attention, feed-forward and LayerNorms, its read-out. Each
        cross-attention's output starts at zero, so the harmoniser begins as exactly that decoder, and
        training can only add what the melody's future tells it. With ``freeze``, the weights taken stay
        fixed (``requires_grad`` off): only the encoder and the cross-attentions learn."""
        self.tok_emb.load_state_dict(decoder.tok_emb.state_dict())
        for mine, theirs in zip(self.blocks, decoder.blocks, strict=True):
            for a, b in (("mixer", "mixer"), ("ln1", "ln1"), ("ln3", "ln2"), ("ff", "ff")):
                getattr(mine, a).load_state_dict(getattr(theirs, b).state_dict())
            nn.init.zeros_(mine.cross.proj.weight)
            nn.init.zeros_(mine.cross.proj.bias)
        self.ln_f.load_state_dict(decoder.ln_f.state_dict())
        self.readout.load_state_dict(decoder.readout.state_dict())
        taken = [self.tok_emb, self.ln_f, self.readout] + [getattr(b, a) for b in self.blocks
                                                           for a in ("mixer", "ln1", "ln3", "ff")]
        for part in taken:
            part.requires_grad_(not freeze)
        return self

    def encode(self, melody: torch.Tensor) -> torch.Tensor:
        """The encoder's output (B, S, C) for the soprano tokens (B, S), one per step."""
        m = self.drop(self.mel_emb(melody))                               # (B, S, C)
        for block in self.encoder:
            m = block(m)                                                  # (B, S, C): no mask
        return self.ln_enc(m)

    def forward(self, idx: torch.Tensor, melody: torch.Tensor | None = None,
                cache: "HarmoniserCache | None" = None) -> torch.Tensor:
        """Logits (B, T, V). With a ``cache`` (``new_cache``), ``idx`` holds the new tokens only: the
        melody was read when the cache was made."""
        pos = 0 if cache is None else cache.pos
        if cache is None:
            memory = self.encode(idx[:, 1::4] if melody is None else melody)   # (B, S, C)
        steps = melody_steps(torch.arange(pos, pos + idx.shape[1], device=idx.device))   # (T,)
        x = self.drop(self.tok_emb(idx))                                  # (B, T, C)
        for i, block in enumerate(self.blocks):
            if cache is None:
                x = block(x, steps, memory)                               # (B, T, C)
            else:
                x = block(x, steps, kv=cache.kv[i], cache=cache.layers[i])
        if cache is not None:
            cache.pos += idx.shape[1]
        return self.readout(self.ln_f(x))                                 # (B, T, V)

    @property
    def cacheable(self) -> bool:
        """Can it sample with a cache? Once ``cache.with_cache`` (``build_model``) extended its mixers."""
        return all(hasattr(b.mixer, "new_cache") for b in self.blocks)

    @torch.no_grad()
    def new_cache(self, melody: torch.Tensor) -> "HarmoniserCache":
        """A sampler's cache for one window: the encoder run once over its ``melody`` (B, S), each block's
        keys and values of that memory, and each self-attention's key/value cache, empty."""
        memory = self.encode(melody)
        return HarmoniserCache([b.cross.memory_kv(memory) for b in self.blocks],
                               [b.mixer.new_cache() for b in self.blocks])


class HarmoniserCache:
    """What the harmoniser keeps between sampling steps: the memory's keys and values per block (computed
    once per window), each self-attention's cache, and the position of the next token."""

    def __init__(self, kv: list, layers: list):
        self.kv, self.layers, self.pos = kv, layers, 0
