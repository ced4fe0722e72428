"""The reference solutions of the book's exercises and the runners its hidden solution cells call
(``exercise_5_1()`` and the like), one module per chapter.

This package is the book's, not the reader's: it lives in ``book/solutions`` and is installed by
``scripts/setup-env`` for the book build and the tests, never by a chapter's Colab install cell, and the
``musictx-lite`` wheel does not hold it. The checkers students call (``musictx_lite.classroom.checkers``)
hold no reference code: where they need the reference's values, they read the numbers that
``python -m musictx_solutions.expected`` computed with it.
"""
from .ch0 import exercise_0_1, exercise_0_2, exercise_0_3
from .ch1 import AdditiveAttention, exercise_1_1, exercise_1_2, exercise_1_3
from .ch2 import exercise_2_1, exercise_2_2, exercise_2_3
from .ch3 import exercise_3_1, exercise_3_2
from .ch4 import exercise_4_1, exercise_4_2, exercise_4_3
from .ch5 import exercise_5_1, exercise_5_2, exercise_5_3
from .ch6 import exercise_6_1, exercise_6_2, exercise_6_3
from .ch7 import exercise_7_1, exercise_7_2, exercise_7_3
from .ch8 import exercise_8_1, exercise_8_2, exercise_8_3
from .ch9 import exercise_9_1, exercise_9_2, exercise_9_3
from .ch10 import exercise_10_1, exercise_10_2, exercise_10_3
from .ch11 import exercise_11_1, exercise_11_2, exercise_11_3, exercise_11_4
from .ch12 import exercise_12_1, exercise_12_2, exercise_12_3
from .ch13 import exercise_13_1, exercise_13_2, exercise_13_3

__all__ = [
    "exercise_0_1", "exercise_0_2", "exercise_0_3", "AdditiveAttention", "exercise_1_1", "exercise_1_2",
    "exercise_1_3", "exercise_2_1", "exercise_2_2", "exercise_2_3", "exercise_3_1", "exercise_3_2",
    "exercise_4_1", "exercise_4_2", "exercise_4_3", "exercise_5_1", "exercise_5_2", "exercise_5_3",
    "exercise_6_1", "exercise_6_2", "exercise_6_3", "exercise_7_1", "exercise_7_2", "exercise_7_3",
    "exercise_8_1", "exercise_8_2", "exercise_8_3", "exercise_9_1", "exercise_9_2", "exercise_9_3",
    "exercise_10_1", "exercise_10_2", "exercise_10_3", "exercise_11_1", "exercise_11_2", "exercise_11_3",
    "exercise_11_4",
    "exercise_12_1", "exercise_12_2", "exercise_12_3", "exercise_13_1", "exercise_13_2", "exercise_13_3",
]
