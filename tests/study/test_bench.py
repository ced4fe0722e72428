"""The benchmark's memory rules and the committed measurement of relative attention (chapters 8 and 9)."""
import math

import pytest
import torch

from musictx_lite.models.local import local_relative_attention
from musictx_lite.study import bench


def test_predicted_bytes_follows_the_measured_power_law():
    quad = [(100, 3e4), (200, 12e4)]                               # m = 3 L^2
    assert bench.predicted_bytes(quad, 800) == pytest.approx(3 * 800 ** 2)
    lin = [(100, 500.0), (400, 2000.0)]
    assert bench.predicted_bytes(lin, 1600) == pytest.approx(8000)
    flat = [(100, 1000.0), (200, 1000.0)]                           # at least linear: the inputs grow
    assert bench.predicted_bytes(flat, 400) == pytest.approx(2000)


def test_rows_predicted_over_the_allowance_are_not_run_and_the_others_are():
    rows = bench.bench_attention((64, 128), n_embd=32, n_heads=4, repeats=1, names=["direct Shaw", "SDPA"],
                                 max_gib=0.5 / 1024)                # 0.5 MiB
    by = {(r["impl"], r["L"]): r for r in rows}
    assert by["SDPA", 128]["fits"] and by["SDPA", 128]["ms"] > 0
    shaw = by["direct Shaw", 128]
    assert not shaw["fits"] and math.isnan(shaw["ms"]) and shaw["MiB"] > 0.5
    assert "not run (MiB predicted from measured growth)" in bench.format_table(rows)


def test_a_cuda_only_implementation_is_refused_on_a_cpu():
    assert bench.implementations()["FlexAttention"].cuda_only
    assert "FlexAttention" not in {r["impl"] for r in bench.bench_attention((16,), n_embd=32, repeats=1, chapter=8)}
    with pytest.raises(ValueError, match="FlexAttention runs on a CUDA GPU only"):
        bench.bench_attention((16,), n_embd=32, names=["FlexAttention"])


def test_longest_length_brackets_the_allowance():
    allowance = 4 / 1024                                            # 4 MiB
    r = bench.longest_length("direct Shaw", allowance, n_embd=32, n_heads=4, start=16, multiple=16, max_length=512)
    assert not r["capped"] and r["MiB"] <= 4 and r["next"] - r["L"] <= 16
    assert dict(r["runs"])[r["L"]] == r["MiB"]
    over = dict(r["runs"])[r["next"]]
    assert over is None or over > 4                                 # measured over, or predicted over and not run
    c = bench.longest_length("chunked skew", allowance, n_embd=32, n_heads=4, start=16, multiple=16, max_length=256)
    assert c["capped"] and c["L"] == 256 and c["next"] is None and c["predicted"] > 256
    with pytest.raises(ValueError, match="does not fit"):
        bench.longest_length("direct Shaw", 1e-6, n_embd=32, n_heads=4, start=64)


def test_the_committed_measurement_is_what_its_script_wrote():
    from scripts.bench_relative import LONGEST, TABLE, markdown

    rec, md = bench.measured("bench-relative-cpu")
    assert md == markdown(rec) + "\n"
    assert rec["command"].startswith("python -m scripts.bench_relative") and rec["commit"][:12] in md
    assert {r["impl"] for r in rec["bench"]["rows"]} == set(TABLE)
    assert [r["impl"] for r in rec["longest"]["rows"]] == LONGEST
    for r in rec["longest"]["rows"]:                                # each search's result is one of its runs
        assert dict(map(tuple, r["runs"]))[r["L"]] == pytest.approx(r["MiB"])
        assert r["MiB"] <= rec["longest"]["max_gib"] * 1024


@pytest.mark.parametrize("T,N,step", [(100, 8, 8), (100, 8, 24), (64, 16, 1), (37, 4, 1000)])
def test_local_attention_in_steps_equals_all_blocks_at_once(T, N, step):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, T, 8, generator=g, dtype=torch.double) for _ in range(3))
    E = torch.randn(3, 2 * N, 8, generator=g, dtype=torch.double)
    y, w = local_relative_attention(q, k, v, E, N, need_weights=True, step=step)
    y_all, w_all = local_relative_attention(q, k, v, E, N, need_weights=True, step=10**6)
    torch.testing.assert_close(y, y_all, rtol=0, atol=1e-12)
    torch.testing.assert_close(w, w_all, rtol=0, atol=1e-12)


def test_bench_harmonise_times_each_way_of_chapter_12(capsys):
    from musictx_lite.__main__ import main
    from musictx_lite.engine.harmonise import DEFAULT_CANDIDATES, DEFAULT_RULES
    from musictx_lite.study.bench import bench_harmonise, format_harmonise

    rows = bench_harmonise(bars=1, profile="smoke", repeats=1, n_iter=2)
    assert [r["model"] for r in rows] == ["relative", "harmoniser", "coconet"]
    assert all(r["seconds"] > 0 and r["bars"] == 1 and r["params"] > 0 for r in rows)
    assert rows[2]["how"] == "2 Gibbs steps"
    assert rows[0]["how"] == f"token by token, cached; rules {DEFAULT_RULES}, best of {DEFAULT_CANDIDATES}"
    ruled = bench_harmonise(names=("relative",), bars=1, profile="smoke", repeats=1, rules="all", candidates=3)
    assert ruled[0]["how"] == "token by token, cached; rules all, best of 3"
    text = format_harmonise(rows)
    assert text.splitlines()[-1] == "(1 bar of 4/4 harmonised, random weights, the best of the repeats)"
    main(["bench", "harmonise", "--bars", "1", "--profile", "smoke", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "harmonising, profile smoke sizes" in out and "64 Gibbs steps" in out
