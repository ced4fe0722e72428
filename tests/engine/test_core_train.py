"""``core_train``, the loop chapter 1 shows first, trains exactly as ``train`` does in the plain setting."""
import pytest
import torch

from musictx_lite import ModelConfig, TrainConfig, build_model, train
from musictx_lite.engine.training import core_train

PLAIN = dict(batch_size=4, max_steps=6, lr=3e-3, warmup_steps=2, eval_every=6, eval_pieces=2)


def twins(name: str, cfg: ModelConfig):
    """Two models with the same initial weights."""
    torch.manual_seed(0)
    a, b = build_model(name, cfg), build_model(name, cfg)
    b.load_state_dict(a.state_dict())
    return a, b


@pytest.mark.parametrize("name,dropout", [("lstm", 0.0), ("relative", 0.2)])
def test_core_train_equals_train_bit_for_bit(chorales, name, dropout):
    """Same losses and same final weights, exactly: dropout's random numbers included."""
    cfg = TrainConfig(**PLAIN)
    core, full = twins(name, ModelConfig(n_embd=24, n_layers=1, n_heads=2, context=32, dropout=dropout))
    losses = core_train(core, chorales, cfg, device="cpu")
    hist = train(full, chorales, cfg, device="cpu", progress=False)
    assert len(losses) == cfg.max_steps and losses == hist.train_loss
    for (k, p), q in zip(core.named_parameters(), full.parameters()):
        assert torch.equal(p, q), k
    assert losses[-1] < losses[0]                                   # it learnt something


def test_another_seed_or_schedule_gives_other_weights(chorales):
    """The equality above is not trivial: the seed and the learning rate reach the weights."""
    cfg = TrainConfig(**PLAIN)
    small = ModelConfig(n_embd=24, n_heads=2, context=32)
    ref, other_seed = twins("lstm", small)
    _, other_lr = twins("lstm", small)
    base = core_train(ref, chorales, cfg, device="cpu")
    assert core_train(other_seed, chorales, TrainConfig(**{**PLAIN, "seed": 1}), device="cpu") != base
    assert core_train(other_lr, chorales, TrainConfig(**{**PLAIN, "lr": 1e-3}), device="cpu")[0] == base[0]
    assert not torch.equal(next(ref.parameters()), next(other_seed.parameters()))
    assert not torch.equal(next(ref.parameters()), next(other_lr.parameters()))


@pytest.mark.parametrize("kw", [dict(transpose=True), dict(cpu_bf16=True), dict(micro_batch=2),
                                dict(teachers=("runs/t",))])
def test_core_train_refuses_what_only_train_does(chorales, kw):
    model = build_model("lstm", ModelConfig(n_embd=8, n_heads=2, context=16))
    with pytest.raises(ValueError, match="plain loop"):
        core_train(model, chorales, TrainConfig(**{**PLAIN, **kw}), device="cpu")
