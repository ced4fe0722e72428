"""Chapter 10: FNet's Fourier sublayer, its leak, and the two causal fixes."""
import math

import numpy as np
import pytest
import torch

from musictx_lite import ModelConfig, TrainConfig, build_model, train
from musictx_lite.models.attention import recording
from musictx_lite.models.blocks import Block
from musictx_lite.models.fnet import (
    CausalFourierMatrix,
    CausalLongConv,
    FourierCache,
    FourierMixer,
    causal_conv_direct,
    causal_fft_conv,
    dft_real,
    hidden_fourier,
)
from musictx_lite.models.probes import future_effect, gradient_dependency, is_causal

CFG = ModelConfig(n_embd=16, n_heads=2, n_layers=2, context=24)
FIXES = [CausalFourierMatrix, CausalLongConv]


def test_fourier_mixer_is_fft2_over_sequence_and_hidden_never_batch():
    torch.manual_seed(0)
    x = torch.randn(3, 10, 16)
    y = FourierMixer(CFG)(x)
    torch.testing.assert_close(y, torch.fft.fft2(x, dim=(-2, -1)).real)
    # the definition: Re(D_T X D_C), D_n[j, k] = exp(-2 pi i j k / n), one sample at a time
    D = lambda n: torch.exp(-2j * math.pi * torch.outer(torch.arange(n), torch.arange(n)) / n)
    for b in range(3):
        ref = (D(10).to(torch.complex128) @ x[b].double().to(torch.complex128) @ D(16).to(torch.complex128)).real
        torch.testing.assert_close(y[b].double(), ref, atol=1e-4, rtol=1e-5)
    # samples never mix: changing one leaves the others alone
    x2 = x.clone()
    x2[1] += 1.0
    y2 = FourierMixer(CFG)(x2)
    torch.testing.assert_close(y2[[0, 2]], y[[0, 2]])
    assert not torch.allclose(y2[1], y[1])
    assert list(FourierMixer(CFG).parameters()) == [] and FourierMixer(CFG).new_cache() is None


def test_every_mixer_records_no_weights_and_keeps_the_shape():
    torch.manual_seed(0)
    x = torch.randn(2, 24, 16)
    for cls in [FourierMixer] + FIXES:
        mixer = cls(CFG)
        with recording() as ws:
            y = mixer(x)
            yb = Block(CFG, mixer)(x)
        assert y.shape == yb.shape == x.shape and ws == [], cls.__name__


def test_the_fourier_mixer_leaks_and_depends_on_the_length():
    torch.manual_seed(0)
    G = gradient_dependency(FourierMixer(CFG), T=8, n_embd=16)
    future = torch.ones(8, 8, dtype=torch.bool).triu(1)
    assert (G[future] > 1e-3).float().mean() > 0.5                     # most outputs read most future tokens
    assert (G[0, 1:] > 1e-3).all()                                     # the first output reads every one
    x = torch.randn(1, 12, 16)
    assert not torch.allclose(FourierMixer(CFG)(x[:, :6])[:, :6], FourierMixer(CFG)(x)[:, :6])


