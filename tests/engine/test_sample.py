import numpy as np
import pytest
import torch

from musictx_lite import ModelConfig, build_model, decode, generate, prompt_from
from musictx_lite.io.tokens import BOS, HOLD, MASK, PAD, encode


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_model("lstm", ModelConfig(n_embd=16, n_heads=2)).eval()


def test_generate_continues_the_prompt(model, chorales):
    prompt = prompt_from(chorales.valid[0], 8)
    assert len(prompt) == 1 + 32
    out = generate(model, prompt, n_steps=5, seed=3)
    assert len(out) == len(prompt) + 20
    np.testing.assert_array_equal(out[: len(prompt)], prompt)
    np.testing.assert_array_equal(decode(out)[:8], chorales.valid[0].pitches[:8])
    assert not np.isin(out[1:], [PAD, BOS, HOLD, MASK]).any()


def test_seed_temperature_and_top_k(model):
    a, b = generate(model, None, 6, seed=1), generate(model, None, 6, seed=1)
    np.testing.assert_array_equal(a, b)
    greedy = generate(model, None, 6, top_k=1, seed=1)
    np.testing.assert_array_equal(greedy, generate(model, None, 6, top_k=1, seed=99))
    x = torch.as_tensor(greedy[:-1])[None]
    logits = model(x)[0, -1]
    logits[[PAD, BOS, HOLD, MASK]] = -float("inf")
    assert greedy[-1] == int(logits.argmax())
    with pytest.raises(ValueError, match="temperature"):
        generate(model, None, 2, temperature=0)


def test_a_tiny_temperature_is_greedy_not_nan(model):
    """logits / 1e-40 overflow to inf; the sampler subtracts the largest logit first, so the limit is the
    argmax (top_k=1), at any seed."""
    greedy = generate(model, None, 6, top_k=1, seed=1)
    for seed in (1, 2):
        np.testing.assert_array_equal(generate(model, None, 6, temperature=1e-40, seed=seed), greedy)


def test_a_temperature_float32_cannot_hold_still_samples(model):
    """1e300 overflows float32 to inf and 1e-300 to 0 (NaN probabilities once, a RuntimeError): beyond float32's
    range the sample is the limit, the argmax or uniform over the allowed tokens."""
    greedy = generate(model, None, 6, top_k=1, seed=1)
    np.testing.assert_array_equal(generate(model, None, 6, temperature=1e-300, seed=3), greedy)
    hot = generate(model, None, 64, temperature=1e300, seed=0)[1:]
    assert not np.isin(hot, [PAD, BOS, HOLD, MASK]).any()
    # uniform over the allowed tokens: far more of them drawn than the model's few likely ones
    assert len(set(hot.tolist())) > 40
    trace = []
    generate(model, None, 1, temperature=1e300, trace=trace)
    assert all(torch.isfinite(t).all() for t in trace)


def test_a_window_never_outgrows_the_context():
    from musictx_lite.engine.sample import window_start

    for context in range(4, 40):
        start = 0
        for n in range(1, 200):
            start = window_start(n, start, context)
            assert n - start <= context and start % 4 == 0
    with pytest.raises(ValueError, match="at least 4"):
        window_start(10, 0, 3)


@pytest.mark.parametrize("kw, match", [
    (dict(temperature=float("nan")), "temperature"), (dict(temperature=float("inf")), "temperature"),
    (dict(temperature=-1.0), "temperature"), (dict(top_k=0), "top_k"), (dict(n_steps=-1), "n_steps"),
    (dict(prompt=np.array([], dtype=np.int64)), "non-empty"), (dict(prompt=np.zeros((2, 3))), "non-empty")])
def test_sampling_settings_that_make_no_sense_are_clear_errors(model, kw, match):
    with pytest.raises(ValueError, match=match):
        generate(model, **{"n_steps": 2, **kw})


def test_a_context_shorter_than_one_step_is_a_clear_error():
    m = build_model("lstm", ModelConfig(n_embd=16, n_heads=2)).eval()
    m.context = 3
    with pytest.raises(ValueError, match="less than one step"):
        generate(m, None, 2)
    m.context = 4                                           # one step: the window slides every step
    assert len(generate(m, None, 3)) == 1 + 12


def test_prompt_longer_than_context():
    m = build_model("lstm", ModelConfig(n_embd=16, n_heads=2)).eval()
    m.context = 16
    with pytest.raises(ValueError, match="context is 16"):
        generate(m, np.full(17, 10), 2)
    out = generate(m, np.r_[BOS, np.full(12, 10)], 5)       # generation beyond the context slides a window
    assert len(out) == 13 + 20


@pytest.mark.parametrize("name", ["learned-positions", "sinusoidal", "shaw", "relative", "rope", "alibi", "local"])
def test_models_of_chapters_6_to_9_continue_any_prompt_that_fits(name, chorales):
    torch.manual_seed(0)
    model = build_model(name, ModelConfig(n_embd=16, n_heads=2, context=32)).eval()
    for steps in (0, 1, 3, 7):                    # 7 steps = 29 tokens: the window slides after 3 more
        prompt = prompt_from(chorales.valid[0], steps)
        out = generate(model, prompt, n_steps=4, seed=0)
        assert len(out) == len(prompt) + 16
        np.testing.assert_array_equal(out[: len(prompt)], prompt)
    with pytest.raises(ValueError, match="context"):
        generate(model, prompt_from(chorales.valid[0], 8), n_steps=1)


@pytest.mark.parametrize("name", ["lstm", "relative"])
def test_forced_tokens_are_kept_and_the_rest_sampled_as_if_chosen(name, chorales):
    """Chapter 12's constrained sampling: the soprano of every step given, the alto, tenor and bass sampled;
    with and without the cache the same, and every free token's logits those of the model on the result."""
    torch.manual_seed(0)
    m = build_model(name, ModelConfig(n_embd=16, n_heads=2, context=24)).eval()
    soprano = encode(chorales.valid[0].pitches[:10])[1::4]                   # 10 steps' soprano tokens
    forced = np.full(40, -1)
    forced[0::4] = soprano
    trace = []
    out = generate(m, None, 10, seed=2, forced=forced, trace=trace)
    np.testing.assert_array_equal(out[1::4], soprano)
    free = np.flatnonzero(forced == -1) + 1                                  # positions in out
    assert not np.isin(out[free], [PAD, BOS, HOLD, MASK]).any()
    np.testing.assert_array_equal(out, generate(m, None, 10, seed=2, forced=forced, cache=False))
    if name == "lstm":                                                       # no window: logits of the whole
        with torch.no_grad():
            whole = m(torch.as_tensor(out[:-1])[None])[0]
        torch.testing.assert_close(torch.stack(trace), whole, rtol=1e-4, atol=1e-4)
    # free everywhere is plain sampling
    np.testing.assert_array_equal(generate(m, None, 3, seed=5, forced=np.full(12, -1)), generate(m, None, 3, seed=5))


@pytest.mark.parametrize("forced", [np.full(9, -1), np.array([-2, -1]), np.array([99]), np.zeros((2, 2))])
def test_forced_tokens_that_make_no_sense_are_clear_errors(model, forced):
    with pytest.raises(ValueError, match="forced must hold at most 8 tokens"):
        generate(model, None, 2, forced=forced)
