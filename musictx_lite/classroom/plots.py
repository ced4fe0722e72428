"""The chapters' plots: training curves, heatmaps with their colour bars, attention over a piano roll.

Notebook: notebooks/01_attention_in_rnns.ipynb (first used there).

Every heatmap of the book goes through ``heatmap`` (or ``heatmaps`` for panels
that share a scale): it always draws a colour bar, labels integer axes with
integers, and draws a boolean matrix with two fixed colours, so that an
all-True matrix never renders as one blank colour. ``style`` sets the figure
resolution; ``mtx.setup()`` calls it.
"""
from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.ticker import MaxNLocator, MultipleLocator

from ..engine.training import History
from ..io.midi import STEPS_PER_QUARTER, notes_of
from ..io.tokens import VOICES

DPI = 150                                   # figures in the book: sharp on a high-density screen
BOOL_COLORS = ("#f0f0f0", "#08306b")       # False, True: never the same colour, whatever the matrix holds
COLORS = ("#d62728", "#2ca02c", "#1f77b4", "#9467bd")   # S A T B, in every figure


def piano_roll(pitches: np.ndarray, onsets: np.ndarray | None = None, ax=None, title: str | None = None,
               start: int = 0, alpha: float = 0.85, seconds: float | None = None):
    """Plot a pitch grid as a piano roll, one colour per voice; x in quarter notes. Given a ``Performance``
    (chapter 13), its notes in seconds from its first note (``performance_roll``; ``seconds``: how many to
    show; the silence a recording holds before the first note is not shown)."""
    import matplotlib.pyplot as plt

    if hasattr(pitches, "notes") and hasattr(pitches, "tokens"):
        notes = np.asarray(pitches.notes).reshape(-1, 4)
        first = float(notes[:, 0].min()) if len(notes) else 0.0
        return performance_roll(notes, ax=ax, title=title, seconds=seconds, start=first)
    if seconds is not None:
        raise ValueError("seconds is for a performance; a pitch grid's roll shows all its steps")

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3.2))
    for name, color, notes in zip(VOICES, COLORS, notes_of(pitches, onsets)):
        bars = [((start + s) / STEPS_PER_QUARTER, (e - s) / STEPS_PER_QUARTER) for s, e, _ in notes]
        for (x, w), (_, _, p) in zip(bars, notes):
            ax.add_patch(plt.Rectangle((x, p - 0.4), w - 0.03, 0.8, color=color, alpha=alpha, lw=0))
        ax.plot([], [], color=color, lw=6, label=name)  # legend handle
    sounding = np.asarray(pitches)[np.asarray(pitches) >= 0]
    lo, hi = (sounding.min(), sounding.max()) if sounding.size else (48, 72)
    ax.set_xlim(start / STEPS_PER_QUARTER, (start + len(pitches)) / STEPS_PER_QUARTER)
    ax.set_ylim(lo - 2, hi + 2)
    # a tick at every bar line (a chorale's bar holds 4 quarters), a minor one at every beat; fewer on long rolls
    bars_shown = len(pitches) / STEPS_PER_QUARTER / QUARTERS_PER_BAR
    ax.xaxis.set_major_locator(MultipleLocator(QUARTERS_PER_BAR * max(1, int(np.ceil(bars_shown / 16)))))
    ax.xaxis.set_minor_locator(MultipleLocator(1))
    ax.grid(axis="x", which="major", alpha=0.25)
    ax.set_xlabel("time (quarter notes; a tick at each bar line)")
    ax.set_ylabel("MIDI pitch")
    # outside the axes, to the right: a legend inside would cover the highest notes
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False, handlelength=1.2)
    if title:
        ax.set_title(title)
    return ax


