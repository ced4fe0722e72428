"""What every exercise checker shares: the pass or fail line, the wrapper that turns a check into a
checker, and the comparisons that explain a wrong answer in one line.

Notebooks: the "Exercises" sections. The checkers themselves are one module per chapter
(``checks/ch5.py`` holds ``check_5_1``); ``classroom.checkers`` lists them all. They hold no
reference solution: those are the book's (``book/solutions``), and where a checker needs a value only
a reference gives, it reads the number stored in ``checks/expected.json`` (``expected``).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import os
import traceback
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn as nn

EXPECTED = Path(__file__).parent / "checks" / "expected.json"


@functools.lru_cache(maxsize=None)
def expected(chapter: int) -> dict:
    """The values chapter ``chapter``'s checkers compare with, where only a reference solution gives them: computed
    by the book's solutions on the checkers' seeded inputs (``python -m musictx_solutions.expected``), stored as
    numbers."""
    return json.loads(EXPECTED.read_text())[str(chapter)]


class Fail(Exception):
    """A property of the answer that does not hold; the message is the fail line, ``hint`` a second line."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def line(name: str, ok: bool, text: str, hint: str | None = None) -> bool:
    """Print the pass or fail line (and a hint below it) and return ``ok``."""
    print(f"{name}: pass ({text})" if ok else f"{name}: fail: {text}")
    if hint:
        print(f"    {hint}")
    return ok


def checker(check: Callable[..., str]) -> Callable[..., bool]:
    """Turn ``check`` (returns what it checked, raises Fail) into a checker that prints and returns a bool."""

    @functools.wraps(check)
    def run(*args, **kwargs) -> bool:
        try:
            with torch.random.fork_rng(devices=[]):                    # leave the student's seed alone
                checked = check(*args, **kwargs)
        except Fail as e:
            return line(check.__name__, False, str(e), e.hint)
        except Exception as e:                                         # an answer of an unexpected kind
            return line(check.__name__, False, f"checking your answer raised {type(e).__name__}: {msg(e)}",
                         where(e))
        return line(check.__name__, True, checked)

    run.__signature__ = inspect.signature(check).replace(return_annotation="bool")   # what help() shows
    return run


def msg(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0]
    return text if len(text) <= 200 else text[:197] + "..."


LIBRARY = tuple(os.path.dirname(os.path.abspath(m.__file__)) for m in (torch, np, contextlib)) + (
    str(Path(__file__).resolve().parents[1]),)                   # torch, numpy, the stdlib, this package


def where(e: BaseException) -> str | None:
    """The innermost line of the traceback that is in the student's code, not in torch or this package."""
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not os.path.abspath(f.filename).startswith(LIBRARY)]
    if not frames:
        return None
    f = frames[-1]
    return f"in {f.name}, line {f.lineno}" + (f": {f.line.strip()}" if f.line else "")


def call(what: str, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``; an exception in it becomes a fail line that says ``what`` raised it, and where."""
    try:
        return fn(*args, **kwargs)
    except Fail:
        raise
    except Exception as e:
        raise Fail(f"{what} raised {type(e).__name__}: {msg(e)}", where(e)) from None


def instance(obj, args: tuple, shown: str) -> nn.Module:
    """The student's module: an instance as given, or the class built as ``Class(*args)`` (``shown``)."""
    if isinstance(obj, nn.Module):
        return obj
    if inspect.isclass(obj) and issubclass(obj, nn.Module):
        m = call(f"building your class as {obj.__name__}{shown}", obj, *args)
        if not isinstance(m, nn.Module):
            raise Fail(f"{obj.__name__}{shown} is not an nn.Module")
        return m
    raise Fail(f"expected your nn.Module class or an instance of it, got {type(obj).__name__}")


def width(module: nn.Module, default: int) -> int:
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
def randomised(module: nn.Module, seed: int, mean: float = 0.0):
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


def tensor(what: str, x) -> torch.Tensor:
    """``x`` (a tensor, an array, a list) as a CPU tensor, or a fail line."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    try:
        return torch.as_tensor(np.asarray(x))
    except Exception:
        raise Fail(f"{what} should be a tensor, got {type(x).__name__}") from None


def close(what: str, got, expected: torch.Tensor, atol: float, ref: str = "the reference",
           mask: torch.Tensor | None = None, known: dict[str, torch.Tensor] | None = None) -> None:
    """Fail unless ``got`` has ``expected``'s shape and is within ``atol`` of it (where ``mask`` is True).

    The fail line gives the max abs difference and where it is; ``known`` maps a description of a common
    mistake to its result, and the line names the one ``got`` matches.
    """
    got, expected = tensor(what, got), expected.detach().cpu()
    if tuple(got.shape) != tuple(expected.shape):
        raise Fail(f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    if got.is_complex() and not expected.is_complex():
        raise Fail(f"{what} is complex, expected real numbers")
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
    raise Fail(text)


def numbers(what: str, x, n: int) -> list[float]:
    """``x`` as a list of ``n`` floats, or a fail line."""
    try:
        values = [float(v) for v in x]
    except Exception:
        raise Fail(f"{what} should be {n} numbers, got {type(x).__name__}") from None
    if len(values) != n:
        raise Fail(f"{what} should be {n} numbers, got {len(values)}")
    return values
