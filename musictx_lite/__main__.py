"""Command line: train any model the book has defined, generate music, harmonise a melody, score baselines,
reproduce a result.

Notebook: book/using.md explains it; lecturers use it on shared GPU servers.

    python -m musictx_lite train --model lstm-attention --profile cpu --out runs/attn
    python -m musictx_lite generate --checkpoint runs/attn --out attn.mid
    python -m musictx_lite generate --checkpoint runs/attn --prompt-midi mine.mid --out more.mid
    python -m musictx_lite generate --pretrained relative --out bach.mid
    python -m musictx_lite train --model piano-local --data-dir my_midis/ --codec performance --out runs/piano
    python -m musictx_lite generate --pretrained piano-local --prompt-midi mine.mid --prompt-seconds 5 --out more.mid
    python -m musictx_lite harmonise --melody "4/4 c'4 d' e' f' g'2 e' c'" --out tune.mid
    python -m musictx_lite harmonise tune.mid --track 0 --out chorale.mid --musicxml chorale.musicxml
    python -m musictx_lite baselines
    python -m musictx_lite bench attention --plot attention.png
    python -m musictx_lite budget --profile gpu
    python -m musictx_lite reproduce jsb --profile cpu --out runs/jsb
    python -m musictx_lite compare --profile paper --seeds 3 --out runs/compare --export results.json
    python -m musictx_lite compare --profile paper --steps 3000 --out runs/c --ledger results/compare-3000

Bad input ends in one line ``error: ...`` and a non-zero exit status (2 for a
bad argument, 1 for a bad file or value found later), never in a traceback.
Ctrl-C during training writes the checkpoint and exits with status 130.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from .checkpoint import CKPT

MAX_SEED = 2**32 - 1


# ---------------------------------------------------------------- argument types

def _number(kind: type, ok, what: str):
    """An argparse ``type=`` that parses ``kind`` and accepts the values where ``ok(value)``."""
    def parse(s: str):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {s!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"must be {what}, got {s}")
        return v
    parse.__name__ = what
    return parse


positive_int = _number(int, lambda v: v > 0, "a positive integer")
nonnegative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
seed_int = _number(int, lambda v: 0 <= v <= MAX_SEED, f"an integer from 0 to {MAX_SEED}")
positive_float = _number(float, lambda v: v > 0 and math.isfinite(v), "a finite number > 0")


def device_arg(s: str) -> str:
    """A device torch can parse and this machine has: cpu, cuda, cuda:N or mps."""
    try:
        d = torch.device(s)
    except (RuntimeError, ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"{s!r} is not a device; use cpu, cuda, cuda:N or mps") from None
    if d.type == "cuda":
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{s}: CUDA is not available on this machine "
                                             f"(torch {torch.__version__}); use cpu")
        if d.index is not None and d.index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{s}: this machine has {torch.cuda.device_count()} CUDA "
                                             f"device(s), cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
    elif d.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise argparse.ArgumentTypeError(f"{s}: MPS is not available on this machine; use cpu")
    elif d.type != "cpu":
        raise argparse.ArgumentTypeError(f"{s}: device type {d.type!r} is not supported; use cpu, cuda, cuda:N or mps")
    return s


def _default_device() -> torch.device:
    """``pick_device()``, with a clear error for a bad ``MUSICTX_DEVICE``."""
    from . import settings
    from .device import pick_device

    if settings.device() is not None:
        try:
            device_arg(settings.device())
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"MUSICTX_DEVICE={settings.device()!r}: {e}") from None
    return pick_device()


def _check_writable(path: str, what: str, directory: bool = False) -> Path:
    """Fail early, before any work, where ``path`` (a file, or a directory) cannot be written."""
    p = Path(path)
    if directory and p.exists() and not p.is_dir():
        raise ValueError(f"{what} {p} exists and is not a directory")
    if not directory and p.is_dir():
        raise ValueError(f"{what} {p} is a directory; give a file name")
    anc = p if directory else p.parent
    while not anc.exists() and anc != anc.parent:        # the first ancestor that exists
        anc = anc.parent
    if not anc.is_dir():
        raise ValueError(f"cannot write {what} {p}: {anc} is a file, not a directory")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write {what} {p}: {anc} is not writable")
    return p


# ---------------------------------------------------------------- commands

def cmd_train(a: argparse.Namespace) -> None:
    from . import build_model, get_profile, train
    from .checkpoint import read_checkpoint
    from .engine import distributed
    from .models.registry import MODELS, n_params

    _check_writable(a.out, "--out", directory=True)
    if a.freeze and a.start_from is None:
        raise ValueError("--freeze keeps the weights --start-from takes: give --start-from too")
    device = a.device if a.device is not None else _default_device()
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
            _start_from(model, a.model, a.start_from, a.freeze)
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


PIANO_SAMPLE = "piano:"            # --data piano:giantmidi[,maestro,scores]: the shared piano sample (chapter 13)


def _train_data(a: argparse.Namespace, model):
    """The data ``train`` reads, checked against the model's task: a folder of MIDI files (``--data-dir``,
    read with ``--codec``), the shared piano sample (``--data piano:VERSIONS``), or the chorales."""
    from . import load_data
    from .io.corpus import SkippedFile, load_folder, load_piano_sample
    from .io.data import SPLITS
    from .models.tasks import EVENTS

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


def _start_from(model, name: str, source: str, freeze: bool = False) -> None:
    """Begin ``model`` as the shipped decoder ``source`` (``Harmoniser.start_from``), with a clear error where
    it cannot: a model without ``start_from``, or a decoder of another size."""
    from . import pretrained

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


def _midi_prompt(path: str, n_steps: int | None) -> tuple[np.ndarray, str]:
    """The tokens (BOS first) of the first ``n_steps`` steps of a four-voice MIDI file (all: None)."""
    from . import encode, read_midi

    grid = read_midi(path)
    if n_steps is None:
        n_steps = len(grid)
    elif n_steps > len(grid):
        raise ValueError(f"--prompt-steps {n_steps} is longer than {path} ({len(grid)} steps)")
    try:
        tokens = encode(grid[:n_steps])
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return tokens, f"{'first ' if n_steps < len(grid) else ''}{n_steps} steps of {path}"


def _chorale_prompt(a: argparse.Namespace, n_steps: int) -> tuple[np.ndarray, str]:
    from . import load_data, prompt_from

    split, index = a.prompt_split or "valid", a.prompt_index or 0
    pieces = load_data(a.data)[split]
    if index >= len(pieces):
        raise ValueError(f"--prompt-index {index} is beyond the {split} split ({len(pieces)} chorales)")
    piece = pieces[index]
    if n_steps > len(piece):
        raise ValueError(f"--prompt-steps {n_steps} is longer than {piece.name} ({len(piece)} steps)")
    return prompt_from(piece, n_steps), f"first {n_steps} steps of {piece.name} ({split})"


def cmd_generate(a: argparse.Namespace) -> None:
    from . import generate, load_checkpoint, write_midi
    from .io.tokens import decode
    from .models.tasks import EVENTS, NEXT_TOKEN

    _check_writable(a.out, "--out")
    if a.pretrained is not None:
        from .study.hub import pretrained, record

        model = pretrained(a.pretrained, device=a.device or "cpu")
        ck = {"model_name": f"pretrained {a.pretrained}", "step": record(a.pretrained)["best_step"]}
    else:
        model, ck = load_checkpoint(a.checkpoint, device=a.device or "cpu")
    if getattr(model, "task", None) is EVENTS:         # a piano model continues a performance (chapter 13)
        return _generate_performance(a, model, ck)
    if a.prompt_seconds is not None or a.events is not None:
        raise ValueError("--prompt-seconds and --events are for piano models (chapter 13); this model writes "
                         "chorale steps: use --prompt-steps and --steps")
    prompt, what = None, "from scratch"
    if a.prompt_midi is not None:
        prompt, what = _midi_prompt(a.prompt_midi, a.prompt_steps)
    if a.prompt_midi is None and a.prompt_steps != 0:
        prompt, what = _chorale_prompt(a, 16 if a.prompt_steps is None else a.prompt_steps)
    ctx = getattr(model, "context", None)
    if prompt is not None and ctx is not None and getattr(model, "task", None) is NEXT_TOKEN and len(prompt) > ctx:
        raise ValueError(f"the prompt ({what}: {len(prompt)} tokens with BOS) does not fit the model's context "
                         f"of {ctx} tokens; use --prompt-steps {(ctx - 1) // 4} or fewer")
    print(f"prompt: {what}")
    tokens = generate(model, prompt, 64 if a.steps is None else a.steps, a.temperature, a.top_k, a.seed)
    path = write_midi(decode(tokens), a.out)
    print(f"wrote {path}: {len(tokens) // 4} steps from {ck['model_name']} (step {ck['step']})")


def _generate_performance(a: argparse.Namespace, model, ck: dict) -> None:
    """``generate`` for a piano model: continue the first ``--prompt-seconds`` of ``--prompt-midi`` (or start
    from nothing) by ``--events`` events, and write the performance as a piano MIDI file."""
    from .engine.sample import generate_events
    from .io.performance import BOS, decode, encode, read_performance, write_performance

    chorale = [f for f, v in (("--prompt-steps", a.prompt_steps), ("--steps", a.steps),
                              ("--prompt-split", a.prompt_split), ("--prompt-index", a.prompt_index)) if v is not None]
    if chorale:
        raise ValueError(f"{', '.join(chorale)}: for chorale models; a piano model continues --prompt-midi FILE's "
                         f"first --prompt-seconds by --events events")
    prompt, what = None, "from scratch"
    if a.prompt_midi is not None:
        perf = read_performance(a.prompt_midi)
        seconds = 5.0 if a.prompt_seconds is None else a.prompt_seconds
        if seconds > perf.seconds:
            raise ValueError(f"--prompt-seconds {seconds:g} is longer than {a.prompt_midi} ({perf.seconds:.1f} s)")
        notes = perf.notes[perf.notes[:, 0] < seconds].copy()
        notes[:, 1] = np.minimum(notes[:, 1], seconds)        # a note sounding at the cut ends there
        prompt = encode(notes) if len(notes) else np.array([BOS])
        if len(prompt) > model.context:
            print(f"the prompt's {len(prompt)} events are more than the model's context of {model.context}: "
                  f"it sees the last {model.context}")
        what = f"first {seconds:g} s of {a.prompt_midi} ({len(prompt) - 1} events)"
    print(f"prompt: {what}")
    tokens = generate_events(model, prompt, a.events or 1024, a.temperature, a.top_k, a.seed)
    notes = decode(tokens)
    path = write_performance(notes, a.out)
    print(f"wrote {path}: {len(notes)} notes, {notes[:, 1].max() if len(notes) else 0:.1f} s, "
          f"{a.events or 1024} events from {ck['model_name']} (step {ck['step']})")


# harmonise --method: the shipped model each way of chapter 12 uses
METHODS = {"decoder": "relative", "harmoniser": "harmoniser", "coconet": "coconet"}


def cmd_harmonise(a: argparse.Namespace) -> None:
    from .engine.harmonise import grid_onsets, harmonise
    from .io.melody import read_melody
    from .io.midi import write_midi
    from .study.hub import pretrained

    if (a.melody_file is None) == (a.melody is None):
        raise ValueError("give the melody once: a file (MIDI, MusicXML, ABC) or --melody \"tinyNotation\"")
    _check_writable(a.out, "--out")
    if a.musicxml is not None:
        _check_writable(a.musicxml, "--musicxml")
    melody = read_melody(a.melody_file or a.melody, track=a.track, transpose=a.transpose)   # fails before the model
    for line in melody.log:
        print(line)
    model = pretrained(METHODS[a.method], device=a.device)
    t0 = time.perf_counter()
    grid = harmonise(model, melody.pitches, a.temperature, a.seed, a.top_k)
    seconds = time.perf_counter() - t0
    onsets = grid_onsets(grid, melody.onsets)                        # the melody's repeated notes restruck
    path = write_midi(grid, a.out, onsets)
    print(f"wrote {path}: {len(grid)} steps harmonised by the shipped {METHODS[a.method]} model "
          f"({a.method}) in {seconds:.2f} s, T = {a.temperature}, seed {a.seed}")
    if a.musicxml is not None:
        from .io.score import to_musicxml

        to_musicxml(grid, onsets, a.musicxml, title="harmonised by musictx-lite")
        print(f"wrote {a.musicxml}")


def cmd_baselines(a: argparse.Namespace) -> None:
    from . import load_data
    from .study.baselines import NGram, SameVoice, TwoTokens

    data = load_data(a.data)
    print(data.source)
    print(f"{'unigram':>22s}: {NGram(1).fit(data.train).nll(data.valid):.3f}")
    for n in range(2, a.max_n + 1):
        print(f"{f'{n}-gram':>22s}: {NGram(n).fit(data.train).nll(data.valid):.3f}")
    print(f"{'same voice, prev. step':>22s}: {SameVoice().fit(data.train).nll(data.valid):.3f}")
    print(f"{'two tokens (x_t-4, x_t-1)':>22s}: {TwoTokens().fit(data.train).nll(data.valid):.3f}")


def cmd_bench(a: argparse.Namespace) -> None:
    from .study.bench import bench_attention, bench_sampling, format_sampling, format_table, plot_bench

    if a.what == "harmonise":                          # chapter 12: seconds per melody of --bars bars
        from .study.bench import bench_harmonise, format_harmonise

        rows = bench_harmonise(bars=a.bars, profile=a.profile, device=a.device, repeats=a.repeats)
        print(f"harmonising, profile {a.profile} sizes, device={a.device}, torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads")
        print(format_harmonise(rows))
        return
    if a.what == "sample":                             # sampling speed, with and without the cache
        rows = bench_sampling(a.models, a.tokens, profile=a.profile, device=a.device)
        print(f"sampling, profile {a.profile} sizes, device={a.device}, torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads")
        print(format_sampling(rows))
        return

    if a.plot:                                         # fail before the benchmark, not after it
        import matplotlib
        from matplotlib.backend_bases import FigureCanvasBase

        kinds = FigureCanvasBase.get_supported_filetypes()
        ext = os.path.splitext(a.plot)[1][1:].lower()
        if not ext:                                    # as matplotlib does: it appends its default format
            a.plot = f"{a.plot.rstrip('.')}.{matplotlib.rcParams['savefig.format']}"
        elif ext not in kinds:
            raise ValueError(f"--plot {a.plot}: matplotlib cannot write .{ext} files; use one of "
                             f"{', '.join(sorted(kinds))}")
        _check_writable(a.plot, "--plot")
    if torch.device(a.device).type == "cuda" and torch.device(a.device).index is not None:
        torch.cuda.set_device(torch.device(a.device))    # bench_attention synchronises and measures "cuda"
        a.device = "cuda"
    rows = bench_attention(a.lengths, a.n_embd, a.heads, a.batch, a.repeats, a.device, a.impl, a.max_gib)
    print(f"attention, forward + backward: n_embd={a.n_embd}, heads={a.heads}, batch={a.batch}, "
          f"device={a.device}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(format_table(rows))
    if a.plot:
        Path(a.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_bench(rows, a.plot)
        print(f"plot: {a.plot}")


def cmd_budget(a: argparse.Namespace) -> None:
    from .engine.profiles import T4_FLOPS, T4_STEP_S, get_profile, t4_minutes, train_flops
    from .models.registry import MODELS, build_model, n_params

    p = get_profile(a.profile)
    print(f"profile {p.name}: estimated training time on a T4 = FLOPs / {T4_FLOPS:.0e} FLOP/s "
          f"+ {1000 * T4_STEP_S:.0f} ms per step (an estimate, not a measurement)")
    print(f"{'model':>22s} {'parameters':>11s} {'steps':>6s} {'PFLOP':>7s} {'T4 min':>7s}")
    for name in MODELS:
        with torch.device("meta"):
            params = n_params(build_model(name, p.model_config(name)))
        print(f"{name:>22s} {params:11,d} {p.train_config(name).max_steps:6d} "
              f"{train_flops(name, p) / 1e15:7.3f} {t4_minutes(name, p):7.2f}")
    from .classroom.chapter import chapter_minutes

    minutes = chapter_minutes(p)
    print("per chapter, every run it trains in a fresh runtime (classroom.chapter.CHAPTER_RUNS), T4 minutes:")
    print("  " + "  ".join(f"{c}: {m:.1f}" for c, m in minutes.items()))
    print(f"the whole book: {sum(minutes.values()):.1f} T4-minutes of training")


def cmd_reproduce(a: argparse.Namespace) -> None:
    from . import get_profile, load_jsb
    from .study.hub import git_commit
    from .study.reproduce import JSB_MODELS, format_table, reproduce_jsb

    _check_writable(a.out, "--out", directory=True)
    device = a.device if a.device is not None else _default_device()
    if a.what == "ablation":
        if a.distil is not None:
            raise ValueError("--distil belongs to reproduce jsb, not to the ablation")
        return _ablation(a, device)
    p = get_profile(a.profile)
    if a.export is not None:
        _check_writable(a.export, "--export", directory=True)
    commit = git_commit()                                            # the code the runs start from
    data = load_jsb() if a.data == "jsb" else load_jsb(a.data)      # sha256-checked: the official file only
    names = a.models or [name for name, _ in JSB_MODELS]
    print(f"profile {p.name}: {', '.join(names)}; data: {data.source}")
    print(f"checkpoints: {a.out}/<model> (a second run resumes them)")
    rows = reproduce_jsb(p, a.out, data, device, progress=not a.quiet, names=names)
    print(format_table(rows))
    if a.distil is not None:
        from .study.reproduce import distil_jsb

        rows = distil_jsb(p, a.out, data, device, progress=not a.quiet, names=names, teachers=a.distil)
        print(f"distilled, each from {a.distil} runs of itself (seeds 0-{a.distil - 1}):")
        print(format_table(rows))
        for r in rows:
            print(f"{r['name']}: its teachers' mean predictions score {r['summary']['teachers_valid_nll']:.4f} "
                  f"on valid")
    if a.export is not None:
        from .study.hub import export

        for r in rows:
            extra = {"commit": commit, **({"note": a.note} if a.note else {})}
            extra.update(r.get("summary", {}))                      # a distilled model: its teachers
            rec = export(r["model"], r["history"], r["train_config"], data, a.export, device=device,
                         extra=extra)
            print(f"exported {a.export}/{rec['file']} ({rec['bytes'] / 2**20:.1f} MiB, float16): "
                  f"valid {rec['valid_nll']:.4f}, test {rec['test_nll']:.4f}")


def cmd_export(a: argparse.Namespace) -> None:
    """``export``: a finished run as a shipped model (float16 weights and a record), as reproduce --export."""
    from . import load_jsb
    from .checkpoint import read_checkpoint
    from .study.hub import export_run

    read_checkpoint(a.run)                                          # a clear error before anything else
    _check_writable(a.to, "--to", directory=True)
    extra = {"note": a.note} if a.note else {}
    if a.data.startswith(PIANO_SAMPLE):                             # chapter 13: the shared piano sample
        from .io.corpus import ATTRIBUTION, load_piano_sample

        versions = tuple(v for v in a.data[len(PIANO_SAMPLE):].split(",") if v)
        data = load_piano_sample(versions)
        if set(versions) - {"giantmidi"}:
            raise ValueError("a shipped model trains on the CC BY transcriptions only (piano:giantmidi): "
                             "MAESTRO is non-commercial and the scores' licence is not stated")
        extra["attribution"] = ATTRIBUTION
    else:
        data = load_jsb() if a.data == "jsb" else load_jsb(a.data)
    rec = export_run(a.run, data, a.to, extra=extra or None)
    print(f"exported {a.to}/{rec['file']} ({rec['bytes'] / 2**20:.1f} MiB, float16): "
          f"valid {rec['valid_nll']:.4f}, test {rec['test_nll']:.4f}"
          + (f"; its teachers' mean: valid {rec['teachers_valid_nll']:.4f}" if "teachers_valid_nll" in rec else ""))


def _check_results_path(path: str | None) -> None:
    if path is not None and not path.endswith(".json"):
        raise ValueError(f"--export names a .json results file, got {path}")


def _write_results(path: str, content: dict, device, commit: str) -> None:
    """A results file: ``content`` with its provenance (command, device, versions, date, and ``commit``, the
    one the run started from), atomically."""
    import json

    from .files import atomic_write
    from .study.hub import provenance

    out = {**provenance(device, commit), **content}
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(out, indent=1) + "\n"))
    print(f"wrote {path}")


def cmd_compare(a: argparse.Namespace) -> None:
    """``compare``: every compared model over several seeds at a profile's comparison budget; a results file."""
    from . import get_profile, load_jsb
    from .study.compare import code_fingerprint, compare_seeds, compared, format_seeds
    from .study.hub import git_commit

    _check_writable(a.out, "--out", directory=True)
    _check_results_path(a.export)
    device = a.device if a.device is not None else _default_device()
    p = get_profile(a.profile)
    data = load_jsb() if a.data == "jsb" else load_jsb(a.data)
    over = {"max_steps": a.steps} if a.steps is not None else {}
    commit = git_commit()                                        # the code this run starts from
    print(f"profile {p.name}: {len(a.models) if a.models else 'every compared'} model(s) x {a.seeds} seeds"
          + (f", {a.steps} steps" if a.steps else "") + f"; data: {data.source}")
    if a.ledger is not None:
        _check_writable(a.ledger, "--ledger", directory=True)
        print(f"ledger: {a.ledger} (runs found there are taken, runs finished here are added)")
    if a.claim and a.ledger is None:
        raise ValueError("--claim shares the runs of a --ledger: name one")
    results = compare_seeds(data, p, range(a.seeds), a.models, a.out, device, progress=not a.quiet,
                            ledger=a.ledger, claims=a.claim, **over)
    print(format_seeds(results))
    missing = [f"{n} seed {s}" for n in a.models or compared() for s in range(a.seeds)
               if s not in {r["seed"] for r in results["models"].get(n, [])}]
    if missing:                                     # held by other processes (--claim)
        print(f"{len(missing)} run(s) held by other processes: {', '.join(missing)}")
        if a.export is not None:
            raise ValueError(f"not exported: {len(missing)} run(s) are not in the ledger yet; run the same "
                             f"command again when the other processes have finished")
    if a.export is not None:
        made = [r["made"] for runs in results["models"].values() for r in runs if "made" in r]
        for r in (r for runs in results["models"].values() for r in runs):
            r.pop("rekeyed", None)                  # the ledger's bookkeeping, not the run's
            if "made" in r:                         # each run keeps where, in what and when it trained
                r["made"] = {k: r["made"][k] for k in ("device", "precision", "date") if k in r["made"]}
        if made:                                    # where the ledger's runs were trained, and when
            results["ledger"] = {"runs": len(made), "code": code_fingerprint(),
                                 **{k: sorted({m[k] for m in made})
                                    for k in ("commit", "device", "torch", "precision")},
                                 "first": min(m["date"] for m in made), "last": max(m["date"] for m in made)}
        _write_results(a.export, {**({"note": a.note} if a.note else {}), **results}, device, commit)


