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
from ..experiments.profiles import Profile, get_profile
from ..version import __version__


def setup(profile: str | None = None, seed: int = 0) -> Profile:
    """Pick and print the profile, device and versions; seed torch. Every chapter starts here."""
    from .plots import style                          # matplotlib and ipywidgets: only when a chapter runs
    from .widgets import enable_colab

    p = get_profile(profile)
    enable_colab()                                      # Colab draws ipywidgets 8; elsewhere nothing
    torch.manual_seed(seed)
    style()                                             # the book's figure resolution
    # two lines, each within the book's 88-character column
    print(textwrap.fill(f"profile: {p.name} ({p.notes})", 88, subsequent_indent="  "))
    print(f"device: {pick_device()} | torch {torch.__version__} | musictx_lite {__version__} | "
          f"python {platform.python_version()}")
    return p
