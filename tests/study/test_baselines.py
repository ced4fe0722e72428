import math
from collections import Counter

import numpy as np
import pytest

from musictx_lite.io.data import Piece
from musictx_lite.io.tokens import BOS, HOLD, MASK, PAD, REST, VOCAB_SIZE, decode, encode
from musictx_lite.study.baselines import NGram, SameVoice, TwoTokens, _discounts


@pytest.fixture(scope="module")
def fitted(chorales):
    return {n: NGram(n).fit(chorales.train) for n in (1, 3)}, SameVoice().fit(chorales.train)


def _piece(tokens: str) -> Piece:
    """A piece whose tokens after BOS spell ``tokens``, one letter per token: a, b, c, ... are pitches."""
    ids = [_tok(ch) for ch in tokens]
    return Piece("toy", decode(np.array([BOS, *ids])))


def _tok(ch: str) -> int:
    return 10 + ord(ch) - ord("a")


TOY = "aaaaaabbbbbabccccbcd"      # 20 tokens after BOS, five steps of four voices


def test_ngram_is_a_distribution(fitted, chorales):
    ngrams, _ = fitted
    s = encode(chorales.valid[0].pitches).tolist()
    for n, m in ngrams.items():
        for t in (1, 2, 9, 40):
            total = sum(m.prob(s[max(0, t - n + 1):t], w) for w in range(VOCAB_SIZE))
            assert total == pytest.approx(1.0, abs=1e-9)


def test_kneser_ney_is_a_distribution_for_seen_and_unseen_histories(chorales):
    m = NGram(6).fit(chorales.train[:40])
    s = encode(chorales.valid[0].pitches).tolist()
    histories = [[BOS], s[:3], s[30:35], s[100:105],                      # seen contexts (mostly)
                 [MASK, HOLD, PAD, REST, REST], [53, 53, 53, 53, 53], [7, 50, 7, 50, 7], []]  # never seen
    for h in histories:
        p = np.array([m.prob(h, w) for w in range(VOCAB_SIZE)])
        assert p.sum() == pytest.approx(1.0, abs=1e-9), h
        assert (p > 0).all(), h                     # every token keeps some mass from the uniform base
        np.testing.assert_allclose(m.probs(h), p, rtol=1e-12, atol=0)
    assert m.prob([53, 53, 53, 53, 53], 20) == pytest.approx(m.prob([], 20))   # unseen: all mass goes down


def test_discounts_from_count_of_counts():
    # n1 = 4, n2 = 2, n3 = 1, n4 = 1: Y = 4 / (4 + 2 * 2) = 1/2,
    # D1 = 1 - 2 Y n2/n1 = 1/2, D2 = 2 - 3 Y n3/n2 = 5/4, D3 = 3 - 4 Y n4/n3 = 1
    assert _discounts(Counter({1: 4, 2: 2, 3: 1, 4: 1, 5: 1})) == pytest.approx((0.5, 1.25, 1.0))
    # n1 = 1, n2 = 1, n3 = 2: Y = 1/3, D1 = 1/3; D2 = 2 - 3 Y 2/1 = 0 and D3 = 3 - 0 are out of range: Y
    assert _discounts(Counter({1: 1, 2: 1, 3: 2})) == pytest.approx((1 / 3, 1 / 3, 1 / 3))


def test_kneser_ney_bigram_by_hand():
    """P(c | b) in a bigram model of BOS a a a a a a b b b b b a b c c c c b c d, worked out by hand."""
    m = NGram(2).fit([_piece(TOY)])
    a, b, c, d = map(_tok, "abcd")
    V = VOCAB_SIZE
    # bigram counts: (BOS a) 1, (a a) 5, (a b) 2, (b b) 4, (b a) 1, (b c) 2, (c c) 3, (c b) 1, (c d) 1
    # count-of-counts n1 = 4, n2 = 2, n3 = 1, n4 = 1 -> D1 = 1/2, D2 = 5/4, D3+ = 1 (test above)
    # after b: b 4 times, a once, c twice; a(b) = 7, N1 = N2 = N3+ = 1
    gamma_b = (0.5 + 1.25 + 1.0) / 7
    # continuation counts N1+(. w), the distinct tokens before w: a {BOS, a, b} 3, b {a, b, c} 3, c {b, c} 2,
    # d {c} 1; total 9; count-of-counts n1 = 1, n2 = 1, n3 = 2 -> D1 = D2 = D3+ = 1/3 (test above)
    gamma_0 = 4 * (1 / 3) / 9                       # four tokens seen, each discounted by 1/3
    p_c = (2 - 1 / 3) / 9 + gamma_0 / V             # the unigram level, over the uniform 1/V
    expected = (2 - 1.25) / 7 + gamma_b * p_c
    assert m.discounts == [pytest.approx((1 / 3, 1 / 3, 1 / 3)), pytest.approx((0.5, 1.25, 1.0))]
    assert m.prob([b], c) == pytest.approx(expected, rel=1e-12)
    assert m.prob([d], c) == pytest.approx(p_c, rel=1e-12)           # d is never followed: no bigram level
    assert m.prob([b], d) == pytest.approx(gamma_b * ((1 - 1 / 3) / 9 + gamma_0 / V), rel=1e-12)


