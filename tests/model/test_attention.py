import math

import pytest
import torch
import torch.nn as nn

from musictx_lite import ModelConfig, build_model
from musictx_lite.io.tokens import MASK, PAD
from musictx_lite.models.attention import (
    CausalHead,
    Head,
    MultiHeadAttention,
    MultiHeadLoop,
    attention,
    attention_fast,
    causal_mask,
    recording,
)
from musictx_lite.models.blocks import Block, FeedForward, LayerNorm
from musictx_lite.models.decoder import Decoder
from musictx_lite.models.fill import VoiceFill, evaluate_fill_nll, hide
from musictx_lite.models.relative import BiasedAttention

CFG = ModelConfig(n_embd=32, n_heads=4, n_layers=2, context=16)


def test_attention_matches_the_formula_and_weights_sum_to_one():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 5, 8), torch.randn(3, 5, 8), torch.randn(3, 5, 6)
    out, w = attention(q, k, v)
    ref = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(8), -1)     # divided by sqrt(d_k), not multiplied
    torch.testing.assert_close(w, ref)
    torch.testing.assert_close(out, ref @ v)
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 5))
    _, wm = attention(q, k, v, causal_mask(5))
    assert (wm.triu(1) == 0).all() and wm[:, 0, 0].eq(1).all()


def test_unmasked_head_is_permutation_equivariant():
    torch.manual_seed(0)
    head = Head(16, 8)
    x = torch.randn(2, 7, 16)
    perm = torch.randperm(7)
    torch.testing.assert_close(head(x[:, perm]), head(x)[:, perm])
    masked = CausalHead(16, 8)
    assert not torch.allclose(masked(x[:, perm]), masked(x)[:, perm])   # the mask breaks the symmetry


@pytest.mark.parametrize("module", [lambda: CausalHead(32, 8), lambda: MultiHeadLoop(CFG),
                                    lambda: MultiHeadAttention(CFG, fast=False), lambda: MultiHeadAttention(CFG),
                                    lambda: Block(CFG), lambda: build_model("transformer", CFG)])
def test_causality_by_perturbation(module):
    torch.manual_seed(0)
    m = module().eval()
    if isinstance(m, Decoder):
        x = torch.randint(5, 50, (2, 12))
        x2 = x.clone()
        x2[:, 7:] = torch.randint(5, 50, (2, 5))
    else:
        x = torch.randn(2, 12, 32)
        x2 = x.clone()
        x2[:, 7:] += torch.randn(2, 5, 32)
    y, y2 = m(x), m(x2)
    torch.testing.assert_close(y[:, :7], y2[:, :7])
    assert not torch.allclose(y[:, 7:], y2[:, 7:])


