"""Build a course from the lecturer's secret: each student's notebook of each week, and the autograder.

    OUT/students/<student>/weekNN.ipynb     the student's notebook: the questions, the answer cells to fill in,
                                            the public tests, the written question, and the student's variant
    OUT/autograder/course.json              the secret and the roster: for the TA's grading command only
    OUT/autograder/rubrics/weekNN.md        the written question's rubric, for the TA

A student notebook holds no reference answer, no hidden input and no secret: its variant's values are the only
numbers in it that depend on the secret, and they differ from student to student.
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from .spec import Assignment

ROOT = Path(__file__).resolve().parents[3]            # the book's repository: book/course/musictx_course


def roster(path: Path) -> list[str]:
    """The student ids of a CSV with an ``id`` column (one per student, letters, digits, '-', '_' and '.')."""
    with open(path, newline="") as f:
        ids = [row["id"].strip() for row in csv.DictReader(f)]
    bad = [i for i in ids if not re.fullmatch(r"[A-Za-z0-9._-]+", i)]
    if bad or not ids or len(set(ids)) != len(ids):
        raise ValueError(f"the roster needs distinct ids of letters, digits, '.', '-' and '_'; bad: {bad[:3]}")
    return ids


def install_cell() -> str:
    """The student notebooks' Colab install cell, as the book's student notebooks have it (the package alone)."""
    nb = json.loads((ROOT / "notebooks" / "students" / "00_music_as_tokens.ipynb").read_text())
    first = next(c for c in nb["cells"] if c["cell_type"] == "code")
    return "".join(first["source"])


def notebook(a: Assignment, student: str, variant: dict) -> nbformat.NotebookNode:
    chapters = ", ".join(map(str, a.chapters))
    limits = ", ".join(f"{q.name} {q.timeout:g} s" for q in a.questions)
    cells = [new_markdown_cell(
        f"# Week {a.week}: {a.title}\n\nChapters {chapters} of the book. {a.intro}\n\n"
        f"**How this is graded.** Write each answer in its answer cell, the cell under the question (keep the "
        f"cell where it is: the grader finds it by its place in the course's notebook, not by its content). Each "
        f"answer cell must run on its own after the set-up cells: define there whatever it needs. Run the public "
        f"tests under it: they check the form of your answer on small inputs. The grader then calls your answer "
        f"on hidden inputs, with a time limit per question ({limits}), "
        f"or reads your variable for *your* variant below. Questions {', '.join(q.name for q in a.questions)} are "
        f"worth {', '.join(f'{q.points:g}' for q in a.questions)} points; the written question "
        f"{a.written.points:g}, marked by hand. Submit this notebook as `{student}.ipynb`.", id="intro"),
        new_code_cell(install_cell(), id="install"),
        new_code_cell(f'STUDENT = "{student}"\nVARIANT = {json.dumps(variant)}   # yours: the grader uses it too',
                      id="variant")]
    if a.setup:
        cells.append(new_code_cell(a.setup, id="setup"))
    for q in a.questions:
        cells += [new_markdown_cell(f"## {q.name} ({q.points:g} points)\n\n{q.prompt}", id=f"{q.name}-prompt"),
                  new_code_cell(q.stub, id=f"{q.name}-answer"),
                  new_code_cell(q.public, id=f"{q.name}-tests")]
    cells += [new_markdown_cell(f"## Written ({a.written.points:g} points)\n\n{a.written.prompt}", id="written"),
              new_markdown_cell("*Your answer here.*", id="written-answer")]
    nb = new_notebook(cells=cells)
    nb.metadata["musictx_course"] = {"week": a.week, "student": student}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def rubric(a: Assignment) -> str:
    lines = [f"# Week {a.week}: the written question's rubric ({a.written.points:g} points)", "", a.written.prompt, ""]
    lines += [f"- {p:g} point{'s' * (p != 1)}: {what}" for p, what in a.written.rubric]
    return "\n".join(lines) + "\n"


def build(secret: str, roster_path: Path, out: Path, weeks: list[int] | None = None) -> None:
    from .weeks import WEEKS, assignment

    students = roster(Path(roster_path))
    weeks = weeks or sorted(WEEKS)
    out = Path(out)
    (out / "autograder" / "rubrics").mkdir(parents=True, exist_ok=True)
    for week in weeks:
        a = assignment(week)
        for student in students:
            path = out / "students" / student / f"week{week:02d}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook(a, student, a.variant_for(secret, student)), str(path))
        (out / "autograder" / "rubrics" / f"week{week:02d}.md").write_text(rubric(a))
    (out / "autograder" / "course.json").write_text(json.dumps(
        {"secret": secret, "students": students, "weeks": weeks}, indent=1) + "\n")
    print(f"built weeks {weeks[0]}-{weeks[-1]} for {len(students)} students in {out}: students/<id>/weekNN.ipynb "
          f"to hand out, autograder/ to keep")
