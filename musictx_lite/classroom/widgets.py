"""Interactive widgets for the classroom, each with a static version for the rendered book.

Notebooks: 01 and 03-09 (``explore_attention``, for any next-token model with attention weights),
01_attention_in_rnns.ipynb, 08_skew.ipynb and 11_paper.ipynb (``explore_sampler``); the skew stepper
(``skew_widget.explore_skew``, 08_skew.ipynb) and the harmoniser (``harmoniser_widget.explore_harmoniser``,
12_harmonise.ipynb) have modules of their own, built on this one's live-or-static helpers.

Four widgets (ipywidgets 7.7 or 8), each a small box of controls over a pure function that draws one
state; the tests and the static versions call the same functions:

- attention explorer: piece, layer, head and query (step, voice) -> ``attention_view``, the
  query's weights over the piano roll (``plots.attention_over_roll``);
- sampler: prompt (piece, steps), length, temperature, top-k, seed -> ``sample_music``, shown
  by ``sample_view`` as a piano roll, a score (``score.svg``) and a player (``audio.play``);
- skew stepper (chapter 8, ``skew_widget``): L and the step (R, pad, reshape, slice) -> ``skew_step``;
- harmoniser (chapter 12, ``harmoniser_widget``): a melody typed in tinyNotation, temperature, seed ->
  ``harmonise_tune``.

Live or static. ``explore_attention``, ``explore_sampler``, ``explore_skew`` and ``explore_harmoniser``
display the widget in a live kernel and the static version (``*_fallback``: HTML with PNG images, SVG
scores and audio players) everywhere else. ``live()`` decides when the cell runs:

    MUSICTX_WIDGETS=static   the static version only; no widget is created
    MUSICTX_WIDGETS=live     the widget only
    unset                    the widget in an IPython kernel, else the static version

Why not both in one output? myst-nb (Jupyter Book 1) renders one mime type per output and
ranks application/vnd.jupyter.widget-view+json above text/html, so a fallback in the widget's
own bundle never shows in the book. The widget view itself becomes a ``<script>`` tag: with the
widget state that nbclient saved during execution and the html-manager script from a CDN it
draws controls with no kernel behind them (they move and change nothing); without the CDN,
nothing at all. A fallback in a second output would show twice in Colab. So the book's Sphinx
extension (book/_ext) sets MUSICTX_WIDGETS=static for the kernels that execute the chapters:
the pages get the static version, no widget state and no widget JavaScript, while Jupyter and
Colab readers get the live widget alone.

Colab draws ipywidgets 7 (what it ships) natively, and 8 only with its custom widget manager:
``enable_colab()`` turns that on for 8, once per session, and does nothing for 7 or outside Colab.
"""
from __future__ import annotations

import base64
import html
import io
import time
from typing import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn

from .. import settings
from ..classroom.plots import piano_roll
from ..engine.sample import generate, prompt_from
from ..io.audio import Clip, play
from ..io.data import Piece
from ..io.tokens import VOCAB_SIZE, VOICES, decode, encode
from ..models.attention import attention_weights
from ..models.tasks import NEXT_TOKEN
from .plots import DPI, attention_over_roll

MODE_VAR = settings.WIDGETS
WIDGET_DPI = 100          # live figures: quick to draw; the static versions use the book's DPI


# ---------------------------------------------------------------- live or static

def live() -> bool:
    """Show live widgets here? ``MUSICTX_WIDGETS`` (live / static) decides, else: in an IPython kernel."""
    mode = settings.widgets()
    if mode not in ("", "auto", "live", "static"):
        raise ValueError(f"{MODE_VAR}={mode!r}: use 'live', 'static', or leave it unset")
    if mode in ("live", "static"):
        return mode == "live"
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def enable_colab() -> bool:
    """In Colab with ipywidgets 8, turn on the custom widget manager that draws them; elsewhere do nothing.

    Colab ships ipywidgets 7 and draws 7.x natively: the custom manager is for 8.x only. Returns True when it
    turned it on. Call it once per session, in the setup cell."""
    try:
        from google.colab import output
    except ImportError:
        return False
    try:
        import ipywidgets
    except ImportError:
        return False
    if int(ipywidgets.__version__.split(".")[0]) < 8:
        return False
    output.enable_custom_widget_manager()
    return True


def _show(widget: Callable, fallback: Callable) -> None:
    from IPython.display import display

    display(widget() if live() else fallback())


