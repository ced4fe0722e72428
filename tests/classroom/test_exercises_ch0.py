import numpy as np
import pytest
from musictx_solutions import exercise_0_3

from musictx_lite.io.tokens import encode
from musictx_lite.study.baselines import TwoTokens


def test_exercise_0_3_splits_both_tables_by_voice(chorales, capsys):
    out = exercise_0_3(chorales)
    assert list(out) == ["soprano", "alto", "tenor", "bass"]
    # every voice has the same number of targets, so the voices' mean is the table's NLL
    two = TwoTokens().fit(chorales.train)
    assert np.mean([b for _, b in out.values()]) == pytest.approx(two.nll(chorales.valid), rel=1e-9)
    assert np.mean([a for a, _ in out.values()]) == pytest.approx(two.same.nll(chorales.valid), rel=1e-9)
    assert all(len(encode(p.pitches)) % 4 == 1 for p in chorales.valid)
    gains = {k: a - b for k, (a, b) in out.items()}
    assert all(g > 0 for g in gains.values())                    # the second token helps every voice
    text = capsys.readouterr().out
    least = min(gains, key=gains.get)
    assert f"The {least} gains least." in text
    # measured on the embedded chorales: the soprano, whose x_t-1 is the previous step's bass
    assert least == "soprano" and "not a voice of its own chord" in " ".join(text.split())
