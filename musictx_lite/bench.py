"""Benchmarks: time and peak memory of every attention implementation built so far.

Notebook: notebooks/04_multi_head.ipynb shows the table and the plot; later
chapters add their implementations to ``ATTENTION``.

    python -m musictx_lite bench attention --lengths 128 256 512 1024 2048 --plot attention.png

All implementations run in one process, one after the other at each length,
so their ratios are measured under the same conditions.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Callable

import torch
import torch.nn as nn

from .attention import MultiHeadAttention, MultiHeadLoop, causal_mask
from .config import ModelConfig


class TorchMHA(nn.Module):
    """``nn.MultiheadAttention``, causal, called the way its fast path wants."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.mha = nn.MultiheadAttention(cfg.n_embd, cfg.n_heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        mask = ~causal_mask(T, x.device)                    # nn.MultiheadAttention: True = may NOT attend
        return self.mha(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)[0]


ATTENTION: dict[str, Callable[[ModelConfig], nn.Module]] = {
    "per-head loop": MultiHeadLoop,                                           # chapter 4
    "batched": lambda cfg: MultiHeadAttention(cfg, fast=False),              # chapter 4
    "SDPA": lambda cfg: MultiHeadAttention(cfg, fast=True),                  # chapter 4
    "nn.MultiheadAttention": TorchMHA,                                        # chapter 4
}


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


def bench_attention(lengths=(128, 256, 512, 1024, 2048), n_embd: int = 128, n_heads: int = 4, batch: int = 1,
                    repeats: int = 3, device: str = "cpu", names: list[str] | None = None) -> list[dict]:
    """Forward + backward time (best of ``repeats``) and peak memory per implementation and length."""
    cfg = ModelConfig(n_embd=n_embd, n_heads=n_heads)
    rows = []
    for L in lengths:
        for name in names or list(ATTENTION):
            torch.manual_seed(0)
            module = ATTENTION[name](cfg).to(device)
            x = torch.randn(batch, L, n_embd, device=device, requires_grad=True)

            def step() -> None:
                module(x).sum().backward()

            step()                                               # warm-up
            times = []
            for _ in range(repeats):
                if device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                step()
                if device == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                step()
                peak = torch.cuda.max_memory_allocated() - base
            else:
                peak = _peak_cpu_bytes(step)
            rows.append({"impl": name, "L": L, "ms": 1000 * min(times), "MiB": peak / 2**20, "batch": batch})
    return rows


def format_table(rows: list[dict]) -> str:
    """One line per length: milliseconds and MiB of each implementation, and the ratio to SDPA."""
    names = list(dict.fromkeys(r["impl"] for r in rows))
    by = {(r["impl"], r["L"]): r for r in rows}
    head = f"{'L':>6s} " + " ".join(f"{n:>24s}" for n in names)
    lines = [head, " " * 7 + " ".join(f"{'ms':>10s} {'MiB':>7s} {'x':>5s}" for _ in names)]
    ref = "SDPA" if "SDPA" in names else names[0]
    for L in sorted({r["L"] for r in rows}):
        cells = []
        for n in names:
            r = by[(n, L)]
            cells.append(f"{r['ms']:10.2f} {r['MiB']:7.1f} {r['ms'] / by[(ref, L)]['ms']:5.1f}")
        lines.append(f"{L:6d} " + " ".join(cells))
    lines.append(f"(x = time relative to {ref}; forward + backward, batch of {rows[0].get('batch', 1)})")
    return "\n".join(lines)


def plot_bench(rows: list[dict], path: str | None = None):
    """Time and memory against sequence length, log-log, one line per implementation."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
    for n in dict.fromkeys(r["impl"] for r in rows):
        rs = [r for r in rows if r["impl"] == n]
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
