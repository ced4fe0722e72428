from musictx_lite.classroom.exercises import exercise_9_1, exercise_9_2, exercise_9_3


def test_exercise_9_1_counts():
    out = exercise_9_1()
    assert out == {"global": 33_558_528, "local": 1_560_576, "local window": 2_097_152}


def test_exercise_9_2_reach():
    assert exercise_9_2(T=24, N=4, n_max=3) == {1: 7, 2: 11, 3: 15}


def test_exercise_9_3_skew():
    assert exercise_9_3(N=4)
