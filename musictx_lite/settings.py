"""The package's settings from the environment, read here and nowhere else.

Notebook: book/using.md explains the profile and the data; the README lists
them all. Every function reads its variable when called, so a notebook or a
test may set one at any time; an empty value counts as unset.

    MUSICTX_PROFILE      smoke | cpu | gpu | paper: the profile (default: gpu with CUDA, else cpu)
    MUSICTX_DEVICE       cuda, cuda:N, mps or cpu (default: the best available)
    MUSICTX_DATA         chorales (embedded, default), jsb (the official split), or a path
    MUSICTX_JSB_PATH     a local copy of the official JSB split (default: download it)
    MUSICTX_CACHE        where downloads and records go (default ~/.cache/musictx_lite)
    MUSICTX_PROGRESS     0 turns the training progress bars off (the book build does)
    MUSICTX_LEADERBOARD  where chapters record their models' NLLs (default: under the cache)
    MUSICTX_WIDGETS      live | static: how the widgets draw (default: by where they run)
    MUSICTX_RELATIVE     skew | chunked | flex: how relative global attention is computed
                         (default: chunked on a CPU, skew elsewhere; chapter 8)
    MUSICTX_COMMIT       the commit of a working tree copied without its git history, for the
                         records' provenance (git's answer wins where there is one)

and the three that ``torchrun`` sets for each process it starts (the appendix on multi-GPU training):

    RANK, LOCAL_RANK, WORLD_SIZE   this process's rank, its rank on its machine, the number of ranks
"""
from __future__ import annotations

import os
from pathlib import Path

WIDTH = 88                      # the book's column: no line the package prints for a page is wider


def _get(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def profile() -> str | None:
    return _get("MUSICTX_PROFILE")


def device() -> str | None:
    return _get("MUSICTX_DEVICE")


def data() -> str:
    return _get("MUSICTX_DATA") or "chorales"


def commit() -> str | None:
    """The commit a copy of the working tree without its git history was made from (a borrowed GPU machine)."""
    return _get("MUSICTX_COMMIT")


def jsb_path() -> str | None:
    return _get("MUSICTX_JSB_PATH")


def piano_path() -> str | None:
    return _get("MUSICTX_PIANO_PATH")


def cache_dir() -> Path:
    return Path(_get("MUSICTX_CACHE") or Path.home() / ".cache" / "musictx_lite")


def progress() -> bool:
    return _get("MUSICTX_PROGRESS") != "0"


def leaderboard_dir() -> str | None:
    return _get("MUSICTX_LEADERBOARD")


WIDGETS = "MUSICTX_WIDGETS"


def widgets() -> str:
    return (_get(WIDGETS) or "").lower()


def relative() -> str | None:
    return _get("MUSICTX_RELATIVE")


def distributed() -> tuple[int, int, int] | None:
    """(rank, local rank, world size) under ``torchrun``; None when WORLD_SIZE is not set."""
    size = _get("WORLD_SIZE")
    if size is None:
        return None
    try:
        return int(_get("RANK") or 0), int(_get("LOCAL_RANK") or 0), int(size)
    except ValueError:
        raise ValueError(f"RANK, LOCAL_RANK and WORLD_SIZE must be integers, got {_get('RANK')!r}, "
                         f"{_get('LOCAL_RANK')!r} and {size!r}") from None
