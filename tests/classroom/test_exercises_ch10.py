import pytest
import torch
from musictx_solutions import exercise_10_1, exercise_10_2, exercise_10_3
from musictx_solutions.ch10 import cached_logits, fft_conv_n, fourier_by_matmul

from musictx_lite import ModelConfig, build_model
from musictx_lite.classroom.checks.ch10 import _circular
from musictx_lite.models.fnet import causal_fft_conv


def test_exercise_10_1_real_matmuls_equal_fft2():
    assert exercise_10_1(T=7, C=6) < 1e-10
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    torch.testing.assert_close(fourier_by_matmul(x), torch.fft.fft2(x).real)


def test_exercise_10_2_smallest_fft_length():
    assert exercise_10_2(T=16, K=16) == {16: False, 24: False, 30: False, 31: True, 32: True}
    assert exercise_10_2(T=10, K=4) == {10: False, 12: False, 13: True, 20: True}
    u, h = torch.randn(2, 9, 3), torch.randn(3, 9)
    torch.testing.assert_close(fft_conv_n(u, h, 18), causal_fft_conv(u, h))


@pytest.mark.parametrize("T, K", [(16, 16), (12, 5), (10, 4), (7, 1)])
def test_check_10_2s_folded_convolution_is_the_reference_wrap_around(T, K):
    """check_10_2 compares a too-short FFT with the full convolution folded modulo n, not with ``fft_conv_n``."""
    u, h = torch.randn(2, T, 3, dtype=torch.float64), torch.randn(3, K, dtype=torch.float64)
    for n in range(max(T, K), 2 * T + K):
        torch.testing.assert_close(_circular(u, h, n), fft_conv_n(u, h, n), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["fnet-matrix", "fnet-conv"])
def test_exercise_10_3_cache_equals_full_call(chorales, name):
    torch.manual_seed(0)
    model = build_model(name, ModelConfig(n_embd=16, n_heads=2, n_layers=2, context=64))
    out = exercise_10_3(model, chorales.valid[0], n_tokens=40, prefill=3)
    assert out["gap"] < 1e-3 and out["cached_s"] > 0


def test_cached_logits_fail_for_the_naive_fnet(chorales):
    model = build_model("fnet", ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=32))
    with pytest.raises(ValueError, match="cannot generate token by token"):
        cached_logits(model, [1, 5, 6, 7])
