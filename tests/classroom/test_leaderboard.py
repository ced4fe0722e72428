"""The leaderboard: rows persist per chapter, later chapters show earlier rows, lines fit the column."""
import pytest
import torch.nn as nn

from musictx_lite import settings
from musictx_lite.classroom import leaderboard
from musictx_lite.engine.training import History

BASE = {"unigram": 3.41, "7-gram": 1.02, "same voice": 1.04}


@pytest.fixture
def board(tmp_path, monkeypatch):
    monkeypatch.setenv("MUSICTX_LEADERBOARD", str(tmp_path))
    monkeypatch.setenv("MUSICTX_PROFILE", "smoke")
    monkeypatch.delenv("MUSICTX_DATA", raising=False)
    monkeypatch.setitem(leaderboard._BASELINES, "chorales", BASE)    # no n-gram fitting in a unit test
    return tmp_path


def model(n_in=3, task=None):
    m = nn.Linear(n_in, 2)                                             # 2 n_in + 2 parameters
    if task is not None:
        m.task = task
    return m


def history(steps=40, tokens=8000, seconds=2.0):
    return History(step=list(range(1, steps + 1)), tokens=tokens, seconds=seconds)


def test_record_and_show_sorted_with_baselines(board, capsys):
    leaderboard.record(1, "LSTM", model(3), history(), 0.95, note="seed 0")
    leaderboard.record(1, "LSTM + attention", model(4), None, 1.10)
    table = leaderboard.show(1)
    printed = capsys.readouterr().out
    assert printed.strip() == str(table) == repr(table)
    names = [r.name for r in table.rows]
    assert names == ["7-gram", "same voice", "unigram", "LSTM", "LSTM + attention"]   # baselines, then budgets
    lstm = table.rows[3]
    assert (lstm.chapter, lstm.params, lstm.steps, lstm.tokens_per_s, lstm.note) == (1, 8, 40, 4000.0, "seed 0")
    attn = table.rows[4]
    assert attn.steps is None and attn.tokens_per_s is None and attn.params == 10
    assert "4,000" in printed and "0.950" in printed and "seed 0" in printed
    assert all(len(line) <= settings.WIDTH for line in printed.splitlines())


def test_models_are_ranked_only_against_models_of_their_budget(board, capsys):
    """Runs of different steps or learning rates are not comparable: each budget is its own section."""
    def run(steps, lr):
        h = history(steps=steps)
        h.lr = [lr / 2, lr, lr / 4]
        return h

    leaderboard.record(1, "short, good", model(), run(125, 4e-3), 0.90)
    leaderboard.record(3, "long", model(), run(500, 4e-3), 0.95)
    leaderboard.record(4, "long, other rate", model(), run(500, 6e-3), 0.92)
    leaderboard.record(4, "long 2", model(), run(500, 4e-3), 0.93)
    table = leaderboard.show(4)
    text = capsys.readouterr().out
    assert [r.name for r in table.rows][3:] == ["long, other rate", "long 2", "long", "short, good"]
    sections = [ln for ln in text.splitlines() if ln.startswith("trained")]
    assert sections == ["trained 500 steps at a peak learning rate of 0.006:",
                        "trained 500 steps at a peak learning rate of 0.004:",
                        "trained 125 steps at a peak learning rate of 0.004:"]
    assert text.index("long 2") < text.index(" long   ") < text.index("short, good")


def test_later_chapters_show_earlier_rows_and_not_later_ones(board):
    leaderboard.record(1, "LSTM", model(), history(), 0.95)
    leaderboard.record(3, "masked", model(), history(), 1.5)
    assert "LSTM" in [r.name for r in leaderboard.rows(3)]
    assert "masked" not in [r.name for r in leaderboard.rows(2)]
    assert sorted(p.name for p in (board / "smoke-chorales").iterdir()) == ["chapter01.json", "chapter03.json"]


def test_rerunning_a_chapter_replaces_its_row(board):
    leaderboard.record(1, "LSTM", model(), history(), 0.95)
    leaderboard.record(1, "LSTM", model(), history(steps=80), 0.90)
    lstm = [r for r in leaderboard.rows(1) if r.name == "LSTM"]
    assert len(lstm) == 1 and lstm[0].steps == 80 and lstm[0].valid_nll == 0.90
    leaderboard.clear(1)
    assert [r.name for r in leaderboard.rows(1)] == ["7-gram", "same voice", "unigram"]


def test_profiles_and_data_do_not_mix(board, monkeypatch):
    leaderboard.record(1, "LSTM", model(), history(), 0.95)
    monkeypatch.setenv("MUSICTX_PROFILE", "cpu")
    assert "LSTM" not in [r.name for r in leaderboard.rows(1)]
    monkeypatch.setenv("MUSICTX_PROFILE", "smoke")
    monkeypatch.setenv("MUSICTX_DATA", "/somewhere/Jsb16thSeparated.json")
    monkeypatch.setitem(leaderboard._BASELINES, "/somewhere/Jsb16thSeparated.json", BASE)
    assert leaderboard.folder().name == "smoke-Jsb16thSeparated.json"
    assert "LSTM" not in [r.name for r in leaderboard.rows(1)]


def test_other_tasks_are_listed_apart_and_long_text_is_cut(board, capsys):
    class Fill:
        name = "fill"

    leaderboard.record(2, "fill-in, one head " * 4, model(task=Fill()), history(), 0.6, note="x" * 100)
    table = leaderboard.show(2)
    text = capsys.readouterr().out
    assert table.rows[-1].task == "fill"
    ranked, other = text.split("task 'fill'")
    assert "fill-in" not in ranked and "fill-in" in other and "0.600" in other
    assert all(len(line) <= settings.WIDTH for line in text.splitlines())


def test_a_corrupt_file_is_ignored(board):
    leaderboard.record(1, "LSTM", model(), history(), 0.95)
    (board / "smoke-chorales" / "chapter01.json").write_text("{not json")
    assert [r.name for r in leaderboard.rows(1)] == ["7-gram", "same voice", "unigram"]
    leaderboard.record(1, "LSTM", model(), history(), 0.95)
    assert "LSTM" in [r.name for r in leaderboard.rows(1)]


def test_notebook_displays_the_table_once(board, capsys):
    """``show`` prints the table; a notebook cell that ends with it publishes nothing more (IPython's
    formatter finds no output to show), where a plain object would be shown as its repr."""
    from IPython.core.interactiveshell import InteractiveShell

    table = leaderboard.show(0)
    assert capsys.readouterr().out.count(table.text) == 1
    shell = InteractiveShell.instance()
    try:
        assert shell.display_formatter.format(table) == ({}, {})
        assert shell.display_formatter.format(table.text)[0]["text/plain"]  # a string would show again
    finally:
        InteractiveShell.clear_instance()                                   # no shell for later tests


def test_baselines_are_those_of_the_data_passed_in():
    """Computed once per data source: the default data's baselines are never served for other data."""
    from musictx_lite import load_chorales
    from musictx_lite.io.data import Splits
    from musictx_lite.study.baselines import baseline_nlls

    full = load_chorales()
    small = Splits(full.train[:5], full.valid[:3], full.test[:3], source="five chorales")
    default = leaderboard.baselines()
    mine = leaderboard.baselines(small)
    assert mine == baseline_nlls(small) and mine != default
    assert leaderboard.baselines() == default                        # the default is still the default's
