"""Chapter 11 exercises: is a difference between two models real, a cost model of sampling, and what
the temperature does to the musical statistics.

Notebook: notebooks/11_comparison.ipynb
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ...device import evaluating, model_device
from ...engine.sample import generate, prompt_from
from ...io.data import Piece
from ...io.stats import HARMONY, HEADS, RANGES, RHYTHM, chorale_stats
from ...io.tokens import LOWEST, N_SPECIAL, VOCAB_SIZE, decode, encode
from ...models.tasks import piece_nlls
from . import grading

__all__ = ["piece_nlls", "paired_bootstrap", "fit_cost", "sample_ms", "predicted_speedup", "exercise_11_1",
           "exercise_11_2", "exercise_11_3", "out_of_range_mass", "check_11_1", "check_11_2"]


def paired_bootstrap(a: np.ndarray, b: np.ndarray, counts: np.ndarray, n: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """NLL per token of model a minus model b over the pieces, and a 95% bootstrap interval.

    ``a``, ``b``: summed NLL per piece of the two models, on the same pieces; ``counts``: tokens per
    piece. Each resample draws pieces with replacement and keeps both models' scores of a piece
    together (paired), so what a piece makes hard for both cancels.
    """
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(counts), (n, len(counts)))                 # (n, pieces)
    diffs = (a[idx] - b[idx]).sum(1) / counts[idx].sum(1)                # (n,)
    lo, hi = np.quantile(diffs, [0.025, 0.975])
    return float((a - b).sum() / counts.sum()), float(lo), float(hi)


def exercise_11_1(model_a: nn.Module, model_b: nn.Module, pieces: list[Piece], names=("a", "b"),
                  n: int = 2000) -> dict:
    """Is model a's valid NLL really different from model b's? A paired bootstrap over pieces."""
    (sa, counts), (sb, _) = piece_nlls(model_a, pieces), piece_nlls(model_b, pieces)
    diff, lo, hi = paired_bootstrap(sa, sb, counts, n)
    real = lo > 0 or hi < 0
    print(f"{names[0]} - {names[1]}: {diff:+.3f} nats/token, 95% interval [{lo:+.3f}, {hi:+.3f}] over "
          f"{len(pieces)} pieces: {'resolved by these pieces' if real else 'not resolved by these pieces'}")
    return {"diff": diff, "low": lo, "high": hi, "real": real}


def fit_cost(rows: list[dict], mode: str, degree: int) -> tuple[float, float, float]:
    """Least-squares fit of ms per new token = a + b t (+ c t^2 for ``degree`` 2) to
    ``compare.sampling_cost`` rows; returns (a, b, c), c = 0 for degree 1."""
    t = np.array([r["t"] for r in rows], dtype=float)
    ms = np.array([r[mode] for r in rows], dtype=float)
    coef = np.polyfit(t, ms, degree)[::-1]                              # a, b[, c]
    return tuple(float(v) for v in np.pad(coef, (0, 3 - len(coef))))


def sample_ms(fit: tuple[float, float, float], n_tokens: int) -> float:
    """Milliseconds to sample ``n_tokens`` tokens: the sum over t = 1 .. n of a + b t + c t^2."""
    a, b, c = fit
    n = n_tokens
    return n * a + b * n * (n + 1) / 2 + c * n * (n + 1) * (2 * n + 1) / 6


def predicted_speedup(cached: tuple[float, float, float], reencoded: tuple[float, float, float],
                      n_tokens: int) -> float:
    """Time to sample ``n_tokens`` tokens by re-encoding over the time with the cache, from the two fits."""
    return sample_ms(reencoded, n_tokens) / sample_ms(cached, n_tokens)


def exercise_11_2(rows: list[dict], lengths=(256, 1024, 4096), measured: dict[int, float] | None = None) -> dict:
    """Fit the cost of one new token with the cache (a + b t: one query against t keys) and by
    re-encoding (a + b t + c t^2: t tokens through the network, t^2 attention scores); say which term
    dominates at each length, and predict the speed-up of whole samples. ``measured``: {n: speed-up}
    of whole samples timed by ``bench_sampling``, printed beside the prediction for the same n."""
    fits = {"cached": fit_cost(rows, "cached", 1), "re-encoded": fit_cost(rows, "re-encoded", 2)}
    for mode, (a, b, c) in fits.items():
        print(f"{mode:>10s}: {a:7.3f} ms + {1e3 * b:7.3f} us * t + {1e6 * c:7.4f} ns * t^2")
        for t in (16, 256, 1024):
            terms = np.array([a, b * t, c * t * t])
            share = np.abs(terms) / np.abs(terms).sum()
            print(f"{'':12s}t = {t:4d}: constant {share[0]:4.0%}, linear {share[1]:4.0%}, "
                  f"quadratic {share[2]:4.0%}")
    out = {n: predicted_speedup(fits["cached"], fits["re-encoded"], n) for n in lengths}
    for n, x in out.items():
        print(f"predicted speed-up for {n:5d} tokens: {x:5.1f}x")
    for n, x in (measured or {}).items():
        pred = predicted_speedup(fits["cached"], fits["re-encoded"], n)
        print(f"measured speed-up for {n:5d} tokens: {x:5.1f}x, {x / pred:.2f} times the prediction")
    return {"fits": fits, "speedup": out}


@torch.no_grad()
def out_of_range_mass(model: nn.Module, pieces: list[Piece], temperature: float) -> float:
    """The probability that ``model``, sampling at ``temperature``, gives to a pitch outside the range of
    the voice it is writing (``stats.RANGES``), averaged over every position of ``pieces`` (their real
    tokens as the prefix, the first window of the model's context of each piece)."""
    device = model_device(model)
    outside = torch.zeros(4, VOCAB_SIZE, dtype=torch.bool)          # (voice, token): pitch out of range
    for v, (lo, hi) in enumerate(RANGES.values()):
        pitch = torch.arange(VOCAB_SIZE) - N_SPECIAL + LOWEST
        outside[v] = (torch.arange(VOCAB_SIZE) >= N_SPECIAL) & ((pitch < lo) | (pitch > hi))
    ctx = getattr(model, "context", None) or 1024
    masses = []
    with evaluating(model):
        for p in pieces:
            x = torch.as_tensor(encode(p.pitches))[:ctx].to(device)[None]    # (1, T)
            probs = F.softmax(model(x)[0].float() / temperature, dim=-1).cpu()  # (T, V): next-token probabilities
            voice = torch.arange(len(probs)) % 4          # position p predicts token p + 1: voice p mod 4
            masses.append((probs * outside[voice]).sum(-1))
    return float(torch.cat(masses).mean())


def exercise_11_3(model: nn.Module, pieces: list[Piece], temperatures=(0.5, 1.0, 1.5), prompt_steps: int = 16,
                  n_steps: int = 64) -> dict:
    """Musical statistics of continuations sampled at several temperatures (one per piece and temperature),
    and the probability the model gives to out-of-range pitches at each temperature (``out_of_range_mass``):
    dividing the logits by T < 1 raises every probability ratio p_i / p_max to the power 1 / T, so
    unlikely tokens, out-of-range pitches among them, lose the most."""
    out = {}
    for temp in temperatures:
        grids = [decode(generate(model, prompt_from(p, prompt_steps), n_steps, temperature=temp, seed=i))
                 [prompt_steps:] for i, p in enumerate(pieces)]
        out[temp] = {**chorale_stats(grids, start=prompt_steps),
                     "out_of_range_mass": out_of_range_mass(model, pieces, temp)}
    for keys in ((*HARMONY, "out_of_range_mass"), RHYTHM):
        heads = {**HEADS, "out_of_range_mass": "p(out)"}
        print(f"{'T':>5s} " + "".join(f"{heads[k]:>13s}" for k in keys))
        for temp, row in out.items():
            print(f"{temp:5.2f} " + "".join(f"{row[k]:13.4f}" for k in keys))
    cold, hot = out[min(out)], out[max(out)]
    rates = [k for k in HEADS if k != "mean_length"]        # shares, comparable with each other
    most = sorted(rates, key=lambda k: abs(hot[k] - cold[k]), reverse=True)[:4]
    print(f"moved most from T = {min(out)} to T = {max(out)}: "
          + ", ".join(f"{HEADS[k]} {'up' if hot[k] > cold[k] else 'down'} {cold[k]:.3f} -> {hot[k]:.3f}"
                      for k in most)
          + f"; mean note length {cold['mean_length']:.2f} -> {hot['mean_length']:.2f} sixteenths")
    print(f"Why a lower temperature should leave fewer notes out of range: sampling at T draws token i with\n"
          f"probability proportional to p_i^(1/T), so T < 1 raises each ratio p_i / p_max to a power above 1\n"
          f"and the unlikely tokens lose the most. Out-of-range pitches are unlikely, since Bach rarely\n"
          f"writes them: the probability the model gives them, p(out), goes from {hot['out_of_range_mass']:.4f}\n"
          f"at T = {max(out)} to {cold['out_of_range_mass']:.4f} at T = {min(out)}.")
    return out


# ----------------------------------------------------------------------------- checkers

@grading.checker
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
    call = lambda: grading.numbers("the result (diff, low, high)",
                            grading.call("bootstrap(a, b, counts, n=2000, seed=0)", bootstrap, a.copy(), b.copy(),
                                  counts.copy(), n=2000, seed=0), 3)
    diff, lo, hi = call()
    if abs(diff - ref_diff) > 1e-9:
        unweighted = float(((a - b) / counts).mean())
        why = (" (it matches the unweighted mean of the pieces' per-token differences; weight by tokens)"
               if abs(diff - unweighted) < 1e-9 else "")
        raise grading.Fail(f"the difference is {diff:.5f}, expected sum(a - b) / sum(counts) = {ref_diff:.5f}{why}")
    if not lo <= diff <= hi:
        raise grading.Fail(f"the interval [{lo:.4f}, {hi:.4f}] does not contain the difference {diff:.4f}")
    ratio = (hi - lo) / (ref_hi - ref_lo)
    if not 0.9 <= ratio <= 1.12:                    # a 90 % interval is ~0.84 times as wide, a 99 % ~1.3
        why = ("; are both models' scores of a piece drawn together?" if ratio > 1.12 else
               "; a 95 % interval keeps the 2.5 and 97.5 percentiles")
        raise grading.Fail(f"the interval is {ratio:.2f} times as wide as the paired bootstrap's ({hi - lo:.4f} "
                    f"against {ref_hi - ref_lo:.4f}){why}")
    if call() != [diff, lo, hi]:
        raise grading.Fail("two calls with seed=0 give different intervals: draw with np.random.default_rng(seed)")
    return (f"diff {diff:+.4f} as the reference; interval [{lo:+.4f}, {hi:+.4f}] contains it, width "
            f"{ratio:.2f} x the reference's; reproducible")


@grading.checker
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
        got = grading.numbers(f"{shown}'s result (a, b, c)",
                              grading.call(shown, fit, [dict(r) for r in rows], mode, degree), 3)
        want = fit_cost(rows, mode, degree)
        if not np.allclose(got, want, rtol=1e-6, atol=1e-12):
            why = (" (it matches np.polyfit's order, highest power first: reverse it)"
                   if np.allclose(got[::-1], want, rtol=1e-6) or np.allclose(got[1::-1] + [0.0], want, rtol=1e-6)
                   else "")
            raise grading.Fail(f"{shown} gives (a, b, c) = ({', '.join(f'{v:.4g}' for v in got)}), "
                        f"the least-squares fit is "
                        f"({', '.join(f'{v:.4g}' for v in want)}){why}")
    checked = "fit equals the least-squares fits (cached, 1), (re-encoded, 2), (re-encoded, 1)"
    if speedup is not None:
        cached, reenc = fit_cost(rows, "cached", 1), fit_cost(rows, "re-encoded", 2)
        for n in (256, 1024, 4096):
            got = grading.numbers("the speed-up",
                                  [grading.call(f"speedup(cached, reencoded, {n})", speedup, cached, reenc, n)], 1)[0]
            want = predicted_speedup(cached, reenc, n)
            if not math.isclose(got, want, rel_tol=1e-6):
                t = np.arange(n, dtype=float)                               # t = 0 .. n - 1: off by one
                total = lambda p: n * p[0] + p[1] * t.sum() + p[2] * (t * t).sum()
                why = (" (it matches a sum over t = 0 .. n - 1; sum over t = 1 .. n)"
                       if math.isclose(got, total(reenc) / total(cached), rel_tol=1e-6) else "")
                raise grading.Fail(f"the speed-up for {n} tokens is {got:.4f}, expected {want:.4f}{why}")
        checked += "; speed-up for 256, 1024, 4096 tokens"
    return checked
