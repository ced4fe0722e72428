"""One training loop for every chapter: AdamW, warmup + cosine, clipping, periodic
validation, checkpoints and exact resume; for the paper-level recipe of chapter 11 also
transposition, early stopping on validation NLL with the best weights kept, bf16 on CPUs, and
distillation from trained teachers (``distil``);
gradient accumulation, and several processes under torchrun (``distributed``, the appendix).

Notebook: notebooks/01_attention_in_rnns.ipynb (first used there).

The loop knows no model and no task: ``model.task`` supplies the batches and
the evaluator (``tasks.NEXT_TOKEN``, or chapter 2's fill-in task), and the loss
is the mean NLL of the non-PAD targets, in nats.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from .. import settings
from ..checkpoint import CKPT, read_checkpoint
from ..io.data import Splits, atomic_write
from ..device import pick_device
from ..models.tasks import NEXT_TOKEN, token_nll
from ..io.tokens import PAD
from . import distributed


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
    transpose: bool = False            # augment: shift each crop by a random in-range transposition
    keep_best: bool = False            # end with the weights of the best periodic evaluation
    patience: int | None = None        # stop after this many evaluations without a new best (None: never)
    cpu_bf16: bool = False             # bf16 autocast on a CPU that has it in hardware (CUDA always uses AMP)
    micro_batch: int | None = None     # crops per forward pass, the gradients accumulated (None: a rank's batch)
    teachers: tuple[str, ...] = ()     # distil (``distil``): run directories of trained models whose mean ...
    teacher_weight: float = 1.0        # ... probabilities, this much of each target (the rest: the one-hot target)

    def __post_init__(self) -> None:
        for k in ("batch_size", "max_steps", "eval_every", "ckpt_every"):
            if not isinstance(getattr(self, k), int) or getattr(self, k) < 1:
                raise ValueError(f"{k} must be a positive integer, got {getattr(self, k)!r}")
        if self.warmup_steps < 0 or (self.eval_pieces is not None and self.eval_pieces < 1):
            raise ValueError("warmup_steps must be >= 0 and eval_pieces None or >= 1")
        if self.micro_batch is not None and (not isinstance(self.micro_batch, int) or self.micro_batch < 1):
            raise ValueError(f"micro_batch must be None or a positive integer, got {self.micro_batch!r}")
        # a list read from JSON resumes as well; one run named alone is one teacher
        self.teachers = (str(self.teachers),) if isinstance(self.teachers, (str, os.PathLike)) else \
            tuple(str(t) for t in self.teachers)
        if self.teachers and not 0 < self.teacher_weight <= 1:
            raise ValueError(f"teacher_weight must be in (0, 1], got {self.teacher_weight!r}")
        if self.patience is not None and (not isinstance(self.patience, int) or self.patience < 1):
            raise ValueError(f"patience must be None or a positive integer, got {self.patience!r}")
        if not (self.lr > 0 and 0 <= self.min_lr_ratio <= 1 and self.weight_decay >= 0 and self.grad_clip > 0):
            raise ValueError(f"need lr > 0, 0 <= min_lr_ratio <= 1, weight_decay >= 0, grad_clip > 0; got "
                             f"lr={self.lr}, min_lr_ratio={self.min_lr_ratio}, weight_decay={self.weight_decay}, "
                             f"grad_clip={self.grad_clip}")


@dataclass
class History:
    """What a run measured, for the chapters' plots."""

    step: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    eval_step: list[int] = field(default_factory=list)
    valid_nll: list[float] = field(default_factory=list)
    eval_seconds: list[float] = field(default_factory=list)   # training seconds at each eval (chapter 11)
    seconds: float = 0.0               # training time: evaluations excluded, checkpoints included
    tokens: int = 0
    best_step: int = 0                 # the step of the lowest periodic valid NLL so far (0: none yet)
    best_nll: float = math.inf
    stopped_early: bool = False        # patience ran out before max_steps

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


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (AVX-512 or AMX, as oneDNN asks). On an AVX2 CPU oneDNN
    emulates it: a step of the recipe's relative model took 9x as long as in float32 on a 2-core AVX2 EPYC,
    and its LSTM has no bf16 kernel there at all."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        return bool(check()) if check is not None else False
    except RuntimeError:
        return False


