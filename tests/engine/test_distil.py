"""Distillation (chapter 11's recipe): the teachers' table is their whole-piece evaluation in every key,
the soft crops are the ordinary crops with target distributions, and a distilled run resumes exactly."""
import math

import pytest
import torch
import torch.nn.functional as F

from musictx_lite import ModelConfig, TrainConfig, build_model, evaluate_nll, train
from musictx_lite.engine.distil import CACHE, SoftCrops, load_teacher, piece_probs, teacher_table
from musictx_lite.io.data import Splits
from musictx_lite.io.tokens import PAD, VOCAB_SIZE, encode
from musictx_lite.models.tasks import Crops, shift_range, token_nll, transposed

SMALL = ModelConfig(n_embd=24, n_heads=2, context=32)


def cfg(**kw):
    base = dict(batch_size=4, max_steps=12, lr=3e-3, warmup_steps=3, eval_every=6, ckpt_every=4, eval_pieces=2,
                transpose=True)
    return TrainConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def small(chorales):
    return Splits(chorales.train[:6], chorales.valid[:2], chorales.test[:2], "six chorales")


@pytest.fixture(scope="module")
def teachers(small, tmp_path_factory):
    """Two briefly trained teachers, saved as runs: one relative, one with learned positions."""
    paths = []
    for seed, name in enumerate(("relative", "learned-positions")):
        torch.manual_seed(seed)
        path = tmp_path_factory.mktemp(f"teacher-{name}")
        train(build_model(name, SMALL), small, cfg(max_steps=4, keep_best=True), out_dir=path, progress=False)
        paths.append(str(path))
    return paths


def test_piece_probs_are_the_whole_piece_evaluation(small, teachers):
    """Scored at shift 0, the table's probability of each true next token gives evaluate_nll exactly."""
    model = load_teacher(teachers[0])
    total, count = 0.0, 0
    for p in small.valid:
        s = torch.as_tensor(encode(p.pitches))
        probs = piece_probs(model, s[None])[0]                          # (N - 1, V)
        assert probs.shape == (len(s) - 1, VOCAB_SIZE)
        torch.testing.assert_close(probs.sum(-1), torch.ones(len(s) - 1))
        total -= probs[torch.arange(len(s) - 1), s[1:]].log().sum().item()
        count += len(s) - 1
    assert total / count == pytest.approx(evaluate_nll(model, small.valid), rel=1e-5)


def test_teacher_table_is_the_mean_over_teachers_in_every_key(small, teachers, tmp_path):
    pieces = small.train[:2]
    both = teacher_table(teachers, pieces, say=lambda *a: None)
    each = [teacher_table([t], pieces, say=lambda *a: None) for t in teachers]
    for i, p in enumerate(pieces):
        lo, hi = shift_range(p.pitches)
        assert both[i].shape == (hi - lo + 1, len(encode(p.pitches)) - 1, VOCAB_SIZE)
        assert both[i].dtype == torch.float16
        torch.testing.assert_close(both[i].float(), (each[0][i].float() + each[1][i].float()) / 2,
                                   atol=1e-3, rtol=0)
        # row j is the piece moved by lo + j semitones, scored by the teacher
        s = transposed(torch.as_tensor(encode(p.pitches)), hi)
        torch.testing.assert_close(each[0][i][-1].float(), piece_probs(load_teacher(teachers[0]), s[None])[0],
                                   atol=1e-3, rtol=0)


def test_the_cache_is_reused_and_renewed_when_a_teacher_changes(small, teachers, tmp_path):
    import shutil

    mine = [str(tmp_path / "t0")]
    shutil.copytree(teachers[0], mine[0])
    cache = tmp_path / CACHE
    first = teacher_table(mine, small.train[:1], cache=cache, say=lambda *a: None)
    saved = torch.load(cache, weights_only=True)
    saved["tables"][0].zero_()                                  # a marker: a cache hit returns it
    torch.save(saved, cache)
    assert teacher_table(mine, small.train[:1], cache=cache, say=lambda *a: None)[0].abs().max() == 0
    shutil.copy(f"{teachers[1]}/ckpt.pt", f"{mine[0]}/ckpt.pt")   # another teacher in the same place
    renewed = teacher_table(mine, small.train[:1], cache=cache, say=lambda *a: None)
    assert not torch.equal(renewed[0], first[0]) and renewed[0].abs().max() > 0