def _ipywidgets():
    try:
        import ipywidgets
    except ImportError as e:
        raise ImportError("the interactive widgets need ipywidgets: pip install 'ipywidgets>=7.7,<9' "
                          "(the static versions, *_fallback, do not)") from e
    return ipywidgets


def _png(fig, dpi: int = WIDGET_DPI) -> bytes:
    """The figure as PNG bytes; the figure is closed, so that a notebook does not show it again."""
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
        return buf.getvalue()
    finally:
        plt.close(fig)


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt, quote=True)}" style="max-width:100%">'


def _static(what: str, controls: str, body: str):
    """An HTML display object: a line that says what the live widget lets the reader choose, then ``body``."""
    from IPython.display import HTML

    return HTML(f'<div class="musictx-static"><p style="font-size:90%"><i>Static version of {what}: run the '
                f'notebook in Jupyter or Colab to choose {controls}.</i></p>{body}</div>')


def _pieces(pieces) -> list[Piece]:
    items = [pieces] if isinstance(pieces, Piece) else list(pieces)
    if not items or not all(isinstance(p, Piece) for p in items):
        raise TypeError("pieces must be a Piece or a non-empty list of Pieces, e.g. data.valid "
                        "(wrap a pitch grid as mtx.Piece(name, grid))")
    return items


def _name(model: nn.Module) -> str:
    return getattr(model, "name", type(model).__name__)


def _check_next_token(model: nn.Module) -> None:
    if getattr(model, "task", None) is not NEXT_TOKEN:
        raise ValueError(f"{_name(model)} is not a next-token model; the widgets explore chapters 1 and 3-11's "
                         f"models (chapter 2's fill-in head has its own plots)")


