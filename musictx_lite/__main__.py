"""Command line: train any model the book has defined, generate music, score baselines.

Notebook: book/using.md explains it; lecturers use it on shared GPU servers.

    python -m musictx_lite train --model lstm-attention --profile cpu --out runs/attn
    python -m musictx_lite generate --checkpoint runs/attn --out attn.mid
    python -m musictx_lite baselines
    python -m musictx_lite bench attention --plot attention.png
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import torch


def cmd_train(a: argparse.Namespace) -> None:
    from . import build_model, get_profile, load_data, train
    from .models import n_params

    p = get_profile(a.profile)
    mcfg = p.model_config(a.model)
    over = {k: v for k, v in (("max_steps", a.steps), ("seed", a.seed)) if v is not None}
    tcfg = p.train_config(a.model, **over)
    data = load_data(a.data)
    torch.manual_seed(tcfg.seed)
    model = build_model(a.model, mcfg)
    print(f"profile {p.name}: {a.model}, {n_params(model):,} parameters, {tcfg.max_steps} steps; data: {data.source}")
    hist = train(model, data, tcfg, out_dir=a.out, device=a.device, progress=not a.quiet)
    print(f"trained {hist.step[-1] if hist.step else 0} steps in {hist.seconds:.0f} s "
          f"({hist.tokens_per_s:,.0f} tokens/s); checkpoint: {a.out}")
    print(f"valid NLL: {hist.final_nll:.4f} nats/token")


def cmd_generate(a: argparse.Namespace) -> None:
    from . import generate, load_checkpoint, load_data, prompt_from, write_midi
    from .tokens import decode

    model, ck = load_checkpoint(a.checkpoint, device=a.device or "cpu")
    prompt = None
    if a.prompt_steps > 0:
        piece = load_data(a.data)[a.prompt_split][a.prompt_index]
        prompt = prompt_from(piece, a.prompt_steps)
        print(f"prompt: first {a.prompt_steps} steps of {piece.name} ({a.prompt_split})")
    tokens = generate(model, prompt, a.steps, a.temperature, a.top_k, a.seed)
    path = write_midi(decode(tokens), a.out)
    print(f"wrote {path}: {len(tokens) // 4} steps from {ck['model_name']} (step {ck['step']})")


def cmd_baselines(a: argparse.Namespace) -> None:
    from . import load_data
    from .baselines import NGram, SameVoice

    data = load_data(a.data)
    print(data.source)
    print(f"{'unigram':>22s}: {NGram(1).fit(data.train).nll(data.valid):.3f}")
    for n in range(2, a.max_n + 1):
        print(f"{f'{n}-gram':>22s}: {NGram(n).fit(data.train).nll(data.valid):.3f}")
    print(f"{'same voice, prev. step':>22s}: {SameVoice().fit(data.train).nll(data.valid):.3f}")


def cmd_bench(a: argparse.Namespace) -> None:
    from .bench import bench_attention, format_table, plot_bench

    rows = bench_attention(a.lengths, a.n_embd, a.heads, a.batch, a.repeats, a.device)
    print(f"attention, forward + backward: n_embd={a.n_embd}, heads={a.heads}, batch={a.batch}, "
          f"device={a.device}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(format_table(rows))
    if a.plot:
        plot_bench(rows, a.plot)
        print(f"plot: {a.plot}")


def main(argv: list[str] | None = None) -> None:
    from .models import MODELS
    from .profiles import PROFILES

    ap = argparse.ArgumentParser(prog="python -m musictx_lite", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    data_help = "data set: 'chorales' (embedded, default), 'jsb' (official split, downloaded), or a path"

    t = sub.add_parser("train", help="train a model; the last line printed is its validation NLL")
    t.add_argument("--model", required=True, choices=sorted(MODELS), help="which model of the book")
    t.add_argument("--profile", choices=sorted(PROFILES), default=None,
                   help="model size and budget (default: $MUSICTX_PROFILE, else gpu with CUDA, else cpu)")
    t.add_argument("--out", required=True, help="run directory: checkpoints go here; an existing one is resumed")
    t.add_argument("--steps", type=int, default=None, help="override the profile's number of training steps")
    t.add_argument("--seed", type=int, default=None, help="random seed (default 0)")
    t.add_argument("--data", default=None, help=data_help)
    t.add_argument("--device", default=None, help="cuda, mps or cpu (default: the best available)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=cmd_train)

    g = sub.add_parser("generate", help="sample music from a trained run into a MIDI file")
    g.add_argument("--checkpoint", required=True, help="a run directory written by 'train' (or its ckpt.pt)")
    g.add_argument("--out", required=True, help="the .mid file to write")
    g.add_argument("--steps", type=int, default=64, help="16th-note steps to generate (default 64 = 4 bars)")
    g.add_argument("--temperature", type=float, default=1.0, help="softmax temperature (default 1.0)")
    g.add_argument("--top-k", type=int, default=None, help="sample only among the k likeliest tokens")
    g.add_argument("--prompt-steps", type=int, default=16,
                   help="start from the first N steps of a held-out chorale (0: from scratch; default 16)")
    g.add_argument("--prompt-split", default="valid", choices=("train", "valid", "test"),
                   help="split the prompt comes from")
    g.add_argument("--prompt-index", type=int, default=0, help="which chorale of that split")
    g.add_argument("--seed", type=int, default=0, help="sampling seed")
    g.add_argument("--data", default=None, help=data_help)
    g.add_argument("--device", default=None, help="device to sample on (default cpu)")
    g.set_defaults(func=cmd_generate)

    b = sub.add_parser("baselines", help="validation NLL of the chapter 0 baselines")
    b.add_argument("--data", default=None, help=data_help)
    b.add_argument("--max-n", type=int, default=7, help="largest n-gram order")
    b.set_defaults(func=cmd_baselines)

    c = sub.add_parser("bench", help="time and peak memory of the book's attention implementations")
    c.add_argument("what", choices=["attention"], help="what to benchmark")
    c.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048],
                   help="sequence lengths (default 128 .. 2048)")
    c.add_argument("--n-embd", type=int, default=128, help="model width (default 128)")
    c.add_argument("--heads", type=int, default=4, help="number of heads (default 4)")
    c.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    c.add_argument("--repeats", type=int, default=3, help="timed repeats; the best is kept (default 3)")
    c.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    c.add_argument("--plot", default=None, help="save a plot of time and memory to this file")
    c.set_defaults(func=cmd_bench)

    a = ap.parse_args(argv)
    try:
        a.func(a)
    except (ValueError, FileNotFoundError, FloatingPointError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
