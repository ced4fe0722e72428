"""Check your own answers to the exercises that ask for code, with no grading server.

Notebooks: the "Exercises" sections of chapters 1, 3, 4, 5, 6, 8, 9, 10, 11, 12 and 13
(exercises 1.1, 3.1, 3.2, 4.1, 4.2, 5.1, 6.2, 6.3, 8.1, 9.1, 9.2, 9.3, 10.1, 10.2,
10.3, 11.1, 11.2, 12.1, 12.2, 12.3, 13.1, 13.2, 13.3). The other exercises ask for measurements, counts and
explanations; their reference cells print what to compare with.

In Colab (or any notebook), once your answer runs::

    from musictx_lite.classroom.checkers import check_5_1
    check_5_1(MyRMSNorm)       # check_5_1: pass (...)   or   check_5_1: fail: <what is wrong>

``help(check_5_1)`` says what your answer must look like: which arguments the
checker passes and what it expects back. ``checkers_for(5)`` lists a chapter's
checkers; ``CHECKERS`` maps "5.1" to ``check_5_1``.

Each checker sits in ``musictx_lite.classroom.checks`` (``ch5.py`` holds ``check_5_1``) and
compares your function or module with the package module the chapter built, or with values the book's
reference solution computed once and stored as numbers (the reference code is not in this package),
on small random inputs with fixed seeds, prints one line (two when your code raised:
the second says where), and returns True or False. It never raises on a wrong
answer. A class is built on the CPU; an instance is checked on its own device
(CUDA in Colab) and left as it was; your random state is not touched.
"""
from __future__ import annotations

from typing import Callable

from .checks.ch1 import check_1_1
from .checks.ch3 import check_3_1, check_3_2
from .checks.ch4 import check_4_1, check_4_2
from .checks.ch5 import check_5_1
from .checks.ch6 import check_6_2, check_6_3
from .checks.ch8 import check_8_1
from .checks.ch9 import check_9_1, check_9_2, check_9_3
from .checks.ch10 import check_10_1, check_10_2, check_10_3
from .checks.ch11 import check_11_1, check_11_2
from .checks.ch12 import check_12_1, check_12_2, check_12_3
from .checks.ch13 import check_13_1, check_13_2, check_13_3

__all__ = ["CHECKERS", "checkers_for", "check_1_1", "check_3_1", "check_3_2", "check_4_1", "check_4_2",
           "check_5_1", "check_6_2", "check_6_3", "check_8_1", "check_9_1", "check_9_2", "check_9_3", "check_10_1",
           "check_10_2", "check_10_3", "check_11_1", "check_11_2", "check_12_1", "check_12_2", "check_12_3",
           "check_13_1", "check_13_2", "check_13_3"]

CHECKERS: dict[str, Callable[..., bool]] = {
    "1.1": check_1_1, "3.1": check_3_1, "3.2": check_3_2, "4.1": check_4_1, "4.2": check_4_2, "5.1": check_5_1,
    "6.2": check_6_2, "6.3": check_6_3, "8.1": check_8_1, "9.1": check_9_1, "9.2": check_9_2, "9.3": check_9_3,
    "10.1": check_10_1, "10.2": check_10_2, "10.3": check_10_3, "11.1": check_11_1, "11.2": check_11_2,
    "12.1": check_12_1, "12.2": check_12_2, "12.3": check_12_3, "13.1": check_13_1, "13.2": check_13_2,
    "13.3": check_13_3,
}


def checkers_for(chapter: int) -> list[str]:
    """The names of chapter ``chapter``'s checkers, e.g. ``checkers_for(9)`` -> ["check_9_1", ...]; [] if none."""
    if isinstance(chapter, bool) or not isinstance(chapter, int) or not 0 <= chapter <= 13:
        raise ValueError(f"chapter must be an integer from 0 to 13, got {chapter!r}")
    return [fn.__name__ for key, fn in CHECKERS.items() if key.split(".")[0] == str(chapter)]
