"""Chapter 11's exercise checkers: an unpaired bootstrap beside the chapter's paired one, a cost model of
sampling (exercises 11.1 and 11.2).

Notebook: notebooks/11_comparison.ipynb
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .. import grading

__all__ = ["check_11_1", "check_11_2"]


def _bootstrap_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """check_11_1's made-up scores: summed NLL per piece of models a and b, and tokens per piece, for 40
    pieces of very different difficulty, b 0.03 nats per token worse than a."""
    rng = np.random.default_rng(1)
    counts = rng.integers(60, 400, 40)
    hard = rng.uniform(1.0, 3.0, 40)                                        # pieces differ a lot
    a = counts * (hard + rng.normal(0, 0.05, 40))
    b = counts * (hard + 0.03 + rng.normal(0, 0.05, 40))
    return a, b, counts


def _cost_rows() -> list[dict]:
    """check_11_2's made-up ``compare.sampling_cost`` rows: milliseconds per new token at length t, noisy."""
    rng = np.random.default_rng(0)
    ts = [16, 32, 64, 128, 256, 512, 1024]
    return [{"t": t, "cached": 2.0 + 0.003 * t + rng.normal(0, 0.05),
             "re-encoded": 2.5 + 0.01 * t + 2e-5 * t * t + rng.normal(0, 0.05)} for t in ts]


@grading.checker
def check_11_1(bootstrap: Callable) -> str:
    """Exercise 11.1: an unpaired bootstrap of the difference in NLL per token between two models.

    ``bootstrap(a, b, counts, n=2000, seed=0)``: your function. ``a``, ``b``: NumPy arrays of the summed
    NLL per piece of models a and b (the same pieces), ``counts``: tokens per piece. It returns
    ``(diff, low, high)`` as ``compare.paired_bootstrap`` does: sum(a - b) / sum(counts) and a 95% interval
    from ``n`` resamples, drawn with ``np.random.default_rng(seed)``, but each resample draws model a's
    pieces and model b's pieces independently: model a's NLL per token on its draw minus model b's on its own.

    Checks, on 40 made-up pieces of very different difficulty: diff equals the reference's; the interval
    contains it; it is as wide as the book's reference unpaired bootstrap's within 10 % (its interval is
    stored; the paired one is several times narrower); the same seed gives the same interval.
    Returns True or False.
    """
    a, b, counts = _bootstrap_inputs()
    stored = grading.expected(11)["bootstrap"]
    ref_diff, ref_lo, ref_hi = stored["unpaired"]
    _, pair_lo, pair_hi = stored["paired"]
    call = lambda: grading.numbers("the result (diff, low, high)",
                                   grading.call("bootstrap(a, b, counts, n=2000, seed=0)", bootstrap, a.copy(),
                                                b.copy(), counts.copy(), n=2000, seed=0), 3)
    diff, lo, hi = call()
    if abs(diff - ref_diff) > 1e-9:
        unweighted = float(((a - b) / counts).mean())
        why = (" (it matches the unweighted mean of the pieces' per-token differences; weight by tokens)"
               if abs(diff - unweighted) < 1e-9 else "")
        raise grading.Fail(f"the difference is {diff:.5f}, expected sum(a - b) / sum(counts) = {ref_diff:.5f}{why}")
    if not lo <= diff <= hi:
        raise grading.Fail(f"the interval [{lo:.4f}, {hi:.4f}] does not contain the difference {diff:.4f}")
    paired = (hi - lo) / (pair_hi - pair_lo)
    pairing = ("it keeps both models' scores of a piece together: draw model a's pieces and model b's pieces "
               "independently, one set of indices each")
    if abs(lo - pair_lo) < 1e-9 and abs(hi - pair_hi) < 1e-9:
        raise grading.Fail(f"the interval [{lo:.4f}, {hi:.4f}] is the paired bootstrap's", pairing)
    if 0.75 <= paired <= 1.4:                       # a paired interval, of other draws or another level
        raise grading.Fail(f"the interval [{lo:.4f}, {hi:.4f}] is as narrow as the paired bootstrap's ({paired:.2f} "
                           f"times its width {pair_hi - pair_lo:.4f})", pairing)
    ratio = (hi - lo) / (ref_hi - ref_lo)
    if not 0.9 <= ratio <= 1.12:                    # a 90 % interval is ~0.84 times as wide, a 99 % ~1.3
        why = ("; a 95 % interval keeps the 2.5 and 97.5 percentiles" if 0.75 <= ratio <= 1.4 else
               "; each resample: model a's NLL per token on its draw of pieces minus model b's on its own")
        raise grading.Fail(f"the interval is {ratio:.2f} times as wide as the reference unpaired bootstrap's "
                           f"({hi - lo:.4f} against {ref_hi - ref_lo:.4f}){why}")
    if call() != [diff, lo, hi]:
        raise grading.Fail("two calls with seed=0 give different intervals: draw with np.random.default_rng(seed)")
    return (f"diff {diff:+.4f} as the reference; interval [{lo:+.4f}, {hi:+.4f}] contains it, width "
            f"{ratio:.2f} x the reference's, {paired:.1f} x the paired bootstrap's; reproducible")