def performance_roll(notes: np.ndarray, ax=None, title: str | None = None, seconds: float | None = None,
                     start: float = 0.0, mark: float | None = None):
    """Plot a performance, notes (n, 4) [start s, end s, pitch, velocity] (chapter 13), as a piano roll:
    x in seconds from ``start`` (``seconds`` of them; None: to the end), a note's shade its velocity.
    ``mark``: a dashed line at that time (where a prompt ends)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3.2))
    notes = np.asarray(notes, dtype=np.float64).reshape(-1, 4)
    end = start + seconds if seconds is not None else (notes[:, 1].max() if len(notes) else start + 1)
    shown = notes[(notes[:, 1] > start) & (notes[:, 0] < end)]
    cmap = plt.get_cmap("Blues")
    for s, e, p, v in shown:
        ax.add_patch(plt.Rectangle((s, p - 0.4), min(e, end) - s, 0.8, color=cmap(0.3 + 0.7 * v / 127), lw=0))
    lo, hi = (shown[:, 2].min(), shown[:, 2].max()) if len(shown) else (48, 72)
    ax.set_xlim(start, end)
    ax.set_ylim(lo - 2, hi + 2)
    if mark is not None:
        ax.axvline(mark, color="#d62728", ls="--", lw=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("MIDI pitch")
    sm = mpl.cm.ScalarMappable(cmap=mpl.colors.LinearSegmentedColormap.from_list(
        "vel", [cmap(0.3), cmap(1.0)]), norm=mpl.colors.Normalize(0, 127))
    plt.colorbar(sm, ax=ax, label="velocity", fraction=0.03, pad=0.01)
    if title:
        ax.set_title(title)
    return ax


def style() -> None:
    """The book's figure settings: 150 dpi on screen and in saved files."""
    mpl.rcParams.update({"figure.dpi": DPI, "savefig.dpi": DPI})


def _numpy(values) -> np.ndarray:
    if hasattr(values, "detach"):                                     # a tensor, wherever it lives
        values = values.detach().float().cpu().numpy() if values.dtype.is_floating_point else \
            values.detach().cpu().numpy()
    return np.asarray(values)


def _integer_axes(ax) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))     # few ticks: panels may be small
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))


def _draw(ax, values: np.ndarray, cmap, vmin, vmax, labels, **imshow_kw):
    if values.dtype == bool:                                          # two fixed colours, not a stretched scale
        return ax.imshow(values.astype(int), cmap=ListedColormap(BOOL_COLORS), vmin=-0.5, vmax=1.5,
                         interpolation="nearest", **imshow_kw)
    return ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", **imshow_kw)


def _colorbar(im, ax, label: str, labels: tuple[str, str], **kw):
    cb = im.axes.figure.colorbar(im, ax=ax, label=label, **kw)
    if isinstance(im.cmap, ListedColormap) and im.norm.vmin == -0.5 and im.norm.vmax == 1.5:
        cb.set_ticks([0, 1], labels=list(labels))
    if kw.get("orientation") == "horizontal":
        cb.ax.xaxis.set_major_locator(MaxNLocator(5))
    return cb


def heatmap(ax, values, label: str, *, cmap: str = "viridis", vmin: float | None = None,
            vmax: float | None = None, labels: tuple[str, str] = ("False", "True"),
            title: str | None = None, xlabel: str | None = None, ylabel: str | None = None,
            orientation: str = "vertical", **imshow_kw):
    """Draw ``values`` (2-D array or tensor) on ``ax`` with a colour bar labelled ``label``; return the image.

    A boolean matrix gets two fixed colours (``labels`` name them on the colour
    bar), so all-True and all-False look different. Otherwise ``vmin``/``vmax``
    default to the data's range: a nearly uniform matrix shows its small
    differences, and the colour bar says how small they are. A horizontal bar
    (below the axes) keeps the axes as wide as a panel above it that shares x.
    """
    values = _numpy(values)
    im = _draw(ax, values, cmap, vmin, vmax, labels, **imshow_kw)
    kw = dict(orientation="horizontal", pad=0.45, aspect=40) if orientation == "horizontal" else {}
    _colorbar(im, ax, label, labels, **kw)
    _integer_axes(ax)
    ax.set(**{k: v for k, v in dict(title=title, xlabel=xlabel, ylabel=ylabel).items() if v is not None})
    return im


