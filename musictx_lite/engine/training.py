"""The training loop of every chapter: batches, forward, loss, backward, step, schedule and evaluation.

Notebook: notebooks/01_attention_in_rnns.ipynb shows ``core_train``, the plain loop, then ``train`` (first used there).

``train`` is the loop and nothing else. What a run holds (the model on its device, the optimiser, the
crops, the precision, its place among several processes) is set up by ``Run``; what a run does besides
learning (checkpoints and exact resume, early stopping with the best weights kept, the progress bar, a
function called after each step) attaches as callbacks (``callbacks``). Several processes under torchrun
(``distributed``, the appendix) and teachers (``distil``, chapter 11) change only where the crops come
from and how the gradients are averaged.

The loop knows no model and no task: ``model.task`` supplies the batches and the evaluator
(``tasks.NEXT_TOKEN``, or chapter 2's fill-in task), and the loss is the mean NLL of the non-PAD targets,
in nats.
"""
from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn

from ..device import pick_device
from ..io.data import Splits
from ..io.tokens import PAD
from ..models.tasks import token_nll
from . import distributed
from .callbacks import standard
from .precision import amp


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
    # the tokens and seconds of the first steps, a warm-up that ``tokens_per_s`` leaves out (``callbacks.Warmup``)
    warm_tokens: int = 0
    warm_seconds: float = 0.0

    def log(self, step: int, loss: float, lr: float, tokens: int) -> None:
        """Record a step: its number, training loss, learning rate and target tokens."""
        self.step.append(step)
        self.train_loss.append(loss)
        self.lr.append(lr)
        self.tokens += tokens

    def log_eval(self, step: int, nll: float, seconds: float) -> None:
        """Record an evaluation: its step, validation NLL and the training seconds so far; the best so far."""
        self.eval_step.append(step)
        self.valid_nll.append(nll)
        self.eval_seconds.append(seconds)
        if nll < self.best_nll:
            self.best_nll, self.best_step = nll, step

    @property
    def tokens_per_s(self) -> float:
        """Training speed after the warm-up: the first steps of a process pay for allocations and kernel
        choices (a first run can read several times slower than the same run again)."""
        if 0 < self.warm_seconds < self.seconds:
            return (self.tokens - self.warm_tokens) / (self.seconds - self.warm_seconds)
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


def core_train(model: nn.Module, data: Splits, cfg: TrainConfig, device=None) -> list[float]:
    """The core of ``train``: its steps in float32 on one process, nothing else; the training losses.

    Notebook: notebooks/01_attention_in_rnns.ipynb shows it before ``train``, and checks that the two reach
    the same weights. No evaluation, History, clock or callbacks; a config that asks for what only ``train``
    does (transposed crops, bf16, micro-batches, teachers) is a ValueError."""
    if cfg.transpose or cfg.cpu_bf16 or cfg.micro_batch or cfg.teachers:
        raise ValueError("core_train is the plain loop: use train for transpose, cpu_bf16, micro_batch, teachers")
    device = torch.device(device) if device is not None else pick_device()
    model.to(device).train()
    torch.manual_seed(cfg.seed)                                      # dropout's random numbers
    crops = model.task.sampler(data.train, model.cfg.context, cfg.seed)   # chapter 0's crops, seeded
    matrices = [p for p in model.parameters() if p.dim() >= 2]         # weight decay on these only
    vectors = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": matrices, "weight_decay": cfg.weight_decay},
                             {"params": vectors, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99))
    losses = []
    for step in range(cfg.max_steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)                           # warm-up, then cosine decay
        x, y = (t.to(device) for t in crops.batch(cfg.batch_size))  # (B, T) crops, targets
        loss = token_nll(model, x, y) / (y != PAD).sum()             # forward: the mean NLL
        opt.zero_grad()
        loss.backward()                                              # backward: the gradients
        nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()                                                   # AdamW's update
        losses.append(loss.item())
    return losses


