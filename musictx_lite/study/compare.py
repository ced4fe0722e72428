"""Every next-token model of the book, side by side: one budget, one table, one set of measurements.

Notebooks: notebooks/11_comparison.ipynb (the sprint) and notebooks/11_paper.ipynb (the comparison over seeds)

``compare`` trains each model of ``compared()`` at the profile's ``comparison``
budget (one width, context, batch, number of steps and learning rate for all),
then measures what chapter 11's table shows: parameters, training tokens/s,
peak memory of one training step at a long length, valid and test NLL, and
sampling tokens/s. The samples it times are continuations of held-out
chorales, which the chapter plays and scores with ``stats.chorale_stats``.

``sampling_cost`` times one new token with the cache and by re-encoding, at
several lengths: what dominates the cost of sampling.

``compare_seeds`` can keep a *ledger*: a folder with one file per finished run
(its scores, its budget, the code it ran and where). A run found there is
taken, not trained again, so a comparison too long for one machine's session
goes on from the committed ledger on the next one, and two processes can fill
one ledger with different models.

``paired_bootstrap`` puts a 95% interval over pieces on the difference between
two models' NLL per token: whether the pieces resolve it.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import socket
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from ..device import evaluating, model_device, to_model
from ..engine.precision import precision
from ..engine.profiles import ONE_LAYER_SIZES, Profile, get_profile, resolve
from ..engine.sample import generate, prompt_from
from ..engine.training import History, TrainConfig, train
from ..files import atomic_write
from ..io.data import Piece, Splits
from ..io.tokens import VOCAB_SIZE, decode, encode
from ..models.config import ModelConfig
from ..models.registry import MODELS, build_model, n_params
from ..models.tasks import evaluate_nll, piece_nlls, token_nll
from .bench import peak_bytes


def compared() -> dict[str, int]:
    """The models chapter 11 compares (every record of ``MODELS`` without a ``left_out`` reason): name ->
    the chapter that built it, in the book's order."""
    specs = sorted(MODELS.items(), key=lambda kv: kv[1].chapter)          # stable: the registry's order within
    return {name: spec.chapter for name, spec in specs if spec.left_out is None}


def left_out() -> dict[str, str]:
    """The registered models that are not compared (they see the future, or do another task), and why."""
    return {name: spec.left_out for name, spec in MODELS.items() if spec.left_out is not None}


def one_layer() -> tuple[str, ...]:
    """The compared models that stay one layer deep (their size class is in ``ONE_LAYER_SIZES``)."""
    return tuple(name for name in compared() if MODELS[name].size in ONE_LAYER_SIZES)


def budget(name: str, profile: Profile | str | None = None, **changes) -> tuple[ModelConfig, TrainConfig]:
    """Model ``name``'s config and training budget in the comparison (``profiles.resolve``)."""
    if name not in compared():
        why = left_out().get(name)
        raise ValueError(f"{name!r} is not compared; compared: {list(compared())}"
                         + (f" ({name}: {why})" if why else ""))
    return resolve(name, profile, "comparison", **changes)


def train_compared(name: str, data: Splits, profile: Profile | str | None = None,
                   out_dir: str | os.PathLike | None = None, device: torch.device | str | None = None,
                   progress: bool = False, **train_kw) -> tuple[torch.nn.Module, History]:
    """Build model ``name`` from its seed and train it at its ``budget`` (``train_kw`` changes TrainConfig
    fields: ``seed``, ``max_steps``); with ``out_dir``, checkpoints go to ``out_dir/<name>`` and an
    interrupted run resumes. Returns the model and its History."""
    mcfg, tcfg = budget(name, profile, **train_kw)
    torch.manual_seed(tcfg.seed)                                         # the same initial weights each time
    model = build_model(name, mcfg)
    hist = train(model, data, tcfg, out_dir=None if out_dir is None else Path(out_dir) / name, device=device,
                 progress=progress)
    return model, hist