def heatmaps(axes, values, label: str, *, titles=None, cmap: str = "viridis", vmin: float | None = None,
             vmax: float | None = None, labels: tuple[str, str] = ("False", "True"), **imshow_kw):
    """One heatmap per axis, all on one colour scale, with one colour bar for the row; return the images."""
    axes = list(np.atleast_1d(axes))
    arrays = [_numpy(v) for v in values]
    if arrays[0].dtype != bool:
        vmin = min(a.min() for a in arrays) if vmin is None else vmin
        vmax = max(a.max() for a in arrays) if vmax is None else vmax
    images = [_draw(ax, a, cmap, vmin, vmax, labels, **imshow_kw) for ax, a in zip(axes, arrays)]
    cb = _colorbar(images[-1], axes, label, labels, shrink=0.85)
    for ax, im, title in zip(axes, images, titles or [None] * len(axes)):
        im.colorbar = cb                                              # the shared bar belongs to every panel
        _integer_axes(ax)
        if title:
            ax.set_title(title)
    return images


def images_without_colorbar(fig) -> list:
    """The images of ``fig`` that have no colour bar (the tests require none)."""
    return [im for ax in fig.axes for im in ax.images if getattr(im, "colorbar", None) is None]


QUARTERS_PER_BAR = 4                    # the chorales' 4/4 bars (the data holds no other metre)
# chapter 0's baselines look the same in every chapter's figures: shades of grey, one dash pattern each
BASELINE_STYLE = [("0.55", (0, (1, 1.5))), ("0.35", (0, (5, 2))), ("0.15", (0, (5, 2, 1, 2))), ("0.0", (0, (9, 3)))]


def baseline_lines(ax, baselines: dict[str, float] | None, top: float | None = None) -> None:
    """Chapter 0's baselines as horizontal lines, in the same grey and dash wherever they are drawn; a baseline
    above ``top`` (it would squash the runs' curves) is named in the legend, not drawn."""
    for i, (name, v) in enumerate((baselines or {}).items()):
        color, dash = BASELINE_STYLE[i % len(BASELINE_STYLE)]
        if top is not None and v > top:
            ax.plot([], [], color=color, ls=dash, lw=1, label=f"{name} ({v:.3f}, above the plot)")
        else:
            ax.axhline(v, color=color, ls=dash, lw=1.2, label=f"{name} ({v:.3f})")


def _top(values: list[float]) -> float:
    """Where a panel of NLLs stops: the runs' highest value plus half their range, enough for the nearest
    baselines and not the far ones."""
    lo, hi = min(values), max(values)
    return hi + max(0.5 * (hi - lo), 0.1)


