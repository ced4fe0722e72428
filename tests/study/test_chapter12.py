"""Chapter 12's study (``study.chapter12``): its measurements, and the sentences the chapter writes from a
results file, each branch built from altered copies of a small results file made here."""
import copy

import numpy as np
import pytest
import torch

from musictx_lite import build_model
from musictx_lite.engine.profiles import resolve
from musictx_lite.models.coconet import melody_only_nll
from musictx_lite.models.tasks import voice_nlls
from musictx_lite.study import chapter12 as c12


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return {n: build_model(n, resolve(n, "smoke")[0]).eval() for n in ("relative", "harmoniser", "coconet")}


def test_way_nll_is_each_ways_number(tiny, chorales):
    few = chorales.valid[:2]
    assert c12.way_nll(tiny["relative"], few) == voice_nlls(tiny["relative"], few)["ATB"]
    assert c12.way_nll(tiny["harmoniser"], few) == voice_nlls(tiny["harmoniser"], few)["ATB"]
    assert c12.way_nll(tiny["coconet"], few) == melody_only_nll(tiny["coconet"], few)


@pytest.mark.parametrize("name", ["relative", "harmoniser", "coconet"])
def test_harmonise_pieces_keeps_every_melody(name, tiny, chorales):
    few = [p for p in chorales.valid[:2]]
    grids = c12.harmonise_pieces(tiny[name], few, seed=1, n_iter=4)
    for g, p in zip(grids, few):
        assert g.shape == p.pitches.shape
        np.testing.assert_array_equal(g[:, 0], p.pitches[:, 0])


def test_music_row_has_every_statistic_inside_its_interval(chorales):
    row = c12.music_row([p.pitches for p in chorales.valid[:6]], n=200)
    assert set(row["value"]) == set(c12.MUSIC) == set(row["interval"])
    for k, v in row["value"].items():
        lo, hi = row["interval"][k]
        assert lo - 1e-12 <= v <= hi + 1e-12, k


def test_nll_summary_chooses_on_valid_and_reports_that_seeds_test():
    s = c12.nll_summary({"0": 0.30, "1": 0.28, "2": 0.29}, {"0": 0.5, "1": 0.31, "2": 0.4})
    assert s["chosen_seed"] == 1 and s["test"] == 0.31
    assert s["valid_mean"] == pytest.approx(0.29)
    lo, hi = s["valid_interval"]
    assert lo < 0.28 and hi > 0.30                       # 3 seeds: t = 4.303 times the standard error


def results(enc=(0.28, 0.285, 0.29), dec=0.323, ratios=(1.0, 2.0, 1.0, 1.0), kept=True) -> dict:
    bach = {k: 0.5 for k in c12.MUSIC} | {k: 0.01 for k in c12.RARE} | {"complete_chords": 0.86}
    enc_row = bach | {k: bach[k] * r for k, r in zip(c12.RARE, ratios)} | {"complete_chords": 0.80}
    res = {"temperature": 1.0, "n_test": 77, "nll": {
        "decoder": c12.nll_summary({"0": dec}, {"0": dec + 0.02}),
        "harmoniser": c12.nll_summary({str(i): v for i, v in enumerate(enc)}, {"0": 0.3, "1": 0.3, "2": 0.3}),
        "coconet": c12.nll_summary({"0": 0.9, "1": 0.95, "2": 0.92}, {"0": 0.93, "1": 0.9, "2": 0.9})},
        "music": {"bach": {"value": bach}, "harmoniser": {"value": enc_row},
                  "decoder": {"value": dict(enc_row, complete_chords=0.7)},
                  "coconet": {"value": dict(enc_row, complete_chords=0.5)}},
        "melody_kept": {"decoder": True, "harmoniser": kept, "coconet": True},
        "speed": {"device": "cpu: test", "rows": [{"way": "decoder", "bars": 16, "seconds": 0.9},
                                                   {"way": "harmoniser", "bars": 16, "seconds": 1.5}]}}
    for row in res["music"].values():
        row["interval"] = {k: [v, v] for k, v in row["value"].items()}
    return res


def test_nll_reading_follows_the_numbers():
    good = c12.nll_reading(results())
    assert "11.8% lower" in good and "reached." in good and "lies wholly below" in good
    near = c12.nll_reading(results(enc=(0.30, 0.33, 0.31)))
    assert "not reached" in near and "cannot say that the encoder-decoder is better" in near
    worse = c12.nll_reading(results(enc=(0.33, 0.34, 0.335)))
    assert "higher" in worse and "did not improve" in worse
    one = c12.nll_reading(results(enc=(0.28,)))
    assert "one seed" in one and "One seed gives no interval" in one
    assert "does not rank it against the other two" in good


def test_music_reading_follows_the_numbers():
    res = results()
    text = c12.music_reading(res)
    assert "All four stay within 3x" in text and "parallel octaves 2.0x" in text
    assert "the nearest to him being the encoder-decoder" in text and "keeps its melody exactly" in text
    over = c12.music_reading(results(ratios=(4.0, 1.0, 1.0, 5.0), kept=False))
    assert "2 of four stay within 3x" in over and "parallel fifths, crossings do not" in over
    assert "changed its melody: harmoniser" in over
    none = copy.deepcopy(res)
    none["music"]["bach"]["value"]["parallel_fifths"] = 0.0
    assert "where Bach has none" in c12.music_reading(none)


def test_speed_reading_and_tables():
    res = results()
    assert c12.speed_reading(res).endswith("met by decoder (soprano forced).")
    res["speed"]["rows"][0]["seconds"] = 1.2
    assert "None meets the target of 1 s" in c12.speed_reading(res)
    table = c12.nll_table(res)
    assert table.count("\n") == 3 and "Coconet (melody-only NLL)" in table and "soprano alone" in table
    assert c12.music_table(res).count("95% interval") == 4


def test_gain_where_splits_the_lower_voices_by_their_onsets(tiny, chorales):
    few = chorales.valid[:2]
    w = c12.gain_where(tiny["relative"], tiny["harmoniser"], few)
    assert w["starts"]["share"] + w["holds"]["share"] == pytest.approx(1.0)
    onsets = sum(int((p.pitches[1:, 1:] != p.pitches[:-1, 1:]).sum()) + 3 for p in few)
    assert w["starts"]["share"] == pytest.approx(onsets / sum(3 * len(p.pitches) for p in few))
    # the groups' means, weighted by their shares, are the decoder's NLL of all its lower-voice tokens
    whole = voice_nlls(tiny["relative"], few)["ATB"]
    assert w["starts"]["share"] * w["starts"]["decoder"] + w["holds"]["share"] * w["holds"]["decoder"] == \
        pytest.approx(whole)
    text = c12.where_reading({"where": w})
    assert text.startswith("On the validation split, where a lower voice starts a note")
    assert "of the decoder's NLL" in text
