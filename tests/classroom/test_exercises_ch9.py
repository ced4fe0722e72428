import torch
from musictx_solutions import exercise_9_1, exercise_9_2, exercise_9_3
from musictx_solutions.ch9 import reach

from musictx_lite.classroom.checks.ch9 import _depends


def test_exercise_9_1_counts():
    out = exercise_9_1()
    assert out == {"global": 33_558_528, "local": 1_560_576, "local window": 2_097_152}


def test_exercise_9_2_reach():
    assert exercise_9_2(T=24, N=4, n_max=3) == {1: 7, 2: 11, 3: 15}


def test_exercise_9_3_skew():
    assert exercise_9_3(N=4)


def test_check_9_2s_gradient_probe_is_the_reference_reach():
    """check_9_2 compares with where the gradient of a stack of local layers is nonzero, not with ``reach``."""
    for T, N, n in ((12, 3, 1), (24, 4, 2), (24, 4, 3), (10, 2, 5)):
        assert torch.equal(_depends(T, N, n), reach(T, N, n)), (T, N, n)