def plot_history(runs: dict[str, History], baselines: dict[str, float] | None = None, smooth: int = 20,
                 unit: str = "nats/token"):
    """Train loss (left) and validation NLL (right) per run; baselines as dashed lines.

    ``unit`` labels the y axes: nats per token for next-token models, nats per note for chapter 2's fill-in.
    """
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 3.6))
    for name, h in runs.items():
        k = max(1, min(smooth, len(h.train_loss) // 5))
        loss = np.convolve(h.train_loss, np.ones(k) / k, mode="valid")
        a.plot(h.step[k - 1:], loss, label=name)
        b.plot(h.eval_step, h.valid_nll, "o-", label=f"{name} ({h.final_nll:.3f})")
    nlls = [v for h in runs.values() for v in h.valid_nll]
    top = _top(nlls)
    baseline_lines(b, baselines, top)
    shown = [v for v in (baselines or {}).values() if v <= top]
    lo = min(nlls + shown)
    b.set_ylim(lo - 0.05 * (top - lo), max(top, *shown) if shown else top)
    b.xaxis.set_major_locator(MaxNLocator(integer=True))
    a.set(xlabel="step", ylabel=f"train loss ({unit})", title="training loss (moving average)")
    b.set(xlabel="step", ylabel=f"valid NLL ({unit})", title="validation NLL, whole pieces")
    for ax in (a, b):
        ax.grid(alpha=0.3)
    a.legend(fontsize=8)                   # runs only
    # outside the axes, right of the NLL panel: it can never cover a baseline line
    b.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


def plot_sweep(runs: dict, baselines: dict[str, float] | None = None, xlabel: str = "",
               label=str, smooth: int = 20, unit: str = "nats/token", title: str | None = None):
    """Runs that differ in one setting (``runs``: the setting's value -> History, e.g. depth -> run): train
    loss per run (left), and each run's final validation NLL against the setting (right), one labelled dot
    per run, chapter 0's baselines as in ``plot_history``. For runs evaluated once, at the end, where
    ``plot_history``'s NLL panel would hold one dot per run at the same step. ``label(value)`` names a run.

    Notebook: notebooks/05_blocks.ipynb (first used there).
    """
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 3.6))
    xs = list(runs)
    nlls = [runs[x].final_nll for x in xs]
    for i, (x, h) in enumerate(runs.items()):
        k = max(1, min(smooth, len(h.train_loss) // 5))
        a.plot(h.step[k - 1:], np.convolve(h.train_loss, np.ones(k) / k, mode="valid"), color=f"C{i}",
               label=label(x))
        b.plot([x], [nlls[i]], "o", color=f"C{i}", ms=8, zorder=3)
        b.annotate(f"{nlls[i]:.3f}", (x, nlls[i]), textcoords="offset points", xytext=(7, 0), ha="left",
                   va="center", fontsize=8)     # beside the dot: above it, the top one would hit the title
    b.plot(xs, nlls, "-", color="0.6", lw=1, zorder=2)
    top = _top(nlls)
    baseline_lines(b, baselines, top)
    shown = [v for v in (baselines or {}).values() if v <= top]
    lo = min(nlls + shown)
    b.set_ylim(lo - 0.05 * (top - lo), max(top, *shown) if shown else top)
    pad = 0.5 * (min(np.diff(sorted(xs))) if len(xs) > 1 else 1)
    b.set_xticks(xs, [str(x) for x in xs])
    b.set_xlim(min(xs) - pad, max(xs) + pad)
    a.set(xlabel="step", ylabel=f"train loss ({unit})", title="training loss (moving average)")
    b.set(xlabel=xlabel, ylabel=f"valid NLL ({unit})", title=title or "validation NLL at the end, whole pieces")
    for ax in (a, b):
        ax.grid(alpha=0.3)
    a.legend(fontsize=8)                   # runs only
    if baselines:                          # outside the axes, as in plot_history
        b.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


def seed_summary(results: dict[str, list[float]], unit: str = "nats/token") -> str:
    """One line per model: the mean valid NLL over seeds and the range (min to max), best mean first."""
    width = max(len(k) for k in results)
    lines = [f"{'':>{width}s}  {'mean':>6s}  {'min':>6s}  {'max':>6s}  seeds ({unit})"]
    for name, v in sorted(results.items(), key=lambda kv: np.mean(kv[1])):
        lines.append(f"{name:>{width}s}  {np.mean(v):6.3f}  {min(v):6.3f}  {max(v):6.3f}  "
                     + " ".join(f"{x:.3f}" for x in v))
    return "\n".join(lines)


def plot_seeds(results: dict[str, list[float]], baselines: dict[str, float] | None = None,
               unit: str = "nats/token", title: str = "final validation NLL, one dot per seed"):
    """Each model's final NLL for every seed (dots) and their mean (a bar), so the spread is visible."""
    fig, ax = plt.subplots(figsize=(7, 3))
    for i, (name, v) in enumerate(results.items()):
        ax.plot([i] * len(v), v, "o", color=f"C{i}", alpha=0.8)
        ax.hlines(np.mean(v), i - 0.25, i + 0.25, color=f"C{i}", lw=2)
    values = [x for v in results.values() for x in v]
    top = _top(values)
    baseline_lines(ax, baselines, top)
    ax.set_xticks(range(len(results)), list(results))
    ax.set(ylabel=f"valid NLL ({unit})", title=title, xlim=(-0.5, len(results) - 0.5))
    ax.grid(alpha=0.3, axis="y")
    if baselines:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
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
