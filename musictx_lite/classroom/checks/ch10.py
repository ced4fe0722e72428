"""Chapter 10's exercise checkers: the 2-D DFT as real matrix products, an FFT convolution whose length is a
parameter, a decoder run by hand with the mixers' caches (exercises 10.1, 10.2 and 10.3).

Notebook: notebooks/10_fnet.ipynb
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...device import evaluating, to_model
from ...io.tokens import BOS, N_SPECIAL, VOCAB_SIZE
from ...models.config import ModelConfig
from ...models.fnet import causal_conv_direct
from ...models.registry import build_model
from .. import grading

__all__ = ["check_10_1", "check_10_2", "check_10_3"]

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



def _circular(u: torch.Tensor, h: torch.Tensor, n: int) -> torch.Tensor:
    """The first T outputs of the circular convolution of length n (T <= n, K <= n) of u (B, T, C) and h (C, K),
    with no FFT: the full linear convolution (``causal_conv_direct`` on u padded with K - 1 zeros) folded
    modulo n, output t + m n added onto output t."""
    T, K = u.shape[1], h.shape[1]
    full = causal_conv_direct(F.pad(u, (0, 0, 0, K - 1)), h)                # (B, T + K - 1, C)
    y = torch.zeros(u.shape[0], n, u.shape[2], dtype=full.dtype)
    for start in range(0, T + K - 1, n):                                    # wrap around every n outputs
        part = full[:, start: start + n]
        y[:, : part.shape[1]] += part
    return y[:, :T]


@grading.checker
def check_10_2(conv: Callable) -> str:
    """Exercise 10.2: a causal FFT convolution whose FFT length n is a parameter.

    ``conv(u, h, n)``: your function, u (B, T, C), h (C, K) -> (B, T, C): the product of the length-n
    spectra of u (over T) and h, transformed back, the first T outputs.

    Checks, for (T, K) = (16, 16) and (12, 5), float64: for n = T + K - 1 (the smallest that works),
    T + K + 2 and 2T, equal to ``fnet.causal_conv_direct``; for T <= n < T + K - 1, equal to the circular
    convolution of length n (the full convolution folded modulo n), which wraps around and so differs from the
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
                                   f"the direct convolution, but a length-{n} FFT wraps around: is n used as the "
                                   f"FFT length?")
            grading.close(f"with n = {n} (T = {T}, K = {K}) the output", got, _circular(u, h, n), 1e-8,
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
