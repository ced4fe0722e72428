"""One training loop for every chapter: crops, AdamW, warmup + cosine, clipping,
validation NLL on whole pieces, checkpoints and exact resume.

Notebook: notebooks/01_attention_in_rnns.ipynb (first used there).

Loss and NLL are in nats per token, averaged over every pitch/rest token of
the pieces (BOS and padding are never targets), so every model in the book and
the baselines of chapter 0 are measured on the same targets.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig
from .data import Piece, Splits
from .tokens import PAD, encode

CKPT = "ckpt.pt"


@dataclass
class TrainConfig:
    """How to train: batch of random crops, optimiser, schedule and bookkeeping."""

    batch_size: int = 32
    max_steps: int = 600
    lr: float = 4e-3
    min_lr_ratio: float = 0.1          # cosine decays to lr * min_lr_ratio
    warmup_steps: int = 50
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_every: int = 150
    eval_pieces: int | None = None     # valid pieces for the periodic evals (None: all); the final eval uses all
    ckpt_every: int = 150
    seed: int = 0


@dataclass
class History:
    """What a run measured, for the chapters' plots."""

    step: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    eval_step: list[int] = field(default_factory=list)
    valid_nll: list[float] = field(default_factory=list)
    seconds: float = 0.0
    tokens: int = 0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / max(self.seconds, 1e-9)

    @property
    def final_nll(self) -> float:
        return self.valid_nll[-1]


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to ``cfg.lr``, then cosine decay to ``cfg.lr * cfg.min_lr_ratio``."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