def train_peak_mib(name: str, cfg: ModelConfig, length: int, device: torch.device | str = "cpu") -> float:
    """Peak memory, MiB, of one training step (forward and backward, batch 1) of model ``name`` with
    ``cfg`` at a context of ``length`` tokens, random weights and tokens."""
    torch.manual_seed(0)
    model = build_model(name, replace(cfg, context=length)).to(device).train()
    x = to_model(model, torch.randint(5, VOCAB_SIZE, (1, length + 1)))  # (1, L + 1)

    def step() -> None:
        token_nll(model, x[:, :-1], x[:, 1:]).backward()

    step()                                                               # warm-up: lazy allocations
    model.zero_grad(set_to_none=True)
    return peak_bytes(step, model_device(model)) / 2**20


def samples(model: torch.nn.Module, pieces: list[Piece], prompt_steps: int, n_steps: int,
            seed: int = 0) -> tuple[list[np.ndarray], float]:
    """Continue the first ``prompt_steps`` steps of each piece by ``n_steps`` steps (with the cache).

    Returns the generated parts only, as (n_steps, 4) grids, and the sampling speed in tokens per second.
    """
    grids, seconds = [], 0.0
    for i, piece in enumerate(pieces):
        prompt = prompt_from(piece, prompt_steps)
        t0 = time.perf_counter()
        tokens = generate(model, prompt, n_steps, seed=seed + i)
        seconds += time.perf_counter() - t0
        grids.append(decode(tokens)[prompt_steps:])                      # (n_steps, 4)
    return grids, 4 * n_steps * len(pieces) / seconds


def compare(data: Splits, profile: Profile | str | None = None, names: list[str] | None = None,
            out_dir: str | os.PathLike | None = None, device: torch.device | str | None = None,
            n_pieces: int = 4, prompt_steps: int = 16, n_steps: int | None = None, memory_length: int = 2048,
            progress: bool = False, verbose: bool = True) -> list[dict]:
    """Train and measure each model of ``names`` (default: all of ``compared()``) at the comparison budget.

    Per model, one dict: ``name``, ``chapter``, ``params``, ``steps``, ``seconds`` (of training), ``train_tok_s``,
    ``peak_mib`` (``train_peak_mib`` at ``memory_length``), ``valid_nll`` and
    ``test_nll`` (whole pieces), ``sample_tok_s``, ``samples`` (continuations of
    the first ``prompt_steps`` steps of the first ``n_pieces`` test chorales by
    ``n_steps`` steps, default the profile's ``sample_steps``), ``history`` and
    ``model``. With ``out_dir`` each run keeps a checkpoint in ``out_dir/<name>``
    and resumes from it. ``verbose`` prints one line per model, ``progress`` the training bars.
    """
    p = get_profile(profile) if profile is None or isinstance(profile, str) else profile
    n_steps = p.sample_steps if n_steps is None else n_steps
    pieces = data.test[:n_pieces]
    if any(len(q.pitches) < prompt_steps for q in pieces):
        raise ValueError(f"every prompt piece needs at least {prompt_steps} steps")
    rows = []
    for name in names or list(compared()):
        model, hist = train_compared(name, data, p, out_dir, device, progress)
        grids, speed = samples(model, pieces, prompt_steps, n_steps)
        rows.append({"name": name, "chapter": MODELS[name].chapter, "params": n_params(model),
                     "steps": hist.step[-1], "seconds": hist.seconds, "train_tok_s": hist.tokens_per_s,
                     "peak_mib": train_peak_mib(name, model.cfg, memory_length, model_device(model)),
                     # with keep_best the model holds its best weights, not those of its last evaluation
                     "valid_nll": evaluate_nll(model, data.valid) if budget(name, p)[1].keep_best else hist.final_nll,
                     "test_nll": evaluate_nll(model, data.test),
                     "sample_tok_s": speed, "samples": grids, "history": hist, "model": model})
        if verbose:
            print(f"{name:>19s} (chapter {MODELS[name].chapter:2d}): {hist.step[-1]} steps in {hist.seconds:5.1f} s, "
                  f"valid NLL {rows[-1]['valid_nll']:.3f}", flush=True)
    return rows


