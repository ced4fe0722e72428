"""scripts/run_chapters.py: every chapter in a fresh runtime of a given profile, timed, with its provenance."""
import json
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]


def notebook(path: Path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)


def test_each_chapter_runs_in_a_fresh_runtime_and_is_timed(tmp_path):
    books = tmp_path / "notebooks"
    books.mkdir()
    # each chapter sees the profile, and a leaderboard folder that no other chapter wrote to
    probe = ("import os, pathlib\n"
             "assert os.environ['MUSICTX_PROFILE'] == 'smoke'\n"
             "board = pathlib.Path(os.environ['MUSICTX_LEADERBOARD'])\n"
             "assert not board.exists()\n"
             "board.mkdir(parents=True); (board / 'row').write_text('x')")
    notebook(books / "00_first.ipynb", probe)
    notebook(books / "01_second.ipynb", probe)
    notebook(books / "02_broken.ipynb", "x = 1", "raise ValueError('the budget is too small')")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "scripts.run_chapters", "--profile", "smoke",
                          "--out", str(out), "--notebooks", str(books)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 1, run.stderr                       # one chapter failed
    rec = json.loads((out / "chapters.json").read_text())
    assert rec["profile"] == "smoke" and rec["fresh_runtime_per_chapter"] is True
    assert rec["command"].startswith("python -m scripts.run_chapters --profile smoke")
    assert {"commit", "device", "torch", "python", "date"} <= set(rec)
    rows = {r["chapter"]: r for r in rec["chapters"]}
    assert rows["00_first"]["ok"] and rows["01_second"]["ok"] and rows["00_first"]["seconds"] > 0
    assert not rows["02_broken"]["ok"] and "ValueError: the budget is too small" in rows["02_broken"]["error"]
    executed = nbformat.read(out / "01_second.ipynb", as_version=4)
    assert executed.cells[0].execution_count == 1                # the executed notebook is kept
    assert "FAILED: ValueError: the budget is too small" in run.stdout

    # --only picks chapters by number; an unknown one is an error, not an empty run
    run = subprocess.run([sys.executable, "-m", "scripts.run_chapters", "--profile", "smoke",
                          "--out", str(out), "--notebooks", str(books), "--only", "01"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0 and [r["chapter"] for r in json.loads((out / "chapters.json").read_text())["chapters"]] \
        == ["01_second"]
    run = subprocess.run([sys.executable, "-m", "scripts.run_chapters", "--profile", "smoke",
                          "--out", str(out), "--notebooks", str(books), "--only", "42"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 2 and run.stderr.startswith("error: no chapter matches")
