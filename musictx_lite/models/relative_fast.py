"""Relative global attention, fast: the skew as a strided view, causal chunks that recompute
instead of storing, and FlexAttention on a GPU. The same numbers as the readable skew.

Notebook: notebooks/08_skew.ipynb

The readable skew (``relative.skew``) builds S^rel with a pad and a reshape, two
copies of an (L, L) matrix per head, and autograd keeps every (L, L) tensor of
the layer for the backward pass. ``relative_attention`` does four things instead:

1. The skew is a view. In the row-major (n, e) matrix rel = Q E^r^T of queries
   e-n..e-1 and distances -(e-1)..0, S^rel[a, j] = rel[a, j + n - 1 - a] sits at
   flat index a e + j + n - 1 - a = a (e - 1) + j + (n - 1): the same memory,
   read with rows of e - 1 from offset n - 1 (``skewed``). No copy.
2. Causal chunks. Queries in chunks of n see keys 0..e-1 only, so the blocks above
   the diagonal are never computed, and each chunk's (n, e) scores stay small.
3. Recompute, do not store. The forward pass keeps q, k, v, E^r and the output;
   the backward pass recomputes each chunk's weights: memory O(n L) per head.
4. The gradient of a view is the reverse view. With n - 1 zeros in front of
   dS (n, e), dS[a, c + a - (n - 1)], the gradient of rel[a, c], sits at flat
   index a (e + 1) + c: rows of e + 1 (``unskewed``). Above the diagonal dS is 0,
   which is exactly what the entries with c < n - 1 - a must read.

On a GPU, FlexAttention fuses the whole layer: ``flex_relative_attention`` adds
rel[i, j - i + L - 1] to each score in a ``score_mod``. Its backward pass needs
a GPU (tests/model/test_relative_fast.py checks it there and skips elsewhere).
"""
from __future__ import annotations

import math

import torch

from .. import settings
from .attention import is_recording
from .config import ModelConfig
from .relative import BiasedAttention, RelativeGlobal

CHUNK = 128          # queries per chunk: of 32 to 512, 64 and 128 were fastest on 2 CPU cores, L = 1024 to 4096


def skewed(rel: torch.Tensor) -> torch.Tensor:
    """S^rel (..., n, e) from a contiguous rel = Q E^r^T (..., n, e) of the last n of e queries,
    column c for distance c - (e - 1): a view, S[a, j] = rel[a, j + n - 1 - a]. Above the diagonal
    (j > e - n + a) the entries are undefined and must be masked."""
    *lead, n, e = rel.shape
    strides = rel.stride()[:-2] + (e - 1, 1)                              # rows of e - 1
    return rel.as_strided((*lead, n, e), strides, rel.storage_offset() + n - 1)


def unskewed(ds: torch.Tensor) -> torch.Tensor:
    """The gradient of ``rel`` from the gradient ``ds`` (..., n, e) of ``skewed(rel)``, 0 above the
    diagonal: G[a, c] = ds[a, c + a - (n - 1)] (0 where that column is negative)."""
    *lead, n, e = ds.shape
    buf = ds.new_zeros(*lead, n * e + n - 1)                              # n - 1 zeros, then ds
    buf[..., n - 1:] = ds.flatten(-2)
    return buf.as_strided((*lead, n, e), buf.stride()[:-1] + (e + 1, 1))  # rows of e + 1


def _chunk_scores(q: torch.Tensor, k: torch.Tensor, E: torch.Tensor | None, s: int, e: int) -> torch.Tensor:
    """The logits (B, nh, n, e) of the scaled queries s..e-1 against keys 0..e-1, the future at -inf."""
    qc = q[:, :, s:e]                                                     # (B, nh, n, d)
    scores = qc @ k[:, :, :e].transpose(-2, -1)                           # (B, nh, n, e)
    if E is not None:                                                     # + S^rel
        scores += skewed(qc @ E[:, -e:].transpose(-2, -1))                # E: distances -(e-1)..0
    future = torch.ones(e - s, e - s, dtype=torch.bool, device=q.device).triu_(1)
    scores[..., s:].masked_fill_(future, float("-inf"))                   # only the last n keys can be ahead
    return scores


