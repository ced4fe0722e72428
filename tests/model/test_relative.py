"""Positions and relative attention (chapters 6-9): every fast path equals its plain reference."""
import math

import pytest
import torch

from musictx_lite import ModelConfig, build_model
from musictx_lite.models.attention import attention_fast
from musictx_lite.models.local import LocalAttention, band_mask, local_relative_attention, skew_local
from musictx_lite.models.positions import SinusoidalPositions, sinusoids
from musictx_lite.models.probes import future_effect, is_causal
from musictx_lite.models.relative import (
    ALiBi,
    BiasedAttention,
    RelativeGlobal,
    Rotary,
    ShawAttention,
    distances,
    relative_logits_direct,
    relative_logits_skew,
    skew,
)

RELATIVE = ["shaw", "relative", "rope", "alibi", "local"]


def test_sinusoids_match_the_formula_and_shift_by_a_rotation():
    P = sinusoids(50, 8)
    t, i = 7, 2
    w = 10000 ** (-2 * i / 8)
    assert P[t, 2 * i] == pytest.approx(math.sin(t * w)) and P[t, 2 * i + 1] == pytest.approx(math.cos(t * w))
    k = 5                                      # P[t + k] = P[t] rotated pair by pair by k w_i, for every t
    w_all = 10000 ** (-torch.arange(0, 8, 2) / 8)
    c, s = torch.cos(k * w_all), torch.sin(k * w_all)
    sin_t, cos_t = P[:-k, 0::2], P[:-k, 1::2]
    torch.testing.assert_close(P[k:, 0::2], sin_t * c + cos_t * s)
    torch.testing.assert_close(P[k:, 1::2], cos_t * c - sin_t * s)


def test_sinusoidal_positions_run_past_the_trained_length():
    pos = SinusoidalPositions(ModelConfig(n_embd=8, context=16))
    x = torch.zeros(1, 40, 8)
    torch.testing.assert_close(pos(x)[0], sinusoids(40, 8))


@pytest.mark.parametrize("L,H,B", [(1, 1, 1), (2, 3, 2), (7, 2, 3), (33, 4, 1)])
def test_skew_equals_the_direct_gather(L, H, B):
    torch.manual_seed(L)
    q, E = torch.randn(B, H, L, 8), torch.randn(H, L, 8)
    defined = torch.ones(L, L, dtype=torch.bool).tril()
    direct, skewed = relative_logits_direct(q, E), relative_logits_skew(q, E)
    torch.testing.assert_close(skewed[..., defined], direct[..., defined])
    for i in range(L):                         # and the direct way is the definition: q_i . E[j - i + L - 1]
        for j in range(i + 1):
            assert direct[0, 0, i, j] == pytest.approx((q[0, 0, i] @ E[0, j - i + L - 1]).item(), abs=1e-5)


def test_skew_on_the_toy_matrix():
    rel = torch.arange(1, 10.0).view(3, 3)     # row i: q_i . E for distances -2, -1, 0
    assert skew(rel).tolist()[0][0] == 3 and skew(rel).tril().tolist() == [[3, 0, 0], [5, 6, 0], [7, 8, 9]]


def test_above_the_diagonal_the_skew_holds_the_next_query():
    """The undefined entries are not zeros: they carry the next query's logits, a leak if unmasked."""
    torch.manual_seed(0)
    L = 6
    rel = torch.randn(L, L)
    S = skew(rel)
    for i in range(L - 1):
        assert S[i, i + 1] == 0
        for j in range(i + 2, L):
            assert S[i, j] == rel[i + 1, j - i - 2]


def test_relative_models_are_causal_and_the_test_catches_a_missing_mask():
    torch.manual_seed(0)
    cfg = ModelConfig(n_embd=16, n_heads=2, n_layers=2, context=24)
    for name in ("relative", "alibi", "rope"):
        model = build_model(name, cfg)
        assert is_causal(model), name
        for block in model.blocks:             # let the undefined skew entries reach the softmax
            block.mixer.causal = False
        assert not is_causal(model), name
        assert future_effect(model)[0] > 1e-3     # outputs up to t move when later tokens change


