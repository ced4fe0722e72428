"""Chapter 11's comparison: which models, at which budget, and what `compare` measures."""
import math
import time

import numpy as np
import pytest
import torch

from musictx_lite import ModelConfig, build_model, evaluate_nll, train
from musictx_lite.engine.profiles import PROFILES, Profile
from musictx_lite.engine.training import TrainConfig
from musictx_lite.models import MODELS
from musictx_lite.models.probes import is_causal
from musictx_lite.models.tasks import NEXT_TOKEN
from musictx_lite.study import compare as C

TINY = ModelConfig(n_embd=16, n_heads=2, n_layers=2, context=32)


def test_every_registered_model_is_compared_or_left_out_for_a_reason():
    assert set(C.compared()) | set(C.left_out()) == set(MODELS)
    assert not set(C.compared()) & set(C.left_out())
    assert list(C.compared().values()) == sorted(C.compared().values())   # in the book's order
    for name in C.compared():                       # next-token models that never see the future
        torch.manual_seed(0)
        model = build_model(name, TINY)
        assert model.task is NEXT_TOKEN and is_causal(model), name
    for name in ("attention-unmasked", "fnet"):   # left out because they leak
        assert not is_causal(build_model(name, TINY)), name
    assert build_model("fill", TINY).task is not NEXT_TOKEN


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_one_budget_for_every_model(profile):
    p = PROFILES[profile]
    own = {name for name in C.compared() if MODELS[name].size in p.comparison_sizes}
    budgets = {name: C.budget(name, p) for name in C.compared() if name not in own}
    assert len({repr(t) for _, t in budgets.values()}) == 1          # the same steps, batch, schedule
    for name in own:                                                 # a class the profile sizes on its own
        m, t = C.budget(name, p)
        over = p.comparison_sizes[MODELS[name].size]
        assert all(getattr(m if hasattr(m, k) else t, k) == v for k, v in over.items())
    for name, (m, _) in budgets.items():
        ref = budgets["relative"][0]
        assert (m.n_embd, m.n_heads, m.context, m.dropout) == (ref.n_embd, ref.n_heads, ref.context,
                                                                    ref.dropout)
        assert m.n_layers == (1 if name in C.one_layer() else ref.n_layers)
    m, t = budgets["relative"]
    for key, value in p.comparison.items():                         # the comparison settings win
        assert getattr(m if hasattr(m, key) else t, key) == value


def test_budget_errors_name_the_reason():
    with pytest.raises(ValueError, match="sees the future"):
        C.budget("fnet", "smoke")
    with pytest.raises(ValueError, match="not compared"):
        C.budget("no-such-model", "smoke")
    with pytest.raises(ValueError, match="unknown settings.*n_embed"):
        Profile("x", model={}, train=TrainConfig(), comparison={"n_embed": 64})


@pytest.fixture(scope="module")
def rows(chorales):
    return C.compare(chorales, "smoke", names=["lstm", "relative"], device="cpu", n_pieces=2, n_steps=8,
                     memory_length=64, verbose=False)


def test_compare_measures_each_model(rows, chorales):
    assert [r["name"] for r in rows] == ["lstm", "relative"]
    for r in rows:
        hist = r["history"]
        assert r["chapter"] == C.compared()[r["name"]] and hist.step[-1] == 20
        assert r["valid_nll"] == pytest.approx(evaluate_nll(r["model"], chorales.valid), abs=1e-5)
        assert r["test_nll"] == pytest.approx(evaluate_nll(r["model"], chorales.test), abs=1e-5)
        assert r["valid_nll"] < math.log(54)                         # it learned something
        assert r["train_tok_s"] > 0 and r["sample_tok_s"] > 0 and r["peak_mib"] > 0
        assert len(r["samples"]) == 2 and all(g.shape == (8, 4) for g in r["samples"])
        assert len(hist.eval_seconds) == len(hist.eval_step) == 4    # eval_every 5 of 20 steps
        assert np.all(np.diff(hist.eval_seconds) > 0) and hist.eval_seconds[-1] <= hist.seconds + 1e-9
    text = C.format_comparison(rows, 64)
    assert max(len(line) for line in text.splitlines()) <= 88 and "MiB @64" in text
    lines = text.splitlines()[2:]
    best = min(rows, key=lambda r: r["valid_nll"])["name"]
    assert best in lines[0]                                          # best first


