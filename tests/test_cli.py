import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
import torch

from musictx_lite import load_chorales, read_midi, write_midi
from musictx_lite.__main__ import main
from musictx_lite.checkpoint import read_checkpoint


def run(*args, check=True):
    return subprocess.run([sys.executable, "-m", "musictx_lite", *map(str, args)], capture_output=True, text=True,
                          check=check, timeout=300)


def assert_clean_error(code, err: str, *needles: str) -> str:
    """A non-zero exit, no traceback, and a last line ``...error: ...`` that names every needle."""
    assert code != 0, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert "error: " in last, err
    for n in needles:
        assert n in last, err
    return last


def assert_error(res: subprocess.CompletedProcess, *needles: str) -> str:
    """As ``assert_clean_error`` for a finished subprocess; errors found after parsing are exactly one line."""
    last = assert_clean_error(res.returncode, res.stderr, *needles)
    if res.returncode != 2:                                  # 2: argparse, whose usage lines come first
        assert res.returncode == 1 and res.stderr.strip() == last, res.stderr
    return last


def main_error(argv, capsys) -> tuple[int, str, str]:
    """Run the CLI's ``main`` in this process; return its exit status, stderr and stdout."""
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    code = e.value.code
    if isinstance(code, str):                                # sys.exit("error: ...") prints the text, exits 1
        err, code = err + code + "\n", 1
    return code, err, out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One smoke-profile transformer run (a finite context), shared by the tests of this module: (run dir, stdout)."""
    d = tmp_path_factory.mktemp("cli") / "transformer"
    out = run("train", "--model", "transformer", "--profile", "smoke", "--out", d, "--quiet")
    return d, out.stdout


@pytest.fixture(scope="module")
def model_dir(trained):
    """The run directory of ``trained``."""
    return trained[0]


@pytest.fixture(scope="module")
def chorale():
    return load_chorales().valid[0].pitches


def test_help_describes_every_option(capsys):
    for cmd, opts in (("train", ("--model", "--profile", "--out", "--steps", "--seed", "--data", "--device",
                                 "lstm-attention")),
                      ("generate", ("--temperature", "--prompt-midi", "--prompt-steps")),
                      ("reproduce", ("jsb", "--profile", "--out", "--data", "--device", "--quiet"))):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        out = capsys.readouterr().out
        assert e.value.code == 0 and all(opt in out for opt in opts)


def test_train_then_generate(tmp_path, trained):
    run_dir, stdout = trained
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("valid NLL: ") and 0 < float(last.split()[2]) < 4
    res = run("generate", "--checkpoint", run_dir, "--out", tmp_path / "x.mid", "--steps", "8")
    assert "wrote" in res.stdout
    grid = read_midi(tmp_path / "x.mid")
    assert grid.shape[1] == 4 and 16 < len(grid) <= 24               # 16 prompt steps + 8 generated


def test_clear_errors(tmp_path, capsys):
    code, err, _ = main_error(["generate", "--checkpoint", tmp_path / "none", "--out", tmp_path / "x.mid"], capsys)
    assert_clean_error(code, err, "no checkpoint at")
    code, err, _ = main_error(["train", "--model", "lstm", "--profile", "huge", "--out", tmp_path], capsys)
    assert_clean_error(code, err, "invalid choice")
    assert not np.any([p.suffix == ".mid" for p in tmp_path.iterdir()])


def test_every_chapter_model_trains_from_the_cli(tmp_path, capsys):
    out = run("train", "--model", "fill", "--profile", "smoke", "--out", str(tmp_path / "fill"), "--quiet",
              "--steps", "4")                      # lstm-attention: the Ctrl-C test; transformer: `trained`
    assert out.stdout.strip().splitlines()[-1].startswith("valid NLL: ")
    code, err, _ = main_error(["generate", "--checkpoint", tmp_path / "fill", "--out", tmp_path / "f.mid"], capsys)
    assert_clean_error(code, err, "does not continue a sequence")
    for name in ("relative", "local"):            # chapters 8 and 9 through the CLI, end to end
        out = run("train", "--model", name, "--profile", "smoke", "--out", str(tmp_path / name), "--quiet",
                  "--steps", "4")
        assert out.stdout.strip().splitlines()[-1].startswith("valid NLL: ")
        run("generate", "--checkpoint", str(tmp_path / name), "--out", str(tmp_path / f"{name}.mid"))
        assert (tmp_path / f"{name}.mid").stat().st_size > 100


def test_bench_sample_times_both_modes():
    out = run("bench", "sample", "--models", "relative", "attention-unmasked", "--tokens", "32",
              "--profile", "smoke").stdout
    rel = next(line.split() for line in out.splitlines() if line.split()[:1] == ["relative"])
    assert rel[1] == "33" and float(rel[2].replace(",", "")) > 0 and float(rel[3].replace(",", "")) > 0
    assert "attention-unmasked" in out and "no cache: not causal" in out


def test_bench_attention_prints_every_implementation(tmp_path):
    from musictx_lite.study.bench import implementations

    out = run("bench", "attention", "--lengths", "32", "64", "--repeats", "1", "--plot", str(tmp_path / "b.png")).stdout
    rows = [line.split() for line in out.splitlines() if line.strip().split(" ")[0] in ("32", "64")]
    on_cpu = [name for name, impl in implementations().items() if not impl.cuda_only]
    assert len(rows) == 2 * len(on_cpu) and "FlexAttention" not in on_cpu
    for name in on_cpu:                         # one row per implementation and length: L, name, ms, time ratio, MiB
        assert sum(" ".join(r[1:-3]) == name for r in rows) == 2, name
        assert all(float(r[-3]) > 0 for r in rows if " ".join(r[1:-3]) == name)
    assert (tmp_path / "b.png").stat().st_size > 1000
    out = run("bench", "attention", "--lengths", "64", "--repeats", "1", "--impl", "direct Shaw", "SDPA",
              "--max-gib", "0.0001").stdout
    assert "not run (MiB predicted from measured growth)" in out and "per-head loop" not in out


# ------------------------------------------------------------------ bad arguments: argparse says no, exit 2
# The error tests call the CLI's main() in this process: an exception escaping it is what a traceback
# would be, and a subprocess per case would add ~3 s of torch start each. The tests "in a real
# process" check the `python -m musictx_lite` path end to end for each kind of error.

GEN = ("generate", "--checkpoint", "{tmp}/run", "--out", "{tmp}/x.mid")
TRAIN = ("train", "--model", "lstm", "--profile", "smoke", "--out", "{tmp}/run")
BENCH = ("bench", "attention", "--lengths", "8")
REPRODUCE = ("reproduce", "jsb", "--profile", "smoke", "--out", "{tmp}/runs")
BAD_ARGS = {
    "train --steps -3": (TRAIN + ("--steps", "-3"), "argument --steps: must be a positive integer, got -3"),
    "train --steps 0": (TRAIN + ("--steps", "0"), "must be a positive integer, got 0"),
    "train --steps 1.5": (TRAIN + ("--steps", "1.5"), "must be a positive integer, got '1.5'"),
    "train --seed -1": (TRAIN + ("--seed", "-1"), "argument --seed: must be an integer from 0 to"),
    "train --device banana": (TRAIN + ("--device", "banana"), "'banana' is not a device"),
    "generate --steps 0": (GEN + ("--steps", "0"), "argument --steps: must be a positive integer, got 0"),
    "generate --temperature 0": (GEN + ("--temperature", "0"), "argument --temperature: must be a finite number > 0"),
    "generate --temperature -1": (GEN + ("--temperature", "-1"), "must be a finite number > 0, got -1"),
    "generate --temperature inf": (GEN + ("--temperature", "inf"), "must be a finite number > 0, got inf"),
    "generate --temperature nan": (GEN + ("--temperature", "nan"), "must be a finite number > 0, got nan"),
    "generate --temperature hot": (GEN + ("--temperature", "hot"), "must be a finite number > 0, got 'hot'"),
    "generate --top-k 0": (GEN + ("--top-k", "0"), "argument --top-k: must be a positive integer, got 0"),
    "generate --prompt-steps -1": (GEN + ("--prompt-steps", "-1"), "argument --prompt-steps: must be an integer >= 0"),
    "generate --prompt-index -1": (GEN + ("--prompt-index", "-1"), "argument --prompt-index: must be an integer >= 0"),
    "generate --seed -5": (GEN + ("--seed", "-5"), "argument --seed: must be an integer from 0 to"),
    "generate --device cuda:x": (GEN + ("--device", "cuda:x"), "'cuda:x' is not a device"),
    "generate --device cuda:99": (GEN + ("--device", "cuda:99"), "argument --device: cuda:99: "),
    "generate --device meta": (GEN + ("--device", "meta"), "device type 'meta' is not supported"),
    "generate --prompt-midi with --prompt-index": (GEN + ("--prompt-midi", "{tmp}/p.mid", "--prompt-index", "2"),
                                                   "--prompt-midi cannot be combined with --prompt-split or"),
    "generate --prompt-midi with --prompt-split": (GEN + ("--prompt-midi", "{tmp}/p.mid", "--prompt-split", "test"),
                                                   "--prompt-midi cannot be combined"),
    "generate --prompt-midi with --prompt-steps 0": (GEN + ("--prompt-midi", "{tmp}/p.mid", "--prompt-steps", "0"),
                                                     "--prompt-steps 0 would ignore --prompt-midi"),
    "baselines --max-n 0": (("baselines", "--max-n", "0"), "argument --max-n: must be a positive integer, got 0"),
    "bench --lengths 32 0": (("bench", "attention", "--lengths", "32", "0"), "argument --lengths: must be a positive"),
    "bench --lengths -8": (("bench", "attention", "--lengths", "-8"), "argument --lengths: must be a positive"),
    "bench --n-embd 0": (BENCH + ("--n-embd", "0"), "argument --n-embd: must be a positive integer, got 0"),
    "bench --heads 0": (BENCH + ("--heads", "0"), "argument --heads: must be a positive integer, got 0"),
    "bench --heads 3 (does not divide 128)": (BENCH + ("--heads", "3"), "--heads 3 does not divide --n-embd 128"),
    "bench --batch 0": (BENCH + ("--batch", "0"), "argument --batch: must be a positive integer, got 0"),
    "bench --repeats 0": (BENCH + ("--repeats", "0"), "argument --repeats: must be a positive integer, got 0"),
    "bench --device banana": (BENCH + ("--device", "banana"), "argument --device: 'banana' is not a device"),
    "reproduce --profile huge": (REPRODUCE + ("--profile", "huge"), "argument --profile: invalid choice: 'huge'"),
    "reproduce maestro": (("reproduce", "maestro", "--out", "{tmp}/runs"), "argument what: invalid choice"),
    "reproduce without --out": (("reproduce", "jsb"), "the following arguments are required: --out"),
    "reproduce --device banana": (REPRODUCE + ("--device", "banana"), "'banana' is not a device"),
}


@pytest.mark.parametrize("argv, needle", BAD_ARGS.values(), ids=BAD_ARGS.keys())
def test_bad_argument_is_a_one_line_error(argv, needle, tmp_path, capsys):
    code, err, stdout = main_error([a.format(tmp=tmp_path) for a in argv], capsys)
    assert code == 2
    assert_clean_error(code, err, needle)
    assert list(tmp_path.iterdir()) == []                    # nothing written


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_unavailable_device_is_a_one_line_error(tmp_path, capsys):
    for argv in (TRAIN + ("--device", "cuda"), GEN + ("--device", "cuda"), BENCH + ("--device", "cuda")):
        code, err, stdout = main_error([a.format(tmp=tmp_path) for a in argv], capsys)
        assert code == 2
        assert_clean_error(code, err, "argument --device: cuda: CUDA is not available on this machine")


# ------------------------------------------------------------------ bad files, paths and values: exit 1, one line

def test_bad_musictx_device_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MUSICTX_DEVICE", "banana")
    code, err, _ = main_error([a.format(tmp=tmp_path) for a in TRAIN], capsys)
    assert_clean_error(code, err, "MUSICTX_DEVICE='banana'")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["text file", "random bytes", "empty file", "directory without ckpt.pt"])
def test_not_a_checkpoint(kind, tmp_path, capsys):
    ck = tmp_path / "ckpt.pt"
    if kind == "text file":
        ck.write_text("not a checkpoint\n")
    elif kind == "random bytes":
        ck.write_bytes(np.random.default_rng(0).bytes(4096))
    elif kind == "empty file":
        ck.write_bytes(b"")
    else:
        ck = tmp_path / "empty_run"
        ck.mkdir()
    before = ck.is_file() and ck.read_bytes()
    code, err, _ = main_error(["generate", "--checkpoint", ck, "--out", tmp_path / "x.mid"], capsys)
    assert code == 1
    assert_clean_error(code, err, "no checkpoint at" if ck.is_dir() else "is not a musictx_lite checkpoint")
    assert not (tmp_path / "x.mid").exists() and (ck.is_dir() or ck.read_bytes() == before)


def test_prompt_index_beyond_the_split_leaves_the_output_alone(tmp_path, model_dir, capsys):
    out = tmp_path / "x.mid"
    out.write_bytes(b"earlier output")
    code, err, _ = main_error(["generate", "--checkpoint", model_dir, "--out", out, "--prompt-index", "500"], capsys)
    assert_clean_error(code, err, "--prompt-index 500 is beyond the valid split (", "chorales)")
    assert out.read_bytes() == b"earlier output"


@pytest.mark.parametrize("prompt_steps, needle", [("40", "does not fit the model's context of 128 tokens; use "
                                                         "--prompt-steps 31 or fewer"),
                                                  ("100000", "--prompt-steps 100000 is longer than")])
def test_chorale_prompt_too_long(prompt_steps, needle, tmp_path, model_dir, capsys):
    code, err, _ = main_error(["generate", "--checkpoint", model_dir, "--out", tmp_path / "x.mid",
                               "--prompt-steps", prompt_steps], capsys)
    assert_clean_error(code, err, needle)
    assert not (tmp_path / "x.mid").exists()


UNWRITABLE = {
    "generate --out is a directory": (("generate", "--checkpoint", "{run}", "--out", "{tmp}/somedir"),
                                      "--out {tmp}/somedir is a directory"),
    "generate --out under a file": (("generate", "--checkpoint", "{run}", "--out", "{tmp}/afile/x.mid"),
                                    "cannot write --out {tmp}/afile/x.mid: {tmp}/afile is a file, not a directory"),
    "train --out is a file": (TRAIN[:-1] + ("{tmp}/afile",), "--out {tmp}/afile exists and is not a directory"),
    "train --out under a file": (TRAIN[:-1] + ("{tmp}/afile/run",), "{tmp}/afile is a file, not a directory"),
    "bench --plot under a file": (BENCH + ("--plot", "{tmp}/afile/b.png"), "{tmp}/afile is a file, not a directory"),
    "bench --plot is a directory": (BENCH + ("--plot", "{tmp}/somedir.png"), "--plot {tmp}/somedir.png is a directory"),
    "bench --plot .xyz": (BENCH + ("--plot", "{tmp}/b.xyz"), "--plot {tmp}/b.xyz: matplotlib cannot write .xyz files"),
    "reproduce --out is a file": (REPRODUCE[:-1] + ("{tmp}/afile",), "--out {tmp}/afile exists and is not a directory"),
    "reproduce --out under a file": (REPRODUCE[:-1] + ("{tmp}/afile/runs",), "{tmp}/afile is a file, not a directory"),
}


@pytest.mark.parametrize("argv, needle", UNWRITABLE.values(), ids=UNWRITABLE.keys())
def test_output_that_cannot_be_written_fails_before_any_work(argv, needle, tmp_path, model_dir, capsys):
    (tmp_path / "somedir").mkdir()
    (tmp_path / "somedir.png").mkdir()
    (tmp_path / "afile").write_text("keep me")
    code, err, stdout = main_error([a.format(tmp=tmp_path, run=model_dir) for a in argv], capsys)
    assert code == 1 and stdout == ""                        # no model loaded, no training, no benchmark
    assert_clean_error(code, err, needle.format(tmp=tmp_path))
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["afile", "somedir", "somedir.png"]
    assert (tmp_path / "afile").read_text() == "keep me"


@pytest.mark.parametrize("kind", ["missing", "corrupt", "not the official file", "a directory"])
def test_reproduce_with_bad_data_fails_before_any_training(kind, tmp_path, capsys):
    data = tmp_path / "Jsb16thSeparated.json"
    if kind == "corrupt":
        data.write_bytes(np.random.default_rng(0).bytes(1000))
    elif kind == "not the official file":
        data.write_text('{"train": [], "valid": [], "test": []}')
    elif kind == "a directory":
        data.mkdir()
    needle = {"missing": f"JSB file {data} not found", "a directory": "Is a directory"}.get(kind, f"JSB file {data} "
                                                                                               f"has sha256")
    code, err, stdout = main_error([a.format(tmp=tmp_path) for a in REPRODUCE] + ["--data", data], capsys)
    assert code == 1 and stdout == ""
    assert_clean_error(code, err, needle)
    assert not (tmp_path / "runs").exists()


def test_train_over_another_models_run_keeps_its_checkpoint(model_dir, capsys):
    before = (model_dir / "ckpt.pt").read_bytes()
    code, err, _ = main_error(["train", "--model", "lstm", "--profile", "smoke", "--out", model_dir, "--quiet"], capsys)
    assert_clean_error(code, err, "was written by a different model or config")
    assert (model_dir / "ckpt.pt").read_bytes() == before


BAD_MIDI = ["missing", "empty", "corrupt", "three voices", "outside the vocabulary", "too long for the context",
            "shorter than --prompt-steps"]


@pytest.mark.parametrize("kind", BAD_MIDI)
def test_bad_prompt_midi(kind, tmp_path, model_dir, chorale, capsys):
    f, extra = tmp_path / "mine.mid", []
    if kind == "empty":
        f.write_bytes(b"")
        needle = f"{f} is empty, not a MIDI file"
    elif kind == "corrupt":
        f.write_bytes(b"MThd" + np.random.default_rng(1).bytes(200))
        needle = f"{f} is not a readable MIDI file"
    elif kind == "three voices":
        grid = chorale[:16].copy()
        grid[:, 2] = -1                                          # a silent tenor: no notes, no instrument
        write_midi(grid, f)
        needle = "expected 4 voices"
    elif kind == "outside the vocabulary":
        grid = chorale[:16].copy()
        grid[3, 0] = 100
        write_midi(grid, f)
        needle = f"{f}: pitches [100] are outside the vocabulary range"
    elif kind == "too long for the context":
        write_midi(chorale[:40], f)                              # 161 tokens with BOS; the smoke context is 128
        needle = "does not fit the model's context of 128 tokens; use --prompt-steps 31 or fewer"
    elif kind == "shorter than --prompt-steps":
        write_midi(chorale[:8], f)
        extra, needle = ["--prompt-steps", "20"], f"--prompt-steps 20 is longer than {f} (8 steps)"
    else:
        needle = f"MIDI file {f} not found"
    code, err, _ = main_error(["generate", "--checkpoint", model_dir, "--prompt-midi", f, "--out", tmp_path / "x.mid",
                               *extra], capsys)
    assert code == 1
    assert_clean_error(code, err, needle)
    assert not (tmp_path / "x.mid").exists()


# ------------------------------------------------------------------ the same, in a real process

@pytest.mark.parametrize("kind", ["bad argument", "not a checkpoint", "corrupt MIDI", "missing JSB file"])
def test_errors_in_a_real_process(kind, tmp_path, model_dir):
    if kind == "missing JSB file":
        argv = [a.format(tmp=tmp_path) for a in REPRODUCE] + ["--data", tmp_path / "none.json"]
        needle = f"JSB file {tmp_path / 'none.json'} not found"
    elif kind == "bad argument":
        argv, needle = [a.format(tmp=tmp_path) for a in TRAIN] + ["--steps", "-3"], BAD_ARGS["train --steps -3"][1]
    elif kind == "not a checkpoint":
        (tmp_path / "ckpt.pt").write_bytes(np.random.default_rng(0).bytes(4096))
        argv = ["generate", "--checkpoint", tmp_path / "ckpt.pt", "--out", tmp_path / "x.mid"]
        needle = "is not a musictx_lite checkpoint"
    else:
        (tmp_path / "mine.mid").write_bytes(b"MThd" + np.random.default_rng(1).bytes(200))
        argv = ["generate", "--checkpoint", model_dir, "--prompt-midi", tmp_path / "mine.mid",
                "--out", tmp_path / "x.mid"]
        needle = "is not a readable MIDI file"
    res = run(*argv, check=False)
    assert res.returncode == (2 if kind == "bad argument" else 1) and res.stdout == ""
    assert_error(res, needle)
    assert not (tmp_path / "x.mid").exists() and not (tmp_path / "run").exists() and not (tmp_path / "runs").exists()


# ------------------------------------------------------------------ Ctrl-C in train

def test_ctrl_c_in_train_checkpoints_and_exits_130(tmp_path):
    run_dir = tmp_path / "run"
    # SIGINT back to its default, so the child raises KeyboardInterrupt even where pytest runs in the background
    p = subprocess.Popen([sys.executable, "-m", "musictx_lite", "train", "--model", "lstm-attention",
                          "--profile", "smoke", "--out", str(run_dir), "--steps", "100000", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while not (run_dir / "ckpt.pt").exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (run_dir / "ckpt.pt").exists(), "no checkpoint appeared"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [f"interrupted: the checkpoint in {run_dir} holds the last complete step; "
                                        f"run the same command again to resume"]
    assert "interrupted at step" in out
    assert read_checkpoint(run_dir)["step"] >= 10                # the smoke profile checkpoints every 10 steps


# ------------------------------------------------------------------ generate --prompt-midi

def test_prompt_midi_is_continued(tmp_path, model_dir, chorale, capsys):
    prompt = chorale[:8]
    write_midi(prompt, tmp_path / "mine.mid")
    res = run("generate", "--checkpoint", model_dir, "--prompt-midi", tmp_path / "mine.mid", "--steps", "4",
              "--out", tmp_path / "more.mid")
    assert f"prompt: 8 steps of {tmp_path / 'mine.mid'}" in res.stdout and ": 12 steps from transformer" in res.stdout
    grid = read_midi(tmp_path / "more.mid")
    assert 8 <= len(grid) <= 12
    # read_midi orders voices by mean pitch over the whole file, and generated notes may cross: compare chords
    np.testing.assert_array_equal(np.sort(grid[:8], axis=1), np.sort(prompt, axis=1))

    main(["generate", "--checkpoint", str(model_dir), "--prompt-midi", str(tmp_path / "mine.mid"),
          "--prompt-steps", "3", "--steps", "2", "--out", str(tmp_path / "less.mid")])
    out = capsys.readouterr().out
    assert "prompt: first 3 steps of" in out and ": 5 steps from transformer" in out
    np.testing.assert_array_equal(np.sort(read_midi(tmp_path / "less.mid")[:3], axis=1), np.sort(prompt[:3], axis=1))


def test_budget_estimates_every_model_from_its_flops(capsys):
    from musictx_lite import MODELS
    from musictx_lite.engine.profiles import T4_FLOPS, T4_STEP_S, get_profile, t4_minutes, train_flops

    main(["budget", "--profile", "gpu"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[2:2 + len(MODELS)]}
    assert set(rows) == set(MODELS)
    P = get_profile("gpu")
    for name, row in rows.items():
        minutes = (train_flops(name, P) / T4_FLOPS + P.train_config(name).max_steps * T4_STEP_S) / 60
        assert float(row[-1]) == pytest.approx(minutes, abs=0.006)
        assert 0 < float(row[-1]) < 10                       # the profile's claim: minutes per model on a T4
    # a transformer step: 6 FLOPs per weight per token dominate (weights: 12 C^2 per block + the read-out)
    cfg, t = P.model_config("transformer"), P.train_config("transformer")
    C, L, T = cfg.n_embd, cfg.n_layers, cfg.context
    weights = L * 12 * C * C + C * cfg.vocab_size
    expect = t.batch_size * T * t.max_steps * (6 * weights + 12 * L * T * C)
    assert train_flops("transformer", P) == pytest.approx(expect, rel=1e-9)
    # per chapter, and the whole book within the 30 T4-minutes that Colab students are promised
    from musictx_lite.classroom.chapter import chapter_minutes

    per = chapter_minutes("gpu")
    assert set(per) == set(range(14)) and per[0] == 0 and all(m > 0 for c, m in per.items() if c)
    assert "  ".join(f"{c}: {m:.1f}" for c, m in per.items()) in out
    assert f"the whole book: {sum(per.values()):.1f} T4-minutes" in out and sum(per.values()) <= 30
    # chapter 8 trains three decoders at the profile's budget, so its minutes are theirs
    assert per[8] == pytest.approx(sum(t4_minutes(n, P) for n in ("learned-positions", "rope", "relative")))


def test_cli_baselines_prints_chapter_0s_four(capsys, chorales):
    from musictx_lite.study.baselines import NGram, TwoTokens

    main(["baselines", "--max-n", "3"])
    out = capsys.readouterr().out
    lines = dict(line.rsplit(": ", 1) for line in out.splitlines()[1:])
    assert [k.strip() for k in lines] == ["unigram", "2-gram", "3-gram", "same voice, prev. step",
                                          "two tokens (x_t-4, x_t-1)"]
    assert float(lines["                3-gram"]) == round(NGram(3).fit(chorales.train).nll(chorales.valid), 3)
    assert float(lines["two tokens (x_t-4, x_t-1)"]) == round(TwoTokens().fit(chorales.train).nll(chorales.valid), 3)


def test_cli_harmonise_keeps_the_melody_and_writes_midi_and_musicxml(tmp_path, capsys):
    from musictx_lite.io.melody import read_melody

    tune = "4/4 c4 e8 g c'4 b8 a g2"                                # C4 to C5: in range as it is
    main(["harmonise", "--melody", tune, "--out", str(tmp_path / "h.mid"), "--musicxml", str(tmp_path / "h.xml"),
          "--seed", "3"])
    out = capsys.readouterr().out
    assert "7 notes, 24 16th steps (1.5 bars of 4/4)" in out and "harmonised by the shipped relative model" in out
    grid = read_midi(tmp_path / "h.mid")
    np.testing.assert_array_equal(grid[:, 0], read_melody(tune).pitches)
    assert grid.shape == (24, 4) and (grid[:, 1:] >= 0).mean() > 0.5     # three voices under it, mostly sounding
    assert (tmp_path / "h.xml").read_text().lstrip().startswith("<?xml")


def test_cli_harmonise_writes_the_melodys_metre_and_upbeat(tmp_path, capsys):
    """A tune in 3/4 with a quarter-note upbeat: the MIDI file says 3/4 and its first notes sound on the third
    beat of bar 1, so its barlines are the tune's; the MusicXML has an upbeat bar (number 0) and three beats."""
    import pretty_midi

    abc = tmp_path / "tune.abc"
    abc.write_text("X:1\nT:upbeat\nM:3/4\nL:1/4\nK:G\nD | G2 B | d2 B | A2 F | G2 |]\n")
    main(["harmonise", str(abc), "--out", str(tmp_path / "h.mid"), "--musicxml", str(tmp_path / "h.xml")])
    pm = pretty_midi.PrettyMIDI(str(tmp_path / "h.mid"))
    ts = pm.time_signature_changes
    assert [(t.numerator, t.denominator) for t in ts] == [(3, 4)]
    quarter = 60 / pm.get_tempo_changes()[1][0]
    assert min(n.start for i in pm.instruments for n in i.notes) == pytest.approx(2 * quarter)
    xml = (tmp_path / "h.xml").read_text()
    assert "<beats>3</beats>" in xml and 'number="0"' in xml
    capsys.readouterr()


