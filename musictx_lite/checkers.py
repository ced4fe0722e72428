"""Check your own answers to the exercises that ask for code, with no grading server.

Notebooks: the "Exercises" sections of chapters 1, 3, 4, 5, 6, 8, 9, 10 and 11
(exercises 1.1, 3.1, 3.2, 4.1, 4.2, 5.1, 6.2, 6.3, 8.1, 9.1, 9.2, 9.3, 10.1, 10.2,
10.3, 11.1, 11.2). The other exercises ask for measurements, counts and
explanations; their reference cells print what to compare with.

In Colab (or any notebook), once your answer runs::

    from musictx_lite.checkers import check_5_1
    check_5_1(MyRMSNorm)       # check_5_1: pass (...)   or   check_5_1: fail: <what is wrong>

``help(check_5_1)`` says what your answer must look like: which arguments the
checker passes and what it expects back. ``checkers_for(5)`` lists a chapter's
checkers; ``CHECKERS`` maps "5.1" to ``check_5_1``.

Each checker compares your function or module with the reference solution in
``musictx_lite.exercises`` (or the package module the chapter built) on small
random inputs with fixed seeds, prints one line (two when your code raised:
the second says where), and returns True or False. It never raises on a wrong
answer. A class is built on the CPU; an instance is checked on its own device
(CUDA in Colab) and left as it was; your random state is not touched.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import traceback
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import MultiHeadAttention, causal_mask, recording
from .probes import future_effect, gradient_dependency
from .config import ModelConfig
from .decoder import Decoder
from .device import evaluating, model_device, to_model
from .exercises.ch1 import AdditiveAttention
from .exercises.ch4 import GroupedQueryAttention
from .exercises.ch4 import mha_einsum as reference_mha_einsum
from .exercises.ch5 import RMSNorm
from .exercises.ch9 import reach
from .exercises.ch10 import fft_conv_n
from .exercises.ch11 import fit_cost, paired_bootstrap, predicted_speedup
from .fnet import causal_conv_direct
from .local import band_mask, skew_local
from .models import build_model, n_params
from .positions import LearnedPositions
from .relative import distances, relative_logits_direct
from .tokens import BOS, N_SPECIAL, VOCAB_SIZE

__all__ = ["CHECKERS", "checkers_for", "check_1_1", "check_3_1", "check_3_2", "check_4_1", "check_4_2",
           "check_5_1", "check_6_2", "check_6_3", "check_8_1", "check_9_1", "check_9_2", "check_9_3", "check_10_1",
           "check_10_2", "check_10_3", "check_11_1", "check_11_2"]


# ----------------------------------------------------------------------------- helpers

class _Fail(Exception):
    """A property of the answer that does not hold; the message is the fail line, ``hint`` a second line."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def _line(name: str, ok: bool, text: str, hint: str | None = None) -> bool:
    """Print the pass or fail line (and a hint below it) and return ``ok``."""
    print(f"{name}: pass ({text})" if ok else f"{name}: fail: {text}")
    if hint:
        print(f"    {hint}")
    return ok


def _checker(check: Callable[..., str]) -> Callable[..., bool]:
    """Turn ``check`` (returns what it checked, raises _Fail) into a checker that prints and returns a bool."""

    @functools.wraps(check)
    def run(*args, **kwargs) -> bool:
        try:
            with torch.random.fork_rng(devices=[]):                    # leave the student's seed alone
                checked = check(*args, **kwargs)
        except _Fail as e:
            return _line(check.__name__, False, str(e), e.hint)
        except Exception as e:                                         # an answer of an unexpected kind
            return _line(check.__name__, False, f"checking your answer raised {type(e).__name__}: {_msg(e)}",
                         _where(e))
        return _line(check.__name__, True, checked)

    run.__signature__ = inspect.signature(check).replace(return_annotation="bool")   # what help() shows
    return run


def _msg(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0]
    return text if len(text) <= 200 else text[:197] + "..."


_LIBRARY = tuple(os.path.dirname(os.path.abspath(m.__file__)) for m in (torch, np, contextlib)) + (
    os.path.dirname(os.path.abspath(__file__)),)                     # torch, numpy, the stdlib, this package


def _where(e: BaseException) -> str | None:
    """The innermost line of the traceback that is in the student's code, not in torch or this package."""
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not os.path.abspath(f.filename).startswith(_LIBRARY)]
    if not frames:
        return None
    f = frames[-1]
    return f"in {f.name}, line {f.lineno}" + (f": {f.line.strip()}" if f.line else "")