def format_comparison(rows: list[dict], memory_length: int = 2048) -> str:
    """The chapter's table, in the book's 88 columns: one line per model, best valid NLL first."""
    head = (f"{'ch':>2s}  {'model':<19s} {'params':>7s} {'train tok/s':>11s} {f'MiB @{memory_length}':>9s} "
            f"{'valid':>6s} {'test':>6s} {'sample tok/s':>12s}")
    lines = [head, "-" * len(head)]
    for r in sorted(rows, key=lambda r: r["valid_nll"]):
        lines.append(f"{r['chapter']:>2d}  {r['name']:<19s} {r['params']:7,d} {r['train_tok_s']:11,.0f} "
                     f"{r['peak_mib']:9,.0f} {r['valid_nll']:6.3f} {r['test_nll']:6.3f} "
                     f"{r['sample_tok_s']:12,.0f}")
    return "\n".join(lines)


def plot_nll_vs_time(histories: dict[str, History], baseline: float | None = None, ax=None, others=None):
    """Valid NLL against training seconds, one line per run (20 distinct colours, then dashes).

    ``others``: more runs drawn thin and grey behind, unlabelled, as context (``plot_nll_panels``)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4.5))
    for h in (others or {}).values():
        ax.plot(h.eval_seconds, h.valid_nll, color="0.8", lw=0.8, zorder=1)
    colours = plt.get_cmap("tab10" if len(histories) <= 10 else "tab20").colors
    for i, (name, h) in enumerate(histories.items()):
        ax.plot(h.eval_seconds, h.valid_nll, marker="o", ms=3, color=colours[i % len(colours)],
                ls="-" if i < len(colours) else "--", label=f"{name} ({h.final_nll:.3f})", zorder=2)
    if baseline is not None:
        ax.axhline(baseline, color="k", ls=":", lw=1, label=f"best baseline ({baseline:.3f})")
    ax.set(xlabel="training time (s, this machine)", ylabel="valid NLL (nats/token)",
           title="validation NLL against wall-clock training time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax


def plot_nll_panels(histories: dict[str, History], groups: dict[str, list[str]], baseline: float | None = None):
    """``plot_nll_vs_time`` as small multiples: one panel per group of runs (e.g. per chapter), in
    colour, with every other run grey behind it; shared axes. Returns the figure."""
    import matplotlib.pyplot as plt

    cols = 2
    rows = -(-len(groups) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(11, 2.9 * rows), sharex=True, sharey=True, squeeze=False)
    for ax, (title, names) in zip(axes.flat, groups.items()):
        mine = {n: histories[n] for n in names if n in histories}
        plot_nll_vs_time(mine, baseline, ax=ax, others={n: h for n, h in histories.items() if n not in mine})
        ax.set(title=title, xlabel="", ylabel="")
        ax.legend(fontsize=7, loc="upper right")
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    fig.supxlabel("training time (s, this machine)")
    fig.supylabel("valid NLL (nats/token)")
    return fig


@torch.no_grad()
def sampling_cost(name: str, cfg: ModelConfig, lengths=(16, 64, 256, 1024), repeats: int = 3,
                  device: torch.device | str = "cpu") -> list[dict]:
    """Milliseconds to get the logits of one new token after ``t`` tokens, for each ``t`` of ``lengths``:
    with the cache (one call on the newest token; the prefix is in the cache) and by re-encoding (one call
    on all ``t`` tokens). Random weights, a context of ``max(lengths)``; best of ``repeats``."""
    T = max(lengths)
    torch.manual_seed(0)
    model = build_model(name, replace(cfg, context=T)).to(device)
    x = to_model(model, torch.randint(5, VOCAB_SIZE, (1, T)))           # (1, T)
    sync = torch.cuda.synchronize if model_device(model).type == "cuda" else (lambda: None)

    def timed(fn) -> float:
        best = float("inf")
        for _ in range(repeats):
            ready = fn()                                                 # untimed preparation
            sync()
            t0 = time.perf_counter()
            ready()
            sync()
            best = min(best, time.perf_counter() - t0)
        return 1000 * best

    rows = []
    with evaluating(model):
        for t in lengths:
            def cached():
                cache = model.new_cache()
                model(x[:, : t - 1], cache=cache)                        # the prefix, once
                return lambda: model(x[:, t - 1: t], cache=cache)        # (1, 1, V): the new token
            row = {"model": name, "t": t, "re-encoded": timed(lambda: lambda: model(x[:, :t]))}
            row["cached"] = timed(cached) if getattr(model, "cacheable", False) and t > 1 else float("nan")
            rows.append(row)
    return rows


# the code a compared run executes: the models, the training loop, the data and its tokens. A ledger's runs must
# all come from the same code (``code_fingerprint``); this module's own tables and plots do not count.
RUN_CODE = ("models", "engine/training.py", "engine/callbacks.py", "engine/precision.py", "engine/distributed.py",
            "io/tokens.py", "io/data.py", "device.py")


def code_fingerprint(root: str | os.PathLike | None = None) -> str:
    """sha256 of what ``RUN_CODE`` (under ``root``, default this package) does: each module's syntax tree without
    docstrings, so that comments and docstrings may change while a ledger fills, and any change to the code may
    not. This package's is read once per process: the code it loaded."""
    return _loaded_code() if root is None else _fingerprint(Path(root))


