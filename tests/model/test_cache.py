"""Sampling with a key/value cache gives the logits of re-encoding, at every step, for every model.

Chapter 11: a decoder keeps each layer's keys and values, an LSTM its state.
The reference is ``generate(cache=False)``, which runs the model over the whole
window for every token; both use the same window (``sample.window_start``).
"""
import numpy as np
import pytest
import torch

from musictx_lite import MODELS, ModelConfig, build_model, generate
from musictx_lite.engine.sample import window_start
from musictx_lite.models.attention import attention_fast
from musictx_lite.models.blocks import block_decoder
from musictx_lite.models.cache import with_cache
from musictx_lite.models.local import LocalAttention
from musictx_lite.models.tasks import NEXT_TOKEN

CFG = ModelConfig(n_embd=32, n_heads=4, n_layers=2, context=32)
NEXT = sorted(n for n in MODELS if build_model(n, CFG).task is NEXT_TOKEN)


def traces(model, prompt, n_steps=24, seed=1):
    cached, plain = [], []
    a = generate(model, prompt, n_steps=n_steps, seed=seed, cache=True, trace=cached)
    b = generate(model, prompt, n_steps=n_steps, seed=seed, cache=False, trace=plain)
    return a, b, torch.stack(cached), torch.stack(plain)


def prompt_of(n: int) -> np.ndarray:
    p = np.random.RandomState(n).randint(5, 50, n)
    p[0] = 1                                                     # BOS
    return p


@pytest.mark.parametrize("name", NEXT)
def test_cached_logits_equal_re_encoding_at_every_step(name):
    torch.manual_seed(0)
    model = build_model(name, CFG).eval()
    assert model.cacheable == (name not in {"attention-unmasked", "fnet"})   # the leaky ones cannot cache
    for n in (1, 5, 17, 29):                                     # 24 steps = 96 tokens: the window of 32 slides
        a, b, cached, plain = traces(model, prompt_of(n))
        assert cached.shape == plain.shape == (96, CFG.vocab_size)
        torch.testing.assert_close(cached, plain, atol=2e-5, rtol=1e-5)
        np.testing.assert_array_equal(a, b)


def test_local_cache_keeps_two_blocks_and_matches_across_block_edges():
    torch.manual_seed(0)
    cfg = ModelConfig(n_embd=32, n_heads=4, n_layers=3, context=64)
    model = with_cache(block_decoder(cfg, lambda c: LocalAttention(c, N=4))).eval()
    for n in (1, 3, 4, 9, 50):
        _, _, cached, plain = traces(model, prompt_of(n), n_steps=30)
        torch.testing.assert_close(cached, plain, atol=2e-5, rtol=1e-5)
    cache = model.new_cache()
    x = torch.as_tensor(prompt_of(23))[None]
    model(x, cache=cache)
    for t in range(23, 40):
        model(torch.tensor([[7]]), cache=cache)
        layer = cache.layers[0]
        assert layer.k.shape[-2] <= 8 and layer.first == max(0, ((t + 1) // 4 - 1) * 4)   # <= 2N keys
        assert layer.seen == cache.pos == t + 1                                         # one count of tokens


def test_cache_misuse_and_window_rule():
    model = build_model("relative", CFG).eval()
    cache = model.new_cache()
    model(torch.tensor([[1, 7, 8]]), cache=cache)
    with pytest.raises(ValueError, match="one token at a time"):
        model(torch.tensor([[7, 8]]), cache=cache)
    with pytest.raises(ValueError, match="cannot sample with a cache"):
        build_model("attention-unmasked", CFG).new_cache()
    assert window_start(32, 0, 32) == 0 and window_start(33, 0, 32) == 20   # keep about half, on a step edge
    assert window_start(40, 20, 32) == 20 and window_start(53, 20, 32) == 40
    assert window_start(10_000, 0, None) == 0
    for n in range(5, 200):
        s = window_start(n, 0, 32)
        assert s % 4 == 0 and 0 < n - s <= 32


def test_a_slow_cache_would_be_caught():
    """The comparison can fail: a cache that rotates the new query as position 0 gives other logits."""
    torch.manual_seed(0)
    model = build_model("rope", CFG).eval()
    for block in model.blocks:
        m = block.mixer
        m.attend_last = lambda q, k, v, m=m: attention_fast(m.rotary(q), m.rotary(k), v)   # no offset
    _, _, cached, plain = traces(model, prompt_of(5), n_steps=4)
    assert (cached - plain).abs().max() > 1e-3


def test_a_mixer_without_an_extension_of_its_own_still_caches_right():
    """A score bias that models/cache.py does not know falls back to attending with padded queries."""
    import torch.nn as nn

    from musictx_lite.models.relative import BiasedAttention

    class Shift(nn.Module):                                       # a bias computed from the queries
        def forward(self, q):
            return q.sum(-1, keepdim=True).expand(*q.shape[:-1], q.shape[-2])   # (B, nh, T, T)

    torch.manual_seed(0)
    model = with_cache(block_decoder(CFG, lambda c: BiasedAttention(c, Shift()))).eval()
    assert model.cacheable and not hasattr(model.blocks[0].mixer.score_bias, "last")
    for n in (1, 6):
        _, _, cached, plain = traces(model, prompt_of(n), n_steps=12)
        torch.testing.assert_close(cached, plain, atol=2e-5, rtol=1e-5)
