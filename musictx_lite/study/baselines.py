"""Baselines every model must beat: unigram, n-gram, "same voice, previous step" and the two-token table.

Notebook: notebooks/00_music_as_tokens.ipynb

All four are proper distributions over the vocabulary, fitted on the train
tokens and scored as NLL in nats per token on the same targets as the neural
models (every token after BOS).
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ..io.data import Piece
from ..io.tokens import BOS, HOLD, MASK, PAD, VOCAB_SIZE, encode
from ..models.tasks import sequence


def _seqs(pieces: list[Piece]) -> list[list[int]]:
    """The tokens of each piece: a chorale's raster, or a performance's events (chapter 13)."""
    return [sequence(p).tolist() for p in pieces]


def _discounts(count_of_counts: Counter) -> tuple[float, float, float]:
    """Chen and Goodman's D1, D2, D3+ from n_r, the number of n-grams whose count a is exactly r.

    Y = n1 / (n1 + 2 n2) and D_r = r - (r + 1) Y n_{r+1} / n_r. An estimate that is
    undefined or outside (0, r) (tiny corpora) falls back to Y, or to 1/2 without
    singletons or doubletons.
    """
    n = [count_of_counts.get(r, 0) for r in range(5)]
    y = n[1] / (n[1] + 2 * n[2]) if n[1] and n[2] else 0.5
    ds = []
    for r in (1, 2, 3):
        d = r - (r + 1) * y * n[r + 1] / n[r] if n[r] else y
        ds.append(d if 0 < d < r else y)
    return ds[0], ds[1], ds[2]


class NGram:
    """An n-gram model with interpolated modified Kneser-Ney smoothing.

    The context h holds the previous n - 1 tokens and h' is h without its oldest
    token. Each order discounts every count it has seen and hands the freed mass
    to the next shorter context:

        P(w | h) = (a(h, w) - D(a(h, w))) / a(h) + g(h) P(w | h'),
        g(h) = (D1 N1(h) + D2 N2(h) + D3 N3+(h)) / a(h),

    where a(h) sums a(h, w) over w, N1(h), N2(h) and N3+(h) count the tokens w with
    a(h, w) = 1, = 2 and >= 3, and D(a) is 0, D1, D2 or D3 for a = 0, 1, 2, >= 3:
    one triple per order, estimated from that order's count-of-counts
    (``_discounts``), with D_r < r so that no term goes negative.
    At the longest order a(h, w) is the count c(h, w) in train. At shorter orders
    it is the continuation count, the number of distinct tokens seen just before
    (h, w): how many contexts w follows, not how often; an n-gram that starts
    with BOS has nothing before it and keeps its count. Below the empty context
    is the uniform distribution 1/V, so every token has a nonzero probability.
    An unseen context passes all its mass down (g = 1). n = 1 is the add-one
    unigram, (c(w) + 1) / (N + V).
    """

    def __init__(self, n: int, vocab_size: int = VOCAB_SIZE):
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self.n, self.V = n, vocab_size

    def fit(self, pieces: list[Piece]) -> "NGram":
        n, seqs = self.n, _seqs(pieces)
        grams = []                                                  # grams[k]: counts of (k + 1)-token windows
        for k in range(n):
            c = Counter()
            for s in seqs:
                c.update(zip(*(s[i:] for i in range(k + 1))) if k else ((w,) for w in s[1:]))
            grams.append(c)
        if n == 1:                                                  # add-one: D = 0, g = V / (N + V)
            total = sum(grams[0].values()) + self.V
            self.discounts = [(0.0, 0.0, 0.0)]
            self.tables = [{(): (self.V / total, {g[0]: c / total for g, c in grams[0].items()})}]
            return self
        # a(h, w): the count at the longest order, continuation counts below it (raw where h starts with BOS)
        adjusted = [grams[n - 1]]
        for k in range(n - 2, -1, -1):
            cont = Counter(g[1:] for g in grams[k + 1])           # each (x, h, w) seen adds 1 to (h, w)
            cont.update({g: c for g, c in grams[k].items() if g[0] == BOS})
            adjusted.insert(0, cont)
        self.discounts: list[tuple[float, float, float]] = []
        # tables[k][h] = (g(h), {w: (a(h, w) - D) / a(h)}) for the contexts h of length k seen in train
        self.tables: list[dict[tuple, tuple[float, dict[int, float]]]] = []
        for adj in adjusted:
            d1, d2, d3 = _discounts(Counter(adj.values()))
            dd = [0.0, d1, d2] + [d3] * (max(adj.values()) - 2)  # dd[a]: the discount of a count a
            by_context: dict[tuple, dict[int, int]] = {}
            for g, a in adj.items():
                by_context.setdefault(g[:-1], {})[g[-1]] = a
            table = {}
            for h, nxt in by_context.items():
                total = sum(nxt.values())
                table[h] = (sum(map(dd.__getitem__, nxt.values())) / total,
                            {w: (a - dd[a]) / total for w, a in nxt.items()})
            self.discounts.append((d1, d2, d3))
            self.tables.append(table)
        return self

    def prob(self, history: list[int], w: int) -> float:
        """P(w | the last n - 1 tokens of ``history``)."""
        history = list(history)
        p = 1.0 / self.V
        for k in range(min(self.n - 1, len(history)) + 1):
            entry = self.tables[k].get(tuple(history[len(history) - k:]))
            if entry is None:
                break                                        # longer contexts are unseen too
            g, seen = entry
            p = seen.get(w, 0.0) + g * p
        return p

    def probs(self, history: list[int]) -> np.ndarray:
        """The whole distribution P(. | ``history``): (V,) probabilities that sum to 1."""
        history = list(history)
        p = np.full(self.V, 1.0 / self.V)
        for k in range(min(self.n - 1, len(history)) + 1):
            entry = self.tables[k].get(tuple(history[len(history) - k:]))
            if entry is None:
                break
            g, seen = entry
            p *= g
            p[list(seen)] += list(seen.values())
        return p

    def sample(self, prompt: np.ndarray, n_steps: int, seed: int = 0) -> np.ndarray:
        """Continue ``prompt`` (tokens) by ``n_steps`` steps, never sampling PAD, BOS, HOLD or MASK."""
        rng = np.random.default_rng(seed)
        s = [int(x) for x in prompt]
        for _ in range(4 * n_steps):
            p = self.probs(s[len(s) - self.n + 1:] if self.n > 1 else [])
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


class TwoTokens:
    """P(x_t | x_{t-4}, x_{t-1}): melody and harmony, backed off to the same-voice table.

    x_{t-4} is the same voice one step earlier (melody); x_{t-1} is the token just
    before, for the alto, tenor and bass the voice above at the same step
    (harmony), for the soprano the bass of the previous step. The (V, V, V) table
    of counts is smoothed towards ``SameVoice``'s P(x_t | x_{t-4}) with a
    pseudo-count ``alpha``, fitted like ``SameVoice``'s (counted on one half of
    train, scored on the other):

        p(x_t | x_{t-4}, x_{t-1}) = (c(x_{t-4}, x_{t-1}, x_t) + alpha p(x_t | x_{t-4}))
                                    / (c(x_{t-4}, x_{t-1}) + alpha).

    The first step of a piece (no token 4 back) uses the unigram, as ``SameVoice`` does.
    """

    def __init__(self, vocab_size: int = VOCAB_SIZE):
        self.V = vocab_size

    def _count(self, seqs) -> np.ndarray:
        counts = np.zeros((self.V, self.V, self.V))
        for s in seqs:
            np.add.at(counts, (s[1:-4], s[4:-1], s[5:]), 1)           # (x_{t-4}, x_{t-1}, x_t)
        return counts

    def fit(self, pieces: list[Piece]) -> "TwoTokens":
        seqs = [np.asarray(s) for s in _seqs(pieces)]
        self.same = SameVoice(self.V).fit(pieces)
        half, other = seqs[1::2], seqs[::2]
        fit_counts, fit_back = self._count(half), self.same._table(self.same.alpha, half)
        self.alpha = min((0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0),
                         key=lambda a: self._token_nll(other, a, fit_counts, fit_back).mean())
        self.counts, self.back = self._count(seqs), self.same._table(self.same.alpha)
        return self

    def _token_nll(self, seqs, alpha: float, counts: np.ndarray, back: np.ndarray) -> np.ndarray:
        """The NLL of every target token of ``seqs``, concatenated piece by piece; target i of a piece is voice
        i mod 4."""
        out = []
        for s in seqs:
            y, prev4, prev1 = s[5:], s[1:-4], s[4:-1]
            c = counts[prev4, prev1]                                  # (N, V)
            p = (c[np.arange(len(y)), y] + alpha * back[prev4, y]) / (c.sum(1) + alpha)
            out.append(np.r_[-np.log(self.same.unigram[s[1:5]]), -np.log(p)])
        return np.concatenate(out)

    def nll(self, pieces: list[Piece]) -> float:
        return float(self.token_nll(pieces).mean())

    def token_nll(self, pieces: list[Piece]) -> np.ndarray:
        """The NLL of every target token of ``pieces`` (every token after BOS), in order."""
        return self._token_nll([np.asarray(s) for s in _seqs(pieces)], self.alpha, self.counts, self.back)


class FillNeighbours:
    """Chapter 2's context baseline: the hidden note of a step from its neighbouring voices.

    For a hidden voice v, a count table of its pitch given the pitches of the
    voices next to it in the score (soprano: alto; alto: soprano and tenor;
    tenor: alto and bass; bass: tenor), smoothed towards the voice's own pitch
    distribution p(w | v) with a pseudo-count ``alpha`` fitted on train:

        p(w | v, n) = (c(v, n, w) + alpha p(w | v)) / (c(v, n) + alpha).

    Scored like the fill-in model: NLL in nats per hidden note, every step of
    every piece, each voice hidden in turn.
    """

    NEIGHBOURS = ((1,), (0, 2), (1, 3), (2,))

    def __init__(self, vocab_size: int = VOCAB_SIZE):
        self.V = vocab_size

    @staticmethod
    def _steps(pieces: list[Piece]) -> np.ndarray:
        return np.concatenate([encode(p.pitches)[1:].reshape(-1, 4) for p in pieces])   # (N, 4)

    def _counts(self, steps: np.ndarray) -> list[dict[tuple, np.ndarray]]:
        tables = []
        for v, nb in enumerate(self.NEIGHBOURS):
            t: dict[tuple, np.ndarray] = {}
            for row in steps:
                t.setdefault(tuple(row[list(nb)]), np.zeros(self.V))[row[v]] += 1
            tables.append(t)
        return tables

    def fit(self, pieces: list[Piece]) -> "FillNeighbours":
        steps = self._steps(pieces)
        self.prior = np.stack([np.bincount(steps[:, v], minlength=self.V) + 1.0 for v in range(4)])
        self.prior /= self.prior.sum(1, keepdims=True)                 # (4, V): p(w | v), add-one
        half = [self._steps(pieces[0::2]), self._steps(pieces[1::2])]
        held_out = self._counts(half[0])
        self.alpha = min((0.1, 0.3, 1.0, 3.0, 10.0, 30.0), key=lambda a: self._nll(half[1], a, held_out))
        self.tables = self._counts(steps)
        return self

    def _nll(self, steps: np.ndarray, alpha: float, tables) -> float:
        total = 0.0
        for v, nb in enumerate(self.NEIGHBOURS):
            for row in steps:
                c = tables[v].get(tuple(row[list(nb)]))
                seen, n = (c[row[v]], c.sum()) if c is not None else (0.0, 0.0)
                total -= math.log((seen + alpha * self.prior[v, row[v]]) / (n + alpha))
        return total / (4 * len(steps))

    def nll(self, pieces: list[Piece]) -> float:
        return self._nll(self._steps(pieces), self.alpha, self.tables)

    def accuracy(self, pieces: list[Piece]) -> list[float]:
        """Per voice: how often the most likely pitch is the one Bach wrote."""
        steps, out = self._steps(pieces), []
        for v, nb in enumerate(self.NEIGHBOURS):
            hits = 0
            for row in steps:
                c = self.tables[v].get(tuple(row[list(nb)]))
                p = self.prior[v] if c is None else (c + self.alpha * self.prior[v]) / (c.sum() + self.alpha)
                hits += int(np.argmax(p) == row[v])
            out.append(hits / len(steps))
        return out


def baseline_nlls(data, orders=range(4, 8)) -> dict[str, float]:
    """Chapter 0's bar, on ``data.valid``: unigram, the best n-gram of ``orders``, same voice, and the
    two-token table."""
    ngram = {n: NGram(n).fit(data.train).nll(data.valid) for n in orders}
    best = min(ngram, key=ngram.get)
    return {"unigram": NGram(1).fit(data.train).nll(data.valid), f"{best}-gram": ngram[best],
            "same voice": SameVoice().fit(data.train).nll(data.valid),
            TWO_TOKENS: TwoTokens().fit(data.train).nll(data.valid)}


TWO_TOKENS = "two tokens"                       # the two-token table's name in the baselines' table
