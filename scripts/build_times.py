"""Record how long each chapter took in the last ``make book``, and put the range over the builds in the
lecturer's guide.

    python -m scripts.build_times --note "alone"          # after make book: add this build to the record
    python -m scripts.build_times --guide                 # rewrite the guide's table from the record

The book build executes each chapter and keeps its execution time in its cache (``_build/.jupyter_cache``).
``--note`` appends one build to ``results/book-builds.json``: the seconds of every chapter whose current
source the cache holds, with the machine, the commit, the versions, the date and what else ran beside it.
``--guide`` rewrites the two time tables of ``book/lecturers.md``: per chapter, the range of its CPU times over
the recorded builds, with the machine named, and the estimated T4 minutes of the gpu profile's training
(``classroom.chapter.chapter_minutes``); per week of the twelve-week plan, each chapter's median over the builds,
the same estimate, and the TA hours (an estimate, ``WEEKS``). ``tests/book/test_build_times.py`` checks the guide
against both.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from scripts import ROOT

RECORD = ROOT / "results" / "book-builds.json"
GUIDE = ROOT / "book" / "lecturers.md"
CACHE = ROOT / "_build" / ".jupyter_cache"
LECTURE = {0: ("60 min", "60 min")}                       # the rest: 90 min lecture, 60 min lab
# the twelve-week plan: its chapters per week, and the TA hours for one TA and 60 students, an estimate (2 h of lab,
# 1 h online, marking 60 submissions at 3 min each where checkers test most answers, 5 min where most are written;
# week 1 adds 1 h of help with Colab): the guide states these assumptions
WEEKS = {1: ((0, 1), 9), 2: ((2, 3), 8), 3: ((4,), 6), 4: ((5,), 8), 5: ((6,), 6), 6: ((7,), 8), 7: ((8,), 8),
         8: ((9,), 6), 9: ((10,), 6), 10: ((11,), 6), 11: ((12,), 6), 12: ((13,), 6)}


def machine() -> str:
    """The CPU model and its core count, as the record names the machine."""
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.processor() or "unknown CPU") \
        if Path("/proc/cpuinfo").exists() else platform.processor() or "unknown CPU"
    return f"{model}, {os.cpu_count()} cores"


def chapter_seconds(cache: Path = CACHE) -> dict[str, float]:
    """Execution seconds of every chapter whose current source the book's cache holds: notebook stem -> s."""
    from jupyter_cache import get_cache

    jc = get_cache(str(cache))
    out = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        try:
            record = jc.match_cache_file(str(path))
        except KeyError:                                   # not executed since its last change
            continue
        seconds = record.data.get("execution_seconds")
        if seconds is not None:
            out[path.stem] = round(float(seconds), 1)
    return out


def add_build(note: str, cache: Path = CACHE, record: Path = RECORD) -> dict:
    """Append the last build's chapter times to ``record``; return the build."""
    import torch

    from musictx_lite.study.hub import git_commit

    seconds = chapter_seconds(cache)
    if not seconds:
        raise ValueError(f"no executed chapter in {cache}: run make book first")
    build = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "commit": git_commit(),
             "machine": machine(), "python": platform.python_version(), "torch": torch.__version__,
             "profile": "cpu", "note": note, "chapters": seconds}
    builds = json.loads(record.read_text()) if record.exists() else []
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(builds + [build], indent=1) + "\n")
    return build


def fmt(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def cpu_range(builds: list[dict], chapter: str) -> str:
    """The chapter's time over ``builds``: "a to b" (or one value when they agree to the shown digit)."""
    values = [b["chapters"][chapter] for b in builds if chapter in b["chapters"]]
    if not values:
        return "not measured"
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo} to {hi}"


def table(builds: list[dict]) -> str:
    """The guide's time table from the recorded builds and the gpu profile's estimate."""
    from musictx_lite.classroom.chapter import chapter_minutes

    t4 = chapter_minutes("gpu")
    lines = ["| chapter | lecture | lab | CPU, cpu profile (measured) | T4, gpu profile training (estimated) |",
             "|---|---|---|---|---|"]
    seen = set()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        title = "".join(json.loads(path.read_text())["cells"][0]["source"]).splitlines()[0]   # "# 8. The skew"
        n, title = int(path.stem.split("_")[0]), title.split(". ", 1)[1]
        lecture, lab = LECTURE.get(n, ("90 min", "60 min"))
        trains = t4[n] if n not in seen else 0.0          # a chapter's second part (11) trains nothing
        seen.add(n)
        lines.append(f"| {n} {title} | {lecture} | {lab} | {cpu_range(builds, path.stem)} | "
                     + (f"{trains:.1f} min" if trains else "no training") + " |")
    return "\n".join(lines)


def cpu_median(builds: list[dict], chapter: str) -> str:
    """The chapter's median time over the builds that ran it, and over how many."""
    values = sorted(b["chapters"][chapter] for b in builds if chapter in b["chapters"])
    if not values:
        return "not measured"
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    return f"{fmt(median)} ({len(values)} build{'s' * (len(values) > 1)})"


def week_table(builds: list[dict]) -> str:
    """The twelve-week plan's times: per week, each chapter's median CPU time over the recorded builds, the gpu
    profile's estimated T4 training minutes, and the TA hours (an estimate, ``WEEKS``)."""
    from musictx_lite.classroom.chapter import chapter_minutes

    t4 = chapter_minutes("gpu")
    stems: dict[int, list[str]] = {}                     # chapter -> its notebooks (chapter 11 has two parts)
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        stems.setdefault(int(p.stem.split("_")[0]), []).append(p.stem)
    lines = ["| week | chapters | CPU, cpu profile (measured: median of the builds) | "
             "T4, gpu profile training (estimated) | TA hours (estimate) |", "|---|---|---|---|---|"]
    for week, (chapters, hours) in WEEKS.items():
        cpu = "; ".join(" + ".join(cpu_median(builds, stem) for stem in stems[n]) for n in chapters)
        gpu = "; ".join(f"{t4[n]:.1f} min" if t4[n] else "no training" for n in chapters)
        lines.append(f"| {week} | {'; '.join(map(str, chapters))} | {cpu} | {gpu} | {hours} |")
    return "\n".join(lines)


def rewrite_guide(builds: list[dict], guide: Path = GUIDE) -> None:
    text = guide.read_text()
    for head, make in (("| chapter | lecture | lab |", table), ("| week | chapters | CPU,", week_table)):
        start = text.index(head)
        end = text.index("\n\n", start)
        text = text[:start] + make(builds) + text[end:]
    guide.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--note", help="add the last build to the record, with what ran beside it")
    ap.add_argument("--guide", action="store_true", help="rewrite the lecturer's guide's table from the record")
    args = ap.parse_args(argv)
    if args.note is None and not args.guide:
        print("error: give --note (record the last build) or --guide (rewrite the table), or both", file=sys.stderr)
        return 2
    try:
        if args.note is not None:
            build = add_build(args.note)
            print(f"recorded {len(build['chapters'])} chapters ({sum(build['chapters'].values()) / 60:.1f} min) "
                  f"of the build on {build['machine']} into {RECORD.relative_to(ROOT)}")
        if args.guide:
            rewrite_guide(json.loads(RECORD.read_text()))
            print(f"rewrote the time table of {GUIDE.relative_to(ROOT)}")
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
