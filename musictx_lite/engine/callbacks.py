"""What a training run does besides learning: checkpoints and exact resume, early stopping with the best
weights kept, a progress bar, and a function called after each step. Each is a callback of ``train``.

Notebook: notebooks/01_attention_in_rnns.ipynb (the loop that calls them); book/using.md (resuming a run).

``train`` fires these events, and each callback answers those it has a method for (minGPT's
``Trainer.add_callback`` is the model); within a step, ``eval`` comes before ``step``:

- ``start(run)``: once, before the first step (a checkpoint in the run directory is loaded here);
- ``eval(run)``: after each evaluation, whose NLL is ``run.hist.valid_nll[-1]``;
- ``step(run, loss)``: after each step;
- ``interrupt(run)``: on Ctrl-C, before it propagates;
- ``end(run)``: once, after the last step (not after an error).

and ``close(run)`` in every case, as a ``finally``. The callbacks share the run's state (``Run``): none
of them knows another.
"""
from __future__ import annotations

import sys
from dataclasses import asdict, fields
from pathlib import Path

from .. import settings
from ..checkpoint import CKPT, read_checkpoint, write_checkpoint


class Callbacks:
    """The callbacks of one run, called in the order given."""

    def __init__(self, *callbacks):
        self.callbacks = [c for c in callbacks if c is not None]

    def fire(self, event: str, run, *args) -> None:
        for c in self.callbacks:
            method = getattr(c, event, None)
            if method is not None:
                method(run, *args)


