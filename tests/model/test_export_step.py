"""The sampler as one step to export (models/export_step.py): the rows the page keeps in, the new tokens'
rows out. It must give the model's own logits: a prompt in one call (with the one unused row it passes),
then one token per call, for the relative decoder and for the harmoniser; and refuse other models."""
import math

import pytest
import torch
import torch.nn.functional as F

from musictx_lite import ModelConfig, build_model
from musictx_lite.models.export_step import DecoderStep, HarmoniserStep, MelodyMemory, empty_cache, relative_step, step

CFG = ModelConfig(n_embd=32, n_heads=2, n_layers=2, context=24)


def calls(module, tokens, prompt, *memory):
    """The logits of every token as the page asks for them: ``prompt`` tokens at once, then one at a time."""
    cache = empty_cache(module.model)
    out = [step(module, tokens[:, :prompt], 0, cache, *memory)]
    out += [step(module, tokens[:, t:t + 1], t, cache, *memory) for t in range(prompt, tokens.shape[1])]
    return torch.cat(out, dim=1), cache


@pytest.mark.parametrize("prompt", [1, 7, 24])
def test_decoder_step_gives_the_models_logits(prompt):
    torch.manual_seed(0)
    model = build_model("relative", CFG).eval()
    tokens = torch.randint(5, 54, (1, 24))
    got, cache = calls(DecoderStep(model), tokens, prompt)
    with torch.no_grad():
        torch.testing.assert_close(got, model(tokens), rtol=1e-5, atol=1e-5)
    assert cache[0].shape == (1, 24, 2, 16) and cache[0].abs().sum(-1).gt(0).all()     # every row written


def test_harmoniser_step_gives_the_models_logits():
    torch.manual_seed(0)
    model = build_model("harmoniser", CFG).eval()
    for p in model.parameters():                    # cross-attention starts at zero: give it weight
        torch.nn.init.normal_(p, std=0.2) if p.dim() > 1 else None
    tokens = torch.randint(5, 54, (1, 24))
    with torch.no_grad():
        want = model(tokens)
        memory = MelodyMemory(model)(tokens[:, 1::4])                   # the window's melody
        assert len(memory) == 4 and memory[0].shape == (1, 2, 6, 16)       # k, v of each block
    got, _ = calls(HarmoniserStep(model), tokens, 5, memory)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    other = MelodyMemory(model)(torch.randint(5, 54, (1, 6)))           # another melody changes the logits
    assert not torch.allclose(calls(HarmoniserStep(model), tokens, 5, other)[0], want, atol=1e-3)


def test_relative_step_hides_unwritten_rows_and_the_future():
    torch.manual_seed(0)
    attn = build_model("relative", CFG).blocks[0].mixer.eval()
    x = torch.randn(1, 3, 32)
    junk = [torch.randn(1, 10, 2, 16) * 100 for _ in range(2)]          # rows 4..9 are not the past
    kept = [j.clone() for j in junk]
    for t in kept:
        t[:, 4:] = 0
    with torch.no_grad():
        a, k, v = relative_step(attn, x, torch.tensor(4), *junk)
        b, _, _ = relative_step(attn, x, torch.tensor(4), *kept)
        c, _, _ = relative_step(attn, torch.cat([x[:, :2], torch.randn(1, 1, 32)], 1), torch.tensor(4), *junk)
    torch.testing.assert_close(a, b)                                    # what lies past pos never counts
    torch.testing.assert_close(a[:, :2], c[:, :2])                      # nor does a later new token
    assert k.shape == v.shape == (1, 3, 2, 16)
    # one query, by the definition: softmax((q K^T + q E_{j-i+L-1}^T) / sqrt(d)) V over rows 0..4
    q, kk, vv = attn.split_heads(x)
    keys, vals = torch.cat([kept[0][:, :4].transpose(1, 2), kk[:, :, :1]], 2), \
        torch.cat([kept[1][:, :4].transpose(1, 2), vv[:, :, :1]], 2)
    E = attn.score_bias.E[:, 24 - 5:]                                   # distances -4..0
    s = (q[:, :, :1] @ keys.transpose(-2, -1) + q[:, :, :1] @ E.transpose(-2, -1)) / math.sqrt(16)
    want = attn.merge_heads(F.softmax(s, -1) @ vals)
    torch.testing.assert_close(a[:, :1], want.detach(), rtol=1e-5, atol=1e-5)


def test_other_models_are_refused():
    for name in ("transformer", "local"):
        with pytest.raises(ValueError, match="relative"):
            DecoderStep(build_model(name, CFG))
