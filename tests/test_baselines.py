import numpy as np
import pytest

from musictx_lite.baselines import NGram, SameVoice
from musictx_lite.tokens import BOS, HOLD, MASK, PAD, VOCAB_SIZE, encode


@pytest.fixture(scope="module")
def fitted(chorales):
    return {n: NGram(n).fit(chorales.train) for n in (1, 3)}, SameVoice().fit(chorales.train)


def test_ngram_is_a_distribution(fitted, chorales):
    ngrams, _ = fitted
    s = encode(chorales.valid[0].pitches).tolist()
    for n, m in ngrams.items():
        for t in (1, 2, 9, 40):
            total = sum(m.prob(s[max(0, t - n + 1):t], w) for w in range(VOCAB_SIZE))
            assert total == pytest.approx(1.0, abs=1e-9)


def test_unigram_nll_is_cross_entropy(fitted, chorales):
    ngrams, _ = fitted
    train = np.concatenate([encode(p.pitches)[1:] for p in chorales.train])
    valid = np.concatenate([encode(p.pitches)[1:] for p in chorales.valid])
    q = (np.bincount(train, minlength=VOCAB_SIZE) + 1) / (len(train) + VOCAB_SIZE)
    assert ngrams[1].nll(chorales.valid) == pytest.approx(-np.log(q[valid]).mean(), rel=1e-9)


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
    from musictx_lite.baselines import baseline_nlls

    ngrams, sv = fitted
    table = baseline_nlls(chorales, orders=(1, 3))
    assert list(table) == ["unigram", "3-gram", "same voice"]
    assert table["3-gram"] == pytest.approx(ngrams[3].nll(chorales.valid))
    assert table["same voice"] == pytest.approx(sv.nll(chorales.valid))