@pytest.mark.parametrize("T,N", [(16, 4), (13, 4), (5, 8), (12, 1), (9, 3)])
def test_local_equals_relative_attention_under_the_band_mask(T, N):
    torch.manual_seed(T * N)
    H, d = 2, 4
    q, k, v = torch.randn(3, 2, H, T, d).unbind(0)
    E = torch.randn(H, max(T, 2 * N), d)                             # global table; local keeps its last 2N
    bias = relative_logits_skew(q, E[:, E.shape[1] - T:]) / math.sqrt(d)
    y_ref, w_ref = attention_fast(q, k, v, causal=True, mask=band_mask(T, N), bias=bias, need_weights=True)
    y, w = local_relative_attention(q, k, v, E[:, -2 * N:], N, need_weights=True)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(w, w_ref)
    assert (w[..., :N, :] - w_ref[..., :N, :]).abs().max() < 1e-6     # the first block: itself only
    assert (w[..., :N, N:] == 0).all() if T > N else True


def test_band_mask_first_block_and_band():
    m = band_mask(8, 2)
    assert m[1].tolist() == [True, True] + [False] * 6               # block 0: no predecessor
    assert m[5].tolist() == [False, False, True, True, True, True, False, False]


def test_skew_local_toy_follows_the_five_steps():
    N = 3
    rel = torch.arange(1, N * (2 * N - 1) + 1.0).view(N, 2 * N - 1)   # (3, 5)
    out = skew_local(rel, N)
    for n in range(N):
        for m in range(N):
            assert out[n, m] == rel[n, N - 1 + m - n]
    assert out.tolist() == [[3, 4, 5], [7, 8, 9], [11, 12, 13]]
    with pytest.raises(ValueError, match="columns"):
        skew_local(rel, 2 * N)


def test_local_attention_memory_is_linear_in_T():
    """The scores of one forward are (B, nh, T/N, N, 2N): 2N per query, whatever T, so 16 times the tokens
    take at most twice 16 times the peak memory (the profiler's allocation count); relative global
    attention's (T, T) scores take far more."""
    from musictx_lite.study.bench import peak_bytes

    cfg = ModelConfig(n_embd=8, n_heads=2, context=4096)
    torch.manual_seed(0)
    mix, full = LocalAttention(cfg, N=16), BiasedAttention(cfg, RelativeGlobal(cfg))
    peaks = {}
    for T in (64, 1024):
        x = torch.randn(1, T, 8)
        with torch.no_grad():
            assert mix(x).shape == (1, T, 8)
            peaks[T] = [peak_bytes(lambda m=m: m(x)) for m in (mix, full)]
    local, whole = (peaks[1024][i] / peaks[64][i] for i in (0, 1))
    assert local <= 2 * 16 < 64 <= whole, (local, whole)


def _shaw_as_music_transformer(k: int, T: int):
    """A Shaw layer without a^V and the MT layer holding the same vectors for distances -k..0."""
    torch.manual_seed(0)
    cfg = ModelConfig(n_embd=8, n_heads=2, context=k + 1)
    shaw = ShawAttention(cfg, k=k)
    with torch.no_grad():
        shaw.a_v.weight.zero_()
    mt = BiasedAttention(cfg, RelativeGlobal(cfg))
    mt.load_state_dict({n: p for n, p in shaw.state_dict().items() if not n.startswith("a_")}, strict=False)
    with torch.no_grad():
        mt.score_bias.E.copy_(shaw.a_k.weight[: k + 1].expand(2, -1, -1))   # distances -k .. 0, per head
    x = torch.randn(2, T, 8)
    return shaw(x), mt(x)


@pytest.mark.parametrize("k,T", [(0, 6), (1, 6), (3, 4), (3, 12), (11, 12)])
def test_shaw_without_av_is_the_music_transformer_term_with_clipping(k, T):
    a, b = _shaw_as_music_transformer(k, T)
    torch.testing.assert_close(a, b)