def test_samples_continue_the_prompts(rows, chorales):
    model = rows[1]["model"]
    grids, speed = C.samples(model, chorales.test[:2], prompt_steps=4, n_steps=3)
    assert [g.shape for g in grids] == [(3, 4), (3, 4)] and speed > 0
    with pytest.raises(ValueError, match="at least 10000 steps"):
        C.compare(chorales, "smoke", names=["lstm"], prompt_steps=10000)


def test_training_time_excludes_evaluation(chorales, monkeypatch):
    """A clock that jumps 1000 s during every evaluation: the History's training seconds leave every jump out."""
    from musictx_lite.models.tasks import NextToken

    real, jumps = time.perf_counter, [0.0]
    evaluate = NextToken.evaluate

    def slow_evaluate(self, model, pieces):
        jumps[0] += 1000.0
        return evaluate(self, model, pieces)

    monkeypatch.setattr(time, "perf_counter", lambda: real() + jumps[0])
    monkeypatch.setattr(NextToken, "evaluate", slow_evaluate)
    torch.manual_seed(0)
    model = build_model("lstm", TINY)
    cfg = TrainConfig(batch_size=4, max_steps=6, eval_every=1, ckpt_every=6, warmup_steps=1)
    t0 = time.perf_counter()
    hist = train(model, chorales, cfg, device="cpu", progress=False)
    wall = time.perf_counter() - t0
    assert len(hist.eval_step) == 6 and jumps[0] == 6000.0 and wall > 6000.0
    assert 0 < hist.seconds < wall - 6000.0 + 1e-6                   # six evaluations ran, none counted
    assert all(0 < a < b for a, b in zip(hist.eval_seconds, hist.eval_seconds[1:])) and hist.eval_seconds[-1] < 1000


def test_peak_memory_grows_with_the_attention_matrix(monkeypatch):
    cfg = C.budget("alibi", "smoke")[0]
    short, long = (C.train_peak_mib("alibi", cfg, L) for L in (128, 512))
    assert long > 4 * short                                           # explicit (L, L) scores: 16x as many
    lstm = C.budget("lstm", "smoke")[0]
    assert C.train_peak_mib("lstm", lstm, 512) < long
    monkeypatch.setenv("MUSICTX_RELATIVE", "chunked")                 # 512 is below CHUNKED_FROM: asked for
    relative = C.train_peak_mib("relative", C.budget("relative", "smoke")[0], 512)
    assert relative < long / 2                                        # the chunked skew keeps no (L, L) scores


def test_sampling_cost_rows():
    cost = C.sampling_cost("relative", C.budget("relative", "smoke")[0], (4, 16, 64), repeats=2)
    assert [c["t"] for c in cost] == [4, 16, 64]
    for c in cost:
        assert c["cached"] > 0 and c["re-encoded"] > 0


def test_plot_nll_vs_time_labels_every_run(rows):
    import matplotlib.pyplot as plt

    ax = C.plot_nll_vs_time({r["name"]: r["history"] for r in rows}, baseline=1.0)
    labels = ax.get_legend_handles_labels()[1]
    assert len(labels) == 3 and labels[0].startswith("lstm (") and "baseline" in labels[2]
    plt.close("all")


def test_paper_profile_gives_the_lstms_two_layers_of_256():
    mcfg, tcfg = C.budget("lstm", "paper")
    assert (mcfg.n_layers, mcfg.n_embd, mcfg.dropout) == (2, 256, 0.3) and tcfg.transpose
    rel, rel_t = C.budget("relative", "paper")
    assert (rel.n_layers, rel.n_embd) == (4, 128) and rel_t.keep_best and rel_t.transpose
    assert C.budget("attention", "paper")[0].n_layers == 1             # bare layers stay one deep