def test_loop_batched_sdpa_and_torch_agree():
    torch.manual_seed(0)
    loop = MultiHeadLoop(CFG).eval()
    batched = MultiHeadAttention(CFG, fast=False).load_from_loop(loop).eval()
    fast = MultiHeadAttention(CFG, fast=True).load_from_loop(loop).eval()
    torch_mha = batched.to_torch().eval()
    x = torch.randn(3, 10, 32)
    ref = loop(x)
    torch.testing.assert_close(batched(x), ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(fast(x), ref, atol=1e-6, rtol=1e-5)
    out = torch_mha(x, x, x, attn_mask=~causal_mask(10), need_weights=False)[0]
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-5)
    with recording() as ws:
        batched(x)
        loop(x)                                              # the loop's heads record one by one
    assert len(ws) == 1 + 4 and ws[0].shape == (3, 4, 10, 10)
    torch.testing.assert_close(ws[0][:, 1], ws[1 + 1])
    with recording() as ws:
        with recording() as inner:                           # the innermost recording gets them
            y = fast(x)                                      # SDPA gives no weights: the explicit path runs
    assert ws == [] and len(inner) == 1 and torch.allclose(inner[0].sum(-1), torch.ones(3, 4, 10))
    torch.testing.assert_close(y, ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(inner[0], recorded(batched, x))     # the same weights on both paths


def test_layernorm_normalises_each_token_over_features():
    torch.manual_seed(0)
    x = torch.randn(4, 6, 32) * 5 + 3
    ln = LayerNorm(32)
    y = ln(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(4, 6), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(4, 6), atol=1e-3, rtol=0)
    torch.testing.assert_close(y, nn.LayerNorm(32)(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ln(x[:1]), y[:1])                     # independent of the rest of the batch


def test_pre_ln_block_shapes_and_residual_identity():
    torch.manual_seed(0)
    block = Block(CFG, pre_ln=True)
    x = torch.randn(2, 9, 32)
    assert block(x).shape == (2, 9, 32)
    with torch.no_grad():                     # zero the last layer of each branch: the block is the identity
        block.mixer.proj.weight.zero_(); block.mixer.proj.bias.zero_()   # noqa: E702
        block.ff.net[2].weight.zero_(); block.ff.net[2].bias.zero_()   # noqa: E702
    torch.testing.assert_close(block(x), x)
    post = Block(CFG, pre_ln=False)
    with torch.no_grad():
        post.mixer.proj.weight.zero_(); post.mixer.proj.bias.zero_()     # noqa: E702
        post.ff.net[2].weight.zero_(); post.ff.net[2].bias.zero_()     # noqa: E702
    torch.testing.assert_close(post(x), nn.functional.layer_norm(nn.functional.layer_norm(x, (32,)), (32,)))
    assert FeedForward(CFG)(x).shape == x.shape


def test_decoder_shapes_and_parameter_count():
    m = build_model("transformer", CFG)
    assert m(torch.randint(0, 54, (2, 16))).shape == (2, 16, CFG.vocab_size)
    C, V, L = 32, CFG.vocab_size, 2
    per_block = (3 * C * C) + (C * C + C) + 2 * 2 * C + (C * 4 * C + 4 * C) + (4 * C * C + C)
    assert sum(p.numel() for p in m.parameters()) == V * C + L * per_block + 2 * C + C * V + V


def test_registered_models_build_and_run():
    from musictx_lite import MODELS

    for name in MODELS:
        m = build_model(name, CFG)
        x = torch.randint(5, 50, (2, 4 if name == "fill" else 16))
        assert m(x).shape == (2, x.shape[1], m.cfg.vocab_size)
        assert m.cfg.vocab_size == (390 if name.startswith("piano") else CFG.vocab_size)   # chapter 13's events


def test_fill_hides_one_voice_and_scores_it(chorales):
    steps = torch.tensor([[60, 55, 52, 48], [62, 57, 53, 45]])
    x, y = hide(steps, torch.tensor([1, 3]))
    assert x.tolist() == [[60, MASK, 52, 48], [62, 57, 53, MASK]]
    assert y.tolist() == [[PAD, 55, PAD, PAD], [PAD, PAD, PAD, 45]]
    torch.manual_seed(0)
    m = VoiceFill(CFG)
    nn.init.zeros_(m.readout.weight)
    nn.init.zeros_(m.readout.bias)
    assert evaluate_fill_nll(m, chorales.valid[:2]) == pytest.approx(math.log(CFG.vocab_size), rel=1e-5)


def test_generate_refuses_a_fill_model():
    from musictx_lite import generate

    with pytest.raises(ValueError, match="does not continue"):
        generate(VoiceFill(CFG), None, 2)


def test_attention_core_bias_and_mask_on_both_paths():
    """The score bias is added before masking: a huge bias on a masked key still gives it weight 0,
    and the fused path (SDPA) computes the readable path's output for every combination."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)   # (B, nh, T, hs)
    bias = torch.randn(2, 3, 6, 6)
    bias[..., 0, 5] = 1e4                                      # query 0 would love key 5, in its future
    band = (torch.arange(6)[:, None] - torch.arange(6)[None, :]).abs() <= 2                  # (T, T)
    for mask, b, causal in [(None, None, True), (None, bias, True), (band, None, True), (band, bias, False),
                            (band, bias, True), (None, None, False)]:
        out, w = attention_fast(q, k, v, causal, mask, b, need_weights=True)
        ref = q @ k.transpose(-2, -1) / math.sqrt(8) + (0 if b is None else b)
        allowed = torch.ones(6, 6, dtype=torch.bool)
        allowed = allowed & band if mask is not None else allowed
        allowed = allowed & causal_mask(6) if causal else allowed
        ref = torch.softmax(ref.masked_fill(~allowed, float("-inf")), -1)
        torch.testing.assert_close(w, ref)
        assert (w[..., ~allowed] == 0).all()
        fast, none = attention_fast(q, k, v, causal, mask, b)
        assert none is None
        torch.testing.assert_close(fast, out, atol=1e-5, rtol=1e-5)
    assert attention_fast(q, k, v, True, bias=bias, need_weights=True)[1][..., 0, 5].eq(0).all()


def test_biased_attention_adds_its_score_bias():
    torch.manual_seed(0)

    class Shift(nn.Module):                                  # a bias that depends on the queries, as relative logits do
        def forward(self, q):
            self.q = q                                       # kept, to rebuild the bias below
            return q.sum(-1, keepdim=True) * torch.linspace(0, 1, q.shape[-2])     # (B, nh, T, T): varies by key

    shift = Shift()
    mha = BiasedAttention(CFG, shift).eval()
    x = torch.randn(2, 10, 32)
    with recording() as ws:
        y = mha(x)
    (w,) = ws
    torch.testing.assert_close(mha(x), y, atol=1e-5, rtol=1e-5)                             # SDPA path agrees
    lags = torch.arange(10)[:, None] - torch.arange(10)[None, :]
    assert (w[..., lags < 0] == 0).all() and (w[..., lags >= 0] > 0).all()      # the bias never unmasks
    assert torch.allclose(w.sum(-1), torch.ones(2, 4, 10))
    # reference: the same weights without the bias give softmax(QK^T / sqrt(d)); adding the bias to their
    # log and normalising again must give the biased weights
    plain = MultiHeadAttention(CFG, causal=True).eval()
    plain.load_state_dict(mha.state_dict())
    with recording() as ws0:
        y0 = plain(x)
    (w0,) = ws0
    bias = shift(shift.q)                                                                  # (B, nh, T, T)
    ref = torch.softmax((w0.log() + bias).masked_fill(lags < 0, float("-inf")), -1)
    torch.testing.assert_close(w, ref, atol=1e-5, rtol=1e-5)
    assert (y - y0).abs().max() > 1e-2                                                     # the bias mattered


def test_attention_weights_from_any_decoder_layer():
    from musictx_lite.models.attention import attention_weights

    torch.manual_seed(0)
    m = build_model("transformer", CFG).eval()
    tokens = torch.randint(5, 50, (12,))
    ws = [attention_weights(m, tokens, layer=i) for i in range(CFG.n_layers)]
    assert all(w.shape == (CFG.n_heads, 12, 12) for w in ws) and not torch.allclose(ws[0], ws[1])
    for w in ws:
        torch.testing.assert_close(w.sum(-1), torch.ones(CFG.n_heads, 12))
        assert (w[:, ~causal_mask(12)] == 0).all()
    x = m.tok_emb(tokens[None])
    with recording() as w0:
        m.blocks[0].mixer(m.blocks[0].ln1(x))                                                # layer 0 by hand
    torch.testing.assert_close(ws[0], w0[0][0])
    with pytest.raises(ValueError, match="computes no attention weights"):
        attention_weights(build_model("fnet-conv", CFG), tokens)
    lstm_w = attention_weights(build_model("lstm-attention", CFG), tokens)                  # one (T, T) matrix
    assert lstm_w.shape == (12, 12)


def recorded(layer, x):
    """The one weight tensor ``layer`` records on ``x``."""
    with recording() as ws:
        layer(x)
    (w,) = ws
    return w