def precision(device: torch.device | str, cpu_bf16: bool = False) -> str:
    """What ``train`` computes in on ``device``: 'bfloat16', 'float16' (autocast, float32 weights) or 'float32'.

    On CUDA, bf16 from Ampere on (compute capability 8.0), whose tensor cores have it; fp16 with a gradient
    scaler before that. A T4 (7.5, Colab's free GPU) answers yes to ``torch.cuda.is_bf16_supported()``, but
    emulates bf16 without tensor cores: slower than fp16, which its tensor cores do compute."""
    device = torch.device(device)
    if device.type == "cpu":
        return "bfloat16" if cpu_bf16 and cpu_has_bf16() else "float32"
    if device.type != "cuda" or not torch.cuda.is_available():
        return "float32"
    major, _ = torch.cuda.get_device_capability(device)
    return "bfloat16" if major >= 8 else "float16"


def _amp(device: torch.device, cpu_bf16: bool = False):
    """Mixed precision on CUDA (bf16 from Ampere on, else fp16 with a grad scaler: ``precision``); bf16 on a CPU
    with ``cpu_bf16`` where the CPU has it (about 1.6x faster on an AVX512-BF16 CPU; the weights stay
    float32), float32 on other CPUs, where bf16 is emulated and slower."""
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(precision(device, cpu_bf16))
    if dtype is None:
        return contextlib.nullcontext, None
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    kind = torch.device(device).type
    return (lambda: torch.autocast(kind, dtype=dtype)), scaler


