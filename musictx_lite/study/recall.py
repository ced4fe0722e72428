"""Content recall: a task that attention solves and a mix that ignores content does not (chapter 10).

Notebook: notebooks/10_fnet.ipynb

Associative recall, one of Hyena's synthetic tasks, with several queries per sequence: a sequence lists
``n_pairs`` key-value pairs, ``k v k v ...``, then asks ``n_pairs`` queries, ``q v q v ...``, each a key of
the list (drawn with replacement) followed by its value. The model is scored at every query key: the next
token is the value that followed the same key in the list. Keys and values are drawn afresh for every
sequence, and so is the order of the queries, so the token to copy sits at a different distance in every
sequence and at every query: mixing weights fixed before the tokens are read cannot point at it, while
attention can compare the query with every earlier key. The keys of a list are distinct, and so are its
values, so a guess among the values of the list is right 1 / ``n_pairs`` of the time.

The control, ``Recall(ordered=True)``, asks the pairs in list order, each once: the value to copy sits
``2 n_pairs - 1`` tokens back at every query, a fixed offset that a fixed mix can learn.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..device import evaluating, pick_device, to_model

IGNORE = -100          # the targets that are not scored (cross_entropy's default ignore_index)


@dataclass(frozen=True)
class Recall:
    """The sizes of the task: keys are tokens 0..n_keys-1, values the n_values tokens after them."""

    n_pairs: int = 4
    n_keys: int = 8
    n_values: int = 8
    ordered: bool = False    # the control: the queries ask the pairs in list order, each once

    def __post_init__(self) -> None:
        if not 1 <= self.n_pairs <= min(self.n_keys, self.n_values):
            raise ValueError(f"n_pairs must be between 1 and min(n_keys, n_values) = "
                             f"{min(self.n_keys, self.n_values)}: the keys of a list are distinct, and so "
                             f"are its values; got {self.n_pairs}")

    @property
    def vocab_size(self) -> int:
        return self.n_keys + self.n_values

    @property
    def length(self) -> int:
        """Tokens per sequence: the list and the queries, each a key and a value."""
        return 4 * self.n_pairs


def recall_batch(task: Recall, batch_size: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y), each (B, 4 n_pairs): x is the list then the queries; y[t] is the value x[t + 1] at every
    query key t, IGNORE elsewhere."""
    B, n = batch_size, task.n_pairs
    keys = torch.rand(B, task.n_keys, generator=gen).argsort(-1)[:, :n]                     # (B, n) distinct
    values = task.n_keys + torch.rand(B, task.n_values, generator=gen).argsort(-1)[:, :n]   # (B, n) distinct
    asked = torch.randint(n, (B, n), generator=gen)                 # (B, n): which pair each query asks
    if task.ordered:                          # the value to copy sits 2 n - 1 tokens back, in every sequence
        asked = torch.arange(n).expand(B, n)
    q_keys, q_values = keys.gather(1, asked), values.gather(1, asked)                      # (B, n) each
    listed = torch.stack([keys, values], dim=-1).flatten(1)         # (B, 2n): k v k v ...
    queries = torch.stack([q_keys, q_values], dim=-1).flatten(1)    # (B, 2n): q v q v ...
    x = torch.cat([listed, queries], dim=1)                         # (B, 4n)
    y = torch.full_like(x, IGNORE)
    y[:, 2 * n::2] = q_values                                       # at each query key: its value
    return x, y


def train_recall(model: nn.Module, task: Recall, steps: int, batch_size: int = 64, lr: float = 1e-3,
                 seed: int = 0) -> list[float]:
    """Train ``model`` (tokens (B, T) -> logits (B, T, V)) on fresh batches of ``task`` with AdamW, on the
    best device (``pick_device``); the loss of each step, in nats per query."""
    model.to(pick_device()).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        x, y = (to_model(model, t) for t in recall_batch(task, batch_size, gen))
        logits = model(x)                                           # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def recall_accuracy(model: nn.Module, task: Recall, n_sequences: int = 1000, seed: int = 1) -> float:
    """The share of queries whose value is the model's most likely token, on ``n_sequences`` sequences drawn
    with their own ``seed`` (held out: training draws its own)."""
    x, y = recall_batch(task, n_sequences, torch.Generator().manual_seed(seed))
    with evaluating(model):
        guess = model(to_model(model, x)).argmax(-1).cpu()          # (B, T)
    scored = y != IGNORE
    return (guess[scored] == y[scored]).float().mean().item()
