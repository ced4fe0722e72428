"""The shipped pretrained models (chapter 11): their recorded NLL recomputed on the CPU in every CI run,
the paper's target for relative attention, the checkpoint format, sampling, and the CLI."""
import functools
import json

import numpy as np
import pytest
import torch

from musictx_lite import generate, load_jsb
from musictx_lite.io.tokens import VOCAB_SIZE
from musictx_lite.models.tasks import evaluate_nll
from musictx_lite.study.hub import HERE, NAMES, TRIED, UNDISTILLED, available, pretrained, recipe_record, record, tried

TARGET_RELATIVE = 0.335       # the Music Transformer's best JSB model (Huang et al. 2019, Table 2)
MAX_BYTES = 8 * 2**20         # each shipped checkpoint is at most 8 MB


def test_all_three_rows_are_shipped():
    assert available() == list(NAMES)


@pytest.fixture(scope="module")
def jsb(jsb_path):
    return load_jsb(jsb_path)


@pytest.fixture(scope="module")
def nll_now(jsb):
    """A shipped model's validation NLL evaluated now: once a model for this file's tests."""
    return functools.cache(lambda name: evaluate_nll(pretrained(name, device="cpu"), jsb.valid))


@pytest.mark.parametrize("name", NAMES + tuple(UNDISTILLED.values()))
def test_recorded_valid_nll_is_recomputed_on_cpu(name, nll_now):
    """The book's headline numbers: each shipped model, evaluated now on the official validation split,
    gives its recorded NLL within 1e-3."""
    rec = record(name)
    nll = nll_now(name)
    assert abs(nll - rec["valid_nll"]) < 1e-3, (name, nll, rec["valid_nll"])


def test_relative_attention_reaches_the_papers_best_model(nll_now):
    """Relative attention alone matches the paper's best JSB model (0.335 nats/token), recomputed now.

    Until a shipped model reaches it, the test reports how far off it is as an expected failure; it beats
    the paper's relative-attention row (0.357) already, and that is asserted."""
    now = nll_now("relative")
    assert now < 0.357
    if record("relative")["valid_nll"] > TARGET_RELATIVE:
        pytest.xfail(f"issue 17's target is not reached yet: the shipped relative model is "
                     f"{now - TARGET_RELATIVE:.3f} nats/token above the paper's best JSB model ({TARGET_RELATIVE})")
    assert now <= TARGET_RELATIVE + 1e-3


def test_chapter_12s_baseline_the_shipped_relative_model_voice_by_voice(jsb):
    """Chapter 12's bar for a harmoniser: the shipped causal decoder's NLL on the alto, tenor and bass tokens
    of whole valid pieces, given everything before each (issue 39: 0.323; per voice 0.348, 0.362, 0.332,
    0.277). The voices' mean (each voice has as many tokens) is the recorded NLL."""
    from musictx_lite.models.tasks import voice_nlls

    got = voice_nlls(pretrained("relative", device="cpu"), jsb.valid)
    want = {"soprano": 0.348, "alto": 0.362, "tenor": 0.332, "bass": 0.277, "ATB": 0.323}
    assert all(abs(got[k] - v) < 1e-3 for k, v in want.items()), got     # the figures, to 3 places
    four = np.mean([got[v] for v in ("soprano", "alto", "tenor", "bass")])
    assert abs(four - record("relative")["valid_nll"]) < 1e-3


@pytest.mark.parametrize("name", NAMES + tuple(UNDISTILLED.values()))
def test_records_hold_their_provenance(name):
    rec = record(name)
    for key in ("command", "commit", "seed", "device", "torch", "steps", "best_step", "train_seconds",
                "valid_nll", "test_nll", "curve", "model_config", "train_config", "sha256"):
        assert key in rec, key
    if rec["train_config"].get("teachers"):            # distilled: trained by `train --teachers`, then exported
        assert rec["command"].startswith("python -m musictx_lite export") and "--teachers" in rec["note"]
        assert sorted(rec["teachers"]) == sorted(rec["train_config"]["teachers"]) == sorted(rec["teacher_steps"])
    else:
        assert "reproduce jsb" in rec["command"] and "--profile paper" in rec["command"]
    assert 0 < rec["best_step"] <= rec["steps"] and rec["train_config"]["transpose"] is True
    assert len(rec["curve"]["eval_step"]) == len(rec["curve"]["valid_nll"]) > 0
    assert min(rec["curve"]["valid_nll"]) == pytest.approx(
        rec["curve"]["valid_nll"][rec["curve"]["eval_step"].index(rec["best_step"])])
    path = HERE / rec["file"]
    assert path.stat().st_size == rec["bytes"] <= MAX_BYTES
    import hashlib
    assert hashlib.sha256(path.read_bytes()).hexdigest() == rec["sha256"]


