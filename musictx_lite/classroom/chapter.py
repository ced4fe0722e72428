"""What every chapter's first cell runs: ``P = mtx.setup()``.

Notebook: every chapter's first cell; explained in book/using.md.

It picks the profile (``profiles.get_profile``), turns on Colab's widget
support, seeds torch, sets the book's figure style, and prints the profile, the
device and the versions, so that every executed page says what it ran on.
"""
from __future__ import annotations

import platform
import textwrap

import torch

from ..device import pick_device
from ..engine.profiles import Profile, get_profile
from ..version import __version__


def setup(profile: str | None = None, seed: int = 0) -> Profile:
    """Pick and print the profile, device and versions; seed torch. Every chapter starts here."""
    from .plots import style  # matplotlib and ipywidgets: only when a chapter runs
    from .widgets import enable_colab

    p = get_profile(profile)
    enable_colab()                                      # Colab with ipywidgets 8: its widget manager
    torch.manual_seed(seed)
    style()                                             # the book's figure resolution
    # two lines, each within the book's 88-character column
    print(textwrap.fill(f"profile: {p.name} ({p.notes})", 88, subsequent_indent="  "))
    print(f"device: {pick_device()} | torch {torch.__version__} | musictx_lite {__version__} | "
          f"python {platform.python_version()}")
    return p


def show_source(*objs) -> None:
    """Display the package's source of ``objs``, one after the other: a reference solution, in its hidden cell."""
    import inspect

    from IPython.display import Code, display

    display(Code("\n\n".join(inspect.getsource(o) for o in objs), language="python"))


def claim(P: Profile, holds: bool, text: str) -> bool:
    """A reading that rests on training (a ranking, a gap, a verdict), checked where the profile's runs bear
    it out and said in words everywhere. In a profile whose chapters were measured (``P.unchecked`` empty:
    the cpu profile) it is asserted; elsewhere the cell prints whether it holds in this run, and why it is
    not asserted, so that a short or untried budget never stops a chapter and the page never claims what
    its run did not show. Returns ``holds``, for text computed from it."""
    if not P.unchecked:
        assert holds, f"{text}: not so in this run of the {P.name} profile"
        print(f"checked: {text}")
    else:
        print(f"{'so' if holds else 'NOT so'} in this run: {text} (not asserted: {P.unchecked})")
    return holds


# What each chapter trains, for its time budget (``python -m musictx_lite budget``): (model, runs, share of
# the model's steps in the profile, model settings, training settings); the share "compare" is chapter 11's
# comparison budget (``compare.budget``). A fresh runtime (Colab) has no earlier chapter's runs, so a chapter
# that would read one trains it again (chapters 7-10): those runs count. Chapter 1's model of matched size
# and chapter 5's eight narrow blocks are counted at the profile's width, which errs long.
CHAPTER_RUNS: dict[int, list[tuple]] = {
    0: [],
    1: [("lstm", 3, 1 / 4, {}, {}), ("lstm-attention", 6, 1 / 4, {}, {})],          # 3 seeds, 3 models
    2: [("fill", 1, 1, {}, {})],
    3: [("attention-unmasked", 1, 1, {}, {}), ("attention-positions", 1, 1, {}, {}), ("attention", 1, 1, {}, {})],
    4: [("attention", 3, 1 / 2, {}, {}), ("multi-head", 6, 1 / 2, {}, {})],           # 3 seeds, 3 models
    5: [("transformer", 6, 1 / 3, {}, {}), ("transformer-post-ln", 2, 1 / 3, {}, {})],  # stability, depth
    6: [("transformer", 1, 1, {}, {}), ("learned-positions", 1, 1, {}, {}), ("sinusoidal", 1, 1, {}, {})],
    7: [("shaw", 1, 1, {}, {}), ("rope", 1, 1, {}, {}), ("alibi", 1, 1, {}, {}), ("learned-positions", 1, 1, {}, {})],
    8: [("learned-positions", 1, 1, {}, {}), ("rope", 1, 1, {}, {}), ("relative", 1, 1, {}, {})],
    9: [("local", 1, 1, {}, {}), ("local", 1, 1, {"context": 4}, {"batch_size": 1 / 4}), ("relative", 1, 1, {}, {}),
        ("local", 1, 1, {}, {})],                                 # the band cut to N / 4: counted at N, errs long
    10: [("fnet", 1, 1, {}, {}), ("fnet-matrix", 1, 1, {}, {}), ("fnet-conv", 1, 1, {}, {}),
         ("relative", 1, 1, {}, {})],
    11: "compare",          # every compared model once, and exercise 11.1's two models again (seed 1)
    12: [("harmoniser", 1, 1, {}, {}), ("coconet", 1, 1, {}, {})],
    13: [("piano-relative", 2, 1, {}, {}), ("piano-local", 2, 1, {}, {})],       # 2 seeds, 2 models
}


def chapter_minutes(profile: Profile | str | None = None) -> dict[int, float]:
    """Estimated T4 minutes of training per chapter in ``profile`` (``profiles.config_t4_minutes``)."""
    from ..engine.profiles import config_t4_minutes, resolve
    from ..study.compare import budget, compared

    p = get_profile(profile) if profile is None or isinstance(profile, str) else profile
    out = {}
    for chapter, runs in CHAPTER_RUNS.items():
        if runs == "compare":
            minutes = [config_t4_minutes(name, *budget(name, p)) for name in compared()]
            out[chapter] = sum(minutes) + 2 * max(minutes)
            continue
        total = 0.0
        for name, n, share, model_kw, train_kw in runs:
            mcfg, tcfg = resolve(name, p)
            scaled = {k: max(1, int(getattr(cfg, k) * v)) for cfg, kw in ((mcfg, model_kw), (tcfg, train_kw))
                      for k, v in kw.items()}
            total += n * config_t4_minutes(name, *resolve(name, p, max_steps=max(1, int(tcfg.max_steps * share)),
                                                          **scaled))
        out[chapter] = total
    return out