def _call(what: str, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``; an exception in it becomes a fail line that says ``what`` raised it, and where."""
    try:
        return fn(*args, **kwargs)
    except _Fail:
        raise
    except Exception as e:
        raise _Fail(f"{what} raised {type(e).__name__}: {_msg(e)}", _where(e)) from None


def _instance(obj, args: tuple, shown: str) -> nn.Module:
    """The student's module: an instance as given, or the class built as ``Class(*args)`` (``shown``)."""
    if isinstance(obj, nn.Module):
        return obj
    if inspect.isclass(obj) and issubclass(obj, nn.Module):
        m = _call(f"building your class as {obj.__name__}{shown}", obj, *args)
        if not isinstance(m, nn.Module):
            raise _Fail(f"{obj.__name__}{shown} is not an nn.Module")
        return m
    raise _Fail(f"expected your nn.Module class or an instance of it, got {type(obj).__name__}")


def _width(module: nn.Module, default: int) -> int:
    """The feature width an instance expects: its first Linear's input, first Embedding's output, or
    the last axis of its first parameter."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            return m.in_features
        if isinstance(m, nn.Embedding):
            return m.embedding_dim
    p = next(module.parameters(), None)
    return p.shape[-1] if p is not None else default


@contextlib.contextmanager
def _randomised(module: nn.Module, seed: int, mean: float = 0.0):
    """Give every parameter random values (so that a zero or one initialisation hides nothing); restore after."""
    g = torch.Generator().manual_seed(seed)
    saved = [p.detach().clone() for p in module.parameters()]
    with torch.no_grad():
        for p in module.parameters():
            p.copy_((mean + 0.5 * torch.randn(p.shape, generator=g)).to(p.dtype).to(p.device))
    try:
        yield module
    finally:
        with torch.no_grad():
            for p, s in zip(module.parameters(), saved):
                p.copy_(s)


def _tensor(what: str, x) -> torch.Tensor:
    """``x`` (a tensor, an array, a list) as a CPU tensor, or a fail line."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    try:
        return torch.as_tensor(np.asarray(x))
    except Exception:
        raise _Fail(f"{what} should be a tensor, got {type(x).__name__}") from None


def _close(what: str, got, expected: torch.Tensor, atol: float, ref: str = "the reference",
           mask: torch.Tensor | None = None, known: dict[str, torch.Tensor] | None = None) -> None:
    """Fail unless ``got`` has ``expected``'s shape and is within ``atol`` of it (where ``mask`` is True).

    The fail line gives the max abs difference and where it is; ``known`` maps a description of a common
    mistake to its result, and the line names the one ``got`` matches.
    """
    got, expected = _tensor(what, got), expected.detach().cpu()
    if tuple(got.shape) != tuple(expected.shape):
        raise _Fail(f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    if got.is_complex() and not expected.is_complex():
        raise _Fail(f"{what} is complex, expected real numbers")
    got, expected = got.double(), expected.double()
    keep = torch.ones_like(got, dtype=torch.bool) if mask is None else mask.expand_as(got).cpu()
    diff = torch.where(keep, (got - expected).abs(), torch.zeros_like(got)).nan_to_num(nan=math.inf)
    if diff.numel() == 0 or diff.max() <= atol:
        return
    idx = tuple(int(i) for i in np.unravel_index(int(diff.flatten().argmax()), tuple(diff.shape)))
    text = (f"{what} differs from {ref} by {diff.max().item():.2e} (max abs, tolerance {atol:.0e}); "
            f"at {list(idx)}: expected {expected[idx].item():.4g}, got {got[idx].item():.4g}")
    for name, value in (known or {}).items():
        value = value.detach().cpu().double()
        if value.shape == got.shape and torch.where(keep, (got - value).abs(), 0.0).max() <= max(atol, 1e-6):
            text += f" (it matches {name})"
            break
    raise _Fail(text)


def _numbers(what: str, x, n: int) -> list[float]:
    """``x`` as a list of ``n`` floats, or a fail line."""
    try:
        values = [float(v) for v in x]
    except Exception:
        raise _Fail(f"{what} should be {n} numbers, got {type(x).__name__}") from None
    if len(values) != n:
        raise _Fail(f"{what} should be {n} numbers, got {len(values)}")
    return values


# ----------------------------------------------------------------------------- chapter 1

@_checker
def check_1_1(attention, C: int | None = None) -> str:
    """Exercise 1.1: additive attention, e_ij = v^T tanh(h_i W_1 + h_j W_2), causal.

    ``attention``: your nn.Module class, built here as ``attention(C)`` (C = 16) on the CPU, or an
    instance (checked on its device; C is its first Linear's input width unless you pass C=...).
    ``forward(h)`` takes hidden states (B, T, C) and returns ``(contexts, weights)``: contexts
    (B, T, C), each the weighted sum of h, and weights (B, T, T).

    Checks, for T = 1 and 9: the shapes, weights >= 0, rows sum to 1, zero above the diagonal,
    contexts = weights @ h, and that changing h after t leaves everything up to t as it was. If your
    parameters are named like the reference's (``W1``, ``W2``: nn.Linear(C, d, bias=False), ``v``:
    nn.Linear(d, 1, bias=False)), also that your module equals ``exercises.AdditiveAttention`` with
    your weights. Returns True or False.
    """
    C = C or (_width(attention, 16) if isinstance(attention, nn.Module) else 16)
    m = _instance(attention, (C,), f"({C})")
    dev = model_device(m)
    g = torch.Generator().manual_seed(0)

    def run(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = _call("your module", m, h.to(dev))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise _Fail(f"your module should return (contexts, weights), got {type(out).__name__}")
        return _tensor("the contexts", out[0]).double(), _tensor("the weights", out[1]).double()

    with evaluating(m), torch.no_grad():
        for T in (1, 9):
            h = torch.randn(2, T, C, generator=g)                          # (B, T, C)
            ctx, w = run(h)
            for what, x, shape in (("the contexts", ctx, (2, T, C)), ("the weights", w, (2, T, T))):
                if tuple(x.shape) != shape:
                    raise _Fail(f"{what} have shape {tuple(x.shape)} for h of shape {(2, T, C)}, expected {shape}")
            if w.min() < -1e-6:
                raise _Fail(f"weights are negative: min {w.min().item():.3g} (T = {T})")
            rows = w.sum(-1)                                                # (B, T)
            if (rows - 1).abs().max() > 1e-5:
                b, i = np.unravel_index(int((rows - 1).abs().argmax()), tuple(rows.shape))
                raise _Fail(f"rows do not sum to 1: row {i} sums to {rows[b, i].item():.4f} (T = {T}); "
                            f"take the softmax over the keys, the last axis")
            future = w.triu(1).abs()
            if future.max() > 1e-6:
                b, i, j = np.unravel_index(int(future.argmax()), tuple(future.shape))
                raise _Fail(f"not causal: query {i} gives the later key {j} weight {w[b, i, j].item():.3f} (T = {T})")
            _close(f"the context tensor (T = {T})", ctx, w @ h.double(), 1e-5, ref="weights @ h")
        t = 4                                                               # change h after t
        h2 = h.clone()
        h2[:, t + 1:] = torch.randn(2, T - t - 1, C, generator=g)
        ctx2, w2 = run(h2)
        moved = max((ctx2 - ctx)[:, : t + 1].abs().max().item(), (w2 - w)[:, : t + 1].abs().max().item())
        if moved > 1e-5:
            raise _Fail(f"not causal: changing h after t = {t} moves the contexts or weights up to t by {moved:.2e}")
        note = "parameters not named like the reference's (W1, W2, v): invariants only"
        sd = m.state_dict()
        if set(sd) == {"W1.weight", "W2.weight", "v.weight"} and sd["W1.weight"].shape[1] == C:
            ref = AdditiveAttention(C, sd["W1.weight"].shape[0])
            _call("loading your weights into the reference", ref.load_state_dict, {k: v.cpu() for k, v in sd.items()})
            ref_ctx, ref_w = ref(h.float())
            _close("the weight tensor", w, ref_w, 1e-5, ref="the reference AdditiveAttention with your weights")
            _close("the context tensor", ctx, ref_ctx, 1e-5, ref="the reference AdditiveAttention with your weights")
            note = "equals the reference AdditiveAttention with your weights"
    return (f"shapes, weights >= 0, rows sum to 1, causal, contexts = weights @ h, for T = 1 and 9; "
            f"{note}")


# ----------------------------------------------------------------------------- chapter 3

@_checker
def check_3_1(head, C: int | None = None) -> str:
    """Exercise 3.1: a head whose query t sees the keys j <= t + 1 (one token of the future).

    ``head``: your nn.Module class, built here as ``head(C, C)`` (n_embd, head_size; C = 16) like
    ``attention.Head``, or an instance with head_size = n_embd (checked on its device). ``forward(x)`` maps (B, T, C) to
    (B, T, head_size); if it computes its weights with ``attention.attention``, or hands them to
    ``attention.record``, the weights (B, T, T) it records inside ``attention.recording()`` are checked too.

    Checks: output t depends on the inputs up to t + 1 and on no later one (the gradient probe
    ``probes.gradient_dependency``, T = 10); the weights are zero beyond t + 1, positive at t + 1,
    rows sum to 1; and the perturbation probe ``probes.future_effect`` finds chapter 3's model with
    your head (learned positions, no blocks) not causal. Returns True or False.
    """
    C = C or (_width(head, 16) if isinstance(head, nn.Module) else 16)
    m = _instance(head, (C, C), f"({C}, {C})")
    dev, T = model_device(m), 10
    x = torch.randn(2, T, C, generator=torch.Generator().manual_seed(0)).to(dev)
    with evaluating(m), torch.no_grad():
        out = _tensor("the output", _call("your head", m, x))
    if out.dim() != 3 or tuple(out.shape[:2]) != (2, T):
        raise _Fail(f"the output has shape {tuple(out.shape)} for x of shape {(2, T, C)}, expected (2, {T}, head_size)")
    G = _call("the gradient probe on your head", gradient_dependency, m, T, C)     # (T, T): |d out_i / d x_j|
    seen = G > 1e-7 * G.max()
    allowed = torch.ones(T, T, dtype=torch.bool).tril(1)
    if (seen & ~allowed).any():
        i, j = [int(v) for v in (seen & ~allowed).nonzero()[0]]
        raise _Fail(f"output {i} depends on input {j} = {i} + {j - i}: the head sees more than one token of the future")
    missing = [i for i in range(T - 1) if not seen[i, i + 1]]
    if missing:
        raise _Fail(f"output {missing[0]} does not depend on input {missing[0] + 1}: the head does not see t + 1 "
                    f"(the mask is j <= i + 1, i.e. tril(1))")
    checked = "output t depends on inputs up to t + 1 only (gradient probe)"
    with evaluating(m), torch.no_grad(), recording() as recorded:
        _call("your head inside recording()", m, x)
    if recorded:
        w = _tensor("the weights", recorded[-1]).double()
        if tuple(w.shape) != (2, T, T):
            raise _Fail(f"the weights have shape {tuple(w.shape)}, expected {(2, T, T)}")
        beyond = w.triu(2).abs().max().item()
        if beyond > 1e-6:
            raise _Fail(f"weights beyond t + 1 are not zero (up to {beyond:.3f})")
        if w.diagonal(1, -2, -1).min() <= 0:
            raise _Fail("a query gives weight 0 to the key at t + 1")
        if (w.sum(-1) - 1).abs().max() > 1e-5:
            raise _Fail("rows of the weights do not sum to 1")
        checked += "; weights zero beyond t + 1, positive at t + 1, rows sum to 1"
    cfg = ModelConfig(n_embd=C, n_heads=1, n_layers=1, block_size=32)
    model = Decoder(cfg, lambda c: m, LearnedPositions, block=None, final_norm=False).to(dev)
    past, _ = _call("chapter 3's model with your head", future_effect, model)
    if past <= 1e-5:
        raise _Fail(f"the perturbation probe finds the model causal: changing the tokens after t moves the "
                    f"outputs up to t by {past:.1e}")
    return checked + f"; the perturbation probe finds the model not causal (outputs up to t move by {past:.2f})"


@_checker
def check_3_2(renormalise: Callable) -> str:
    """Exercise 3.2: mask after the softmax, then renormalise.

    ``renormalise(weights)``: your function. It takes softmax weights computed *without* a mask,
    (..., T, T), zeroes the weights of the future (key j > query i) and divides every row by its sum.

    Checks, on random scores of shapes (1, 1), (8, 8) and (2, 3, 8, 8): the rows sum to 1, the future
    has weight 0, and the result equals the correct masked softmax, softmax of the scores with the future
    set to -inf. Returns True or False.
    """
    g = torch.Generator().manual_seed(0)
    for shape in ((1, 1), (8, 8), (2, 3, 8, 8)):
        T = shape[-1]
        scores = 2 * torch.randn(shape, generator=g, dtype=torch.float64)
        full = F.softmax(scores, dim=-1)                                    # (..., T, T), no mask
        right = F.softmax(scores.masked_fill(~causal_mask(T), float("-inf")), dim=-1)
        got = _tensor("the result", _call("your function", renormalise, full.clone()))
        if tuple(got.shape) == shape:
            rows = got.double().sum(-1).flatten()
            worst = int((rows - 1).abs().argmax())
            if (rows[worst] - 1).abs() > 1e-6:
                raise _Fail(f"rows do not sum to 1 for weights of shape {shape}: row {worst % T} sums to "
                            f"{rows[worst].item():.4f}; divide each row by its sum after zeroing")
            if got.double().triu(1).abs().max() > 1e-9:
                raise _Fail(f"not causal: weights above the diagonal are not zero (shape {shape})")
        _close(f"the result for weights of shape {shape}", got, right, 1e-6, ref="the softmax of the masked scores",
               known={"the weights zeroed without renormalising": full * causal_mask(T)})
    return "rows sum to 1, the future gets 0, equal to the masked softmax, for shapes (1, 1), (8, 8), (2, 3, 8, 8)"


# ----------------------------------------------------------------------------- chapter 4

@_checker
def check_4_1(mha_einsum: Callable, n_embd: int = 32, n_heads: int = 4) -> str:
    """Exercise 4.1: multi-head attention in einsums.

    ``mha_einsum(mha, x)``: your function. ``mha`` is a ``MultiHeadAttention`` (its weights:
    ``mha.qkv.weight`` (3C, C), ``mha.proj.weight`` (C, C), ``mha.proj.bias`` (C,); ``mha.n_heads``),
    ``x`` is (B, T, C); it returns the causal multi-head attention output (B, T, C).

    Checks: equal to ``mha(x)`` (within 1e-5) for random weights and x of shapes (2, 12, 32),
    (2, 5, 32), (2, 1, 32), with 4 heads. Returns True or False.
    """
    torch.manual_seed(0)                                                    # inside fork_rng: yours is kept
    g = torch.Generator().manual_seed(0)
    for T in (12, 5, 1):
        mha = MultiHeadAttention(ModelConfig(n_embd=n_embd, n_heads=n_heads), fast=False).eval()
        x = torch.randn(2, T, n_embd, generator=g)                          # (B, T, C)
        with torch.no_grad():
            expected = mha(x)
            got = _call("your function", mha_einsum, mha, x.clone())
            known = {"attention without the 1/sqrt(head size) scale": reference_mha_einsum(mha, x, scale=False),
                     "attention without the causal mask": reference_mha_einsum(mha, x, mask=False),
                     "attention without W_O's bias": reference_mha_einsum(mha, x, bias=False)}
        _close(f"the output for x of shape {(2, T, n_embd)}", got, expected, 1e-5,
               ref="MultiHeadAttention's forward", known=known)
    return f"equals MultiHeadAttention ({n_heads} heads, C = {n_embd}) for T = 12, 5, 1"


@_checker
def check_4_2(gqa: type, n_embd: int = 32, n_heads: int = 4) -> str:
    """Exercise 4.2: grouped-query attention, n_heads query heads sharing n_groups key/value heads.

    ``gqa``: your nn.Module class (not an instance), built here as ``gqa(cfg, n_groups)`` for every
    n_groups dividing n_heads, with ``cfg = ModelConfig(n_embd=32, n_heads=4)``. ``forward(x)`` maps
    (B, T, C) to (B, T, C), causal, like ``MultiHeadAttention``.

    Checks: the output shape; causality (changing x after t leaves the outputs up to t); the parameter
    count, n_groups heads save 2 (n_heads - n_groups) head_size C weights (K and V) against
    n_groups = n_heads; and, if your parameters are named like the reference ``GroupedQueryAttention``
    (``q``, ``kv``, ``proj``) or like ``MultiHeadAttention`` (``qkv``, ``proj``), that n_groups = n_heads
    with MultiHeadAttention's weights computes exactly MultiHeadAttention. Returns True or False.
    """
    if isinstance(gqa, nn.Module):
        raise _Fail(f"pass your class itself, check_4_2({type(gqa).__name__}), not an instance: the checker "
                    f"builds it for every n_groups")
    cfg = ModelConfig(n_embd=n_embd, n_heads=n_heads)
    hs, T, t = n_embd // n_heads, 9, 4
    groups = [d for d in range(n_heads, 0, -1) if n_heads % d == 0]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, T, n_embd, generator=g)                              # (B, T, C)
    x2 = x.clone()
    x2[:, t + 1:] = torch.randn(2, T - t - 1, n_embd, generator=g)
    counts, modules = {}, {}
    for ng in groups:
        m = _instance(gqa, (cfg, ng), f"(cfg, {ng})").eval()
        modules[ng], counts[ng] = m, n_params(m)
        with torch.no_grad():
            y = _tensor("the output", _call(f"your module with n_groups = {ng}", m, x))
            y2 = _tensor("the output", _call(f"your module with n_groups = {ng}", m, x2))
        if tuple(y.shape) != tuple(x.shape):
            raise _Fail(f"with n_groups = {ng} the output has shape {tuple(y.shape)}, expected {tuple(x.shape)}")
        moved = (y2 - y)[:, : t + 1].abs().max().item()
        if moved > 1e-5:
            raise _Fail(f"not causal with n_groups = {ng}: changing x after t = {t} moves the outputs up to t by "
                        f"{moved:.2e}")
    for ng in groups[1:]:
        saved, want = counts[n_heads] - counts[ng], 2 * (n_heads - ng) * hs * n_embd
        if saved not in (want, want + 2 * (n_heads - ng) * hs):                # K and V with or without biases
            raise _Fail(f"n_groups = {ng} has {counts[ng]:,} parameters, {saved:,} fewer than n_groups = {n_heads}; "
                        f"sharing should save the 2 (n_heads - n_groups) head_size C = {want:,} weights of the K and "
                        f"V heads it drops")
    m, mha = modules[n_heads], MultiHeadAttention(cfg, fast=False).eval()
    shapes = lambda module: {k: tuple(v.shape) for k, v in module.state_dict().items()}
    with torch.no_grad():
        if shapes(m) == shapes(GroupedQueryAttention(cfg, n_heads)):
            # the K and V rows of kv: [all K | all V] as the reference, or [K | V] per group
            K, V = mha.qkv.weight[n_embd:2 * n_embd], mha.qkv.weight[2 * n_embd:]          # (C, C) each
            per_group = torch.cat([K.view(n_heads, hs, n_embd), V.view(n_heads, hs, n_embd)], 1).reshape(-1, n_embd)
            layouts = [torch.cat([K, V]), per_group]
        elif shapes(m) == shapes(mha):
            layouts = [None]
        else:
            return (f"output shape, causal, parameter counts for n_groups = {groups}; parameters not named like "
                    f"the reference's (q, kv, proj): equality with MultiHeadAttention not checked")
        for kv in layouts:
            if kv is None:
                m.load_state_dict(mha.state_dict())
            else:
                m.load_state_dict({"q.weight": mha.qkv.weight[:n_embd], "kv.weight": kv,
                                   "proj.weight": mha.proj.weight, "proj.bias": mha.proj.bias})
            got = _call(f"your module with n_groups = {n_heads}", m, x)
            if torch.allclose(got, mha(x), atol=1e-5):
                break
        _close(f"with n_groups = n_heads = {n_heads} and MultiHeadAttention's weights, the output", got, mha(x),
               1e-5, ref="MultiHeadAttention")
    return (f"output shape, causal, parameter counts for n_groups = {groups}; n_groups = n_heads equals "
            f"MultiHeadAttention")


# ----------------------------------------------------------------------------- chapter 5

@_checker
def check_5_1(norm, C: int | None = None) -> str:
    """Exercise 5.1: RMSNorm, x / sqrt(mean(x^2) + eps) * gamma over the last axis.

    ``norm``: your nn.Module class, built here as ``norm(C)`` (C = 16) on the CPU, or an instance
    (checked on its device, C read from its gamma, its parameters restored afterwards). It maps
    (..., C) to (..., C) and has one learned vector gamma of C values (no beta).

    Checks: C parameters; with random gamma, the output changes when 10 is added to every feature of a
    token (LayerNorm's would not); on zero-mean tokens it equals LayerNorm with the same gamma; and it
    equals the reference ``exercises.RMSNorm`` (within 1e-4) on inputs of shapes (2, 5, C), (3, C),
    (2, 2, 3, C). Returns True or False.
    """
    C = C or (_width(norm, 16) if isinstance(norm, nn.Module) else 16)
    m = _instance(norm, (C,), f"({C})")
    params = list(m.parameters())
    if n_params(m) != C or len(params) != 1:
        extra = " (gamma and beta: that is LayerNorm's)" if n_params(m) == 2 * C else ""
        raise _Fail(f"your module has {n_params(m)} parameters in {len(params)} tensors{extra}; RMSNorm has "
                    f"C = {C}, one gamma")
    dev, g = model_device(m), torch.Generator().manual_seed(0)
    run = lambda x: _tensor("the output", _call("your module", m, x.to(dev))).double()
    with _randomised(m, seed=1, mean=1.0), evaluating(m), torch.no_grad():
        gamma = params[0].detach().cpu().reshape(C)
        ref = RMSNorm(C)
        ref.gamma.copy_(gamma)
        x = 3 * torch.randn(2, 5, C, generator=g) + 1                       # (B, T, C)
        shift = (run(x + 10.0) - run(x)).abs().max().item()
        if shift < 1e-2:
            raise _Fail(f"the output does not change when 10 is added to every feature (max change {shift:.1e}): "
                        f"it subtracts the mean, as LayerNorm does")
        for shape in ((2, 5, C), (3, C), (2, 2, 3, C)):
            x = 3 * torch.randn(shape, generator=g) + 1
            ms = x.pow(2).mean(-1, keepdim=True)
            known = {"LayerNorm": F.layer_norm(x, (C,), gamma, None, 1e-5),
                     "x / sqrt(mean(x^2)) without gamma": x / ms.sqrt(),
                     "x / sqrt(sum(x^2)): the sum, not the mean": x / (C * ms).sqrt() * gamma,
                     "x / mean(x^2): no square root": x / ms * gamma}
            _close(f"the output for x of shape {shape}", run(x), ref(x), 1e-4, ref="the reference RMSNorm",
                   known=known)
        xc = x - x.mean(-1, keepdim=True)                                   # zero-mean tokens
        _close("on zero-mean tokens, the output", run(xc), F.layer_norm(xc, (C,), gamma, None, 1e-5), 1e-4,
               ref="LayerNorm with the same gamma")
    return (f"{C} parameters; changes under a shift; equals LayerNorm on zero-mean tokens; equals the "
            f"reference RMSNorm on 3 shapes, random gamma")


# ----------------------------------------------------------------------------- chapter 6

@_checker
def check_6_2(table: Callable, L: int = 128, C: int = 64) -> str:
    """Exercise 6.2: a sinusoid table whose first pair turns by pi/2 per token (period 4: one step).

    ``table``: your function ``table(L, C) -> (L, C)`` tensor, rows = positions 0 .. L - 1, built like
    ``positions.sinusoids`` but with a first (sin, cos) pair at pi/2 radians per token.

    Checks: the shape; every entry in [-1, 1]; some pair of columns is (sin, cos) of pi t / 2 (in
    either order); the voice, (t - 1) mod 4, can be read off the rows (``voice_accuracy`` > 0.9,
    against about 0.25 for the standard table); the rest of the table still tells positions apart.
    Returns True or False.
    """
    from .positions import sinusoids, voice_accuracy

    P = _tensor("your table", _call(f"table({L}, {C})", table, L, C)).detach().double().cpu()
    if tuple(P.shape) != (L, C):
        raise _Fail(f"table({L}, {C}) has shape {tuple(P.shape)}, expected {(L, C)}: one row per position")
    if P.abs().max() > 1 + 1e-6:
        raise _Fail(f"entries up to {P.abs().max().item():.3g}: sines and cosines stay within [-1, 1]")
    t = torch.arange(L, dtype=torch.double)
    quarter = [torch.sin(t * math.pi / 2), torch.cos(t * math.pi / 2)]
    found = [[bool(torch.allclose(P[:, c], w, atol=1e-4)) for c in range(C)] for w in quarter]   # float32 sin
    if not (any(found[0]) and any(found[1])):
        standard = sinusoids(L, C).double()
        why = (" (it is the standard table: its fastest pair turns by 1 radian per token, period 2 pi)"
               if torch.allclose(P, standard, atol=1e-6) else "")
        raise _Fail(f"no pair of columns is sin(pi t / 2), cos(pi t / 2){why}")
    acc, base = voice_accuracy(P), voice_accuracy(sinusoids(L, C))
    if acc <= 0.9:
        raise _Fail(f"the voice is read off your rows with accuracy {acc:.2f}, expected > 0.9 (standard: {base:.2f})")
    distinct = torch.cdist(P, P)[~torch.eye(L, dtype=torch.bool)].min().item()
    if distinct < 1e-6:
        raise _Fail("two positions get the same row: keep the slower pairs, which tell positions apart")
    return f"shape ({L}, {C}); a pi/2 pair; voice accuracy {acc:.2f} (standard table {base:.2f}); rows distinct"


@_checker
def check_6_3(positions, n_embd: int | None = None, block_size: int = 32) -> str:
    """Exercise 6.3: a voice embedding, x + V[(t - 1) mod 4], one of four learned vectors per position.

    ``positions``: your nn.Module class, built here as ``positions(cfg)`` with
    ``cfg = ModelConfig(n_embd=16, block_size=32)`` like ``positions.LearnedPositions``, or an
    instance (checked on its device, its parameters restored afterwards). ``forward(x)`` maps the
    token embeddings (B, T, C) to (B, T, C).

    Checks, with random parameters: 4 C parameters; the output minus the input is the same for every
    input and batch row; it is periodic with period 4 in t and the four vectors differ; and a
    shorter input (T = 7) gets the same first vectors. Returns True or False.
    """
    C = n_embd or (_width(positions, 16) if isinstance(positions, nn.Module) else 16)
    cfg = ModelConfig(n_embd=C, n_heads=1, block_size=block_size)
    m = _instance(positions, (cfg,), f"(ModelConfig(n_embd={C}, block_size={block_size}))")
    if n_params(m) != 4 * C:
        extra = " (one per position: that is learned positions)" if n_params(m) == block_size * C else ""
        raise _Fail(f"your module has {n_params(m):,} parameters{extra}; four learned vectors of C = {C} "
                    f"cost {4 * C}")
    dev, g, L = model_device(m), torch.Generator().manual_seed(0), block_size
    added = lambda x: _tensor("the output", _call("your module", m, x.to(dev))).double() - x.double()
    with _randomised(m, seed=1), evaluating(m), torch.no_grad():
        x, x2 = torch.randn(2, L, C, generator=g), torch.randn(2, L, C, generator=g)
        a, a2 = added(x), added(x2)                                         # (B, L, C): what was added
        if tuple(a.shape) != (2, L, C):
            raise _Fail(f"the output has shape {tuple(a.shape)}, expected {(2, L, C)}")
        change = max((a2 - a).abs().max().item(), (a[1] - a[0]).abs().max().item())
        if change > 1e-5:
            raise _Fail(f"output minus input depends on the input (by up to {change:.2e}): the module should "
                        f"add one vector to each token")
        P = a[0]                                                            # (L, C): the vector at each t
        gap = (P[4:] - P[:-4]).abs().max(-1).values
        if gap.max() > 1e-5:
            t = int((gap > 1e-5).nonzero()[0])
            raise _Fail(f"not periodic with period 4: positions {t} and {t + 4} (the same voice) get different "
                        f"vectors (max difference {gap[t].item():.3g})")
        for i in range(4):
            for j in range(i + 1, 4):
                if (P[i] - P[j]).abs().max() < 1e-6:
                    raise _Fail(f"positions {i} and {j} get the same vector: the four voices need four vectors")
        _close("the vectors added for T = 7", added(x[:, :7]), a[:, :7], 1e-5, ref="the first 7 for T = 32")
    return f"{4 * C} parameters (learned positions: {L * C}); adds one vector per position, period 4, four distinct"


# ----------------------------------------------------------------------------- chapter 8

@_checker
def check_8_1(skew: Callable, skew_unmasked: Callable | None = None) -> str:
    """Exercise 8.1: the skew by hand, and (optional) its unmasked version.

    ``skew(rel)``: your function. ``rel`` (L, L) = Q E^T, column r for distance r - (L - 1); it returns
    S (L, L) with S[i, j] = rel[i, L - 1 + j - i] for j <= i (entries above the diagonal may be anything).
    ``skew_unmasked(rel)``, if given: ``rel`` (L, 2L - 1), distances -(L - 1) .. L - 1; it returns
    (L, L) with out[i, j] = rel[i, L - 1 + j - i] for every i, j.

    Checks: ``skew`` equals ``relative.relative_logits_direct`` on random q, E on and below the diagonal,
    for L = 1, 2, 5, 8; ``skew_unmasked`` equals the direct gather for L = 1, 3, 5. Returns True or False.
    """
    g, d = torch.Generator().manual_seed(0), 4
    for L in (1, 2, 5, 8):
        q, E = torch.randn(L, d, generator=g), torch.randn(L, d, generator=g)
        direct = relative_logits_direct(q[None], E[None])[0]                 # (L, L), 0 above the diagonal
        got = _call(f"your skew on a ({L}, {L}) matrix", skew, (q @ E.T).clone())
        _close(f"for L = {L}, your S", got, direct, 1e-5, ref="relative_logits_direct on the entries j <= i",
               mask=torch.ones(L, L, dtype=torch.bool).tril())
    checked = "S[i, j] = rel[i, L - 1 + j - i] for j <= i, L = 1, 2, 5, 8"
    if skew_unmasked is not None:
        for L in (1, 3, 5):
            rel = torch.randn(L, 2 * L - 1, generator=g)                     # (L, 2L - 1)
            want = rel.gather(1, distances(L) + L - 1)                        # (L, L)
            got = _call(f"your skew_unmasked on a ({L}, {2 * L - 1}) matrix", skew_unmasked, rel.clone())
            _close(f"for L = {L}, the unmasked skew", got, want, 1e-6, ref="rel[i, L - 1 + j - i]")
        checked += "; unmasked: every entry, L = 1, 3, 5"
    return checked


# ----------------------------------------------------------------------------- chapter 9

@_checker
def check_9_1(keys_per_query: Callable) -> str:
    """Exercise 9.1: how many keys query i sees.

    ``keys_per_query(L, N=None)``: your function, (L,) numbers (tensor, array or list): entry i is the
    number of keys query i sees, in causal global attention when N is None (called as
    ``keys_per_query(L)``), in local attention with blocks of N (its own block up to i and the block
    before) otherwise.

    Checks: equal to the row sums of the causal mask and of ``local.band_mask(L, N)`` for several L
    and N (N = 1, L not a multiple of N, L < N included). Returns True or False.
    """
    for L, N in ((1, None), (12, None), (1, 4), (16, 4), (19, 4), (10, 1), (6, 8)):
        shown = f"keys_per_query({L})" if N is None else f"keys_per_query({L}, {N})"
        got = _tensor(f"{shown}'s result", _call(shown, keys_per_query, L) if N is None
                      else _call(shown, keys_per_query, L, N)).double().flatten()
        want = (torch.arange(L) + 1 if N is None else band_mask(L, N).sum(1)).double()
        if got.shape != want.shape:
            raise _Fail(f"{shown} has {got.numel()} entries, expected {L}, one per query")
        if not torch.equal(got, want):
            i = int((got != want).nonzero()[0])
            raise _Fail(f"{shown}: query {i} sees {int(want[i])} keys, you say {got[i].item():g}")
    return "global and local counts for L = 1 .. 19, N = 1, 4, 8"


@_checker
def check_9_2(reach_fn: Callable) -> str:
    """Exercise 9.2: how far back information travels through n local layers.

    ``reach_fn(T, N, n_layers)``: your function, a (T, T) boolean (or 0/1) matrix, True where output i
    of n stacked local layers with blocks of N depends on input j.

    Checks: equal to the boolean powers of ``local.band_mask`` (``exercises.ch9.reach``) for
    (T, N, n) = (12, 3, 1), (24, 4, 2), (24, 4, 3), (10, 2, 5). Returns True or False.
    """
    for T, N, n in ((12, 3, 1), (24, 4, 2), (24, 4, 3), (10, 2, 5)):
        shown = f"reach({T}, {N}, {n})"
        got = _tensor(f"{shown}'s result", _call(shown, reach_fn, T, N, n)) != 0
        want = reach(T, N, n)                                                # (T, T) bool
        if tuple(got.shape) != (T, T):
            raise _Fail(f"{shown} has shape {tuple(got.shape)}, expected {(T, T)}")
        if not torch.equal(got, want):
            i, j = [int(v) for v in (got != want).nonzero()[0]]
            raise _Fail(f"{shown}: output {i} {'depends' if want[i, j] else 'does not depend'} on input {j}, "
                        f"yours says the opposite ({int((got != want).sum())} of {T * T} entries differ)")
    return "equal to powers of the band mask for 4 (T, N, n_layers), up to 5 layers"


@_checker
def check_9_3(skew: Callable) -> str:
    """Exercise 9.3: the square local skew, (..., N, 2N - 1) -> (..., N, N), with F.pad and reshape.

    ``skew(rel)``: your function; out[..., n, m] = rel[..., n, N - 1 + m - n], any leading batch dims.

    Checks: equal to ``local.skew_local(rel, N)`` for rel of shapes (1, 1), (4, 7), (2, 6, 11) and
    (2, 3, 5, 9). Returns True or False.
    """
    g = torch.Generator().manual_seed(0)
    for shape in ((1, 1), (4, 7), (2, 6, 11), (2, 3, 5, 9)):
        rel = torch.randn(shape, generator=g)
        got = _call(f"your function on rel of shape {shape}", skew, rel.clone())
        _close(f"for rel of shape {shape}, the result", got, skew_local(rel, shape[-2]), 1e-6, ref="skew_local")
    return "equals skew_local for N = 1, 4, 6, 5, with 0, 1 and 2 leading dims"


# ----------------------------------------------------------------------------- chapter 10

_FFTS = ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
         "hfft", "ihfft")


@contextlib.contextmanager
def _no_fft():
    """Inside: calling any torch.fft transform is a fail line."""
    saved = {name: getattr(torch.fft, name) for name in _FFTS if hasattr(torch.fft, name)}

    def refuse(name):
        def call(*args, **kwargs):
            raise _Fail(f"your function calls torch.fft.{name}: the exercise asks for four real matrix products")
        return call

    for name in saved:
        setattr(torch.fft, name, refuse(name))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.fft, name, fn)


