"""Run the chapters as a student's fresh Colab runtime would, several at once, and keep a ledger of their times.

    python -m scripts.run_chapters --profile gpu --out runs/chapters-gpu [--workers 4] [--only 07 11]
        [--deadline 780] [--chapter-timeout 600] [--redo] [--shared]

Each chapter executes in a new kernel with the profile forced (``MUSICTX_PROFILE``) and, by default, an empty
leaderboard and cache of its own: what a fresh runtime has, so a chapter that needs an earlier chapter's result
must train or load it itself. ``--workers`` chapters run at once, each in a process of its own (``--one``), so a
kernel that dies or a process that crashes takes no other chapter with it; the longest start first, by the
seconds the ledger holds for them, else chapters 11, 8, 1, 7, 9, 5, then the rest by descending number.
``--shared`` keeps one leaderboard for the whole run instead: the chapters then run one after another, in order.

``--out`` is a ledger, written as each chapter ends: ``<chapter>.json`` (seconds, ok, the first line of the
error, the profile, device, versions, commit, date and command), the executed notebook ``<chapter>.ipynb`` (as far
as it got) and the output of the chapter's process, ``<chapter>.log``. A later run with the same ``--out``
completes it: the chapters recorded ok in this profile are skipped (``--redo`` runs them again), the others run.
So a borrowed machine's time may run out (``--deadline``: no chapter starts after it; those not started are not
in the ledger) without losing what finished. A cell past ``--timeout``, a kernel that dies, a chapter past
``--chapter-timeout`` (its kernel is killed) or any other error is that chapter's failure, with the reason.
At the end ``chapters.json`` sums up every chapter in the ledger, with this run's provenance; the lecturer's
guide reads the GPU times from it, ``scripts.colab_env`` the results. Exit status 1 when a chapter in the ledger
failed, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from scripts import ROOT

SLOWEST = ("11", "08", "01", "07", "09", "05")   # the slow chapters, slowest first: the order without times
WORKERS = 4


def number(path: Path) -> str:
    return path.name.split("_")[0]


def first_line(error: str | None) -> str | None:
    return None if error is None else (error.strip().splitlines() or [""])[0]


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it: a run killed while writing leaves the
    old file or the new one, never half of one (the ledger is read back by the next run)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_ledger(out: Path) -> dict[str, dict]:
    """The chapter records in ``out``: chapter name -> record."""
    records = {}
    for p in sorted(out.glob("*.json")):
        if p.name == "chapters.json" or p.name.startswith("."):
            continue
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("chapter") == p.stem:
            records[p.stem] = rec
    return records


def longest_first(paths: list[Path], ledger: dict[str, dict]) -> list[Path]:
    """``paths``, the longest first, so that the last chapter to finish is a short one: those with seconds in the
    ledger by them, then the others in the static order (``SLOWEST``, then descending chapter number)."""
    seconds = {stem: rec["seconds"] for stem, rec in ledger.items() if isinstance(rec.get("seconds"), (int, float))}
    timed = sorted((p for p in paths if p.stem in seconds), key=lambda p: -seconds[p.stem])
    rank = {n: i for i, n in enumerate(SLOWEST)}
    rest = sorted((p for p in paths if p.stem not in seconds),
                  key=lambda p: (rank.get(number(p), len(SLOWEST)), -int(number(p)) if number(p).isdigit() else 0))
    return timed + rest


def run_one(path: Path, out: Path, timeout: int) -> int:
    """The child's side (``--one``): execute one notebook in a fresh kernel, which inherits this process's
    environment; save it as far as it got; leave its seconds, ok and error in ``out/.<chapter>.result.json``,
    which the parent makes the chapter's record. Imports neither torch nor the package: a child starts fast."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})

    t0 = time.perf_counter()
    try:
        # SIGTERM (the parent's --chapter-timeout) or Ctrl-C: nbclient's own handler shuts the kernel down, its
        # process group (it and whatever it started) killed, the kernel being in a session of its own
        client.execute()
        error = None
    except CellExecutionError as e:               # a cell raised: its exception, as the notebook shows it
        error = f"{e.ename}: {e.evalue}"
    except Exception as e:                        # CellTimeoutError, DeadKernelError, a kernel that would not start
        error = f"{type(e).__name__}: {e}"
    seconds = time.perf_counter() - t0
    write_atomic(out / path.name, nbformat.writes(nb))                  # as far as it got
    write_atomic(out / f".{path.stem}.result.json",
                 json.dumps({"seconds": round(seconds, 1), "ok": error is None, "error": first_line(error)}))
    return 0


