"""The assignments, one module per week (``w01.py`` ... ``w12.py``), each defining ``ASSIGNMENT``."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

from ..spec import Assignment

WEEKS = {int(m.group(1)): p.stem for p in sorted(Path(__file__).parent.glob("w*.py"))
         if (m := re.fullmatch(r"w(\d\d)", p.stem))}


def assignment(week: int) -> Assignment:
    if week not in WEEKS:
        raise ValueError(f"no assignment for week {week}; the course has weeks {sorted(WEEKS)}")
    a = importlib.import_module(f"{__name__}.{WEEKS[week]}").ASSIGNMENT
    if a.week != week:
        raise ValueError(f"{WEEKS[week]}.py defines week {a.week}")
    return a