def _reference_tables(seqs, n):
    """Per context length k: the adjusted counts a(h, w) of every (k + 1)-gram, straight from the definitions."""
    tables = []
    for k in range(n):
        raw = Counter(tuple(s[t - k:t + 1]) for s in seqs for t in range(max(1, k), len(s)))
        before = {}                                  # the distinct tokens seen just before each (k + 1)-gram
        for s in seqs:
            for t in range(k + 1, len(s)):
                before.setdefault(tuple(s[t - k:t + 1]), set()).add(s[t - k - 1])
        tables.append({g: c if k == n - 1 or g[0] == BOS else len(before[g]) for g, c in raw.items()})
    return tables


def _reference_prob(tables, V, history, w):
    """Interpolated modified Kneser-Ney, one context length at a time, by scanning every n-gram."""
    p = 1 / V
    for k in range(min(len(tables) - 1, len(history)) + 1):
        d = (0.0, *_discounts(Counter(tables[k].values())))
        h = tuple(history[len(history) - k:])
        here = {g[-1]: c for g, c in tables[k].items() if g[:-1] == h}
        if not here:
            break
        total = sum(here.values())
        gamma = sum(d[min(c, 3)] for c in here.values()) / total
        p = (here.get(w, 0) - d[min(here.get(w, 0), 3)]) / total + gamma * p
    return p


@pytest.mark.parametrize("n", [3, 4])
def test_kneser_ney_matches_the_definition(n, chorales):
    """Continuation counts, the BOS rule and the per-order discounts, against a slow direct computation."""
    pieces = [_piece(TOY), _piece("abcabcabdbcaddcbaaab")] + chorales.train[:2]
    seqs = [encode(p.pitches).tolist() for p in pieces]
    m, tables = NGram(n).fit(pieces), _reference_tables(seqs, n)
    s = seqs[-1]
    histories = [s[:1], s[:2], s[5:5 + n - 1], s[40:40 + n - 1], seqs[0][:n - 1], seqs[1][3:3 + n - 1],
                 [_tok("d"), _tok("c")], [BOS, _tok("b")]]
    for h in histories:
        for w in {*s[:60], _tok("a"), _tok("d"), PAD}:
            assert m.prob(h, w) == pytest.approx(_reference_prob(tables, VOCAB_SIZE, h, w), rel=1e-12)


def test_unigram_nll_is_cross_entropy(fitted, chorales):
    ngrams, _ = fitted
    train = np.concatenate([encode(p.pitches)[1:] for p in chorales.train])
    valid = np.concatenate([encode(p.pitches)[1:] for p in chorales.valid])
    q = (np.bincount(train, minlength=VOCAB_SIZE) + 1) / (len(train) + VOCAB_SIZE)
    assert ngrams[1].nll(chorales.valid) == pytest.approx(-np.log(q[valid]).mean(), rel=1e-9)


def test_nll_is_the_mean_of_minus_log_prob(chorales):
    m = NGram(4).fit(chorales.train[:20])
    s = encode(chorales.valid[0].pitches).tolist()
    expected = -np.mean([math.log(m.prob(s[max(0, t - 3):t], s[t])) for t in range(1, len(s))])
    assert m.nll(chorales.valid[:1]) == pytest.approx(expected, rel=1e-12)


def test_kneser_ney_6_gram_on_the_embedded_chorales(chorales):
    # measured: valid NLL 1.030 (interpolated Witten-Bell, the previous smoothing, gave 1.217)
    nll = NGram(6).fit(chorales.train).nll(chorales.valid)
    assert 0.98 < nll < 1.05