@pytest.mark.parametrize("weight", [1.0, 0.25])
def test_soft_crops_are_the_crops_with_the_teachers_rows_as_targets(small, teachers, weight):
    """Each crop's target is ``weight`` times the teachers' row of its piece, key and position, plus the rest
    on the true token; zero past a piece's end (a piece of 4 steps, 17 tokens, is shorter than a crop)."""
    from dataclasses import replace

    first = small.train[0]
    pieces = [replace(first, pitches=first.pitches[:4]), replace(first, pitches=first.pitches[:12])]
    tables = teacher_table(teachers, pieces, say=lambda *a: None)
    draws = Crops(pieces, 32, seed=3, transpose=True).draw(16)           # the crops the next two draw
    x0, y0 = Crops(pieces, 32, seed=3, transpose=True).batch(16)
    x, y, soft = SoftCrops(pieces, 32, tables, weight, seed=3, transpose=True).batch(16)
    assert torch.equal(x, x0) and torch.equal(y, y0) and soft.shape == (16, 32, VOCAB_SIZE)
    want = torch.zeros(16, 32, VOCAB_SIZE)
    for b, (i, k, shift) in enumerate(draws):
        n = min(32, len(encode(pieces[i].pitches)) - 1 - 4 * k)         # targets inside the piece
        row = shift - shift_range(pieces[i].pitches)[0]
        want[b, :n] = weight * tables[i][row, 4 * k: 4 * k + n].float() + (1 - weight) * F.one_hot(y[b, :n], VOCAB_SIZE)
    torch.testing.assert_close(soft, want)
    real = y != PAD
    assert (~real).any() and real.any() and len({s for _, _, s in draws}) > 1      # PADs, and several keys
    torch.testing.assert_close(soft.sum(-1)[real], torch.ones(int(real.sum())), atol=2e-3, rtol=0)


def test_soft_crops_reject_a_weight_outside_0_1(small, teachers):
    tables = teacher_table(teachers[:1], small.train, say=lambda *a: None)
    with pytest.raises(ValueError, match=r"weight must be in \(0, 1\]"):
        SoftCrops(small.train, 32, tables, 0.0)
    with pytest.raises(ValueError, match="teacher_weight"):
        TrainConfig(teachers=("run",), teacher_weight=1.5)
    with pytest.raises(ValueError, match="at least one teacher"):
        teacher_table([], small.train)


def test_token_nll_with_one_hot_targets_is_the_ordinary_nll():
    torch.manual_seed(0)
    model = build_model("relative", SMALL)
    x, y = torch.randint(5, VOCAB_SIZE, (2, 2, 16)).unbind(0)
    y[1, -3:] = PAD
    soft = F.one_hot(y, VOCAB_SIZE).float() * (y != PAD)[..., None]
    torch.testing.assert_close(token_nll(model, x, y, soft), token_nll(model, x, y))


def test_a_distilled_run_learns_and_resumes_exactly(small, teachers, tmp_path):
    c = cfg(teachers=tuple(teachers), teacher_weight=0.5)
    torch.manual_seed(0)
    ref = build_model("relative", SMALL)
    h_ref = train(ref, small, c, out_dir=tmp_path / "ref", progress=False)
    assert (tmp_path / "ref" / CACHE).exists() and all(math.isfinite(v) for v in h_ref.valid_nll)
    assert h_ref.train_loss[-1] < h_ref.train_loss[0]

    def interrupt(step, loss):
        if step == 5:
            raise KeyboardInterrupt

    torch.manual_seed(0)
    with pytest.raises(KeyboardInterrupt):
        train(build_model("relative", SMALL), small, c, out_dir=tmp_path / "run", progress=False, on_step=interrupt)
    torch.manual_seed(9)
    m = build_model("relative", SMALL)
    h = train(m, small, c, out_dir=tmp_path / "run", progress=False)
    for (k, a), b in zip(ref.state_dict().items(), m.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=k)
    assert h.train_loss == h_ref.train_loss and h.valid_nll == h_ref.valid_nll
    # another teacher weight is another run: not resumed from this one
    with pytest.raises(ValueError, match="different model or config"):
        train(build_model("relative", SMALL), small, cfg(teachers=tuple(teachers), teacher_weight=0.9),
              out_dir=tmp_path / "run", progress=False)


def test_cli_train_with_a_missing_teacher_is_a_clear_error(tmp_path, capsys):
    from musictx_lite.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(["train", "--model", "relative", "--out", str(tmp_path / "r"), "--teachers", str(tmp_path / "none")])
    assert str(e.value.code).startswith("error: no checkpoint at") and "\n" not in str(e.value.code)
    assert not (tmp_path / "r" / "ckpt.pt").exists()
    with pytest.raises(SystemExit) as e:
        main(["train", "--model", "relative", "--out", str(tmp_path / "r"), "--teachers", "x", "--teacher-weight", "0"])
    assert e.value.code == 2 and "in (0, 1]" in capsys.readouterr().err


def test_ensemble_nll_of_one_teacher_is_its_nll_and_an_ensemble_is_no_worse_than_its_mean(small, teachers):
    from musictx_lite.engine.distil import ensemble_nll

    nll = [evaluate_nll(load_teacher(t), small.valid) for t in teachers]
    assert ensemble_nll(teachers[:1], small.valid) == pytest.approx(nll[0], rel=1e-5)
    assert ensemble_nll(teachers, small.valid) <= sum(nll) / 2 + 1e-6      # the log is concave


def test_one_teacher_named_alone_is_one_teacher_and_a_json_list_resumes_as_a_tuple():
    assert TrainConfig(teachers="runs/a").teachers == ("runs/a",)
    assert TrainConfig(teachers=["runs/a", "runs/b"]).teachers == ("runs/a", "runs/b")
