"""The values the package's checkers compare with, computed by the reference solutions and stored as numbers.

    python -m musictx_solutions.expected           # write musictx_lite/classroom/checks/expected.json
    python -m musictx_solutions.expected --check   # exit 1 if the stored values differ from a fresh run

A checker in ``musictx_lite.classroom.checks`` holds no reference code: where its expected value (or the output of
a known mistake, for its hint) can only come from a reference solution, it reads it here, by chapter
(``grading.expected(5)``). Each chapter module with such values has an ``expected()`` function that computes them
on the checker's seeded inputs; ``tests/classroom/test_expected.py`` recomputes them.
"""
from __future__ import annotations

import argparse
import fcntl
import importlib
import json
import math
import sys

from musictx_lite.classroom.grading import EXPECTED

CHAPTERS = tuple(range(14))


def compute(chapters=CHAPTERS) -> dict:
    """{chapter: its checkers' expected values}, for every chapter module with an ``expected()``."""
    out = {}
    for n in chapters:
        module = importlib.import_module(f"musictx_solutions.ch{n}")
        if hasattr(module, "expected"):
            out[str(n)] = module.expected()
    return out


def close(a, b, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """Equal structures with numbers equal within the tolerances (float32 arithmetic differs across machines)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(close(a[k], b[k], rtol, atol) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(close(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
    return a == b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the stored values instead of writing")
    ap.add_argument("--chapters", type=int, nargs="+", default=list(CHAPTERS),
                    help="only these chapters (the others' stored values stay)")
    a = ap.parse_args(argv)
    values = compute(a.chapters)
    if a.check:
        stored = json.loads(EXPECTED.read_text())
        if not close(values, {k: v for k, v in stored.items() if k in values}):
            print(f"error: {EXPECTED} differs from what the reference solutions compute; run "
                  "python -m musictx_solutions.expected", file=sys.stderr)
            return 1
        print(f"{EXPECTED}: as the reference solutions compute")
        return 0
    with open(EXPECTED.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)                      # several writers at once keep each other's chapters
        stored = json.loads(EXPECTED.read_text()) if EXPECTED.is_file() else {}
        stored = {k: v for k, v in stored.items() if int(k) not in a.chapters}
        EXPECTED.write_text(json.dumps({**stored, **values}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {EXPECTED} ({', '.join(values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