def train(model: nn.Module, data: Splits, cfg: TrainConfig, out_dir: str | os.PathLike | None = None,
          device: torch.device | str | None = None, progress: bool = True, on_step=None,
          callbacks: tuple = ()) -> History:
    """Train ``model`` on ``data.train`` for its task (``model.task``); return its History.

    With ``out_dir``, checkpoints go there and a run started again resumes exactly; ``on_step(step, loss)``
    is called after each step; ``progress=False`` trains silently; ``callbacks`` come after the standard ones
    (``engine.callbacks``)."""
    run = Run(model, data, cfg, device, out_dir, say=print if progress else None)
    hooks = standard(run, out_dir, progress, on_step, *callbacks)
    hooks.fire("start", run)                                    # a checkpoint in out_dir resumes here
    run.start_clock()                                           # training seconds go on from a resume
    opt = run.opt
    try:
        while run.step < cfg.max_steps and not run.hist.stopped_early:
            lr = lr_at(run.step, cfg)                           # warm-up, then cosine decay
            for group in opt.param_groups:
                group["lr"] = lr
            x, y, *soft = run.batch()                           # (B, T) crops, targets (soft: distil)
            n_targets = run.world.sum((y != PAD).sum())         # the global batch's targets
            opt.zero_grad(set_to_none=True)
            loss = torch.zeros((), device=run.device)
            for i in range(0, len(x), run.micro):               # gradients add up over micro-batches
                part = slice(i, i + run.micro)
                with run.world.sync(run.net, last=i + run.micro == len(x)), run.autocast():
                    nll = token_nll(run.net, x[part], y[part], *(t[part] for t in soft))  # forward
                    nll = nll / (n_targets / run.world.size)    # the mean over the global batch
                run.scaler.scale(nll).backward()                # backward (scaled in float16)
                loss += nll.detach()
            loss = run.world.mean(loss)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss is {loss.item()} at step {run.step}; "
                                         f"training stopped and {run.kept}")
            run.scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            run.scaler.step(opt)                                # the update: opt.step()
            run.scaler.update()
            run.step += 1
            run.hist.log(run.step, loss.item(), lr, int(n_targets))
            if run.step % cfg.eval_every == 0 or run.step == cfg.max_steps:
                with run.clock_paused():                        # evaluating is not training
                    valid = run.world.from_main(run.evaluate(final=run.step == cfg.max_steps))
                run.hist.log_eval(run.step, valid, run.seconds())
                hooks.fire("eval", run)
            run.hist.seconds = run.seconds()
            hooks.fire("step", run, loss.item())
    except KeyboardInterrupt:
        hooks.fire("interrupt", run)
        raise
    finally:
        hooks.fire("close", run)
    hooks.fire("end", run)
    return run.hist


