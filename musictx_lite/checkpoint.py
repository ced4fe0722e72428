"""The checkpoint format: what ``train`` writes into a run directory, and how it is read back.

Notebook: book/using.md (resuming a run, shipped models). ``engine.callbacks.Checkpoints`` writes a run's
checkpoints, ``study.hub.export`` a shipped model's, both with ``write_checkpoint``; ``read_checkpoint``
reads them (``models.load_checkpoint`` rebuilds a model from one). A checkpoint is a dict of plain tensors
and numbers, read with ``torch.load(weights_only=True)``: no code runs when it is loaded. Parameter names
are part of the format, so old checkpoints keep loading.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from .files import atomic_write

CKPT = "ckpt.pt"                    # a run directory's checkpoint
CKPT_KEYS = ("model_name", "model_config", "train_config", "model", "step")
# Names a model's configuration had before: checkpoints and records written then still load.
RENAMED = {"block_size": "context"}


def checkpoint_file(path: str | os.PathLike) -> Path:
    """The checkpoint file of ``path``: a run directory's ``ckpt.pt``, or ``path`` itself."""
    path = Path(path)
    return path / CKPT if path.is_dir() else path


def upgrade_config(config: dict) -> dict:
    """A model configuration (as a dict) with the names of today: ``block_size`` is now ``context``."""
    return {RENAMED.get(k, k): v for k, v in config.items()}


def write_checkpoint(path: str | os.PathLike, state: dict) -> Path:
    """Write ``state`` (with at least ``CKPT_KEYS``) to ``path`` atomically: the previous file survives any
    failure. Returns the path."""
    missing = [k for k in CKPT_KEYS if k not in state]
    if missing:
        raise ValueError(f"a checkpoint needs {list(CKPT_KEYS)}; this one lacks {missing}")
    return atomic_write(path, lambda tmp: torch.save(state, tmp))


def read_checkpoint(path: str | os.PathLike, device: torch.device | str = "cpu") -> dict:
    """The contents of a checkpoint written by ``train`` (a run directory or its ckpt.pt); clear errors otherwise."""
    path = checkpoint_file(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        ck = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # pickle, zip and torch raise many types for bytes that are not a checkpoint
        # (torch's own message suggests weights_only=False, which would run arbitrary code: not repeated here)
        raise ValueError(f"{path} is not a musictx_lite checkpoint: torch.load cannot read it "
                         f"({type(e).__name__})") from e
    if not isinstance(ck, dict) or not all(k in ck for k in CKPT_KEYS):
        raise ValueError(f"{path} is not a musictx_lite checkpoint: it lacks "
                         f"{[k for k in CKPT_KEYS if not isinstance(ck, dict) or k not in ck]}")
    ck["model_config"] = upgrade_config(ck["model_config"])
    return ck
