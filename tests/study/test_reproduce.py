"""Chapter 11's `reproduce jsb`: three decoders on the official JSB split, beside the paper's Table 2."""
import math
import time

import pytest

from musictx_lite import load_jsb
from musictx_lite.__main__ import main
from musictx_lite.checkpoint import read_checkpoint
from musictx_lite.study.reproduce import JSB_MODELS, PAPER, format_table, reproduce_jsb, verdict

NAMES = [name for name, _ in JSB_MODELS]


@pytest.fixture(scope="module")
def first_run(jsb_path, tmp_path_factory):
    """One smoke-profile `reproduce_jsb` on the local official split: (out dir, data, rows, seconds)."""
    out, data = tmp_path_factory.mktemp("jsb") / "runs", load_jsb(jsb_path)
    t0 = time.perf_counter()
    rows = reproduce_jsb("smoke", out, data=data, device="cpu", progress=False)
    return out, data, rows, time.perf_counter() - t0


def test_three_models_trained_and_scored(first_run):
    out, data, rows, _ = first_run
    assert [r["name"] for r in rows] == NAMES == ["sinusoidal", "relative", "relative-voice"]
    for r in rows:
        assert r["steps"] == 20 and r["seconds"] > 0                       # the smoke profile's budget
        assert math.isfinite(r["valid_nll"]) and math.isfinite(r["test_nll"])
        assert 2.0 < r["valid_nll"] < math.log(54) + 0.2 and 2.0 < r["test_nll"] < math.log(54) + 0.2
        ck = read_checkpoint(out / r["name"])
        assert ck["model_name"] == r["name"] and ck["step"] == 20
        assert ck["history"]["valid_nll"][-1] == pytest.approx(r["valid_nll"], abs=1e-6)   # whole valid split
    by = {r["name"]: r for r in rows}
    assert by["relative-voice"]["params"] == by["relative"]["params"] + 4 * 32            # the (4, C) table
    assert by["sinusoidal"]["params"] < by["relative"]["params"]                           # no relative tables


def test_second_call_resumes_without_training(first_run):
    out, data, rows, _ = first_run
    stamps = {name: (out / name / "ckpt.pt").stat().st_mtime_ns for name in NAMES}
    again = reproduce_jsb("smoke", out, data=data, device="cpu", progress=False)
    plain = lambda rs: [{k: v for k, v in r.items() if k != "model"} for r in rs]
    assert plain(again) == plain(rows)                          # the same steps, seconds, NLLs and history
    for a, b in zip(again, rows):
        for (k, x), y in zip(a["model"].state_dict().items(), b["model"].state_dict().values()):
            assert x.equal(y), k
    assert {name: (out / name / "ckpt.pt").stat().st_mtime_ns for name in NAMES} == stamps   # nothing rewritten


def test_cli_prints_our_rows_beside_the_paper(first_run, jsb_path, capsys):
    out, _, rows, _ = first_run
    main(["reproduce", "jsb", "--profile", "smoke", "--out", str(out), "--data", str(jsb_path), "--quiet"])
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    table = lines[lines.index("JSB Chorales, official split: NLL in nats per token (lower is better)"):]
    assert all(len(line) <= 88 for line in table) and table == format_table(rows).splitlines()
    ours = [line.split() for line in lines if line.startswith("ours: ")]
    assert [row[1] for row in ours] == NAMES
    for row, r in zip(ours, rows):
        assert float(row[-2]) == pytest.approx(r["valid_nll"], abs=5e-4)
        assert float(row[-1]) == pytest.approx(r["test_nll"], abs=5e-4)
    for label, nll in PAPER:
        assert any(line.startswith(f"paper: {label}") and line.split()[-1] == f"{nll:.3f}" for line in lines)
    assert verdict(rows) in lines and "note: " in printed


def _row(name, valid, test):
    return {"name": name, "params": 1000, "steps": 10, "seconds": 1.0, "valid_nll": valid, "test_nll": test}


@pytest.mark.parametrize("absolute, answer", [((0.70, 0.71), "yes"), ((0.50, 0.52), "NO"), ((0.50, 0.71), "mixed")])
def test_verdict_says_whether_absolute_is_worse(absolute, answer):
    rows = [_row("sinusoidal", *absolute), _row("relative", 0.60, 0.61), _row("relative-voice", 0.58, 0.62)]
    v = verdict(rows)
    assert v.startswith(f"verdict: absolute worse than relative? {answer} (")
    assert f"valid {absolute[0]:.3f} vs 0.600, test {absolute[1]:.3f} vs 0.610" in v
    table = format_table(rows)
    assert v in table.splitlines() and "valid NLL -0.020 against relative attention alone (better)" in table
    assert verdict(rows[1:]) == "verdict: needs the sinusoidal and relative rows"


