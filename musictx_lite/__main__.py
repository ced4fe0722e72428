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
import sys
from pathlib import Path

import numpy as np
import torch

from .checkpoint import CKPT
from .cli import generate, harmonise, measure, reproduce, train
from .cli.args import shared_options

# the subcommands in the order --help lists them: each module declares its options beside its run
SUBCOMMANDS = [train.add_train, generate.add_generate, harmonise.add_harmonise, measure.add_baselines,
               measure.add_bench, reproduce.add_compare, measure.add_budget, reproduce.add_reproduce,
               reproduce.add_export]


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser, and each subcommand's own (for its errors)."""
    ap = argparse.ArgumentParser(prog="python -m musictx_lite", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = shared_options()
    parsers = [add(sub, o) for add in SUBCOMMANDS]
    return ap, {p.prog.split()[-1]: p for p in parsers}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and cross-check the arguments; a bad one exits with status 2 and a one-line error."""
    ap, parsers = build_parser()
    a = ap.parse_args(argv)
    if getattr(a, "check", None) is not None:            # options that exclude each other (the subcommand's check)
        a.check(a, parsers[a.cmd])
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
