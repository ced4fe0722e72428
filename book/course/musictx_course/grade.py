"""Grade a folder of submitted notebooks of one week into a CSV of scores per question, with a log per student.

Each file ``<student>.ipynb`` of the folder is one submission (the student is the file's stem, as the course's
roster has it). For each, the grader reads the notebook (a file that is not a notebook, or not one of this week,
scores zero with its reason), draws the student's variant and hidden inputs from the secret, computes the reference
answers, runs the answer cells and the answer functions in a process of their own (``sandbox``: a time limit per
cell and per question, and a deadline for the whole process), and judges what comes back. A question whose answer
crashes, loops, returns the wrong thing or is missing scores zero with a one-line reason; a process that dies or
hangs is started again for the questions left. The run never stops on a submission.
"""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from .spec import Assignment, Question
from .wire import from_wire, to_wire

SANDBOX, WIRE = Path(__file__).with_name("sandbox.py"), Path(__file__).with_name("wire.py")
REFERENCE = threading.Lock()   # the references run one at a time: some package state (attention recording) is global
STARTUP = 30.0          # seconds the sandbox may take to start (importing torch on a loaded machine)
CELL_SECONDS = 20.0     # seconds per answer cell: defining functions, or computing a value on the variant


def answer_cells(nb, a: Assignment) -> dict[str, str]:
    """{question: its answer cell's source}, found by the cell ids the course wrote (``q1-answer``); where a
    student answered in a cell of their own (or an editor dropped the ids), the last code cell that defines the
    answer's name (``def name(`` or ``name =``)."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_id = {c.get("id"): c for c in code}
    out = {}
    for q in a.questions:
        if f"{q.name}-answer" in by_id and q.answer in by_id[f"{q.name}-answer"].source:
            out[q.name] = by_id[f"{q.name}-answer"].source
            continue
        defines = re.compile(rf"^(def\s+{re.escape(q.answer)}\s*\(|{re.escape(q.answer)}\s*=[^=])", re.M)
        found = [c.source for c in code if defines.search(c.source)]
        if found:
            out[q.name] = found[-1]
        elif f"{q.name}-answer" in by_id:
            out[q.name] = by_id[f"{q.name}-answer"].source
    return out


# what an answer has no business touching: the grader's package, its files, the environment, other processes,
# the network. An answer that names one is still graded; the TA's log says to look at it.
SUSPECT = re.compile(r"musictx_course|course\.json|meta_path|os\.environ|getenv|subprocess|socket|urllib|"
                     r"requests|importlib|__import__|ctypes|os\.kill|shutil|open\(")


def child_env(tmp: str) -> dict[str, str]:
    """The sandbox's environment: only what Python and torch need to run (no secret, no token, no home)."""
    keep = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT", "VIRTUAL_ENV", "MUSICTX_CACHE", "MUSICTX_DEVICE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(HOME=tmp, TMPDIR=tmp, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg",
               MUSICTX_PROGRESS="0", PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def job_for(a: Assignment, secret: str, student: str, cells: dict[str, str], todo: list[Question],
            scale: float = 1.0) -> tuple:
    """The sandbox's job (no secret, no reference) and, per question, the expected answers (kept here); ``scale``
    multiplies every time limit (the tests shorten them)."""
    with REFERENCE:
        return _job_for(a, secret, student, cells, todo, scale)


def _job_for(a: Assignment, secret: str, student: str, cells: dict[str, str], todo: list[Question],
             scale: float) -> tuple:
    variant = a.variant_for(secret, student)
    questions, expected = [], {}
    for q in todo:
        if q.kind == "value":
            expected[q.name] = [q.reference(**variant)]
            questions.append({"name": q.name, "kind": "value", "answer": q.answer, "timeout": q.timeout * scale})
        else:
            cases = a.cases_for(secret, student, q)
            expected[q.name] = [q.reference(**case) for case in cases]
            questions.append({"name": q.name, "kind": "function", "answer": q.answer, "timeout": q.timeout * scale,
                              "tensors": q.tensors, "cases": [to_wire(c) for c in cases]})
    job = {"student": student, "variant": to_wire(variant), "setup": a.setup, "cell_seconds": CELL_SECONDS * scale,
           "cells": [{"question": q.name, "source": cells[q.name]} for q in a.questions if q.name in cells],
           "questions": questions}
    return job, expected


def judge(q: Question, line: dict, expected: list) -> tuple[float, str]:
    """(points, reason) for one question from the sandbox's line: the share of its cases answered right."""
    if "outputs" not in line or not line["outputs"]:
        return 0.0, line.get("error", "no answer came back")
    right, reasons = 0, []
    for i, (out, want) in enumerate(zip(line["outputs"], expected)):
        if q.kind == "function" and "error" in out:
            reasons.append(f"case {i + 1} raised {out['error']}")
            continue
        try:
            got = from_wire(out["value"] if q.kind == "function" else out)
        except (ValueError, KeyError, TypeError) as e:
            reasons.append(f"case {i + 1}: {e}")
            continue
        reason = q.judge(got, want)
        if reason is None:
            right += 1
        else:
            reasons.append(f"case {i + 1}: {reason}")
    if len(line["outputs"]) < len(expected):
        reasons.append(line.get("error", "not every case came back"))
    points = q.points * right / len(expected)
    return points, f"{right} of {len(expected)} right" + (f"; {reasons[0]}" if reasons else "")


def run_sandbox(job: dict, deadline: float, log: list[str]) -> list[dict]:
    """The sandbox's lines, as far as it got before it finished, died or passed ``deadline`` seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        job_path, results = Path(tmp) / "job.json", Path(tmp) / "results.jsonl"
        job_path.write_text(json.dumps(job))
        child = Path(tmp) / "sandbox.py"                # run as a file: the course package is not on its path
        child.write_text(SANDBOX.read_text().replace("from musictx_course.wire import", "from wire import"))
        (Path(tmp) / "wire.py").write_text(WIRE.read_text())
        printed = Path(tmp) / "printed.txt"             # a file, not a pipe: a process an answer leaves behind
        with printed.open("w") as out:                  # cannot keep the grader waiting for the pipe to close
            p = subprocess.Popen([sys.executable, "-E", "-s", str(child), str(job_path), str(results)],
                                 env=child_env(tmp), cwd=tmp, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            try:
                p.wait(timeout=deadline)
                log.append(f"  sandbox exit status {p.returncode}")
            except subprocess.TimeoutExpired:
                log.append(f"  sandbox stopped after {deadline:.0f} s")
            finally:
                try:                                    # the whole group: what the answers started goes too
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        output = printed.read_text(errors="replace")
        if output.strip():
            log.append("  its output (last lines): " + output[-1600:].strip().replace("\n", "\n    "))
        lines = []
        for ln in results.read_text().splitlines() if results.is_file() else []:
            try:
                lines.append(json.loads(ln))
            except json.JSONDecodeError:
                break
        return lines


def grade_one(a: Assignment, secret: str, path: Path, scale: float = 1.0) -> tuple[dict, list[str]]:
    """{question: (points, reason)} of one submission, and its log lines, one per question at the end."""
    scores, log = _grade_one(a, secret, path, scale)
    for q in a.questions:
        log.append(f"  {q.name}: {scores[q.name][0]:g} of {q.points:g} ({scores[q.name][1]})")
    return scores, log


def _grade_one(a: Assignment, secret: str, path: Path, scale: float) -> tuple[dict, list[str]]:
    student, log = path.stem, [f"{path.name}: week {a.week}"]
    scores = {q.name: (0.0, "") for q in a.questions}
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as e:                                        # not JSON, not a notebook, unreadable
        reason = f"not a notebook ({type(e).__name__})"
        return {q.name: (0.0, reason) for q in a.questions}, log + [f"  {reason}"]
    meta = nb.metadata.get("musictx_course", {})
    if meta.get("week") not in (None, a.week):
        reason = f"a notebook of week {meta.get('week')}, not of week {a.week}"
        return {q.name: (0.0, reason) for q in a.questions}, log + [f"  {reason}"]
    if meta.get("student") not in (None, student):
        log.append(f"  note: this notebook was built for {meta.get('student')}, not for {student}: graded as "
                   f"{student}'s, on {student}'s variant")
    cells = answer_cells(nb, a)
    for name, src in cells.items():
        if (m := SUSPECT.search(src)):
            log.append(f"  note: the answer to {name} uses {m.group(0)!r}, which an answer has no need of: look at it")
    todo = [q for q in a.questions if q.name in cells]
    for q in a.questions:
        if q.name not in cells:
            scores[q.name] = (0.0, f"no answer cell ({q.name}-answer)")
    while todo:
        job, expected = job_for(a, secret, student, cells, todo, scale)
        deadline = STARTUP + job["cell_seconds"] * len(job["cells"]) + sum(q["timeout"] for q in job["questions"])
        lines = run_sandbox(job, deadline, log)
        got = {ln["question"]: ln for ln in lines if "question" in ln}
        for q in todo:
            if q.name in got:
                scores[q.name] = judge(q, got[q.name], expected[q.name])
        left = [q for q in todo if q.name not in got]
        if not left:
            break
        started = [ln["start"] for ln in lines if "start" in ln]
        stuck = started[-1] if started else left[0].name
        phase = next((ln["phase"] for ln in reversed(lines) if "start" in ln), "grade")
        reason = ("the process stopped while running its answer cell" if phase == "cell" else
                  "the process stopped while grading it (a hang or a crash past the time limit)")
        scores[stuck] = (0.0, reason)
        cells = {k: v for k, v in cells.items() if k != stuck}
        todo = [q for q in left if q.name != stuck]
    return scores, log


def grade(autograder: Path, week: int, submissions: Path, out: Path, workers: int = 2,
          scale: float = 1.0) -> list[dict]:
    """Grade every file of ``submissions``; write ``out`` (CSV) and ``<out>-logs/<student>.txt``; return the rows.
    ``scale`` multiplies every time limit."""
    from .weeks import assignment

    course = json.loads((Path(autograder) / "course.json").read_text())
    a, secret = assignment(week), course["secret"]
    files = sorted(p for p in Path(submissions).iterdir() if p.is_file() and not p.name.startswith("."))
    roster = set(course.get("students", []))
    stray = [p for p in files if roster and p.stem not in roster]
    files = [p for p in files if p not in stray]
    logs = Path(str(out).removesuffix(".csv") + "-logs")
    logs.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda p: grade_one(a, secret, p, scale), files))
    rows = []
    for path, (scores, log) in zip(files, results):
        (logs / f"{path.stem}.txt").write_text("\n".join(log) + "\n")
        row = {"student": path.stem, **{q.name: round(scores[q.name][0], 3) for q in a.questions}}
        row["auto"] = round(sum(scores[q.name][0] for q in a.questions), 3)
        row["written"] = ""                                        # the TA's, with the rubric
        row["reasons"] = "; ".join(f"{q.name}: {scores[q.name][1]}" for q in a.questions
                                   if scores[q.name][0] < q.points)
        rows.append(row)
    nothing = {q.name: 0.0 for q in a.questions}
    for path in stray:                                             # a file named for no one on the roster
        (logs / f"{path.name}.txt").write_text(f"{path.name}: not graded: {path.stem} is not on the roster\n")
        rows.append({"student": path.stem, **nothing, "auto": 0.0, "written": "",
                     "reasons": f"not graded: {path.stem} is not on the roster (rename the file to the student's "
                                "roster name and grade again)"})
    for student in sorted(roster - {p.stem for p in files}):        # on the roster, nothing handed in
        rows.append({"student": student, **nothing, "auto": 0.0, "written": "", "reasons": "no submission"})
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["student", *[q.name for q in a.questions], "auto", "written", "reasons"])
        w.writeheader()
        w.writerows(rows)
    print(f"graded {len(files)} submissions of week {week} in {time.perf_counter() - start:.0f} s: {out}, "
          f"logs in {logs}" + (f"; {len(stray)} file(s) named for no one on the roster, not graded" if stray else ""))
    return rows
