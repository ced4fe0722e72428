"""scripts.into_ledger: the studies' runs, each result appended to the log as it finishes."""
import json

from scripts import into_ledger


def square(x: int) -> dict:
    return {"x": x, "y": x * x}


def test_into_ledger_appends_each_result_in_order_and_returns_them(tmp_path, capsys):
    log = tmp_path / "runs.jsonl"
    log.write_text(json.dumps({"x": -1, "y": 1}) + "\n")                 # a line of an earlier run stays
    got = into_ledger(square, [1, 2, 3, 4], log, workers=2, every=2)
    assert got == [{"x": k, "y": k * k} for k in (1, 2, 3, 4)]
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert lines == [{"x": -1, "y": 1}, *got]
    assert capsys.readouterr().out.split() == ["2/4", "4/4"]
