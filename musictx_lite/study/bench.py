"""Benchmarks: time and peak memory of every attention implementation built so far,
and the speed of sampling with and without a key/value cache.

Notebook: notebooks/04_multi_head.ipynb shows the table and the plot; later
chapters' models bring their implementations in their records (``models.Spec.timed``);
notebooks/11_comparison.ipynb measures sampling.

    python -m musictx_lite bench attention --lengths 128 256 512 1024 2048 --plot attention.png
    python -m musictx_lite bench sample --models relative local --tokens 1024

All implementations run in one process, one after the other at each length,
so their ratios are measured under the same conditions.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..models.attention import MultiHeadAttention, causal_mask
from ..models.config import ModelConfig
from ..models.registry import MODELS, Timed
from ..models.relative import BiasedAttention, RelativeGlobal
from ..models.relative_fast import relative_attention


class TorchMHA(nn.Module):
    """``nn.MultiheadAttention``, causal, called the way its fast path wants."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.mha = nn.MultiheadAttention(cfg.n_embd, cfg.n_heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        mask = ~causal_mask(T, x.device)                    # nn.MultiheadAttention: True = may NOT attend
        return self.mha(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)[0]


class SDPARelative(BiasedAttention):
    """The relative term handed to SDPA as an additive mask, on every device. (The decoder's own
    ``attention`` does so on CUDA only: on a CPU, SDPA with a bias that needs gradients is slower.)"""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg, RelativeGlobal(cfg))

    def attend(self, q, k, v, need_weights):
        T = q.shape[-2]
        bias = self.score_bias(q).masked_fill(~causal_mask(T, q.device), float("-inf"))   # (B, nh, T, T)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias), None


def gwinndr_style(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """Relative global attention written the way public Music Transformer code writes it, the
    reference the book's implementations are measured against: zero the undefined logits with a
    float mask, pad, reshape, slice, then add a float causal mask of -inf. (B, nh, L, d) inputs,
    ``E`` (nh, L, d) for distances -(L-1)..0; every step makes a new (L, L) tensor per head."""
    L, d = q.shape[-2:]
    q = q / math.sqrt(d)
    rel = q @ E.transpose(-2, -1)                                       # (B, nh, L, L)
    keep = torch.ones(L, L, device=q.device).triu().flip(0)             # 1 where j - i <= 0
    padded = F.pad(rel * keep, (1, 0))                                  # (B, nh, L, L + 1)
    s_rel = padded.reshape(*rel.shape[:-2], L + 1, L)[..., 1:, :]       # (B, nh, L, L)
    future = torch.zeros(L, L, device=q.device).masked_fill(~causal_mask(L, q.device), float("-inf"))
    scores = q @ k.transpose(-2, -1) + future + s_rel                   # (B, nh, L, L)
    return F.softmax(scores, dim=-1) @ v


class GwinndrStyle(BiasedAttention):
    """``gwinndr_style`` as a layer, with the parameters of the book's relative attention."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg, RelativeGlobal(cfg))

    def attend(self, q, k, v, need_weights):
        return gwinndr_style(q, k, v, self.score_bias.table(q.shape[-2])), None


class ChunkedCausal(MultiHeadAttention):
    """``relative_fast.relative_attention`` without the relative term: causal attention in the same
    chunks, the measure of what the relative term itself costs in the chunked skew."""

    def attend(self, q, k, v, need_weights):
        return relative_attention(q, k, v, None), None


# the implementations bench keeps for reference, which no model of the book uses: name -> (chapter, Timed)
REFERENCES = {"nn.MultiheadAttention": (4, Timed(TorchMHA)),
              "gwinndr-style": (8, Timed(GwinndrStyle)),
              "chunked, no S^rel": (8, Timed(ChunkedCausal)),
              "SDPA + relative bias": (8, Timed(SDPARelative))}


@dataclass(frozen=True)
class Implementation:
    chapter: int                                           # where the book explains it
    build: Callable[[ModelConfig], nn.Module]
    cuda_only: bool = False


def implementations() -> dict[str, Implementation]:
    """Every implementation ``bench attention`` times: the ``timed`` mixers of each record of ``MODELS``,
    and ``REFERENCES``, in the book's order (by chapter; a chapter's models before its references)."""
    found = [(spec.chapter, 0, name, t) for spec in MODELS.values() for name, t in spec.timed.items()]
    found += [(chapter, 1, name, t) for name, (chapter, t) in REFERENCES.items()]
    return {name: Implementation(chapter, t.build, t.cuda_only)
            for chapter, _, name, t in sorted(found, key=lambda f: f[:2])}


def predicted_bytes(measured: list[tuple[int, float]], L: int) -> float:
    """Peak memory at length L from the growth measured at two shorter lengths (L1, m1), (L2, m2):
    m2 (L / L2)^p with p = log(m2 / m1) / log(L2 / L1), at least 1 (the inputs alone grow as L)."""
    (L1, m1), (L2, m2) = measured[-2:]
    p = math.log(max(m2, 1.0) / max(m1, 1.0)) / math.log(L2 / L1)
    return m2 * (L / L2) ** max(p, 1.0)


def _peak_cpu_bytes(fn: Callable[[], None]) -> int:
    """Peak of live CPU tensor memory during ``fn``, from the profiler's allocation events."""
    from torch.profiler import ProfilerActivity, profile

    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)                                  # the profiler logs to fd 2 at start and stop
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    live = peak = 0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    return peak


