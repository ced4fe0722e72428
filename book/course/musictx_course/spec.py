"""What an assignment is: its questions, its written question with a rubric, each student's variant, and the
secret every hidden value derives from.

A question asks for a function or for a value:

- a *function* question names a function the student writes; the grader calls it on hidden inputs (``cases``,
  drawn from the secret for this student and question) and compares each output with the reference's;
- a *value* question names a variable the student's cell sets from the student's variant (a number or an array
  computed on the variant's data, sizes or seed); the grader compares it with the reference's value for the same
  variant, so a classmate's number, computed on another variant, fails.

The reference answers, the case generators and the judges run in the grader only (``grade``); the student's code
runs in a process of its own that never sees them (``sandbox``).
"""
from __future__ import annotations

import hashlib
import hmac
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


def derive(secret: str, *parts) -> np.random.Generator:
    """A generator seeded by HMAC-SHA256 of ``parts`` under the lecturer's ``secret``: without the secret, nothing
    about it can be known; with it, the grader draws the same values every time."""
    if not secret:
        raise ValueError("the course needs a non-empty secret")
    digest = hmac.new(secret.encode(), "/".join(map(str, parts)).encode(), hashlib.sha256).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


def close(got: Any, want: Any, rtol: float = 1e-4, atol: float = 1e-6) -> str | None:
    """None when ``got`` equals ``want`` (numbers within the tolerances, arrays by shape and value, lists and dicts
    item by item), else a one-line reason, which never shows the expected value."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return f"expected a dict with keys {sorted(want)}, got {type(got).__name__}"
        for k in want:
            reason = close(got[k], want[k], rtol, atol)
            if reason:
                return f"[{k!r}]: {reason}"
        return None
    if got is None and want is not None:
        return "no answer (None)"
    if isinstance(want, (bool, str)) or want is None:
        return None if got == want and type(got) is type(want) else f"expected a {type(want).__name__}, wrong value"
    try:
        g = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return f"expected a number or an array, got {type(got).__name__}"
    w = np.asarray(want, dtype=float)
    if g.shape != w.shape:
        return f"expected shape {w.shape}, got {g.shape}"
    if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
        return "wrong value" if w.size == 1 else f"wrong values at {int((~np.isclose(g, w, rtol, atol)).sum())} " \
                                                  f"of {w.size} places"
    return None


@dataclass(frozen=True)
class Question:
    """One auto-graded question. ``name`` is also the id stem of its cells (``q1-answer``, ``q1-tests``)."""
    name: str
    points: float
    prompt: str                      # markdown shown above the answer cell
    answer: str                      # the function's or the variable's name
    stub: str                        # the answer cell the student starts from
    public: str                      # the public tests: code the student runs (asserts), shown in the notebook
    reference: Callable              # function: reference(**case); value: reference(**variant)
    cases: Callable[[dict, np.random.Generator], list[dict]] | None = None   # function questions only
    judge: Callable[[Any, Any], str | None] = close
    timeout: float = 10.0            # seconds for all its cases together
    tensors: bool = False            # the cases' arrays reach the answer as torch tensors (else numpy arrays)

    @property
    def kind(self) -> str:
        return "function" if self.cases is not None else "value"


@dataclass(frozen=True)
class Written:
    """The written question, graded by a person with its rubric: (points, what earns them)."""
    prompt: str
    rubric: tuple[tuple[float, str], ...]

    @property
    def points(self) -> float:
        return math.fsum(p for p, _ in self.rubric)


@dataclass(frozen=True)
class Assignment:
    week: int
    title: str
    chapters: tuple[int, ...]
    intro: str                                       # markdown under the title
    variant: Callable[[np.random.Generator], dict]   # the student's variant, from derive(secret, week, student)
    questions: tuple[Question, ...]
    written: Written
    setup: str = ""                                  # code run before the answers (imports), shown to the student
    notes: dict = field(default_factory=dict)

    def __post_init__(self):
        names = [q.name for q in self.questions]
        if len(set(names)) != len(names) or len(self.questions) < 3:
            raise ValueError(f"week {self.week}: at least three questions with distinct names, got {names}")

    def variant_for(self, secret: str, student: str) -> dict:
        return self.variant(derive(secret, "variant", self.week, student))

    def cases_for(self, secret: str, student: str, question: Question) -> list[dict]:
        variant = self.variant_for(secret, student)
        return question.cases(variant, derive(secret, "cases", self.week, student, question.name))

    @property
    def auto_points(self) -> float:
        return math.fsum(q.points for q in self.questions)
