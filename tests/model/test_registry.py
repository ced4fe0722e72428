"""One record per model: a throwaway model, registered with one line, reaches every consumer.

``PastMean`` below stands for a later chapter's module: a causal mixer without
attention (each token takes the mean of itself and every earlier token). The
fixture adds its record to ``models.MODELS`` and nothing else; the tests check
that the profiles, the comparison, the benchmark, the command line, the cache
test and the causality probes all pick it up.
"""
from dataclasses import dataclass

import pytest
import test_cache
import test_probes
import torch
import torch.nn as nn

from musictx_lite import build_model
from musictx_lite.__main__ import build_parser
from musictx_lite.engine.profiles import PROFILES
from musictx_lite.models import MODELS, Spec, Timed
from musictx_lite.models.blocks import block_decoder
from musictx_lite.models.config import ModelConfig
from musictx_lite.study import bench
from musictx_lite.study import compare as C

NAME, IMPL = "past-mean", "past mean"


@dataclass
class SumCache:
    total: torch.Tensor | None = None                                # (B, 1, C): the inputs so far, summed
    seen: int = 0


class PastMean(nn.Module):
    """y_t = W (x_1 + ... + x_t) / t: causal, and it samples with a cache (the running sum)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def new_cache(self) -> SumCache:
        return SumCache()

    def forward(self, x: torch.Tensor, cache: SumCache | None = None) -> torch.Tensor:
        s = x.cumsum(1)                                              # (B, T, C)
        n = torch.arange(1, x.shape[1] + 1, device=x.device)        # (T,)
        if cache is not None:
            if cache.total is not None:
                s, n = s + cache.total, n + cache.seen
            cache.total, cache.seen = s[:, -1:], int(n[-1])
        return self.proj(s / n[:, None])                             # (B, T, C)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(MODELS, NAME, Spec(lambda cfg: block_decoder(cfg, PastMean), 12, "decoder",
                                           timed={IMPL: Timed(PastMean)}))
    return NAME


def test_the_profiles_size_it_by_its_class(toy):
    for p in PROFILES.values():
        assert p.model_config(toy) == p.model_config("relative"), p.name
        assert p.train_config(toy) == p.train_config("relative"), p.name


def test_the_comparison_trains_it_at_the_common_budget(toy):
    assert C.compared()[toy] == 12 and list(C.compared())[-1] == toy     # the last chapter comes last
    assert toy not in C.left_out() and toy not in C.one_layer()
    for p in PROFILES.values():
        assert C.budget(toy, p) == C.budget("relative", p), p.name


def test_the_benchmark_times_its_mixer(toy):
    impls = bench.implementations()
    assert list(impls)[-1] == IMPL and impls[IMPL].chapter == 12
    (row,) = bench.bench_attention(lengths=(64,), n_embd=32, repeats=1, names=[IMPL])
    assert row["impl"] == IMPL and row["fits"] and row["ms"] > 0
    assert IMPL in [r["impl"] for r in bench.bench_attention(lengths=(16,), n_embd=32, repeats=1, chapter=12)]
    assert IMPL not in [r["impl"] for r in bench.bench_attention(lengths=(16,), n_embd=32, repeats=1, chapter=4)]


def test_the_command_line_offers_it(toy):
    ap, _ = build_parser()
    assert ap.parse_args(["train", "--model", toy, "--out", "x"]).model == toy
    assert ap.parse_args(["compare", "--out", "x", "--models", toy]).models == [toy]
    assert ap.parse_args(["bench", "attention", "--impl", IMPL]).impl == [IMPL]


def test_the_cache_and_causality_tests_cover_it(toy):
    assert build_model(toy, test_cache.CFG).cacheable
    test_cache.test_cached_logits_equal_re_encoding_at_every_step(toy)
    test_probes.test_perturbation_probe_on_every_next_token_model(toy)
    test_probes.test_gradient_probe_on_every_next_token_model(toy)
    test_probes.test_every_gpu_profile_model_builds_and_takes_a_step_on_cpu(toy)


def test_a_leaky_model_fails_the_probes(monkeypatch):
    """The probes the toy passes can fail: the same record with a mixer that sees the future."""

    class FutureMean(PastMean):
        def new_cache(self):
            return None

        def forward(self, x, cache=None):
            return self.proj(x.mean(1, keepdim=True).expand_as(x))  # every token sees the whole sequence

    monkeypatch.setitem(MODELS, NAME, Spec(lambda cfg: block_decoder(cfg, FutureMean), 12, "decoder"))
    with pytest.raises(AssertionError):
        test_probes.test_perturbation_probe_on_every_next_token_model(NAME)
    with pytest.raises(AssertionError):
        test_probes.test_gradient_probe_on_every_next_token_model(NAME)
