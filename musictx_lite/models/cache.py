"""Sampling with a cache: what each layer keeps between steps, so that no step recomputes an earlier token.

Notebook: notebooks/11_comparison.ipynb ("Sampling fast: the key/value cache").
Chapter 10 gave the causal Fourier mixers their caches (``fnet``); this module
gives one to every other part that needs it, without a line in the classes the
earlier chapters show:

- attention keeps its keys and values (``KVCache``): a new token needs one query
  against the stored keys, ``attend_last``;
- local attention keeps only the current and the previous block (``LocalCache``);
- an LSTM keeps its state, and with attention its past hidden states (``LSTMCache``);
- a decoder keeps each layer's cache and the one position counter (``DecoderCache``).

Each part gets the extension as a mixin, one per class (``CACHED``).
``with_cache(model)`` gives every module of a model the extension of its class,
in place (as ``torch.nn.utils.parametrize`` does): the parameters, their names
and the outputs without a cache stay exactly as they were. ``build_model``
calls it, so every model of the registry samples with a cache where its mixers
are causal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import CausalHead, MultiHeadAttention, attention_fast, record
from .blocks import Block
from .decoder import Decoder
from .local import LocalAttention
from .relative import ALiBi, BiasedAttention, RelativeGlobal, RotaryAttention
from .rnn import LSTMAttention, LSTMModel


@dataclass
class KVCache:
    """A layer's keys and values while sampling: (..., t, d) each; None before the prompt."""

    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    @property
    def seen(self) -> int:
        """The tokens seen so far, which is the position of the next one."""
        return 0 if self.k is None else self.k.shape[-2]


