"""The fast relative global attention (chapter 8) against the readable skew: values and gradients.

Every path (the chunked strided skew, FlexAttention, the bench's gwinndr-style and SDPA references)
is checked equal to ``relative.relative_logits_skew`` under the causal mask. FlexAttention's backward
pass runs on a GPU only: its gradient test skips cleanly without one.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from musictx_lite.models.attention import causal_mask, recording
from musictx_lite.models.config import ModelConfig
from musictx_lite.models.registry import build_model
from musictx_lite.models.relative import BiasedAttention, RelativeGlobal, relative_logits_skew
from musictx_lite.models.relative_fast import (
    CHUNKED_FROM,
    RelativeGlobalAttention,
    choose_impl,
    flex_relative_attention,
    relative_attention,
    skewed,
    unskewed,
)
from musictx_lite.study.bench import gwinndr_style, implementations


def readable(q, k, v, E):
    """The definition, with the readable skew: softmax((Q K^T + S^rel) / sqrt(d) + causal) V."""
    L, d = q.shape[-2:]
    scores = (q @ k.transpose(-2, -1) + relative_logits_skew(q, E)) / math.sqrt(d)
    return F.softmax(scores.masked_fill(~causal_mask(L, q.device), float("-inf")), dim=-1) @ v


def inputs(B, H, L, d, dtype=torch.double, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, d, generator=g, dtype=dtype).to(device).requires_grad_() for _ in range(3))
    E = torch.randn(H, L, d, generator=g, dtype=dtype).to(device).requires_grad_()
    return q, k, v, E


def grads(y, xs, seed=1):
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed), dtype=y.dtype).to(y.device)
    return torch.autograd.grad(y, xs, g)


def test_skewed_is_a_view_with_the_readable_skews_entries():
    for n, e in [(1, 1), (3, 3), (2, 5), (4, 9)]:
        rel = torch.arange(2 * n * e, dtype=torch.float).view(2, n, e)
        S = skewed(rel)
        assert S.data_ptr() == rel[..., n - 1:].data_ptr() and S.shape == (2, n, e)   # no copy
        for a in range(n):                           # query e - n + a, key j: rel[a, j + n - 1 - a]
            for j in range(e - n + a + 1):
                assert S[:, a, j].tolist() == rel[:, a, j + n - 1 - a].tolist()
    rel = torch.randn(2, 3, 6, 6)                    # the square case is the readable skew's lower triangle
    assert torch.equal(skewed(rel).tril(), F.pad(rel, (1, 0)).reshape(2, 3, 7, 6)[..., 1:, :].tril())


def test_unskewed_is_the_gradient_of_skewed():
    torch.manual_seed(0)
    for n, e in [(1, 1), (3, 3), (2, 5), (4, 9)]:
        rel = torch.randn(2, n, e, dtype=torch.double, requires_grad=True)
        lower = torch.ones(n, e, dtype=torch.bool).tril(e - n)    # the entries skewed() defines
        ds = torch.randn(2, n, e, dtype=torch.double) * lower
        (want,) = torch.autograd.grad((skewed(rel) * lower).mul(ds).sum(), rel)
        torch.testing.assert_close(unskewed(ds), want, rtol=0, atol=0)


@pytest.mark.parametrize("L,chunk", [(1, 4), (7, 3), (16, 5), (33, 8), (64, 64), (50, 7), (5, 100)])
def test_chunked_equals_the_readable_skew_values_and_gradients(L, chunk):
    q, k, v, E = inputs(2, 3, L, 4)
    want, got = readable(q, k, v, E), relative_attention(q, k, v, E, chunk)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    for g, w in zip(grads(got, (q, k, v, E)), grads(want, (q, k, v, E))):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-12)


def test_chunked_passes_gradcheck_and_without_E_is_causal_attention():
    q, k, v, E = inputs(1, 2, 9, 3)
    assert torch.autograd.gradcheck(lambda *t: relative_attention(*t, chunk=4), (q, k, v, E))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(relative_attention(q, k, v, None, chunk=4), want)
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        relative_attention(q, k, v, E, chunk=0)


def test_the_layers_agree_and_share_parameter_names():
    torch.manual_seed(0)
    cfg = ModelConfig(n_embd=32, n_heads=4, context=40)
    readable_layer = BiasedAttention(cfg, RelativeGlobal(cfg), fast=False)
    x = torch.randn(2, 40, 32, dtype=torch.double)
    want = readable_layer.double()(x)
    for impl in ("skew", "chunked"):
        layer = RelativeGlobalAttention(cfg, impl=impl).double()
        layer.load_state_dict(readable_layer.state_dict())            # the same names: old checkpoints load
        torch.testing.assert_close(layer(x), want)
        torch.testing.assert_close(layer(x[:, :23]), readable_layer(x[:, :23]))   # shorter than the context
    layer = RelativeGlobalAttention(cfg, impl="chunked").double()
    layer.load_state_dict(readable_layer.state_dict())
    with recording() as w:                          # the weights are asked for: the readable path runs
        layer(x)
    assert len(w) == 1 and w[0].shape == (2, 4, 40, 40)


def test_the_relative_models_use_the_chunked_path_on_a_cpu(monkeypatch):
    model = build_model("relative", ModelConfig(n_embd=16, n_heads=2, context=8))
    assert all(isinstance(b.mixer, RelativeGlobalAttention) for b in model.blocks)
    monkeypatch.delenv("MUSICTX_RELATIVE", raising=False)
    assert choose_impl(torch.device("cpu")) == "chunked" and choose_impl(torch.device("cuda")) == "skew"
    assert choose_impl(torch.device("cpu"), 256) == "skew"                   # short: the readable skew is faster
    assert choose_impl(torch.device("cpu"), CHUNKED_FROM) == "chunked"
    assert choose_impl(torch.device("cuda"), 4096) == "skew"
    monkeypatch.setenv("MUSICTX_RELATIVE", "flex")
    assert choose_impl(torch.device("cpu")) == "flex"
    monkeypatch.setenv("MUSICTX_RELATIVE", "fast")
    with pytest.raises(ValueError, match="MUSICTX_RELATIVE must be one of skew, chunked, flex"):
        choose_impl(torch.device("cpu"))
    with pytest.raises(ValueError, match="impl must be one of"):
        RelativeGlobalAttention(ModelConfig(n_embd=16, n_heads=2, context=8), impl="fast")


def test_the_bench_references_equal_the_readable_skew():
    q, k, v, E = inputs(2, 3, 20, 4)
    want = readable(q, k, v, E)
    got = gwinndr_style(q, k, v, E)
    torch.testing.assert_close(got, want)
    for g, w in zip(grads(got, (q, k, v, E)), grads(want, (q, k, v, E))):
        torch.testing.assert_close(g, w)
    torch.manual_seed(0)
    cfg = ModelConfig(n_embd=32, n_heads=4, context=24)
    impls = implementations()
    ref = impls["skew"].build(cfg)
    x = torch.randn(2, 24, 32)
    for name in ("chunked skew", "gwinndr-style", "SDPA + relative bias"):
        layer = impls[name].build(cfg)
        layer.load_state_dict(ref.state_dict())
        torch.testing.assert_close(layer(x), ref(x), atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_forward_equals_the_readable_skew_on_a_cpu():
    """FlexAttention's unfused reference runs forward on a CPU: the score_mod reads the right entry."""
    q, k, v, E = (t.detach().float() for t in inputs(2, 3, 32, 8))
    torch.testing.assert_close(flex_relative_attention(q, k, v, E, compiled=False), readable(q, k, v, E),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FlexAttention's backward pass needs a CUDA GPU")
def test_flex_values_and_gradients_on_a_gpu():
    q, k, v, E = inputs(2, 4, 256, 32, dtype=torch.float32, device="cuda")
    want, got = readable(q, k, v, E), flex_relative_attention(q, k, v, E)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)
    for g, w in zip(grads(got, (q, k, v, E)), grads(want, (q, k, v, E))):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    want, got = readable(q, k, v, E), relative_attention(q, k, v, E)      # the chunked path on CUDA too
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)


def test_a_cpu_layer_takes_the_readable_skew_below_chunked_from_and_the_chunks_from_it(monkeypatch):
    from musictx_lite.models import relative_fast

    monkeypatch.delenv("MUSICTX_RELATIVE", raising=False)
    calls = []
    real = relative_fast.relative_attention
    monkeypatch.setattr(relative_fast, "relative_attention", lambda *a: calls.append(a[0].shape[-2]) or real(*a))
    layer = RelativeGlobalAttention(ModelConfig(n_embd=8, n_heads=2, context=CHUNKED_FROM)).eval()
    with torch.no_grad():
        short, long = layer(torch.randn(1, 64, 8)), layer(torch.randn(1, CHUNKED_FROM, 8))
    assert calls == [CHUNKED_FROM]                                 # the chunks ran for the long input only
    assert short.shape == (1, 64, 8) and long.shape == (1, CHUNKED_FROM, 8)
