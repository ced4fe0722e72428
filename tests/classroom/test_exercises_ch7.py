import math

from musictx_solutions import exercise_7_1, exercise_7_2, exercise_7_3


def test_exercise_7_1_counts():
    out = exercise_7_1(L=2048, k=16, d_model=512, heads=8)
    assert out["shaw"] == (2 * 33 * 64, 2 * 2048 * 2048 * 64 * 4)
    assert out["music transformer"] == (8 * 2048 * 64, 8 * 2048 * 64 * 4)
    assert out["relative logits"] == 8 * 2048 * 2048 * 4             # 128 MiB: (nh, L, L)


def test_exercise_7_2_rope_is_shift_invariant():
    rope, absolute = exercise_7_2()
    assert rope < 1e-4 and absolute > 0.1


def test_exercise_7_3_reach_against_the_context():
    out = exercise_7_3(context=128, n_heads=4)
    assert out["reach"] == [20.0, 80.0, 320.0, 1280.0]
    assert out["beyond"] == [3, 4]                   # 320 and 1280 tokens > 127, the farthest key
    slopes = [1 / 4, 1 / 16, 1 / 64, 1 / 256]
    assert out["kept"] == [math.exp(-m * 127) for m in slopes]
    assert exercise_7_3(context=1024)["beyond"] == [4]        # a longer context: only head 4 sees it all
    assert exercise_7_3(context=16)["beyond"] == [1, 2, 3, 4]


def test_exercise_7_3_prints_the_context(capsys):
    exercise_7_3(context=128)
    out = capsys.readouterr().out
    assert "L = 128" in out and "127 tokens back" in out