@grading.checker
def check_11_2(fit: Callable, speedup: Callable | None = None) -> str:
    """Exercise 11.2: a cost model for sampling.

    ``fit(rows, mode, degree)``: your function. ``rows`` is a list of dicts like
    ``compare.sampling_cost``'s, ``{"t": 64, "cached": 2.2, "re-encoded": 3.1}`` (milliseconds per new
    token at length t); it returns ``(a, b, c)``, the least-squares fit ms = a + b t (+ c t^2 for
    ``degree`` 2) of column ``mode``, with c = 0 for degree 1.
    ``speedup(cached, reencoded, n_tokens)``, if given: your function, the time to sample ``n_tokens``
    tokens by re-encoding over the time with the cache, each the fit summed over t = 1 .. n_tokens.

    Checks: ``fit`` equals the book's reference fits (relative 1e-6; their coefficients are stored) for
    (cached, 1), (re-encoded, 2), (re-encoded, 1) on made-up noisy rows; ``speedup``, given the stored
    (cached, 1) and (re-encoded, 2) fits, equals the reference's stored speed-ups for n_tokens = 256, 1024,
    4096. Returns True or False.
    """
    rows = _cost_rows()
    stored = grading.expected(11)
    for mode, degree in (("cached", 1), ("re-encoded", 2), ("re-encoded", 1)):
        shown = f"fit(rows, {mode!r}, {degree})"
        got = grading.numbers(f"{shown}'s result (a, b, c)",
                              grading.call(shown, fit, [dict(r) for r in rows], mode, degree), 3)
        want = stored["fits"][f"{mode} {degree}"]
        if not np.allclose(got, want, rtol=1e-6, atol=1e-12):
            why = (" (it matches np.polyfit's order, highest power first: reverse it)"
                   if np.allclose(got[::-1], want, rtol=1e-6) or np.allclose(got[1::-1] + [0.0], want, rtol=1e-6)
                   else "")
            raise grading.Fail(f"{shown} gives (a, b, c) = ({', '.join(f'{v:.4g}' for v in got)}), "
                               f"the least-squares fit is ({', '.join(f'{v:.4g}' for v in want)}){why}")
    checked = "fit equals the least-squares fits (cached, 1), (re-encoded, 2), (re-encoded, 1)"
    if speedup is not None:
        cached, reenc = tuple(stored["fits"]["cached 1"]), tuple(stored["fits"]["re-encoded 2"])
        for n, want, from_zero in zip(stored["lengths"], stored["speedup"], stored["speedup_from_zero"]):
            got = grading.numbers("the speed-up",
                                  [grading.call(f"speedup(cached, reencoded, {n})", speedup, cached, reenc, n)], 1)[0]
            if not math.isclose(got, want, rel_tol=1e-6):
                why = (" (it matches a sum over t = 0 .. n - 1; sum over t = 1 .. n)"
                       if math.isclose(got, from_zero, rel_tol=1e-6) else "")
                raise grading.Fail(f"the speed-up for {n} tokens is {got:.4f}, expected {want:.4f}{why}")
        checked += "; speed-up for 256, 1024, 4096 tokens"
    return checked
