"""Training speed on one process against several (torchrun), measured in one run; for the appendix.

    python -m scripts.bench_ddp [--model relative] [--profile cpu] [--steps 60] [--procs 2]
                                [--out book/results/ddp-cpu]

Trains the same model with the same global batch and steps three ways, each a fresh command of the
package: one process with one thread, one process with ``--procs`` threads, and ``--procs`` processes
of one thread each under ``torchrun --standalone``. Each reports its training tokens per second (the
time of the steps, evaluation left out). Writes ``OUT.json`` (the numbers and their provenance:
command, commit, machine, versions, date) and ``OUT.md`` (the table the appendix includes).
On a machine with several GPUs, ``--device cuda`` compares one GPU with ``--procs`` of them.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from scripts import ROOT

TRAINED = re.compile(r"trained (\d+) steps in (\d+) s \(([\d,]+) tokens/s\)")


def run(args: list[str], procs: int, threads: int, device: str) -> dict:
    """One training command; its tokens per second, as the package prints them."""
    with tempfile.TemporaryDirectory() as out:
        launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(procs)]
                  if procs > 1 else [sys.executable])
        cmd = launch + ["-m", "musictx_lite", "train", *args, "--device", device, "--out", out, "--quiet"]
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MUSICTX_PROGRESS": "0"}
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
        wall = time.perf_counter() - t
    m = TRAINED.search(r.stdout)
    if r.returncode != 0 or m is None:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return {"processes": procs, "threads": threads, "tokens_per_s": int(m.group(3).replace(",", "")),
            "wall_s": round(wall, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench_ddp", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="relative")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="book/results/ddp-cpu")
    a = ap.parse_args(argv)
    import torch

    from musictx_lite.study.hub import provenance

    train = ["--model", a.model, "--profile", a.profile, "--steps", str(a.steps), "--batch-size", str(a.batch_size)]
    rows = [run(train, 1, 1, a.device), run(train, 1, a.procs, a.device), run(train, a.procs, 1, a.device)]
    base = rows[0]["tokens_per_s"]
    for r in rows:
        r["speedup"] = round(r["tokens_per_s"] / base, 2)
    rec = {**provenance(a.device), "command": " ".join(["python -m scripts.bench_ddp", *(argv or sys.argv[1:])]),
           "cpus": os.cpu_count(), "model": a.model, "profile": a.profile, "steps": a.steps,
           "batch_size": a.batch_size, "rows": rows, "torch_threads_default": torch.get_num_threads()}
    out = ROOT / a.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rec, indent=1) + "\n")
    lines = [f"Measured by `{rec['command']}` at commit {rec['commit']} on {rec['device']}, "
             f"torch {rec['torch']}, {rec['date']}: the `{a.model}` model of the `{a.profile}` profile, "
             f"{a.steps} steps of a global batch of {a.batch_size} crops.", "",
             "| processes | threads each | training tokens/s | against 1 process, 1 thread |",
             "|---|---|---|---|"]
    lines += [f"| {r['processes']} | {r['threads']} | {r['tokens_per_s']:,} | {r['speedup']:.2f}x |" for r in rows]
    one_thread, threads, procs = rows
    lines += ["", f"{a.procs} processes of one thread trained {procs['speedup']:.2f}x as fast as one process of one "
                  f"thread, and {procs['tokens_per_s'] / threads['tokens_per_s']:.2f}x as fast as one process of "
                  f"{a.procs} threads."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
