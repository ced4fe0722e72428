import numpy as np
import pytest
import torch
from musictx_solutions import exercise_12_1, exercise_12_2, exercise_12_3
from musictx_solutions.ch12 import cross_attention, future_moves, harmonise_greedy

from musictx_lite import ModelConfig, build_model, generate
from musictx_lite.classroom.checks.ch12 import check_12_1, check_12_2, check_12_3
from musictx_lite.engine.harmonise import harmonise, melody_tokens
from musictx_lite.io.tokens import BOS, HOLD, MASK, PAD, encode
from musictx_lite.models.harmoniser import CrossAttention

TINY = ModelConfig(n_embd=16, n_heads=2, n_layers=2, context=64)


def test_cross_attention_is_the_package_layer_without_its_relative_term():
    torch.manual_seed(0)
    x, memory = torch.randn(2, 6, 8, dtype=torch.float64), torch.randn(2, 3, 8, dtype=torch.float64)
    cross = CrossAttention(ModelConfig(n_embd=8, n_heads=2), L=3).double()
    with torch.no_grad():
        cross.rel.E.zero_()
    Wq, (Wk, Wv) = cross.q.weight.T, cross.kv.weight.T.split(8, dim=1)
    want = cross(x, torch.zeros(6, dtype=torch.long), memory)
    torch.testing.assert_close(cross.proj(cross_attention(x, memory, Wq, Wk, Wv, 2)), want)
    assert exercise_12_1() < 1e-10


def test_each_checker_passes_the_reference(capsys):
    assert check_12_1(cross_attention) and check_12_2(harmonise_greedy) and check_12_3(future_moves)
    assert capsys.readouterr().out.count(": pass (") == 3


def _masked(x, memory, Wq, Wk, Wv, n_heads):
    """Cross-attention with a causal mask, as if the melody's future were hidden."""
    (B, T, C), S = x.shape, memory.shape[1]
    hs = C // n_heads
    q = (x @ Wq).view(B, T, n_heads, hs).transpose(1, 2)
    k, v = ((memory @ W).view(B, S, n_heads, hs).transpose(1, 2) for W in (Wk, Wv))
    s = (q @ k.transpose(-2, -1) / hs ** 0.5).masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(), float("-inf"))
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)


def test_check_12_1_fails_a_causal_mask_and_keys_from_x(capsys):
    assert not check_12_1(_masked)
    assert "it matches a causal mask" in capsys.readouterr().out
    assert not check_12_1(lambda x, m, Wq, Wk, Wv, nh: cross_attention(x, x, Wq, Wk, Wv, nh))
    assert "keys and values from x" in capsys.readouterr().out


def test_check_12_1_names_the_mistakes_it_stores_or_builds_from_the_package(capsys):
    def over_queries(x, memory, Wq, Wk, Wv, n_heads):                # the stored mistake
        (B, T, C), S, hs = x.shape, memory.shape[1], x.shape[-1] // n_heads
        q = (x @ Wq).view(B, T, n_heads, hs).transpose(1, 2)
        k, v = ((memory @ W).view(B, S, n_heads, hs).transpose(1, 2) for W in (Wk, Wv))
        return ((q @ k.transpose(-2, -1) / hs ** 0.5).softmax(-2) @ v).transpose(1, 2).reshape(B, T, C)

    assert not check_12_1(over_queries)
    assert "it matches a softmax over the queries, not the keys" in capsys.readouterr().out
    assert not check_12_1(lambda x, m, Wq, Wk, Wv, nh: cross_attention(x, m, Wq * (x.shape[-1] // nh) ** 0.5,
                                                                       Wk, Wv, nh))
    assert "it matches no 1/sqrt(d) scale" in capsys.readouterr().out


def test_harmonise_greedy_is_generate_at_top_k_1(chorales):
    torch.manual_seed(0)
    for name in ("relative", "harmoniser"):
        model = build_model(name, TINY).eval()
        melody = chorales.valid[0].pitches[:10, 0]
        soprano = melody_tokens(melody)
        tokens = harmonise_greedy(model, torch.as_tensor(soprano))
        assert tokens.shape == (41,) and tokens[0] == BOS
        np.testing.assert_array_equal(tokens[1::4].numpy(), soprano)
        assert not np.isin(tokens.numpy(), [PAD, HOLD, MASK]).any()
        forced = np.full(40, -1)
        forced[0::4] = soprano
        np.testing.assert_array_equal(tokens.numpy(), generate(model, None, 10, top_k=1, forced=forced, cache=False))
        np.testing.assert_array_equal(harmonise(model, melody, top_k=1, rules="none", candidates=1),
                                      exercise_12_2(model, melody))
    with pytest.raises(ValueError, match="do not fit a context of 64 tokens"):
        harmonise_greedy(model, torch.full((17,), 40))


@torch.no_grad()
def _greedy_own_soprano(model, soprano):
    """Lets the model write its own soprano and pastes the melody over it afterwards."""
    idx = torch.tensor([[BOS]])
    for _ in range(4 * len(soprano)):
        logits = model(idx)[0, -1]
        logits[[PAD, BOS, HOLD, MASK]] = float("-inf")
        idx = torch.cat([idx, logits.argmax().view(1, 1)], dim=1)
    idx[0, 1::4] = soprano
    return idx[0]


def test_check_12_2_fails_a_melody_pasted_over_afterwards(capsys):
    assert not check_12_2(_greedy_own_soprano)
    assert "replaced by the melody afterwards" in capsys.readouterr().out
    harmoniser = build_model("harmoniser", TINY)
    assert check_12_2(harmonise_greedy, harmoniser)                         # passes it the whole melody
    assert not check_12_2(_greedy_own_soprano, harmoniser)
    assert not check_12_2(lambda model, soprano: harmonise_greedy(_Plain(model), soprano), harmoniser)
    assert "a harmoniser that read only the melody so far" in capsys.readouterr().out


class _Plain(torch.nn.Module):
    """A harmoniser that harmonise_greedy takes for a causal decoder: called without the whole melody."""

    def __init__(self, model):
        super().__init__()
        self.model, self.context, self.task = model, model.context, None

    def forward(self, idx):
        return self.model(idx)


def test_future_moves_the_encoder_sees_the_future_the_decoder_does_not(chorales):
    torch.manual_seed(0)
    model = build_model("harmoniser", TINY).eval()
    tokens = torch.as_tensor(encode(chorales.valid[0].pitches[:14]))
    encoder, decoder = future_moves(model, tokens, 6)
    assert encoder > 1e-3 and decoder < 1e-6
    out = exercise_12_3(model, chorales.valid[0], n_steps=14, t=6)
    assert out["encoder"] == encoder and out["full"] > 1e-3 and out["alto"] < 1e-6


def test_check_12_3_fails_a_probe_that_lets_the_memory_follow(capsys):
    def unfixed(model, tokens, t):
        encoder, _ = future_moves(model, tokens, t)
        x, p = tokens[None], 4 * (t + 1) + 1
        x2 = x.clone()
        x2[:, p::4] += 1
        with torch.no_grad():
            return encoder, (model(x2) - model(x))[:, :p].abs().max().item()

    assert not check_12_3(unfixed)
    assert "hold the memory of the old one" in capsys.readouterr().out
    assert not check_12_3(future_moves, build_model("relative", TINY))
    assert check_12_3(future_moves, build_model("harmoniser", TINY))        # the stored numbers, then yours
    assert "on the small random harmoniser and on yours" in capsys.readouterr().out