def test_the_gradient_probe_sees_every_feature_of_the_fourier_mix():
    """|d y_i / d x_j|^2 = sum_{c,k} cos^2(2 pi (ij/T + ck/C)) = C^2 / 2 + C cos(4 pi ij / T), C even:
    never zero. (Differentiating the sum of y_i over its features would keep feature k = 0 only,
    C |cos(2 pi ij / T)|, zero wherever 4 ij / T is odd.)"""
    T, C = 8, 16
    G = gradient_dependency(FourierMixer(CFG), T=T, n_embd=C).double()
    ij = torch.outer(torch.arange(T), torch.arange(T)).double()
    torch.testing.assert_close(G, (C ** 2 / 2 + C * torch.cos(4 * math.pi * ij / T)).sqrt(),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("B,T,C,K", [(1, 1, 1, 1), (2, 5, 3, 5), (3, 16, 8, 16), (1, 33, 4, 16),
                                     (2, 7, 5, 40), (1, 64, 2, 64)])
def test_fft_conv_equals_direct_conv(B, T, C, K):
    torch.manual_seed(B * T * C)
    u, h = torch.randn(B, T, C), torch.randn(C, K)
    torch.testing.assert_close(causal_fft_conv(u, h), causal_conv_direct(u, h), atol=1e-4, rtol=1e-4)


def test_direct_conv_is_the_definition():
    torch.manual_seed(0)
    u, h = torch.randn(2, 9, 3), torch.randn(3, 4)
    y = causal_conv_direct(u, h)
    for t in range(9):
        ref = sum(h[:, t - s] * u[:, s] for s in range(max(0, t - 3), t + 1))
        torch.testing.assert_close(y[:, t], ref)


def test_padding_to_T_instead_of_2T_would_wrap_the_future_into_the_past():
    """The check that the 2T padding is needed: a circular convolution of length T is not causal."""
    torch.manual_seed(0)
    T = 8
    u, h = torch.randn(1, T, 2), torch.randn(2, T)
    circular = torch.fft.irfft(torch.fft.rfft(u.transpose(1, 2), n=T) * torch.fft.rfft(h, n=T), n=T)
    assert not torch.allclose(circular.transpose(1, 2), causal_conv_direct(u, h), atol=1e-3)


@pytest.mark.parametrize("cls", FIXES)
def test_the_fixes_are_causal(cls):
    torch.manual_seed(0)
    G = gradient_dependency(cls(CFG), T=12, n_embd=16)
    future = torch.ones(12, 12, dtype=torch.bool).triu(1)
    assert G[future].max() <= 1e-6 * G.max() and (G.diagonal() > 0).all()


@pytest.mark.parametrize("name,leaks", [("fnet", True), ("fnet-matrix", False), ("fnet-conv", False)])
def test_future_effect_finds_the_leak_and_only_it(name, leaks):
    torch.manual_seed(0)
    model = build_model(name, CFG)
    past, future = future_effect(model, T=24, t=10)
    assert future > 1e-3
    assert (past > 1e-2) if leaks else (past < 1e-5)
    assert is_causal(model) is not leaks


def test_the_matrix_starts_from_the_dft_and_refuses_long_inputs():
    m = CausalFourierMatrix(CFG)
    torch.testing.assert_close(m.M * math.sqrt(24 * 16), dft_real(24))
    assert dft_real(4).round().tolist() == [[1, 1, 1, 1], [1, 0, -1, 0], [1, -1, 1, -1], [1, 0, -1, 0]]
    m(torch.randn(1, 24, 16))                                          # L tokens: fine
    with pytest.raises(ValueError, match="at most context = 24 tokens, got 25"):
        m(torch.randn(1, 25, 16))
    cache = m.new_cache()
    m(torch.randn(1, 24, 16), cache=cache)
    with pytest.raises(ValueError, match="past context"):
        m(torch.randn(1, 1, 16), cache=cache)


def test_the_matrix_is_its_formula():
    torch.manual_seed(0)
    m = CausalFourierMatrix(CFG)
    with torch.no_grad():
        m.M.normal_()
    x = torch.randn(2, 7, 16)
    u = torch.fft.fft(x, dim=-1).real
    for t in range(7):
        torch.testing.assert_close(m(x)[:, t], sum(m.M[t, s] * u[:, s] for s in range(t + 1)))


def test_the_conv_runs_past_L_with_a_zero_kernel_beyond():
    torch.manual_seed(0)
    conv = CausalLongConv(CFG)
    x = torch.randn(2, 40, 16)                                         # longer than L = 24
    u = hidden_fourier(x)
    torch.testing.assert_close(conv(x), causal_conv_direct(u, conv.h), atol=1e-4, rtol=1e-4)
    # the decaying start: the first lags carry most of every kernel
    h = conv.h.detach()
    assert (h[:, :1].abs() > 0).all() and (h[:, :12].norm(dim=1) ** 2 > 0.5 * h.norm(dim=1) ** 2).all()


@pytest.mark.parametrize("cls", FIXES)
@pytest.mark.parametrize("k", [1, 2, 7, 23])
def test_cache_prefill_then_steps_equals_one_full_call(cls, k):
    torch.manual_seed(k)
    mixer = cls(CFG)
    with torch.no_grad():                                              # a trained-looking layer, not the start
        for p in mixer.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x = torch.randn(3, 24, 16)
    full = mixer(x)
    cache = mixer.new_cache()
    outs = [mixer(x[:, :k], cache=cache)]
    assert outs[0].shape == (3, k, 16) and cache.u.shape[:2] == (3, k)
    for t in range(k, 24):
        y = mixer(x[:, t: t + 1], cache=cache)
        assert y.shape == (3, 1, 16)
        outs.append(y)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-4)
    assert cls(CFG).new_cache() is not None


def test_conv_cache_past_L_keeps_only_the_last_L_inputs():
    torch.manual_seed(0)
    conv = CausalLongConv(CFG)
    x = torch.randn(1, 40, 16)
    full = conv(x)
    cache = conv.new_cache()
    outs = [conv(x[:, :5], cache=cache)] + [conv(x[:, t: t + 1], cache=cache) for t in range(5, 40)]
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-4)
    assert cache.u.shape[1] == 24


def test_the_cache_check_can_fail():
    """A step that forgets the cache (mixes the new token alone) does not match the full call."""
    torch.manual_seed(0)
    mixer = CausalLongConv(CFG)
    x = torch.randn(1, 10, 16)
    cache = mixer.new_cache()
    mixer(x[:, :4], cache=cache)
    assert not torch.allclose(mixer(x[:, 4:5]), mixer(x)[:, 4:5], atol=1e-3)   # no cache: position 0 again
    with pytest.raises(ValueError, match="cannot generate token by token"):
        FourierMixer(CFG)(x, cache=FourierCache())


def test_fnet_models_have_no_positions_part_and_their_mixers():
    for name, cls in [("fnet", FourierMixer), ("fnet-matrix", CausalFourierMatrix), ("fnet-conv", CausalLongConv)]:
        model = build_model(name, CFG)
        assert model.positions is None and all(isinstance(b.mixer, cls) for b in model.blocks)


@pytest.mark.parametrize("name", ["fnet", "fnet-matrix", "fnet-conv"])
def test_every_fnet_model_trains(chorales, name):
    torch.manual_seed(0)
    model = build_model(name, ModelConfig(n_embd=32, n_heads=2, n_layers=2, context=32))
    h = train(model, chorales, TrainConfig(batch_size=8, max_steps=30, lr=6e-3, warmup_steps=3, eval_every=30,
                                           ckpt_every=30, eval_pieces=4), progress=False)
    assert np.mean(h.train_loss[-5:]) < np.mean(h.train_loss[:5]) - 0.3
    assert all(np.isfinite(h.train_loss))
