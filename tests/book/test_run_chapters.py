"""scripts/run_chapters.py: the chapters in fresh runtimes, several at once, each one's result kept in a ledger."""
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat

from scripts.run_chapters import longest_first

ROOT = Path(__file__).resolve().parents[2]


def notebook(path: Path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)


def run_chapters(books: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    # kernels without the conftest's startup file (the pretend device, which imports torch): they start faster
    env = {**os.environ, "IPYTHONDIR": str(books.parent / "ipython")}
    return subprocess.run([sys.executable, "-m", "scripts.run_chapters", "--profile", "smoke", "--out", str(out),
                           "--notebooks", str(books), *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=env)


def ledger(out: Path) -> dict:
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json") if p.name != "chapters.json"}


def test_chapters_run_at_once_and_each_result_is_kept(tmp_path):
    books, out, meet = tmp_path / "notebooks", tmp_path / "out", tmp_path / "meet"
    books.mkdir()
    meet.mkdir()

    def probe(me: str, other: str) -> str:
        # the profile is forced, the cache and leaderboard are folders no other chapter wrote to; then the chapter
        # waits for the other one to start: it passes only when the two run at the same time
        return ("import os, pathlib, time\n"
                f"(pathlib.Path({str(meet)!r}) / '{me}.pid').write_text(str(os.getpid()))\n"
                "assert os.environ['MUSICTX_PROFILE'] == 'smoke'\n"
                "cache, board = (pathlib.Path(os.environ[v]) for v in ('MUSICTX_CACHE', 'MUSICTX_LEADERBOARD'))\n"
                "assert not board.exists() and not any(cache.iterdir())\n"
                "(cache / 'data').write_text('x'); board.mkdir(parents=True); (board / 'row').write_text('x')\n"
                f"while not (pathlib.Path({str(meet)!r}) / '{other}.pid').exists():\n"
                "    time.sleep(0.05)")
    notebook(books / "00_broken.ipynb", "x = 1", "raise ValueError('the budget is too small')")
    notebook(books / "01_first.ipynb", probe("01", "04"))     # 01 is a slow chapter, 04 the highest number:
    notebook(books / "04_second.ipynb", probe("04", "01"))    # with no times in the ledger these two start first
    notebook(books / "02_dies.ipynb", "import os; os._exit(1)")
    notebook(books / "03_slow.ipynb", "print('started')", "import time; time.sleep(120)")

    run = run_chapters(books, out, "--workers", "2", "--timeout", "6")
    assert run.returncode == 1, run.stdout + run.stderr                 # chapters failed
    recs = ledger(out)
    assert sorted(recs) == ["00_broken", "01_first", "02_dies", "03_slow", "04_second"]
    assert recs["01_first"]["ok"] and recs["04_second"]["ok"], run.stdout
    assert recs["01_first"]["seconds"] > 0 and recs["01_first"]["error"] is None
    assert not recs["00_broken"]["ok"] and recs["00_broken"]["error"] == "ValueError: the budget is too small"
    assert not recs["02_dies"]["ok"] and "DeadKernelError" in recs["02_dies"]["error"]
    assert not recs["03_slow"]["ok"] and "CellTimeoutError" in recs["03_slow"]["error"]
    rec = recs["01_first"]
    assert rec["profile"] == "smoke" and rec["fresh_runtime_per_chapter"] is True and rec["date"] and rec["commit"]
    assert rec["device"] and {"python", "torch", "cuda", "musictx_lite"} <= set(rec["versions"])
    assert rec["command"].startswith("python -m scripts.run_chapters --profile smoke")
    executed = nbformat.read(out / "01_first.ipynb", as_version=4)
    assert executed.cells[0].execution_count == 1                       # the executed notebook is kept
    partial = nbformat.read(out / "03_slow.ipynb", as_version=4)        # and as far as it got, on a failure
    assert partial.cells[0].outputs[0]["text"] == "started\n"
    assert "FAILED: ValueError: the budget is too small" in run.stdout
    summary = json.loads((out / "chapters.json").read_text())
    assert {"commit", "device", "torch", "python", "date", "command", "cuda"} <= set(summary)
    assert summary["profile"] == "smoke" and summary["fresh_runtime_per_chapter"] is True
    assert {r["chapter"]: r["ok"] for r in summary["chapters"]} == {k: r["ok"] for k, r in recs.items()}

    # a second run completes the ledger: the chapters that passed are not run again, the failed ones are; --only
    # picks chapters by number (not 02); --chapter-timeout kills the chapter's kernel and what the kernel started
    notebook(books / "03_slow.ipynb", "print('fixed')")
    notebook(books / "05_hangs.ipynb",
             "import os, pathlib, subprocess\n"
             "worker = subprocess.Popen(['sleep', '300'])\n"
             f"pathlib.Path({str(meet)!r}, 'pids').write_text(f'{{os.getpid()}} {{worker.pid}}')",
             "import time; time.sleep(120)")
    run = run_chapters(books, out, "--only", "00", "01", "03", "04", "05", "--workers", "2",
                       "--timeout", "60", "--chapter-timeout", "6")
    assert run.returncode == 1, run.stdout + run.stderr                 # 00 still fails
    again = ledger(out)
    for unchanged in ("01_first", "04_second", "02_dies"):
        assert again[unchanged] == recs[unchanged], unchanged
    assert "01_first" not in run.stdout.split("\n", 1)[1]               # only in the line that says it is skipped
    assert again["03_slow"]["ok"] and again["00_broken"]["date"] != recs["00_broken"]["date"]
    assert again["05_hangs"]["error"] == "timeout after 6 s"
    for pid in map(int, (meet / "pids").read_text().split()):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        os.kill(pid, 9)
        raise AssertionError(f"process {pid} of the timed-out chapter is still running")


def test_bad_arguments_are_errors(tmp_path):
    books = tmp_path / "notebooks"
    books.mkdir()
    notebook(books / "01_first.ipynb", "x = 1")
    run = run_chapters(books, tmp_path / "out", "--only", "01", "42")
    assert run.returncode == 2 and run.stderr.startswith("error: no chapter matches 42")
    run = run_chapters(books, tmp_path / "out", "--shared", "--workers", "2")
    assert run.returncode == 2 and "--shared" in run.stderr
    assert not (tmp_path / "out").exists()


def test_no_chapter_starts_after_the_deadline(tmp_path):
    books, out = tmp_path / "notebooks", tmp_path / "out"
    books.mkdir()
    notebook(books / "01_first.ipynb", "x = 1")
    run = run_chapters(books, out, "--deadline", "0")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "not started: 01_first" in run.stdout and not (out / "01_first.json").exists()   # left for a later run
    assert json.loads((out / "chapters.json").read_text())["chapters"] == []


def test_the_longest_chapters_start_first():
    paths = [Path(f"{n:02d}_x.ipynb") for n in range(12)]
    static = [p.name[:2] for p in longest_first(paths, {})]
    assert static == ["11", "08", "01", "07", "09", "05", "10", "06", "04", "03", "02", "00"]
    timed = longest_first(paths[:4], {"00_x": {"seconds": 50.0}, "02_x": {"seconds": 70.0}})
    assert [p.name[:2] for p in timed] == ["02", "00", "01", "03"]      # the ledger's times first, then the rest