@_checker
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
        got = _call(f"your function on x of shape {shape}", fourier, x.clone())
        _close(f"for x of shape {shape} ({str(dtype)[6:]}), the result", got, X.real, atol,
               ref="fft2(x, dim=(-2, -1)).real", known=known)
    with _no_fft():
        _call("your function", fourier, torch.randn(4, 3, generator=g, dtype=torch.float64))
    return "equals fft2(x).real over the last two axes for 4 shapes, float64 and float32; no torch.fft call"


@_checker
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
            got = _call(f"your function with n = {n}", conv, u.clone(), h.clone(), n)
            _close(f"with n = {n} (T = {T}, K = {K}) the output", got, direct, 1e-8, ref="causal_conv_direct")
        for n in sorted({max(T, K), smallest - 1}):
            got = _tensor("the output", _call(f"your function with n = {n}", conv, u.clone(), h.clone(), n))
            if got.shape == direct.shape and (got.double() - direct).abs().max() < 1e-8:
                raise _Fail(f"with n = {n} < T + K - 1 = {smallest} (T = {T}, K = {K}) the output equals the direct "
                            f"convolution, but a length-{n} FFT wraps around: is n used as the FFT length?")
            _close(f"with n = {n} (T = {T}, K = {K}) the output", got, fft_conv_n(u, h, n), 1e-8,
                   ref=f"the circular convolution of length {n}")
    return "equals causal_conv_direct for n >= T + K - 1, wraps around for smaller n; (T, K) = (16, 16), (12, 5)"