def test_compare_seeds_writes_nll_per_piece(chorales, tmp_path):
    """Several seeds per model, each scored per piece: the pieces add up to the split's NLL, and seeds differ."""
    from musictx_lite.io.data import Splits

    data = Splits(chorales.train, chorales.valid[:3], chorales.test[:2], chorales.source)
    res = C.compare_seeds(data, "smoke", seeds=(0, 1), names=["lstm", "relative"], out_dir=tmp_path,
                          verbose=False, max_steps=4)
    assert res["seeds"] == [0, 1] and res["train_overrides"] == {"max_steps": 4} and len(res["pieces"]["valid"]) == 3
    for name in ("lstm", "relative"):
        runs = res["models"][name]
        assert [r["seed"] for r in runs] == [0, 1] and all(r["steps"] == 4 for r in runs)
        for r in runs:
            assert sum(r["valid_pieces"]) / sum(res["pieces"]["valid"]) == pytest.approx(r["valid_nll"])
            assert len(r["test_pieces"]) == 2
        assert runs[0]["valid_nll"] != runs[1]["valid_nll"]              # another seed, another run
    table = C.format_seeds(res).splitlines()
    assert len(table) == 3 and all(line.split()[1] == "2" for line in table[1:])
    m, lo, hi = C.seed_interval([1.0, 1.2, 1.1])
    assert m == pytest.approx(1.1) and lo < 1.0 < 1.2 < hi


def test_cli_compare_exports_a_results_file(jsb_path, tmp_path, capsys, monkeypatch):
    import itertools
    import json

    from musictx_lite.__main__ import main
    from musictx_lite.study import hub

    # a long run records the commit it started from, not one made while it trained
    commits = itertools.chain(["abc (start)"], itertools.repeat("def (later)"))
    monkeypatch.setattr(hub, "git_commit", lambda: next(commits))
    out = tmp_path / "results.json"
    main(["compare", "--profile", "smoke", "--seeds", "2", "--steps", "2", "--models", "lstm",
          "--out", str(tmp_path / "runs"), "--data", str(jsb_path), "--export", str(out), "--quiet",
          "--note", "two workers"])
    res = json.loads(out.read_text())
    assert res["profile"] == "smoke" and len(res["models"]["lstm"]) == 2 and "device" in res
    assert res["note"] == "two workers"
    assert res["commit"] == "abc (start)"
    assert len(res["models"]["lstm"][0]["valid_pieces"]) == 76 and "wrote" in capsys.readouterr().out


def test_plot_nll_panels_colours_each_group_and_greys_the_rest(rows):
    import matplotlib.pyplot as plt

    hist = {r["name"]: r["history"] for r in rows}
    names = list(hist)
    fig = C.plot_nll_panels(hist, {"first": names[:1], "rest": names[1:]}, baseline=1.0)
    first, rest = fig.axes[:2]
    assert first.get_title() == "first" and len(first.lines) == len(names) + 1      # every run, and the baseline
    labels = first.get_legend_handles_labels()[1]
    assert labels[0].startswith(names[0] + " (") and len(labels) == 2               # only its own run is named
    assert sum(line.get_color() == "0.8" for line in first.lines) == len(names) - 1
    legend = rest.get_legend_handles_labels()[1]
    assert [t.startswith(n + " (") for t, n in zip(legend, names[1:])] == [True] * (len(names) - 1)
    plt.close("all")


def test_seed_ranking_orders_by_mean_and_ties_overlapping_intervals():
    def runs(*nlls):
        return [{"valid_nll": v, "valid_pieces": [2 * v, 4 * v]} for v in nlls]

    res = {"pieces": {"valid": [2, 4]},
           "models": {"wide": runs(0.50, 0.70, 0.60), "best": runs(0.49, 0.51, 0.50),
                      "far": runs(0.90, 0.91, 0.92)}}
    rank = C.seed_ranking(res)
    assert [r["name"] for r in rank] == ["best", "wide", "far"]
    assert [r["tied"] for r in rank] == [True, True, False]           # wide's interval reaches 0.50
    assert rank[0]["mean"] == pytest.approx(0.50) and rank[0]["low"] < 0.49 < 0.51 < rank[0]["high"]
    # the pieces are the mean over seeds, and add up to the model's mean NLL per token
    assert rank[2]["pieces"] == pytest.approx([1.82, 3.64])
    assert rank[2]["pieces"].sum() / 6 == pytest.approx(rank[2]["mean"])


