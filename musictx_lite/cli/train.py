"""``train``: any model of the book on the chorales, a folder of MIDI files or the shared piano sample; a run
directory that resumes. Notebook: book/using.md (chapter 5 trains the first decoder, chapter 13 the piano models).
"""
from __future__ import annotations

import argparse
import warnings

import torch

from .args import PIANO_SAMPLE, _number, check_writable, default_device, positive_float, positive_int, seed_int


def add_train(sub, o) -> argparse.ArgumentParser:
    """``train``'s options; ``o``: the shared ones (``args.shared_options``)."""
    from ..models.registry import MODELS
    from ..study.hub import NAMES as PRETRAINED

    t = sub.add_parser("train", help="train a model; the last line printed is its validation NLL",
                       parents=[o.profile, o.data, o.device, o.quiet])
    t.add_argument("--model", required=True, choices=sorted(MODELS), help="which model of the book")
    t.add_argument("--out", required=True, help="run directory: checkpoints go here; an existing one is resumed")
    t.add_argument("--steps", type=positive_int, default=None, help="override the profile's number of training steps")
    t.add_argument("--seed", type=seed_int, default=None, help="random seed (default 0)")
    t.add_argument("--batch-size", type=positive_int, default=None,
                   help="override the profile's batch: crops per step, over all ranks under torchrun")
    t.add_argument("--micro-batch", type=positive_int, default=None,
                   help="crops per forward pass; the gradients of a rank's batch accumulate over them")
    t.add_argument("--teachers", nargs="+", default=None, metavar="RUN",
                   help="distil: train on the mean predictions of these trained runs (chapter 11)")
    t.add_argument("--teacher-weight", type=_number(float, lambda v: 0 < v <= 1, "in (0, 1]"), default=None,
                   help="with --teachers: the teachers' share of each target (default 1)")
    t.add_argument("--lr", type=positive_float, default=None, help="override the profile's peak learning rate")
    t.add_argument("--start-from", default=None, choices=PRETRAINED, metavar="NAME",
                   help="begin as this shipped decoder (the harmoniser: its self-attention, feed-forward and "
                        "read-out; cross-attention starts at zero), then train")
    t.add_argument("--data-dir", default=None, metavar="FOLDER",
                   help="train on every MIDI file under FOLDER, read with --codec, split by piece (chapter 13); "
                        "bad files are skipped and counted")
    t.add_argument("--codec", choices=["performance"], default="performance",
                   help="how --data-dir's files become tokens: performance events (Oore et al.; the default)")
    t.add_argument("--freeze", action="store_true",
                   help="with --start-from: keep the weights taken fixed; train only what is new")
    t.set_defaults(func=run_train)
    return t


def run_train(a: argparse.Namespace) -> None:
    from .. import build_model, get_profile, train
    from ..checkpoint import read_checkpoint
    from ..engine import distributed
    from ..models.registry import MODELS, n_params

    check_writable(a.out, "--out", directory=True)
    if a.freeze and a.start_from is None:
        raise ValueError("--freeze keeps the weights --start-from takes: give --start-from too")
    device = a.device if a.device is not None else default_device()
    joined = distributed.setup(device)               # under torchrun: join the other ranks
    try:
        if joined is not None:
            device = joined[1]
        say = print if joined is None or joined[0].main else (lambda *args, **kw: None)   # rank 0 speaks
        p = get_profile(a.profile)
        mcfg = p.model_config(a.model)
        over = {k: v for k, v in (("max_steps", a.steps), ("seed", a.seed), ("batch_size", a.batch_size),
                                  ("micro_batch", a.micro_batch), ("teacher_weight", a.teacher_weight),
                                  ("lr", a.lr))
                if v is not None}
        if a.teachers:
            for t in a.teachers:
                read_checkpoint(t)                   # a clear error before anything is trained
            over["teachers"] = tuple(a.teachers)
        tcfg = p.train_config(a.model, **over)
        data = _train_data(a, MODELS[a.model].build(mcfg))
        torch.manual_seed(tcfg.seed)
        model = build_model(a.model, mcfg)
        if a.start_from is not None:
            start_from(model, a.model, a.start_from, a.freeze)
            say(f"starting from the shipped {a.start_from!r} (a resumed run goes on from its checkpoint)")
        ranks = f"; {joined[0].size} ranks on {device.type}" if joined is not None else ""
        say(f"profile {p.name}: {a.model}, {n_params(model):,} parameters, {tcfg.max_steps} steps; "
            f"data: {data.source}{ranks}")
        hist = train(model, data, tcfg, out_dir=a.out, device=device, progress=not a.quiet)
        say(f"trained {hist.step[-1] if hist.step else 0} steps in {hist.seconds:.0f} s "
            f"({hist.tokens_per_s:,.0f} tokens/s); checkpoint: {a.out}")
        say(f"valid NLL: {hist.final_nll:.4f} nats/token")
    finally:
        distributed.teardown()


def _train_data(a: argparse.Namespace, model):
    """The data ``train`` reads, checked against the model's task: a folder of MIDI files (``--data-dir``,
    read with ``--codec``), the shared piano sample (``--data piano:VERSIONS``), or the chorales."""
    from .. import load_data
    from ..io.corpus import SkippedFile, load_folder, load_piano_sample
    from ..io.data import SPLITS
    from ..models.tasks import EVENTS

    events = getattr(model, "task", None) is EVENTS
    if a.data_dir is not None or (a.data or "").startswith(PIANO_SAMPLE):
        if not events:
            raise ValueError(f"{a.model} learns the chorales' tokens; performances train piano-local or "
                             f"piano-relative (chapter 13)")
        with warnings.catch_warnings():                     # the skipped files are printed below, once
            warnings.simplefilter("ignore", SkippedFile)
            if a.data_dir is not None:
                data = load_folder(a.data_dir)
            else:
                data = load_piano_sample(tuple(v for v in a.data[len(PIANO_SAMPLE):].split(",") if v))
        for path, why in data.skipped[:5]:
            print(f"skipped {path}: {why}")
        if data.skipped:
            print(f"skipped {len(data.skipped)} of {len(data.skipped) + sum(len(data[s]) for s in SPLITS)} "
                  f"MIDI files")
        if not data.train or not data.valid:
            raise ValueError(f"{data.source}: too few pieces to split ({len(data.train)} train, "
                             f"{len(data.valid)} valid); a folder needs at least 3 readable files")
        return data
    if events:
        raise ValueError(f"{a.model} learns piano performances: give --data-dir FOLDER (of MIDI files) or "
                         f"--data piano:giantmidi")
    return load_data(a.data)


def start_from(model, name: str, source: str, freeze: bool = False) -> None:
    """Begin ``model`` as the shipped decoder ``source`` (``Harmoniser.start_from``), with a clear error where
    it cannot: a model without ``start_from``, or a decoder of another size."""
    from .. import pretrained

    if not hasattr(model, "start_from"):
        raise ValueError(f"--start-from: {name} cannot start from a decoder's weights (the harmoniser can)")
    dec = pretrained(source, device="cpu")
    mine, theirs = model.cfg.to_dict(), dec.cfg.to_dict()
    differ = {k: (mine[k], theirs[k]) for k in ("n_layers", "n_heads", "n_embd", "vocab_size")
              if mine.get(k) != theirs.get(k)}
    if differ:
        raise ValueError(f"--start-from {source}: its size differs from this profile's {name}: "
                         + ", ".join(f"{k} {a} here, {b} there" for k, (a, b) in differ.items()))
    model.start_from(dec, freeze=freeze)