@_checker
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
        model = build_model("fnet-conv", ModelConfig(n_embd=16, n_heads=2, n_layers=2, block_size=32))
    if not getattr(model, "cacheable", False):
        raise _Fail(f"{type(model).__name__} cannot run with caches: pass a Decoder whose mixers keep a cache "
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
                got = _call(f"your function with prefill = {prefill}", cached_logits, model, tokens.clone(), prefill)
        finally:
            for hk in hooks:
                hk.remove()
        _close(f"with prefill = {prefill}, the logit matrix", got, full, 1e-4, ref="one full call of the model")
        want = [prefill] + [1] * (T - prefill)
        for i, s in enumerate(sizes):
            if s != want:
                shown = f"{s[:8]}"[:-1] + (", ...]" if len(s) > 8 else "]")
                raise _Fail(f"with prefill = {prefill}, the mixer of block {i} got {shown} tokens per call; feed "
                            f"{prefill} in the first call and then one per call, with its cache")
    return f"equals one full call for prefill = 1 and 6 ({T} tokens); one token per call after the prefill"


# ----------------------------------------------------------------------------- chapter 11

@_checker
def check_11_1(bootstrap: Callable) -> str:
    """Exercise 11.1: a paired bootstrap of the difference in NLL per token between two models.

    ``bootstrap(a, b, counts, n=2000, seed=0)``: your function. ``a``, ``b``: NumPy arrays of the summed
    NLL per piece of models a and b (the same pieces), ``counts``: tokens per piece. It returns
    ``(diff, low, high)``: sum(a - b) / sum(counts) and a 95% interval from ``n`` resamples of the
    pieces, drawn with ``np.random.default_rng(seed)``, each piece keeping both models' scores together.

    Checks, on 40 made-up pieces of very different difficulty: diff equals the reference's; the
    interval contains it; it is as wide as the reference ``exercises.ch11.paired_bootstrap``'s within
    25 % (an unpaired bootstrap is several times wider); the same seed gives the same interval.
    Returns True or False.
    """
    rng = np.random.default_rng(1)
    counts = rng.integers(60, 400, 40)
    hard = rng.uniform(1.0, 3.0, 40)                                        # pieces differ a lot
    a = counts * (hard + rng.normal(0, 0.05, 40))
    b = counts * (hard + 0.03 + rng.normal(0, 0.05, 40))
    ref_diff, ref_lo, ref_hi = paired_bootstrap(a, b, counts, n=2000, seed=0)
    call = lambda: _numbers("the result (diff, low, high)",
                            _call("bootstrap(a, b, counts, n=2000, seed=0)", bootstrap, a.copy(), b.copy(),
                                  counts.copy(), n=2000, seed=0), 3)
    diff, lo, hi = call()
    if abs(diff - ref_diff) > 1e-9:
        unweighted = float(((a - b) / counts).mean())
        why = (" (it matches the unweighted mean of the pieces' per-token differences; weight by tokens)"
               if abs(diff - unweighted) < 1e-9 else "")
        raise _Fail(f"the difference is {diff:.5f}, expected sum(a - b) / sum(counts) = {ref_diff:.5f}{why}")
    if not lo <= diff <= hi:
        raise _Fail(f"the interval [{lo:.4f}, {hi:.4f}] does not contain the difference {diff:.4f}")
    ratio = (hi - lo) / (ref_hi - ref_lo)
    if not 0.9 <= ratio <= 1.12:                    # a 90 % interval is ~0.84 times as wide, a 99 % ~1.3
        why = ("; are both models' scores of a piece drawn together?" if ratio > 1.12 else
               "; a 95 % interval keeps the 2.5 and 97.5 percentiles")
        raise _Fail(f"the interval is {ratio:.2f} times as wide as the paired bootstrap's ({hi - lo:.4f} against "
                    f"{ref_hi - ref_lo:.4f}){why}")
    if call() != [diff, lo, hi]:
        raise _Fail("two calls with seed=0 give different intervals: draw with np.random.default_rng(seed)")
    return (f"diff {diff:+.4f} as the reference; interval [{lo:+.4f}, {hi:+.4f}] contains it, width "
            f"{ratio:.2f} x the reference's; reproducible")


@_checker
def check_11_2(fit: Callable, speedup: Callable | None = None) -> str:
    """Exercise 11.2: a cost model for sampling.

    ``fit(rows, mode, degree)``: your function. ``rows`` is a list of dicts like
    ``compare.sampling_cost``'s, ``{"t": 64, "cached": 2.2, "re-encoded": 3.1}`` (milliseconds per new
    token at length t); it returns ``(a, b, c)``, the least-squares fit ms = a + b t (+ c t^2 for
    ``degree`` 2) of column ``mode``, with c = 0 for degree 1.
    ``speedup(cached, reencoded, n_tokens)``, if given: your function, the time to sample ``n_tokens``
    tokens by re-encoding over the time with the cache, each the fit summed over t = 1 .. n_tokens.

    Checks: ``fit`` equals ``exercises.ch11.fit_cost`` (relative 1e-6) for (cached, 1), (re-encoded, 2),
    (re-encoded, 1) on made-up noisy rows; ``speedup`` equals ``exercises.ch11.predicted_speedup`` for
    n_tokens = 256, 1024, 4096. Returns True or False.
    """
    rng = np.random.default_rng(0)
    ts = [16, 32, 64, 128, 256, 512, 1024]
    rows = [{"t": t, "cached": 2.0 + 0.003 * t + rng.normal(0, 0.05),
             "re-encoded": 2.5 + 0.01 * t + 2e-5 * t * t + rng.normal(0, 0.05)} for t in ts]
    for mode, degree in (("cached", 1), ("re-encoded", 2), ("re-encoded", 1)):
        shown = f"fit(rows, {mode!r}, {degree})"
        got = _numbers(f"{shown}'s result (a, b, c)", _call(shown, fit, [dict(r) for r in rows], mode, degree), 3)
        want = fit_cost(rows, mode, degree)
        if not np.allclose(got, want, rtol=1e-6, atol=1e-12):
            why = (" (it matches np.polyfit's order, highest power first: reverse it)"
                   if np.allclose(got[::-1], want, rtol=1e-6) or np.allclose(got[1::-1] + [0.0], want, rtol=1e-6)
                   else "")
            raise _Fail(f"{shown} gives (a, b, c) = ({', '.join(f'{v:.4g}' for v in got)}), the least-squares fit is "
                        f"({', '.join(f'{v:.4g}' for v in want)}){why}")
    checked = "fit equals the least-squares fits (cached, 1), (re-encoded, 2), (re-encoded, 1)"
    if speedup is not None:
        cached, reenc = fit_cost(rows, "cached", 1), fit_cost(rows, "re-encoded", 2)
        for n in (256, 1024, 4096):
            got = _numbers("the speed-up", [_call(f"speedup(cached, reencoded, {n})", speedup, cached, reenc, n)], 1)[0]
            want = predicted_speedup(cached, reenc, n)
            if not math.isclose(got, want, rel_tol=1e-6):
                t = np.arange(n, dtype=float)                               # t = 0 .. n - 1: off by one
                total = lambda p: n * p[0] + p[1] * t.sum() + p[2] * (t * t).sum()
                why = (" (it matches a sum over t = 0 .. n - 1; sum over t = 1 .. n)"
                       if math.isclose(got, total(reenc) / total(cached), rel_tol=1e-6) else "")
                raise _Fail(f"the speed-up for {n} tokens is {got:.4f}, expected {want:.4f}{why}")
        checked += "; speed-up for 256, 1024, 4096 tokens"
    return checked


# ----------------------------------------------------------------------------- the list

CHECKERS: dict[str, Callable[..., bool]] = {
    "1.1": check_1_1, "3.1": check_3_1, "3.2": check_3_2, "4.1": check_4_1, "4.2": check_4_2, "5.1": check_5_1,
    "6.2": check_6_2, "6.3": check_6_3, "8.1": check_8_1, "9.1": check_9_1, "9.2": check_9_2, "9.3": check_9_3,
    "10.1": check_10_1, "10.2": check_10_2, "10.3": check_10_3, "11.1": check_11_1, "11.2": check_11_2,
}


def checkers_for(chapter: int) -> list[str]:
    """The names of chapter ``chapter``'s checkers, e.g. ``checkers_for(9)`` -> ["check_9_1", ...]; [] if none."""
    if isinstance(chapter, bool) or not isinstance(chapter, int) or not 0 <= chapter <= 11:
        raise ValueError(f"chapter must be an integer from 0 to 11, got {chapter!r}")
    return [fn.__name__ for key, fn in CHECKERS.items() if key.split(".")[0] == str(chapter)]
