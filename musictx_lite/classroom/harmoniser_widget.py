"""The harmoniser widget (chapter 12): a melody typed in tinyNotation, the temperature and the seed -> alto, tenor
and bass (``harmonise_tune``: ``read_melody``, then ``harmonise``), shown by ``harmonise_view`` as a score and a
player, with what reading the melody did to it (``Melody.log``). Live or static as every widget (``widgets.live``).

Notebook: 12_harmonise.ipynb (``explore_harmoniser``).
"""
from __future__ import annotations

import html
import time
from typing import Sequence

import numpy as np
import torch.nn as nn

from ..engine.harmonise import grid_onsets, harmonise
from ..io.audio import Clip, play
from ..io.melody import Melody, MelodyError, read_melody
from ..models.coconet import INFILL
from ..models.tasks import MELODY, NEXT_TOKEN
from .widgets import _ipywidgets, _name, _show, _static, score_html

ODE_TO_JOY = "4/4 e'4 e' f' g' g' f' e' d' c' c' d' e' e'4. d'8 d'2"
TWINKLE = "4/4 c'4 c' g' g' a' a' g'2 f'4 f' e' e' d' d' c'2"
HARMONISER_EXAMPLES = (("Ode to Joy (Beethoven)", ODE_TO_JOY), ("Twinkle, twinkle, little star", TWINKLE))


def _check_harmoniser(model: nn.Module) -> None:
    if getattr(model, "task", None) not in (NEXT_TOKEN, MELODY, INFILL):
        raise ValueError(f"{_name(model)} cannot harmonise a melody: chapter 12 harmonises with a next-token decoder "
                         f"(its soprano forced), the encoder-decoder harmoniser or Coconet")


def _tiny(text: str) -> str:
    """Text typed into the widget as tinyNotation for ``read_melody``: never a path, even when it looks like one."""
    text = str(text).strip()
    return text if text.startswith("tinyNotation:") else "tinyNotation: " + text


def harmonise_tune(model: nn.Module, tune: str, temperature: float = 1.0,
                   seed: int | None = 0) -> tuple[np.ndarray, np.ndarray, Melody]:
    """Alto, tenor and bass under a melody typed in music21's tinyNotation (``"4/4 c'4 d' e' f' g'2"``):
    the (steps, 4) grid, its onsets (``grid_onsets``) and the ``Melody`` that ``read_melody`` made of the
    text (moved into the soprano's range; what it did is in its ``log``). The grid's soprano is
    ``melody.pitches``. A melody that cannot be harmonised raises ``MelodyError``, with a one-line message."""
    _check_harmoniser(model)
    melody = read_melody(_tiny(tune))
    grid = harmonise(model, melody.pitches, temperature, seed, metre=melody.metre, pickup=melody.pickup)
    return grid, grid_onsets(grid, melody.onsets), melody


def harmonise_view(grid: np.ndarray, onsets: np.ndarray | None = None, title: str | None = None,
                   seconds: float = 20.0, max_bars: int = 8, name: str = "musictx-harmonised.mid") -> tuple[str, Clip]:
    """What the harmoniser shows for a grid: the score (HTML, the first ``max_bars`` bars) and a player of the
    first ``seconds``, both with the notes struck where ``onsets`` says."""
    return score_html(grid, title, max_bars, onsets), play(grid, onsets, seconds=seconds, name=name)


def _log_html(melody: Melody) -> str:
    items = "".join(f"<li>{html.escape(line)}</li>" for line in melody.log)
    return f'<ul style="font-size:90%;margin:0.2em 0">{items}</ul>'