def test_cli_harmonise_with_the_shipped_encoder_decoder_keeps_the_melody(tmp_path, capsys):
    from musictx_lite.io.melody import read_melody

    tune = "4/4 e'4 e' f' g' g' f' e' d' c'2"
    main(["harmonise", "--melody", tune, "--method", "harmoniser", "--out", str(tmp_path / "h.mid")])
    assert "harmonised by the shipped harmoniser model (harmoniser)" in capsys.readouterr().out
    grid = read_midi(tmp_path / "h.mid")
    np.testing.assert_array_equal(grid[:, 0], read_melody(tune).pitches)
    assert (grid[:, 1:] >= 0).mean() > 0.5


HARMONISE_BAD = {
    "no melody": ((), "give the melody once"),
    "two melodies": (("{tmp}/m.mid", "--melody", "c4"), "give the melody once"),
    "a chord": (("{tmp}/chord.musicxml",), "a chord (E4 G4) at quarter 1"),
    "too fine": (("--melody", "4/4 c'4 d'32 e' f'16 g'2"), "does not fit the 16th-note grid"),
    "too wide": (("--melody", "4/4 C4 c''"), "no transposition fits"),
    "empty file": (("{tmp}/empty.mid",), "is empty"),
    "missing file": (("{tmp}/none.mid",), "not found"),
    "transpose out of range": (("--melody", "4/4 c'4 g'", "--transpose", "24"), "leaves the soprano's range"),
    "no shipped Coconet": (("--melody", "4/4 c'4", "--method", "coconet"), "no pretrained model 'coconet'"),
}


