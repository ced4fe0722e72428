"""The classroom edition's notebooks: hidden solutions in the book, generated student notebooks."""
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from scripts import student_notebooks as sn

ROOT = Path(__file__).resolve().parents[2]

CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def cells(path):
    return nbformat.read(path, as_version=4).cells


def exercises(nb_cells) -> list[str]:
    md = "\n".join(c.source for c in nb_cells if c.cell_type == "markdown")
    return re.findall(r"admonition\} Exercise (\d+\.\d+):", md)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_book_hides_every_reference_solution_behind_a_toggle(path):
    solutions = [c for c in cells(path) if sn.is_solution(c)]
    assert len(solutions) == len(exercises(cells(path))) > 0
    for c in solutions:
        assert "hide-cell" in c.metadata.get("tags", []), f"{path.name}: tag solution cell {c.id} hide-cell"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_book_links_the_student_version_in_colab(path):
    import yaml

    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    slug = repo["url"].split("github.com/")[1]
    url = f"https://colab.research.google.com/github/{slug}/blob/{repo['branch']}/notebooks/students/{path.name}"
    md = "\n".join(c.source for c in cells(path) if c.cell_type == "markdown")
    assert f"]({url})" in md, f"{path.name}: run python -m scripts.student_notebooks --links"
    assert sn.colab_prefix() + path.name == url


def test_links_follow_the_configured_branch(tmp_path, monkeypatch):
    chapter = tmp_path / CHAPTERS[0].name
    chapter.write_text(CHAPTERS[0].read_text().replace("/blob/main/notebooks/students/",
                                                       "/blob/v0.0.9/notebooks/students/"))
    assert sn.relink(chapter) and not sn.relink(chapter)
    assert chapter.read_text() == CHAPTERS[0].read_text()


def test_committed_student_notebooks_are_the_generated_ones():
    """Edited by hand, or a chapter changed without regenerating: fail with the command to run."""
    run = subprocess.run([sys.executable, "-m", "scripts.student_notebooks", "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in (ROOT / "notebooks" / "students").glob("*.ipynb")) == [p.name for p in CHAPTERS]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_student_version_has_no_solutions_and_no_outputs_but_every_exercise(path):
    book = cells(path)
    student = sn.student_version(nbformat.read(path, as_version=4)).cells
    src = "\n".join(c.source for c in student)
    assert not re.search(r"exercise_\d+_\d+\(", src) and "musictx_solutions" not in src
    assert all(not c.outputs and c.execution_count is None for c in student if c.cell_type == "code")
    assert exercises(student) == exercises(book)
    empty = [c for c in student if c.cell_type == "code" and c.source.startswith("# Your solution")]
    assert len(empty) == len(exercises(book))
    assert "hidden in the cell" not in src and "Student version" in student[1].source
    # everything else is the chapter, in order
    kept = [sn.without_solutions_install(c.source) for c in book if not sn.is_solution(c)]
    assert [c.source for c in student if c.get("id") != "student-version"][:5] == kept[:5]
    assert len(student) == len(kept) + 1


def test_student_version_of_a_planted_chapter():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 1. T"),
        nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.v4.new_output("stream", text="1")],
                                  execution_count=3),
        nbformat.v4.new_markdown_cell("## Exercises\n\nTry each exercise in the empty cell under it. Hidden.\n\nX"),
        nbformat.v4.new_code_cell("# Your solution here."),
        nbformat.v4.new_code_cell("from musictx_solutions import exercise_1_1\nexercise_1_1();"),
    ])
    out = sn.student_version(nb).cells
    assert [c.cell_type for c in out] == ["markdown", "markdown", "code", "markdown", "code"]
    assert out[2].outputs == [] and out[2].execution_count is None
    assert "Hidden" not in out[3].source and out[3].source.endswith("\n\nX")
    assert nb.cells[1].outputs, "the chapter itself is not modified"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_each_exercise_that_asks_for_code_names_its_checker(path):
    """The empty cell of exercise N.M shows how to call check_N_M, for exactly the exercises with one."""
    from musictx_lite.classroom.checkers import CHECKERS

    chapter = int(path.name[:2])
    code = [c for c in cells(path) if c.cell_type == "code"]
    named = {}
    for empty, solution in zip(code, code[1:]):
        m = re.search(r"^exercise_(\d+)_(\d+)\(", solution.source, re.M)
        if m and sn.is_solution(solution):
            assert empty.source.startswith("# Your solution here."), f"{path.name}: {empty.source[:40]}"
            named[f"{m.group(1)}.{m.group(2)}"] = re.findall(r"\bcheck_(\d+)_(\d+)\(", empty.source)
    assert set(named) == set(exercises(cells(path)))
    for key, found in named.items():
        expected = [tuple(key.split("."))] if key in CHECKERS else []
        assert sorted(set(found)) == expected, f"{path.name}: exercise {key} should name {expected or 'no checker'}"
    parts = [p for p in CHAPTERS if int(p.name[:2]) == chapter]           # chapter 11 has two notebooks
    assert {k for k in CHECKERS if k.startswith(f"{chapter}.")} <= set().union(*(exercises(cells(p)) for p in parts))


@pytest.mark.parametrize("path", [p for p in CHAPTERS if int(p.name[:2]) <= 5], ids=lambda p: p.name)
def test_a_code_exercises_solution_shows_its_reference_code(path):
    """Chapters 0-5: the hidden solution of an exercise that asks for code (it has a checker) shows the
    package's source of the reference answer (``show_source``) before it runs it; the source exists."""
    from musictx_lite.classroom.checkers import CHECKERS

    code = [c for c in cells(path) if c.cell_type == "code"]
    for solution in code:
        m = re.search(r"^exercise_(\d+)_(\d+)\(", solution.source, re.M)
        if not (m and sn.is_solution(solution)):
            continue
        key = f"{m.group(1)}.{m.group(2)}"
        shown = re.search(r"^show_source\(([\w, ]+)\)", solution.source, re.M)
        assert bool(shown) == (key in CHECKERS), f"{path.name}: exercise {key}"
        if shown:
            namespace: dict = {}
            exec("\n".join(ln for ln in solution.source.splitlines() if ln.startswith("from ")), namespace)
            assert all(callable(namespace[n.strip()]) for n in shown.group(1).split(","))
