"""Reference solutions to the exercises at the end of each chapter, one module per chapter.

Notebook: the "Exercises" section of every chapter. Try the task in the empty
cell first; then call ``exercise_<chapter>_<n>()``, which runs the reference
solution and prints what it finds.
"""
from .ch0 import exercise_0_1, exercise_0_2, exercise_0_3
from .ch1 import AdditiveAttention, exercise_1_1, exercise_1_2, exercise_1_3
from .ch2 import exercise_2_1, exercise_2_2, exercise_2_3
from .ch3 import exercise_3_1, exercise_3_2
from .ch4 import *  # noqa: F401,F403
from .ch5 import *  # noqa: F401,F403
from .ch6 import *  # noqa: F401,F403
from .ch7 import *  # noqa: F401,F403
from .ch8 import *  # noqa: F401,F403
from .ch9 import *  # noqa: F401,F403
from .ch10 import *  # noqa: F401,F403
from .ch11 import *  # noqa: F401,F403

__all__ = [n for n in dir() if n.startswith("exercise_")] + ["AdditiveAttention"]
