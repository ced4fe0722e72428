"""Chapter 10 exercises: the 2-D DFT as real matrix products, how far to pad an FFT convolution,
and generating step by step with the causal mixers' caches.

Notebook: notebooks/10_fnet.ipynb
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn as nn

from musictx_lite.device import evaluating, to_model
from musictx_lite.io.tokens import BOS, encode
from musictx_lite.models.fnet import causal_conv_direct

__all__ = ["fourier_by_matmul", "fft_conv_n", "cached_logits", "exercise_10_1", "exercise_10_2",
           "exercise_10_3"]


def fourier_by_matmul(x: torch.Tensor) -> torch.Tensor:
    """Re(D_T X D_C) for (..., T, C) x with real matrices only: D_n = Cos_n - i Sin_n, so
    Re(D_T X D_C) = Cos_T X Cos_C - Sin_T X Sin_C."""
    T, C = x.shape[-2:]

    def cos_sin(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        a = 2 * math.pi * torch.outer(torch.arange(n), torch.arange(n)).double() / n
        return torch.cos(a).to(x.dtype), torch.sin(a).to(x.dtype)

    cT, sT = cos_sin(T)
    cC, sC = cos_sin(C)
    return cT @ x @ cC - sT @ x @ sC                                  # (..., T, C)


def fft_conv_n(u: torch.Tensor, h: torch.Tensor, n: int) -> torch.Tensor:
    """``causal_fft_conv`` with the FFT length ``n`` as a parameter: (B, T, C), (C, K) -> (B, T, C)."""
    T = u.shape[1]
    U = torch.fft.rfft(u.transpose(1, 2), n=n)                        # (B, C, n // 2 + 1)
    y = torch.fft.irfft(U * torch.fft.rfft(h, n=n), n=n)              # (B, C, n): circular, length n
    y = nn.functional.pad(y, (0, max(0, T - n)))                      # n < T: too few outputs, zeros
    return y[..., :T].transpose(1, 2)


@torch.no_grad()
def cached_logits(model: nn.Module, tokens, prefill: int = 1) -> torch.Tensor:
    """Next-token logits (T, V) of a pre-LN ``Decoder`` with cacheable mixers, computed with caches:
    the first ``prefill`` tokens in one call, then one token per call. Returned on the CPU."""
    idx = to_model(model, tokens)[None]                                # (1, T)
    caches = [block.mixer.new_cache() for block in model.blocks]     # one per layer, empty
    if any(c is None for c in caches):                                 # FNet's mixer: it sees the future
        raise ValueError("a mixer keeps no cache: this model cannot generate token by token")
    out = []
    with evaluating(model):
        for a, b in [(0, prefill)] + [(t, t + 1) for t in range(prefill, idx.shape[1])]:
            x = model.tok_emb(idx[:, a:b])                             # (1, n, C): the new tokens only
            for block, cache in zip(model.blocks, caches):
                x = x + block.mixer(block.ln1(x), cache=cache)         # reads the cache, appends to it
                x = x + block.ff(block.ln2(x))
            out.append(model.readout(model.ln_f(x))[0].float().cpu())  # (n, V)
    return torch.cat(out)                                              # (T, V)


def exercise_10_1(T: int = 12, C: int = 8) -> float:
    torch.manual_seed(0)
    x = torch.randn(2, T, C, dtype=torch.float64)
    gap = (fourier_by_matmul(x) - torch.fft.fft2(x, dim=(-2, -1)).real).abs().max().item()
    assert gap < 1e-10
    print(f"Cos X Cos - Sin X Sin equals fft2(x).real for (T, C) = ({T}, {C}): max gap {gap:.1e}")
    for L, width in [(128, 64), (1024, 128), (8192, 128)]:
        matmul = 2 * 2 * (L * L * width + L * width * width)           # four products, 2 flops per multiply-add
        fft = 5 * L * width * math.log2(L * width)                     # the textbook count for a complex FFT
        print(f"L = {L:5d}, C = {width}: matmuls {matmul / 1e6:10.1f} MFLOP, "
              f"FFT about {fft / 1e6:6.1f} MFLOP ({matmul / fft:5.0f}x fewer)")
    return gap


def exercise_10_2(T: int = 16, K: int = 16) -> dict:
    torch.manual_seed(0)
    u, h = torch.randn(2, T, 3, dtype=torch.float64), torch.randn(3, K, dtype=torch.float64)
    ref = causal_conv_direct(u, h)
    u2 = u.clone()
    u2[:, T // 2 + 1:] = torch.randn_like(u2[:, T // 2 + 1:])         # change the future of t = T / 2
    out = {}
    for n in (T, T + K // 2, T + K - 2, T + K - 1, 2 * T):
        y, y2 = fft_conv_n(u, h, n), fft_conv_n(u2, h, n)
        err = (y - ref).abs().max().item()
        leak = (y[:, : T // 2 + 1] - y2[:, : T // 2 + 1]).abs().max().item()
        out[n] = err < 1e-9
        print(f"n = {n:3d}: max |fft - direct| = {err:8.1e}; past outputs move by {leak:8.1e} "
              f"when the future changes: {'exact' if out[n] else 'wrong, and it leaks'}")
    assert out == {n: n >= T + K - 1 for n in out}
    print(f"the smallest length that works is T + K - 1 = {T + K - 1}; the package pads to 2T")
    return out


def exercise_10_3(model: nn.Module, piece, n_tokens: int = 64, prefill: int = 5) -> dict:
    tokens = encode(piece.pitches)[: n_tokens]
    assert tokens[0] == BOS
    with evaluating(model), torch.no_grad():
        full = model(to_model(model, tokens)[None])[0].float().cpu()  # (T, V): one call
    t0 = time.perf_counter()
    cached = cached_logits(model, tokens, prefill)
    t_cache = time.perf_counter() - t0
    t0 = time.perf_counter()
    with evaluating(model), torch.no_grad():                           # no cache: a full call per new token
        for t in range(prefill, len(tokens)):
            model(to_model(model, tokens[: t + 1])[None])
    t_full = time.perf_counter() - t0
    gap = (cached - full).abs().max().item()
    assert gap < 1e-3, gap
    print(f"{len(tokens)} tokens, prefill {prefill}, then one token per call: max |cached - full| "
          f"logits = {gap:.1e}")
    print(f"time for the {len(tokens) - prefill} steps: with caches {t_cache:.3f} s, recomputing "
          f"every prefix {t_full:.3f} s")
    ratio = t_cache / t_full
    if ratio < 1:                                  # read from the timing, never assumed
        print(f"the caches took {ratio:.2f} of the time of recomputing every prefix")
    else:
        print(f"at {len(tokens)} tokens the caches were not faster ({ratio:.2f} times the time of "
              "recomputing):\nboth ways make one call per new token through every layer, and each "
              "call's fixed cost\n(Python, many small tensor operations) outweighs the arithmetic "
              "on a prefix this short,\nwhich is all the cache saves. That saving grows with the "
              "prefix (a full call redoes\nevery earlier token's feed-forward), so an advantage "
              "could only show at longer prefixes;\nthis timing does not show one.")
    return {"gap": gap, "cached_s": t_cache, "full_s": t_full}

