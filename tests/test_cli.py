import subprocess
import sys

import numpy as np

from musictx_lite import read_midi


def run(*args, check=True):
    return subprocess.run([sys.executable, "-m", "musictx_lite", *args], capture_output=True, text=True,
                          check=check, timeout=300)


def test_help_describes_every_option():
    out = run("train", "--help").stdout
    for opt in ("--model", "--profile", "--out", "--steps", "--seed", "--data", "--device", "lstm-attention"):
        assert opt in out
    assert "--temperature" in run("generate", "--help").stdout


def test_train_then_generate(tmp_path):
    out = run("train", "--model", "lstm-attention", "--profile", "smoke", "--out", str(tmp_path / "run"), "--quiet")
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("valid NLL: ") and 0 < float(last.split()[2]) < 4
    res = run("generate", "--checkpoint", str(tmp_path / "run"), "--out", str(tmp_path / "x.mid"), "--steps", "8")
    assert "wrote" in res.stdout
    grid = read_midi(tmp_path / "x.mid")
    assert grid.shape[1] == 4 and 16 < len(grid) <= 24               # 16 prompt steps + 8 generated


def test_clear_errors(tmp_path):
    res = run("generate", "--checkpoint", str(tmp_path / "none"), "--out", str(tmp_path / "x.mid"), check=False)
    assert res.returncode != 0 and "no checkpoint at" in res.stderr
    res = run("train", "--model", "lstm", "--profile", "huge", "--out", str(tmp_path), check=False)
    assert res.returncode != 0 and "invalid choice" in res.stderr
    assert not np.any([p.suffix == ".mid" for p in tmp_path.iterdir()])