class _RelativeAttention(torch.autograd.Function):
    """softmax((Q K^T + S^rel) / sqrt(d)) V, causal, in chunks of queries; E = None: no S^rel."""

    @staticmethod
    def forward(ctx, q, k, v, E, chunk: int):
        qs = q * (1 / math.sqrt(q.shape[-1]))                             # scale (L, d), not (L, L)
        y = torch.empty_like(q)                                           # (B, nh, L, d)
        for s in range(0, q.shape[-2], chunk):
            e = min(s + chunk, q.shape[-2])
            y[:, :, s:e] = torch.softmax(_chunk_scores(qs, k, E, s, e), dim=-1) @ v[:, :, :e]
        ctx.save_for_backward(qs, k, v, E, y)
        ctx.chunk = chunk
        return y

    @staticmethod
    def backward(ctx, dy):
        qs, k, v, E, y = ctx.saved_tensors
        L = qs.shape[-2]
        dq, dk, dv = torch.empty_like(qs), torch.zeros_like(k), torch.zeros_like(v)
        dE = None if E is None else torch.zeros_like(E)
        D = (dy * y).sum(-1, keepdim=True)                                # (B, nh, L, 1): sum_j w_ij dw_ij
        for s in range(0, L, ctx.chunk):
            e = min(s + ctx.chunk, L)
            qc, dyc = qs[:, :, s:e], dy[:, :, s:e]                        # (B, nh, n, d)
            w = torch.softmax(_chunk_scores(qs, k, E, s, e), dim=-1)      # (B, nh, n, e), recomputed
            dv[:, :, :e] += w.transpose(-2, -1) @ dyc
            ds = (dyc @ v[:, :, :e].transpose(-2, -1) - D[:, :, s:e]) * w  # (B, nh, n, e): softmax backward
            dq[:, :, s:e] = ds @ k[:, :, :e]
            dk[:, :, :e] += ds.transpose(-2, -1) @ qc
            if E is not None:
                G = unskewed(ds)                                          # (B, nh, n, e): d rel
                dq[:, :, s:e] += G @ E[:, -e:]
                dE[:, -e:] += (G.transpose(-2, -1) @ qc).sum(0)
        return dq * (1 / math.sqrt(qs.shape[-1])), dk, dv, dE, None


def relative_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, E: torch.Tensor | None,
                       chunk: int = CHUNK) -> torch.Tensor:
    """Causal softmax((Q K^T + S^rel) / sqrt(d)) V for (B, nh, L, d) inputs, S^rel from ``E`` (nh, L, d),
    the vectors for distances -(L-1)..0 (``RelativeGlobal.table(L)``); ``E=None``: plain causal attention."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    return _RelativeAttention.apply(q, k, v, E, chunk)


_FLEX: dict = {}


def flex_relative_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, E: torch.Tensor,
                            compiled: bool = True) -> torch.Tensor:
    """The same attention with FlexAttention: the scores, the relative term, the mask and the
    softmax in one kernel. rel = Q E^r^T / sqrt(d) is computed first, and the ``score_mod`` reads
    rel[b, h, i, j - i + L - 1]. Its backward pass runs on a GPU only; ``compiled=False`` runs
    FlexAttention's unfused reference (forward only on a CPU)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    L = q.shape[-2]
    rel = q @ E.transpose(-2, -1) / math.sqrt(q.shape[-1])               # (B, nh, L, L)

    def score_mod(score, b, h, i, j):
        return score + rel[b, h, i, (j - i + L - 1).clamp(0, L - 1)]      # clamped: the future is masked

    def causal(b, h, i, j):
        return j <= i

    key = (L, str(q.device))
    if key not in _FLEX:
        _FLEX[key] = create_block_mask(causal, None, None, L, L, device=q.device)
    if compiled and "fn" not in _FLEX:
        _FLEX["fn"] = torch.compile(flex_attention, dynamic=False)
    fn = _FLEX["fn"] if compiled else flex_attention
    return fn(q, k, v, score_mod=score_mod, block_mask=_FLEX[key])


IMPLS = ("skew", "chunked", "flex")


CHUNKED_FROM = 1024    # on a CPU, the chunked skew from this many queries on: the shortest length at which it
                       # measured faster than the readable skew (bench-relative-cpu: 19 ms against 33 at 1,024),
                       # which was the faster at 256 (chapter 8's timing); 512 is not measured


def choose_impl(device: torch.device, length: int | None = None) -> str:
    """``MUSICTX_RELATIVE`` if set; else, on a CPU, ``chunked`` for ``length`` queries from ``CHUNKED_FROM`` on
    (or when no length is given) and ``skew`` below it, where the readable skew measured faster; elsewhere
    ``skew``: on CUDA the readable skew hands its bias to SDPA's fused kernels."""
    cpu = "chunked" if length is None or length >= CHUNKED_FROM else "skew"
    impl = settings.relative() or (cpu if device.type == "cpu" else "skew")
    if impl not in IMPLS:
        raise ValueError(f"MUSICTX_RELATIVE must be one of {', '.join(IMPLS)}, got {impl!r}")
    return impl


class RelativeGlobalAttention(BiasedAttention):
    """The Music Transformer's relative global attention: ``BiasedAttention`` with ``RelativeGlobal``'s
    term, the same parameters, computed by ``relative_attention`` (or FlexAttention) when the
    weights are not needed. ``impl``: "skew" (readable), "chunked", "flex"; None: ``choose_impl``."""

    def __init__(self, cfg: ModelConfig, impl: str | None = None, fast: bool = True):
        super().__init__(cfg, RelativeGlobal(cfg), fast=fast)
        if impl is not None and impl not in IMPLS:
            raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
        self.impl = impl

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool):
        impl = self.impl or choose_impl(q.device, q.shape[-2])
        readable = need_weights or is_recording() or not self.causal or q.shape[-2] != k.shape[-2]
        if impl == "skew" or readable:                                    # weights, no mask, fewer queries
            return super().attend(q, k, v, need_weights)                  # the readable skew
        E = self.score_bias.table(q.shape[-2]).to(q.dtype)               # (nh, L, hs)
        if impl == "flex":
            return flex_relative_attention(q, k, v, E), None
        return relative_attention(q, k, v, E), None
