"""The model hub: the paper's three rows, trained with the paper-level recipe and shipped in the package.

Notebook: notebooks/11_paper.ipynb (chapter 11, part 2)

``python -m musictx_lite reproduce jsb --profile paper --out runs/paper --export musictx_lite/pretrained``
trains absolute positions (``sinusoidal``), relative attention (``relative``) and
relative attention with a voice embedding (``relative-voice``) on the official JSB
split with the recipe of ``profiles.RECIPE``, and ``export`` writes each one in the
folder ``musictx_lite/pretrained/``:

- ``<name>.pt``: the best weights, stored in float16 (a checkpoint that
  ``models.load_checkpoint`` reads, with ``torch.load(weights_only=True)``);
- ``<name>.json``: its record: the command, commit, seed, device, versions,
  steps and wall time, the training curve, and the valid and test NLL of the
  float16 weights, evaluated in float32 on the CPU.

``pretrained(name)``, also ``musictx_lite.pretrained(name)``, gives a model ready
to sample, on any device; a test recomputes every recorded valid NLL on the CPU in
every CI run.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

from .. import settings
from ..checkpoint import upgrade_config, write_checkpoint
from ..engine.training import History
from ..files import atomic_write
from ..io.data import Splits
from ..models.registry import MODELS
from ..models.tasks import evaluate_nll

HERE = Path(__file__).parents[1] / "pretrained"
NAMES = tuple(name for name, spec in MODELS.items() if spec.paper)   # the paper's Table 2 rows, in its order


def available() -> list[str]:
    """The names of the shipped models (those with both a checkpoint and a record)."""
    return [n for n in NAMES if (HERE / f"{n}.pt").exists() and (HERE / f"{n}.json").exists()]


# A shipped model that was distilled (``distil``) keeps its predecessor beside it: the same model trained by
# the recipe alone, ``HERE/<name>-undistilled.{pt,json}``, the baseline that measures what distillation
# buys, and the like-for-like partner of the other rows and of the recipe's variants (chapter 11).
UNDISTILLED = {"relative": "relative-undistilled"}

# Shipped models of another task than the paper's rows (chapter 12): ``pretrained`` gives them, but they are
# not among ``available()``, the rows that chapter 11 compares token for token.
TASKS = ("harmoniser", "piano-local")
PIANO = "piano-local"     # chapter 13's shipped piano model: trained on the CC BY transcriptions of the shared sample


def _check(name: str) -> None:
    extra = [v for v in (*UNDISTILLED.values(), *TASKS)
             if (HERE / f"{v}.pt").exists() and (HERE / f"{v}.json").exists()]
    if name not in available() + extra:
        raise ValueError(f"no pretrained model {name!r}; shipped: {available() + extra or 'none'}")


def record(name: str) -> dict:
    """The record of pretrained model ``name``: how it was trained, and its NLL (see the module docstring)."""
    _check(name)
    return _upgraded(json.loads((HERE / f"{name}.json").read_text()))


def recipe_record(name: str) -> dict:
    """The record of model ``name`` trained by the recipe without distillation: its predecessor's record
    where the shipped model was distilled (``UNDISTILLED``), else the shipped model's own."""
    plain = UNDISTILLED.get(name)
    return record(plain) if plain is not None and (HERE / f"{plain}.json").exists() else record(name)


def _upgraded(rec: dict) -> dict:
    """A record with today's names for its model configuration (and its change's settings, in a variant)."""
    rec = dict(rec)
    for key in ("model_config", "change"):
        if key in rec:
            rec[key] = upgrade_config(rec[key])
    if "records" in rec:
        rec["records"] = {name: _upgraded(r) for name, r in rec["records"].items()}
    return rec


# The recipe's variants trained at the full budget and not shipped (validation chose the shipped models):
# a file per variant, ``HERE/<variant>.json``, with ``about``, ``change`` (the settings that differ from the
# shipped models' records) and ``records`` (one per model, without weights). Chapter 11 compares them.
TRIED = ("context-512", "width-192")


def tried() -> dict[str, dict]:
    """Every variant of ``TRIED``, by name: its ``about``, ``change`` and ``records``."""
    return {v: _upgraded(json.loads((HERE / f"{v}.json").read_text())) for v in TRIED}


def pretrained(name: str = "relative", device: torch.device | str | None = None) -> nn.Module:
    """Pretrained model ``name`` (``available()``), in float32 and eval mode, on ``device`` (default: the best
    one, ``pick_device``), ready to sample with ``generate``."""
    from ..device import pick_device
    from ..models.registry import load_checkpoint

    _check(name)
    model, _ = load_checkpoint(HERE / f"{name}.pt", device="cpu")   # float16 on disk; copied into float32
    return model.float().to(device if device is not None else pick_device()).eval()


def git_commit() -> str:
    """The checkout's commit (marked when it has uncommitted changes); where git cannot say (a copy of the
    working tree without its history, as on a borrowed GPU machine), ``$MUSICTX_COMMIT`` if set, else unknown."""
    told = settings.commit()
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=Path(__file__).parent,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        if out.returncode == 0:
            return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return f"{told} (as $MUSICTX_COMMIT says)" if told else "unknown"


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    name = platform.processor() or platform.machine()
    try:                                                            # Linux: the CPU's model name
        name = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"cpu: {name}, {os.cpu_count()} cores"


