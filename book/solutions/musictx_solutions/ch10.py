"""Chapter 10 exercises: the 2-D DFT as real matrix products, how far to pad an FFT convolution,
and generating step by step with the causal mixers' caches.

Notebook: notebooks/10_fnet.ipynb
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Callable

import torch
import torch.nn as nn

from ...device import evaluating, to_model
from ...io.tokens import BOS, N_SPECIAL, VOCAB_SIZE, encode
from ...models.config import ModelConfig
from ...models.fnet import causal_conv_direct
from ...models.registry import build_model
from . import grading

__all__ = ["fourier_by_matmul", "fft_conv_n", "cached_logits", "exercise_10_1", "exercise_10_2",
           "exercise_10_3", "check_10_1", "check_10_2", "check_10_3"]


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


# ----------------------------------------------------------------------------- checkers

_FFTS = ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
         "hfft", "ihfft")


@contextlib.contextmanager
def _no_fft():
    """Inside: calling any torch.fft transform is a fail line."""
    saved = {name: getattr(torch.fft, name) for name in _FFTS if hasattr(torch.fft, name)}

    def refuse(name):
        def call(*args, **kwargs):
            raise grading.Fail(f"your function calls torch.fft.{name}: the exercise asks for four real matrix products")
        return call

    for name in saved:
        setattr(torch.fft, name, refuse(name))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.fft, name, fn)


@grading.checker
def check_10_1(fourier: Callable) -> str:
    """Exercise 10.1: FNet's sublayer, Re(D_T X D_C), with four real matrix products.

    ``fourier(x)``: your function, x (..., T, C) real -> (..., T, C) real, Cos_T X Cos_C - Sin_T X Sin_C.

    Checks: equal to ``torch.fft.fft2(x, dim=(-2, -1)).real`` (the sequence and feature axes, never
    the batch) for float64 x of shapes (12, 8), (2, 5, 3), (3, 1, 6) and float32 (2, 16, 8); and that
    it calls no ``torch.fft`` transform. Returns True or False.
    """
    g = torch.Generator().manual_seed(0)
    for shape, dtype, atol in (((12, 8), torch.float64, 1e-9), ((2, 5, 3), torch.float64, 1e-9),
                               ((3, 1, 6), torch.float64, 1e-9), ((2, 16, 8), torch.float32, 1e-3)):
        x = torch.randn(shape, generator=g, dtype=dtype)
        X = torch.fft.fft2(x, dim=(-2, -1))
        known = {"the DFT over the sequence axis only": torch.fft.fft(x, dim=-2).real,
                 "the DFT over the feature axis only": torch.fft.fft(x, dim=-1).real,
                 "the imaginary part": X.imag}
        if x.dim() == 3:
            known["fft2 over the batch and sequence axes"] = torch.fft.fft2(x, dim=(0, 1)).real
        got = grading.call(f"your function on x of shape {shape}", fourier, x.clone())
        grading.close(f"for x of shape {shape} ({str(dtype)[6:]}), the result", got, X.real, atol,
               ref="fft2(x, dim=(-2, -1)).real", known=known)
    with _no_fft():
        grading.call("your function", fourier, torch.randn(4, 3, generator=g, dtype=torch.float64))
    return "equals fft2(x).real over the last two axes for 4 shapes, float64 and float32; no torch.fft call"


@grading.checker
def check_10_2(conv: Callable) -> str:
    """Exercise 10.2: a causal FFT convolution whose FFT length n is a parameter.

    ``conv(u, h, n)``: your function, u (B, T, C), h (C, K) -> (B, T, C): the product of the length-n
    spectra of u (over T) and h, transformed back, the first T outputs.

    Checks, for (T, K) = (16, 16) and (12, 5), float64: for n = T + K - 1 (the smallest that works),
    T + K + 2 and 2T, equal to ``fnet.causal_conv_direct``; for T <= n < T + K - 1, equal to the circular
    convolution of length n (``exercises.ch10.fft_conv_n``), which wraps around and so differs from the
    direct one: that is how the checker sees that n is used. Returns True or False.
    """
    g = torch.Generator().manual_seed(0)
    for T, K in ((16, 16), (12, 5)):
        u = torch.randn(2, T, 3, generator=g, dtype=torch.float64)
        h = torch.randn(3, K, generator=g, dtype=torch.float64)
        direct, smallest = causal_conv_direct(u, h), T + K - 1
        for n in sorted({smallest, smallest + 3, max(2 * T, smallest)}):
            got = grading.call(f"your function with n = {n}", conv, u.clone(), h.clone(), n)
            grading.close(f"with n = {n} (T = {T}, K = {K}) the output", got, direct, 1e-8, ref="causal_conv_direct")
        for n in sorted({max(T, K), smallest - 1}):
            got = grading.tensor("the output",
                                 grading.call(f"your function with n = {n}", conv, u.clone(), h.clone(), n))
            if got.shape == direct.shape and (got.double() - direct).abs().max() < 1e-8:
                raise grading.Fail(f"with n = {n} < T + K - 1 = {smallest} (T = {T}, K = {K}) the output equals "
                            f"the direct convolution, but a length-{n} FFT wraps around: is n used as the FFT length?")
            grading.close(f"with n = {n} (T = {T}, K = {K}) the output", got, fft_conv_n(u, h, n), 1e-8,
                   ref=f"the circular convolution of length {n}")
    return "equals causal_conv_direct for n >= T + K - 1, wraps around for smaller n; (T, K) = (16, 16), (12, 5)"


@grading.checker
def check_10_3(cached_logits: Callable, model: nn.Module | None = None) -> str:
    """Exercise 10.3: run a decoder by hand with the mixers' caches.

    ``cached_logits(model, tokens, prefill)``: your function. ``model`` is a pre-LN ``Decoder`` with
    cacheable mixers (``fnet-conv``, say), ``tokens`` a 1-D LongTensor on the CPU. It feeds the first
    ``prefill`` tokens in one call and then one token per call (token embedding; per block, with
    ``cache = block.mixer.new_cache()`` made once,
    ``x = x + block.mixer(block.ln1(x), cache=cache)``, ``x = x + block.ff(block.ln2(x))``; then
    ``ln_f`` and ``readout``) and returns the logits (T, V), on any device.

    ``model``: yours (the trained ``fnet-conv``, on its device), or by default a small random
    ``fnet-conv`` on the CPU. Checks, for prefill = 1 and 6: equal to one full call ``model(tokens)``
    (within 1e-4), and every mixer gets ``prefill`` tokens in its first call and one in each later call.
    Returns True or False.
    """
    if model is None:
        torch.manual_seed(0)
        model = build_model("fnet-conv", ModelConfig(n_embd=16, n_heads=2, n_layers=2, context=32))
    if not getattr(model, "cacheable", False):
        raise grading.Fail(f"{type(model).__name__} cannot run with caches: pass a Decoder whose mixers keep a cache "
                    f"(fnet-conv, fnet-matrix or an attention model)")
    T = min(20, model.context)
    g = torch.Generator().manual_seed(0)
    tokens = torch.cat([torch.tensor([BOS]), torch.randint(N_SPECIAL, VOCAB_SIZE, (T - 1,), generator=g)])
    with evaluating(model), torch.no_grad():
        full = model(to_model(model, tokens)[None])[0].float().cpu()        # (T, V)
    mixers = [getattr(b, "mixer", b) for b in model.blocks]
    for prefill in (1, 6):
        sizes = [[] for _ in mixers]

        def record(i: int):                                                 # tokens per call of mixer i
            return lambda mod, args, kwargs: sizes[i].append((args or list(kwargs.values()))[0].shape[1])

        hooks = [mx.register_forward_pre_hook(record(i), with_kwargs=True) for i, mx in enumerate(mixers)]
        try:
            with evaluating(model), torch.no_grad():                        # as the reference: no dropout
                got = grading.call(f"your function with prefill = {prefill}", cached_logits, model, tokens.clone(),
                                   prefill)
        finally:
            for hk in hooks:
                hk.remove()
        grading.close(f"with prefill = {prefill}, the logit matrix", got, full, 1e-4, ref="one full call of the model")
        want = [prefill] + [1] * (T - prefill)
        for i, s in enumerate(sizes):
            if s != want:
                shown = f"{s[:8]}"[:-1] + (", ...]" if len(s) > 8 else "]")
                raise grading.Fail(f"with prefill = {prefill}, the mixer of block {i} got {shown} tokens per call; "
                            f"feed {prefill} in the first call and then one per call, with its cache")
    return f"equals one full call for prefill = 1 and 6 ({T} tokens); one token per call after the prefill"