@pytest.mark.parametrize("name", UNDISTILLED)
def test_a_distilled_model_keeps_its_predecessor_and_beats_it(name):
    """What distillation bought, from the two records that CI recomputes above: the student scores below the
    same model trained by the recipe alone, and its teachers' mean scores below every teacher and the student."""
    rec, plain = record(name), recipe_record(name)
    assert rec["train_config"]["teachers"] and not plain["train_config"].get("teachers")
    assert plain["model_config"] == rec["model_config"] and plain["params"] == rec["params"]
    assert rec["teachers_valid_nll"] < rec["valid_nll"] < plain["valid_nll"]
    assert rec["teachers_valid_nll"] < min(rec["teachers"].values())
    ck = torch.load(HERE / plain["file"], map_location="cpu", weights_only=True)
    assert ck["model_name"] == name and plain["file"] == f"{UNDISTILLED[name]}.pt"
    for key in ("command", "commit", "sha256", "curve"):
        assert key in plain, key


@pytest.mark.parametrize("name", NAMES)
def test_checkpoint_format_is_stable(name):
    """Parameter names are a format: the shipped files load with weights_only into today's models, float16 on
    disk and float32 in memory, with no missing or unexpected key."""
    ck = torch.load(HERE / f"{name}.pt", map_location="cpu", weights_only=True)
    assert ck["model_name"] == name
    assert all(v.dtype == torch.float16 for v in ck["model"].values() if v.is_floating_point())
    model = pretrained(name, device="cpu")
    assert set(model.state_dict()) == set(ck["model"])
    assert all(p.dtype == torch.float32 for p in model.parameters()) and not model.training


def test_pretrained_samples_music():
    model = pretrained("relative", device="cpu")
    tokens = generate(model, None, n_steps=8, seed=0)
    assert tokens.shape == (1 + 32,) and ((tokens[1:] >= 2) & (tokens[1:] < VOCAB_SIZE)).all()
    assert np.array_equal(tokens, generate(model, None, n_steps=8, seed=0))


def test_the_package_gives_pretrained_models_at_its_top_level():
    import musictx_lite
    import musictx_lite.study.hub as hub

    a, b = musictx_lite.pretrained("relative", device="cpu"), hub.pretrained("relative", device="cpu")
    assert musictx_lite.pretrained is hub.pretrained and not a.training
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_unknown_name_is_a_clear_error():
    with pytest.raises(ValueError, match="no pretrained model 'nope'"):
        pretrained("nope")


def test_cli_generate_pretrained(tmp_path, capsys):
    from musictx_lite.__main__ import main
    from musictx_lite.io.midi import read_midi

    out = tmp_path / "bach.mid"
    main(["generate", "--pretrained", "relative", "--steps", "8", "--out", str(out)])
    assert "pretrained relative" in capsys.readouterr().out
    assert read_midi(out).shape[1] == 4


def test_cli_generate_at_a_tiny_temperature_is_greedy(tmp_path):
    """--temperature 1e-40 once overflowed to NaN probabilities and a traceback; now it is the argmax."""
    from musictx_lite.__main__ import main
    from musictx_lite.io.midi import read_midi

    a, b = tmp_path / "a.mid", tmp_path / "b.mid"
    for out, seed in ((a, "1"), (b, "2")):
        main(["generate", "--pretrained", "relative", "--steps", "8", "--temperature", "1e-40",
              "--seed", seed, "--out", str(out), "--device", "cpu"])
    np.testing.assert_array_equal(read_midi(a), read_midi(b))


def test_cli_a_programming_error_keeps_its_traceback(monkeypatch, tmp_path):
    """The CLI reports the errors it means to (ValueError, OSError, ...) in one line; a bug is not one."""
    import musictx_lite
    import musictx_lite.__main__ as cli

    def broken(*a, **k):
        raise TypeError("a bug")

    monkeypatch.setattr(musictx_lite, "generate", broken)      # run_generate imports it when it runs
    with pytest.raises(TypeError, match="a bug"):
        cli.main(["generate", "--pretrained", "relative", "--steps", "2", "--out", str(tmp_path / "x.mid")])


def test_cli_checkpoint_and_pretrained_exclude_each_other(tmp_path, capsys):
    from musictx_lite.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(["generate", "--pretrained", "relative", "--checkpoint", str(tmp_path), "--out", str(tmp_path / "x.mid")])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err


@pytest.mark.parametrize("variant", TRIED)
def test_each_variant_tried_is_the_recipe_with_its_change_alone(variant):
    """Chapter 11 compares each shipped model with the same model trained at the full budget with one change
    of the recipe: the comparison is fair only if the records differ in that change alone."""
    v = tried()[variant]
    assert sorted(v["records"]) == sorted(NAMES) and v["change"] and v["about"]
    for name, rec in v["records"].items():
        now = recipe_record(name)                   # a distilled model is compared through its predecessor
        for part in ("model_config", "train_config"):
            want = {**now[part], **{k: x for k, x in v["change"].items() if k in now[part]}}
            assert rec[part] == want, (variant, name, part)
        assert all(k in now["model_config"] or k in now["train_config"] for k in v["change"])
        assert rec["steps"] == now["steps"] and np.isfinite(rec["valid_nll"])


