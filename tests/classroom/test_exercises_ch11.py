import numpy as np
import pytest
import torch
from musictx_solutions import exercise_11_1, exercise_11_2, exercise_11_3
from musictx_solutions.ch11 import (
    fit_cost,
    out_of_range_mass,
    piece_nlls,
    predicted_speedup,
    sample_ms,
    unpaired_bootstrap,
)

from musictx_lite import ModelConfig, build_model, evaluate_nll
from musictx_lite.io.stats import STATS
from musictx_lite.study.compare import paired_bootstrap

TINY = ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=32)


def test_piece_nlls_add_up_to_evaluate_nll(chorales):
    torch.manual_seed(0)
    model = build_model("relative", TINY)
    pieces = chorales.valid[:5]
    sums, counts = piece_nlls(model, pieces)
    assert sums.shape == counts.shape == (5,)
    assert sums.sum() / counts.sum() == pytest.approx(evaluate_nll(model, pieces), rel=1e-6)


def test_paired_bootstrap():
    rng = np.random.default_rng(0)
    counts = rng.integers(50, 200, 30)
    b = rng.uniform(0.5, 2.0, 30) * counts
    assert paired_bootstrap(b, b, counts) == (0.0, 0.0, 0.0)
    diff, lo, hi = paired_bootstrap(b + 0.1 * counts, b, counts)      # 0.1 nats per token worse, everywhere
    assert diff == pytest.approx(0.1) and lo == pytest.approx(0.1) and hi == pytest.approx(0.1)
    noisy = b + rng.normal(0.05, 0.3, 30) * counts
    diff, lo, hi = paired_bootstrap(noisy, b, counts)
    assert lo < diff < hi and hi - lo > 0.05


def test_unpaired_bootstrap_is_wider_when_pieces_differ():
    rng = np.random.default_rng(0)
    counts = rng.integers(50, 200, 30)
    hard = rng.uniform(0.5, 2.0, 30)                                       # pieces differ a lot
    a, b = hard * counts, (hard + 0.05 + rng.normal(0, 0.02, 30)) * counts
    diff, lo, hi = unpaired_bootstrap(a, b, counts)
    pdiff, plo, phi = paired_bootstrap(a, b, counts)
    assert diff == pdiff == pytest.approx(-0.05, abs=0.01)
    assert lo < diff < hi and hi - lo > 4 * (phi - plo)                    # pairing cancels the pieces' difficulty
    assert unpaired_bootstrap(a, b, counts) == (diff, lo, hi)              # seeded
    assert unpaired_bootstrap(b + 0.1 * counts, b, counts)[0] == pytest.approx(0.1)


def test_exercise_11_1_same_model_is_no_difference(chorales):
    torch.manual_seed(0)
    model = build_model("lstm", TINY)
    out = exercise_11_1(model, model, chorales.valid[:4], n=200)
    assert out["diff"] == 0 and not out["real"]
    assert out["low"] == out["high"] == 0 and out["unpaired_low"] < 0 < out["unpaired_high"]


def test_cost_fit_and_predicted_speedup(capsys):
    rows = [{"t": t, "cached": 0.5 + 0.001 * t, "re-encoded": 0.2 + 0.01 * t + 1e-4 * t * t}
            for t in (16, 64, 256, 1024)]
    assert fit_cost(rows, "re-encoded", 2) == pytest.approx((0.2, 0.01, 1e-4), rel=1e-6)
    assert fit_cost(rows, "cached", 1) == pytest.approx((0.5, 0.001, 0.0), rel=1e-6, abs=1e-12)
    assert sample_ms((1.0, 2.0, 3.0), 3) == pytest.approx(sum(1 + 2 * t + 3 * t * t for t in (1, 2, 3)))
    assert predicted_speedup((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), 9) == pytest.approx(5.0)   # (n + 1) / 2
    out = exercise_11_2(rows, lengths=(16, 4096))
    assert out["speedup"][4096] > out["speedup"][16]
    capsys.readouterr()
    exercise_11_2(rows, lengths=(16,), measured={1024: 2 * predicted_speedup(*out["fits"].values(), 1024)})
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("measured speed-up for  1024 tokens") and last.endswith("2.00 times the prediction")


def test_exercise_11_3_statistics_per_temperature(chorales):
    torch.manual_seed(0)
    model = build_model("relative", TINY)
    out = exercise_11_3(model, chorales.test[:2], temperatures=(0.5, 2.0), prompt_steps=4, n_steps=8)
    assert list(out) == [0.5, 2.0]
    for row in out.values():
        assert list(row) == [*STATS, "out_of_range_mass"]
        assert all(0 <= v <= 1 for k, v in row.items() if k != "mean_length") and row["mean_length"] >= 1
    # the mass on out-of-range pitches, recomputed by hand for one piece at T = 2
    from musictx_lite.io.stats import RANGES
    from musictx_lite.io.tokens import LOWEST, N_SPECIAL, encode

    p = chorales.test[0]
    x = torch.as_tensor(encode(p.pitches))[: model.context][None]
    with torch.no_grad():
        probs = torch.softmax(model.eval()(x)[0] / 2.0, -1)
    want = []
    for t, row in enumerate(probs):
        lo, hi = list(RANGES.values())[t % 4]
        want.append(sum(float(row[k]) for k in range(N_SPECIAL, len(row))
                        if not lo <= k - N_SPECIAL + LOWEST <= hi))
    assert out_of_range_mass(model, [p], 2.0) == pytest.approx(np.mean(want), rel=1e-5)
    cold, hot = out_of_range_mass(model, [p], 0.1), out_of_range_mass(model, [p], 10.0)
    assert hot > cold                  # a high temperature spreads mass towards the uniform
