"""Distillation: one model trained on the averaged predictions of several trained models, its
teachers (Hinton, Vinyals and Dean 2015), the last step of the paper-level recipe.

Notebook: notebooks/11_paper.ipynb (chapter 11, part 2)

On JSB the models of one recipe disagree a lot: seven relative decoders that each score
about 0.35 nats/token on the validation split score 0.31 when their probabilities are
averaged. A student trained to predict that average, rather than the one note Bach
wrote, learns which other notes were nearly as likely; it keeps much of the ensemble's
gain with the size and speed of one model.

``teacher_table`` scores every training chorale, in every transposition the recipe
uses, with each teacher (the whole-piece evaluation's sliding window) and keeps the
teachers' mean probabilities. ``SoftCrops`` draws the same crops as ``tasks.Crops``
and adds a target distribution to each token: ``weight`` times the teachers' mean
plus ``1 - weight`` times the one-hot target. The loop (``training.train`` with
``TrainConfig.teachers``) minimises the cross-entropy against it; validation NLL
stays the ordinary one.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..checkpoint import checkpoint_file, read_checkpoint
from ..files import atomic_write
from ..io.data import Piece
from ..io.tokens import PAD, VOCAB_SIZE, encode
from ..models.tasks import Crops, shift_range, transposed

CACHE = "teachers.pt"


def load_teacher(path: str | os.PathLike, device: torch.device | str = "cpu") -> nn.Module:
    """A trained model from a run directory or checkpoint, with its best weights where the run kept them."""
    from ..models.config import ModelConfig
    from ..models.registry import build_model

    ck = read_checkpoint(path, device)
    model = build_model(ck["model_name"], ModelConfig(**ck["model_config"]))
    model.load_state_dict(ck.get("best") or ck["model"])
    return model.float().to(device).eval()


@torch.no_grad()
def piece_probs(model: nn.Module, seqs: torch.Tensor) -> torch.Tensor:
    """Next-token probabilities (B, N - 1, V) of token sequences (B, N) of one length (a piece in several
    keys), each target predicted from the window that ``tasks.evaluate_nll`` scores it with (a stride of
    half the context)."""
    ctx = model.context
    stride = max(4, ctx // 2 // 4 * 4)
    device = next(model.parameters()).device
    n = seqs.shape[1]
    probs = torch.empty(len(seqs), n - 1, VOCAB_SIZE)
    scored = 0                                                  # targets 1 .. scored are done
    for start in range(0, n - 1, stride):
        x = seqs[:, start: min(start + ctx, n - 1)].to(device)                # (B, T)
        p = F.softmax(model(x).float(), -1).cpu()                              # (B, T, V)
        probs[:, scored: start + x.shape[1]] = p[:, scored - start:]
        scored = start + x.shape[1]
        if scored >= n - 1:
            break
    return probs


def _key(teachers: list[str], pieces: list[Piece]) -> str:
    h = hashlib.sha256()
    for t in teachers:
        f = checkpoint_file(t)
        h.update(f"{Path(t).resolve()}:{f.stat().st_size}:{f.stat().st_mtime_ns};".encode())
    for p in pieces:
        h.update(encode(p.pitches).tobytes())
    return h.hexdigest()


def teacher_table(teachers: list[str], pieces: list[Piece], device: torch.device | str = "cpu",
                  cache: str | os.PathLike | None = None, say=print) -> list[torch.Tensor]:
    """For each piece, a float16 tensor (n_shifts, len - 1, V): the teachers' mean next-token probabilities
    in each transposition ``shift_range`` allows, lowest first. ``cache`` (a file) keeps them between runs,
    keyed by the teachers' files and the pieces."""
    if not teachers:
        raise ValueError("distillation needs at least one teacher (a run directory or checkpoint)")
    key = _key(teachers, pieces)
    if cache is not None and Path(cache).exists():
        saved = torch.load(cache, weights_only=True)
        if saved.get("key") == key:
            return saved["tables"]
    seqs = [torch.as_tensor(encode(p.pitches)) for p in pieces]
    shifts = [shift_range(p.pitches) for p in pieces]
    tables = [torch.zeros(hi - lo + 1, len(s) - 1, VOCAB_SIZE) for s, (lo, hi) in zip(seqs, shifts)]
    for n, path in enumerate(teachers):
        say(f"teacher {n + 1}/{len(teachers)}: {path}")
        model = load_teacher(path, device)
        for s, (lo, hi), table in zip(seqs, shifts, tables):
            table += piece_probs(model, torch.stack([transposed(s, sh) for sh in range(lo, hi + 1)])) \
                / len(teachers)
    tables = [t.half() for t in tables]
    if cache is not None:
        Path(cache).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(Path(cache), lambda tmp: torch.save({"key": key, "tables": tables}, tmp))
    return tables


