"""study/recall.py: chapter 10's associative recall. The answer is set by content (the value paired with the
query key), its distance varies unless the control orders the queries, and a model is scored on the query
keys only."""
import pytest
import torch
import torch.nn as nn

from musictx_lite.models.config import ModelConfig
from musictx_lite.models.registry import build_model
from musictx_lite.study.recall import IGNORE, Recall, recall_accuracy, recall_batch, train_recall


def draw(task, B=200, seed=0):
    return recall_batch(task, B, torch.Generator().manual_seed(seed))


def test_a_batch_lists_distinct_pairs_then_queries_and_scores_the_query_keys_only():
    task = Recall(n_pairs=4, n_keys=8, n_values=6)
    x, y = draw(task)
    n = task.n_pairs
    assert x.shape == y.shape == (200, task.length) == (200, 16) and x.dtype == y.dtype == torch.long
    keys, values = x[:, 0:2 * n:2], x[:, 1:2 * n:2]                       # the list
    q_keys, q_values = x[:, 2 * n::2], x[:, 2 * n + 1::2]                 # the queries
    assert ((keys >= 0) & (keys < 8)).all() and ((q_keys >= 0) & (q_keys < 8)).all()
    assert ((values >= 8) & (values < 14)).all() and task.vocab_size == 14
    for row in range(200):                                                 # distinct keys, distinct values
        assert len(set(keys[row].tolist())) == n and len(set(values[row].tolist())) == n
    scored = y != IGNORE
    assert scored[:, 2 * n::2].all() and not scored[:, : 2 * n].any() and not scored[:, 2 * n + 1::2].any()
    assert torch.equal(y[:, 2 * n::2], q_values)                         # the target is the next token


def test_the_target_is_the_value_paired_with_the_query_key():
    task = Recall()
    x, y = draw(task, B=100, seed=3)
    n = task.n_pairs
    for row in range(100):
        listed = dict(zip(x[row, 0:2 * n:2].tolist(), x[row, 1:2 * n:2].tolist()))
        for t in range(2 * n, 4 * n, 2):
            assert x[row, t].item() in listed                              # the query is a key of the list
            assert y[row, t].item() == listed[x[row, t].item()] == x[row, t + 1].item()


def offsets(task, x):
    """How far back the value to copy sits, at every query key: (B, n_pairs)."""
    n = task.n_pairs
    keys = x[:, 0:2 * n:2]                                                 # (B, n)
    where = (x[:, 2 * n::2, None] == keys[:, None, :]).float().argmax(-1)  # (B, n): the pair asked
    t = torch.arange(2 * n, 4 * n, 2)                                      # query positions
    return t - (2 * where + 1)


def test_the_distance_to_the_answer_varies_and_the_control_fixes_it():
    free, fixed = Recall(), Recall(ordered=True)
    d = offsets(free, draw(free)[0])
    assert len(d.unique()) > 5                                             # many distances, both ways
    x, y = draw(fixed)
    assert torch.equal(x[:, 8:], x[:, :8])                                 # the list, asked again in order
    assert (offsets(fixed, x) == 7).all()                                  # 2 n - 1 back, every query
    assert torch.equal(y[:, 8::2], x[:, 1:8:2])


def test_sizes_are_checked():
    with pytest.raises(ValueError, match="n_pairs"):
        Recall(n_pairs=9, n_keys=8, n_values=16)
    with pytest.raises(ValueError, match="n_pairs"):
        Recall(n_pairs=0)


class Oracle(nn.Module):
    """Logits from the tokens: at each query key, the value after the same key in the list (``lag`` None), or
    the token ``lag`` back (a fixed mix's best copy)."""

    def __init__(self, task, lag=None):
        super().__init__()
        self.task, self.lag, self.w = task, lag, nn.Parameter(torch.zeros(()))

    def forward(self, x):
        B, T = x.shape
        n = self.task.n_pairs
        guess = torch.zeros_like(x)
        for t in range(2 * n, T, 2):
            if self.lag is not None:
                guess[:, t] = x[:, t - self.lag]
            else:
                match = (x[:, 0:2 * n:2] == x[:, t:t + 1]).float().argmax(-1)   # (B,)
                guess[:, t] = x[:, 1:2 * n:2].gather(1, match[:, None])[:, 0]
        return nn.functional.one_hot(guess, self.task.vocab_size).float() + 0 * self.w   # (B, T, V)


def test_accuracy_scores_the_query_keys():
    free, fixed = Recall(), Recall(ordered=True)
    assert recall_accuracy(Oracle(free), free, 300) == 1.0
    assert recall_accuracy(Oracle(fixed), fixed, 300) == 1.0
    assert recall_accuracy(Oracle(fixed, lag=7), fixed, 300) == 1.0        # a fixed copy solves the control
    copy = recall_accuracy(Oracle(free, lag=7), free, 1000)                # ... not the task: about 1 / 4
    assert 0.2 < copy < 0.33


def test_training_runs_on_fresh_batches_and_learns_the_control():
    task = Recall(ordered=True)
    torch.manual_seed(0)
    model = build_model("fnet-conv", ModelConfig(vocab_size=task.vocab_size, context=task.length,
                                                 n_layers=1, n_heads=2, n_embd=32))
    before = recall_accuracy(model, task, 200)
    losses = train_recall(model, task, steps=60, batch_size=32, lr=3e-3)
    assert len(losses) == 60 and all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-10:]) < 0.5 * sum(losses[:10])
    assert recall_accuracy(model, task, 200) > max(0.9, before + 0.5)