@pytest.mark.parametrize("args, needle", HARMONISE_BAD.values(), ids=HARMONISE_BAD.keys())
def test_cli_harmonise_bad_input_is_one_line_and_writes_nothing(args, needle, tmp_path, capsys):
    import music21

    (tmp_path / "empty.mid").write_bytes(b"")
    s = music21.stream.Stream([music21.note.Note("C5", quarterLength=1), music21.chord.Chord(["E4", "G4"])])
    s.write("musicxml", fp=str(tmp_path / "chord.musicxml"))
    before = set(tmp_path.iterdir())
    argv = ["harmonise", *[a.format(tmp=tmp_path) for a in args], "--out", str(tmp_path / "out.mid")]
    code, err, _ = main_error(argv, capsys)
    assert code == 1 and err.strip().count("\n") == 0
    assert_clean_error(code, err, needle)
    assert set(tmp_path.iterdir()) == before                   # nothing written


START_FROM_BAD = {
    "not a harmoniser": (("--model", "relative", "--start-from", "relative"), "relative cannot start from"),
    "freeze alone": (("--model", "harmoniser", "--freeze"), "--freeze keeps the weights --start-from takes"),
}


@pytest.mark.parametrize("args, needles", [(v[0], v[1:]) for v in START_FROM_BAD.values()],
                         ids=START_FROM_BAD.keys())
