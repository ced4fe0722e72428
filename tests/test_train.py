import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from musictx_lite import ModelConfig, TrainConfig, build_model, evaluate_nll, load_checkpoint, train
from musictx_lite.tokens import BOS, PAD, VOCAB_SIZE
from musictx_lite.tasks import Crops
from musictx_lite.training import lr_at

SMALL = ModelConfig(n_embd=24, n_heads=2, block_size=32)


def cfg(**kw):
    base = dict(batch_size=4, max_steps=20, lr=3e-3, warmup_steps=3, eval_every=10, ckpt_every=5, eval_pieces=4)
    return TrainConfig(**{**base, **kw})


def test_lr_schedule():
    c = TrainConfig(lr=1.0, warmup_steps=10, max_steps=110, min_lr_ratio=0.1)
    assert lr_at(0, c) == pytest.approx(0.1) and lr_at(9, c) == pytest.approx(1.0)
    assert lr_at(60, c) == pytest.approx(0.55)                  # halfway through the cosine
    assert lr_at(110, c) == pytest.approx(0.1)
    assert all(lr_at(s, c) >= lr_at(s + 1, c) for s in range(10, 110))


def test_crops_are_step_aligned_shifted_pairs(chorales):
    crops = Crops(chorales.train, 32, seed=1)
    x, y = crops.batch(64)
    assert x.shape == y.shape == (64, 32)
    torch.testing.assert_close(x[:, 1:], y[:, :-1])
    # every crop starts at BOS or at a bass token: it is a slice 4k.. of some piece
    from musictx_lite.tokens import encode

    seqs = [torch.as_tensor(encode(p.pitches)) for p in chorales.train]
    for row in x[:8]:
        assert any(any(torch.equal(s[4 * k: 4 * k + 32], row) for k in range((len(s) - 33) // 4 + 1)) for s in seqs)
    assert (x[:, 1:] != BOS).all()


class Bigram(nn.Module):
    """Logits depend on the current token only: windowed and full evaluation must agree."""

    def __init__(self, context=None):
        super().__init__()
        self.cfg = ModelConfig(block_size=16)
        self.table = nn.Embedding(VOCAB_SIZE, VOCAB_SIZE)
        self.context = context

    def forward(self, idx):
        return self.table(idx)


def test_evaluate_nll_windows_match_full_pass(chorales):
    torch.manual_seed(0)
    full = Bigram()
    windowed = Bigram(context=16)
    windowed.load_state_dict(full.state_dict())
    pieces = chorales.valid[:3]
    assert evaluate_nll(windowed, pieces) == pytest.approx(evaluate_nll(full, pieces), rel=1e-6)
    # an untrained model is near uniform: NLL close to log V
    nn.init.zeros_(full.table.weight)
    assert evaluate_nll(full, pieces) == pytest.approx(math.log(VOCAB_SIZE), rel=1e-6)


def test_loss_decreases(chorales):
    torch.manual_seed(0)
    m = build_model("lstm", SMALL)
    before = evaluate_nll(m, chorales.valid[:4])
    h = train(m, chorales, cfg(max_steps=40, lr=1e-2), progress=False)
    assert np.mean(h.train_loss[-5:]) < np.mean(h.train_loss[:5]) - 0.4
    assert all(a > b for a, b in zip(h.valid_nll, h.valid_nll[1:]))
    assert h.valid_nll[-1] < before - 0.5
    assert h.eval_step == [10, 20, 30, 40] and len(h.train_loss) == 40


@pytest.mark.parametrize("name", ["lstm", "lstm-attention"])
def test_resumed_run_equals_uninterrupted(chorales, tmp_path, name):
    torch.manual_seed(0)
    ref = build_model(name, SMALL)
    h_ref = train(ref, chorales, cfg(), out_dir=tmp_path / "ref", progress=False)

    def interrupt(step, loss):
        if step == 13:
            raise KeyboardInterrupt

    torch.manual_seed(0)
    m = build_model(name, SMALL)
    with pytest.raises(KeyboardInterrupt):
        train(m, chorales, cfg(), out_dir=tmp_path / "run", progress=False, on_step=interrupt)
    assert torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)["step"] == 13
    torch.manual_seed(123)                                      # a fresh process: different init, resumed anyway
    m2 = build_model(name, SMALL)
    h = train(m2, chorales, cfg(), out_dir=tmp_path / "run", progress=False)
    for (k, a), b in zip(ref.state_dict().items(), m2.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=k)
    assert h.train_loss == h_ref.train_loss and h.valid_nll == h_ref.valid_nll

    loaded, ck = load_checkpoint(tmp_path / "run")
    assert ck["step"] == 20 and ck["model_name"] == name
    x = torch.randint(4, 50, (1, 12))
    torch.testing.assert_close(loaded(x), ref.eval()(x))


def test_nan_loss_stops_and_keeps_last_good_checkpoint(chorales, tmp_path):
    torch.manual_seed(0)
    m = build_model("lstm", SMALL)

    def poison(step, loss):
        if step == 12:
            with torch.no_grad():
                m.readout.bias.fill_(float("nan"))

    with pytest.raises(FloatingPointError, match=r"loss is nan at step 12.*step 10\)"):
        train(m, chorales, cfg(), out_dir=tmp_path, progress=False, on_step=poison)
    good, ck = load_checkpoint(tmp_path)
    assert ck["step"] == 10
    assert all(torch.isfinite(p).all() for p in good.parameters())


def test_checkpoint_of_another_config_is_not_overwritten(chorales, tmp_path):
    train(build_model("lstm", SMALL), chorales, cfg(max_steps=5), out_dir=tmp_path, progress=False)
    before = (tmp_path / "ckpt.pt").read_bytes()
    with pytest.raises(ValueError, match="different model or config"):
        train(build_model("lstm-attention", SMALL), chorales, cfg(max_steps=5), out_dir=tmp_path,
              progress=False)
    assert (tmp_path / "ckpt.pt").read_bytes() == before


def test_seeded_runs_are_reproducible(chorales):
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        runs.append(train(build_model("lstm", SMALL), chorales, cfg(max_steps=6), progress=False).train_loss)
    assert runs[0] == runs[1]
    assert PAD == 0


def test_prefix_nll_equals_full_nll_for_causal_models_only(chorales):
    from musictx_lite import evaluate_prefix_nll

    torch.manual_seed(0)
    pieces = [chorales.valid[0]]
    for name in ("lstm", "attention"):
        m = build_model(name, ModelConfig(n_embd=16, n_heads=2, block_size=64))
        full = evaluate_nll(m, [type(pieces[0])("x", pieces[0].pitches[:8])])
        assert evaluate_prefix_nll(m, pieces, max_tokens=32) == pytest.approx(full, rel=1e-5)
    leaky = build_model("attention-unmasked", ModelConfig(n_embd=16, n_heads=2, block_size=64))
    short = [type(pieces[0])("x", pieces[0].pitches[:8])]
    assert abs(evaluate_prefix_nll(leaky, pieces, max_tokens=32) - evaluate_nll(leaky, short)) > 1e-3


def test_evaluating_restores_the_mode_even_on_error():
    from musictx_lite.tasks import evaluating

    m = nn.Linear(2, 2).train()
    with pytest.raises(RuntimeError):
        with evaluating(m):
            assert not m.training
            raise RuntimeError("boom")
    assert m.training


def test_an_unregistered_model_gets_a_usable_checkpoint(chorales, tmp_path):
    from musictx_lite.tasks import NEXT_TOKEN

    class MyBigram(Bigram):
        task = NEXT_TOKEN

    torch.manual_seed(0)
    m = MyBigram(context=16)
    train(m, chorales, cfg(max_steps=4), out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"unregistered model \(.*MyBigram\).*model=\.\.\."):
        load_checkpoint(tmp_path)
    fresh = MyBigram(context=16)
    loaded, ck = load_checkpoint(tmp_path, model=fresh)
    assert ck["step"] == 4 and loaded is fresh
    torch.testing.assert_close(fresh.table.weight, m.table.weight.cpu())
    with pytest.raises(TypeError, match="names no task"):
        train(Bigram(), chorales, cfg(max_steps=2), progress=False)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint\n", bytes(range(256)) * 4])
def test_a_file_that_is_not_a_checkpoint_is_a_clear_error(tmp_path, content):
    from musictx_lite.training import read_checkpoint

    (tmp_path / "ckpt.pt").write_bytes(content)
    with pytest.raises(ValueError, match="is not a musictx_lite checkpoint"):
        load_checkpoint(tmp_path)
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")         # a torch file, but not ours
    with pytest.raises(ValueError, match="lacks"):
        read_checkpoint(tmp_path / "other.pt")


@pytest.mark.parametrize("kw", [dict(max_steps=0), dict(batch_size=-1), dict(lr=0.0), dict(eval_every=0),
                                dict(warmup_steps=-1), dict(eval_pieces=0)])
def test_invalid_train_configs_raise(kw):
    with pytest.raises(ValueError):
        TrainConfig(**kw)
