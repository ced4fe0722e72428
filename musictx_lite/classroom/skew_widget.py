"""The skew stepper (chapter 8): L and the step (R, pad, reshape, slice) -> ``skew_step``, drawn by ``skew_table`` as
an HTML table whose entries say which query and distance they hold. Live or static as every widget
(``widgets.live``).

Notebook: 08_skew.ipynb (``explore_skew``).
"""
from __future__ import annotations

import html

import torch
import torch.nn.functional as F

from .widgets import _ipywidgets, _show, _static

SKEW_NAMES = ("R = Q E^T", "pad", "reshape", "slice")
QUERY_COLORS = ("#fde0dd", "#deebf7", "#e5f5e0", "#fff2b3", "#ece2f0", "#fee6ce", "#e0f3f8", "#f0f0f0")


def skew_step(L: int = 4, step: int = 3) -> tuple[torch.Tensor, str]:
    """The toy R = Q E^T of chapter 8, entry (i, r) = 1 + L i + r, after ``step`` steps of the skew, and a caption.

    0: R (L, L), rows queries, columns distances r - (L - 1); 1: a column of zeros padded on the
    left, (L, L + 1); 2: reshaped row by row to (L + 1, L); 3: the first row dropped, S (L, L),
    rows queries, columns keys, equal to ``relative.skew(R)``.
    """
    if not isinstance(L, int) or not 2 <= L <= len(QUERY_COLORS):
        raise ValueError(f"L must be an integer in 2 .. {len(QUERY_COLORS)}, got {L!r}")
    if step not in range(4):
        raise ValueError(f"step must be 0 (R), 1 (pad), 2 (reshape) or 3 (slice), got {step!r}")
    R = torch.arange(1, L * L + 1.0).view(L, L)                         # (L, L): query x distance
    padded = F.pad(R, (1, 0))                                           # (L, L + 1)
    reshaped = padded.reshape(L + 1, L)                                 # (L + 1, L)
    matrices = (R, padded, reshaped, reshaped[1:])                      # the last: (L, L)
    captions = (
        f"1. R = Q E^T, ({L}, {L}): row i is query i, column r is distance r - {L - 1}.",
        f"2. Pad one column of zeros on the left: ({L}, {L + 1}).",
        f"3. Reshape to ({L + 1}, {L}), reading row by row: each row starts one place further right "
        f"than the one before.",
        f"4. Drop the first row: S, ({L}, {L}), row i is query i, column j is key j. On and below the "
        f"diagonal, entry (i, j) is query i at distance j - i, as wanted; above it, leftovers to mask.",
    )
    return matrices[step], captions[step]


def skew_table(L: int = 4, step: int = 3) -> str:
    """``skew_step`` as an HTML table: each entry shows its number, its query (colour) and its distance d."""
    M, caption = skew_step(L, step)
    cols = {0: [f"d={r - L + 1}" for r in range(L)], 1: ["pad"] + [f"d={r - L + 1}" for r in range(L)],
            2: [f"col {c}" for c in range(L)], 3: [f"key {j}" for j in range(L)]}[step]
    rows = [f"row {k}" for k in range(L + 1)] if step == 2 else [f"query {i}" for i in range(L)]
    cell = "border:1px solid #999;padding:0.2em 0.45em;min-width:3.2em;color:#000;background:{}"
    head = "".join(f'<th style="padding:0 0.4em;font-weight:normal">{c}</th>' for c in cols)
    body = []
    for k, row in enumerate(M.long().tolist()):
        tds = []
        for j, v in enumerate(row):
            if v == 0:
                style, text = cell.format("#ffffff") + ";color:#888", "0<br><small>pad</small>"
            else:
                i, d = (v - 1) // L, (v - 1) % L - (L - 1)              # query and distance of the entry
                style, text = cell.format(QUERY_COLORS[i]), f"{v}<br><small>q{i}, d={d}</small>"
            if step == 3 and j > k:                                     # above the diagonal: undefined
                style += ";opacity:0.35;border-style:dashed"
            tds.append(f'<td style="{style}">{text}</td>')
        body.append(f'<tr><th style="padding:0 0.4em;font-weight:normal;text-align:right">{rows[k]}</th>'
                    f'{"".join(tds)}</tr>')
    return (f'<figure style="display:inline-block;vertical-align:top;margin:0 1.5em 1em 0">'
            f'<table style="border-collapse:collapse;font-family:monospace;text-align:center;margin:0">'
            f'<tr><th></th>{head}</tr>{"".join(body)}</table>'
            f'<figcaption style="max-width:24em;font-size:90%">{html.escape(caption)}</figcaption></figure>')


def skew_widget(L: int = 4):
    """The skew stepper: choose L and the step; the table shows the matrix after that step.

    ``box.controls`` holds the controls (``L``, ``step``), ``box.state`` the matrix and caption shown."""
    W = _ipywidgets()
    skew_step(L, 0)                                                     # a bad L fails here, not in a callback
    c = dict(L=W.IntSlider(value=L, min=2, max=len(QUERY_COLORS), description="L", continuous_update=False),
             step=W.ToggleButtons(options=[(f"{k + 1}. {n}", k) for k, n in enumerate(SKEW_NAMES)], value=0,
                                  description="step"))
    table = W.HTML()
    box = W.VBox([W.HBox([c["L"]]), c["step"], table])
    box.controls, box.table, box.state = c, table, {}

    def update(_=None) -> None:
        matrix, caption = skew_step(c["L"].value, c["step"].value)
        box.state = dict(L=c["L"].value, step=c["step"].value, matrix=matrix, caption=caption)
        table.value = skew_table(c["L"].value, c["step"].value)

    for control in c.values():
        control.observe(update, names="value")
    update()
    return box


def skew_fallback(L: int = 4):
    """The skew stepper's static version: the four steps side by side."""
    return _static("the skew stepper", "L and the step", "".join(skew_table(L, k) for k in range(4)))


def explore_skew(L: int = 4) -> None:
    """Display the skew stepper, or its static version where no widget can run (see ``live``)."""
    _show(lambda: skew_widget(L), lambda: skew_fallback(L))