def test_shaw_with_k_zero_sees_no_order():
    torch.manual_seed(0)
    cfg = ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=16)
    model = build_model("shaw", cfg)
    for block in model.blocks:
        block.mixer = ShawAttention(cfg, k=0)
    idx = torch.randint(5, 50, (1, 10))
    shuffled = torch.cat([idx[:, :-1][:, torch.randperm(9)], idx[:, -1:]], dim=1)
    torch.testing.assert_close(model(shuffled)[0, -1], model(idx)[0, -1])
    for block in model.blocks:                 # k = 1 tells the token itself from the rest: still a bag
        block.mixer = ShawAttention(cfg, k=1)
    torch.testing.assert_close(model(shuffled)[0, -1], model(idx)[0, -1])
    for block in model.blocks:                 # k = 2 also tells the previous token: order shows
        block.mixer = ShawAttention(cfg, k=2)
    assert not torch.allclose(model(shuffled)[0, -1], model(idx)[0, -1])
    with pytest.raises(ValueError, match="k must be"):
        ShawAttention(cfg, k=-1)


def test_rope_scores_depend_on_the_distance_only():
    torch.manual_seed(0)
    rot = Rotary(ModelConfig(n_embd=16, n_heads=2))
    q, k = torch.randn(8), torch.randn(8)
    Q = rot(q.expand(1, 1, 20, 8))[0, 0]                               # the same vector at every position
    K = rot(k.expand(1, 1, 20, 8))[0, 0]
    S = Q @ K.T                                                        # (20, 20)
    for off in (-3, 0, 5):
        diag = torch.diagonal(S, off)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag))
    torch.testing.assert_close(Q[0], q)                                # position 0: no rotation
    with pytest.raises(ValueError, match="even"):
        Rotary(ModelConfig(n_embd=6, n_heads=2))


def test_alibi_bias_is_the_slope_times_the_distance():
    cfg = ModelConfig(n_embd=16, n_heads=4)
    bias = ALiBi(cfg)(torch.zeros(1, 4, 5, 4))
    assert bias.shape == (1, 4, 5, 5)
    assert bias[0, 0, 4, 1].item() == pytest.approx(-3 * 2 ** -2)      # head 1: m = 2^(-8/4), distance 3
    assert bias[0, 3, 4, 0].item() == pytest.approx(-4 * 2 ** -8)
    assert torch.equal(distances(3), torch.tensor([[0, 1, 2], [-1, 0, 1], [-2, -1, 0]]))


@pytest.mark.parametrize("name", RELATIVE + ["sinusoidal"])
def test_relative_models_run_on_contexts_longer_than_training(name):
    torch.manual_seed(0)
    model = build_model(name, ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=16)).eval()
    x = torch.randint(5, 50, (1, 40))
    assert model(x).shape == (1, 40, 54)
    torch.testing.assert_close(model(x[:, :10]), model(x)[:, :10], atol=1e-5, rtol=1e-5)   # causal: prefix fixed


def test_learned_positions_stop_at_their_table():
    model = build_model("learned-positions", ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=16))
    with pytest.raises(ValueError, match="learned positions stop at 16"):
        model(torch.randint(5, 50, (1, 17)))


def test_relative_global_direct_and_skew_models_agree():
    torch.manual_seed(0)
    cfg = ModelConfig(n_embd=16, n_heads=2, context=12)
    fast = BiasedAttention(cfg, RelativeGlobal(cfg))
    slow = BiasedAttention(cfg, RelativeGlobal(cfg, use_skew=False), fast=False)
    slow.load_state_dict(fast.state_dict())
    x = torch.randn(3, 12, 16)
    torch.testing.assert_close(fast(x), slow(x))


def test_bench_hands_the_same_relative_term_to_sdpa():
    """bench's 'SDPA + relative bias' row computes what the skew row computes, with the same weights."""
    from musictx_lite.study.bench import implementations

    torch.manual_seed(0)
    cfg = ModelConfig(n_embd=32, n_heads=4, context=16)
    impls = implementations()
    skewed, sdpa = impls["skew"].build(cfg), impls["SDPA + relative bias"].build(cfg)
    sdpa.load_state_dict(skewed.state_dict())
    x = torch.randn(2, 16, 32)
    torch.testing.assert_close(sdpa(x), skewed(x), atol=1e-5, rtol=1e-5)
