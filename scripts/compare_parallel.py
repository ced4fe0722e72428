"""Fill a comparison's ledger with several processes at once (one GPU, or CPU cores), then export it.

    python -m scripts.compare_parallel --workers 8 --steps 3000 --ledger results/compare-3000 \\
        --export musictx_lite/pretrained/compare.json [--deadline 540] [--copy-to $OUT]

Each worker is ``python -m musictx_lite compare --ledger LEDGER --claim``: it claims the ledger's unfinished
runs one at a time and skips those another worker holds, so the workers share the runs without a plan. They
all go through the models in one order, the costliest first (``costliest_first``), so that the longest
runs start early. Small models leave a GPU mostly idle:
several processes keep it busy.

At ``--deadline`` seconds the workers get Ctrl-C: a run in progress writes its checkpoint (under ``--out``, on
this machine), and every finished run is already in the ledger, which is what a later call, on this machine
or another, goes on from. Once every run is in, the ledger is exported to ``--export`` by ``compare``, which
then trains nothing. ``--copy-to DIR`` puts there what a borrowed machine must hand back: the ledger as
``ledger.tar.gz``, the export, and ``compare-parallel.json`` (the workers, their exit codes, the runs done).
Exit status 0 when the export was written, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from scripts import ROOT


def costliest_first(names: list[str], profile: str = "paper") -> list[str]:
    """``names``, the costliest to train first: by the cost model's training FLOPs (``profiles.train_flops``,
    the same on every device), ties by the seconds per run that the shipped ``compare.json`` records on the
    device that trained most of its runs (a file from several machines has seconds of different speeds)."""
    from collections import Counter

    from musictx_lite.engine.profiles import train_flops
    from musictx_lite.study.hub import HERE

    try:
        res = json.loads((HERE / "compare.json").read_text())
        runs = [(n, r) for n, rs in res["models"].items() for r in rs]
        where = Counter(r.get("made", {}).get("device", res["device"]) for _, r in runs).most_common(1)[0][0]
        seconds: dict[str, float] = {}
        for n, r in runs:
            if r.get("made", {}).get("device", res["device"]) == where:
                seconds[n] = max(seconds.get(n, 0.0), r["seconds"])
    except (OSError, ValueError, KeyError, IndexError):
        seconds = {}
    return sorted(names, key=lambda n: (-train_flops(n, profile), -seconds.get(n, 0.0)))


def runs_done(ledger: Path) -> int:
    return len(list(ledger.glob("*.seed-*.json"))) if ledger.is_dir() else 0


def _hear_ctrl_c() -> None:
    """In a worker, before it starts: Ctrl-C as Python's default. A command started in the background by a shell
    ignores SIGINT, and its children inherit that; a worker that ignored it could not write its checkpoint."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop(procs: list[subprocess.Popen], grace: float = 60.0) -> None:
    """Ctrl-C to every worker (a run in progress writes its checkpoint), then a kill after ``grace`` seconds."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    end = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4, help="processes (default 4)")
    ap.add_argument("--ledger", required=True, type=Path, help="the ledger folder (compare --ledger)")
    ap.add_argument("--export", required=True, help="the results file, written once every run is in")
    ap.add_argument("--profile", default="paper", help="the comparison's profile (default paper)")
    ap.add_argument("--steps", type=int, default=None, help="compare --steps")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per model (default 3)")
    ap.add_argument("--models", nargs="+", default=None, help="default: every compared model")
    ap.add_argument("--data", default="jsb", help="compare --data (default jsb)")
    ap.add_argument("--out", default="runs/compare", help="the workers' checkpoints (default runs/compare)")
    ap.add_argument("--deadline", type=float, default=None, help="seconds before the workers are stopped")
    ap.add_argument("--copy-to", type=Path, default=None, help="folder for the ledger's archive, the export, logs")
    ap.add_argument("--grace", type=float, default=60.0,
                    help="seconds a stopped worker has to write its checkpoint before it is killed (default 60)")
    args = ap.parse_args(argv)
    if args.workers < 1:
        ap.error("--workers must be at least 1")

    from musictx_lite.study.compare import compared

    names = costliest_first(args.models or list(compared()), args.profile)
    base = [sys.executable, "-m", "musictx_lite", "compare", "--profile", args.profile, "--seeds", str(args.seeds),
            "--out", args.out, "--data", args.data, "--ledger", str(args.ledger), "--quiet"]
    base += ["--steps", str(args.steps)] if args.steps else []
    logs = args.copy_to or Path(args.out)             # the workers' logs: not into the committed ledger's folder
    logs.mkdir(parents=True, exist_ok=True)
    threads = str(max(1, (os.cpu_count() or 1) // args.workers))
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MUSICTX_PROGRESS": "0"}
    args.ledger.mkdir(parents=True, exist_ok=True)
    before, t0 = runs_done(args.ledger), time.monotonic()
    procs = []
    for w in range(args.workers):
        with open(logs / f"worker-{w}.log", "w") as log:
            procs.append(subprocess.Popen(base + ["--claim", "--models"] + names, cwd=ROOT, env=env,
                                          stdout=log, stderr=subprocess.STDOUT, preexec_fn=_hear_ctrl_c))
        time.sleep(2)                                  # claims in turn: worker w starts on the w-th run
    while any(p.poll() is None for p in procs):
        if args.deadline is not None and time.monotonic() - t0 > args.deadline:
            print(f"deadline: {args.deadline:.0f} s; stopping the workers", flush=True)
            stop(procs, args.grace)
            break
        time.sleep(1)
    total, done = len(names) * args.seeds, runs_done(args.ledger)
    print(f"{done - before} run(s) finished here in {time.monotonic() - t0:.0f} s; the ledger holds {done} of "
          f"{total}", flush=True)
    exported = False
    if done >= total:
        note = (f"trained by {args.workers} processes sharing one ledger ({args.ledger}), by python -m "
                f"scripts.compare_parallel; exported from the ledger")
        export = subprocess.run(base + ["--models"] + names + ["--export", args.export, "--note", note], cwd=ROOT,
                                env=env, capture_output=True, text=True)
        print(export.stdout[-2000:] + export.stderr[-2000:], flush=True)
        exported = export.returncode == 0
    if args.copy_to is not None:
        with tarfile.open(args.copy_to / "ledger.tar.gz", "w:gz") as tar:
            tar.add(args.ledger, arcname=args.ledger.name,
                    filter=lambda ti: None if ti.name.endswith(".claim") else ti)
        if exported:
            shutil.copy(ROOT / args.export, args.copy_to / Path(args.export).name)
        (args.copy_to / "compare-parallel.json").write_text(json.dumps({
            "workers": args.workers, "threads_per_worker": int(threads), "order": names,
            "exit_codes": [p.returncode for p in procs], "runs_before": before, "runs_after": done, "runs": total,
            "seconds": round(time.monotonic() - t0, 1), "exported": exported}, indent=1) + "\n")
    return 0 if exported else 1


if __name__ == "__main__":
    sys.exit(main())