def test_train_start_from_refuses_what_it_cannot_start(args, needles, tmp_path, capsys):
    code, err, _ = main_error(["train", *args, "--out", tmp_path / "run", "--steps", "1"], capsys)
    assert_clean_error(code, err, *needles)
    assert not (tmp_path / "run" / "ckpt.pt").exists()                      # nothing trained


def test_start_from_a_decoder_of_another_size_is_refused():
    from musictx_lite import ModelConfig, build_model
    from musictx_lite.cli.train import start_from

    small = build_model("harmoniser", ModelConfig(n_embd=32, n_heads=2, n_layers=1, context=64))
    with pytest.raises(ValueError, match="its size differs from this profile's harmoniser: n_layers 1 here, 4 there"):
        start_from(small, "harmoniser", "relative")


def test_train_start_from_the_shipped_decoder_begins_as_it(tmp_path, capsys, chorales):
    """``train --model harmoniser --profile paper --start-from relative --freeze``: before any step the
    harmoniser's NLL of the alto, tenor and bass equals the shipped decoder's on the same tokens."""
    from musictx_lite import pretrained
    from musictx_lite.engine.distil import load_teacher
    from musictx_lite.models.tasks import voice_nlls

    main(["train", "--model", "harmoniser", "--profile", "paper", "--start-from", "relative", "--freeze",
          "--steps", "1", "--lr", "1e-9", "--out", str(tmp_path / "h"), "--quiet"])
    assert "starting from the shipped 'relative'" in capsys.readouterr().out
    few = chorales.valid[:2]
    got = voice_nlls(load_teacher(tmp_path / "h"), few)["ATB"]
    assert abs(got - voice_nlls(pretrained("relative", device="cpu"), few)["ATB"]) < 1e-4


