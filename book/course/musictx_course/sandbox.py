"""The process a submission runs in: its answer cells executed, each answer function called on the grader's inputs
(or each answer variable read), with a time limit per question; only the outputs go back, one JSON line each.

    python sandbox.py JOB.json RESULTS.jsonl      (grade.run_sandbox copies it beside the job and runs it)

``JOB.json`` (written by ``grade``): the answer cells' sources in notebook order, the student's variant, and per
question its kind, its answer's name, its time limit and its inputs (``wire`` values). This process never receives
the secret, the reference answers or the expected values: the grader judges what comes back. It runs as a file
copied beside the job (with ``wire.py``), with an environment of the grader's choosing, and the lecturer's package
is off its paths and refused by an import hook. A line ``{"start": q}`` is written before a question is
graded, so that when this process dies or hangs the grader knows on which question.
"""
from __future__ import annotations

import json
import signal
import sys
import traceback

from musictx_course.wire import from_wire, to_wire


class TimeLimit(BaseException):
    """Raised by the alarm: a BaseException, so that a student's ``except Exception`` does not swallow it."""


def _alarm(signum, frame):
    raise TimeLimit()


def one_line(e: BaseException) -> str:
    """An exception in one line: its type, its message, and the last line of the student's code it passed."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.startswith("<answer")]
    at = f" (at {frames[-1].filename[1:-1]}, line {frames[-1].lineno})" if frames else ""
    msg = str(e).splitlines()[0][:200] if str(e) else ""
    return f"{type(e).__name__}{': ' + msg if msg else ''}{at}"


class _Blocker:
    """An import hook that refuses the lecturer's package (its references and hidden cases) to the student's code."""

    def find_spec(self, name, path=None, target=None):
        if name == "musictx_course" or name.startswith("musictx_course."):
            raise ImportError(f"{name} is not available to answers")
        return None


def hide_course() -> None:
    """Take the lecturer's package off this process's paths: its modules, the folders that hold it, and the finder
    of an editable install. (Friction, not a wall: the grader runs this process as the TA; the lecturer's guide
    says how to grade where answers cannot read the course's files.)"""
    from pathlib import Path

    for name in [m for m in sys.modules if m == "musictx_course" or m.startswith("musictx_course.")]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if not (Path(p or ".") / "musictx_course").exists()]
    sys.meta_path[:] = [f for f in sys.meta_path if "musictx_course" not in getattr(f, "__module__", "")
                        and "musictx_course" not in repr(getattr(f, "__dict__", ""))]
    sys.path_importer_cache.clear()


def limited(seconds: float, fn, *args, **kwargs):
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def main(job_path: str, results_path: str) -> int:
    job = json.loads(open(job_path).read())
    out = open(results_path, "a", buffering=1)

    def say(**line):
        out.write(json.dumps(line) + "\n")
        out.flush()

    import musictx_lite  # noqa: F401  (torch with it): imported before any timer runs, so no answer pays for it

    hide_course()
    sys.meta_path.insert(0, _Blocker())
    ns: dict = {"__name__": "__answers__", "VARIANT": job["variant"], "STUDENT": job["student"]}
    if job.get("setup"):
        exec(compile(job["setup"], "<setup>", "exec"), ns)
    cell_errors = {}
    for cell in job["cells"]:                                    # the answer cells, in the notebook's order
        say(start=cell["question"], phase="cell")
        try:
            limited(job["cell_seconds"], exec, compile(cell["source"], f"<answer {cell['question']}>", "exec"), ns)
        except TimeLimit:
            cell_errors[cell["question"]] = f"its cell ran past {job['cell_seconds']:g} s"
        except BaseException as e:                               # SyntaxError, SystemExit, anything the cell raised
            cell_errors[cell["question"]] = f"its cell raised {one_line(e)}"
    for q in job["questions"]:
        say(start=q["name"], phase="grade")
        if q["name"] in cell_errors:
            say(question=q["name"], error=cell_errors[q["name"]])
            continue
        if q["answer"] not in ns:
            say(question=q["name"], error=f"no {'function' if q['kind'] == 'function' else 'variable'} named "
                                          f"{q['answer']}")
            continue
        outputs = []
        try:
            if q["kind"] == "value":
                outputs.append(to_wire(ns[q["answer"]]))
            else:
                fn = ns[q["answer"]]

                def run_cases():
                    for case in q["cases"]:
                        try:
                            outputs.append({"value": to_wire(fn(**from_wire(case, tensors=q["tensors"])))})
                        except TimeLimit:
                            raise
                        except BaseException as e:
                            outputs.append({"error": one_line(e)})

                limited(q["timeout"], run_cases)
            say(question=q["name"], outputs=outputs)
        except TimeLimit:
            say(question=q["name"], error=f"ran past its time limit of {q['timeout']:g} s", outputs=outputs)
    say(done=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