def remember(cache: KVCache, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Append this call's keys and values (..., T, d) to those in ``cache``; return all of them.

    When sampling, the keys and values of earlier tokens never change, so each
    step computes them for the new token only.
    """
    if cache.k is not None:
        k, v = torch.cat([cache.k, k], dim=-2), torch.cat([cache.v, v], dim=-2)   # (..., t + T, d)
    cache.k, cache.v = k, v
    return k, v


def one_at_a_time(T: int, seen: int) -> None:
    if seen and T != 1:
        raise ValueError(f"with a cache, feed the prompt once and then one token at a time (got {T})")


class CausalHeadWithCache:
    """``CausalHead`` with a key/value cache."""

    def new_cache(self) -> KVCache:
        return KVCache()

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        if cache is None:
            return super().forward(x)
        one_at_a_time(x.shape[1], cache.seen)
        q, k, v = self.query(x), self.key(x), self.value(x)            # (B, T, hs) each, new tokens only
        k, v = remember(cache, k, v)                                    # (B, t + T, hs)
        out, _ = attention_fast(q, k, v, causal=True)                   # (B, T, hs)
        return out


class AttentionWithCache:
    """``MultiHeadAttention``, and every mixer built on it, with a key/value cache.

    The prompt runs as without a cache; each later token is one query, the last
    position, against every key kept: ``attend_last``. A subclass whose scores
    need more than q and k (relative terms, rotations) says how, or falls back to
    attending with the queries padded to the keys' length (right, but quadratic).
    """

    def new_cache(self) -> KVCache | None:
        """An empty cache; None without the causal mask: then every new token changes the earlier
        outputs, and nothing computed before can be kept."""
        return KVCache() if self.causal else None

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        if cache is None:
            return super().forward(x)
        one_at_a_time(x.shape[1], cache.seen)
        q, k, v = self.split_heads(x)                                   # (B, nh, T, hs) each, new tokens only
        k, v = self.extend(cache, k, v)                                 # (B, nh, Tk, hs): the keys kept
        if q.shape[-2] == k.shape[-2]:                                  # the prompt
            y, _ = self.attend(q, k, v, need_weights=not self.fast)
        else:
            y, _ = self.attend_last(q, k, v)                            # (B, nh, 1, hs)
        return self.merge_heads(y)                                      # (B, T, C)

    def extend(self, cache: KVCache, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values the new queries see: every earlier one and their own."""
        return remember(cache, k, v)

    def attend_last(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """One query (B, nh, 1, hs), the last of the Tk positions, against every key: pad, attend, keep it."""
        padded = F.pad(q, (0, 0, k.shape[-2] - 1, 0))                   # (B, nh, Tk, hs)
        y, _ = self.attend(padded, k, v, need_weights=False)
        return y[..., -1:, :], None


class MultiHeadAttentionWithCache(AttentionWithCache):
    def attend_last(self, q, k, v):
        return attention_fast(q, k, v, causal=self.causal)              # one query sees every key


class BiasedAttentionWithCache(AttentionWithCache):
    def attend_last(self, q, k, v):
        if not hasattr(self.score_bias, "last"):                        # a bias with no extension of its own
            return super().attend_last(q, k, v)
        bias = self.score_bias.last(q, k.shape[-2])                     # (B or 1, nh, 1, Tk)
        return attention_fast(q, k, v, bias=bias)


class RelativeGlobalWithCache:
    def last(self, q: torch.Tensor, n_keys: int) -> torch.Tensor:
        """S^rel / sqrt(d) (B, nh, 1, n_keys) of one query at the last position: q E^r^T needs no skew,
        it already has one column per key, distance j - (n_keys - 1)."""
        E = self.table(n_keys).to(q.dtype)                              # (nh, n_keys, hs)
        return q / math.sqrt(q.shape[-1]) @ E.transpose(-2, -1)


class ALiBiWithCache:
    def last(self, q: torch.Tensor, n_keys: int) -> torch.Tensor:
        """m_h (j - (n_keys - 1)) for the keys j of one query at the last position: (1, nh, 1, n_keys)."""
        d = torch.arange(1 - n_keys, 1, device=q.device, dtype=q.dtype)    # (n_keys,), <= 0
        return (self.slopes.to(q.dtype)[:, None, None] * d)[None]


class RotaryAttentionWithCache(AttentionWithCache):
    def attend_last(self, q, k, v):
        q = self.rotary(F.pad(q, (0, 0, k.shape[-2] - 1, 0)))[..., -1:, :]   # rotated as the last position
        return attention_fast(q, self.rotary(k), v)


@dataclass
class LocalCache(KVCache):
    """The keys and values local attention keeps: from ``first``, the start of the previous block."""

    first: int = 0                                                      # position of the first key kept

    @property
    def seen(self) -> int:
        return self.first + super().seen


class LocalAttentionWithCache(AttentionWithCache):
    """``LocalAttention`` keeps the current block and the previous one: at most 2N keys, however long
    the sample."""

    def new_cache(self) -> LocalCache:
        return LocalCache()

    def extend(self, cache: LocalCache, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values from the start of the previous block; keep what the next token will need."""
        k, v = remember(cache, k, v)                                    # (B, nh, n - first, hs)
        keep = max(0, (cache.seen // self.N - 1) * self.N)              # the next token sees keys from here on
        drop = keep - cache.first
        cache.k, cache.v, cache.first = k[..., drop:, :], v[..., drop:, :], keep
        return k, v

    def attend_last(self, q, k, v):
        """One new query, the last of the kept keys: distances -(Tk - 1) .. 0, all visible."""
        Tk, d = k.shape[-2], q.shape[-1]
        rel = q @ self.E[:, 2 * self.N - Tk:].to(q.dtype).transpose(-2, -1)   # (B, nh, 1, Tk)
        w = F.softmax((q @ k.transpose(-2, -1) + rel) / math.sqrt(d), dim=-1)   # (B, nh, 1, Tk)
        record(w)
        return w @ v, None                                              # (B, nh, 1, hs)


class BlockWithCache:
    """``Block`` passing its mixer's cache on."""

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        if cache is None:
            return super().forward(x)
        if self.pre_ln:
            x = x + self.mixer(self.ln1(x), cache=cache)                # (B, T, C)
            return x + self.ff(self.ln2(x))
        x = self.ln1(x + self.mixer(x, cache=cache))
        return self.ln2(x + self.ff(x))


class DecoderCache:
    """What a decoder keeps between sampling steps: how many tokens it has seen, and each layer's cache."""

    def __init__(self, layers: list):
        self.pos = 0
        self.layers = layers


class DecoderWithCache:
    """``Decoder`` sampling with a ``DecoderCache``: the prompt once, then one token per call."""

    def layer_caches(self) -> list:
        """A new cache from each mixer's ``new_cache()``; None where a mixer keeps none."""
        mixers = [b.mixer if isinstance(b, Block) else b for b in self.blocks]
        return [m.new_cache() if hasattr(m, "new_cache") else None for m in mixers]

    @property
    def cacheable(self) -> bool:
        """Can it sample with a cache? Only if every mixer is causal and keeps a cache."""
        return all(c is not None for c in self.layer_caches())

    def new_cache(self) -> DecoderCache:
        layers = self.layer_caches()
        if any(c is None for c in layers):
            raise ValueError(f"{getattr(self, 'name', type(self).__name__)} cannot sample with a cache: "
                             f"a mixer is not causal, so every new token changes earlier outputs")
        return DecoderCache(layers)

    def forward(self, idx: torch.Tensor, cache: DecoderCache | None = None) -> torch.Tensor:
        """Logits (B, T, V); with a ``cache``, ``idx`` holds the new tokens only."""
        if cache is None:
            return super().forward(idx)
        T = idx.shape[1]
        one_at_a_time(T, cache.pos)
        x = self.tok_emb(idx)                                           # (B, T, C)
        if self.positions is not None:
            x = self.positions(x, cache.pos)                            # positions pos .. pos + T - 1
        x = self.drop(x)
        for block, layer in zip(self.blocks, cache.layers):
            x = block(x, cache=layer)                                   # (B, T, C)
        cache.pos += T
        return self.readout(self.ln_f(x))                               # (B, T, V)


@dataclass
class LSTMCache:
    """What an LSTM keeps while sampling: its last state, and with attention every hidden state."""

    state: tuple[torch.Tensor, torch.Tensor] | None = None            # (h, c), (n_layers, B, C) each
    h: torch.Tensor | None = None                                      # (B, t, C): the attention's keys


class LSTMWithCache:
    """``LSTMModel``: the state (h, c) carries the past, so each step runs the new token only."""

    cacheable = True

    def new_cache(self) -> LSTMCache:
        return LSTMCache()

    def forward(self, idx: torch.Tensor, cache: LSTMCache | None = None) -> torch.Tensor:
        if cache is None:
            return super().forward(idx)
        h, cache.state = self.lstm(self.drop(self.emb(idx)), cache.state)   # (B, T, C)
        return self.readout(self.drop(h))                               # (B, T, V)


class LSTMAttentionWithCache(LSTMWithCache):
    """``LSTMAttention`` also keeps every hidden state: the new ones attend to all of them."""

    def forward(self, idx: torch.Tensor, cache: LSTMCache | None = None) -> torch.Tensor:
        if cache is None:
            return super(LSTMWithCache, self).forward(idx)
        h, cache.state = self.lstm(self.drop(self.emb(idx)), cache.state)   # (B, T, C)
        past = cache.h = h if cache.h is None else torch.cat([cache.h, h], dim=1)   # (B, S, C)
        T, S = h.shape[1], past.shape[1]
        e = self.W(h) @ past.transpose(1, 2) / math.sqrt(h.shape[2])   # (B, T, S)
        e = e.masked_fill(torch.ones(T, S, dtype=torch.bool, device=h.device).triu(S - T + 1), float("-inf"))
        alpha = F.softmax(e, dim=-1)                                    # the new states are the last T
        record(alpha)
        out = torch.tanh(self.combine(torch.cat([h, alpha @ past], dim=-1)))   # (B, T, C)
        return self.readout(self.drop(out))                             # (B, T, V)


# The extension of each class; ``with_cache`` picks the most specific one in a module's class hierarchy.
CACHED: dict[type, type] = {
    Decoder: DecoderWithCache, Block: BlockWithCache, CausalHead: CausalHeadWithCache,
    MultiHeadAttention: MultiHeadAttentionWithCache, BiasedAttention: BiasedAttentionWithCache,
    RotaryAttention: RotaryAttentionWithCache, LocalAttention: LocalAttentionWithCache,
    RelativeGlobal: RelativeGlobalWithCache, ALiBi: ALiBiWithCache,
    LSTMModel: LSTMWithCache, LSTMAttention: LSTMAttentionWithCache,
}
_CLASSES: dict[type, type | None] = {}                                  # class -> its class with the cache


def mixin_for(cls: type) -> type | None:
    """The extension of the nearest class in ``cls``'s hierarchy that has one (None if none has). A mixer
    built on ``MultiHeadAttention`` with its own ``attend`` and no extension of its own (Shaw's) gets the
    padded fallback of ``AttentionWithCache``: one query through its own ``attend``."""
    for i, base in enumerate(cls.__mro__):
        if base in CACHED:
            if base is MultiHeadAttention and any("attend" in vars(c) for c in cls.__mro__[:i]):
                return AttentionWithCache
            return CACHED[base]
    return None


def cached_class(cls: type) -> type | None:
    """``cls`` with its extension mixed in (made once); None if it has none, or has it already."""
    if getattr(cls, "_with_cache", False):
        return None
    if cls not in _CLASSES:
        mixin = mixin_for(cls)
        _CLASSES[cls] = mixin and type(cls.__name__, (mixin, cls), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
            "_with_cache": True})
    return _CLASSES[cls]


def with_cache(model: nn.Module) -> nn.Module:
    """Give every module of ``model`` the cache of its class, in place; return ``model``."""
    for module in model.modules():
        cls = cached_class(type(module))
        if cls is not None:
            module.__class__ = cls
    return model
