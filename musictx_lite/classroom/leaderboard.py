"""The book's leaderboard: every model trained so far against chapter 0's baselines.

Notebook: every chapter ends with ``leaderboard.show(chapter)``; chapter 11 reads
the same rows (``rows()``).

``record`` remembers one trained model: its chapter, a name, its parameters,
the steps it trained, its training throughput and its validation NLL. Rows are
kept in one JSON file per chapter, so a later chapter run on the same machine
shows the earlier chapters' rows too; a chapter run alone (in Colab) shows the
baselines and its own rows. Runs of different profiles or data never mix: each
(profile, data) pair has its own folder under ``MUSICTX_LEADERBOARD``, else
``$MUSICTX_CACHE/leaderboard``, else ``~/.cache/musictx_lite/leaderboard``.

Only models scored in nats per token (next-token prediction on whole validation
pieces) are ranked against the baselines; a model of another task (chapter 2's
fill-in, in nats per hidden note) is listed below the ranking, by itself. Models
are ranked only against models of the same budget (steps and peak learning rate):
each budget has its own section, under the baselines, which train on nothing and
stand beside every section.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import settings
from ..files import atomic_write
from ..io.data import cache_root

NAME_WIDTH = 24
NOTE_WIDTH = 24
TOKEN_TASK = "next"             # the task whose NLL is in nats per token


@dataclass
class Row:
    """One line of the leaderboard. ``params``, ``steps`` and ``tokens_per_s`` are None for a baseline."""

    chapter: int
    name: str
    params: int | None
    steps: int | None
    tokens_per_s: float | None
    valid_nll: float
    note: str = ""
    task: str = TOKEN_TASK
    lr: float | None = None            # the peak learning rate of its run (None: a baseline, or an older row)

    @property
    def budget(self) -> tuple:
        """What makes two rows comparable: the steps and the peak learning rate they trained with."""
        return (self.steps or 0, self.lr or 0.0)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "default"


def folder() -> Path:
    """Where this profile's and data's rows live (created on first write)."""
    from ..engine.profiles import get_profile

    root = settings.leaderboard_dir() or cache_root() / "leaderboard"
    data = settings.data()
    return Path(root) / f"{get_profile().name}-{_slug(Path(data).name if os.sep in data else data)}"


def _path(chapter: int) -> Path:
    return folder() / f"chapter{int(chapter):02d}.json"


def _read(chapter: int) -> list[Row]:
    path = _path(chapter)
    try:
        return [Row(**r) for r in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):          # missing, or written by another version: ignored
        return []


def _write(chapter: int, rows: list[Row]) -> None:
    text = json.dumps([asdict(r) for r in rows], indent=1) + "\n"
    atomic_write(_path(chapter), lambda tmp: Path(tmp).write_text(text))   # a reader never sees half a file


def record(chapter: int, name: str, model, history, valid_nll: float, note: str = "") -> None:
    """Remember ``model`` (trained in ``chapter``, with ``history``) under ``name``.

    A second record of the same name in the same chapter replaces the first, so
    re-running a chapter never duplicates its rows. ``history`` may be None (a
    model that was not trained by ``train``): steps and tokens/s stay empty.
    """
    from ..models.registry import n_params

    task = getattr(getattr(model, "task", None), "name", TOKEN_TASK)
    row = Row(chapter=int(chapter), name=str(name), params=n_params(model),
              steps=history.step[-1] if history is not None and history.step else None,
              tokens_per_s=round(history.tokens_per_s, 1) if history is not None and history.seconds else None,
              valid_nll=float(valid_nll), note=str(note), task=str(task),
              lr=max(history.lr) if history is not None and history.lr else None)
    rows = [r for r in _read(chapter) if r.name != row.name] + [row]
    _write(chapter, rows)


def clear(chapter: int) -> None:
    """Forget the rows of ``chapter`` (the tests use it; a chapter never needs it)."""
    _path(chapter).unlink(missing_ok=True)


_BASELINES: dict[str, dict[str, float]] = {}


def baselines(data=None) -> dict[str, float]:
    """Chapter 0's baselines on the validation pieces of ``data`` (default: ``load_data()``), computed once
    per data source and process."""
    from ..io.data import load_data
    from ..study.baselines import baseline_nlls

    key = settings.data() if data is None else f"source: {data.source}"
    if key not in _BASELINES:
        _BASELINES[key] = baseline_nlls(data if data is not None else load_data())
    return _BASELINES[key]


def rows(chapter: int, data=None) -> list[Row]:
    """Chapter 0's baselines, best first, then every recorded row of chapters 0 to ``chapter``: per task, per
    budget (the most steps first), best NLL first."""
    base = [Row(0, name, None, None, None, v, "baseline") for name, v in baselines(data).items()]
    recorded = [r for c in range(int(chapter) + 1) for r in _read(c)]
    return sorted(base, key=lambda r: r.valid_nll) + sorted(
        recorded, key=lambda r: (r.task != TOKEN_TASK, r.task, -r.budget[0], -r.budget[1], r.valid_nll))


def _budget_title(r: Row) -> str:
    if r.steps is None:
        return "not trained by train():"
    return f"trained {r.steps:,} steps" + (f" at a peak learning rate of {r.lr:g}:" if r.lr else ":")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _line(r: Row) -> str:
    params = f"{r.params:,}" if r.params is not None else "-"
    steps = f"{r.steps:,}" if r.steps is not None else "-"
    speed = f"{r.tokens_per_s:,.0f}" if r.tokens_per_s is not None else "-"
    return (f"{r.chapter:>2}  {_cut(r.name, NAME_WIDTH):<{NAME_WIDTH}} {params:>9} {steps:>6} {speed:>7} "
            f"{r.valid_nll:>6.3f}  {_cut(r.note, NOTE_WIDTH)}").rstrip()


class Table:
    """The printed leaderboard: ``str(table)`` is its text, ``table.rows`` its rows."""

    def __init__(self, chapter: int, rows: list[Row]):
        self.chapter, self.rows = chapter, rows
        head = (f"ch  {'model':<{NAME_WIDTH}} {'params':>9} {'steps':>6} {'tok/s':>7} {'NLL':>6}  note")
        lines = [f"Leaderboard after chapter {chapter}: valid NLL in nats per token, best first;",
                 "models ranked only against models of the same budget", head, "-" * len(head),
                 "chapter 0's baselines (counted, not trained):"]
        lines += [_line(r) for r in rows if r.note == "baseline" and r.chapter == 0 and r.params is None]
        budget = None
        for r in rows:
            if r.task != TOKEN_TASK or (r.params is None and r.note == "baseline"):
                continue
            if r.budget != budget:
                budget = r.budget
                lines.append(_budget_title(r))
            lines.append(_line(r))
        for task in sorted({r.task for r in rows} - {TOKEN_TASK}):
            lines += ["", f"task {task!r} (NLL per predicted note, not comparable with the above):"]
            lines += [_line(r) for r in rows if r.task == task]
        self.text = "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _ipython_display_(self) -> None:
        """``show`` has printed the table already: a notebook displays it once, not twice."""


def show(chapter: int, data=None) -> Table:
    """Print (and return) the leaderboard as it stands after ``chapter``; every line is at most 88 characters."""
    table = Table(int(chapter), rows(chapter, data))
    print(table.text)
    return table
