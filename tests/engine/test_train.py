import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from musictx_lite import ModelConfig, TrainConfig, build_model, evaluate_nll, load_checkpoint, train
from musictx_lite.engine.precision import cpu_has_bf16
from musictx_lite.engine.training import lr_at
from musictx_lite.io.tokens import BOS, PAD, VOCAB_SIZE
from musictx_lite.models.tasks import Crops

SMALL = ModelConfig(n_embd=24, n_heads=2, context=32)


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
    from musictx_lite.io.tokens import encode

    seqs = [torch.as_tensor(encode(p.pitches)) for p in chorales.train]
    for row in x[:8]:
        assert any(any(torch.equal(s[4 * k: 4 * k + 32], row) for k in range((len(s) - 33) // 4 + 1)) for s in seqs)
    assert (x[:, 1:] != BOS).all()


class Bigram(nn.Module):
    """Logits depend on the current token only: windowed and full evaluation must agree."""

    def __init__(self, context=None):
        super().__init__()
        self.cfg = ModelConfig(context=16)
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


@pytest.mark.parametrize("name,context", [("relative", 32), ("lstm", None)])
def test_token_nlls_are_evaluate_nll_token_by_token(chorales, name, context):
    """Every target of every piece, in order, scored once: their mean is evaluate_nll, and each window's
    targets are the full pass's where the window holds the whole history."""
    from musictx_lite.io.tokens import encode
    from musictx_lite.models.tasks import token_nlls, windows

    torch.manual_seed(0)
    m = build_model(name, SMALL)
    pieces = chorales.valid[:3]
    per = token_nlls(m, pieces)
    assert [len(t) for t in per] == [len(encode(p.pitches)) - 1 for p in pieces]
    assert np.concatenate(per).mean() == pytest.approx(evaluate_nll(m, pieces), rel=1e-6)
    if context:
        s = torch.as_tensor(encode(pieces[0].pitches))
        X, Y = windows(s, 32)
        assert X.shape == Y.shape == (len(X), 32) and (Y != PAD).sum() == len(s) - 1
        with torch.no_grad():                                   # the first window: the first 32 targets
            first = torch.nn.functional.cross_entropy(m(s[None, :32])[0], s[1:33], reduction="none")
        np.testing.assert_allclose(per[0][:32], first.double().numpy(), rtol=1e-5)


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


@pytest.mark.parametrize("at, message, kept", [
    (12, r"loss is nan at step 12.*step 10\)", 10),                               # the last good one is kept
    (2, r"loss is nan at step 2; training stopped and no checkpoint was written yet", None)])
def test_nan_loss_stops_and_keeps_last_good_checkpoint(chorales, tmp_path, at, message, kept):
    torch.manual_seed(0)
    m = build_model("lstm", SMALL)

    def poison(step, loss):
        if step == at:
            with torch.no_grad():
                m.readout.bias.fill_(float("nan"))

    with pytest.raises(FloatingPointError, match=message):
        train(m, chorales, cfg(), out_dir=tmp_path, progress=False, on_step=poison)
    if kept is None:
        assert not (tmp_path / "ckpt.pt").exists()
        return
    good, ck = load_checkpoint(tmp_path)
    assert ck["step"] == kept
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
        m = build_model(name, ModelConfig(n_embd=16, n_heads=2, context=64))
        full = evaluate_nll(m, [type(pieces[0])("x", pieces[0].pitches[:8])])
        assert evaluate_prefix_nll(m, pieces, max_tokens=32) == pytest.approx(full, rel=1e-5)
    leaky = build_model("attention-unmasked", ModelConfig(n_embd=16, n_heads=2, context=64))
    short = [type(pieces[0])("x", pieces[0].pitches[:8])]
    assert abs(evaluate_prefix_nll(leaky, pieces, max_tokens=32) - evaluate_nll(leaky, short)) > 1e-3


def test_evaluating_restores_the_mode_even_on_error():
    from musictx_lite.models.tasks import evaluating

    m = nn.Linear(2, 2).train()
    with pytest.raises(RuntimeError):
        with evaluating(m):
            assert not m.training
            raise RuntimeError("boom")
    assert m.training


def test_an_unregistered_model_gets_a_usable_checkpoint(chorales, tmp_path):
    from musictx_lite.models.tasks import NEXT_TOKEN

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
    from musictx_lite.checkpoint import read_checkpoint

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


# ---------------------------------------------------------------- the paper-level recipe (chapter 11)

def test_transposed_crops_stay_in_the_vocabulary_and_use_every_shift(chorales):
    """Each transposed crop is its untransposed crop moved by one shift from its piece's range; over many
    crops every shift of that range appears; rests, BOS and PAD never move."""
    from musictx_lite.models.tasks import shift_range

    plain, moved = Crops(chorales.train[:3], 32, seed=4), Crops(chorales.train[:3], 32, seed=4, transpose=True)
    seen = {i: set() for i in range(3)}
    for _ in range(60):
        (x, _), (xt, _) = plain.batch(1), moved.batch(1)
        # the same crop (the transposition draw comes after the start draw): find its piece by its start
        pitched = x >= 5
        shift = set((xt - x)[pitched].tolist()) or {0}
        assert len(shift) == 1 and torch.equal(xt[~pitched], x[~pitched])
        assert ((xt[pitched] >= 5) & (xt[pitched] < VOCAB_SIZE)).all()
        piece = next(i for i, s in enumerate(plain.seqs) if any(
            torch.equal(s[4 * k: 4 * k + 32], x[0]) for k in range(int(plain.n_starts[i]))))
        lo, hi = shift_range(chorales.train[piece].pitches)
        assert lo <= shift.pop() <= hi
        seen[piece] |= set((xt - x)[pitched].tolist())
        plain.gen.set_state(moved.gen.get_state())              # keep both on the same crops
    assert any(len(s) >= 5 for s in seen.values())


def test_shift_range_keeps_every_note_inside():
    from musictx_lite.io.tokens import HIGHEST, LOWEST
    from musictx_lite.models.tasks import shift_range

    g = np.array([[60, 55, -1, 40], [62, 57, 50, 43]])
    lo, hi = shift_range(g)
    assert (lo, hi) == (LOWEST - 40, HIGHEST - 62)


def test_early_stopping_keeps_the_best_weights_and_resumes_exactly(chorales, tmp_path):
    """With keep_best and patience, the model ends with the weights of its best evaluation, the run stops after
    `patience` evaluations without a new best, and an interrupted run resumes to the same end."""
    kw = dict(max_steps=60, eval_every=4, ckpt_every=4, lr=5e-2, warmup_steps=1, keep_best=True, patience=2,
              transpose=True)
    torch.manual_seed(0)
    ref = build_model("transformer", SMALL)
    h = train(ref, chorales, cfg(**kw), out_dir=tmp_path / "ref", progress=False)
    assert h.best_nll == min(h.valid_nll) and h.best_step == h.eval_step[h.valid_nll.index(h.best_nll)]
    assert h.stopped_early and h.step[-1] < 60 and sum(s > h.best_step for s in h.eval_step) == 2
    assert evaluate_nll(ref, chorales.valid[:4]) == pytest.approx(h.best_nll, abs=1e-6)

    def interrupt(step, loss):
        if step == 7:
            raise KeyboardInterrupt

    torch.manual_seed(0)
    m = build_model("transformer", SMALL)
    with pytest.raises(KeyboardInterrupt):
        train(m, chorales, cfg(**kw), out_dir=tmp_path / "run", progress=False, on_step=interrupt)
    torch.manual_seed(1)
    m2 = build_model("transformer", SMALL)
    h2 = train(m2, chorales, cfg(**kw), out_dir=tmp_path / "run", progress=False)
    assert h2.valid_nll == h.valid_nll and h2.best_step == h.best_step and h2.stopped_early == h.stopped_early
    for (k, a), b in zip(ref.state_dict().items(), m2.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=k)
    torch.manual_seed(2)                                        # a finished run: resuming trains nothing more
    m3 = build_model("transformer", SMALL)
    h3 = train(m3, chorales, cfg(**kw), out_dir=tmp_path / "run", progress=False)
    assert h3.step == h2.step
    torch.testing.assert_close(m3.state_dict(), m2.state_dict(), rtol=0, atol=0)


def test_patience_stops_a_run_that_does_not_improve(chorales):
    torch.manual_seed(0)
    m = build_model("transformer", SMALL)
    h = train(m, chorales, cfg(max_steps=40, eval_every=2, lr=1e-9, warmup_steps=0, keep_best=True, patience=1,
                               min_lr_ratio=1.0), progress=False)
    # at lr 1e-9 the valid NLL barely moves: the first eval that fails to improve on the best ends the run
    assert h.stopped_early and h.step[-1] < 40 and len(h.eval_step) >= 2


@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no bf16 in hardware: training keeps float32")
def test_cpu_bf16_trains_with_float32_weights(chorales):
    """bf16 autocast computes the steps (the losses differ from float32's in the third digit, not the first)
    while the weights stay float32."""
    runs = {}
    for bf16 in (True, False):
        torch.manual_seed(0)
        m = build_model("relative", SMALL)
        runs[bf16] = train(m, chorales, cfg(max_steps=6, eval_every=6, cpu_bf16=bf16), device="cpu", progress=False)
        assert all(p.dtype == torch.float32 for p in m.parameters()) and math.isfinite(runs[bf16].final_nll)
    lo, full = runs[True].train_loss, runs[False].train_loss
    assert lo[-1] < lo[0]
    assert lo[0] != full[0] and abs(lo[0] - full[0]) < 0.02 * full[0]      # the same step, in bfloat16


def test_transpose_is_for_crops_of_the_raster_only(chorales):
    m = build_model("fill", SMALL)
    with pytest.raises(ValueError, match=r"crops of the raster only; this model's task \(fill\) has none"):
        train(m, chorales, cfg(max_steps=2, transpose=True), progress=False)


@pytest.mark.parametrize("hardware", [True, False])
def test_cpu_bf16_only_where_the_cpu_has_it(chorales, monkeypatch, hardware):
    """cpu_bf16 asks for bf16 autocast; a CPU without bf16 in hardware (where oneDNN emulates it, several times
    slower, and has no bf16 LSTM) trains in float32 instead: the same steps as cpu_bf16=False, bit for bit."""
    from musictx_lite.engine import precision as prec

    monkeypatch.setattr(prec, "cpu_has_bf16", lambda: hardware)
    autocast, scaler = prec.amp(torch.device("cpu"), cpu_bf16=True)
    with autocast():
        assert torch.is_autocast_enabled("cpu") is hardware and not scaler.is_enabled()
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == (torch.bfloat16 if hardware else torch.float32)
    assert prec.precision("cpu", True) == ("bfloat16" if hardware else "float32")
    assert prec.precision("cpu", False) == "float32"
    if not hardware:                                  # float32 instead: exactly the run without cpu_bf16
        losses = []
        for bf16 in (True, False):
            torch.manual_seed(0)
            m = build_model("lstm", SMALL)
            losses.append(train(m, chorales, cfg(max_steps=3, eval_every=3, cpu_bf16=bf16), progress=False).train_loss)
        assert losses[0] == losses[1]


@pytest.mark.parametrize("capability, expected", [((7, 5), "float16"), ((7, 0), "float16"),
                                                  ((8, 0), "bfloat16"), ((9, 0), "bfloat16")])
def test_cuda_precision_follows_the_tensor_cores(monkeypatch, capability, expected):
    """A T4 (7.5) says yes to is_bf16_supported() but emulates bf16: fp16 with a gradient scaler there; bf16
    from Ampere (8.0) on, without a scaler. ``train`` takes ``amp(device)``, which asks ``precision(device)``."""
    import warnings

    from musictx_lite.engine import precision as prec

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)    # as a T4 answers
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert prec.precision("cuda") == prec.precision("cuda:0", cpu_bf16=True) == expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # a CPU build's scaler warns that CUDA is missing
        autocast, scaler = prec.amp(torch.device("cuda"))
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled() is (expected == "float16")
    ctx = autocast()
    assert ctx.fast_dtype == {"float16": torch.float16, "bfloat16": torch.bfloat16}[expected] and ctx.device == "cuda"


@pytest.mark.parametrize("name", ["lstm", "lstm-attention", "relative"])
def test_a_t4s_fp16_trains_lstms_and_decoders(chorales, monkeypatch, name):
    """What a T4 runs: fp16 autocast and a gradient scaler between the loss and the step, LSTMs included (the
    capability faked to a T4's on whatever GPU runs the tests). The first steps of fp16 are often skipped by
    the scaler while it finds its scale; the weights must still move and every number stay finite."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU: oneDNN on a CPU has no fp16 LSTM primitive")
    from musictx_lite.engine import precision as prec

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert prec.precision("cuda") == "float16"
    torch.manual_seed(0)
    m = build_model(name, SMALL)
    before = [p.detach().clone() for p in m.parameters()]
    hist = train(m, chorales, cfg(max_steps=40, eval_every=40), device="cuda", progress=False)
    assert all(math.isfinite(x) for x in hist.train_loss + hist.valid_nll)
    assert any(not torch.equal(a, b.cpu()) for a, b in zip(before, m.parameters()))


def test_a_callback_sees_every_event_in_order(chorales, tmp_path):
    """Callbacks after the standard ones get start, eval, step and end, with the run's state; an interrupted
    run gets interrupt, and close in every case."""
    class Log:
        def __init__(self):
            self.events = []

        def start(self, run):
            self.events.append(("start", run.step))

        def eval(self, run):
            self.events.append(("eval", run.step, run.hist.valid_nll[-1]))

        def step(self, run, loss):
            self.events.append(("step", run.step))

        def interrupt(self, run):
            self.events.append(("interrupt", run.step))

        def end(self, run):
            self.events.append(("end", run.step))

        def close(self, run):
            self.events.append(("close", run.step))

    torch.manual_seed(0)
    log = Log()
    h = train(build_model("lstm", SMALL), chorales, cfg(max_steps=4, eval_every=2), progress=False, callbacks=(log,))
    assert [e[0] for e in log.events] == ["start", "step", "eval", "step", "step", "eval", "step", "close", "end"]
    assert [e[2] for e in log.events if e[0] == "eval"] == h.valid_nll

    def stop(step, loss):
        if step == 3:
            raise KeyboardInterrupt

    log = Log()
    with pytest.raises(KeyboardInterrupt):
        train(build_model("lstm", SMALL), chorales, cfg(max_steps=6, eval_every=6), progress=False,
              on_step=stop, callbacks=(log,))
    assert log.events[-2:] == [("interrupt", 3), ("close", 3)]


def test_the_loop_the_book_shows_is_short():
    """Chapter 1 displays ``train`` whole: the loop and nothing else, at most 60 lines."""
    import inspect

    lines = inspect.getsource(train).splitlines()
    assert len(lines) <= 60, len(lines)
    for part in ("lr_at(", "run.batch()", "token_nll(", ".backward()", "clip_grad_norm_", "scaler.step(opt)",
                 "run.evaluate("):
        assert any(part in line for line in lines), part


def test_throughput_leaves_the_warm_up_out(chorales):
    from musictx_lite.engine.training import History

    h = History(tokens=1000, seconds=3.0, warm_tokens=100, warm_seconds=2.0)
    assert h.tokens_per_s == pytest.approx(900.0)                  # 900 tokens in the last second
    assert History(tokens=1000, seconds=2.0).tokens_per_s == pytest.approx(500.0)   # no warm-up noted
    torch.manual_seed(0)
    h = train(build_model("lstm", SMALL), chorales, cfg(max_steps=20, eval_every=20), progress=False)
    per_step = h.tokens / len(h.step)
    assert h.warm_tokens == pytest.approx(4 * per_step, rel=0.5) and 0 < h.warm_seconds < h.seconds


def test_an_interrupted_run_says_where_it_stopped_with_or_without_a_run_directory(chorales, tmp_path, capsys):
    def stop(step, loss):
        if step == 3:
            raise KeyboardInterrupt

    for out_dir, tail in ((None, ""), (tmp_path / "run", f"; resume from {tmp_path / 'run' / 'ckpt.pt'}")):
        torch.manual_seed(0)
        with pytest.raises(KeyboardInterrupt):
            train(build_model("lstm", SMALL), chorales, cfg(), out_dir=out_dir, progress=False, on_step=stop)
        assert capsys.readouterr().out.strip().splitlines()[-1] == f"interrupted at step 3{tail}"


def test_each_evaluation_line_says_on_how_many_pieces(chorales, capsys):
    torch.manual_seed(0)
    train(build_model("lstm", SMALL), chorales, cfg(max_steps=20, eval_every=10, eval_pieces=3))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "valid NLL" in ln]
    assert len(lines) == 2
    assert lines[0].startswith("step    10") and lines[0].endswith("on 3 pieces")        # a periodic evaluation
    assert lines[1].startswith("step    20") and lines[1].endswith(f"on {len(chorales.valid)} pieces")   # the final