def peak_bytes(fn: Callable[[], None], device: torch.device | str = "cpu") -> int:
    """Peak memory that ``fn`` allocates beyond what was live before it: CUDA's counters on a GPU,
    the profiler's allocation events elsewhere."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        return torch.cuda.max_memory_allocated() - base
    return _peak_cpu_bytes(fn)


def _step(build: Callable[[ModelConfig], nn.Module], cfg: ModelConfig, batch: int, device: str):
    """One forward + backward of a fresh layer on random input, ready to time or measure."""
    torch.manual_seed(0)
    module = build(cfg).to(device)
    x = torch.randn(batch, cfg.context, cfg.n_embd, device=device, requires_grad=True)

    def step() -> None:
        module(x).sum().backward()

    return step


def bench_attention(lengths=(128, 256, 512, 1024, 2048), n_embd: int = 128, n_heads: int = 4, batch: int = 1,
                    repeats: int = 3, device: str = "cpu", names: list[str] | None = None,
                    max_gib: float = 4.0, chapter: int | None = None) -> list[dict]:
    """Forward + backward time (best of ``repeats``) and peak memory per implementation and length.

    ``names`` picks implementations of ``implementations()`` (default: all that run on ``device``,
    or those explained up to ``chapter``). Before an implementation runs at a length, its peak
    memory there is predicted from the growth measured at shorter lengths (``predicted_bytes``; two
    probe runs at L/4 and L/2 when this call has not measured two yet). Where the prediction exceeds
    ``max_gib`` it does not run: its row says ``fits: False`` and holds the prediction.
    """
    impls = implementations()
    cuda = torch.device(device).type == "cuda"
    if names is None:
        names = [n for n, impl in impls.items()
                 if (chapter is None or impl.chapter <= chapter) and (cuda or not impl.cuda_only)]
    for name in names:
        if name not in impls:
            raise ValueError(f"unknown implementation {name!r}; choose from {list(impls)}")
        if impls[name].cuda_only and not cuda:
            raise ValueError(f"{name} runs on a CUDA GPU only; leave it out on {device}")
    measured: dict[str, list[tuple[int, float]]] = {n: [] for n in names}   # (L, peak bytes) per implementation
    rows = []
    for L in sorted(lengths):
        cfg = ModelConfig(n_embd=n_embd, n_heads=n_heads, context=L)
        for name in names:
            build, seen = impls[name].build, measured[name]
            if math.isfinite(max_gib):
                probes = [Lp for Lp in (L // 4, L // 2) if Lp >= 8 and all(Lp > m for m, _ in seen)]
                for Lp in probes[len(probes) - max(0, 2 - len(seen)):]:   # as many as two points need
                    cfgp = ModelConfig(n_embd=n_embd, n_heads=n_heads, context=Lp)
                    seen.append((Lp, peak_bytes(_step(build, cfgp, batch, device), device)))
                need = predicted_bytes(seen, L) if len(seen) >= 2 else 0.0
                if need > max_gib * 2**30:
                    rows.append({"impl": name, "L": L, "ms": float("nan"), "MiB": need / 2**20, "batch": batch,
                                 "fits": False})
                    continue
            step = _step(build, cfg, batch, device)
            step()                                               # warm-up
            times = []
            for _ in range(repeats):
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                step()
                if cuda:
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            peak = peak_bytes(step, device)
            seen.append((L, peak))
            rows.append({"impl": name, "L": L, "ms": 1000 * min(times), "MiB": peak / 2**20, "batch": batch,
                         "fits": True})
    return rows


def format_table(rows: list[dict]) -> str:
    """One block per length: the time in milliseconds, that time relative to ``SDPA``'s at the same
    length, then the peak memory in MiB; each ratio sits next to the quantity it divides."""
    names = list(dict.fromkeys(r["impl"] for r in rows))
    by = {(r["impl"], r["L"]): r for r in rows}
    ref = "SDPA" if "SDPA" in names else names[0]
    ratio = f"time / {ref}"
    w, wn = max(11, len(ratio)), max(len("implementation"), *map(len, names))
    lines = [f"{'L':>6s} {'implementation':>{wn}s}  {'time (ms)':>10s}  {ratio:>{w}s}  {'peak (MiB)':>10s}"]
    for L in sorted({r["L"] for r in rows}):
        for n in names:
            r = by.get((n, L))
            if r is None:
                continue
            if not r.get("fits", True):
                lines.append(f"{L:6d} {n:>{wn}s}  {'-':>10s}  {'-':>{w}s}  {r['MiB']:10.0f}"
                             "  not run (MiB predicted from measured growth)")
                continue
            fits = (ref, L) in by and by[(ref, L)].get("fits", True)       # no ratio to a reference that did not run
            x = f"{r['ms'] / by[(ref, L)]['ms']:{w}.2f}" if fits else f"{'-':>{w}s}"
            lines.append(f"{L:6d} {n:>{wn}s}  {r['ms']:10.2f}  {x}  {r['MiB']:10.1f}")
    lines.append(f"(forward + backward, batch of {rows[0].get('batch', 1)}; "
                 f"time / {ref}: over {ref}'s time at the same L)")
    return "\n".join(lines)


def plot_bench(rows: list[dict], path: str | None = None):
    """Time and memory against sequence length, log-log, one line per implementation."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
    for n in dict.fromkeys(r["impl"] for r in rows):
        rs = [r for r in rows if r["impl"] == n and r.get("fits", True)]
        a.loglog([r["L"] for r in rs], [r["ms"] for r in rs], "o-", label=n, base=2)
        b.loglog([r["L"] for r in rs], [max(r["MiB"], 1e-3) for r in rs], "o-", label=n, base=2)
    a.set(xlabel="sequence length L", ylabel="ms (forward + backward)", title="time")
    b.set(xlabel="sequence length L", ylabel="peak MiB", title="memory")
    for ax in (a, b):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


