"""The graded course (book/course, ``musictx_course``): every week's assignment passes its own public and hidden
tests with its reference answers and fails them with the students' stubs; the secret decides every hidden value and
each variant; a built student notebook holds no reference, no hidden input and no secret; and the TA's grading
command gives each kind of submission (right, partly right, empty, crashing, looping, exiting, copied, not a
notebook, another week's) the score it must get, without stopping."""
from __future__ import annotations

import csv
import inspect
import json

import pytest
from musictx_course.build import notebook
from musictx_course.grade import grade
from musictx_course.spec import close, derive
from musictx_course.synthetic import expected_share, make, right_answer
from musictx_course.weeks import WEEKS, assignment


def run_cells(setup: str, variant: dict, *sources: str) -> dict:
    ns = {"VARIANT": variant, "STUDENT": "s001"}
    exec(setup, ns)
    for src in sources:
        exec(src, ns)
    return ns


@pytest.mark.parametrize("week", sorted(WEEKS))
def test_the_references_pass_their_tests_and_the_stubs_fail_them(week):
    a = assignment(week)
    assert len(a.questions) >= 3 and a.written.points > 0 and len(a.written.rubric) >= 2
    variant = a.variant_for("a secret", "s001")
    for q in a.questions:
        ns = run_cells(a.setup, variant, right_answer(a, q.name), q.public)      # public tests: no exception
        if q.kind == "function":
            for case in a.cases_for("a secret", "s001", q):
                assert close(ns[q.answer](**case), q.reference(**case)) is None, q.name
        stub = run_cells(a.setup, variant, q.stub)
        with pytest.raises((AssertionError, NotImplementedError, TypeError)):
            exec(q.public, stub)
        if q.kind == "function":
            case = a.cases_for("a secret", "s001", q)[0]
            with pytest.raises(NotImplementedError):
                stub[q.answer](**case)
        else:
            assert close(stub[q.answer], q.reference(**variant)) is not None


@pytest.mark.parametrize("week", sorted(WEEKS))
def test_the_secret_decides_the_variants_and_the_hidden_cases(week):
    a = assignment(week)
    one, two = a.variant_for("secret one", "s001"), a.variant_for("secret two", "s001")
    assert one == a.variant_for("secret one", "s001") and one != two
    assert len({json.dumps(a.variant_for("secret one", f"s{i:03d}"), sort_keys=True) for i in range(8)}) >= 6
    q = next(q for q in a.questions if q.kind == "function")
    cases = [json.dumps(c, default=str, sort_keys=True) for c in
             (a.cases_for("secret one", "s001", q), a.cases_for("secret two", "s001", q))]
    assert cases[0] != cases[1]


@pytest.mark.parametrize("week", sorted(WEEKS))
def test_a_student_notebook_holds_no_reference_no_hidden_input_and_no_secret(week):
    a = assignment(week)
    secret = "the lecturer's own secret"
    text = json.dumps(notebook(a, "s007", a.variant_for(secret, "s007")))
    assert secret not in text and "import musictx_course" not in text and "from musictx_course" not in text
    for q in a.questions:
        body = [ln.strip() for ln in inspect.getsource(q.reference).splitlines()[1:] if len(ln.strip()) > 30
                and not ln.strip().startswith(('"""', "#", "import ", "from "))]
        assert not any(json.dumps(ln)[1:-1] in text for ln in body), f"{q.name}'s reference is in the notebook"


def test_derive_needs_a_secret():
    with pytest.raises(ValueError):
        derive("", "variant", 1, "s001")


def test_grading_a_folder_gives_each_kind_its_score(tmp_path):
    kinds = make("a secret", 1, 9, tmp_path)
    (tmp_path / "submissions" / "notes.txt").write_text("not a submission either\n")   # a stray file: a row too
    rows = grade(tmp_path / "autograder", 1, tmp_path / "submissions", tmp_path / "week01.csv", scale=0.4)
    a = assignment(1)
    by_student = {r["student"]: r for r in csv.DictReader(open(tmp_path / "week01.csv"))}
    assert len(rows) == len(by_student) == 10 and float(by_student["notes"]["auto"]) == 0
    for student, kind in kinds.items():
        share = expected_share(a, kind) if kind not in ("not-a-notebook", "other-week") else \
            {q.name: 0.0 for q in a.questions}
        got = {q.name: float(by_student[student][q.name]) for q in a.questions}
        assert got == {q.name: share[q.name] * q.points for q in a.questions}, (kind, by_student[student])
        log = (tmp_path / "week01-logs" / f"{student}.txt").read_text()
        assert all(f"{q.name}: " in log for q in a.questions)
    reasons = {kinds[s]: by_student[s]["reasons"] for s in kinds}
    assert "ran past its time limit" in reasons["loop"] and "not a notebook" in reasons["not-a-notebook"]
    assert "stopped while running its answer cell" in reasons["exit"] and "IndexError" in reasons["crash"]
    assert "week 2, not of week 1" in reasons["other-week"] and reasons["right"] == ""


def test_an_answer_cannot_reach_the_grader_its_secret_or_the_roster(tmp_path, monkeypatch):
    """An answer that takes the import hook away still finds no ``musictx_course`` (the sandbox runs as a file,
    the package off its paths), sees no secret in its environment, and a process it leaves behind is killed with
    the sandbox; the TA's log names what it touched. A file named for no one on the roster is not graded, and a
    student with nothing handed in gets a row."""
    import nbformat

    kinds = make("a secret", 1, 3, tmp_path)
    right = next(s for s, k in kinds.items() if k == "right")
    path = tmp_path / "submissions" / f"{right}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    a = assignment(1)
    q = a.questions[0]
    cell = next(c for c in nb.cells if c.get("id") == f"{q.name}-answer")
    cell.source = (
        "import os, subprocess, sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != '_Blocker']\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "LEAK = os.environ.get('MUSICTX_TEST_SECRET', 'none')\n"
        "try:\n"
        "    from musictx_course.weeks.w01 import voice_line as _ref\n"
        "except ImportError:\n"
        "    _ref = None\n"
        f"def {q.answer}(tokens, voice):\n"
        "    if _ref is None:\n"
        "        raise RuntimeError(f'no reference; secret seen: {LEAK}')\n"
        "    return _ref(tokens, voice)\n")
    nbformat.write(nb, str(path))
    monkeypatch.setenv("MUSICTX_TEST_SECRET", "hunter2")
    (tmp_path / "submissions" / "nobody.ipynb").write_text(path.read_text())
    gone = next(s for s in kinds if s != right)
    (tmp_path / "submissions" / f"{gone}.ipynb").unlink()
    rows = {r["student"]: r for r in grade(tmp_path / "autograder", 1, tmp_path / "submissions",
                                            tmp_path / "w.csv", scale=0.4)}
    assert rows[right][q.name] == 0 and "no reference; secret seen: none" in rows[right]["reasons"]
    log = (tmp_path / "w-logs" / f"{right}.txt").read_text()
    assert "uses 'subprocess'" in log or "uses 'meta_path'" in log
    assert "not on the roster" in rows["nobody"]["reasons"] and rows["nobody"]["auto"] == 0
    assert rows[gone]["reasons"] == "no submission"
    import subprocess
    left = subprocess.run(["pgrep", "-f", "time.sleep\\(600\\)"], capture_output=True, text=True).stdout.split()
    assert left == [], "a process an answer started outlived the sandbox"