@functools.lru_cache(maxsize=1)
def _loaded_code() -> str:
    return _fingerprint(Path(__file__).resolve().parents[1])


def _fingerprint(root: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(f for part in RUN_CODE for f in ((root / part).glob("*.py") if (root / part).is_dir()
                                                     else [root / part]))
    for f in files:
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):                                      # drop every docstring
            body = getattr(node, "body", None)
            if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        digest.update(f.relative_to(root).as_posix().encode() + b"\0" + _dump(tree).encode() + b"\0")
    return digest.hexdigest()


def _dump(node) -> str:
    """``ast.dump``, the same on every Python: fields that are empty (None, []) are left out, since newer
    Pythons add some to old nodes (3.12's ``type_params``), and ``ast.dump``'s own output changed in 3.13."""
    if isinstance(node, ast.AST):
        fields = (f"{k}={_dump(v)}" for k, v in ast.iter_fields(node) if v is not None and v != [])
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return "[" + ", ".join(_dump(x) for x in node) + "]"
    return repr(node)


def run_key(name: str, profile: Profile, seed: int, data: Splits, **train_kw) -> dict:
    """What makes two runs the same experiment: the model, its config and training config (seed included),
    the data, and the code that ran (``code_fingerprint``)."""
    mcfg, tcfg = budget(name, profile, **train_kw, seed=seed)
    return {"model": name, "model_config": mcfg.to_dict(),
            "train_config": json.loads(json.dumps(asdict(tcfg))),
            "data": data.source, "code": code_fingerprint()}


def ledger_path(ledger: str | os.PathLike, name: str, seed: int) -> Path:
    return Path(ledger) / f"{name}.seed-{seed}.json"


def ledger_run(ledger: str | os.PathLike, key: dict) -> dict | None:
    """The finished run of ``key`` in ``ledger``, or None; a file there for the same model and seed that was made
    otherwise (another budget, data or code) is an error: one ledger holds one comparison."""
    path = ledger_path(ledger, key["model"], key["train_config"]["seed"])
    if not path.exists():
        return None
    try:
        run = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path} is not a ledger file ({e})") from None
    if run.get("key") != key:
        diff = sorted(k for k in key if run.get("key", {}).get(k) != key[k])
        raise ValueError(f"{path} was made by another experiment (it differs in {', '.join(diff)}): "
                         f"start another ledger, or remove the folder")
    return run


