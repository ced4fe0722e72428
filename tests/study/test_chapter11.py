"""Chapter 11's passages that depend on its run read true both where the official JSB split loads and in
a build that trains on the embedded chorales instead (no internet, no local copy)."""
import pytest

from musictx_lite import load_chorales
from musictx_lite.io.data import Splits
from musictx_lite.study import chapter11 as ch11

OFFICIAL = "official JSB split (Jsb16thSeparated.json)"            # what load_jsb names it


@pytest.fixture(scope="module")
def embedded():
    return load_chorales()


@pytest.fixture(scope="module")
def official(embedded):
    """A stand-in for the official split: its source string and sizes (the passages read nothing else)."""
    return Splits(embedded.train + embedded.valid[:32], embedded.valid[:66] + embedded.test[:10],
                  embedded.test[:66] + embedded.valid[:11], source=OFFICIAL)


def test_the_stand_in_is_official_and_the_embedded_chorales_are_not(official, embedded):
    assert ch11.is_official(official) and not ch11.is_official(embedded)
    assert (len(official.train), len(official.valid), len(official.test)) == (229, 76, 77)


def test_the_data_passage_names_the_data_that_trained(official, embedded):
    text = ch11.data_passage(official)
    assert "official JSB split" in text and "229 chorales to train on, 76 to validate, 77 to test" in text
    text = ch11.data_passage(embedded)
    n = f"{len(embedded.train)} chorales to train on, {len(embedded.valid)} to validate"
    assert "could not be loaded" in text and n in text and "embedded" in text
    assert "229" not in text and "not on the paper's data" in text


def test_the_sprint_is_set_beside_the_shipped_model_only_on_the_same_data(official, embedded):
    assert "scores far below its sprint row" in ch11.sprint_and_shipped(official)
    text = ch11.sprint_and_shipped(embedded)
    assert "not set beside this sprint" in text and "below its sprint row" not in text
    assert "official split" in ch11.sprint_against_file(official)
    assert "different data" in ch11.sprint_against_file(embedded)
    assert ch11.sprint_data(official) == "" and "not the file's" in ch11.sprint_data(embedded)


@pytest.mark.parametrize("which, smoke, again", [("official", False, True), ("official", True, False),
                                                 ("embedded", False, False), ("embedded", True, False)])
def test_a_build_says_whether_it_scored_the_shipped_models_again(request, which, smoke, again):
    text = ch11.rescored(request.getfixturevalue(which), smoke)
    assert ("scores the shipped models again in this build" in text) is again
    assert ("not scored again" in text) is (not again)
    if not again:
        assert ("smoke profile" in text) is (which == "official")


def test_the_share_copying_could_buy_is_the_measured_one():
    assert "0.5% of all steps" in ch11.copying_share(0.005)
    assert "few percent" not in ch11.copying_share(0.005)


def test_the_prompts_are_held_out_only_on_the_official_split(official, embedded):
    assert "held out of its training" in ch11.prompts(official)
    text = ch11.prompts(embedded)
    assert "probably seen" in text and "not of music held out" in text


def test_the_real_official_split_is_recognised(jsb_path):
    from musictx_lite import load_jsb

    data = load_jsb(jsb_path)
    assert ch11.is_official(data) and data.source.startswith(OFFICIAL.split(" (")[0])
    assert "229 chorales to train on, 76 to validate, 77 to test" in ch11.data_passage(data)
