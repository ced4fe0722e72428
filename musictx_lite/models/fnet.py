"""Mixing tokens without attention: FNet's Fourier sublayer, its leak, and two causal fixes.

Notebook: notebooks/10_fnet.ipynb

FNet (Lee-Thorp et al., 2022) replaces the attention sublayer of a block by a
parameter-free 2-D discrete Fourier transform, over the hidden axis and then
the sequence axis, keeping the real part:

    y = Re(F_seq(F_hidden(x)))          x: (T, C), row t the token at position t

F_seq is a (T, T) matrix with entries exp(-2 pi i t s / T): every output row
mixes every input row, the future included, so the sublayer leaks on
next-token prediction. Two causal replacements keep FNet's hidden transform,
u = Re(F_hidden(x)), and mix the sequence causally:

- ``CausalFourierMatrix``: y = tril(M)[:T, :T] u, with a learned (L, L)
  matrix M started from the real part of the DFT matrix; it knows absolute
  positions, costs O(L^2) and stops at L = ``context`` tokens.
- ``CausalLongConv``: y_c = h_c * u_c, a causal convolution per channel with a
  learned kernel h (C, L), computed through the FFT in O(L log L) as in the
  long-convolution models (S4, Hyena); it knows relative offsets only.

Every mixer maps (B, T, C) to (B, T, C) and plugs into ``Decoder`` in place of
attention. The causal ones also run step by step with a cache (``new_cache()``:
a ``FourierCache``; prefill with the prompt, then one token per call).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig


@dataclass
class FourierCache:
    """What a causal Fourier mixer keeps while sampling: u = Re(F_hidden(x)) of the inputs it still needs."""

    u: torch.Tensor | None = None                                      # (B, t, C)


def for_fft(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 or float64: the FFT takes no half precision (mixed-precision training on CUDA)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def hidden_fourier(x: torch.Tensor) -> torch.Tensor:
    """Re(F_hidden(x)): the real part of the DFT over the last (feature) axis."""
    return torch.fft.fft(for_fft(x), dim=-1).real                     # (..., C)


def dft_real(n: int) -> torch.Tensor:
    """(n, n) real part of the DFT matrix: entry (t, s) is cos(2 pi t s / n)."""
    t = torch.arange(n, dtype=torch.float64)
    return torch.cos(2 * math.pi * torch.outer(t, t) / n).float()


class FourierMixer(nn.Module):
    """FNet's sublayer, y = Re(F_seq(F_hidden(x))) = ``torch.fft.fft2(x, dim=(-2, -1)).real``.

    No parameters. Not causal: output t depends on every token, t + 1 .. T - 1 included,
    and the transform depends on the length T of the input.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()

    def new_cache(self) -> None:
        return None                      # every new token changes every earlier output: nothing to keep

    def forward(self, x: torch.Tensor, cache: FourierCache | None = None) -> torch.Tensor:
        if cache is not None:
            raise ValueError("FourierMixer mixes every position with every other, the future included: "
                             "it cannot generate token by token from a cache")
        return torch.fft.fft2(for_fft(x), dim=(-2, -1)).real.to(x.dtype)   # (B, T, C): over T and C, never B