def test_the_shipped_comparison_file_matches_todays_models_and_adds_up():
    """compare.json, shown by chapter 11: made by `compare --export`, every compared model over the same seeds,
    each run's per-piece NLL adding up to its split NLL, and its models still the size the budget gives them."""
    import json

    from musictx_lite.models.registry import n_params
    from musictx_lite.study.hub import HERE

    res = json.loads((HERE / "compare.json").read_text())             # chapter 11 reads it: it must ship
    for key in ("command", "commit", "device", "torch", "date", "profile", "seeds", "pieces", "models"):
        assert key in res, key
    assert res["command"].startswith("python -m musictx_lite compare") and "--export" in res["command"]
    assert list(res["models"]) == list(C.compared()) and len(res["seeds"]) >= 3
    assert (len(res["pieces"]["valid"]), len(res["pieces"]["test"])) == (76, 77)      # the official split
    for name, runs in res["models"].items():
        assert [r["seed"] for r in runs] == res["seeds"], name
        params = n_params(build_model(name, C.budget(name, res["profile"])[0]))
        for r in runs:
            for split in ("valid", "test"):
                nll = sum(r[f"{split}_pieces"]) / sum(res["pieces"][split])
                assert nll == pytest.approx(r[f"{split}_nll"], rel=1e-9), (name, split)
            assert r["steps"] == res["train_overrides"]["max_steps"] and 0 < r["best_step"] <= r["steps"]
            assert r["params"] == params, name


def test_a_ledger_keeps_each_finished_run_and_takes_it_back(chorales, tmp_path, monkeypatch):
    """compare_seeds with a ledger writes each run at once; a second call trains nothing and returns the same
    scores; a ledger file of another experiment (here: another budget) is refused, not mixed in."""
    import json

    from musictx_lite.io.data import Splits

    data = Splits(chorales.train, chorales.valid[:3], chorales.test[:2], chorales.source)
    ledger = tmp_path / "ledger"
    first = C.compare_seeds(data, "smoke", seeds=(0, 1), names=["lstm"], out_dir=tmp_path / "runs",
                            verbose=False, ledger=ledger, max_steps=3)
    files = sorted(p.name for p in ledger.iterdir())
    assert files == ["lstm.seed-0.json", "lstm.seed-1.json"]
    saved = json.loads((ledger / "lstm.seed-1.json").read_text())
    assert saved["key"]["train_config"]["seed"] == 1 and saved["key"]["train_config"]["max_steps"] == 3
    assert saved["key"]["code"] == C.code_fingerprint() and "commit" in saved["made"]
    assert saved["made"]["precision"] == "float32"                    # the smoke budget asks for no bf16

    def no_training(*args, **kw):
        raise AssertionError("a run in the ledger was trained again")

    monkeypatch.setattr(C, "train_compared", no_training)
    again = C.compare_seeds(data, "smoke", seeds=(0, 1), names=["lstm"], verbose=False, ledger=ledger,
                            max_steps=3)
    for a, b in zip(first["models"]["lstm"], again["models"]["lstm"]):
        assert a["valid_pieces"] == b["valid_pieces"] and a["test_nll"] == b["test_nll"] and a["seed"] == b["seed"]
    with pytest.raises(ValueError, match="another experiment .*train_config"):
        C.compare_seeds(data, "smoke", seeds=(0,), names=["lstm"], verbose=False, ledger=ledger, max_steps=4)
    # what a ledger still filling shows: its runs by model and seed, as trained, claims not counted
    (ledger / "fnet-conv.seed-0.claim").write_text("host 1")
    progress = C.ledger_runs(ledger)
    assert list(progress) == ["lstm"] and [r["seed"] for r in progress["lstm"]] == [0, 1]
    assert [r["valid_pieces"] for r in progress["lstm"]] == [r["valid_pieces"] for r in first["models"]["lstm"]]
    other = json.loads((ledger / "lstm.seed-1.json").read_text())
    other["key"]["train_config"]["max_steps"] = 4                         # a run of another budget
    (ledger / "fnet-conv.seed-0.json").write_text(json.dumps(other))
    with pytest.raises(ValueError, match="lstm.seed-0.json and fnet-conv.seed-0.json belong to different comparisons"):
        C.ledger_runs(ledger)
    (ledger / "lstm.seed-0.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a ledger file"):
        C.compare_seeds(data, "smoke", seeds=(0,), names=["lstm"], verbose=False, ledger=ledger, max_steps=3)