def test_kneser_ney_on_the_official_jsb_split(jsb_path):
    from musictx_lite import load_jsb

    jsb = load_jsb(jsb_path)
    # measured: valid NLL 0.955 for n = 7 (interpolated Witten-Bell gave 1.191)
    assert 0.92 < NGram(7).fit(jsb.train).nll(jsb.valid) < 0.97


def test_same_voice_is_a_distribution_and_beats_ngrams(fitted, chorales):
    ngrams, sv = fitted
    table = sv._table(sv.alpha)
    np.testing.assert_allclose(table.sum(1), 1.0, atol=1e-9)
    nll = sv.nll(chorales.valid)
    assert nll < ngrams[3].nll(chorales.valid) < ngrams[1].nll(chorales.valid)
    assert 0.8 < nll < 1.3 and sv.alpha > 0


def test_ngram_sample_continues_prompt(chorales):
    m = NGram(4).fit(chorales.train)
    prompt = encode(chorales.valid[0].pitches[:4])
    out = m.sample(prompt, 6, seed=0)
    assert len(out) == len(prompt) + 24
    np.testing.assert_array_equal(out[: len(prompt)], prompt)
    assert not np.isin(out[len(prompt):], [PAD, BOS, HOLD, MASK]).any()   # only pitches and rests
    np.testing.assert_array_equal(out, m.sample(prompt, 6, seed=0))


def test_baseline_nlls_is_chapter_0s_table(fitted, chorales):
    from musictx_lite.study.baselines import baseline_nlls

    ngrams, sv = fitted
    table = baseline_nlls(chorales, orders=(1, 3))
    assert list(table) == ["unigram", "3-gram", "same voice", "two tokens"]
    assert table["3-gram"] == pytest.approx(ngrams[3].nll(chorales.valid))
    assert table["same voice"] == pytest.approx(sv.nll(chorales.valid))
    assert table["two tokens"] == pytest.approx(TwoTokens().fit(chorales.train).nll(chorales.valid))


@pytest.fixture(scope="module")
def two_tokens(chorales):
    return TwoTokens().fit(chorales.train)


def test_two_tokens_matches_its_formula_token_by_token(two_tokens, chorales):
    """Every target's probability, from the counts written out by hand: (c(a, b, w) + alpha p(w | a)) /
    (c(a, b) + alpha), with p(w | a) the same-voice table and the unigram for the first step."""
    m, seqs = two_tokens, [encode(p.pitches).tolist() for p in chorales.train]
    triples, pairs = Counter(), Counter()
    for s in seqs:
        for t in range(5, len(s)):
            triples[s[t - 4], s[t - 1], s[t]] += 1
            pairs[s[t - 4], s[t - 1]] += 1
    back = m.same._table(m.same.alpha)
    for piece in chorales.valid[:3]:
        s, got = encode(piece.pitches).tolist(), m.token_nll([piece])
        want = [-math.log(m.same.unigram[w]) for w in s[1:5]]
        want += [-math.log((triples[s[t - 4], s[t - 1], s[t]] + m.alpha * back[s[t - 4], s[t]])
                           / (pairs[s[t - 4], s[t - 1]] + m.alpha)) for t in range(5, len(s))]
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_two_tokens_is_a_distribution_fitted_on_train_and_beats_the_other_baselines(two_tokens, fitted,
                                                                                      chorales):
    m, (ngrams, sv) = two_tokens, fitted
    for a, b in [(20, 20), (30, 25), (2, 2)]:                    # seen, and surely unseen, pairs
        c = m.counts[a, b]
        p = (c + m.alpha * m.back[a]) / (c.sum() + m.alpha)
        assert p.sum() == pytest.approx(1.0, abs=1e-9) and (p > 0).all()
    assert m.alpha in (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
    nll = m.nll(chorales.valid)
    assert nll < sv.nll(chorales.valid) - 0.05 and nll < ngrams[3].nll(chorales.valid)
    # the alpha chosen on train halves is no worse on valid than either end of the grid by much
    ends = [m._token_nll([np.asarray(encode(p.pitches)) for p in chorales.valid], a, m.counts,
                          m.back).mean() for a in (0.1, 100.0)]
    assert nll <= min(ends) + 0.01
