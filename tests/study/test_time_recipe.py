"""scripts/time_recipe.py: the recipe's seconds per step on this device, projected and scaled to a T4."""
import json

import pytest

from scripts import time_recipe as TR


@pytest.mark.parametrize("name, peak", [("NVIDIA H100 80GB HBM3", 989), ("Tesla T4", 65),
                                        ("NVIDIA A100-SXM4-40GB", 312), ("NVIDIA H200", 989), ("NVIDIA L4", 121),
                                        ("cpu: AMD EPYC, 2 cores", None)])
def test_the_peak_of_a_gpu_is_read_from_its_name(name, peak):
    assert TR.peak_of(name) == peak


def test_timing_file_projects_each_model_to_its_budget(jsb_path, tmp_path, capsys):
    from musictx_lite.engine.profiles import t4_minutes
    from musictx_lite.study.reproduce import JSB_MODELS

    out = tmp_path / "timing.json"
    assert TR.main(["--steps", "2", "--profile", "smoke", "--data", str(jsb_path), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert [r["model"] for r in res["rows"]] == [n for n, _ in JSB_MODELS]
    assert res["command"].startswith("python -m scripts.time_recipe --steps 2") and res["commit"]
    assert res["peak_tflops"] is None                                   # a CPU: nothing to scale
    for r in res["rows"]:
        assert r["steps"] == 2 and r["s_per_step"] == pytest.approx(r["seconds"] / 2, rel=0.01)
        assert r["budget_minutes_here"] == pytest.approx(r["s_per_step"] * r["budget_steps"] / 60)
        assert r["t4_minutes_scaled"] is None and r["t4_minutes_cost_model"] == t4_minutes(r["model"], "smoke")
        assert r["t4_minutes_from_step"] is None
    assert "wrote" in capsys.readouterr().out


def test_a_shipped_timing_adds_up():
    """recipe-timing.json, which chapter 11 prints where a release ships it: the recipe's models at the paper
    profile's budget, each projection its rate times the budget, each T4 figure scaled by the peaks' ratio."""
    from musictx_lite.study.compare import budget
    from musictx_lite.study.hub import HERE
    from musictx_lite.study.reproduce import JSB_MODELS

    path = HERE / "recipe-timing.json"
    if not path.exists():
        pytest.skip("this release ships no GPU timing (python -m scripts.time_recipe makes it)")
    res = json.loads(path.read_text())
    assert res["profile"] == "paper" and res["command"].startswith("python -m scripts.time_recipe")
    assert [r["model"] for r in res["rows"]] == [n for n, _ in JSB_MODELS]
    for r in res["rows"]:
        assert r["budget_steps"] == budget(r["model"], "paper")[1].max_steps
        assert r["budget_minutes_here"] == pytest.approx(r["seconds"] / r["steps"] * r["budget_steps"] / 60)
        if res["peak_tflops"]:
            assert r["t4_minutes_scaled"] == pytest.approx(r["budget_minutes_here"] * res["peak_tflops"]
                                                           / res["t4_peak_tflops"])


def test_a_t4_estimate_from_a_measured_step_replaces_the_cost_models_fixed_cost():
    from musictx_lite.engine.profiles import T4_FLOPS, T4_STEP_S, get_profile, t4_minutes, t4_minutes_from, train_flops

    for name in ("relative", "lstm"):
        assert t4_minutes_from(name, T4_STEP_S, "paper") == pytest.approx(t4_minutes(name, "paper"))
        steps = get_profile("paper").train_config(name).max_steps
        assert t4_minutes_from(name, 0.02, "paper") == pytest.approx(
            (train_flops(name, "paper") / T4_FLOPS + 0.02 * steps) / 60)
