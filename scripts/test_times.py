"""Where CI's time goes: per test file (a notebook is a file, each of its cells a test), the slowest tests and
cells, from the JUnit XML that ``make test`` writes (``_build/junit.xml``), appended to a committed record.

    python -m scripts.test_times _build/junit.xml --out results/ci-times.json [--ci-seconds N] [--note "..."]

``--ci-seconds``: the whole of ``bash .ci/run`` (set-up included), measured outside it. With two workers
under ``--dist loadfile`` a file runs on one worker: the longest files bound the wall time from below, and the
sum over files over two is what two perfectly busy workers would take.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def read(junit: Path) -> dict:
    """Per-file seconds, the slowest tests and cells, and the totals of a JUnit XML file from pytest."""
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    files, tests, cells = Counter(), [], []
    for tc in suite.iter("testcase"):
        cls, name, s = tc.get("classname"), tc.get("name"), float(tc.get("time") or 0)
        path = cls.replace(".", "/", cls.count(".") - 1) if cls.endswith(".ipynb") else cls.replace(".", "/") + ".py"
        files[path] += s
        (cells if path.endswith(".ipynb") else tests).append((s, path, name))
    n_failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    return {"pytest_seconds": round(float(suite.get("time")), 1), "tests": int(suite.get("tests")),
            "failed": n_failed, "skipped": int(suite.get("skipped", 0)),
            "sum_over_files_seconds": round(sum(files.values()), 1),
            "files": {f: round(s, 1) for f, s in files.most_common()},
            "slowest_tests": [f"{s:.1f} s {p}::{n}" for s, p, n in sorted(tests, reverse=True)[:25]],
            "slowest_cells": [f"{s:.1f} s {p} {n}" for s, p, n in sorted(cells, reverse=True)[:25]]}


def machine() -> str:
    try:
        model = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                     if ln.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or platform.machine()
    import os

    return f"{model}, {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.test_times", description=__doc__.split("\n\n")[0])
    ap.add_argument("junit", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "ci-times.json")
    ap.add_argument("--ci-seconds", type=float, default=None, help="bash .ci/run's wall time, set-up included")
    ap.add_argument("--note", default=None)
    a = ap.parse_args(argv)
    if not a.junit.is_file():
        print(f"error: no JUnit file at {a.junit}: run make test first", file=sys.stderr)
        return 2
    import torch

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    run = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
           "machine": machine(), "python": platform.python_version(), "torch": torch.__version__,
           **({"ci_seconds": round(a.ci_seconds)} if a.ci_seconds else {}), **({"note": a.note} if a.note else {}),
           **read(a.junit)}
    runs = json.loads(a.out.read_text()) if a.out.is_file() else []
    a.out.write_text(json.dumps(runs + [run], indent=1) + "\n")
    top = ", ".join(f"{f} {s:.0f} s" for f, s in list(run["files"].items())[:5])
    print(f"{a.out}: run {len(runs) + 1}: pytest {run['pytest_seconds']:.0f} s"
          + (f", .ci/run {run['ci_seconds']} s" if a.ci_seconds else "") + f"; longest files: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