def max_steps(model: nn.Module, piece: Piece, steps: int = 32) -> int:
    """At most ``steps`` steps of ``piece`` that fit the model's context with BOS (1 + 4 steps tokens)."""
    ctx = getattr(model, "context", None)
    limit = len(piece) if ctx is None else min(len(piece), (ctx - 1) // 4)
    if limit < 1:
        raise ValueError(f"{piece.name} has no step that fits {_name(model)}'s context of {ctx} tokens")
    return max(1, min(int(steps), limit))


# ---------------------------------------------------------------- attention explorer (chapters 1-9)

def n_layers(model: nn.Module) -> int:
    """Layers with attention weights: a decoder's blocks; one for chapter 1's LSTM with attention."""
    return len(model.blocks) if hasattr(model, "blocks") else 1


def attention_maps(model: nn.Module, pitches: np.ndarray) -> list[torch.Tensor]:
    """Each layer's weights (nh, T, T), on the CPU, over the tokens of the grid ``pitches`` (T = 1 + 4 steps)."""
    _check_next_token(model)
    tokens = encode(pitches)                                            # (T,), BOS first
    ctx = getattr(model, "context", None)
    if ctx is not None and len(tokens) > ctx:
        raise ValueError(f"{len(tokens)} tokens do not fit {_name(model)}'s context of {ctx}: "
                         f"use at most {(ctx - 1) // 4} steps")
    maps = []
    for layer in range(n_layers(model)):
        try:
            w = attention_weights(model, tokens, layer)                 # moved to the model's device inside
        except ValueError as e:                                         # nothing recorded
            raise ValueError(f"{_name(model)} has no attention weights to show (an LSTM without attention, "
                             f"or a Fourier mixer)") from e
        maps.append(w if w.dim() == 3 else w[None])                     # (nh, T, T); one head: (1, T, T)
    return maps


def attention_view(model: nn.Module, pitches: np.ndarray, layer: int = -1, head: int = 0,
                   query: int | Sequence[int] | None = None, title: str | None = None,
                   maps: list[torch.Tensor] | None = None):
    """The piano roll of ``pitches`` and, below it, the weights of ``query`` in ``head`` of ``layer``.

    ``query`` is a token index, 1 .. T - 1 (token 1 + 4 s + v is voice v of step s), or a list of
    them; by default the soprano of the step three quarters in. ``maps`` (``attention_maps``)
    saves the forward passes when several views share a grid. Returns the matplotlib figure.
    """
    maps = attention_maps(model, pitches) if maps is None else maps
    if not -len(maps) <= layer < len(maps):
        raise ValueError(f"layer {layer} does not exist: {_name(model)} has {len(maps)} layer(s)")
    w = maps[layer]                                                     # (nh, T, T)
    nh, T = w.shape[0], w.shape[-1]
    if not 0 <= head < nh:
        raise ValueError(f"head {head} does not exist: layer {layer} has {nh} head(s), 0 .. {nh - 1}")
    if query is None:
        query = 1 + 4 * ((T - 1) // 4 * 3 // 4)
    queries = [int(query)] if np.ndim(query) == 0 else [int(q) for q in query]
    if not all(1 <= q < T for q in queries):
        raise ValueError(f"query tokens must be in 1 .. {T - 1} (0 is BOS), got {queries}")
    title = title or f"{_name(model)}: layer {layer % len(maps)}, head {head}"
    return attention_over_roll(w[head].numpy(), np.asarray(pitches), queries, title)


def attention_widget(model: nn.Module, pieces, steps: int = 32):
    """The attention explorer: choose the piece, layer, head and query (step and voice).

    Returns an ipywidgets box; ``box.controls`` holds the controls by name, ``box.state`` what the
    image shows now (``weights``: the query's row, (T,)). The weights of a piece are computed once.
    """
    W = _ipywidgets()
    pieces = _pieces(pieces)
    cache: dict[int, tuple[np.ndarray, list[torch.Tensor]]] = {}

    def grid_and_maps(i: int):
        if i not in cache:
            grid = pieces[i].pitches[: max_steps(model, pieces[i], steps)]  # (steps, 4)
            cache[i] = grid, attention_maps(model, grid)
        return cache[i]

    grid, maps = grid_and_maps(0)
    c = dict(
        piece=W.Dropdown(options=[(p.name, i) for i, p in enumerate(pieces)], value=0, description="piece"),
        layer=W.Dropdown(options=list(range(len(maps))), value=len(maps) - 1, description="layer"),
        head=W.Dropdown(options=list(range(maps[0].shape[0])), value=0, description="head"),
        step=W.IntSlider(value=len(grid) * 3 // 4, min=0, max=len(grid) - 1, description="query step",
                         continuous_update=False),
        voice=W.ToggleButtons(options=[(v, i) for i, v in enumerate(VOICES)], value=0, description="voice",
                              style={"button_width": "5.5em"}),
    )
    image = W.Image(format="png", layout=W.Layout(max_width="100%"))
    box = W.VBox([W.HBox([c["piece"], c["layer"], c["head"]]), W.HBox([c["step"], c["voice"]]), image])
    box.controls, box.image, box.state = c, image, {}
    busy = [False]

    def update(_=None) -> None:
        if busy[0]:                                                     # a change made by update itself
            return
        busy[0] = True
        try:
            piece = pieces[c["piece"].value]
            grid, maps = grid_and_maps(c["piece"].value)
            c["step"].max = len(grid) - 1                               # pieces may be shorter than steps
            layer, head = c["layer"].value, c["head"].value
            query = 1 + 4 * c["step"].value + c["voice"].value
            fig = attention_view(model, grid, layer, head, query, maps=maps,
                                 title=f"{piece.name}: {_name(model)}, layer {layer}, head {head}")
            box.state = dict(piece=piece.name, layer=layer, head=head, query=query,
                             weights=maps[layer][head, query].clone())  # (T,)
            image.value = _png(fig)
        finally:
            busy[0] = False

    for control in c.values():
        control.observe(update, names="value")
    update()
    return box


def attention_fallback(model: nn.Module, piece: Piece, steps: int = 32,
                       states: Sequence[tuple[int, int]] | None = None):
    """The attention explorer's static version: one image per (layer, head) in ``states``.

    Each image shows two queries, the soprano and the bass of the step three quarters into the
    segment. By default: heads 0 and 1 of the last layer, and head 0 of the first if there are
    several (at most three images).
    """
    piece = _pieces(piece)[0]
    grid = piece.pitches[: max_steps(model, piece, steps)]
    maps = attention_maps(model, grid)
    if states is None:
        last = len(maps) - 1
        states = [(0, 0)] * (last > 0) + [(last, head) for head in range(min(2, maps[0].shape[0]))]
    s = len(grid) * 3 // 4
    queries = [1 + 4 * s, 1 + 4 * s + 3]                                # soprano and bass of step s
    images = []
    for layer, head in states:
        title = f"{piece.name}: {_name(model)}, layer {layer}, head {head}"
        images.append(_img(_png(attention_view(model, grid, layer, head, queries, title, maps), DPI), title))
    return _static("the attention explorer", "the piece, layer, head and query", "\n".join(images))


def explore_attention(model: nn.Module, pieces, steps: int = 32) -> None:
    """Display the attention explorer, or its static version where no widget can run (see ``live``)."""
    _show(lambda: attention_widget(model, pieces, steps), lambda: attention_fallback(model, _pieces(pieces)[0], steps))


# ---------------------------------------------------------------- sampler

SAMPLER_SETTINGS = (dict(temperature=0.5), dict(temperature=1.0), dict(temperature=1.5, top_k=5))


def sample_music(model: nn.Module, piece: Piece | None = None, prompt_steps: int = 16, n_steps: int = 64,
                 temperature: float = 1.0, top_k: int | None = None, seed: int | None = 0) -> np.ndarray:
    """The first ``prompt_steps`` steps of ``piece``, then ``n_steps`` sampled ones: (prompt_steps + n_steps, 4).

    ``top_k`` None or 0 samples from every allowed token. Without a piece (or with 0 prompt
    steps) the model starts from BOS alone.
    """
    _check_next_token(model)
    if n_steps < 1:
        raise ValueError(f"n_steps must be at least 1, got {n_steps}")
    if top_k is not None and top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0: off), got {top_k}")
    if prompt_steps < 0 or (piece is not None and prompt_steps > len(piece)):
        raise ValueError(f"prompt_steps must be in 0 .. {len(piece) if piece is not None else 0}, got {prompt_steps}")
    prompt = prompt_from(piece, prompt_steps) if piece is not None and prompt_steps > 0 else None
    tokens = generate(model, prompt, n_steps=n_steps, temperature=temperature, top_k=top_k or None, seed=seed)
    return decode(tokens)                                               # (prompt_steps + n_steps, 4)


def score_html(grid: np.ndarray, title: str | None = None, max_bars: int = 8, onsets: np.ndarray | None = None) -> str:
    """The score of ``grid`` (``score.svg``; ``onsets`` (steps, 4): where notes start, None: on each change of
    pitch) as HTML; where it cannot be drawn here, a line that says why."""
    try:
        from ..io.score import svg  # music21 and verovio: imported late

        score = svg(grid, onsets, title=title, max_bars=max_bars)
        return f'<div class="musictx-score" style="overflow-x:auto">{score}</div>'
    except ImportError as e:
        return f'<p style="font-size:85%"><i>No score here: {html.escape(str(e))}</i></p>'


def sample_view(grid: np.ndarray, prompt_steps: int = 0, title: str | None = None, seconds: float = 20.0,
                name: str = "musictx-sample.mid") -> tuple[plt.Figure, str, Clip]:
    """What the sampler shows for a grid: a piano roll titled ``title`` (dotted: the end of the prompt),
    the score (HTML) and a player of the first ``seconds``."""
    ax = piano_roll(grid, title=title)
    if prompt_steps:
        ax.axvline(prompt_steps / 4, color="k", ls=":")
    return ax.figure, score_html(grid), play(grid, seconds=seconds, name=name)


def _prompt_limit(model: nn.Module, piece: Piece) -> int:
    """The longest prompt the sampler offers: at most 32 steps of ``piece`` that fit the model's context."""
    return max_steps(model, piece, 32)


def _label(temperature: float, top_k: int | None) -> str:
    return f"temperature {temperature:g}" + (f", top-k {top_k}" if top_k else "")


def sampler_widget(model: nn.Module, pieces, prompt_steps: int = 16, n_steps: int = 64, temperature: float = 1.0,
                   top_k: int = 0, seed: int = 0, seconds: float = 20.0):
    """The sampler: prompt (piece, steps), length, temperature, top-k, seed; a button samples.

    Shows a piano roll, the score and a player. ``box.controls`` holds the controls by name,
    ``box.button`` the button, ``box.state`` the last sample (``grid``, ``clip`` and the settings).
    """
    W = _ipywidgets()
    _check_next_token(model)
    pieces = _pieces(pieces)
    most = min(_prompt_limit(model, p) for p in pieces)
    c = dict(
        piece=W.Dropdown(options=[(p.name, i) for i, p in enumerate(pieces)], value=0, description="prompt"),
        prompt_steps=W.IntSlider(value=min(prompt_steps, most), min=0, max=most, description="prompt steps"),
        n_steps=W.IntSlider(value=n_steps, min=4, max=256, step=4, description="new steps"),
        temperature=W.FloatSlider(value=temperature, min=0.1, max=2.0, step=0.05, description="temperature"),
        top_k=W.IntSlider(value=top_k, min=0, max=VOCAB_SIZE, description="top-k (0: off)"),
        seed=W.IntText(value=seed, description="seed"),
    )
    for control in c.values():
        control.style.description_width = "7em"
    button, status = W.Button(description="Sample", button_style="primary"), W.HTML()
    roll, score, audio = W.Image(format="png", layout=W.Layout(max_width="100%")), W.HTML(), W.HTML()
    box = W.VBox([W.HBox([c["piece"], c["prompt_steps"]]), W.HBox([c["n_steps"], c["seed"]]),
                  W.HBox([c["temperature"], c["top_k"]]), W.HBox([button, status]), roll, audio, score])
    box.controls, box.button, box.state = c, button, {}

    def run(_=None) -> None:
        start = time.perf_counter()
        status.value = "<i>sampling...</i>"
        try:
            piece = pieces[c["piece"].value]
            settings = dict(prompt_steps=min(c["prompt_steps"].value, len(piece)), n_steps=c["n_steps"].value,
                            temperature=c["temperature"].value, top_k=c["top_k"].value or None,
                            seed=c["seed"].value)
            grid = sample_music(model, piece, **settings)
            title = f"{_name(model)}, {_label(settings['temperature'], settings['top_k'])}, continuing {piece.name}"
            fig, score.value, clip = sample_view(grid, settings["prompt_steps"], title, seconds)
            roll.value, audio.value = _png(fig), clip._repr_html_()
        except Exception as e:                                          # a callback's error would go to a log
            status.value = f"<b>error:</b> {html.escape(f'{type(e).__name__}: {e}')}"
            raise
        box.state = dict(grid=grid, clip=clip, piece=piece.name, **settings)
        status.value = f"{settings['n_steps']} steps in {time.perf_counter() - start:.1f} s"

    button.on_click(run)
    run()
    return box


def sampler_fallback(model: nn.Module, piece: Piece, prompt_steps: int = 16, n_steps: int = 64,
                     settings: Sequence[dict] = SAMPLER_SETTINGS, seed: int = 0, seconds: float = 10.0):
    """The sampler's static version: for each of a few ``settings`` (temperature, top_k), the same
    prompt continued, as a piano roll, a player and a score. Each setting adds about 0.4 MB to a
    page (a clip of ``seconds``, about 130 kB of SVG, a PNG)."""
    _check_next_token(model)
    piece = _pieces(piece)[0]
    p = min(prompt_steps, _prompt_limit(model, piece))
    parts = []
    for s in settings:
        grid = sample_music(model, piece, p, n_steps, seed=seed, **s)
        label = _label(s.get("temperature", 1.0), s.get("top_k"))
        fig, score, clip = sample_view(grid, p, f"{_name(model)}, {label}, continuing {piece.name}", seconds,
                                       name=f"{_name(model)}-{label.replace(', ', '-').replace(' ', '')}.mid")
        parts.append(f"<p><b>{html.escape(label)}</b></p>{_img(_png(fig, DPI), label)}{clip._repr_html_()}{score}")
    return _static(f"the sampler ({p} steps of {piece.name} as the prompt, seed {seed})",
                   "the prompt, length, temperature, top-k and seed", "\n".join(parts))


def explore_sampler(model: nn.Module | None = None, pieces=None, prompt_steps: int = 16, n_steps: int = 64) -> None:
    """Display the sampler, or its static version where no widget can run (see ``live``).

    By default it samples the shipped relative-attention model (``pretrained("relative")``, chapter 11),
    continuing the validation chorales of the official JSB split where it can be loaded, else the embedded ones."""
    if model is None:
        from ..study.hub import pretrained

        model = pretrained("relative")
    if pieces is None:
        from ..io.data import load_chorales, load_jsb

        try:
            pieces = load_jsb().valid[:5]
        except (OSError, ValueError):                     # offline and no local copy
            pieces = load_chorales().valid[:5]
    _show(lambda: sampler_widget(model, pieces, prompt_steps, n_steps),
          lambda: sampler_fallback(model, _pieces(pieces)[0], prompt_steps, n_steps))
