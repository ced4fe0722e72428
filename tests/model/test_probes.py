"""The causality probes of ``musictx_lite.models.probes``, run over every registered model, and the profiles.

A model that a later chapter registers in ``models.MODELS`` is covered here
without anyone editing this file.
"""
import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from musictx_lite import MODELS, ModelConfig, build_model
from musictx_lite.engine.profiles import PROFILES, SIZES, Profile
from musictx_lite.engine.training import TrainConfig
from musictx_lite.models import probes
from musictx_lite.models.attention import CausalHead, Head, MultiHeadAttention
from musictx_lite.models.blocks import Block
from musictx_lite.models.tasks import EVENTS, NEXT_TOKEN

CFG = ModelConfig(n_embd=32, n_heads=4, n_layers=2, context=32)
NEXT = sorted(n for n in MODELS if build_model(n, CFG).task in (NEXT_TOKEN, EVENTS))   # EVENTS: chapter 13
LEAKS = {"attention-unmasked", "fnet"}          # chapter 3's deliberate leak, and FNet's (chapter 10)
ROUNDING = {"fnet-conv"}     # causal up to float rounding: an FFT convolution's future terms cancel to ~1e-9


def test_every_model_but_the_fill_and_harmonise_models_is_a_next_token_model():
    assert set(MODELS) - set(NEXT) == {"fill", "harmoniser", "coconet"}          # chapter 12: a melody is given


@pytest.mark.parametrize("name", NEXT)
def test_perturbation_probe_on_every_next_token_model(name):
    torch.manual_seed(0)
    model = build_model(name, CFG)
    past, future = probes.future_effect(model, T=24, t=10)
    assert future > 1e-4                                  # the probe can see a change at all
    if name in LEAKS:
        assert past > 1e-3 and not probes.is_causal(model)
    else:
        assert past <= 1e-5 and probes.is_causal(model)


@pytest.mark.parametrize("name", NEXT)
def test_gradient_probe_on_every_next_token_model(name):
    """d logits_i / d embedding_j is zero for every j > i (nonzero on and below the diagonal). Every logit of
    position i is a linear read of the same last hidden state, so the first 16 of them show what it depends
    on: a backward pass per logit of a piano model's 390 would take half a minute."""
    torch.manual_seed(0)
    model = build_model(name, CFG).eval()
    emb = model.tok_emb if hasattr(model, "tok_emb") else model.emb

    class FromEmbeddings(nn.Module):                   # the model with its token embedding replaced by inputs
        def forward(self, e):
            saved = emb.forward
            emb.forward = lambda idx: e
            try:
                return model(torch.zeros(e.shape[:2], dtype=torch.long))[..., :16]    # (1, T, 16)
            finally:
                emb.forward = saved

    wrapper = FromEmbeddings()
    wrapper.dummy = nn.Linear(CFG.n_embd, 1)           # gradient_dependency reads C from a 2-d parameter
    G = probes.gradient_dependency(wrapper, T=10)
    future = torch.ones(10, 10, dtype=torch.bool).triu(1)
    if name in LEAKS:
        assert (G[future] > 0).any()
    elif name in ROUNDING:
        assert (G[future] <= 1e-6 * G.max()).all() and (G.diagonal() > 0).all()
    else:
        assert (G[future] == 0).all() and (G.diagonal() > 0).all()


@pytest.mark.parametrize("layer", [lambda: CausalHead(32, 8), lambda: MultiHeadAttention(CFG),
                                   lambda: Block(CFG)])
def test_gradient_probe_on_layers(layer):
    torch.manual_seed(0)
    G = probes.gradient_dependency(layer(), T=9)
    past = torch.ones(9, 9, dtype=torch.bool).tril()
    assert (G[~past] == 0).all() and (G[past] > 0).all()
    G_full = probes.gradient_dependency(Head(32, 8), T=9)
    assert (G_full > 0).all()


