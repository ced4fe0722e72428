import math

import pytest
import torch

from musictx_lite import ModelConfig, build_model
from musictx_lite.io.tokens import VOCAB_SIZE
from musictx_lite.models import n_params


@pytest.mark.parametrize("kw, match", [
    (dict(n_embd=30, n_heads=4), "not divisible by n_heads"),
    (dict(n_layers=0), "positive integer"),
    (dict(context=-8), "positive integer"),
    (dict(dropout=1.0), "dropout"),
])
def test_invalid_configs_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**kw)


def test_unknown_model():
    with pytest.raises(ValueError, match="unknown model"):
        build_model("gpt-7", ModelConfig())


@pytest.mark.parametrize("name", ["lstm", "lstm-attention"])
def test_shapes_and_causality(name):
    torch.manual_seed(0)
    m = build_model(name, ModelConfig(n_embd=32, n_heads=2)).eval()
    x = torch.randint(4, 50, (3, 20))
    y = m(x)
    assert y.shape == (3, 20, VOCAB_SIZE)
    t = 11
    x2 = x.clone()
    x2[:, t + 1:] = torch.randint(4, 50, (3, 20 - t - 1))
    y2 = m(x2)
    torch.testing.assert_close(y[:, : t + 1], y2[:, : t + 1])     # the past does not see the future
    assert not torch.allclose(y[:, t + 1:], y2[:, t + 1:])


def test_lstm_attention_matches_the_formula():
    torch.manual_seed(0)
    m = build_model("lstm-attention", ModelConfig(n_embd=16, n_heads=2)).eval()
    h = torch.randn(1, 6, 16)
    c, alpha = m.attend(h)
    W = m.W.weight.T                        # nn.Linear computes h @ weight.T
    for i in range(6):
        e = torch.stack([h[0, i] @ W @ h[0, j] / math.sqrt(16) for j in range(i + 1)])
        a = torch.softmax(e, 0)
        torch.testing.assert_close(alpha[0, i, : i + 1], a)
        torch.testing.assert_close(c[0, i], (a[:, None] * h[0, : i + 1]).sum(0))
    assert (alpha[0].triu(1) == 0).all()
    torch.testing.assert_close(alpha.sum(-1), torch.ones(1, 6))


def test_parameter_counts():
    cfg = ModelConfig(n_embd=32, n_heads=2)
    lstm = build_model("lstm", cfg)
    V, C = cfg.vocab_size, cfg.n_embd
    assert n_params(lstm) == V * C + 4 * (C * C + C * C + 2 * C) + C * V + V
    assert n_params(build_model("lstm-attention", cfg)) == n_params(lstm) + C * C + 2 * C * C + C
