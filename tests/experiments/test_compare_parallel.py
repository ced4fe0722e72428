"""scripts/compare_parallel.py: several processes fill one comparison ledger, then export it."""
import json
import re
import tarfile

from scripts import compare_parallel as CP


def test_workers_share_the_runs_and_the_complete_ledger_is_exported(jsb_path, tmp_path):
    ledger, out = tmp_path / "ledger", tmp_path / "out"
    status = CP.main(["--workers", "2", "--profile", "smoke", "--steps", "2", "--seeds", "2",
                      "--models", "attention", "lstm", "--data", str(jsb_path), "--out", str(tmp_path / "runs"),
                      "--ledger", str(ledger), "--export", str(tmp_path / "compare.json"), "--copy-to", str(out)])
    assert status == 0
    assert sorted(p.name for p in ledger.iterdir()) == [f"{n}.seed-{s}.json" for n in ("attention", "lstm")
                                                        for s in (0, 1)]
    res = json.loads((out / "compare.json").read_text())
    assert res["ledger"]["runs"] == 4 and list(res["models"]) == ["lstm", "attention"]   # costliest first
    assert "compare_parallel" in res["note"] and res["command"].startswith("python -m musictx_lite compare")
    # each run was trained once, by one worker: two workers, and no run in both logs
    trained = [m.group(1) for w in (0, 1) for m in re.finditer(r"^\s*(\S+ seed \d): valid NLL [\d.]+ \(\d+ s\)$",
                                                               (out / f"worker-{w}.log").read_text(), re.M)]
    assert sorted(trained) == sorted(f"{n} seed {s}" for n in ("attention", "lstm") for s in (0, 1))
    record = json.loads((out / "compare-parallel.json").read_text())
    assert record["exported"] and record["runs_after"] == 4 and record["exit_codes"] == [0, 0]
    with tarfile.open(out / "ledger.tar.gz") as tar:
        assert len([n for n in tar.getnames() if n.endswith(".json")]) == 4


def test_a_deadline_stops_the_workers_and_nothing_is_exported(jsb_path, tmp_path):
    status = CP.main(["--workers", "1", "--profile", "smoke", "--steps", "2", "--seeds", "1", "--models", "lstm",
                      "--data", str(jsb_path), "--ledger", str(tmp_path / "ledger"), "--deadline", "0",
                      "--export", str(tmp_path / "compare.json"), "--copy-to", str(tmp_path / "out")])
    record = json.loads((tmp_path / "out" / "compare-parallel.json").read_text())
    assert status == 1 and not record["exported"] and record["runs_after"] == 0
    assert not (tmp_path / "compare.json").exists()


def test_a_worker_stopped_at_the_deadline_writes_its_checkpoint_even_if_started_in_the_background(jsb_path, tmp_path):
    """A shell starts a background command with SIGINT ignored, and children inherit it: the workers hear Ctrl-C
    all the same, stop with status 130 and leave a checkpoint (here: a run far too long for the deadline)."""
    import signal

    old = signal.signal(signal.SIGINT, signal.SIG_IGN)                 # as `python -m scripts.compare_parallel &`
    try:
        status = CP.main(["--workers", "1", "--profile", "smoke", "--steps", "100000", "--seeds", "1", "--models",
                          "lstm", "--data", str(jsb_path), "--out", str(tmp_path / "runs"), "--ledger",
                          str(tmp_path / "ledger"), "--deadline", "15", "--grace", "20", "--export",
                          str(tmp_path / "compare.json"), "--copy-to", str(tmp_path / "out")])
    finally:
        signal.signal(signal.SIGINT, old)
    record = json.loads((tmp_path / "out" / "compare-parallel.json").read_text())
    assert status == 1 and record["exit_codes"] == [130] and record["runs_after"] == 0
    assert (tmp_path / "runs" / "seed-0" / "lstm" / "ckpt.pt").exists()


def test_the_costliest_models_go_first():
    assert CP.costliest_first(["attention", "lstm-attention", "fnet-conv"]) == ["lstm-attention", "fnet-conv",
                                                                                "attention"]
