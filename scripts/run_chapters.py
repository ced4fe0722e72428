"""Run the chapters as a student's fresh Colab runtime would, and record how long each took.

    python -m scripts.run_chapters --profile gpu --out runs/chapters-gpu [--only 07 11] [--shared]

Each chapter executes in a new kernel, in order, with the profile forced (``MUSICTX_PROFILE``) and,
by default, an empty leaderboard and cache of its own: what a fresh runtime has, so a chapter that
needs an earlier chapter's result must train or load it itself. ``--shared`` keeps one leaderboard
for the whole run instead (chapters run one after another in the same runtime). Writes the executed
notebooks and ``chapters.json``: for each chapter its wall time and ``ok``, or the error's first
line, with the run's provenance (command, commit, device, torch, python, date). The lecturer's guide
reads the GPU times from that file. Exit status 1 when a chapter failed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from scripts import ROOT


def run_chapter(path: Path, out_dir: Path, env: dict, timeout: int) -> dict:
    """Execute one notebook in a fresh kernel under ``env``; return its row of ``chapters.json``."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    saved = dict(os.environ)
    os.environ.update(env)                              # the kernel inherits this process's environment
    t0 = time.perf_counter()
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        error = None
    except CellExecutionError as e:
        error = f"{e.ename}: {e.evalue}".splitlines()[0]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    seconds = time.perf_counter() - t0
    nbformat.write(nb, out_dir / path.name)
    return {"chapter": path.stem, "seconds": round(seconds, 1), "ok": error is None, "error": error}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", required=True, choices=("smoke", "cpu", "gpu"))
    ap.add_argument("--out", required=True, type=Path, help="folder for the executed notebooks and chapters.json")
    ap.add_argument("--only", nargs="*", default=None, help="chapter numbers, e.g. 07 11 (default: all)")
    ap.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help=argparse.SUPPRESS)
    ap.add_argument("--shared", action="store_true", help="one leaderboard for the whole run")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    args = ap.parse_args(argv)

    import torch

    from musictx_lite.device import pick_device
    from musictx_lite.experiments.hub import provenance

    paths = sorted(p for p in args.notebooks.glob("*.ipynb")
                   if args.only is None or p.name.split("_")[0] in args.only)
    if not paths:
        print(f"error: no chapter matches {args.only} in {args.notebooks}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    shared = tempfile.mkdtemp(prefix="musictx-")
    rows = []
    for path in paths:
        cache = shared if args.shared else tempfile.mkdtemp(prefix="musictx-")
        env = {"MUSICTX_PROFILE": args.profile, "MUSICTX_CACHE": cache,
               "MUSICTX_LEADERBOARD": os.path.join(cache, "leaderboard")}
        row = run_chapter(path, args.out, env, args.timeout)
        rows.append(row)
        print(f"{row['chapter']:28s} {row['seconds']:8.1f} s  " + ("ok" if row["ok"] else f"FAILED: {row['error']}"),
              flush=True)
    record = {**provenance(pick_device()), "command": " ".join(["python -m scripts.run_chapters", *sys.argv[1:]]),
              "profile": args.profile, "fresh_runtime_per_chapter": not args.shared,
              "cuda": torch.version.cuda, "chapters": rows}
    (args.out / "chapters.json").write_text(json.dumps(record, indent=1) + "\n")
    failed = [r["chapter"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(failed)} of {len(rows)} chapters ran; "
          f"{sum(r['seconds'] for r in rows) / 60:.1f} min in all" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