class Run:
    """What a training run holds: the model on its device, the optimiser, the crops, the precision, the
    process's place in a group (``distributed.World``), the step, the History, and the training clock.
    ``train`` loops over it; the callbacks read and change it."""

    def __init__(self, model: nn.Module, data: Splits, cfg: TrainConfig, device=None, out_dir=None,
                 say=None):
        self.task = getattr(model, "task", None)
        if self.task is None:
            raise TypeError(f"{type(model).__name__} names no task: give it a `task` attribute, "
                            f"such as musictx_lite.models.tasks.NEXT_TOKEN")
        self.model, self.data, self.cfg = model, data, cfg
        self.world = w = distributed.world()
        # a model from build_model() knows its registry name; any other model is stored by its class
        self.meta = {"model_name": getattr(model, "name", ""), "model_class": type(model).__qualname__,
                     "model_config": model.cfg.to_dict(), "train_config": asdict(cfg)}
        if w.size > 1:                               # before anything else: a mismatch fails on every rank
            distributed.agree({**self.meta, "world": w.size})
        if cfg.batch_size % w.size:
            raise ValueError(f"the global batch of {cfg.batch_size} crops does not split over {w.size} ranks; "
                             f"choose a batch size divisible by {w.size}")
        self.per_rank = cfg.batch_size // w.size
        self.micro = cfg.micro_batch or self.per_rank
        if self.per_rank % self.micro:
            raise ValueError(f"micro_batch {self.micro} does not divide the {self.per_rank} crops of each "
                             f"rank's batch")
        self.device = torch.device(device) if device is not None else pick_device()
        model.to(self.device).train()
        seed = distributed.rank_seed(cfg.seed, w.rank)
        torch.manual_seed(seed)
        if cfg.transpose and not getattr(self.task, "transposes", False):
            raise ValueError(f"transpose=True augments crops of the raster only; this model's task "
                             f"({self.task.name}) has none")
        if cfg.teachers:                             # distillation: targets from the teachers' mean (distil)
            from .distil import soft_crops

            self.batches = soft_crops(model, data, cfg, self.device, out_dir if w.main else None, seed,
                                      say if w.main else None)
        else:                                        # crops of cfg.context tokens: model.context is the window
            # a model sees when scored or sampling, None for an LSTM, which reads a whole piece
            self.batches = (self.task.sampler(data.train, model.cfg.context, seed, transpose=True)
                            if cfg.transpose else self.task.sampler(data.train, model.cfg.context, seed))
        learnt = [p for p in model.parameters() if p.requires_grad]     # a frozen part (start_from) stays
        decay = [p for p in learnt if p.dim() >= 2]
        no_decay = [p for p in learnt if p.dim() < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                      {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99))
        self.autocast, self.scaler = amp(self.device, cfg.cpu_bf16)
        self.hist, self.step, self.best = History(), 0, None     # best: weights at hist.best_step (keep_best)
        self.kept = "no checkpoint was written (no out_dir)"      # what a failed run leaves (callbacks)
        self.eval_count: int | None = None                          # pieces of the last evaluation (rank 0)
        self.resume_from = ""                                       # where an interrupted run resumes
        self._t0 = None

    @functools.cached_property
    def net(self) -> nn.Module:
        """The model the steps run: in DistributedDataParallel among several ranks, after any resume."""
        return self.world.wrap(self.model, self.device)

    def batch(self) -> tuple[torch.Tensor, ...]:
        """This rank's crops of the step, on the device: inputs, targets (and the teachers' targets)."""
        return tuple(t.to(self.device) for t in self.batches.batch(self.per_rank))

    def evaluate(self, final: bool) -> float | None:
        """Validation NLL on rank 0 (None on the others): of ``cfg.eval_pieces`` pieces, of all at the end."""
        if not self.world.main:
            return None
        n = None if final else self.cfg.eval_pieces
        pieces = self.data.valid if n is None else self.data.valid[:n]
        self.eval_count = len(pieces)                   # what the progress line says it scored
        return self.task.evaluate(self.model, pieces)

    def start_clock(self) -> None:
        """Start counting training seconds, from those of the History (a resumed run's earlier sessions); the
        model is wrapped for several ranks first, whose set-up (a broadcast of the weights) is not training."""
        self.net
        self._t0 = time.perf_counter() - self.hist.seconds

    def seconds(self) -> float:
        """Seconds of training so far, over every session of a resumed run; evaluations excluded."""
        return time.perf_counter() - self._t0

    def clock_paused(self):
        """A context whose time does not count as training (``seconds``)."""
        return _Paused(self)

    def rng_state(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The random states a resumed run needs: torch's, the crops', and CUDA's (dropout on the GPU)."""
        cuda = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        return torch.get_rng_state(), self.batches.gen.get_state(), cuda

    def set_rng_state(self, state) -> None:
        rng, batch_rng, cuda_rng = state
        torch.set_rng_state(rng.cpu())                            # map_location put them on the device
        self.batches.gen.set_state(batch_rng.cpu())
        if self.device.type == "cuda" and cuda_rng is not None:
            torch.cuda.set_rng_state(cuda_rng.cpu(), self.device)


class _Paused:
    def __init__(self, run: Run):
        self.run = run

    def __enter__(self):
        self.t = time.perf_counter()

    def __exit__(self, *exc):
        self.run._t0 += time.perf_counter() - self.t