def _ablation(a: argparse.Namespace, device) -> None:
    """``reproduce ablation``: what each ingredient of the recipe buys; with --export, a results file."""
    from . import load_jsb
    from .engine.profiles import ABLATION_BUDGET
    from .study.hub import git_commit
    from .study.reproduce import ABLATION, ablation, format_ablation

    _check_results_path(a.export)
    data = load_jsb() if a.data == "jsb" else load_jsb(a.data)
    seeds = list(range(a.seeds))
    commit = git_commit()
    print(f"ablation: relative attention, {len(ABLATION)} variants x {len(seeds)} seeds, "
          f"{ABLATION_BUDGET['max_steps']} steps each; data: {data.source}")
    rows = ablation(data, a.out, seeds, device=device, progress=not a.quiet)
    print(format_ablation(rows))
    if a.export is not None:
        _write_results(a.export, {"budget": ABLATION_BUDGET, "variants": ABLATION, "rows": rows}, device, commit)


# ---------------------------------------------------------------- parser

def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    from .engine.profiles import PROFILES
    from .models.registry import MODELS
    from .study.bench import implementations
    from .study.compare import compared
    from .study.hub import NAMES as PRETRAINED
    from .study.hub import PIANO

    ap = argparse.ArgumentParser(prog="python -m musictx_lite", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def option(*args, **kw) -> argparse.ArgumentParser:
        """A parent parser holding one option: each shared option is declared once, below."""
        parent = argparse.ArgumentParser(add_help=False)
        parent.add_argument(*args, **kw)
        return parent

    profile = option("--profile", choices=sorted(PROFILES), default=None,
                     help="model size and budget (default: $MUSICTX_PROFILE, else gpu with CUDA, else cpu; "
                          "paper: the recipe of chapter 11)")
    device = option("--device", type=device_arg, default=None,
                    help="cuda, cuda:N, mps or cpu (default: $MUSICTX_DEVICE, else the best available)")
    cpu = option("--device", type=device_arg, default="cpu", help="cuda, cuda:N, mps or cpu (default cpu)")
    data = option("--data", default=None,
                  help="data set: 'chorales' (embedded, default), 'jsb' (official split, downloaded), a path, "
                       "or piano:giantmidi (the shared piano sample's versions, chapter 13)")
    jsb = option("--data", default="jsb", help="'jsb' (the official split, downloaded once and sha256-checked; "
                                               "the default) or the path of a local Jsb16thSeparated.json")
    quiet = option("--quiet", action="store_true", help="no progress bars")
    note = option("--note", default=None, help="a line of provenance stored in what is written (how the runs "
                                               "were made, when not by this command alone)")

    t = sub.add_parser("train", help="train a model; the last line printed is its validation NLL",
                       parents=[profile, data, device, quiet])
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
    t.set_defaults(func=cmd_train)

    g = sub.add_parser("generate", help="sample music from a trained run into a MIDI file", parents=[data, cpu])
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="a run directory written by 'train' (or its ckpt.pt)")
    src.add_argument("--pretrained", choices=PRETRAINED + (PIANO,), metavar="NAME",
                     help="a model shipped with the package: sinusoidal, relative or relative-voice "
                          "(chapter 11; trained on the official JSB split), or piano-local (chapter 13; "
                          "trained on CC BY piano transcriptions)")
    g.add_argument("--out", required=True, help="the .mid file to write")
    g.add_argument("--steps", type=positive_int, default=None,
                   help="16th-note steps to generate (default 64 = 4 bars; piano models take --events)")
    g.add_argument("--temperature", type=positive_float, default=1.0, help="softmax temperature (default 1.0)")
    g.add_argument("--top-k", type=positive_int, default=None, help="sample only among the k likeliest tokens")
    g.add_argument("--prompt-steps", type=nonnegative_int, default=None,
                   help="start from the first N steps of the prompt (0: from scratch; "
                        "default: 16 of a chorale, all of --prompt-midi)")
    g.add_argument("--prompt-midi", default=None, metavar="FILE",
                   help="continue this four-voice MIDI file instead of a chorale of the data set (a piano "
                        "model: any piano MIDI file, its first --prompt-seconds)")
    g.add_argument("--prompt-split", default=None, choices=("train", "valid", "test"),
                   help="split the prompt chorale comes from (default valid)")
    g.add_argument("--prompt-index", type=nonnegative_int, default=None,
                   help="which chorale of that split (default 0)")
    g.add_argument("--prompt-seconds", type=_number(float, lambda v: v >= 0, ">= 0"), default=None,
                   metavar="S", help="piano models: the seconds of --prompt-midi to continue (default 5)")
    g.add_argument("--events", type=positive_int, default=None,
                   help="piano models: events to generate (default 1024, about 10-20 s of music)")
    g.add_argument("--seed", type=seed_int, default=0, help="sampling seed")
    g.set_defaults(func=cmd_generate)

    h = sub.add_parser("harmonise", help="write alto, tenor and bass under a melody (chapter 12) into a MIDI file",
                       parents=[cpu])
    h.add_argument("melody_file", nargs="?", default=None, metavar="MELODY",
                   help="a melody file: MIDI (one line; --track if it has several), MusicXML or ABC")
    h.add_argument("--melody", default=None, help="the melody as music21 tinyNotation, e.g. \"4/4 c'4 d' e' f' g'2\"")
    h.add_argument("--out", required=True, help="the .mid file to write")
    h.add_argument("--musicxml", default=None, metavar="FILE", help="also write the harmonisation as MusicXML")
    h.add_argument("--method", choices=sorted(METHODS), default="decoder",
                   help="decoder: the shipped relative model, the melody given note by note (default); "
                        "harmoniser: the encoder-decoder, which reads the whole melody; coconet: fill-in "
                        "by Gibbs sampling")
    h.add_argument("--temperature", type=positive_float, default=1.0, help="softmax temperature (default 1.0)")
    h.add_argument("--top-k", type=positive_int, default=None, help="sample only among the k likeliest tokens")
    h.add_argument("--seed", type=seed_int, default=0, help="sampling seed")
    h.add_argument("--track", type=nonnegative_int, default=None, help="the melody's track in a MIDI file")
    h.add_argument("--transpose", type=int, default=None,
                   help="semitones to move the melody (default: the whole octaves that put it in the soprano's "
                        "range)")
    h.set_defaults(func=cmd_harmonise)

    b = sub.add_parser("baselines", help="validation NLL of the chapter 0 baselines", parents=[data])
    b.add_argument("--max-n", type=positive_int, default=7, help="largest n-gram order")
    b.set_defaults(func=cmd_baselines)

    c = sub.add_parser("bench", help="time and peak memory of the book's attention implementations",
                       parents=[cpu])
    c.add_argument("what", choices=["attention", "sample", "harmonise"],
                   help="attention: time and memory per length; sample: tokens/s with and without the cache; "
                        "harmonise: seconds to harmonise a melody of --bars bars (chapter 12)")
    c.add_argument("--bars", type=positive_int, default=16, help="harmonise: bars of the melody (default 16)")
    c.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["learned-positions", "relative", "local"],
                   metavar="NAME", help="sample: models to time (default learned-positions relative local)")
    c.add_argument("--tokens", type=_number(int, lambda v: v > 0 and v % 4 == 0, "a positive multiple of 4"),
                   default=1024, help="sample: tokens to sample, the context too (default 1024)")
    c.add_argument("--profile", choices=sorted(PROFILES), default="cpu",
                   help="sample and harmonise: model sizes (default cpu; paper: the recipe's, the shipped models')")
    c.add_argument("--lengths", type=positive_int, nargs="+", default=[128, 256, 512, 1024, 2048],
                   help="sequence lengths (default 128 .. 2048)")
    c.add_argument("--n-embd", type=positive_int, default=128, help="model width (default 128)")
    c.add_argument("--heads", type=positive_int, default=4, help="number of heads, dividing --n-embd (default 4)")
    c.add_argument("--batch", type=positive_int, default=1, help="batch size (default 1)")
    c.add_argument("--repeats", type=positive_int, default=3, help="timed repeats; the best is kept (default 3)")
    impls = list(implementations())
    c.add_argument("--impl", nargs="+", choices=impls, default=None, metavar="NAME",
                   help=f"implementations to run (default all): {', '.join(map(repr, impls))}")
    c.add_argument("--max-gib", type=positive_float, default=4.0,
                   help="skip an implementation where its memory, predicted from its measured growth, "
                        "exceeds this (default 4)")
    c.add_argument("--plot", default=None, help="save a plot of time and memory to this file")
    c.set_defaults(func=cmd_bench)

    m = sub.add_parser("compare", help="train every compared model of chapter 11 over several seeds and write "
                                       "a results file (NLL per piece, for a bootstrap)",
                       parents=[profile, jsb, device, quiet, note])
    m.add_argument("--out", required=True, help="directory: one run per seed and model; an interrupted run resumes")
    m.add_argument("--seeds", type=positive_int, default=3, help="seeds per model (default 3)")
    m.add_argument("--steps", type=positive_int, default=None, help="override the budget's number of steps")
    m.add_argument("--models", nargs="+", choices=sorted(compared()), default=None, metavar="NAME",
                   help="models to train (default every compared one)")
    m.add_argument("--export", default=None, metavar="FILE.json", help="write the results file here")
    m.add_argument("--ledger", default=None, metavar="DIR",
                   help="a folder of finished runs, one file each: runs found there are taken, runs finished here "
                        "are added at once (a comparison longer than one machine's session, or split between "
                        "processes with --models)")
    m.add_argument("--claim", action="store_true",
                   help="share the --ledger's unfinished runs with other processes: each claims a run before it "
                        "trains it and skips those another holds (several processes on one GPU)")
    m.set_defaults(func=cmd_compare)

    u = sub.add_parser("budget", help="estimated training time of every model on a Colab T4, per profile")
    u.add_argument("--profile", choices=sorted(PROFILES), default="gpu", help="profile to estimate (default gpu)")
    u.set_defaults(func=cmd_budget)

    r = sub.add_parser("reproduce", help="train absolute and relative decoders on the official JSB split and "
                                         "compare them with the Music Transformer paper",
                       parents=[profile, jsb, device, quiet, note])
    r.add_argument("what", choices=["jsb", "ablation"],
                   help="jsb: the paper's Table 2 rows; ablation: what each ingredient of the recipe buys")
    r.add_argument("--out", required=True,
                   help="directory: one run per model goes in it; an interrupted run is resumed")
    r.add_argument("--distil", type=_number(int, lambda v: v >= 2, "an integer >= 2"), default=None, metavar="N",
                   help="jsb: also train seeds 1..N-1 of each model and distil the N runs into one model of the "
                        "same size, which --export then ships (the recipe's last step, chapter 11)")
    r.add_argument("--models", nargs="+", choices=PRETRAINED, default=None,
                   metavar="NAME", help="train only these rows (default all three), e.g. one per process")
    r.add_argument("--seeds", type=positive_int, default=1, help="ablation: seeds per variant (default 1)")
    r.add_argument("--export", default=None, metavar="DIR",
                   help="write each trained model in float16 with its record into DIR "
                        "(musictx_lite/pretrained ships them: the 'paper' profile's models)")
    r.set_defaults(func=cmd_reproduce)

    e = sub.add_parser("export", help="ship a finished run: its best weights in float16 and a record with "
                                      "its provenance and NLL (as reproduce --export); a piano model: "
                                      "--data piano:giantmidi", parents=[jsb, note])
    e.add_argument("run", help="a run directory written by 'train'")
    e.add_argument("--to", default="musictx_lite/pretrained", metavar="DIR",
                   help="where <model>.pt and <model>.json go (default musictx_lite/pretrained)")
    e.set_defaults(func=cmd_export)
    return ap, {"train": t, "generate": g, "harmonise": h, "baselines": b, "bench": c, "budget": u,
                "reproduce": r, "compare": m, "export": e}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and cross-check the arguments; a bad one exits with status 2 and a one-line error."""
    ap, parsers = build_parser()
    a = ap.parse_args(argv)
    if a.cmd == "generate":
        if a.prompt_midi is not None:
            if a.prompt_split is not None or a.prompt_index is not None:
                parsers["generate"].error("--prompt-midi cannot be combined with --prompt-split or --prompt-index")
            if a.prompt_steps == 0:
                parsers["generate"].error("--prompt-steps 0 would ignore --prompt-midi; leave one of them out")
    if a.cmd == "bench" and a.n_embd % a.heads:
        parsers["bench"].error(f"--heads {a.heads} does not divide --n-embd {a.n_embd}: "
                               f"each head gets n_embd / heads features")
    return a


def _first_line(e: BaseException) -> str:
    msg = str(e).strip()
    return msg.splitlines()[0] if msg else type(e).__name__


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    try:
        a.func(a)
    except KeyboardInterrupt:
        # train() has written its checkpoint and re-raised: one line, not a traceback
        if a.cmd == "train" and (Path(a.out) / CKPT).exists():
            print(f"interrupted: the checkpoint in {a.out} holds the last complete step; "
                  f"run the same command again to resume", file=sys.stderr)
        elif a.cmd in ("reproduce", "compare") and Path(a.out).is_dir():
            print(f"interrupted: the checkpoints in {a.out} hold the last complete steps; "
                  f"run the same command again to resume", file=sys.stderr)
        else:
            print("interrupted", file=sys.stderr)
        sys.exit(130)
    except (torch.OutOfMemoryError, MemoryError) as e:
        sys.exit(f"error: out of memory: {_first_line(e)}")
    except (ValueError, FloatingPointError, OSError) as e:      # what the package reports; bugs keep their traceback
        sys.exit(f"error: {_first_line(e)}")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