# ------------------------------------------------------------------ piano performances (chapter 13): --data-dir

def piano_folder(folder, good: int = 3):
    """A folder of ``good`` small piano performances (one in a subfolder) and three bad MIDI files; returns
    the bad files' names and a word each one's reason holds."""
    import pretty_midi

    from musictx_lite.io.performance import write_performance

    rng = np.random.default_rng(0)
    for i in range(good):
        start = np.sort(rng.choice(800, 40, replace=False)) * 0.05
        notes = np.column_stack([start, start + rng.uniform(0.05, 1, 40), rng.integers(36, 96, 40),
                                 rng.integers(20, 120, 40)])
        write_performance(notes, folder / ("sub" if i == 0 else "") / f"piece{i}.mid")
    (folder / "corrupt.mid").write_bytes(rng.integers(0, 256, 2000, dtype=np.uint8).tobytes())
    (folder / "empty.mid").write_bytes(b"")
    pm = pretty_midi.PrettyMIDI()
    drums = pretty_midi.Instrument(0, is_drum=True)
    drums.notes.append(pretty_midi.Note(velocity=100, pitch=36, start=0, end=0.1))
    pm.instruments.append(drums)
    pm.write(str(folder / "drums.mid"))
    (folder / "notes.txt").write_text("not a MIDI file\n")
    return {"corrupt.mid": "is not a readable MIDI file", "drums.mid": "has only drum notes",
            "empty.mid": "is empty"}


