"""Chapter 0 exercises: music as tokens.

Notebook: notebooks/00_music_as_tokens.ipynb
"""
from __future__ import annotations

import numpy as np

from ..baselines import SameVoice
from ..data import Splits, load_data
from ..tokens import VOCAB_SIZE, VOICES, encode


def exercise_0_1(data: Splits | None = None) -> float:
    """Held or repeated? The share of sounding steps that re-strike the pitch the voice already holds.

    This is what the plain raster encoding cannot represent.
    """
    data = data or load_data()
    restruck = sounding = 0
    for p in data.train:
        if p.onsets is None:
            raise ValueError("this data set has no onsets (the official JSB split does not keep them)")
        prev = np.vstack([np.full((1, 4), -2), p.pitches[:-1]])
        restruck += int((p.onsets & (p.pitches == prev)).sum())
        sounding += int((p.pitches >= 0).sum())
    share = restruck / sounding
    print(f"{restruck} of {sounding} sounding steps re-strike the held pitch: {share:.2%}")
    return share


def exercise_0_2(data: Splits | None = None) -> dict[str, float]:
    """Which voice is hardest to predict? The same-voice predictor's valid NLL, voice by voice."""
    data = data or load_data()
    sv = SameVoice().fit(data.train)
    table = sv._table(sv.alpha)
    per_voice = {v: [] for v in VOICES}
    for p in data.valid:
        y = encode(p.pitches)[1:]
        nll = -np.log(np.r_[sv.unigram[y[:4]], table[y[:-4], y[4:]]])
        for v, name in enumerate(VOICES):
            per_voice[name].append(nll[v::4])
    out = {k: float(np.concatenate(v).mean()) for k, v in per_voice.items()}
    print("  ".join(f"{k}: {v:.3f}" for k, v in out.items()), "(nats/token)")
    return out


def exercise_0_3(data: Splits | None = None, alpha: float = 0.5) -> float:
    """Melody and harmony together: P(x_t | x_{t-4}, x_{t-1}), backed off to the same-voice table.

    x_{t-4} is the voice's previous step (melody), x_{t-1} the voice above it
    at this step (harmony). Returns the valid NLL; compare with ``SameVoice``.
    """
    data = data or load_data()
    sv = SameVoice().fit(data.train)
    back = sv._table(sv.alpha)                                   # (V, V): P(x_t | x_{t-4})
    counts = np.zeros((VOCAB_SIZE, VOCAB_SIZE, VOCAB_SIZE))
    for p in data.train:
        s = encode(p.pitches)
        np.add.at(counts, (s[1:-4], s[4:-1], s[5:]), 1)           # (x_{t-4}, x_{t-1}, x_t)
    total, count = 0.0, 0
    for p in data.valid:
        s = encode(p.pitches)
        y, prev4, prev1 = s[5:], s[1:-4], s[4:-1]
        c = counts[prev4, prev1]                                  # (N, V)
        prob = (c[np.arange(len(y)), y] + alpha * back[prev4, y]) / (c.sum(1) + alpha)
        total -= np.log(prob).sum() + np.log(sv.unigram[s[1:5]]).sum()
        count += len(s) - 1
    nll = total / count
    print(f"P(x_t | x_t-4, x_t-1): {nll:.3f} nats/token; same voice alone: {sv.nll(data.valid):.3f}")
    return nll


