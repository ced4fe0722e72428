"""Synthetic submissions of a week, for the tests and the grading benchmark: right, partly right, empty, crashing,
looping and broken ones, each with the score it must get.

    python -m musictx_course.synthetic --secret S --week 1 --students 60 --out /tmp/course [--grade] [--record F]

With ``--grade`` it also grades them as the TA would (two at a time, the full time limits) and prints the time it
took and how many submissions got the score their kind must get: the grading benchmark (``--record`` writes it,
with its provenance, as JSON).
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

import nbformat

from .build import build, notebook
from .spec import Assignment

# kind -> how each answer cell is written; the points it must get, as a share of each question's
KINDS = ("right", "partial", "empty", "crash", "loop", "exit", "copied", "not-a-notebook", "other-week")


def right_answer(a: Assignment, name: str) -> str:
    """An answer cell that is right: the reference's own source (and, for a value, the value computed with it)."""
    q = next(q for q in a.questions if q.name == name)
    src = inspect.getsource(q.reference)
    if q.kind == "function":
        return src.replace(f"def {q.reference.__name__}(", f"def {q.answer}(", 1)
    return src + f"\n{q.answer} = {q.reference.__name__}(**VARIANT)\n"


def cells_for(a: Assignment, kind: str, other_variant: dict) -> dict[str, str]:
    """{question: answer cell} of one kind of submission."""
    out = {}
    for i, q in enumerate(a.questions):
        if kind == "right" or (kind == "partial" and i % 2 == 0):
            out[q.name] = right_answer(a, q.name)
        elif kind in ("partial", "empty"):
            out[q.name] = q.stub
        elif kind == "crash":
            out[q.name] = (right_answer(a, q.name) if i else "raise RuntimeError('my cell is broken')") \
                if q.kind == "value" else f"def {q.answer}(*args, **kwargs):\n    return [][1]"
        elif kind == "loop":
            out[q.name] = (f"def {q.answer}(*args, **kwargs):\n    while True:\n        pass" if q.kind == "function"
                           else "while True:\n    pass")
        elif kind == "exit":
            out[q.name] = "import os\nos._exit(3)" if i == 0 else right_answer(a, q.name)
        elif kind == "copied":                       # a classmate's values; the functions are right
            out[q.name] = right_answer(a, q.name) if q.kind == "function" else \
                f"{q.answer} = {json.dumps(q.reference(**other_variant))}"
    return out


def expected_share(a: Assignment, kind: str) -> dict[str, float]:
    """The share of each question's points each kind must get."""
    share = {}
    for i, q in enumerate(a.questions):
        right = kind == "right" or (kind == "partial" and i % 2 == 0) or (kind == "exit" and i > 0) \
            or (kind == "crash" and q.kind == "value" and i > 0) or (kind == "copied" and q.kind == "function")
        share[q.name] = 1.0 if right else 0.0
    return share


def write(a: Assignment, secret: str, student: str, kind: str, folder: Path, other: str) -> Path:
    path = folder / f"{student}.ipynb"
    if kind == "not-a-notebook":
        path.write_text("my answers are in my head\n")
        return path
    nb = notebook(a, student, a.variant_for(secret, student))
    if kind == "other-week":
        nb.metadata["musictx_course"]["week"] = a.week + 1
    answers = cells_for(a, kind, a.variant_for(secret, other))
    for c in nb.cells:
        name = (c.get("id") or "").removesuffix("-answer")
        if c.get("id", "").endswith("-answer") and name in answers:
            c.source = answers[name]
    nbformat.write(nb, str(path))
    return path


def make(secret: str, week: int, n: int, out: Path) -> dict[str, str]:
    """A course of ``n`` students in ``out`` (built from ``secret``) and one submission each in
    ``out/submissions``, the kinds in turn; returns {student: kind}."""
    from .weeks import assignment

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    students = [f"s{i:03d}" for i in range(n)]
    (out / "roster.csv").write_text("id\n" + "\n".join(students) + "\n")
    build(secret, out / "roster.csv", out, [week])
    a, folder = assignment(week), out / "submissions"
    folder.mkdir(exist_ok=True)
    kinds = {s: KINDS[i % len(KINDS)] for i, s in enumerate(students)}
    for i, s in enumerate(students):
        write(a, secret, s, kinds[s], folder, students[(i + 1) % n])
    return kinds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--secret", required=True)
    ap.add_argument("--week", type=int, required=True)
    ap.add_argument("--students", type=int, default=60)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--grade", action="store_true", help="grade them too, and time it")
    ap.add_argument("--record", type=Path, default=None, help="with --grade: write the timing here (JSON)")
    a = ap.parse_args(argv)
    kinds = make(a.secret, a.week, a.students, a.out)
    (a.out / "kinds.json").write_text(json.dumps(kinds, indent=1) + "\n")
    print(f"{len(kinds)} submissions in {a.out / 'submissions'}")
    if a.grade:
        return bench(a, kinds)
    return 0


def bench(a, kinds: dict[str, str]) -> int:
    import os
    import platform
    import subprocess
    import time

    from .grade import grade
    from .weeks import assignment

    week = assignment(a.week)
    start = time.perf_counter()
    rows = grade(a.out / "autograder", a.week, a.out / "submissions", a.out / f"week{a.week:02d}.csv")
    seconds = time.perf_counter() - start
    zero = {q.name: 0.0 for q in week.questions}
    wrong = [r["student"] for r in rows
             if any(abs(r[q.name] - q.points * (zero if kinds[r["student"]] in ("not-a-notebook", "other-week")
                                                else expected_share(week, kinds[r["student"]]))[q.name]) > 1e-9
                    for q in week.questions)]
    print(f"graded {len(rows)} submissions of week {a.week} in {seconds:.0f} s ({seconds / 60:.1f} min; the target "
          f"is under 30 min on 2 cores); {len(rows) - len(wrong)} of {len(rows)} got the score of their kind"
          + (f"; not: {wrong}" if wrong else ""))
    if a.record:
        root = Path(__file__).resolve().parents[3]
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        a.record.write_text(json.dumps({
            "command": " ".join(["python -m musictx_course.synthetic", *sys.argv[1:]]), "commit": commit,
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "week": a.week, "submissions": len(rows), "seconds": round(seconds, 1),
            "kinds": {k: sum(v == k for v in kinds.values()) for k in KINDS},
            "as_expected": len(rows) - len(wrong)}, indent=1) + "\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