def test_train_a_piano_model_on_a_folder_with_bad_files(tmp_path, monkeypatch):
    monkeypatch.setenv("MUSICTX_CACHE", str(tmp_path / "cache"))
    bad = piano_folder(tmp_path / "midi")
    res = run("train", "--model", "piano-local", "--profile", "smoke", "--data-dir", tmp_path / "midi",
              "--out", tmp_path / "run", "--quiet")
    lines = res.stdout.strip().splitlines()
    for name, why in bad.items():
        assert any(line.startswith(f"skipped {tmp_path / 'midi' / name}: {why}") for line in lines), res.stdout
    assert "skipped 3 of 6 MIDI files" in lines and "Traceback" not in res.stderr
    assert lines[-1].startswith("valid NLL: ") and 0 < float(lines[-1].split()[2]) < 7, res.stdout
    assert (tmp_path / "run" / "ckpt.pt").is_file()
    assert len(list((tmp_path / "cache").rglob("*.npz"))) == 3              # the readable files, cached


def test_piano_data_and_models_must_match(tmp_path, monkeypatch):
    monkeypatch.setenv("MUSICTX_CACHE", str(tmp_path / "cache"))
    piano_folder(tmp_path / "midi")
    res = run("train", "--model", "relative", "--profile", "smoke", "--data-dir", tmp_path / "midi",
              "--out", tmp_path / "run", check=False)
    assert_error(res, "relative learns the chorales' tokens", "piano-local")
    res = run("train", "--model", "piano-local", "--profile", "smoke", "--out", tmp_path / "run", check=False)
    assert_error(res, "piano-local learns piano performances: give --data-dir FOLDER")
    assert not (tmp_path / "run" / "ckpt.pt").exists()


