"""scripts/build_times.py: the lecturer's guide's times are the recorded builds' range and the budget's estimate."""
import json

from scripts import ROOT
from scripts import build_times as bt

STEMS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_the_guides_table_is_made_from_the_record_and_the_budget():
    """The recorded builds, on a named machine, each saying what ran beside it, measure only chapters that
    exist, and the last one measures every chapter (a build made before a chapter was written cannot hold
    it); the guide shows exactly the table that the record and ``chapter_minutes("gpu")`` make."""
    builds = json.loads(bt.RECORD.read_text())
    assert len(builds) >= 2 and all(b["note"] for b in builds)                 # the issue asked for two
    assert all(set(b["chapters"]) <= set(STEMS) and b["machine"] and b["commit"] for b in builds)
    assert set(builds[-1]["chapters"]) == set(STEMS), "build the book, then python -m scripts.build_times --note"
    assert bt.table(builds) in bt.GUIDE.read_text(), "run python -m scripts.build_times --guide"
    assert bt.week_table(builds) in bt.GUIDE.read_text(), "run python -m scripts.build_times --guide"
    numbers = sorted({int(stem.split("_")[0]) for stem in STEMS})         # chapter 11 has two notebooks
    assert sorted(n for chapters, _ in bt.WEEKS.values() for n in chapters) == numbers == list(range(14))


def test_the_range_reads_seconds_then_minutes():
    builds = [{"chapters": {"a": 30.0, "b": 100.0}}, {"chapters": {"a": 95.0, "b": 101.0}}]
    assert bt.cpu_range(builds, "a") == "30 s to 1.6 min"
    assert bt.cpu_range(builds, "b") == "1.7 min"                   # equal at the shown digit: one value
    assert bt.cpu_range(builds, "c") == "not measured"
    rows = bt.table(builds).splitlines()
    assert len(rows) == 2 + len(STEMS) and rows[2].startswith("| 0 Music as tokens | 60 min |")
    assert rows[2].endswith("| not measured | no training |")


def test_a_build_without_an_executed_chapter_is_one_line_of_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bt, "CACHE", tmp_path / "no-cache")
    monkeypatch.setattr(bt, "RECORD", tmp_path / "builds.json")
    monkeypatch.setattr(bt.add_build, "__defaults__", (tmp_path / "no-cache", tmp_path / "builds.json"))
    assert bt.main(["--note", "alone"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no executed chapter") and "\n" not in err
    assert not (tmp_path / "builds.json").exists()
    assert bt.main([]) == 2
