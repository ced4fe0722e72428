"""The commands that measure: ``baselines`` (chapter 0's n-grams), ``bench`` (attention's time and memory, sampling
speed, harmonising speed: chapters 4, 8, 9, 11, 12) and ``budget`` (training minutes on a T4 per profile).
Notebook: book/using.md.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from .args import _number, check_writable, positive_float, positive_int


def add_baselines(sub, o) -> argparse.ArgumentParser:
    """``baselines``'s options; ``o``: the shared ones (``args.shared_options``)."""
    b = sub.add_parser("baselines", help="validation NLL of the chapter 0 baselines", parents=[o.data])
    b.add_argument("--max-n", type=positive_int, default=7, help="largest n-gram order")
    b.set_defaults(func=run_baselines)
    return b


def add_bench(sub, o) -> argparse.ArgumentParser:
    """``bench``'s options; ``o``: the shared ones (``args.shared_options``)."""
    from ..engine.profiles import PROFILES
    from ..models.registry import MODELS
    from ..study.bench import implementations

    c = sub.add_parser("bench", help="time and peak memory of the book's attention implementations",
                       parents=[o.cpu])
    c.add_argument("what", choices=["attention", "sample", "harmonise"],
                   help="attention: time and memory per length; sample: tokens/s with and without the cache; "
                        "harmonise: seconds to harmonise a melody of --bars bars (chapter 12)")
    c.add_argument("--bars", type=positive_int, default=16, help="harmonise: bars of the melody (default 16)")
    c.add_argument("--rules", choices=("all", "four", "none"), default="default",
                   help="harmonise: the rules applied while sampling (default: harmonise's)")
    c.add_argument("--candidates", type=positive_int, default=None,
                   help="harmonise: harmonisations drawn, the likeliest kept (default: harmonise's)")
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
    c.set_defaults(func=run_bench, check=check_bench)
    return c


def add_budget(sub, o) -> argparse.ArgumentParser:
    """``budget``'s options; ``o``: the shared ones (``args.shared_options``)."""
    from ..engine.profiles import PROFILES

    u = sub.add_parser("budget", help="estimated training time of every model on a Colab T4, per profile")
    u.add_argument("--profile", choices=sorted(PROFILES), default="gpu", help="profile to estimate (default gpu)")
    u.set_defaults(func=run_budget)
    return u


def check_bench(a: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if a.n_embd % a.heads:
        parser.error(f"--heads {a.heads} does not divide --n-embd {a.n_embd}: each head gets n_embd / heads features")


def run_baselines(a: argparse.Namespace) -> None:
    from .. import load_data
    from ..study.baselines import NGram, SameVoice, TwoTokens

    data = load_data(a.data)
    print(data.source)
    print(f"{'unigram':>22s}: {NGram(1).fit(data.train).nll(data.valid):.3f}")
    for n in range(2, a.max_n + 1):
        print(f"{f'{n}-gram':>22s}: {NGram(n).fit(data.train).nll(data.valid):.3f}")
    print(f"{'same voice, prev. step':>22s}: {SameVoice().fit(data.train).nll(data.valid):.3f}")
    print(f"{'two tokens (x_t-4, x_t-1)':>22s}: {TwoTokens().fit(data.train).nll(data.valid):.3f}")


def run_bench(a: argparse.Namespace) -> None:
    from ..study.bench import bench_attention, bench_sampling, format_sampling, format_table, plot_bench

    if a.what == "harmonise":                          # chapter 12: seconds per melody of --bars bars
        from ..study.bench import bench_harmonise, format_harmonise

        rows = bench_harmonise(bars=a.bars, profile=a.profile, device=a.device, repeats=a.repeats, rules=a.rules,
                               candidates=a.candidates)
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
        check_writable(a.plot, "--plot")
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


def run_budget(a: argparse.Namespace) -> None:
    from ..engine.profiles import T4_FLOPS, T4_STEP_S, get_profile, t4_minutes, train_flops
    from ..models.registry import MODELS, build_model, n_params

    p = get_profile(a.profile)
    print(f"profile {p.name}: estimated training time on a T4 = FLOPs / {T4_FLOPS:.0e} FLOP/s "
          f"+ {1000 * T4_STEP_S:.0f} ms per step (an estimate, not a measurement)")
    print(f"{'model':>22s} {'parameters':>11s} {'steps':>6s} {'PFLOP':>7s} {'T4 min':>7s}")
    for name in MODELS:
        with torch.device("meta"):
            params = n_params(build_model(name, p.model_config(name)))
        print(f"{name:>22s} {params:11,d} {p.train_config(name).max_steps:6d} "
              f"{train_flops(name, p) / 1e15:7.3f} {t4_minutes(name, p):7.2f}")
    from ..classroom.chapter import chapter_minutes

    minutes = chapter_minutes(p)
    print("per chapter, every run it trains in a fresh runtime (classroom.chapter.CHAPTER_RUNS), T4 minutes:")
    print("  " + "  ".join(f"{c}: {m:.1f}" for c, m in minutes.items()))
    print(f"the whole book: {sum(minutes.values()):.1f} T4-minutes of training")