def test_a_folder_with_too_few_readable_files_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    from musictx_lite.io.corpus import SkippedFile

    monkeypatch.setenv("MUSICTX_CACHE", str(tmp_path / "cache"))
    piano_folder(tmp_path / "midi", good=2)
    with warnings.catch_warnings(record=True) as caught:               # the CLI prints them instead
        warnings.simplefilter("always")
        code, err, out = main_error(["train", "--model", "piano-local", "--profile", "smoke", "--data-dir",
                                     tmp_path / "midi", "--out", tmp_path / "run"], capsys)
    last = assert_clean_error(code, err, "too few pieces to split", "at least 3 readable files")
    assert err.strip() == last and "skipped 3 of 5 MIDI files" in out
    assert not [w for w in caught if issubclass(w.category, SkippedFile)]
    (tmp_path / "none").mkdir()
    code, err, _ = main_error(["train", "--model", "piano-local", "--profile", "smoke", "--data-dir",
                               tmp_path / "none", "--out", tmp_path / "run"], capsys)
    assert_clean_error(code, err, "holds no .mid or .midi files")
    code, err, _ = main_error(["train", "--model", "piano-local", "--profile", "smoke", "--data-dir",
                               tmp_path / "missing", "--out", tmp_path / "run"], capsys)
    assert_clean_error(code, err, "is not a folder")
    assert not (tmp_path / "run" / "ckpt.pt").exists()


