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


def test_every_chapter_model_trains_from_the_cli(tmp_path):
    for name in ("fill", "transformer"):
        out = run("train", "--model", name, "--profile", "smoke", "--out", str(tmp_path / name), "--quiet",
                  "--steps", "4")
        assert out.stdout.strip().splitlines()[-1].startswith("valid NLL: ")
    res = run("generate", "--checkpoint", str(tmp_path / "fill"), "--out", str(tmp_path / "f.mid"), check=False)
    assert res.returncode != 0 and "does not continue a sequence" in res.stderr


def test_bench_attention_prints_every_implementation(tmp_path):
    out = run("bench", "attention", "--lengths", "32", "64", "--repeats", "1", "--plot", str(tmp_path / "b.png")).stdout
    for name in ("per-head loop", "batched", "SDPA", "nn.MultiheadAttention"):
        assert name in out
    rows = [line.split() for line in out.splitlines() if line.strip().split(" ")[0] in ("32", "64")]
    assert len(rows) == 2 and all(len(r) == 1 + 3 * 4 for r in rows)
    assert (tmp_path / "b.png").stat().st_size > 1000