@dataclass
class Child:
    """A chapter running in its own process."""
    path: Path
    proc: subprocess.Popen
    t0: float
    cache: str | None                             # its own cache, removed when it ends (None: the shared one)


def start(path: Path, args, cache: str, workers: int) -> subprocess.Popen:
    """Start ``python -m scripts.run_chapters --one PATH`` with the chapter's environment (given to the child,
    not set in this process, where other chapters' children start too)."""
    env = {**os.environ, "MUSICTX_PROFILE": args.profile, "MUSICTX_CACHE": cache,
           "MUSICTX_LEADERBOARD": os.path.join(cache, "leaderboard")}
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:   # kernels with a thread per core each fight over them
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    (args.out / f".{path.stem}.result.json").unlink(missing_ok=True)    # a killed run's, not this one's
    with open(args.out / f"{path.stem}.log", "w") as log:
        return subprocess.Popen([sys.executable, "-m", "scripts.run_chapters", "--one", str(path),
                                 "--profile", args.profile, "--out", str(args.out), "--timeout", str(args.timeout)],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen) -> None:
    """End a child: SIGTERM lets it shut its kernel down and save its notebook; SIGKILL if it does not."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def result(child: Child, out: Path, timed_out: float | None) -> dict:
    """The chapter's seconds, ok and error: the child's own, else why it left none (its exit status and the last
    line of its log: a segfault, an out-of-memory kill)."""
    seconds = round(time.monotonic() - child.t0, 1)
    res_path = out / f".{child.path.stem}.result.json"
    try:
        res = json.loads(res_path.read_text())
        res_path.unlink()
    except (OSError, ValueError):
        res = None
    if timed_out is not None:
        return {"seconds": seconds, "ok": False, "error": f"timeout after {timed_out:g} s"}
    if res is not None:
        return res
    try:
        tail = [ln for ln in (out / f"{child.path.stem}.log").read_text(errors="replace")[-4000:].splitlines()
                if ln.strip()][-1:]
    except OSError:
        tail = []
    return {"seconds": seconds, "ok": False,
            "error": f"its process ended with exit status {child.proc.returncode} and no result"
                     + (f" ({tail[0].strip()})" if tail else "")}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", required=True, choices=("smoke", "cpu", "gpu"))
    ap.add_argument("--out", required=True, type=Path,
                    help="the ledger: a record, the executed notebook and a log per chapter, and chapters.json")
    ap.add_argument("--only", nargs="*", default=None, help="chapter numbers, e.g. 07 11 (default: all)")
    ap.add_argument("--workers", type=int, default=None,
                    help=f"chapters run at once, each in its own process (default {WORKERS}; 1 with --shared)")
    ap.add_argument("--shared", action="store_true",
                    help="one leaderboard and cache for the whole run: the chapters run serially, in order, "
                         "every one of them (a later chapter may need what an earlier one left)")
    ap.add_argument("--redo", action="store_true", help="run again the chapters the ledger has as ok")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per cell (default 3600)")
    ap.add_argument("--chapter-timeout", type=float, default=None,
                    help="seconds per chapter, kernel start included: then its kernel is killed (default: none)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="no chapter starts after this many seconds from the start; those not started are left "
                         "out of the ledger, for a later run (default: none)")
    ap.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help=argparse.SUPPRESS)
    ap.add_argument("--one", type=Path, default=None, help=argparse.SUPPRESS)     # the child's side
    args = ap.parse_args(argv)
    if args.one is not None:
        return run_one(args.one, args.out, args.timeout)

    t_start = time.monotonic()
    if args.shared and args.workers not in (None, 1):
        print("error: --shared runs the chapters serially, in order: --workers must be 1", file=sys.stderr)
        return 2
    workers = 1 if args.shared else WORKERS if args.workers is None else args.workers
    if workers < 1:
        print("error: --workers must be at least 1", file=sys.stderr)
        return 2
    paths = sorted(args.notebooks.glob("*.ipynb"))
    if args.only is not None:
        wanted = {n.zfill(2) for n in args.only}
        unknown = sorted(wanted - {number(p) for p in paths})
        if unknown or not wanted:
            print(f"error: no chapter matches {' '.join(unknown) or '(none given)'} in {args.notebooks}",
                  file=sys.stderr)
            return 2
        paths = [p for p in paths if number(p) in wanted]
    if not paths:
        print(f"error: no chapter in {args.notebooks}", file=sys.stderr)
        return 2

    import platform

    import torch

    import musictx_lite
    from musictx_lite.device import pick_device
    from musictx_lite.study.hub import provenance

    args.out.mkdir(parents=True, exist_ok=True)
    ledger = read_ledger(args.out)
    # ok in this profile, and in a fresh runtime: one that passed in a --shared run may need an earlier chapter
    skip = [p for p in paths if not (args.redo or args.shared) and ledger.get(p.stem, {}).get("ok")
            and ledger[p.stem].get("profile") == args.profile and ledger[p.stem].get("fresh_runtime_per_chapter")]
    todo = [p for p in paths if p not in skip]
    if skip:
        print(f"ok in the ledger, not run again (--redo runs them): {', '.join(p.stem for p in skip)}", flush=True)
    if not args.shared:
        todo = longest_first(todo, ledger)
    prov = provenance(pick_device())              # once: git_commit() honours $MUSICTX_COMMIT where git cannot say
    command = " ".join(["python -m scripts.run_chapters", *argv])
    stamp = {"profile": args.profile, "fresh_runtime_per_chapter": not args.shared, "device": prov["device"],
             "versions": {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                          "musictx_lite": musictx_lite.__version__},
             "commit": prov["commit"], "command": command}
    shared = tempfile.mkdtemp(prefix="musictx-") if args.shared else None

    def finish(child: Child, timed_out: float | None = None) -> None:
        """Write the chapter's record the moment it ends, and say how it went."""
        nonlocal ended
        ended += 1
        rec = {"chapter": child.path.stem, **result(child, args.out, timed_out), **stamp,
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "notebook": child.path.name, "log": f"{child.path.stem}.log"}
        write_atomic(args.out / f"{child.path.stem}.json", json.dumps(rec, indent=1) + "\n")
        if child.cache:
            shutil.rmtree(child.cache, ignore_errors=True)
        print(f"{rec['chapter']:28s} {rec['seconds']:8.1f} s  " + ("ok" if rec["ok"] else f"FAILED: {rec['error']}"),
              flush=True)

    def open_for_starts() -> bool:
        return args.deadline is None or time.monotonic() - t_start < args.deadline

    running: list[Child] = []
    ended = 0
    status = 0
    try:
        while running or (todo and open_for_starts()):
            while todo and len(running) < workers and open_for_starts():
                path = todo.pop(0)
                cache = shared or tempfile.mkdtemp(prefix="musictx-")
                running.append(Child(path, start(path, args, cache, workers), time.monotonic(),
                                     None if shared else cache))
            time.sleep(0.2)
            for child in list(running):
                if child.proc.poll() is not None:
                    running.remove(child)
                    finish(child)
                elif args.chapter_timeout is not None and time.monotonic() - child.t0 > args.chapter_timeout:
                    stop(child.proc)
                    running.remove(child)
                    finish(child, timed_out=args.chapter_timeout)
    except KeyboardInterrupt:                     # the chapters cut short are left out of the ledger, for a later run
        for child in running:
            stop(child.proc)
            (args.out / f".{child.path.stem}.result.json").unlink(missing_ok=True)
            if child.cache:
                shutil.rmtree(child.cache, ignore_errors=True)
            print(f"{child.path.stem:28s} interrupted", flush=True)
        todo = [child.path for child in running] + todo
        status = 130
    finally:
        if shared:
            shutil.rmtree(shared, ignore_errors=True)

    ledger = read_ledger(args.out)
    rows = [{k: rec.get(k) for k in ("chapter", "seconds", "ok", "error", "profile", "device", "commit", "date")}
            for rec in ledger.values()]
    summary = {**{k: prov[k] for k in ("commit", "device", "torch", "python")},
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "command": command,
               "profile": args.profile, "fresh_runtime_per_chapter": not args.shared, "cuda": torch.version.cuda,
               "musictx_lite": musictx_lite.__version__, "chapters": rows}
    write_atomic(args.out / "chapters.json", json.dumps(summary, indent=1) + "\n")
    failed = [r["chapter"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(failed)} of {len(rows)} chapters in the ledger ok; this run ran {ended} in "
          f"{(time.monotonic() - t_start) / 60:.1f} min"
          + (f"; failed: {', '.join(failed)}" if failed else "")
          + (f"; not started: {', '.join(p.stem for p in todo)}" if todo else ""), flush=True)
    return status or (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