def harmonise_widget(model: nn.Module, melody: str = ODE_TO_JOY, temperature: float = 1.0, seed: int = 0,
                     seconds: float = 60.0, max_bars: int = 16):
    """The harmoniser: a melody in tinyNotation, the temperature and the seed; a button harmonises.

    Shows what reading the melody did (``Melody.log``: its length, notes moved to the 16th grid, a
    transposition), a player and the score; a melody that cannot be harmonised, a line ``error: ...``
    that says why. ``box.controls`` holds the controls by name, ``box.button`` the button, ``box.views``
    the HTML outputs (``status``, ``log``, ``audio``, ``score``), ``box.state`` the last result (``grid``,
    ``onsets``, ``melody``, ``clip`` and the settings; after a refused melody, ``error``)."""
    W = _ipywidgets()
    _check_harmoniser(model)
    c = dict(
        melody=W.Textarea(value=melody, description="melody", placeholder="4/4 c'4 d' e' f' g'2",
                          layout=W.Layout(width="95%", height="4em")),
        temperature=W.FloatSlider(value=temperature, min=0.1, max=2.0, step=0.05, description="temperature"),
        seed=W.IntText(value=seed, description="seed"),
    )
    for control in c.values():
        control.style.description_width = "7em"
    button, status = W.Button(description="Harmonise", button_style="primary"), W.HTML()
    log, score, audio = W.HTML(), W.HTML(), W.HTML()
    box = W.VBox([c["melody"], W.HBox([c["temperature"], c["seed"]]), W.HBox([button, status]), log, audio, score])
    box.controls, box.button, box.state = c, button, {}
    box.views = dict(status=status, log=log, audio=audio, score=score)    # what is shown, by name

    def run(_=None) -> None:
        start = time.perf_counter()
        status.value = "<i>harmonising...</i>"
        settings = dict(temperature=c["temperature"].value, seed=c["seed"].value)
        try:
            grid, onsets, tune = harmonise_tune(model, c["melody"].value, **settings)
            score.value, clip = harmonise_view(grid, onsets, seconds=seconds, max_bars=max_bars,
                                               name=f"{_name(model)}-harmonised.mid")
            audio.value = clip._repr_html_()
        except MelodyError as e:                                        # the reader's melody: say why, no traceback
            log.value = score.value = audio.value = ""
            status.value = f"<b>error:</b> {html.escape(str(e))}"
            box.state = dict(error=str(e), text=c["melody"].value, **settings)
            return
        except Exception as e:                                          # a callback's error would go to a log
            log.value = score.value = audio.value = ""
            status.value = f"<b>error:</b> {html.escape(f'{type(e).__name__}: {e}')}"
            raise
        log.value = _log_html(tune)
        box.state = dict(grid=grid, onsets=onsets, melody=tune, clip=clip, text=c["melody"].value, **settings)
        status.value = (f"{len(grid)} steps harmonised by {html.escape(_name(model))} in "
                        f"{time.perf_counter() - start:.1f} s")

    button.on_click(run)
    run()
    return box


def harmonise_fallback(model: nn.Module | None, examples: Sequence[tuple[str, str | np.ndarray]] = HARMONISER_EXAMPLES,
                       temperature: float = 1.0, seed: int = 0, seconds: float = 20.0):
    """The harmoniser's static version: for each (title, melody) of ``examples``, a player and the score. A
    melody is tinyNotation text, harmonised here by ``model`` (and what reading it did is said), or a
    harmonised (steps, 4) grid, shown as it is (``model`` may then be None). Each example adds about
    0.3 MB to a page (a clip of ``seconds``, about 130 kB of SVG)."""
    items = list(examples)
    if not items or not all(len(e) == 2 for e in items):
        raise TypeError("examples must be a non-empty list of (title, melody) pairs, each melody tinyNotation "
                        "text or a harmonised (steps, 4) grid")
    parts = []
    for k, (title, tune) in enumerate(items):
        if isinstance(tune, str):
            if model is None:
                raise ValueError(f"example {title!r} is a melody to harmonise: give the model that harmonises it")
            grid, onsets, melody = harmonise_tune(model, tune, temperature, seed)
            said = (f"Harmonised by {html.escape(_name(model))}, temperature {temperature:g}, seed {seed}. "
                    f"The melody: {_log_html(melody)}")
        else:
            grid = np.asarray(tune)
            onsets, said = grid_onsets(grid), ""
        score, clip = harmonise_view(grid, onsets, seconds=seconds, name=f"harmonised-{k + 1}.mid")
        parts.append(f'<p><b>{html.escape(str(title))}</b></p><div style="font-size:90%">{said}</div>'
                     f"{clip._repr_html_()}{score}")
    body = "\n".join(parts) + ('<p style="font-size:90%"><i>To harmonise a tune of your own, open this chapter in '
                               'Colab or Jupyter and type it in tinyNotation, e.g. '
                               "<code>4/4 c'4 d' e' f' g'2</code>.</i></p>")
    return _static("the harmoniser", "your own melody, the temperature and the seed", body)


def _default_harmoniser() -> nn.Module:
    """The shipped encoder-decoder ``harmoniser`` where it is shipped, else the relative-attention decoder, which
    harmonises by sampling with its soprano forced (``harmonise``)."""
    from ..study.hub import _check, pretrained

    try:
        _check("harmoniser")
    except ValueError:
        return pretrained("relative")
    return pretrained("harmoniser")


def explore_harmoniser(model: nn.Module | None = None,
                       examples: Sequence[tuple[str, str | np.ndarray]] = HARMONISER_EXAMPLES,
                       melody: str = ODE_TO_JOY, temperature: float = 1.0, seed: int = 0) -> None:
    """Display the harmoniser, or its static version where no widget can run (see ``live``).

    By default it harmonises with the shipped ``harmoniser`` (chapter 12) where the package ships it, else
    with the relative-attention decoder (``pretrained("relative")``)."""
    if model is None:
        model = _default_harmoniser()
    _show(lambda: harmonise_widget(model, melody, temperature, seed),
          lambda: harmonise_fallback(model, examples, temperature, seed))