def bench_sampling(names: list[str], n_tokens: int = 1024, context: int | None = None, profile: str = "cpu",
                   device: str = "cpu", modes: tuple[bool, ...] = (True, False)) -> list[dict]:
    """Sampling speed, tokens per second, of each model with (True) and without (False) its cache.

    Each model has the profile's size, a context of ``context`` tokens (default:
    ``n_tokens + 1``, so nothing slides) and random weights: speed does not
    depend on what the model learned. It samples ``n_tokens`` tokens after BOS.
    Both modes of a model run one after the other, so their ratio is measured
    under the same conditions.
    """
    from ..engine.profiles import get_profile
    from ..engine.sample import generate
    from ..models.registry import build_model

    if n_tokens < 4 or n_tokens % 4:
        raise ValueError(f"n_tokens must be a positive multiple of 4 (whole steps), got {n_tokens}")
    p = get_profile(profile)
    rows = []
    for name in names:
        torch.manual_seed(0)
        model = build_model(name, p.model_config(name, context=context or n_tokens + 1)).to(device).eval()
        row = {"model": name, "tokens": n_tokens, "context": model.cfg.context,
               "cacheable": bool(getattr(model, "cacheable", False))}
        for cached in modes:
            if cached and not row["cacheable"]:
                row["cached"] = float("nan")
                continue
            t0 = time.perf_counter()
            generate(model, None, n_steps=n_tokens // 4, seed=0, cache=cached)
            if device == "cuda":
                torch.cuda.synchronize()
            row["cached" if cached else "re-encoded"] = n_tokens / (time.perf_counter() - t0)
        rows.append(row)
    return rows


def format_sampling(rows: list[dict]) -> str:
    """One line per model: tokens/s with the cache, re-encoding, and the speed-up."""
    lines = [f"{'model':>20s} {'context':>7s} {'cached tok/s':>12s} {'re-encoded tok/s':>16s} {'speed-up':>8s}"]
    for r in rows:
        c, n = r.get("cached", float("nan")), r.get("re-encoded", float("nan"))
        note = "" if r["cacheable"] else "  (no cache: not causal)"
        lines.append(f"{r['model']:>20s} {r['context']:7d} {c:12,.0f} {n:16,.0f} {c / n:8.1f}{note}")
    lines.append(f"({rows[0]['tokens']} tokens sampled after BOS, random weights)")
    return "\n".join(lines)


def bench_harmonise(names=("relative", "harmoniser", "coconet"), bars: int = 16, profile: str = "paper",
                    device: str = "cpu", repeats: int = 3, n_iter: int = 64, rules="default",
                    candidates: int | None = None) -> list[dict]:
    """Seconds to harmonise a melody of ``bars`` bars of 4/4 (chapter 12), each model at the profile's size
    with random weights (the time does not depend on what a model learned), the best of ``repeats``: the
    causal decoder and the harmoniser one token at a time with their caches, Coconet by ``n_iter`` Gibbs
    steps. The melody is the soprano of the embedded chorales' first validation pieces, end to end. ``rules``
    and ``candidates`` are ``harmonise``'s (its defaults: ``DEFAULT_RULES``, ``DEFAULT_CANDIDATES``), for the
    two that draw one token at a time."""
    from ..engine.harmonise import harmonise
    from ..engine.profiles import get_profile
    from ..io.data import load_chorales
    from ..models.registry import build_model, n_params

    steps = 16 * bars
    melody = np.concatenate([p.pitches[:, 0] for p in load_chorales().valid])[:steps]
    p = get_profile(profile)
    rows = []
    for name in names:
        torch.manual_seed(0)
        model = build_model(name, p.model_config(name)).to(device).eval()
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            if name == "coconet":
                harmonise(model, melody, seed=0, n_iter=n_iter)
            else:
                harmonise(model, melody, seed=0, rules=rules, candidates=candidates, info=(info := {}))
            if device == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        how = (f"{n_iter} Gibbs steps" if name == "coconet" else f"token by token, cached; rules "
               f"{info['rules']}, best of {len(info['logp'])}")
        rows.append({"model": name, "params": n_params(model), "context": model.cfg.context, "bars": bars,
                     "seconds": best, "how": how})
    return rows


def format_harmonise(rows: list[dict]) -> str:
    lines = [f"{'model':>12s} {'params':>10s} {'context':>7s} {'seconds':>8s}  how"]
    lines += [f"{r['model']:>12s} {r['params']:10,d} {r['context']:7d} {r['seconds']:8.2f}  {r['how']}" for r in rows]
    bars = rows[0]["bars"]
    lines.append(f"({bars} bar{'s' * (bars != 1)} of 4/4 harmonised, random weights, the best of the repeats)")
    return "\n".join(lines)


RESULTS = Path(__file__).parents[1] / "pretrained"      # committed measurements, shipped with the package


def measured(name: str = "bench-relative-cpu") -> tuple[dict, str]:
    """A committed measurement of ``python -m scripts.bench_relative``: its record (numbers and
    provenance) and its tables in Markdown, as the script wrote them."""
    return json.loads((RESULTS / f"{name}.json").read_text()), (RESULTS / f"{name}.md").read_text()


def longest_length(name: str, max_gib: float, n_embd: int = 512, n_heads: int = 8, batch: int = 1,
                   device: str = "cpu", start: int = 256, multiple: int = 64, max_length: int = 32768) -> dict:
    """The longest L, a multiple of ``multiple``, at which one forward + backward of ``name`` fits in
    ``max_gib``: double from ``start`` while it fits, then bisect. On CUDA the allocator is capped at
    ``max_gib`` (``torch.cuda.set_per_process_memory_fraction``) and a run that runs out of memory does not
    fit; elsewhere the peak the profiler measures is compared with ``max_gib``. A length whose peak,
    predicted from the growth measured so far (``predicted_bytes``), is over 1.1 times the allowance
    is not run. Stops at ``max_length``: then ``capped`` is True and L is a lower bound.

    Returns {"impl", "L", "MiB" (the peak at L), "next" (the shortest length found not to fit, or None),
    "runs" (L, MiB or None where it did not fit), "capped", "predicted" (the L at which the measured
    growth reaches the allowance)}.
    """
    impls, limit = implementations(), max_gib * 2**30
    cuda = torch.device(device).type == "cuda"
    if cuda:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total))
    seen: list[tuple[int, float]] = []
    runs: list[tuple[int, float | None]] = []

    def fits(L: int) -> bool:
        if len(seen) >= 2 and predicted_bytes(seen, L) > 1.1 * limit:
            runs.append((L, None))
            return False
        cfg = ModelConfig(n_embd=n_embd, n_heads=n_heads, context=L)
        try:
            peak = peak_bytes(_step(impls[name].build, cfg, batch, device), device)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            runs.append((L, None))
            return False
        runs.append((L, peak / 2**20))
        if peak > limit:
            return False
        seen.append((L, peak))
        seen.sort()
        return True

    if not fits(start):
        raise ValueError(f"{name} does not fit {max_gib:g} GiB at L = {start}; start shorter")
    lo, hi = start, None
    while hi is None and lo < max_length:
        L = min(2 * lo, max_length)
        if fits(L):
            lo = L
        else:
            hi = L
    while hi is not None and hi - lo > multiple:
        L = (lo + hi) // 2 // multiple * multiple
        if L <= lo:
            break
        lo, hi = (L, hi) if fits(L) else (lo, L)
    predicted = None
    if len(seen) >= 2:                                  # m2 (L / L2)^p = limit, p as in predicted_bytes
        (L1, m1), (L2, m2) = seen[-2:]
        p = max(math.log(m2 / m1) / math.log(L2 / L1), 1.0)
        predicted = int(L2 * (limit / m2) ** (1 / p))
    if cuda:
        torch.cuda.set_per_process_memory_fraction(1.0)
    return {"impl": name, "L": lo, "MiB": dict(seen)[lo] / 2**20, "next": hi, "runs": runs, "capped": hi is None,
            "predicted": predicted}