class Crops:
    """Random training crops of ``length`` tokens, starting on a step boundary.

    A crop's input starts at token 4k of ``encode(piece)`` (BOS when k = 0), so
    input position p always holds voice (p - 1) mod 4, as in whole-piece evaluation.
    """

    def __init__(self, pieces: list[Piece], length: int, seed: int = 0):
        self.length = length
        self.seqs = [torch.as_tensor(encode(p.pitches)) for p in pieces]
        self.n_starts = torch.tensor([max(1, (len(s) - 1 - length) // 4 + 1) for s in self.seqs], dtype=torch.float)
        self.gen = torch.Generator().manual_seed(seed)

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y), each (B, length); y is x shifted by one, PAD beyond a piece's end."""
        which = torch.multinomial(self.n_starts, batch_size, replacement=True, generator=self.gen)
        xy = torch.full((batch_size, self.length + 1), PAD, dtype=torch.long)
        for b, i in enumerate(which.tolist()):
            k = int(torch.randint(int(self.n_starts[i]), (1,), generator=self.gen))
            chunk = self.seqs[i][4 * k: 4 * k + self.length + 1]
            xy[b, : len(chunk)] = chunk
        return xy[:, :-1], xy[:, 1:]


@contextlib.contextmanager
def evaluating(model: nn.Module):
    """Put ``model`` in eval mode for a block, and restore its mode afterwards, even on error."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def token_nll(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Summed next-token NLL (nats) of targets ``y`` (B, T) given inputs ``x`` (B, T); PAD ignored."""
    logits = model(x)                                                   # (B, T, V)
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=PAD, reduction="sum")


@torch.no_grad()
def evaluate_nll(model: nn.Module, pieces: list[Piece], device: torch.device | str | None = None,
                 batch_size: int = 16) -> float:
    """Validation NLL in nats per token over whole pieces.

    Models with a finite ``context`` are scored with a sliding window (stride
    half the context), so every token sees at least half a context of history.
    """
    device = device or next(model.parameters()).device
    seqs = sorted((torch.as_tensor(encode(p.pitches)) for p in pieces), key=len)
    ctx = getattr(model, "context", None)
    total, count = 0.0, 0
    if ctx is None:
        with evaluating(model):
            for i in range(0, len(seqs), batch_size):
                group = seqs[i: i + batch_size]
                xy = nn.utils.rnn.pad_sequence(group, batch_first=True, padding_value=PAD).to(device)
                total += token_nll(model, xy[:, :-1], xy[:, 1:]).item()
                count += sum(len(s) - 1 for s in group)
    else:                                               # windows of the context, scored in batches
        stride = max(4, ctx // 2 // 4 * 4)
        xs, ys = [], []
        for s in seqs:
            scored = 0                                  # targets s[1 : 1 + scored] are done
            for start in range(0, len(s) - 1, stride):
                y = s[start + 1: start + ctx + 1].clone()
                y[: scored - start] = PAD               # already scored by an earlier window
                x = s[start: start + len(y)]
                xs.append(F.pad(x, (0, ctx - len(x)), value=PAD))
                ys.append(F.pad(y, (0, ctx - len(y)), value=PAD))
                scored = start + len(y)
                if scored >= len(s) - 1:
                    break
            count += len(s) - 1
        X, Y = torch.stack(xs).to(device), torch.stack(ys).to(device)      # (n_windows, ctx)
        with evaluating(model):
            for i in range(0, len(X), 4 * batch_size):
                total += token_nll(model, X[i: i + 4 * batch_size], Y[i: i + 4 * batch_size]).item()
    return total / count


@torch.no_grad()
def evaluate_prefix_nll(model: nn.Module, pieces: list[Piece], max_tokens: int = 128) -> float:
    """NLL per token when each token is predicted from its prefix alone, as at generation time.

    For a causal model this equals ``evaluate_nll`` on the same tokens; a model
    that peeks at the future (chapter 3) is found out. One forward pass per
    token: use a few pieces and a short ``max_tokens``.
    """
    device = next(model.parameters()).device
    total, count = 0.0, 0
    with evaluating(model):
        for p in pieces:
            s = torch.as_tensor(encode(p.pitches)[: max_tokens + 1], device=device)
            for t in range(1, len(s)):
                logits = model(s[None, :t])[0, -1].float()              # the prefix s[0 .. t-1] only
                total -= F.log_softmax(logits, -1)[s[t]].item()
                count += 1
    return total / count


def _amp(device: torch.device):
    """Mixed precision on CUDA (bf16 where supported, else fp16 with a grad scaler)."""
    if device.type != "cuda":
        return contextlib.nullcontext, None
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    return (lambda: torch.autocast("cuda", dtype=dtype)), scaler


def _save(path: Path, state: dict) -> None:
    """Write a checkpoint atomically: the previous one survives any failure."""
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def train(model: nn.Module, data: Splits, cfg: TrainConfig, out_dir: str | os.PathLike | None = None,
          model_name: str = "", device: torch.device | str | None = None, progress: bool = True,
          on_step=None) -> History:
    """Train ``model`` on ``data.train`` crops; return its History.

    With ``out_dir``, a checkpoint is written every ``cfg.ckpt_every`` steps, at
    the end, and on Ctrl-C; a later call with the same ``out_dir`` resumes from
    it and reaches exactly the state an uninterrupted run would have reached.
    A non-finite loss stops the run with FloatingPointError and leaves the last
    good checkpoint untouched. ``on_step(step, loss)`` is called after each step.
    """
    from .models import MODELS
    from .profiles import pick_device

    model_name = model_name or next((k for k, v in MODELS.items() if type(model) is v), "")
    device = torch.device(device) if device is not None else pick_device()
    model.to(device).train()
    torch.manual_seed(cfg.seed)
    crops = Crops(data.train, model.cfg.block_size, cfg.seed)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99))
    autocast, scaler = _amp(device)
    hist, step = History(), 0
    meta = {"model_name": model_name, "model_config": model.cfg.to_dict(), "train_config": asdict(cfg)}

    path = Path(out_dir) / CKPT if out_dir is not None else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            ck = torch.load(path, map_location=device, weights_only=True)
            if {k: ck[k] for k in meta} != meta:
                raise ValueError(f"{path} was written by a different model or config; "
                                 f"use another out_dir or delete it")
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            if scaler is not None and ck.get("scaler"):
                scaler.load_state_dict(ck["scaler"])
            torch.set_rng_state(ck["rng"])
            crops.gen.set_state(ck["batch_rng"])
            hist, step = History(**ck["history"]), ck["step"]

    def rng() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.get_rng_state(), crops.gen.get_state()

    def checkpoint(snapshot) -> None:
        if path is not None:
            _save(path, {**meta, "model": model.state_dict(), "optimizer": opt.state_dict(),
                         "scaler": scaler.state_dict() if scaler else None, "step": step,
                         "history": asdict(hist), "rng": snapshot[0], "batch_rng": snapshot[1]})

    val = data.valid if cfg.eval_pieces is None else data.valid[: cfg.eval_pieces]
    if getattr(model, "task", "next") == "fill":            # chapter 2: fill in one hidden voice per step
        from .fill import all_steps, evaluate_fill_nll, fill_batch

        steps = all_steps(data.train)
        next_batch = lambda B: fill_batch(steps, B, crops.gen)  # noqa: E731
        evaluate = evaluate_fill_nll
    else:
        next_batch, evaluate = crops.batch, evaluate_nll
    snapshot = rng()
    bar = _progress(progress, step, cfg.max_steps)
    t0 = time.perf_counter() - hist.seconds
    try:
        while step < cfg.max_steps:
            lr = lr_at(step, cfg)
            for g in opt.param_groups:
                g["lr"] = lr
            x, y = (t.to(device) for t in next_batch(cfg.batch_size))
            with autocast():
                loss = token_nll(model, x, y) / (y != PAD).sum()
            if not torch.isfinite(loss):
                where = f"the last good checkpoint ({path}, step {_ckpt_step(path)}) is kept" if path else \
                    "no checkpoint was written (no out_dir)"
                raise FloatingPointError(f"loss is {loss.item()} at step {step}; training stopped and {where}")
            opt.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
            else:
                loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            step += 1
            hist.step.append(step)
            hist.train_loss.append(loss.item())
            hist.lr.append(lr)
            hist.tokens += int((y != PAD).sum())
            if step % cfg.eval_every == 0 or step == cfg.max_steps:
                hist.valid_nll.append(evaluate(model, data.valid if step == cfg.max_steps else val, device))
                hist.eval_step.append(step)
                bar.write(f"step {step:5d}  train loss {loss.item():.3f}  valid NLL {hist.valid_nll[-1]:.3f}")
            hist.seconds = time.perf_counter() - t0
            snapshot = rng()
            if step % cfg.ckpt_every == 0 or step == cfg.max_steps:
                checkpoint(snapshot)
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
            if on_step is not None:
                on_step(step, loss.item())
    except KeyboardInterrupt:
        checkpoint(snapshot)   # the state after the last complete step
        bar.write(f"interrupted at step {step}" + (f"; resume from {path}" if path else ""))
        raise
    finally:
        bar.close()
    return hist


def _ckpt_step(path: Path | None):
    if path is None or not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=True)["step"]


def _progress(enabled: bool, start: int, total: int):
    from tqdm import tqdm

    return tqdm(total=total, initial=start, disable=not enabled, file=sys.stderr, mininterval=10,
                ncols=80, desc="training")


def load_checkpoint(path: str | os.PathLike, device: torch.device | str = "cpu") -> tuple[nn.Module, dict]:
    """Rebuild a trained model from a run directory (or a ckpt.pt file)."""
    from .models import build_model

    path = Path(path)
    if path.is_dir():
        path = path / CKPT
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    ck = torch.load(path, map_location=device, weights_only=True)
    model = build_model(ck["model_name"], ModelConfig(**ck["model_config"]))
    model.load_state_dict(ck["model"])
    return model.to(device).eval(), ck

