"""Chapter 6's analysis helpers and the exercises of chapters 6 and 8."""
import math

import pytest
import torch
import torch.nn.functional as F
from musictx_solutions import (
    exercise_6_1,
    exercise_6_2,
    exercise_6_3,
    exercise_8_1,
    exercise_8_2,
    exercise_8_3,
)

from musictx_lite import ModelConfig, build_model, encode, load_data
from musictx_lite.models.positions import lag_similarity, position_nll, sinusoids, voice_accuracy


def test_voice_accuracy_reads_a_voice_code_and_not_noise():
    voice = (torch.arange(64) - 1) % 4
    assert voice_accuracy(F.one_hot(voice, 4).float() + 0.01 * torch.randn(64, 4)) == 1.0
    assert voice_accuracy(torch.ones(64, 8)) <= 0.5
    assert voice_accuracy(sinusoids(128, 64)) < 0.5                    # no pair has period 4


def test_lag_similarity_peaks_at_the_period():
    t = torch.arange(100.0)[:, None]
    P = torch.cat([torch.cos(t * math.pi / 2), torch.sin(t * math.pi / 2), torch.ones(100, 1)], dim=1)
    lags = lag_similarity(P, 8)
    assert lags[3] == pytest.approx(1.0) and lags[7] == pytest.approx(1.0)   # distances 4 and 8
    assert lags[1] == pytest.approx(0.0, abs=1e-6)                         # distance 2: opposite, + bias


def test_position_nll_matches_a_direct_computation():
    data = load_data()
    torch.manual_seed(0)
    model = build_model("sinusoidal", ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=16)).eval()
    curve = position_nll(model, data.valid[:2], 32, max_windows=1)
    s = torch.as_tensor(encode(data.valid[0].pitches))[:33]
    with torch.no_grad():
        ref = F.cross_entropy(model(s[None, :-1])[0], s[1:], reduction="none")
    torch.testing.assert_close(curve, ref)
    with pytest.raises(ValueError, match="no piece is longer"):
        position_nll(model, data.valid[:1], 10**6)


def test_position_nll_with_a_window_sees_at_most_the_window_at_trained_positions():
    data = load_data()
    torch.manual_seed(0)
    model = build_model("learned-positions", ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=16)).eval()
    with pytest.raises(ValueError, match="learned positions stop at 16"):
        position_nll(model, data.valid[:2], 32, max_windows=1)          # the full view needs position 16+
    curve = position_nll(model, data.valid[:2], 32, max_windows=1, window=16)
    s = torch.as_tensor(encode(data.valid[0].pitches))[:33]
    with torch.no_grad():
        first = F.cross_entropy(model(s[None, :16])[0], s[1:17], reduction="none")
        view = F.cross_entropy(model(s[None, 8:24])[0], s[9:25], reduction="none")   # slid by 8, from 0
        last = F.cross_entropy(model(s[None, 16:32])[0], s[17:33], reduction="none")
    torch.testing.assert_close(curve[:16], first)
    torch.testing.assert_close(curve[16:24], view[8:])                       # 8..15 tokens of view
    torch.testing.assert_close(curve[24:], last[8:])
    sin = build_model("sinusoidal", ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=16)).eval()
    torch.testing.assert_close(position_nll(sin, data.valid[:2], 32, window=32), position_nll(sin, data.valid[:2], 32))
    with pytest.raises(ValueError, match="window must be even"):
        position_nll(sin, data.valid[:2], 32, window=15)


def test_exercise_6_1_sinusoids_shift_exactly_learned_do_not():
    torch.manual_seed(0)
    model = build_model("learned-positions", ModelConfig(n_embd=16, n_heads=2, context=64))
    res = exercise_6_1(model)
    assert max(res["sinusoidal"]) < 1e-3 and min(res["learned"]) > 0.1


def test_exercise_6_2_and_6_3():
    acc = exercise_6_2(C=32, L=64)
    assert acc["with a pi/2 pair"] > 0.9 and acc["standard"] < 0.5
    found = exercise_6_3(C=16, L=32)
    assert found == {"swap within a voice": True, "swap across voices": False}


def test_exercises_8():
    S2 = exercise_8_1(L=4)
    assert S2.shape == (4, 4)
    out = exercise_8_2()
    assert out[2048] == (2048 ** 2 * 64 * 4, 2048 * 64 * 4)
    torch.manual_seed(0)
    model = build_model("relative", ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=16))
    inside, past = exercise_8_3(model, load_data())
    curve = position_nll(model, load_data().valid, 32)                    # windows of 2L, L = 16
    assert (inside, past) == pytest.approx((curve[4:16].mean().item(), curve[16:].mean().item()))
    assert inside != pytest.approx(past)                                  # two different stretches
