"""Generate the student notebooks from the chapters: never edit them by hand.

    python -m scripts.student_notebooks [--out notebooks/students] [--check] [--links]

A student notebook is its chapter with the reference solutions taken out: every code cell that calls
``exercise_<chapter>_<n>(...)`` is removed, every output is cleared, and the "Your solution here."
cells stay, with the checker to call where the exercise asks for code. The committed copies in
``notebooks/students`` are what the Colab links of the book and the lecturer's guide open;
``--check`` (and tests/classroom/test_students.py) fails when they differ from what this script makes.
``--links`` first points every chapter's Colab install cell (the package and its constraints) and its
link to its student version at the repository and branch of ``_config.yml``: the ref the Colab button
opens is the ref the cell installs (for a semester pinned to a release tag, set the branch to the tag).
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

from scripts import ROOT

SOLUTION = re.compile(r"\bexercise_\d+_\d+\(")
NOTE = ("> **Student version.** This notebook is generated from the book's chapter by "
        "`scripts/student_notebooks.py`, without the reference solutions of the exercises. Write yours in "
        "the empty cells; where an exercise asks for code, the cell names a checker from "
        "`musictx_lite.classroom.checkers` that tests your answer.")
# the book's paragraph at the top of the exercises points at the hidden solutions: not here
BOOK_PARAGRAPH = re.compile(r"Try each exercise in the empty cell under it\..*?(?=\n\n|$)", re.S)
STUDENT_PARAGRAPH = "Try each exercise in the empty cell under it; the reference solutions are in the book."
CHECKER_SENTENCE = ("\nWhere an exercise asks for a function or a module, its cell names a checker that tests your\n"
                    "answer.")


def is_solution(cell: dict) -> bool:
    """A code cell that runs a reference solution (``exercise_5_1()`` and the like)."""
    return cell["cell_type"] == "code" and bool(SOLUTION.search("".join(cell["source"])))


def is_stub(cell: dict) -> bool:
    """The students' empty cell of an exercise ("# Your solution here.", perhaps naming a checker)."""
    return cell["cell_type"] == "code" and "".join(cell["source"]).lstrip().startswith("# Your solution here")


# the full chapter's install cell also installs the book's solutions (book/solutions) for its solution cells
SOLUTIONS_LINE = re.compile(r'^ *sol = f"musictx-solutions @ .*\n', re.M)


def without_solutions_install(source: str) -> str:
    """The install cell as a student gets it: the musictx-lite package alone, never the book's solutions."""
    return SOLUTIONS_LINE.sub("", source).replace(' "{sol}"', "")


def student_version(nb: dict) -> dict:
    """The chapter ``nb`` without solution cells, without outputs, with a note under the title; its install cell
    installs the package alone, not the book's solutions."""
    out = copy.deepcopy(nb)
    cells = []
    for cell in out["cells"]:
        if is_solution(cell):
            continue
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            cell["source"] = without_solutions_install("".join(cell["source"]))
        else:
            checkers = any("musictx_lite.classroom.checkers import" in "".join(c["source"]) for c in out["cells"])
            paragraph = STUDENT_PARAGRAPH + (CHECKER_SENTENCE if checkers else "")
            cell["source"] = BOOK_PARAGRAPH.sub(lambda m: paragraph, "".join(cell["source"]))
        cells.append(cell)
    import nbformat

    note = nbformat.from_dict({"cell_type": "markdown", "id": "student-version", "metadata": {}, "source": NOTE})
    out["cells"] = cells[:1] + [note] + cells[1:]
    return out


def repository() -> tuple[str, str, str]:
    """_config.yml's repository: its URL, its ``owner/name`` and the branch (or tag) the Colab buttons open."""
    import yaml

    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    url = repo["url"].rstrip("/")
    return url, url.split("github.com/", 1)[1], str(repo["branch"])


def colab_prefix() -> str:
    """The Colab address of the student notebooks, from _config.yml's repository URL and branch."""
    _, slug, ref = repository()
    return f"https://colab.research.google.com/github/{slug}/blob/{ref}/notebooks/students/"


LINK = re.compile(r"https://colab\.research\.google\.com/github/\S+?/notebooks/students/")
# the install cell's repository and ref, and the constraints it fetches from the same ref
INSTALL_REF = re.compile(r'repo, ref = "[^"]+", "[^"]+"')
INSTALL_RAW = re.compile(r'raw = "https://raw\.githubusercontent\.com/[^"]+"')


def relink(path: Path) -> bool:
    """Point the chapter's install cell and its link to its student version at _config.yml's repository and
    branch; True if it changed."""
    import nbformat

    url, slug, ref = repository()
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "markdown" and LINK.search(cell.source):
            new = LINK.sub(colab_prefix(), cell.source)
        elif cell.cell_type == "code" and INSTALL_REF.search(cell.source):
            new = INSTALL_REF.sub(f'repo, ref = "{url}", "{ref}"', cell.source)
            new = INSTALL_RAW.sub(f'raw = "https://raw.githubusercontent.com/{slug}"', new)
        else:
            continue
        changed, cell.source = changed or new != cell.source, new
    if changed:
        nbformat.write(nb, path)
    return changed


def dumps(nb) -> str:
    import nbformat

    return nbformat.writes(nbformat.from_dict(nb)) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "notebooks" / "students")
    ap.add_argument("--check", action="store_true", help="fail if a committed student notebook is stale")
    ap.add_argument("--links", action="store_true",
                    help="first point each chapter's install cell and student link at _config.yml's "
                         "repository and branch")
    ap.add_argument("chapters", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    args = ap.parse_args(argv)
    import nbformat

    chapters = args.chapters or sorted((ROOT / "notebooks").glob("*.ipynb"))
    stale = []
    for path in chapters if args.links else []:
        if relink(path):
            print(f"relinked {path}")
    for path in chapters:
        text = dumps(student_version(nbformat.read(path, as_version=4)))
        target = args.out / path.name
        if args.check:
            if not target.exists() or target.read_text() != text:
                stale.append(target)
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target}")
    if stale:
        print("error: stale student notebooks (run python -m scripts.student_notebooks): "
              + ", ".join(str(p) for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
