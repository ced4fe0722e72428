"""The chapters' plots: training curves and attention over a piano roll.

Notebook: notebooks/01_attention_in_rnns.ipynb (first used there).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .music import COLORS, STEPS_PER_QUARTER, piano_roll
from .tokens import VOICES
from .training import History


def plot_history(runs: dict[str, History], baselines: dict[str, float] | None = None, smooth: int = 20):
    """Train loss (left) and validation NLL (right) per run; baselines as dashed lines."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
    for name, h in runs.items():
        k = max(1, min(smooth, len(h.train_loss) // 5))
        loss = np.convolve(h.train_loss, np.ones(k) / k, mode="valid")
        a.plot(h.step[k - 1:], loss, label=name)
        b.plot(h.eval_step, h.valid_nll, "o-", label=f"{name} ({h.final_nll:.3f})")
    for i, (name, v) in enumerate((baselines or {}).items()):
        b.axhline(v, color=f"C{len(runs) + i}", ls="--", lw=1, label=f"{name} ({v:.3f})")
    a.set(xlabel="step", ylabel="train loss (nats/token)", title="training loss (moving average)")
    b.set(xlabel="step", ylabel="valid NLL (nats/token)", title="validation NLL, whole pieces")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def token_time(index: np.ndarray) -> np.ndarray:
    """Token index in ``encode`` output (BOS = 0) -> time in quarter notes (voices spread within a step)."""
    index = np.asarray(index)
    return ((index - 1) // 4 + ((index - 1) % 4) / 4) / STEPS_PER_QUARTER


def attention_over_roll(alpha: np.ndarray, pitches: np.ndarray, queries: list[int], title: str = ""):
    """Piano roll of a segment, and below it the attention of a few query tokens.

    ``alpha`` (T, T) are the weights over the tokens of ``encode(pitches)``;
    each query gets one row of bars, coloured by the voice of the key token.
    """
    fig, axes = plt.subplots(1 + len(queries), 1, figsize=(10, 2.6 + 1.3 * len(queries)), sharex=True,
                             gridspec_kw={"height_ratios": [2.2] + [1] * len(queries)})
    piano_roll(pitches, ax=axes[0], title=title)
    keys = np.arange(1, alpha.shape[1])
    for ax, q in zip(axes[1:], queries):
        w = alpha[q, 1:]
        for v, (name, color) in enumerate(zip(VOICES, COLORS)):
            sel = (keys - 1) % 4 == v
            ax.bar(token_time(keys[sel]), w[sel], width=0.06, color=color)
        voice, target = VOICES[(q - 1) % 4], VOICES[q % 4]
        ax.axvline(token_time(q), color="k", ls=":", lw=1)
        axes[0].axvline(token_time(q), color="k", ls=":", lw=1)
        ax.set_ylabel("weight")
        ax.set_title(f"query: token {q} ({voice}, predicting the {target}); bars: weight on each earlier token",
                     fontsize=9, loc="left")
    axes[-1].set_xlabel("time (quarter notes)")
    fig.tight_layout()
    return fig