def ledger_runs(ledger: str | os.PathLike) -> dict[str, list[dict]]:
    """The runs finished so far in ``ledger``, per model, by seed: what a comparison that is still filling can
    already show (its results file is exported only when every run is in). Each run keeps its ``key`` and
    ``made``. Every file must belong to one comparison: the same data, code and number of steps."""
    runs: dict[str, list[dict]] = {}
    first = None
    for path in sorted(Path(ledger).glob("*.json")):
        try:
            run = json.loads(path.read_text())
            key = run["key"]
            same = (key["data"], key["code"], key["train_config"]["max_steps"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path} is not a ledger file ({e!r})") from None
        first = first or (same, path)
        if same != first[0]:
            raise ValueError(f"{path} and {first[1].name} belong to different comparisons "
                             f"(data, code or steps differ): one ledger holds one comparison")
        runs.setdefault(key["model"], []).append(run)
    return {name: sorted(r, key=lambda run: run["seed"]) for name, r in runs.items()}


def claim(ledger: str | os.PathLike, name: str, seed: int) -> bool:
    """Claim run (``name``, ``seed``) of ``ledger`` for this process: True where it is this process's to train,
    False where another process holds it (a live one on this machine, or one on another machine sharing the
    folder). A claim is a file beside the run's, removed when the run is written; one left by a process
    that died on this machine is taken over."""
    path, me = ledger_path(ledger, name, seed).with_suffix(".claim"), f"{socket.gethostname()} {os.getpid()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        host, _, pid = path.read_text().partition(" ")
        if host != socket.gethostname() or not pid.isdigit() or _alive(int(pid)):
            return False
        path.write_text(me)                                              # its process is gone: take it over
        return True
    with os.fdopen(fd, "w") as f:
        f.write(me)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:                                              # alive, another user's
        return True
    return True


def compare_seeds(data: Splits, profile: Profile | str | None = None, seeds=(0, 1, 2), names: list[str] | None = None,
                  out_dir: str | os.PathLike | None = None, device: torch.device | str | None = None,
                  progress: bool = False, verbose: bool = True, ledger: str | os.PathLike | None = None,
                  claims: bool = False, **train_kw) -> dict:
    """Train each model of ``names`` (default: all of ``compared()``) once per seed at its ``budget``; score each
    run on every validation and test piece. Returns the results file's content: ``profile``, ``seeds``,
    ``pieces`` (tokens per valid and test piece) and, per model and seed, ``valid_nll``, ``test_nll``,
    ``valid_pieces`` and ``test_pieces`` (summed NLL per piece, for a bootstrap over pieces: ``paired_bootstrap``),
    ``steps``, ``best_step``, ``seconds`` and ``params``. Runs go to ``out_dir/seed-<s>/<name>`` and resume.

    With ``ledger`` (a folder), a run already there is taken as it is, and each run finished here is written
    there at once; its runs, taken or trained, carry ``made``: the commit, device, versions and date of the
    process that trained them. With ``claims`` too, several processes share the ledger's unfinished runs
    (``claim``): a run another process holds is skipped, so the result may lack runs."""
    from .hub import provenance

    p = get_profile(profile) if profile is None or isinstance(profile, str) else profile
    counts = {s: [len(encode(q.pitches)) - 1 for q in data[s]] for s in ("valid", "test")}
    models: dict[str, list[dict]] = {}
    for name in names or list(compared()):
        for seed in seeds:
            key = run_key(name, p, seed, data, **train_kw) if ledger is not None else None
            run = ledger_run(ledger, key) if ledger is not None else None
            if run is None and claims and not claim(ledger, name, seed):
                if verbose:
                    print(f"{name:>19s} seed {seed}: held by another process", flush=True)
                continue
            if run is None:
                run_dir = None if out_dir is None else Path(out_dir) / f"seed-{seed}"
                model, hist = train_compared(name, data, p, run_dir, device, progress, seed=seed, **train_kw)
                per = {s: piece_nlls(model, data[s])[0].tolist() for s in ("valid", "test")}
                run = {"seed": seed, "valid_nll": sum(per["valid"]) / sum(counts["valid"]),
                       "test_nll": sum(per["test"]) / sum(counts["test"]), "valid_pieces": per["valid"],
                       "test_pieces": per["test"], "steps": hist.step[-1] if hist.step else 0,
                       "best_step": hist.best_step, "seconds": hist.seconds, "params": n_params(model)}
                if ledger is not None:
                    made = {**{k: v for k, v in provenance(model_device(model)).items() if k != "command"},
                            "precision": precision(model_device(model), budget(name, p)[1].cpu_bf16)}
                    text = json.dumps({**run, "key": key, "made": made}, indent=1) + "\n"
                    atomic_write(ledger_path(ledger, name, seed), lambda tmp: Path(tmp).write_text(text))
                    ledger_path(ledger, name, seed).with_suffix(".claim").unlink(missing_ok=True)
                    run["made"] = made
                how = f"{hist.seconds:.0f} s"
            else:
                how = f"from the ledger, made {run['made']['date']}"
                run = {k: v for k, v in run.items() if k != "key"}
            models.setdefault(name, []).append(run)
            if verbose:
                print(f"{name:>19s} seed {seed}: valid NLL {run['valid_nll']:.3f} ({how})", flush=True)
    known = list(compared())                  # the file lists the models in the book's order, whatever order ran
    models = dict(sorted(models.items(), key=lambda kv: known.index(kv[0]) if kv[0] in known else len(known)))
    return {"profile": p.name, "seeds": list(seeds), "train_overrides": train_kw, "data": data.source,
            "pieces": counts, "models": models}


def seed_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and a Student-t interval over seeds (the spread of training runs, not of pieces)."""
    import math
    from statistics import mean, stdev

    m = mean(values)
    if len(values) < 2:
        return m, float("nan"), float("nan")
    t = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776}.get(len(values), 2.262 if len(values) <= 10 else 1.96)
    half = t * stdev(values) / math.sqrt(len(values))
    return m, m - half, m + half


def seed_spreads(res: dict | None = None) -> dict[str, float]:
    """{model: its highest valid NLL minus its lowest over the seeds} of a comparison over seeds (default: the
    shipped ``pretrained/compare.json``, chapter 11's): how far a change of seed alone moved one model (chapter 7
    ranks no smaller gap)."""
    if res is None:
        res = json.loads((Path(__file__).parents[1] / "pretrained" / "compare.json").read_text())
    return {name: max(r["valid_nll"] for r in runs) - min(r["valid_nll"] for r in runs)
            for name, runs in res["models"].items() if len(runs) > 1}


def paired_bootstrap(a: np.ndarray, b: np.ndarray, counts: np.ndarray, n: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """NLL per token of model a minus model b over the pieces, and a 95% bootstrap interval over pieces
    (chapter 11: is a difference between two models of the comparison real?).

    ``a``, ``b``: summed NLL per piece of the two models, on the same pieces; ``counts``: tokens per
    piece. Each resample draws pieces with replacement and keeps both models' scores of a piece
    together (paired), so what a piece makes hard for both cancels.
    """
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(counts), (n, len(counts)))                 # (n, pieces)
    diffs = (a[idx] - b[idx]).sum(1) / counts[idx].sum(1)                # (n,)
    lo, hi = np.quantile(diffs, [0.025, 0.975])
    return float((a - b).sum() / counts.sum()), float(lo), float(hi)


def format_seeds(results: dict) -> str:
    """The results file as a table: per model, its mean valid and test NLL over seeds with 95% intervals."""
    rows = []
    for name, runs in results["models"].items():
        v, t = seed_interval([r["valid_nll"] for r in runs]), seed_interval([r["test_nll"] for r in runs])
        rows.append((v[0], f"{name:<19s} {len(runs):5d} {v[0]:7.3f} [{v[1]:.3f}, {v[2]:.3f}] "
                           f"{t[0]:7.3f} [{t[1]:.3f}, {t[2]:.3f}]"))
    head = f"{'model':<19s} {'seeds':>5s} {'valid':>7s} {'95% CI (seeds)':>16s} {'test':>7s} {'95% CI (seeds)':>16s}"
    return "\n".join([head] + [r for _, r in sorted(rows)])


def seed_ranking(results: dict, split: str = "valid") -> list[dict]:
    """The results file's models, best mean NLL on ``split`` first: per model ``name``, ``mean``, ``low`` and
    ``high`` (``seed_interval``), ``tied`` (its interval overlaps the best model's: the seeds do not rank
    the two) and ``pieces`` (summed NLL per piece, the mean over seeds: what ``paired_bootstrap`` resamples,
    with ``results["pieces"][split]`` as the token counts)."""
    rows = []
    for name, runs in results["models"].items():
        mean, low, high = seed_interval([r[f"{split}_nll"] for r in runs])
        pieces = np.mean([r[f"{split}_pieces"] for r in runs], axis=0)  # (pieces,)
        rows.append({"name": name, "mean": mean, "low": low, "high": high, "pieces": pieces})
    rows.sort(key=lambda r: r["mean"])
    for r in rows:
        r["tied"] = r["low"] <= rows[0]["high"]                         # NaN (one seed): never tied
    return rows
