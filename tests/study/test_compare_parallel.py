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


def test_the_workers_hear_ctrl_c_even_when_the_script_runs_in_the_background():
    """A shell starts a background command with SIGINT ignored, and children inherit it; a worker must hear
    Ctrl-C all the same (Python's KeyboardInterrupt), to write its checkpoint when the deadline stops it."""
    import signal
    import subprocess
    import sys

    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)                 # as `python -m scripts.compare_parallel &`
    try:
        heard = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, **kw).stdout.strip()
                 for kw in ({}, {"preexec_fn": CP._hear_ctrl_c})]
    finally:
        signal.signal(signal.SIGINT, old)
    assert heard == ["False", "True"]                                  # inherited: ignored; a worker: heard


def test_the_costliest_models_go_first():
    assert CP.costliest_first(["attention", "lstm-attention", "fnet-conv"]) == ["lstm-attention", "fnet-conv",
                                                                                "attention"]
    # the same FLOPs: the shipped file's seconds on the device that trained most of its runs break the tie
    assert CP.costliest_first(["relative", "shaw", "lstm"]) == ["lstm", "shaw", "relative"]