def test_reproduce_rows_are_chapter_11s_rows(first_run):
    """`reproduce jsb` trains at the comparison budget: its rows equal `compare`'s for the same models."""
    from musictx_lite.study.compare import compare

    _, data, rows, _ = first_run
    got = compare(data, "smoke", names=NAMES, device="cpu", n_pieces=1, n_steps=4, memory_length=32,
                  verbose=False)
    for r, c in zip(rows, got):
        assert (r["name"], r["params"], r["steps"]) == (c["name"], c["params"], c["steps"])
        assert r["valid_nll"] == pytest.approx(c["valid_nll"], abs=1e-6)
        assert r["test_nll"] == pytest.approx(c["test_nll"], abs=1e-6)
    assert "verdict" in format_table(got)                  # compare's rows print as the paper's table


def test_export_writes_float16_checkpoints_with_their_records(first_run, tmp_path, monkeypatch):
    """`reproduce jsb --export`: each model in float16 with a record whose NLLs are those of the stored weights."""
    import json

    import torch

    from musictx_lite.models import load_checkpoint
    from musictx_lite.models.tasks import evaluate_nll
    from musictx_lite.study import hub
    from musictx_lite.study.hub import export

    _, data, rows, _ = first_run
    # the record's commit is read before export writes its file (a shipped file changed by the export
    # itself must not mark the commit as having uncommitted changes)
    monkeypatch.setattr(hub, "git_commit", lambda: "dirty" if any(tmp_path.glob("*.pt")) else "clean")
    for r in rows:
        for old in tmp_path.glob("*.pt"):
            old.unlink()
        rec = export(r["model"], r["history"], r["train_config"], data, tmp_path)
        assert rec["commit"] == "clean"
        assert json.loads((tmp_path / f"{r['name']}.json").read_text()) == rec
        ck = torch.load(tmp_path / rec["file"], map_location="cpu", weights_only=True)
        assert all(v.dtype == torch.float16 for v in ck["model"].values() if v.is_floating_point())
        model, _ = load_checkpoint(tmp_path / rec["file"])
        assert evaluate_nll(model, data.valid) == pytest.approx(rec["valid_nll"], abs=1e-9)
        assert abs(rec["valid_nll"] - r["valid_nll"]) < 0.01           # float16 weights: close, not equal
        assert rec["steps"] == 20 and rec["seed"] == 0
        assert rec["train_config"] == json.loads(json.dumps(r["train_config"]))     # JSON: tuples are lists
        assert rec["curve"]["eval_step"] == r["history"].eval_step and rec["sha256"]
        assert rec["command"].startswith("python -m musictx_lite") and rec["torch"] == torch.__version__