def provenance(device: torch.device | str = "cpu", commit: str | None = None) -> dict:
    """Where and how a result was produced: the command, the commit, the device, the versions and the date.
    ``commit``: the one a long run started from (``git_commit()`` then), else the current one."""
    return {"command": " ".join(["python -m musictx_lite"] + sys.argv[1:]), "commit": commit or git_commit(),
            "device": _device_name(torch.device(device)), "torch": torch.__version__,
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def export(model: nn.Module, hist: History, train_config: dict, data: Splits, out_dir: str | os.PathLike = HERE,
           device: torch.device | str = "cpu", extra: dict | None = None) -> dict:
    """Write ``model`` (its registry name, ``model.name``) as ``out_dir/<name>.pt`` in float16 and its record as
    ``out_dir/<name>.json``; return the record. The NLLs are those of the stored float16 weights."""
    from ..models.registry import load_checkpoint, n_params

    name, out = model.name, Path(out_dir)
    prov = provenance(device)                   # before the files below change the tree it checks
    train_config = json.loads(json.dumps(train_config))          # as the JSON record holds it: tuples are lists
    state = {k: v.detach().to("cpu", torch.float16 if v.is_floating_point() else v.dtype)
             for k, v in model.state_dict().items()}
    ckpt = {"model_name": name, "model_class": type(model).__qualname__, "model_config": model.cfg.to_dict(),
            "train_config": train_config, "model": state, "step": hist.best_step or
            (hist.step[-1] if hist.step else 0)}
    path = write_checkpoint(out / f"{name}.pt", ckpt)
    stored, _ = load_checkpoint(path, device="cpu")                 # what a user gets: float16 -> float32
    t0 = time.perf_counter()
    task = stored.task                          # a harmoniser is scored on its task's tokens: the alto, tenor, bass
    valid, test = task.evaluate(stored.float(), data.valid), task.evaluate(stored.float(), data.test)
    per = {"valid_nll": valid, "test_nll": test, "eval_seconds_cpu": time.perf_counter() - t0}
    every = max(1, len(hist.train_loss) // 200)                     # the curve, at most ~200 points
    rec = {
        "name": name, "params": n_params(stored), "file": path.name, "bytes": path.stat().st_size,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        **prov, "seed": train_config.get("seed"),
        "data": data.source, "steps": hist.step[-1] if hist.step else 0, "best_step": hist.best_step,
        "stopped_early": hist.stopped_early, "train_seconds": round(hist.seconds, 1),
        "model_config": model.cfg.to_dict(), "train_config": ckpt["train_config"],
        **per,
        "curve": {"eval_step": hist.eval_step, "valid_nll": hist.valid_nll,
                  "step": hist.step[every - 1::every],
                  "train_loss": [sum(hist.train_loss[i: i + every]) / len(hist.train_loss[i: i + every])
                                 for i in range(0, len(hist.train_loss) - every + 1, every)]},
        **(extra or {}),
    }
    atomic_write(out / f"{name}.json", lambda tmp: Path(tmp).write_text(json.dumps(rec, indent=1) + "\n"))
    return rec


def export_run(run: str | os.PathLike, data: Splits, out_dir: str | os.PathLike = HERE,
               device: torch.device | str = "cpu", extra: dict | None = None) -> dict:
    """``export`` a finished run directory written by ``train`` (its best weights where it kept them); a
    distilled run's record also gets ``distil.teachers_summary``: each teacher's valid NLL, and that of
    their mean predictions (``teachers_valid_nll``)."""
    from ..checkpoint import read_checkpoint
    from ..engine.distil import load_teacher, teachers_summary

    ck = read_checkpoint(run)
    model = load_teacher(run)                       # the best weights, as a teacher is loaded
    more = dict(extra or {})
    if ck["train_config"].get("teachers"):
        more.update(teachers_summary(list(ck["train_config"]["teachers"]), data.valid, device))
    return export(model, History(**ck["history"]), ck["train_config"], data, out_dir, device, more or None)


def plot_curves(names=None, ax=None):
    """The recorded training curves (train loss, and valid NLL at each evaluation) of the shipped models."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for i, name in enumerate(names or available()):
        c = record(name)["curve"]
        colour = f"C{i}"
        ax.plot(c["step"], c["train_loss"], color=colour, alpha=0.35, lw=1)
        ax.plot(c["eval_step"], c["valid_nll"], color=colour, marker="o", ms=3, label=f"{name}: valid")
    ax.set(xlabel="training step", ylabel="NLL (nats/token)", ylim=(0.2, 1.2),
           title="recorded training curves of the shipped models (faint: train loss)")
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def evaluate_shipped(data: Splits, names=None, splits=("valid", "test"), n_pieces: int | None = None,
                     device: torch.device | str | None = None) -> list[dict]:
    """Each shipped model scored now (``tasks.evaluate_nll``) on ``data``'s ``splits`` (the first
    ``n_pieces`` pieces of each, None: all), beside its record: one dict per model with ``name``, ``params``,
    ``steps`` (its best step), ``seconds`` (recorded training time), ``valid_nll`` and ``test_nll`` (now; NaN
    for a split not scored) and ``record``."""
    from ..models.registry import n_params

    rows = []
    for name in names or available():
        rec, model = record(name), pretrained(name, device)
        now = {f"{s}_nll": evaluate_nll(model, data[s][:n_pieces]) if s in splits else float("nan")
               for s in ("valid", "test")}
        rows.append({"name": name, "params": n_params(model), "steps": rec["best_step"],
                     "seconds": rec["train_seconds"], **now, "record": rec})
    return rows
