"""What the subcommands share: argument types that fail in one line, the shared options (declared once, as parent
parsers), the default device, and the checks made before any work. Notebook: book/using.md.
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from types import SimpleNamespace

import torch

MAX_SEED = 2**32 - 1
PIANO_SAMPLE = "piano:"            # --data piano:giantmidi[,maestro,scores]: the shared piano sample (chapter 13)


# ---------------------------------------------------------------- argument types

def _number(kind: type, ok, what: str):
    """An argparse ``type=`` that parses ``kind`` and accepts the values where ``ok(value)``."""
    def parse(s: str):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {s!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"must be {what}, got {s}")
        return v
    parse.__name__ = what
    return parse


positive_int = _number(int, lambda v: v > 0, "a positive integer")
nonnegative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
seed_int = _number(int, lambda v: 0 <= v <= MAX_SEED, f"an integer from 0 to {MAX_SEED}")
positive_float = _number(float, lambda v: v > 0 and math.isfinite(v), "a finite number > 0")


def device_arg(s: str) -> str:
    """A device torch can parse and this machine has: cpu, cuda, cuda:N or mps."""
    try:
        d = torch.device(s)
    except (RuntimeError, ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"{s!r} is not a device; use cpu, cuda, cuda:N or mps") from None
    if d.type == "cuda":
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{s}: CUDA is not available on this machine "
                                             f"(torch {torch.__version__}); use cpu")
        if d.index is not None and d.index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{s}: this machine has {torch.cuda.device_count()} CUDA "
                                             f"device(s), cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
    elif d.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise argparse.ArgumentTypeError(f"{s}: MPS is not available on this machine; use cpu")
    elif d.type != "cpu":
        raise argparse.ArgumentTypeError(f"{s}: device type {d.type!r} is not supported; use cpu, cuda, cuda:N or mps")
    return s


# ---------------------------------------------------------------- the shared options

def shared_options() -> SimpleNamespace:
    """The options several subcommands take, each declared once as a parent parser (``parents=[o.profile, ...]``)."""
    from ..engine.profiles import PROFILES

    def option(*args, **kw) -> argparse.ArgumentParser:
        parent = argparse.ArgumentParser(add_help=False)
        parent.add_argument(*args, **kw)
        return parent

    return SimpleNamespace(
        profile=option("--profile", choices=sorted(PROFILES), default=None,
                       help="model size and budget (default: $MUSICTX_PROFILE, else gpu with CUDA, else cpu; "
                            "paper: the recipe of chapter 11)"),
        device=option("--device", type=device_arg, default=None,
                      help="cuda, cuda:N, mps or cpu (default: $MUSICTX_DEVICE, else the best available)"),
        cpu=option("--device", type=device_arg, default="cpu", help="cuda, cuda:N, mps or cpu (default cpu)"),
        data=option("--data", default=None,
                    help="data set: 'chorales' (embedded, default), 'jsb' (official split, downloaded), a path, "
                         "or piano:giantmidi (the shared piano sample's versions, chapter 13)"),
        jsb=option("--data", default="jsb", help="'jsb' (the official split, downloaded once and sha256-checked; "
                                                 "the default) or the path of a local Jsb16thSeparated.json"),
        quiet=option("--quiet", action="store_true", help="no progress bars"),
        note=option("--note", default=None, help="a line of provenance stored in what is written (how the runs "
                                                 "were made, when not by this command alone)"),
    )


# ---------------------------------------------------------------- checks before any work

def default_device() -> torch.device:
    """``pick_device()``, with a clear error for a bad ``MUSICTX_DEVICE``."""
    from .. import settings
    from ..device import pick_device

    if settings.device() is not None:
        try:
            device_arg(settings.device())
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"MUSICTX_DEVICE={settings.device()!r}: {e}") from None
    return pick_device()


def check_writable(path: str, what: str, directory: bool = False) -> Path:
    """Fail early, before any work, where ``path`` (a file, or a directory) cannot be written."""
    p = Path(path)
    if directory and p.exists() and not p.is_dir():
        raise ValueError(f"{what} {p} exists and is not a directory")
    if not directory and p.is_dir():
        raise ValueError(f"{what} {p} is a directory; give a file name")
    anc = p if directory else p.parent
    while not anc.exists() and anc != anc.parent:        # the first ancestor that exists
        anc = anc.parent
    if not anc.is_dir():
        raise ValueError(f"cannot write {what} {p}: {anc} is a file, not a directory")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write {what} {p}: {anc} is not writable")
    return p


def jsb_data(a: argparse.Namespace):
    """``--data`` of the commands that read the official split only: 'jsb', or a local copy (sha256-checked)."""
    from .. import load_jsb

    return load_jsb() if a.data == "jsb" else load_jsb(a.data)
