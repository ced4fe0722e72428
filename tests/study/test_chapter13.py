"""Chapter 13's study helpers: the Table 3 rows report every seed, never the best one alone."""
from types import SimpleNamespace

import torch.nn as nn

from musictx_lite.engine.training import History
from musictx_lite.study import chapter13


def test_table3_rows_are_the_mean_over_seeds_with_their_range_not_the_best_seed():
    hist = History(step=[1, 2], train_loss=[2.0, 1.9], eval_step=[2], valid_nll=[1.8])
    runs = [{"valid": v, "model": nn.Linear(3, 2), "hist": hist} for v in (1.9, 2.0, 2.4)]
    rec = {"test_nll": 2.25, "params": 1234, "steps": 300, "data": "the sample"}
    text = chapter13.table3(rec, {"piano-local": runs}, None, SimpleNamespace(source="three pieces"))
    row = next(line for line in text.splitlines() if "this run: relative local" in line)
    assert row.split()[5] == "2.100"                      # (1.9 + 2.0 + 2.4) / 3, not the best 1.900
    assert row.endswith("[1.900, 2.400]") and "8 " in row  # nn.Linear(3, 2): 8 parameters
    assert "the mean over 3 seeds" in text
    assert max(map(len, text.splitlines())) <= 88


def test_table3_with_one_seed_says_one():
    valid = [1.5]
    hist = History(step=[1], train_loss=[2.0], eval_step=[1], valid_nll=[1.5])
    runs = [{"valid": v, "model": nn.Linear(1, 1), "hist": hist} for v in valid]
    rec = {"test_nll": 2.0, "params": 2, "steps": 1, "data": "d"}
    text = chapter13.table3(rec, {"piano-relative": runs}, None, SimpleNamespace(source="s"))
    assert "the mean over 1 seed," in text and "[1.500, 1.500]" in text