def soft_crops(model: nn.Module, data, cfg, device: torch.device | str, out_dir: str | os.PathLike | None,
               seed: int, say=None) -> "SoftCrops":
    """The crops ``train`` draws for ``cfg.teachers``: ``SoftCrops`` of ``data.train`` from the teachers' table,
    which is cached in ``out_dir`` (where given)."""
    from ..models.tasks import NEXT_TOKEN

    if getattr(model, "task", None) is not NEXT_TOKEN:
        raise ValueError("teachers distil next-token models only; this model's task is another")
    cache = Path(out_dir) / CACHE if out_dir is not None else None
    tables = teacher_table(list(cfg.teachers), data.train, device, cache, say=say or (lambda *a: None))
    return SoftCrops(data.train, model.cfg.context, tables, cfg.teacher_weight, seed, cfg.transpose)


class SoftCrops(Crops):
    """``tasks.Crops`` (the same crops from the same seed) with a target distribution per token:
    ``weight`` times the teachers' mean probabilities plus ``1 - weight`` times the one-hot target."""

    def __init__(self, pieces: list[Piece], length: int, tables: list[torch.Tensor], weight: float,
                 seed: int = 0, transpose: bool = False):
        super().__init__(pieces, length, seed, transpose)
        if not 0 < weight <= 1:
            raise ValueError(f"the teachers' weight must be in (0, 1], got {weight}")
        self.tables, self.weight = tables, weight

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x, y, soft): x and y (B, length) as ``Crops.batch``, soft (B, length, V), zero where y is PAD."""
        xy = torch.full((batch_size, self.length + 1), PAD, dtype=torch.long)
        soft = torch.zeros(batch_size, self.length, VOCAB_SIZE)
        for b, (i, k, shift) in enumerate(self.draw(batch_size)):
            chunk = transposed(self.seqs[i][4 * k: 4 * k + self.length + 1], shift)
            xy[b, : len(chunk)] = chunk
            rows = self.tables[i][shift - self.shifts[i][0], 4 * k: 4 * k + len(chunk) - 1]   # (T, V)
            soft[b, : len(rows)] = self.weight * rows.float()
        x, y = xy[:, :-1], xy[:, 1:]
        hard = (1 - self.weight) * F.one_hot(y.clamp(min=0) * (y != PAD), VOCAB_SIZE)
        soft += hard * (y != PAD)[..., None]                    # (B, T, V)
        return x, y, soft


@torch.no_grad()
def ensemble_nll(teachers: list[str], pieces: list[Piece], device: torch.device | str = "cpu") -> float:
    """NLL (nats per token, the whole-piece evaluation) of the teachers' mean probabilities on ``pieces``:
    what the student is trained to approach."""
    seqs = [torch.as_tensor(encode(p.pitches)) for p in pieces]
    mean = [torch.zeros(len(s) - 1) for s in seqs]                 # the mean probability of each true token
    for path in teachers:
        model = load_teacher(path, device)
        for s, m in zip(seqs, mean):
            m += piece_probs(model, s[None])[0, torch.arange(len(s) - 1), s[1:]] / len(teachers)
    return -sum(m.log().sum().item() for m in mean) / sum(len(m) for m in mean)


def teachers_summary(teachers: list[str], pieces: list[Piece], device: torch.device | str = "cpu") -> dict:
    """What a distilled model's record says of its teachers: ``teachers``, each run's own NLL on ``pieces``
    (the validation split), ``teacher_steps``, the steps each trained, and ``teachers_valid_nll``, their
    mean predictions' NLL."""
    from ..models.tasks import evaluate_nll

    return {"teachers": {t: evaluate_nll(load_teacher(t, device), pieces) for t in teachers},
            "teacher_steps": {t: int(read_checkpoint(t)["step"]) for t in teachers},
            "teachers_valid_nll": ensemble_nll(teachers, pieces, device)}
