"""Chapter 12's third way: Coconet's fill-in model, its random masks, its score, and Gibbs sampling."""
import math

import numpy as np
import pytest
import torch

from musictx_lite import ModelConfig, TrainConfig, build_model, train
from musictx_lite.io.tokens import MASK, PAD, encode
from musictx_lite.models.coconet import INFILL, MaskedCrops, gibbs_schedule, hide_lower_voices, melody_only_nll

CFG = ModelConfig(n_embd=32, n_heads=2, n_layers=2, context=32)


def test_masked_crops_hide_a_random_share_and_target_only_what_they_hide(chorales):
    crops = MaskedCrops(chorales.train, 32, seed=0)
    x, y = crops.batch(64)
    hidden = x == MASK
    assert hidden.any(1).all()                                       # at least one token per crop
    assert ((y != PAD) == hidden).all()                              # a target exactly where hidden
    shares = hidden.float().mean(1)
    assert shares.min() < 0.2 and shares.max() > 0.8                 # the rate is drawn per crop
    again = MaskedCrops(chorales.train, 32, seed=0).batch(64)
    assert torch.equal(again[0], x) and torch.equal(again[1], y)
    with pytest.raises(ValueError, match="multiple of 4"):
        MaskedCrops(chorales.train, 30)


def test_the_model_sees_both_ways_and_the_score_reads_the_melody_only(chorales):
    torch.manual_seed(0)
    m = build_model("coconet", CFG).eval()
    s = torch.as_tensor(encode(chorales.valid[0].pitches)[1:33])[None]
    x, y = hide_lower_voices(s)
    assert (x[0, 0::4] == s[0, 0::4]).all() and (x[0, 1::4] == MASK).all() and (y[0, 0::4] == PAD).all()
    with torch.no_grad():
        base = m(x)
        later = x.clone()
        later[0, 28] = 30 if x[0, 28] != 30 else 31                  # a later soprano note
        assert (m(later) - base)[0, :28].abs().max() > 1e-4          # moves the earlier predictions
    nll = melody_only_nll(m, chorales.valid[:2])
    assert nll == pytest.approx(math.log(54), rel=0.2)               # untrained: about uniform
    assert INFILL.evaluate(m, chorales.valid[:2]) == nll


def test_gibbs_schedule_anneals_from_much_to_little():
    s = gibbs_schedule(100)
    assert s[0] == pytest.approx(0.9) and s[-1] == pytest.approx(0.05) and (np.diff(s) <= 0).all()
    np.testing.assert_allclose(s[75:], 0.05)


def test_coconet_trains_with_the_books_loop_and_harmonises_by_gibbs_sampling(chorales):
    from musictx_lite.engine.harmonise import harmonise
    from musictx_lite.io.data import Splits

    torch.manual_seed(0)
    m = build_model("coconet", CFG)
    small = Splits(chorales.train, chorales.valid[:4], chorales.test[:4], source=chorales.source)
    before = melody_only_nll(m, small.valid)
    cfg = TrainConfig(batch_size=16, max_steps=60, lr=1e-2, warmup_steps=4, eval_every=30, ckpt_every=30,
                      transpose=True)
    h = train(m, small, cfg, progress=False)
    assert h.valid_nll[-1] < before - 0.5 and np.mean(h.train_loss[-5:]) < np.mean(h.train_loss[:5]) - 0.5
    melody = chorales.valid[3].pitches[:12, 0]
    grid = harmonise(m.eval(), melody, seed=2, n_iter=8)
    assert grid.shape == (12, 4)
    np.testing.assert_array_equal(grid[:, 0], melody)
    np.testing.assert_array_equal(grid, harmonise(m, melody, seed=2, n_iter=8))
    with pytest.raises(ValueError, match="Gibbs sampling has none"):
        harmonise(m, melody, top_k=3)


def test_windowed_logits_read_each_token_in_a_window_of_the_context():
    """A raster longer than the context is read in windows of the context every half context; each token's
    logits are those of one direct pass over its window, with at least a quarter context on each side inside
    the piece; a raster that fits is one pass."""
    from musictx_lite.models.coconet import windowed_logits

    torch.manual_seed(0)
    m = build_model("coconet", ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=32)).eval()
    x = torch.randint(4, 40, (1, 4 * 29))                                 # 116 tokens, context 32
    with torch.no_grad():
        got = windowed_logits(m, x)
        torch.testing.assert_close(windowed_logits(m, x[:, :32]), m(x[:, :32])[0])
        starts = [0, 16, 32, 48, 64, 80, 84]                              # every 16, then the last window
        for i in range(x.shape[1]):
            fits = [a for a in starts if a <= i < a + 32]
            best = max(fits, key=lambda a: min(i - a, a + 31 - i))
            torch.testing.assert_close(got[i], m(x[:, best: best + 32])[0, i - best])
            margin = min(i - best, best + 31 - i)
            assert margin >= 8 or i < 8 or i >= x.shape[1] - 8