def test_gradient_probe_is_the_norm_of_each_jacobian_block():
    """G[i, j] is the Frobenius norm of the whole (C', C) block d out_i / d x_j, not of a projection."""
    torch.manual_seed(0)
    layer, T = MultiHeadAttention(CFG).eval(), 7
    G = probes.gradient_dependency(layer, T=T, seed=3)
    x = torch.randn(1, T, CFG.n_embd, generator=torch.Generator().manual_seed(3))  # the probe's input
    J = torch.autograd.functional.jacobian(lambda v: layer(v)[0], x)[:, :, 0]    # (T, C', T, C)
    torch.testing.assert_close(G, J.pow(2).sum((1, 3)).sqrt(), rtol=1e-4, atol=1e-6)


def test_profiles_size_every_class_and_every_model():
    assert {spec.size for spec in MODELS.values()} == set(SIZES)       # no class without a model
    for p in PROFILES.values():
        assert set(p.sizes) == set(SIZES), p.name
        for name in MODELS:
            assert isinstance(p.model_config(name), ModelConfig) and isinstance(p.train_config(name), TrainConfig)


def test_unknown_profile_keys_and_models_are_errors():
    with pytest.raises(ValueError, match=r"unknown settings \['n_embed'\]"):
        Profile("x", model={}, train=TrainConfig(), sizes={"lstm": {"n_embed": 64}})
    with pytest.raises(ValueError, match=r"unknown size classes \['lstms'\]"):
        Profile("x", model={}, train=TrainConfig(), sizes={"lstms": {}})
    with pytest.raises(ValueError, match="unknown model settings"):
        Profile("x", model={"heads": 2}, train=TrainConfig())
    with pytest.raises(ValueError, match="unknown model 'gpt-7'"):
        PROFILES["cpu"].model_config("gpt-7")
    with pytest.raises(ValueError, match="unknown model"):
        PROFILES["smoke"].train_config("transfomer")
    with pytest.raises(ValueError, match="has no entry for size class 'lstm'"):
        Profile("x", model={}, train=TrainConfig(), sizes={"decoder": {}}).model_config("lstm")
    assert PROFILES["cpu"].model_config("transformer").n_embd == 64        # an override that applies
    assert PROFILES["cpu"].train_config("fill").batch_size == 256


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_gpu_profile_model_builds_and_takes_a_step_on_cpu(name):
    """The gpu profile's sizes, one forward and backward pass with a batch of 2 on the CPU."""
    P = PROFILES["gpu"]
    torch.manual_seed(0)
    model = build_model(name, P.model_config(name))
    pieces = _performances() if model.task is EVENTS else _pieces()
    batches = model.task.sampler(pieces, model.cfg.context, seed=0)
    x, y = batches.batch(2)
    assert int(x.max()) < model.cfg.vocab_size
    from musictx_lite.models.tasks import token_nll

    loss = token_nll(model, x, y) / (y != 0).sum()
    loss.backward()
    chance = math.log(model.cfg.vocab_size)          # at init, near log(V): log(54) = 3.99, log(390) = 5.97
    assert torch.isfinite(loss) and 0.6 * chance < loss.item() < 1.5 * chance

    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


_PIECES = []


def _pieces():
    if not _PIECES:
        from musictx_lite import load_chorales

        _PIECES.extend(load_chorales().train[:8])
    return _PIECES


def _performances():
    """Two random performances of 1,200 notes each (longer than chapter 13's 2,048-event context)."""
    from musictx_lite.io.performance import Performance, encode

    rng, out = np.random.default_rng(0), []
    for i in range(2):
        start = np.sort(rng.uniform(0, 300, 1200))
        notes = np.column_stack([start, start + rng.uniform(0.05, 1, 1200), rng.integers(36, 96, 1200),
                                 rng.integers(20, 120, 1200)])
        out.append(Performance(f"random {i}", notes, encode(notes), piece=f"random {i}"))
    return out