def test_the_code_fingerprint_ignores_docstrings_and_comments_but_not_code(tmp_path):
    import shutil
    from pathlib import Path

    root, src = tmp_path / "pkg", Path(C.__file__).resolve().parents[1]
    for part in C.RUN_CODE:                                            # a copy of the code a run executes
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        if (src / part).is_dir():
            shutil.copytree(src / part, root / part)
        else:
            shutil.copy(src / part, root / part)
    before = C.code_fingerprint(root)
    assert before == C.code_fingerprint()                              # the copy is the package's code
    f = root / "engine" / "training.py"
    text = f.read_text()
    f.write_text(text.replace('"""Linear warmup', '"""A reworded docstring. Linear warmup', 1) + "\n# a comment\n")
    assert C.code_fingerprint(root) == before
    f.write_text(text.replace("(step + 1) / cfg.warmup_steps", "step / cfg.warmup_steps", 1))
    assert C.code_fingerprint(root) != before


def test_the_code_fingerprint_is_the_same_on_every_python():
    """Python 3.12 gives every function an empty ``type_params``, and 3.13 changed ``ast.dump``: a ledger
    filled on two machines (a GPU's Python, a laptop's) must still see one code."""
    import ast

    tree = ast.parse("def f(x, y=2):\n    return x @ y\nclass A(B):\n    pass\n")
    before = C._dump(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            node.type_params = []                                        # as 3.12 parses it
            node._fields = node._fields + ("type_params",)
    assert C._dump(tree) == before
    assert before.startswith("Module(body=[FunctionDef(name='f', args=arguments(args=[arg(arg='x')")
    tree.body[0].body[0].value.op = ast.Add()                           # a change of code is seen
    assert C._dump(tree) != before


def test_cli_compare_fills_a_ledger_and_exports_where_its_runs_were_made(jsb_path, tmp_path, capsys):
    import json

    from musictx_lite.__main__ import main

    ledger, out = tmp_path / "ledger", tmp_path / "results.json"
    common = ["compare", "--profile", "smoke", "--steps", "2", "--models", "lstm", "--out", str(tmp_path / "runs"),
              "--data", str(jsb_path), "--ledger", str(ledger), "--quiet"]
    main(common + ["--seeds", "1"])                                    # one machine's session: seed 0
    assert [p.name for p in ledger.iterdir()] == ["lstm.seed-0.json"]
    main(common + ["--seeds", "2", "--export", str(out)])             # the next: seed 1, then the file
    assert "from the ledger" in capsys.readouterr().out
    res = json.loads(out.read_text())
    assert [r["seed"] for r in res["models"]["lstm"]] == [0, 1]
    for r in res["models"]["lstm"]:                                   # each run: where and in what it trained
        assert set(r["made"]) == {"device", "precision", "date"} and r["made"]["precision"] == "float32"
    assert res["ledger"]["runs"] == 2 and res["ledger"]["code"] == C.code_fingerprint()
    assert res["ledger"]["first"] <= res["ledger"]["last"] and len(res["ledger"]["device"]) == 1


def test_processes_sharing_a_ledger_claim_each_run_once(chorales, tmp_path):
    """claim: the first process to claim a run trains it; a run held by a live process (here, this test's
    parent) is skipped, one held by a process that died on this machine is taken over, and a claim from
    another machine is left alone. A written run's claim is removed."""
    import os
    import socket
    import subprocess
    import sys

    from musictx_lite.io.data import Splits

    ledger, host = tmp_path / "ledger", socket.gethostname()
    assert C.claim(ledger, "lstm", 0) and not C.claim(ledger, "lstm", 0)          # ours now, not twice
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (ledger / "lstm.seed-1.claim").write_text(f"{host} {dead}")
    assert C.claim(ledger, "lstm", 1)                                               # its process is gone
    (ledger / "lstm.seed-2.claim").write_text(f"another-machine {os.getpid()}")
    assert not C.claim(ledger, "lstm", 2)

    data = Splits(chorales.train, chorales.valid[:2], chorales.test[:2], chorales.source)
    for f in ledger.iterdir():
        f.unlink()
    (ledger / "lstm.seed-0.claim").write_text(f"{host} {os.getppid()}")          # a live process holds seed 0
    res = C.compare_seeds(data, "smoke", seeds=(0, 1), names=["lstm"], verbose=False, ledger=ledger,
                          claims=True, max_steps=2)
    assert [r["seed"] for r in res["models"]["lstm"]] == [1]
    assert sorted(p.name for p in ledger.iterdir()) == ["lstm.seed-0.claim", "lstm.seed-1.json"]


def test_cli_compare_exports_only_a_complete_ledger(jsb_path, tmp_path, capsys):
    import os
    import socket

    from musictx_lite.__main__ import main

    ledger = tmp_path / "ledger"
    ledger.mkdir()
    (ledger / "lstm.seed-1.claim").write_text(f"{socket.gethostname()} {os.getppid()}")
    args = ["compare", "--profile", "smoke", "--steps", "2", "--models", "lstm", "--seeds", "2", "--out",
            str(tmp_path / "runs"), "--data", str(jsb_path), "--ledger", str(ledger), "--claim", "--quiet",
            "--export", str(tmp_path / "r.json")]
    with pytest.raises(SystemExit, match="error: not exported: 1 run"):
        main(args)
    assert "held by other processes: lstm seed 1" in capsys.readouterr().out
    assert (ledger / "lstm.seed-0.json").exists() and not (tmp_path / "r.json").exists()
    with pytest.raises(SystemExit, match="error: --claim shares the runs of a --ledger"):
        main([a for a in args if a not in ("--ledger", str(ledger))])


def test_the_committed_ledger_holds_one_comparison():
    """results/compare-3000, the comparison at 3,000 steps filled run by run: every file is the run its name
    says, of one budget, data and code, and its pieces add up to its NLLs."""
    import json
    from pathlib import Path

    ledger = Path(__file__).resolve().parents[2] / "results" / "compare-3000"
    files = sorted(ledger.glob("*.seed-*.json"))
    if not files:
        pytest.skip("no committed ledger")
    from musictx_lite.study.hub import HERE

    runs = [json.loads(f.read_text()) for f in files]
    tokens = json.loads((HERE / "compare.json").read_text())["pieces"]     # per piece of the official split
    for f, run in zip(files, runs):
        name, seed = f.name[:-len(".json")].rsplit(".seed-", 1)
        assert run["key"]["model"] == name and run["key"]["train_config"]["seed"] == run["seed"] == int(seed)
        assert run["key"]["train_config"]["max_steps"] == 3000 and run["steps"] <= 3000 and run["made"]["date"]
        for split in ("valid", "test"):
            assert sum(run[f"{split}_pieces"]) / sum(tokens[split]) == pytest.approx(run[f"{split}_nll"], rel=1e-9)
        assert name in C.compared()
    same = [{k: v for k, v in r["key"].items() if k not in ("model", "model_config")} for r in runs]
    for s in same:
        s["train_config"] = {k: v for k, v in s["train_config"].items() if k not in ("seed",)}
    assert all(s == same[0] for s in same[1:])         # one comparison: one training budget, data and code
    assert sum(len(r) for r in C.ledger_runs(ledger).values()) == len(files)


def test_seed_spreads_are_each_models_highest_minus_lowest_seed():
    from musictx_lite.study.compare import seed_spreads

    res = {"models": {"a": [{"valid_nll": 1.0}, {"valid_nll": 1.25}, {"valid_nll": 1.1}],
                      "b": [{"valid_nll": 2.0}]}}                    # one seed: no spread
    assert seed_spreads(res) == {"a": pytest.approx(0.25)}
    shipped = seed_spreads()                                          # chapter 11's committed file
    assert {"shaw", "rope", "alibi", "learned-positions"} <= set(shipped)
    assert all(v >= 0 for v in shipped.values())
