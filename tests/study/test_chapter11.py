"""Chapter 11's printouts read from its files and records (part 2): one rule for "reaches" and "beats", the
shipped records beside the paper, the comparison over seeds by families, the ledger's two precisions."""
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


def test_the_real_official_split_is_recognised(jsb_path):
    from musictx_lite import load_jsb

    data = load_jsb(jsb_path)
    assert ch11.is_official(data) and data.source.startswith(OFFICIAL.split(" (")[0])
    assert (len(data.train), len(data.valid), len(data.test)) == (229, 76, 77)


def _record(nll, steps=12000, best_step=None, teachers=None, teachers_nll=None, curve_end=None):
    """A shipped model's record, as much as ``paper_reading`` reads: its curve falls by 0.004 over its
    last quarter of steps and ends at ``curve_end`` (default: ``nll``)."""
    end = nll if curve_end is None else curve_end
    r = {"valid_nll": nll, "steps": steps, "best_step": steps if best_step is None else best_step,
         "train_config": {"teachers": teachers} if teachers else {},
         "curve": {"eval_step": [steps // 4, steps // 2, 3 * steps // 4, steps],
                   "valid_nll": [end + 0.1, end + 0.01, end + 0.004, end]}}
    if teachers_nll is not None:
        r["teachers_valid_nll"] = teachers_nll
    return r


SHIPPED = {"sinusoidal": _record(0.375), "relative": _record(0.330, 24000, teachers=["a"], teachers_nll=0.310),
           "relative-voice": _record(0.348, best_step=11000)}


@pytest.mark.parametrize("nll, word", [(0.340, "beats"), (0.351, "beats"), (0.352, "reaches"), (0.357, "reaches"),
                                       (0.362, "reaches"), (0.3621, "does not reach")])
def test_one_rule_for_reaches_and_beats(nll, word):
    assert ch11.verdict(nll, 0.357, 0.005) == word
    assert ch11.verdict(0.3519, 0.357, 0.005) == "beats"


def test_the_verdicts_read_valid_and_test_alike():
    text = ch11.verdicts({"valid_nll": 0.348, "test_nll": 0.358}, 0.357, 0.005)
    assert text == "valid 0.348 beats, test 0.358 reaches"
    assert ch11.verdicts({"valid_nll": 0.330, "test_nll": 0.343}, 0.335, 0.005) == \
        "valid 0.330 reaches, test 0.343 does not reach"


def test_the_paper_reading_prints_each_row_against_the_same_recipe():
    printed = ch11.paper_reading(SHIPPED, _record(0.348), 12000)
    assert "absolute positions: valid 0.375, +0.027 against relative attention by the same recipe" in printed
    assert "(the paper: +0.060)" in printed
    assert "voice embedding: valid 0.348, +0.000 against" in printed
    assert "training steps: the recipe's 12,000; relative 24,000" in printed
    assert "at their best at their last evaluation: sinusoidal, relative\n" in printed
    assert "(0.0040 gained)" in printed
    assert "best shipped model: relative, valid 0.3300; the book's target for it, 0.32: not reached (0.0100 above)" \
        in printed and "its teachers' mean prediction: 0.3100" in printed
    shipped = {"sinusoidal": _record(0.375, best_step=11000), "relative": _record(0.340, best_step=11000),
               "relative-voice": _record(0.315, best_step=11000)}
    printed = ch11.paper_reading(shipped, _record(0.340), 12000)
    assert "training steps: the recipe's 12,000\n" in printed
    assert "at their best at their last evaluation: none" in printed
    assert "best shipped model: relative-voice, valid 0.3150; the book's target for it, 0.32: reached" in printed
    assert "teachers" not in printed


@pytest.fixture(scope="module")
def compare_file():
    import copy
    import json

    from musictx_lite.study import hub
    from musictx_lite.study.compare import seed_ranking

    res = json.loads((hub.HERE / "compare.json").read_text())
    return res, seed_ranking(res), copy.deepcopy


GROUPS = {"offsets": ["fnet-conv", "fnet-matrix", "local", "relative", "relative-voice", "rope", "shaw"],
          "one": ["attention", "multi-head"], "deep": ["transformer", "transformer-post-ln"],
          "absolute": ["sinusoidal", "learned-positions"], "lstms": ["lstm", "lstm-attention"]}


GROUPS = {"offsets": ["fnet-conv", "fnet-matrix", "local", "relative", "relative-voice", "rope", "shaw"],
          "one": ["attention", "multi-head"], "deep": ["transformer", "transformer-post-ln"],
          "absolute": ["sinusoidal", "learned-positions"], "lstms": ["lstm", "lstm-attention"]}


def test_the_families_reading_on_the_file(compare_file):
    res, real, copy = compare_file
    printed = ch11.families_reading(res, real, GROUPS, (2, 256), 3)
    assert "the LSTMs in this file: 2 layers of 256 units" in printed
    assert "12 runs on cpu: AMD EPYC, 2 cores" in printed and "39 runs on NVIDIA H200" in printed
    assert "runs at their best at their last evaluation: 98% of 51, at 3,000 steps" in printed
    assert "best offset-aware model: shaw 0.377" in printed
    assert "best without positions, 3 blocks: transformer 0.704 (+0.327)" in printed
    assert "best absolute positions: learned-positions 0.492 (+0.115)" in printed
    assert "alibi: 0.497 (+0.120)" in printed and "attention-positions: 0.904" in printed
    res = copy(res)
    for runs in res["models"].values():                    # every run past its best
        for run in runs:
            run["best_step"] = run["steps"] - 250
    assert "runs at their best at their last evaluation: 0% of 51" in ch11.families_reading(res, real, GROUPS,
                                                                                             (2, 256), 3)


def test_interval_order_and_gains_against_the_seeds_spread():
    at = {"a": {"mean": 0.3, "low": 0.29, "high": 0.31}, "b": {"mean": 0.4, "low": 0.39, "high": 0.41},
          "c": {"mean": 0.305, "low": 0.30, "high": 0.32}}
    assert ch11.interval_order(at, "a", "b") == -1 and ch11.interval_order(at, "b", "a") == 1
    assert ch11.interval_order(at, "a", "c") == 0
    assert ch11.against_noise(0.003, 0.01, 3000) == "+0.003, within the 0.010 by which the recipe's seeds differ " \
                                                    "at 3,000 steps"
    assert ch11.against_noise(0.02, 0.01, 3000) == "0.020 in favour of the longer context"
    assert ch11.against_noise(-0.05, 0.01, 3000, "the variant") == "0.050 against the variant"


def test_the_precision_reading_on_the_file_and_both_branches(compare_file):
    res, real, copy = compare_file
    printed, shift, smallest = ch11.precision_reading(res, real)
    assert "smallest gap between two models whose intervals are apart" in printed
    assert "largest shift between the two precisions' means" in printed and 0 < shift < smallest
    one = copy(res)
    for runs in one["models"].values():
        for r in runs:
            r.setdefault("made", {})["precision"] = "float32"
    printed, shift, _ = ch11.precision_reading(one, real)
    assert shift == 0.0 and "every model's seeds trained in one precision" in printed
    big = copy(res)
    name = next(n for n, runs in big["models"].items() if len({r["made"]["precision"] for r in runs}) > 1)
    for r in big["models"][name]:
        r["valid_nll"] += 1.0 if r["made"]["precision"] == "bfloat16" else 0.0
    _, shift, smallest = ch11.precision_reading(big, real)
    assert shift >= smallest


def test_the_file_header_names_its_command_machines_and_budget(compare_file):
    res, _, _ = compare_file
    text = ch11.file_header(res, 12000)
    assert text.startswith("exported by `python -m musictx_lite compare --profile paper")
    assert " --note " not in text.splitlines()[0] and "not this build" in text
    assert "its 51 runs trained on NVIDIA H200 and cpu" in text and "8 commit(s)" in text
    assert "3000 steps" in text and "fewer steps than the 3,000" not in text
    res = {k: v for k, v in res.items() if k not in ("ledger", "note")}
    res["models"] = {"m": [{"steps": 1500}]}
    text = ch11.file_header(res, 12000)
    assert text.startswith("recorded by") and "its " not in text and "note:" not in text
    assert "a longer sprint over seeds, 12% of the recipe's budget" in text
