from musictx_solutions import exercise_7_1, exercise_7_2, exercise_7_3


def test_exercise_7_1_counts():
    out = exercise_7_1(L=2048, k=16, d_model=512, heads=8)
    assert out["shaw"] == (2 * 33 * 64, 2 * 2048 * 2048 * 64 * 4)
    assert out["music transformer"] == (8 * 2048 * 64, 8 * 2048 * 64 * 4)
    assert out["relative logits"] == 8 * 2048 * 2048 * 4             # 128 MiB: (nh, L, L)


def test_exercise_7_2_rope_is_shift_invariant():
    rope, absolute = exercise_7_2()
    assert rope < 1e-4 and absolute > 0.1


def test_exercise_7_3_reach():
    assert exercise_7_3(n_heads=4) == [20.0, 80.0, 320.0, 1280.0]