class CausalFourierMatrix(nn.Module):
    """y = tril(M)[:T, :T] Re(F_hidden(x)): a learned causal (L, L) mixing matrix, L = ``context``.

    M starts as Re(DFT_L) / sqrt(L C), the real part of FNet's sequence transform
    (on the real Re(F_hidden(x)) it keeps the Re(D_L) Re(X D_C) term of FNet's mix
    and drops the Im(D_L) Im(X D_C) one), scaled so that an output has about unit
    size. Row t mixes positions 0..t only. O(L^2) time and parameters; inputs longer
    than L are an error.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.L = cfg.context
        self.M = nn.Parameter(dft_real(self.L) / math.sqrt(self.L * cfg.n_embd))   # (L, L)

    def new_cache(self) -> FourierCache:
        return FourierCache()

    def forward(self, x: torch.Tensor, cache: FourierCache | None = None) -> torch.Tensor:
        T = x.shape[1]
        if cache is not None and cache.u is not None:
            y = self._step(x, cache)
        else:
            if T > self.L:
                raise ValueError(f"CausalFourierMatrix has a ({self.L}, {self.L}) mixing matrix: it mixes at "
                                 f"most context = {self.L} tokens, got {T}")
            u = hidden_fourier(x)                                      # (B, T, C)
            y = self.M[:T, :T].tril().to(u.dtype) @ u                  # (T, T) @ (B, T, C) -> (B, T, C)
            if cache is not None:
                cache.u = u
        return y.to(x.dtype)

    def _step(self, x: torch.Tensor, cache: FourierCache) -> torch.Tensor:
        """One new token x (B, 1, C) at position t: y_t = M[t, :t+1] u[:t+1], O(t C)."""
        u = torch.cat([cache.u, hidden_fourier(x)], dim=1)          # (B, t + 1, C)
        t = u.shape[1] - 1
        if t >= self.L:
            raise ValueError(f"CausalFourierMatrix has a ({self.L}, {self.L}) mixing matrix: position {t} "
                             f"is past context = {self.L}")
        cache.u = u
        return torch.einsum("s,bsc->bc", self.M[t, : t + 1].to(u.dtype), u)[:, None]   # (B, 1, C)


def causal_conv_direct(u: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """y[b, t, c] = sum_{s <= t} h[c, t - s] u[b, s, c], the definition, as one (T, T) matrix per channel.

    ``u`` (B, T, C), ``h`` (C, K); kernel entries past K are 0. O(T^2 C): the reference.
    """
    T = u.shape[1]
    h = F.pad(h, (0, max(0, T - h.shape[1])))[:, :T]                   # (C, T)
    lag = torch.arange(T)[:, None] - torch.arange(T)[None, :]          # (T, T): t - s
    H = h[:, lag.clamp(min=0)] * (lag >= 0)                            # (C, T, T): Toeplitz, lower triangular
    return torch.einsum("cts,bsc->btc", H, u)                          # (B, T, C)


def causal_fft_conv(u: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The same causal convolution through the FFT in O(T log T): pad to 2T, multiply, keep the first T.

    ``u`` (B, T, C), ``h`` (C, K). The product of the spectra is a circular
    convolution of length 2T; the linear one has at most 2T - 1 outputs, so
    nothing wraps around, and its first T outputs are the causal ones.
    """
    T = u.shape[1]
    n = 2 * T
    u = for_fft(u)
    h = h[:, :T].to(u.dtype)                                           # lags >= T never reach an output
    U = torch.fft.rfft(u.transpose(1, 2), n=n)                         # (B, C, T + 1) complex
    Hf = torch.fft.rfft(h, n=n)                                        # (C, T + 1)
    y = torch.fft.irfft(U * Hf, n=n)[..., :T]                          # (B, C, T): the first T outputs
    return y.transpose(1, 2)                                           # (B, T, C)


class CausalLongConv(nn.Module):
    """y_c = h_c * Re(F_hidden(x))_c, causal, one learned kernel h_c of length L per channel c.

    Computed with ``causal_fft_conv`` (O(L log L)). The kernels start as random
    signs times a decay exp(-k / tau_c), tau_c from 1 to L across the channels
    (short and long memories), each of norm 1 / sqrt(C). The convolution knows
    offsets, not positions: it runs past L, with the kernel 0 beyond lag L - 1.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        C, L = cfg.n_embd, cfg.context
        k = torch.arange(L, dtype=torch.float)                         # lags 0..L-1
        tau = torch.logspace(0, math.log10(L), C)                      # (C,): decay lengths 1..L
        h = torch.randn(C, L) * torch.exp(-k / tau[:, None])           # (C, L)
        self.h = nn.Parameter(h / h.norm(dim=1, keepdim=True) / math.sqrt(C))

    def new_cache(self) -> FourierCache:
        return FourierCache()

    def forward(self, x: torch.Tensor, cache: FourierCache | None = None) -> torch.Tensor:
        if cache is not None and cache.u is not None:
            y = self._step(x, cache)
        else:
            u = hidden_fourier(x)                                      # (B, T, C)
            y = causal_fft_conv(u, self.h)                             # (B, T, C)
            if cache is not None:
                cache.u = u[:, -self.h.shape[1]:]                   # older inputs never matter again
        return y.to(x.dtype)

    def _step(self, x: torch.Tensor, cache: FourierCache) -> torch.Tensor:
        """One new token x (B, 1, C): y_t = sum_s h[:, t - s] u_s over the last L inputs, O(L C)."""
        K = self.h.shape[1]
        u = torch.cat([cache.u, hidden_fourier(x)], dim=1)[:, -K:]  # (B, n, C), n <= K: lags n-1..0
        cache.u = u
        n = u.shape[1]
        taps = self.h[:, :n].flip(-1).to(u.dtype)                      # (C, n): h[:, n - 1 - s] for input s
        return torch.einsum("cs,bsc->bc", taps, u)[:, None]            # (B, 1, C)