def standard(run, out_dir=None, progress: bool = True, on_step=None, *more) -> Callbacks:
    """The callbacks ``train`` attaches: early stopping and best weights where the config asks for them,
    checkpoints with ``out_dir``, the progress bar, ``on_step(step, loss)``, then ``more``."""
    cfg = run.cfg
    return Callbacks(
        Warmup(max(1, min(WARMUP_STEPS, cfg.max_steps // 5))),
        EarlyStopping(cfg.patience, cfg.keep_best) if cfg.patience or cfg.keep_best else None,
        Checkpoints(Path(out_dir) / CKPT, cfg.ckpt_every) if out_dir is not None else None,
        Progress(cfg.max_steps) if progress and run.world.main else None,
        OnStep(on_step) if on_step is not None else None,
        *more,
        Interrupted(),
    )


WARMUP_STEPS = 10


class Warmup:
    """Note the tokens and seconds of the first ``steps`` steps in the History, which ``History.tokens_per_s``
    leaves out: a process's first steps pay for allocations and the choice of kernels."""

    def __init__(self, steps: int):
        self.steps = steps

    def step(self, run, loss: float) -> None:
        if run.step == self.steps:
            run.hist.warm_tokens, run.hist.warm_seconds = run.hist.tokens, run.hist.seconds


class EarlyStopping:
    """With ``keep_best``, keep the weights of the best evaluation (``run.best``) and end the run with them;
    with ``patience``, stop after that many evaluations without a new best."""

    def __init__(self, patience: int | None, keep_best: bool):
        self.patience, self.keep_best = patience, keep_best

    def eval(self, run) -> None:
        hist = run.hist
        if hist.best_step == hist.eval_step[-1]:                    # this evaluation is the best so far
            if self.keep_best:
                run.best = {k: v.detach().clone() for k, v in run.model.state_dict().items()}
        elif self.patience is not None and sum(s > hist.best_step for s in hist.eval_step) >= self.patience:
            hist.stopped_early = True                                 # checkpointed too: a resume stops as well

    def end(self, run) -> None:
        if self.keep_best and run.best is not None:
            run.model.load_state_dict(run.best)


class Checkpoints:
    """A checkpoint at ``path`` every ``every`` steps, at the end, at an early stop and on Ctrl-C: the model,
    the optimiser, the history and every random state, so that a run started again with the same
    ``path`` loads it and reaches exactly the state an uninterrupted run reaches."""

    def __init__(self, path: Path, every: int):
        self.path, self.every, self.rngs = Path(path), every, None

    def start(self, run) -> None:
        if run.world.main:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self._resume(run)
        else:
            run.kept = f"no checkpoint was written yet ({self.path})"
        self.rngs = run.rng_state()

    def step(self, run, loss: float) -> None:
        self.rngs = run.rng_state()                                   # the state after this complete step
        if run.step % self.every == 0 or run.step == run.cfg.max_steps or run.hist.stopped_early:
            self._save(run)

    def interrupt(self, run) -> None:
        if run.world.size == 1:
            self._save(run)                                           # the state after the last complete step
            run.resume_from = f"; resume from {self.path}"
        elif run.world.main:      # the other ranks may be anywhere in the step: no collective, no save now
            step = read_checkpoint(self.path)["step"] if self.path.exists() else None
            run.resume_from = f"; resume from {self.path} (step {step})"

    def _save(self, run) -> None:
        rngs = run.world.gather(self.rngs)
        if run.world.main:
            write_checkpoint(self.path, {
                **run.meta, "model": run.model.state_dict(), "optimizer": run.opt.state_dict(),
                "scaler": run.scaler.state_dict() if run.scaler.is_enabled() else None, "step": run.step,
                "history": asdict(run.hist), "rng": self.rngs[0], "batch_rng": self.rngs[1],
                "cuda_rng": self.rngs[2], "best": run.best, "world": run.world.size,
                "rank_rngs": rngs if run.world.size > 1 else None})
        run.kept = f"the last good checkpoint ({self.path}, step {run.step}) is kept"

    def _resume(self, run) -> None:
        ck = read_checkpoint(self.path, run.device)
        saved = {k: ck.get(k) for k in run.meta}                  # a field added since: its default
        saved["train_config"] = {**{f.name: f.default for f in fields(run.cfg)}, **ck["train_config"]}
        if saved != run.meta:
            raise ValueError(f"{self.path} was written by a different model or config; "
                             f"use another out_dir or delete it")
        if ck.get("world", 1) != run.world.size:
            raise ValueError(f"{self.path} was written by {ck.get('world', 1)} process(es); resume it with "
                             f"as many (now {run.world.size})")
        run.model.load_state_dict(ck["model"])
        run.opt.load_state_dict(ck["optimizer"])
        if run.scaler.is_enabled() and ck.get("scaler"):
            run.scaler.load_state_dict(ck["scaler"])
        rngs = ck["rank_rngs"][run.world.rank] if run.world.size > 1 else \
            (ck["rng"], ck["batch_rng"], ck.get("cuda_rng"))
        run.set_rng_state(rngs)
        run.hist, run.step, run.best = type(run.hist)(**ck["history"]), ck["step"], ck.get("best")
        run.kept = f"the last good checkpoint ({self.path}, step {run.step}) is kept"


class Progress:
    """A tqdm bar on stderr and a line per evaluation; off where ``MUSICTX_PROGRESS=0`` (the book build sets
    it: pages get no bar lines)."""

    def __init__(self, total: int):
        self.total, self.bar = total, None

    def start(self, run) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=self.total, initial=run.step, disable=not settings.progress(), file=sys.stderr,
                        mininterval=10, ncols=80, desc="training")

    def eval(self, run) -> None:
        h, n = run.hist, run.eval_count
        on = f" on {n} pieces" if n is not None else ""
        self.bar.write(f"step {run.step:5d}  train loss {h.train_loss[-1]:.3f}  valid NLL {h.valid_nll[-1]:.3f}{on}")

    def step(self, run, loss: float) -> None:
        self.bar.update(1)
        self.bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

    def close(self, run) -> None:
        if self.bar is not None:
            self.bar.close()


class Interrupted:
    """On Ctrl-C, one line: the step reached, and where to resume from (``Checkpoints`` says)."""

    def interrupt(self, run) -> None:
        _say(f"interrupted at step {run.step}{run.resume_from}")


class OnStep:
    """``fn(step, loss)`` after each step: a chapter collects the losses, a test interrupts a run."""

    def __init__(self, fn):
        self.fn = fn

    def step(self, run, loss: float) -> None:
        self.fn(run.step, loss)


def _say(line: str) -> None:
    """A line on stdout, between the progress bar's updates."""
    from tqdm import tqdm

    tqdm.write(line)