def test_records_are_json_with_finite_numbers():
    for name in NAMES:
        rec = json.loads((HERE / f"{name}.json").read_text())
        assert np.isfinite([rec["valid_nll"], rec["test_nll"]]).all()


def test_the_sampler_widget_defaults_to_the_shipped_relative_model(monkeypatch, jsb_path):
    from musictx_lite.classroom import widgets

    seen = {}
    monkeypatch.setattr(widgets, "sampler_widget", lambda model, pieces, *a: seen.update(model=model, pieces=pieces))
    monkeypatch.setattr(widgets, "_show", lambda widget, fallback: widget())
    widgets.explore_sampler()
    assert seen["model"].name == "relative" and len(seen["pieces"]) == 5
    ref = pretrained("relative", device="cpu")
    assert all(torch.equal(a.cpu(), b) for a, b in zip(seen["model"].state_dict().values(), ref.state_dict().values()))


def test_a_copy_without_git_history_records_the_commit_it_was_told(monkeypatch):
    """On a borrowed GPU machine the working tree travels without .git: provenance says so, or names
    the commit that $MUSICTX_COMMIT gives, marked as told; with git, git's answer wins."""
    from musictx_lite.study import hub

    real = hub.git_commit()
    monkeypatch.setenv("MUSICTX_COMMIT", "abc123")
    if real != "unknown":                                 # a git checkout: git's answer, the variable ignored
        assert hub.git_commit() == real

    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(hub.subprocess, "run", no_git)
    assert hub.git_commit() == "abc123 (as $MUSICTX_COMMIT says)"
    assert hub.provenance("cpu")["commit"] == "abc123 (as $MUSICTX_COMMIT says)"
    monkeypatch.delenv("MUSICTX_COMMIT")
    assert hub.git_commit() == "unknown"


def test_the_shipped_harmoniser_scores_its_record_on_cpu(jsb):
    """Chapter 12's shipped encoder-decoder: at most 8 MB, given by ``pretrained`` but not among the paper's
    rows (``available``), and its recorded NLL of the alto, tenor and bass tokens of the valid split (the
    soprano given) recomputed now within 1e-3; the record names the study that chose it."""
    from musictx_lite.models.tasks import voice_nlls
    from musictx_lite.study.hub import TASKS

    assert "harmoniser" in TASKS and "harmoniser" not in available()
    rec = record("harmoniser")
    assert (HERE / rec["file"]).stat().st_size == rec["bytes"] <= MAX_BYTES
    model = pretrained("harmoniser", device="cpu")
    assert abs(voice_nlls(model, jsb.valid)["ATB"] - rec["valid_nll"]) < 1e-3
    assert "scripts.harmonise_study" in rec["note"] and rec["train_config"]["seed"] == rec["seed"]


@pytest.fixture(scope="module")
def piano_sample(piano_path):
    from musictx_lite.io.corpus import load_piano_sample

    return load_piano_sample(("giantmidi",), root=piano_path)


def test_the_shipped_piano_model_scores_its_record_on_cpu(piano_sample):
    """Chapter 13's shipped piano model: at most 8 MB, given by ``pretrained`` but not among the paper's rows,
    trained on the CC BY transcriptions only and saying so, and its recorded NLL per event on the held-out
    validation pieces recomputed now within 1e-3 (as for the JSB models: the test pieces would double its
    time). Skips where the shared sample is absent."""
    from musictx_lite.io.performance import VOCAB_SIZE as EVENTS
    from musictx_lite.study.hub import PIANO, TASKS

    assert PIANO in TASKS and PIANO not in available()
    rec = record(PIANO)
    path = HERE / rec["file"]
    assert path.stat().st_size == rec["bytes"] <= MAX_BYTES
    import hashlib
    assert hashlib.sha256(path.read_bytes()).hexdigest() == rec["sha256"]
    assert "GiantMIDI-Piano" in rec["attribution"] and "CC BY" in rec["attribution"]
    assert "giantmidi" in rec["data"] and "maestro" not in rec["data"].lower().replace("not maestro", "")
    assert rec["model_config"]["context"] == 2048 and rec["model_config"]["vocab_size"] == EVENTS
    model = pretrained(PIANO, device="cpu")
    nll = evaluate_nll(model, piano_sample["valid"])
    assert abs(nll - rec["valid_nll"]) < 1e-3, (nll, rec["valid_nll"])
    ck = torch.load(path, map_location="cpu", weights_only=True)
    assert set(model.state_dict()) == set(ck["model"])            # parameter names are a format
