"""``generate``: sample a trained run or a shipped model into a MIDI file, from scratch, from a chorale or from
your own MIDI file; a piano model continues a performance. Notebook: book/using.md (chapters 11 and 13).
"""
from __future__ import annotations

import argparse

import numpy as np

from .args import _number, check_writable, nonnegative_int, positive_float, positive_int, seed_int


def add_generate(sub, o) -> argparse.ArgumentParser:
    """``generate``'s options; ``o``: the shared ones (``args.shared_options``)."""
    from ..study.hub import NAMES as PRETRAINED
    from ..study.hub import PIANO

    g = sub.add_parser("generate", help="sample music from a trained run into a MIDI file", parents=[o.data, o.cpu])
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
    g.add_argument("--no-rules", dest="rules", action="store_false", default=True,
                   help="piano models: the raw sampler, without the performance grammar (by default every NOTE_OFF "
                        "releases a key that is down, no key is held or no more keys are down than in nearly all of "
                        "the real performances, and every key is released at the end)")
    g.add_argument("--seed", type=seed_int, default=0, help="sampling seed")
    g.set_defaults(func=run_generate, check=check_generate)
    return g


def check_generate(a: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Options that exclude each other: exit with status 2 and one line, as argparse does."""
    if a.prompt_midi is not None:
        if a.prompt_split is not None or a.prompt_index is not None:
            parser.error("--prompt-midi cannot be combined with --prompt-split or --prompt-index")
        if a.prompt_steps == 0:
            parser.error("--prompt-steps 0 would ignore --prompt-midi; leave one of them out")


def run_generate(a: argparse.Namespace) -> None:
    from .. import generate, load_checkpoint, write_midi
    from ..io.tokens import decode
    from ..models.tasks import EVENTS, NEXT_TOKEN

    check_writable(a.out, "--out")
    if a.pretrained is not None:
        from ..study.hub import pretrained, record

        model = pretrained(a.pretrained, device=a.device or "cpu")
        ck = {"model_name": f"pretrained {a.pretrained}", "step": record(a.pretrained)["best_step"]}
    else:
        model, ck = load_checkpoint(a.checkpoint, device=a.device or "cpu")
    if getattr(model, "task", None) is EVENTS:         # a piano model continues a performance (chapter 13)
        return _generate_performance(a, model, ck)
    if a.prompt_seconds is not None or a.events is not None or not a.rules:
        raise ValueError("--prompt-seconds, --events and --no-rules are for piano models (chapter 13); this model "
                         "writes chorale steps: use --prompt-steps and --steps")
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


def _midi_prompt(path: str, n_steps: int | None) -> tuple[np.ndarray, str]:
    """The tokens (BOS first) of the first ``n_steps`` steps of a four-voice MIDI file (all: None)."""
    from .. import encode, read_midi

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
    from .. import load_data, prompt_from

    split, index = a.prompt_split or "valid", a.prompt_index or 0
    pieces = load_data(a.data)[split]
    if index >= len(pieces):
        raise ValueError(f"--prompt-index {index} is beyond the {split} split ({len(pieces)} chorales)")
    piece = pieces[index]
    if n_steps > len(piece):
        raise ValueError(f"--prompt-steps {n_steps} is longer than {piece.name} ({len(piece)} steps)")
    return prompt_from(piece, n_steps), f"first {n_steps} steps of {piece.name} ({split})"


def _generate_performance(a: argparse.Namespace, model, ck: dict) -> None:
    """``generate`` for a piano model: continue the first ``--prompt-seconds`` of ``--prompt-midi`` (or start
    from nothing) by ``--events`` events, and write the performance as a piano MIDI file."""
    from ..engine.grammar import performance_rules
    from ..engine.sample import generate_events
    from ..io.performance import BOS, decode, encode, opening, read_performance, write_performance

    chorale = [f for f, v in (("--prompt-steps", a.prompt_steps), ("--steps", a.steps),
                              ("--prompt-split", a.prompt_split), ("--prompt-index", a.prompt_index)) if v is not None]
    if chorale:
        raise ValueError(f"{', '.join(chorale)}: for chorale models; a piano model continues --prompt-midi FILE's "
                         f"first --prompt-seconds by --events events")
    prompt, what, notes = None, "from scratch", np.zeros((0, 4))
    if a.prompt_midi is not None:
        perf = read_performance(a.prompt_midi)
        seconds = 5.0 if a.prompt_seconds is None else a.prompt_seconds
        if seconds > perf.seconds:
            raise ValueError(f"--prompt-seconds {seconds:g} is longer than {a.prompt_midi} ({perf.seconds:.1f} s)")
        notes = opening(perf.notes, seconds)                  # from the first note: its first seconds of music
        prompt = encode(notes) if len(notes) else np.array([BOS])
        if len(prompt) > model.context:
            print(f"the prompt's {len(prompt)} events are more than the model's context of {model.context}: "
                  f"it sees the last {model.context}")
        what = (f"first {seconds:g} s of {a.prompt_midi} from its first note ({len(notes)} notes, "
                f"{len(prompt) - 1} events)")
    print(f"prompt: {what}")
    info = {}
    velocity = float(notes[:, 3].mean()) if a.prompt_midi is not None and len(notes) else None
    rules = performance_rules(prompt_velocity=velocity) if a.rules else None
    tokens = generate_events(model, prompt, a.events or 1024, a.temperature, a.top_k, a.seed, rules=rules, info=info)
    notes = decode(tokens)
    path = write_performance(notes, a.out)
    how = "the raw sampler (--no-rules)"
    if rules:
        by = {r.name: r for r in rules}
        band = ", the prompt's loudness band" if "loudness" in by else ""
        how = (f"the performance grammar (A0 to C8, longest hold {by['hold'].ticks / 100:g} s, at most "
               f"{by['keys'].keys} notes sounding{band}; {info['dead_ends']} dead ends, {info['released_at_end']} "
               "released at the end)")
    print(f"wrote {path}: {len(notes)} notes, {notes[:, 1].max() if len(notes) else 0:.1f} s, "
          f"{a.events or 1024} events from {ck['model_name']} (step {ck['step']}), {how}")