def test_models_option_trains_a_subset(first_run, jsb_path, capsys):
    out, _, rows, _ = first_run
    main(["reproduce", "jsb", "--profile", "smoke", "--out", str(out), "--data", str(jsb_path), "--quiet",
          "--models", "relative"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines if line.startswith("ours: ")] == ["relative"]


def test_ablation_takes_one_ingredient_out_at_a_time(jsb_path, tmp_path, monkeypatch):
    import musictx_lite.study.reproduce as R
    from musictx_lite.io.data import Splits
    from musictx_lite.study.reproduce import ablation, format_ablation

    ABLATION = {**R.ABLATION, "no dropout, no weight decay": dict(dropout=0.0, weight_decay=0.0)}
    monkeypatch.setattr(R, "ABLATION", ABLATION)
    full = load_jsb(jsb_path)
    data = Splits(full.train, full.valid[:2], full.test[:2], full.source)
    tiny = dict(max_steps=3, warmup_steps=1, eval_every=3, ckpt_every=3, patience=None)
    rows = ablation(data, tmp_path, seeds=(0,), steps_budget=tiny)
    assert [r["variant"] for r in rows] == list(ABLATION)
    assert all(r["steps"] == 3 and math.isfinite(r["valid_nll"]) for r in rows)
    ck = {r["variant"]: read_checkpoint(tmp_path / f"{r['variant'].replace(' ', '-').replace(',', '')}-0")
          for r in rows}
    assert ck["recipe"]["train_config"]["transpose"] and not ck["no transposition"]["train_config"]["transpose"]
    assert ck["no dropout, no weight decay"]["model_config"]["dropout"] == 0.0
    assert ck["no dropout, no weight decay"]["train_config"]["weight_decay"] == 0.0
    assert ck["recipe"]["model_config"]["dropout"] == 0.1
    assert ck["context 512"]["model_config"]["context"] == 512 == 2 * ck["recipe"]["model_config"]["context"]
    assert 2 * ck["context 512"]["train_config"]["batch_size"] == ck["recipe"]["train_config"]["batch_size"]
    table = format_ablation(rows).splitlines()
    assert table[1].split()[0] == "recipe" and len(table) == 1 + len(ABLATION)


def test_paper_table_says_where_each_number_comes_from():
    from musictx_lite.study.reproduce import format_paper_table

    shipped = [{"name": n, "valid_nll": 0.3, "test_nll": 0.31, "record": {"valid_nll": 0.4, "test_nll": 0.41}}
               for n in NAMES]
    live = [{**_row(n, 0.8, 0.9), "steps": 120} for n in NAMES]
    table = format_paper_table(shipped, live).splitlines()
    assert all(len(line) <= 88 for line in table)
    assert sum("shipped, scored in this build" in line and "0.300" in line for line in table) == 3
    assert sum(line.startswith("live: ") and "trained in this build" in line for line in table) == 3
    assert sum(line.startswith("paper: ") for line in table) == len(PAPER)
    recorded = format_paper_table(shipped, recomputed=False)
    assert "0.400" in recorded and "0.300" not in recorded and "as recorded" in recorded
    shipped[1]["record"]["train_config"] = {"teachers": ["a", "b"]}       # a distilled model says so
    labels = [line.split()[0] + " " + line.split()[1] for line in format_paper_table(shipped).splitlines()[5:8]]
    assert labels == [f"recipe: {NAMES[0]}", f"distilled: {NAMES[1]}", f"recipe: {NAMES[2]}"]


def test_distil_trains_the_teachers_and_a_student_that_export_ships(first_run, jsb_path, tmp_path, capsys,
                                                                   monkeypatch):
    """`reproduce jsb --distil 2`: seed 1 beside seed 0 (resumed), a student on their mean predictions,
    exported with its teachers and their ensemble's valid NLL. The command reads the official file, and
    trains seed 1 and the student on its first 24 training chorales: the teachers' table of every chorale
    in every key is most of the time, and a smoke run learns nothing more from 229."""
    import dataclasses
    import json

    import musictx_lite.cli.reproduce as cli

    out, data, rows, _ = first_run
    read = cli.jsb_data

    def first_24(a):
        d = read(a)
        return dataclasses.replace(d, train=d.train[:24])

    monkeypatch.setattr(cli, "jsb_data", first_24)
    main(["reproduce", "jsb", "--profile", "smoke", "--out", str(out), "--data", str(jsb_path), "--quiet",
          "--models", "relative", "--distil", "2", "--export", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "distilled, each from 2 runs of itself" in printed
    assert read_checkpoint(out / "seed-1" / "relative")["train_config"]["seed"] == 1
    ck = read_checkpoint(out / "distilled" / "relative")
    assert ck["train_config"]["teachers"] == (str(out / "relative"), str(out / "seed-1" / "relative"))
    assert (out / "distilled" / "relative" / "teachers.pt").exists()
    rec = json.loads((tmp_path / "relative.json").read_text())
    assert rec["train_config"]["teachers"] == list(ck["train_config"]["teachers"])
    assert math.isfinite(rec["teachers_valid_nll"]) and rec["command"].startswith("python -m musictx_lite")
    # the teachers' mean beats their average NLL (the log is concave)
    seed0 = next(r for r in rows if r["name"] == "relative")["valid_nll"]
    seed1 = read_checkpoint(out / "seed-1" / "relative")["history"]["valid_nll"][-1]
    assert rec["teachers"] == pytest.approx({str(out / "relative"): seed0, str(out / "seed-1" / "relative"): seed1})
    assert rec["teachers_valid_nll"] <= (seed0 + seed1) / 2 + 1e-6
    assert rec["teacher_steps"] == {t: read_checkpoint(t)["step"] for t in rec["teachers"]}
    with pytest.raises(SystemExit) as e:
        main(["reproduce", "ablation", "--out", str(tmp_path / "a"), "--distil", "2"])
    assert str(e.value.code) == "error: --distil belongs to reproduce jsb, not to the ablation"
    # `export RUN` ships the same finished run with the same record numbers
    main(["export", str(out / "distilled" / "relative"), "--to", str(tmp_path / "e"), "--data", str(jsb_path)])
    again = json.loads((tmp_path / "e" / "relative.json").read_text())
    assert "its teachers' mean: valid" in capsys.readouterr().out
    for key in ("valid_nll", "test_nll", "teachers", "teachers_valid_nll", "best_step", "bytes", "train_config"):
        assert again[key] == rec[key], key
    with pytest.raises(SystemExit) as e:
        main(["export", str(tmp_path / "nothing"), "--to", str(tmp_path / "e")])
    assert str(e.value.code).startswith("error: no checkpoint at")