def _save(path: Path, state: dict) -> None:
    """Write a checkpoint atomically: the previous one survives any failure."""
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def train(model: nn.Module, data: Splits, cfg: TrainConfig, out_dir: str | os.PathLike | None = None,
          device: torch.device | str | None = None, progress: bool = True, on_step=None) -> History:
    """Train ``model`` on ``data.train`` for its task (``model.task``); return its History.

    With ``out_dir``, a checkpoint is written every ``cfg.ckpt_every`` steps, at
    the end, and on Ctrl-C; a later call with the same ``out_dir`` resumes from
    it and reaches exactly the state an uninterrupted run would have reached.
    A non-finite loss stops the run with FloatingPointError and leaves the last
    good checkpoint untouched. With ``cfg.keep_best`` the model ends with the weights
    of its best evaluation (``hist.best_step``), and ``cfg.patience`` stops the run
    after that many evaluations without a new best. With ``cfg.teachers`` the targets are their mean
    predictions (``distil.SoftCrops``, computed once and cached in ``out_dir``) and the loss is the
    cross-entropy against them. ``on_step(step, loss)`` is called after each step.
    ``progress`` shows a bar and prints a line per evaluation; ``progress=False`` trains silently.

    Inside a process group of several ranks (``distributed.setup``, under torchrun) every rank
    runs this function: each takes its share of the global batch ``cfg.batch_size``, the gradients
    are averaged (DistributedDataParallel), and rank 0 alone evaluates, logs and checkpoints.
    """
    task = getattr(model, "task", None)
    if task is None:
        raise TypeError(f"{type(model).__name__} names no task: give it a `task` attribute, "
                        f"such as musictx_lite.models.tasks.NEXT_TOKEN")
    w = distributed.world()
    # a model from build_model() knows its registry name; any other model is stored by its class
    meta = {"model_name": getattr(model, "name", ""), "model_class": type(model).__qualname__,
            "model_config": model.cfg.to_dict(), "train_config": asdict(cfg)}
    if w.size > 1:                                   # before anything else: a mismatch fails on every rank
        distributed.agree({**meta, "world": w.size})
    if cfg.batch_size % w.size:
        raise ValueError(f"the global batch of {cfg.batch_size} crops does not split over {w.size} ranks; "
                         f"choose a batch size divisible by {w.size}")
    per_rank = cfg.batch_size // w.size
    micro = cfg.micro_batch or per_rank
    if per_rank % micro:
        raise ValueError(f"micro_batch {micro} does not divide the {per_rank} crops of each rank's batch")
    device = torch.device(device) if device is not None else pick_device()
    model.to(device).train()
    seed = distributed.rank_seed(cfg.seed, w.rank)
    torch.manual_seed(seed)
    if cfg.transpose and task is not NEXT_TOKEN:
        raise ValueError("transpose=True augments next-token crops only; this model's task is another")
    if cfg.teachers:                                 # distillation: targets from the teachers' mean (distil)
        from .distil import CACHE, SoftCrops, teacher_table
        if task is not NEXT_TOKEN:
            raise ValueError("teachers distil next-token models only; this model's task is another")
        cache = Path(out_dir) / CACHE if out_dir is not None and w.main else None
        tables = teacher_table(list(cfg.teachers), data.train, device, cache,
                               say=print if progress and w.main else (lambda *a: None))
        batches = SoftCrops(data.train, model.cfg.context, tables, cfg.teacher_weight, seed, cfg.transpose)
    else:
        batches = (task.sampler(data.train, model.cfg.context, seed, transpose=True) if cfg.transpose
                   else task.sampler(data.train, model.cfg.context, seed))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99))
    autocast, scaler = _amp(device, cfg.cpu_bf16)
    hist, step, best = History(), 0, None           # best: the weights at hist.best_step (keep_best)

    path = Path(out_dir) / CKPT if out_dir is not None else None
    if path is not None:
        if w.main:
            path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            ck = read_checkpoint(path, device)
            saved = {k: ck.get(k) for k in meta}
            saved["train_config"] = {**{f.name: f.default for f in fields(TrainConfig)}, **ck["train_config"]}
            if saved != meta:
                raise ValueError(f"{path} was written by a different model or config; "
                                 f"use another out_dir or delete it")
            if ck.get("world", 1) != w.size:
                raise ValueError(f"{path} was written by {ck.get('world', 1)} process(es); resume it with as many "
                                 f"(now {w.size})")
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            if scaler is not None and ck.get("scaler"):
                scaler.load_state_dict(ck["scaler"])
            rng_state, batch_rng, cuda_rng = ck["rank_rngs"][w.rank] if w.size > 1 else \
                (ck["rng"], ck["batch_rng"], ck.get("cuda_rng"))
            torch.set_rng_state(rng_state.cpu())                # map_location put them on the device
            batches.gen.set_state(batch_rng.cpu())
            if device.type == "cuda" and cuda_rng is not None:
                torch.cuda.set_rng_state(cuda_rng.cpu(), device)   # dropout on the GPU
            hist, step = History(**ck["history"]), ck["step"]
            best = ck.get("best")
    net = model
    if w.size > 1:                                   # averages the gradients over the ranks in backward()
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def rng() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return torch.get_rng_state(), batches.gen.get_state(), cuda

    def checkpoint(snapshot) -> None:
        if path is None:
            return
        rngs = distributed.gather(snapshot) if w.size > 1 else [snapshot]
        if w.main:
            _save(path, {**meta, "model": model.state_dict(), "optimizer": opt.state_dict(),
                         "scaler": scaler.state_dict() if scaler else None, "step": step,
                         "history": asdict(hist), "rng": snapshot[0], "batch_rng": snapshot[1],
                         "cuda_rng": snapshot[2], "best": best, "world": w.size,
                         "rank_rngs": rngs if w.size > 1 else None})

    val = data.valid if cfg.eval_pieces is None else data.valid[: cfg.eval_pieces]
    snapshot = rng()
    bar = _progress(progress and w.main, step, cfg.max_steps)
    t0 = time.perf_counter() - hist.seconds
    try:
        while step < cfg.max_steps and not hist.stopped_early:
            lr = lr_at(step, cfg)
            for g in opt.param_groups:
                g["lr"] = lr
            x, y, *soft = (t.to(device) for t in batches.batch(per_rank))   # this rank's crops (soft: distil)
            n_tokens = (y != PAD).sum()                              # ... and the whole batch's targets
            if w.size > 1:
                torch.distributed.all_reduce(n_tokens)
            opt.zero_grad(set_to_none=True)
            loss = torch.zeros((), device=device)
            for i in range(0, per_rank, micro):                      # gradients accumulate over micro-batches
                last = i + micro == per_rank
                with (net.no_sync() if w.size > 1 and not last else contextlib.nullcontext()), autocast():
                    # the mean over every target of the global batch: DDP averages over the ranks
                    part = token_nll(net, x[i:i + micro], y[i:i + micro], *(t[i:i + micro] for t in soft)) \
                        / (n_tokens / w.size)
                if scaler is not None:
                    scaler.scale(part).backward()
                else:
                    part.backward()
                loss += part.detach()
            if w.size > 1:
                torch.distributed.all_reduce(loss)
                loss /= w.size
            if not torch.isfinite(loss):                             # the same verdict on every rank
                where = f"the last good checkpoint ({path}, step {_ckpt_step(path)}) is kept" if path else \
                    "no checkpoint was written (no out_dir)"
                raise FloatingPointError(f"loss is {loss.item()} at step {step}; training stopped and {where}")
            if scaler is not None:
                scaler.unscale_(opt)
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
            hist.tokens += int(n_tokens)
            if step % cfg.eval_every == 0 or step == cfg.max_steps:
                t_eval = time.perf_counter()
                nll = task.evaluate(model, data.valid if step == cfg.max_steps else val) if w.main else None
                hist.valid_nll.append(distributed.from_main(nll) if w.size > 1 else nll)
                t0 += time.perf_counter() - t_eval                     # evaluating is not training time
                hist.eval_step.append(step)
                hist.eval_seconds.append(time.perf_counter() - t0)
                if hist.valid_nll[-1] < hist.best_nll:
                    hist.best_nll, hist.best_step = hist.valid_nll[-1], step
                    if cfg.keep_best:
                        best = {k: v.detach().clone() for k, v in model.state_dict().items()}
                elif cfg.patience is not None and \
                        sum(s > hist.best_step for s in hist.eval_step) >= cfg.patience:
                    hist.stopped_early = True                          # checkpointed below, so a resume stops too
                if progress and w.main:                                # progress=False: silent
                    bar.write(f"step {step:5d}  train loss {loss.item():.3f}  valid NLL {hist.valid_nll[-1]:.3f}")
            hist.seconds = time.perf_counter() - t0
            snapshot = rng()
            if step % cfg.ckpt_every == 0 or step == cfg.max_steps or hist.stopped_early:
                checkpoint(snapshot)
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
            if on_step is not None:
                on_step(step, loss.item())
    except KeyboardInterrupt:
        if w.size > 1:    # the other ranks may be anywhere in the step: no collective now, the last checkpoint stays
            bar.write(f"interrupted at step {step}" + (f"; resume from {path} (step {_ckpt_step(path)})"
                                                        if path and w.main else ""))
        else:
            checkpoint(snapshot)   # the state after the last complete step
            bar.write(f"interrupted at step {step}" + (f"; resume from {path}" if path else ""))
        raise
    finally:
        bar.close()
    if cfg.keep_best and best is not None:
        model.load_state_dict(best)
    return hist


def _ckpt_step(path: Path | None):
    if path is None or not path.exists():
        return None
    return read_checkpoint(path)["step"]


def _progress(enabled: bool, start: int, total: int):
    """A tqdm bar on stderr; off where ``MUSICTX_PROGRESS=0`` (the book build sets it: pages get no bar lines)."""
    from tqdm import tqdm

    enabled = enabled and settings.progress()
    return tqdm(total=total, initial=start, disable=not enabled, file=sys.stderr, mininterval=10,
                ncols=80, desc="training")
