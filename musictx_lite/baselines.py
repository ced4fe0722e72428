"""Baselines every model must beat: unigram, n-gram, and "same voice, previous step".

Notebook: notebooks/00_music_as_tokens.ipynb

All three are proper distributions over the vocabulary, fitted on the train
tokens and scored as NLL in nats per token on the same targets as the neural
models (every token after BOS).
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np

from .data import Piece
from .tokens import BOS, HOLD, MASK, PAD, VOCAB_SIZE, encode


def _seqs(pieces: list[Piece]) -> list[list[int]]:
    return [encode(p.pitches).tolist() for p in pieces]


class NGram:
    """An n-gram model with interpolated Witten-Bell smoothing.

    P_k(w | h) = (c(h, w) + u(h) P_{k-1}(w | h')) / (c(h) + u(h)), where h' drops
    the oldest token of h and u(h) counts the distinct tokens seen after h. The
    order-0 model is add-one smoothed over the whole vocabulary. n = 1 is the
    unigram model.
    """

    def __init__(self, n: int, vocab_size: int = VOCAB_SIZE):
        self.n, self.V = n, vocab_size
        self.counts: list[dict[tuple, Counter]] = [defaultdict(Counter) for _ in range(n)]

    def fit(self, pieces: list[Piece]) -> "NGram":
        for s in _seqs(pieces):
            for t in range(1, len(s)):
                for k in range(self.n):                      # context of length k
                    if t - k >= 0:
                        self.counts[k][tuple(s[t - k:t])][s[t]] += 1
        self.total0 = sum(self.counts[0][()].values())
        return self

    def prob(self, history: list[int], w: int) -> float:
        c0 = self.counts[0][()]
        p = (c0[w] + 1) / (self.total0 + self.V)
        for k in range(1, self.n):
            if len(history) < k:
                break
            nxt = self.counts[k].get(tuple(history[-k:]))
            if not nxt:
                break                                        # longer contexts are unseen too
            total, types = sum(nxt.values()), len(nxt)
            p = (nxt[w] + types * p) / (total + types)
        return p

    def sample(self, prompt: np.ndarray, n_steps: int, seed: int = 0) -> np.ndarray:
        """Continue ``prompt`` (tokens) by ``n_steps`` steps, never sampling PAD, BOS, HOLD or MASK."""
        rng = np.random.default_rng(seed)
        s = list(prompt)
        for _ in range(4 * n_steps):
            p = np.array([self.prob(s[len(s) - self.n + 1:] if self.n > 1 else [], w) for w in range(self.V)])
            p[[PAD, BOS, HOLD, MASK]] = 0
            s.append(int(rng.choice(self.V, p=p / p.sum())))
        return np.array(s)

    def nll(self, pieces: list[Piece]) -> float:
        total, count = 0.0, 0
        for s in _seqs(pieces):
            for t in range(1, len(s)):
                total -= math.log(self.prob(s[max(0, t - self.n + 1):t], s[t]))
                count += 1
        return total / count


class SameVoice:
    """P(x_t | x_{t-4}): the next token given the same voice one 16th step earlier.

    The token 4 back is the same voice's previous step: most of the time the
    voice holds that note, otherwise it usually moves by a small interval. The
    (V, V) table of counts is add-``alpha`` smoothed, ``alpha`` fitted on train;
    the first step of a piece (no token 4 back) uses the unigram.
    """

    def __init__(self, vocab_size: int = VOCAB_SIZE):
        self.V = vocab_size

    def fit(self, pieces: list[Piece]) -> "SameVoice":
        seqs = [np.asarray(s) for s in _seqs(pieces)]
        self.counts = np.zeros((self.V, self.V))
        for s in seqs:
            np.add.at(self.counts, (s[1:-4], s[5:]), 1)      # (previous, next) of the same voice
        uni = np.bincount(np.concatenate([s[1:] for s in seqs]), minlength=self.V)
        self.unigram = (uni + 1) / (uni.sum() + self.V)
        self.alpha = min((0.01, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0), key=lambda a: self._nll(seqs[::2], a, seqs[1::2]))
        return self

    def _table(self, alpha: float, seqs=None) -> np.ndarray:
        counts = self.counts
        if seqs is not None:                                  # counts from a subset, to fit alpha honestly
            counts = np.zeros((self.V, self.V))
            for s in seqs:
                np.add.at(counts, (s[1:-4], s[5:]), 1)
        return (counts + alpha * self.unigram) / (counts.sum(1, keepdims=True) + alpha)

    def _nll(self, seqs, alpha: float, fit_seqs=None) -> float:
        table = self._table(alpha, fit_seqs)
        total, count = 0.0, 0
        for s in seqs:
            y = s[1:]
            p = self.unigram[y].copy()
            p[4:] = table[y[:-4], y[4:]]
            total -= np.log(p).sum()
            count += len(y)
        return float(total / count)

    def nll(self, pieces: list[Piece]) -> float:
        return self._nll([np.asarray(s) for s in _seqs(pieces)], self.alpha)


def baseline_nlls(data, orders=range(4, 8)) -> dict[str, float]:
    """Chapter 0's bar, on ``data.valid``: unigram, the best n-gram of ``orders``, and same voice."""
    ngram = {n: NGram(n).fit(data.train).nll(data.valid) for n in orders}
    best = min(ngram, key=ngram.get)
    return {"unigram": NGram(1).fit(data.train).nll(data.valid), f"{best}-gram": ngram[best],
            "same voice": SameVoice().fit(data.train).nll(data.valid)}