def test_generate_continues_a_performance_with_the_shipped_piano_model(tmp_path, capsys):
    """``generate --pretrained piano-local --prompt-midi F --prompt-seconds S``: the written performance begins
    with F's first S seconds, every note of them at its pitch, its velocity bin and its onset within half a
    tick, then the model's events; the chorale options, and the piano options on a chorale model, are errors."""
    from musictx_lite.io.performance import TICK, opening, quantised, read_performance, velocity_bin, write_performance

    rng = np.random.default_rng(1)
    start = np.sort(rng.uniform(0, 6, 30))
    notes = np.column_stack([start, start + rng.uniform(0.1, 0.8, 30), rng.integers(40, 90, 30),
                             rng.integers(30, 110, 30)])
    write_performance(notes, tmp_path / "mine.mid")
    out = tmp_path / "more.mid"
    main(["generate", "--pretrained", "piano-local", "--prompt-midi", str(tmp_path / "mine.mid"),
          "--prompt-seconds", "3", "--events", "48", "--seed", "0", "--out", str(out)])
    said = capsys.readouterr().out
    assert "first 3 s of" in said and "48 events from pretrained piano-local" in said, said
    back, mine = read_performance(out).notes, read_performance(tmp_path / "mine.mid").notes
    head = quantised(opening(mine, 3))                            # from the first note: 3 s of music, in ticks
    got = {(round(n[0] / TICK), int(n[2]), int(velocity_bin(n[3]))) for n in back}
    assert {(int(t), int(p), int(v)) for t, _, p, v in head} <= got
    assert len(back) >= len(head)

    prompt = ("--prompt-midi", tmp_path / "mine.mid")
    errors = {(*prompt, "--steps", "8"): "--steps: for chorale models",
              ("--prompt-split", "test", "--prompt-index", "1"): "--prompt-split, --prompt-index: for chorale models",
              (*prompt, "--prompt-seconds", "60"): "--prompt-seconds 60 is longer than"}
    for extra, needle in errors.items():
        code, err, _ = main_error(["generate", "--pretrained", "piano-local", "--out", tmp_path / "x.mid", *extra],
                                  capsys)
        assert_clean_error(code, err, needle)
    code, err, _ = main_error(["generate", "--pretrained", "relative", "--events", "32", "--out",
                               tmp_path / "x.mid"], capsys)
    assert_clean_error(code, err, "--prompt-seconds, --events and --no-rules are for piano models")
    assert not (tmp_path / "x.mid").exists()


def test_generate_keeps_a_performance_to_the_grammar_unless_told_not_to(tmp_path, capsys):
    """By default a piano continuation keeps the performance grammar (no key held past the shipped limit, no more
    keys down, none left down at the end); ``--no-rules`` is the raw sampler."""
    from musictx_lite.engine.grammar import keys_down, shipped_limits
    from musictx_lite.io.performance import read_performance

    limits = shipped_limits()
    main(["generate", "--pretrained", "piano-local", "--events", "400", "--seed", "0", "--out",
          str(tmp_path / "kept.mid")])
    said = capsys.readouterr().out
    assert "the performance grammar (A0 to C8, longest hold" in said and "released at the end" in said, said
    notes = read_performance(tmp_path / "kept.mid").notes
    assert (notes[:, 1] - notes[:, 0]).max() <= limits["note_s_p999"] + 0.011
    assert keys_down(notes).max() <= limits["keys_down_p995"]
    main(["generate", "--pretrained", "piano-local", "--events", "40", "--no-rules", "--out",
          str(tmp_path / "raw.mid")])
    assert "the raw sampler (--no-rules)" in capsys.readouterr().out
